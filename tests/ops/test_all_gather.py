"""all-gather, all-gather-start/-done and ops.AllGather / AllGatherTuple: shape rules
(spec 002 "AllGather", shape_inference_test.cc), the shard count read off the result and
checked against the replica groups (HloVerifier), and XLA-printed texts."""

import pytest
from collective_helpers import infer, parse_entry, printed_attrs

from xlapy import ops
from xlapy.errors import InvalidArgumentError, ParseError
from xlapy.opdefs import ShapeError
from xlapy.ops.builder import XlaBuilder
from xlapy.shape import parse_shape
from xlapy.shape.layout import Layout


def ag(*shapes, result=None, dimensions=0, **attrs):
    return str(infer("all-gather", *shapes, result=result, dimensions=dimensions, **attrs))


# -- shape rule -----------------------------------------------------------------------------------


def test_spec_example_shapes():
    # Spec: f32[2] on two replicas ([1.0, 2.5], [3.0, 5.25]) gathered on dimension 0: f32[4].
    assert ag("f32[2]", replica_groups=[[0, 1]]) == "f32[4]{0}"
    assert ag("f32[2]", result="f32[4]") == "f32[4]{0}"


def test_shard_count_from_the_result_shape():
    # hlo_parser_test.cc AllGather / AllGatherWithSubgroups / AllGatherWithSubgroupsIotaList.
    assert ag("f32[128,32]{0,1}", result="f32[128,128]{0,1}", dimensions=1) == "f32[128,128]{0,1}"
    assert ag("f32[128,32]{0,1}", result="f32[128,64]{0,1}", dimensions=1,
              replica_groups=[[0, 1], [2, 3]]) == "f32[128,64]{0,1}"
    assert ag("f32[128,32]{0,1}", result="f32[128,320]{0,1}", dimensions=1,
              replica_groups="[3,10]<=[6,5]T(1,0)") == "f32[128,320]{0,1}"


def test_several_operands_give_a_tuple():
    assert ag("f32[1,8,4]", "bf16[1,5]", result="(f32[8,8,4], bf16[8,5])") == \
        "(f32[8,8,4]{2,1,0}, bf16[8,5]{1,0})"
    with pytest.raises(ShapeError, match=r"all-gather: with 2 operands the result must be a tuple "
                                         r"of 2 shapes, got f32\[8,8,4\]"):
        ag("f32[1,8,4]", "bf16[1,5]", result="f32[8,8,4]")


def test_unbounded_and_bounded_dynamic():
    # shape_inference_test.cc UnboundedAllGather: ? stays ?.
    assert ag("f32[?,10]", replica_groups=[[0, 1]]) == "f32[?,10]{1,0}"
    # A bounded dynamic dimension becomes static (InferAllGatherShape sets is_dynamic=false).
    assert ag("f32[<=4,2]", replica_groups=[[0, 1]]) == "f32[8,2]{1,0}"
    # From text: a ? or size-0 gathered dimension does not fix the shard count, and needs none.
    assert ag("f32[?,10]", result="f32[?,10]") == "f32[?,10]{1,0}"
    assert ag("f32[0,10]", result="f32[0,10]") == "f32[0,10]{1,0}"


def test_all_gather_start_and_done():
    # shape_inference_test.cc AllGatherStart / AllGatherStartMultiOperand / AllGatherDone*.
    assert str(infer("all-gather-start", "f32[1,8,4]", dimensions=0,
                     result="(f32[1,8,4], f32[8,8,4])")) == "(f32[1,8,4]{2,1,0}, f32[8,8,4]{2,1,0})"
    assert str(infer("all-gather-start", "f32[1,8,4]", "bf16[1,5]", dimensions=0,
                     replica_groups=[list(range(8))])) == (
        "((f32[1,8,4]{2,1,0}, bf16[1,5]{1,0}), (f32[8,8,4]{2,1,0}, bf16[8,5]{1,0}))")
    assert str(infer("all-gather-done", "(f32[1,8,4], f32[8,8,4])")) == "f32[8,8,4]{2,1,0}"
    assert str(infer("all-gather-done", "((f32[1,8,4], bf16[1,5]), (f32[8,8,4], bf16[8,5]))")) == \
        "(f32[8,8,4]{2,1,0}, bf16[8,5]{1,0})"
    with pytest.raises(ShapeError, match=r"all-gather-done: the operand must be the tuple result of "
                                         r"a all-gather-start, got f32\[8\]"):
        infer("all-gather-done", "f32[8]")
    with pytest.raises(ShapeError, match=r"all-gather-start: the result must be the tuple "
                                         r"\(operands, results\)"):
        infer("all-gather-start", "f32[2]", dimensions=0, result="f32[4]")


def test_uneven_replica_groups_are_rejected():
    with pytest.raises(ShapeError, match=r"all-gather: Replica groups expected to be of uniform "
                                         r"size, got groups of sizes 1, 3 in "
                                         r"replica_groups=\{\{0,1,2\},\{3\}\}"):
        ag("f32[2]", replica_groups=[[0, 1, 2], [3]])


def test_shard_count_must_match_the_groups():
    with pytest.raises(ShapeError, match=r"all-gather: the shard count is 4 \(from the result "
                                         r"shape\), but the replica groups have 2 members: "
                                         r"replica_groups=\{\{0,1\},\{2,3\}\}"):
        ag("f32[2]", result="f32[8]", replica_groups=[[0, 1], [2, 3]])
    # channel_id without use_global_device_ids: groups span partitions too, so the shard
    # count is a multiple of the group size.
    assert ag("f32[2]", result="f32[8]", replica_groups=[[0, 1]], channel_id=1) == "f32[8]{0}"
    with pytest.raises(ShapeError, match=r"the shard count is 3 \(from the result shape\), which is "
                                         r"not a multiple of the replica group size 2"):
        ag("f32[2]", result="f32[6]", replica_groups=[[0, 1]], channel_id=1)


def test_shard_count_needs_the_result_or_groups():
    with pytest.raises(ShapeError, match=r"all-gather: cannot infer the shard count: give the "
                                         r"result shape, or replica groups"):
        ag("f32[2]")


def test_result_not_a_multiple_of_the_operand():
    # CeilOfRatio(10, 4) = 3 shards: 12 != 10, as XLA's verifier finds.
    with pytest.raises(ParseError, match=r"all-gather: the given shape f32\[10\]\{0\} is not "
                                         r"compatible with the inferred shape f32\[12\]\{0\}"):
        parse_entry("  p = f32[4]{0} parameter(0)\n"
                    "  ROOT ag = f32[10]{0} all-gather(p), replica_groups={}, dimensions={0}")


def test_dimension_and_operand_errors():
    with pytest.raises(ShapeError, match=r"all-gather: all_gather_dimension 2 is out of bounds for "
                                         r"operand 0 f32\[2,3\]\{1,0\} of rank 2"):
        ag("f32[2,3]", dimensions=2, replica_groups=[[0, 1]])
    with pytest.raises(ShapeError, match=r"Expected array argument for operand of all-gather, but "
                                         r"got \(f32\[2\]\{0\}\)"):
        ag("(f32[2])", replica_groups=[[0, 1]])
    with pytest.raises(ShapeError, match="expects at least 1 operands, got 0"):
        ag(replica_groups=[[0, 1]])


# -- builder -------------------------------------------------------------------------------------


def test_builder_all_gather():
    b = XlaBuilder("ag")
    x = ops.Parameter(b, 0, parse_shape("f32[2,3]"), "x")
    y = ops.AllGather(x, 1, 4, [[0, 1, 2, 3]], channel_id=2, use_global_device_ids=True)
    comp = b.build(y)
    assert str(comp.program_shape()) == "(x: f32[2,3]) -> f32[2,12]"
    assert printed_attrs(y.instruction) == ("channel_id=2, replica_groups={{0,1,2,3}}, "
                                            "dimensions={1}, use_global_device_ids=true")


def test_builder_all_gather_layout_and_tuples():
    b = XlaBuilder("ag")
    x = ops.Parameter(b, 0, parse_shape("f32[2,3]"), "x")
    y = ops.AllGather(x, 0, 2, layout=Layout((0, 1)))
    assert str(y.shape) == "f32[4,3]{0,1}"
    assert printed_attrs(y.instruction) == "replica_groups={}, constrain_layout=true, dimensions={0}"
    t = ops.Parameter(b, 1, parse_shape("(f32[2], s32[5])"), "t")
    z = ops.AllGather(t, 0, 3)
    assert str(z.shape) == "(f32[6]{0}, s32[15]{0})"
    assert [o.opcode for o in z.instruction.operands] == ["get-tuple-element"] * 2
    w = ops.AllGatherTuple([x, x], 1, 2)
    assert str(w.shape) == "(f32[2,6]{1,0}, f32[2,6]{1,0})"


def test_builder_all_gather_errors():
    b = XlaBuilder("ag")
    x = ops.Parameter(b, 0, parse_shape("f32[2]"), "x")
    with pytest.raises(ShapeError, match="all-gather: shard_count must be > 0, got 0"):
        ops.AllGather(x, 0, 0)
    with pytest.raises(ShapeError, match="all-gather: all_gather_dimension 1 is out of bounds"):
        ops.AllGather(x, 1, 2)
    with pytest.raises(ShapeError, match=r"the shard count is 2 \(from the result shape\), but "
                                         r"the replica groups have 3 members"):
        ops.AllGather(x, 0, 2, [[0, 1, 2]])
    with pytest.raises(InvalidArgumentError, match="a layout applies to an array result"):
        ops.AllGather(ops.Tuple(b, [x, x]), 0, 2, layout=Layout((0,)))
    with pytest.raises(InvalidArgumentError, match="AllGather: replica_groups: .*iota size 3"):
        ops.AllGather(x, 0, 2, "[1,2]<=[3]")


# -- text ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("result, attrs", [
    ("f32[128,128]{0,1}", "replica_groups={}, dimensions={1}"),
    ("f32[128,128]{0,1}", "replica_groups={}, constrain_layout=true, dimensions={1}"),
    ("f32[128,64]{0,1}", "replica_groups={{0,1},{2,3}}, dimensions={1}"),
    ("f32[128,320]{0,1}", "replica_groups=[3,10]<=[6,5]T(1,0), dimensions={1}"),
    ("f32[128,64]{0,1}", ("channel_id=3, replica_groups={{0,1},{2,3}}, dimensions={1}, "
                          "use_global_device_ids=true")),
])
def test_xla_texts_print_back(result, attrs):
    instrs = parse_entry(f"  input = f32[128,32]{{0,1}} parameter(0)\n"
                         f"  ROOT ag = {result} all-gather(input), {attrs}")
    assert printed_attrs(instrs["ag"]) == attrs


def test_text_errors():
    with pytest.raises(ParseError, match=r"expected exactly one dimension"):
        parse_entry("  input = f32[128,32]{0,1} parameter(0)\n"
                    "  ROOT ag = f32[128,128]{0,1} all-gather(input), replica_groups={}, dimensions={}")
    with pytest.raises(ParseError, match="does not match the tile assignment dimensions product"):
        parse_entry("  p = f32[8] parameter(0)\n"
                    "  ROOT ag = f32[16] all-gather(p), dimensions={0}, replica_groups=[2,2]<=[16]")
    with pytest.raises(ParseError, match="missing required attribute 'dimensions'"):
        parse_entry("  p = f32[8] parameter(0)\n"
                    "  ROOT ag = f32[16] all-gather(p), replica_groups={}")

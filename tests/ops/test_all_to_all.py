"""all-to-all (array and tuple forms), ragged-all-to-all and ops.AllToAll / AllToAllTuple /
RaggedAllToAll: shape rules (spec 002 "AllToAll", shape_inference_test.cc), the HLO XLA's
builder emits (XlaBuilder::AllToAllArray, AllToAllTuple), and XLA-printed texts."""

import pytest
from collective_helpers import emitted, infer, parse_entry, printed_attrs

from xlapy import ops
from xlapy.errors import InvalidArgumentError, ParseError
from xlapy.opdefs import ShapeError
from xlapy.opdefs.collectives import infer_all_to_all_shape
from xlapy.opdefs.registry import OpCall
from xlapy.ops.builder import XlaBuilder
from xlapy.shape import parse_shape
from xlapy.shape.layout import Layout


def a2a_shape(shape, split, concat, count):
    """ShapeInference::InferAllToAllShape (what the builder's array AllToAll produces)."""
    call = OpCall("all-to-all", (parse_shape(shape),), None)
    return str(infer_all_to_all_shape(call, parse_shape(shape), split, concat, count))


# -- the split/concat shape function ---------------------------------------------------------------


def test_all_to_all_shape_function():
    # Spec: f32[4,16], split_dimension=1, concat_dimension=0, split_count=4 -> f32[16,4].
    assert a2a_shape("f32[4,16]", 1, 0, 4) == "f32[16,4]{1,0}"
    assert a2a_shape("f32[8,4]", 0, 0, 4) == "f32[8,4]{1,0}"
    # shape_inference_test.cc UnboundedAllToAll.
    assert a2a_shape("f32[?,10]", 0, 0, 3) == "f32[?,10]{1,0}"


@pytest.mark.parametrize("args, message", [
    (("f32[4,16]", 2, 0, 4), (r"all-to-all: AllToAll split_dimension 2 is out-of-bounds in shape "
                             r"f32\[4,16\]\{1,0\}.")),
    (("f32[4,16]", 1, -1, 4), r"AllToAll concat_dimension -1 is out-of-bounds"),
    (("f32[4,15]", 1, 0, 4), "AllToAll split dimension size 15 must be dividable by split_count 4."),
    (("f32[<=4,16]", 1, 0, 4), r"AllToAll does not support bounded dynamic shapes, got f32\[<=4,16\]"),
    (("f32[4,16]", 1, 0, 0), "split_count must be > 0, got 0"),
])
def test_all_to_all_shape_function_errors(args, message):
    with pytest.raises(ShapeError, match=message):
        a2a_shape(*args)


# -- HLO all-to-all -------------------------------------------------------------------------------


def test_array_form_keeps_the_shape():
    # hlo_parser_test.cc AllToAllWithSubgroupsIotaList: dimensions={0}, same shape.
    assert str(infer("all-to-all", "f32[128,32]{0,1}", dimensions=0,
                     replica_groups="[4,8]<=[4,8]T(1,0)")) == "f32[128,32]{0,1}"
    assert str(infer("all-to-all", "f32[8,4]", dimensions=1)) == "f32[8,4]{1,0}"


def test_array_form_errors():
    with pytest.raises(ShapeError, match="all-to-all: AllToAll split dimension size 6 must be "
                                         "dividable by split_count 4."):
        infer("all-to-all", "f32[6]", dimensions=0, replica_groups=[[0, 1, 2, 3]])
    with pytest.raises(ShapeError, match=r"all-to-all: the array form \(dimensions=\{0\}\) takes "
                                         r"exactly one operand, got 2"):
        infer("all-to-all", "f32[4]", "f32[4]", dimensions=0)
    with pytest.raises(ShapeError, match=r"AllToAll split_dimension 1 is out-of-bounds in shape "
                                         r"f32\[4\]\{0\}"):
        infer("all-to-all", "f32[4]", dimensions=1)
    with pytest.raises(ShapeError, match="Replica groups expected to be of uniform size"):
        infer("all-to-all", "f32[4]", dimensions=0, replica_groups=[[0, 1], [2]])


def test_tuple_form():
    # hlo_parser_test.cc AllToAll / AllToAllWithSubgroups.
    assert str(infer("all-to-all", "f32[128,32]{0,1}")) == "(f32[128,32]{0,1})"
    assert str(infer("all-to-all", "f32[128,32]{0,1}", "f32[128,32]{0,1}",
                     replica_groups=[[1, 2], [3, 0]])) == "(f32[128,32]{0,1}, f32[128,32]{0,1})"


def test_tuple_form_errors():
    with pytest.raises(ShapeError, match=r"HLO all-to-all has operands with different shapes: the "
                                         r"0th operand shape f32\[4\]\{0\}, but the 1th operand has "
                                         r"shape f32\[5\]\{0\}."):
        infer("all-to-all", "f32[4]", "f32[5]")
    # Layouts count (memory spaces do not), as Shape::Equal().IgnoreMemorySpaceInLayout().
    with pytest.raises(ShapeError, match="operands with different shapes"):
        infer("all-to-all", "f32[4,2]{0,1}", "f32[4,2]{1,0}")
    assert str(infer("all-to-all", "f32[4]{0:S(1)}", "f32[4]{0}")) == "(f32[4]{0:S(1)}, f32[4]{0})"
    # shape_inference_test.cc UnboundedAllToAllTupleUnsupported.
    with pytest.raises(ShapeError, match="AllToAllTuple does not support unbounded dynamic shapes"):
        infer("all-to-all", "f32[?,10]", "f32[?,10]")
    with pytest.raises(ShapeError, match=r"the tuple form takes one operand per member of a replica "
                                         r"group: 2 members in replica_groups=\{\{0,1\}\}, got 3"):
        infer("all-to-all", "f32[4]", "f32[4]", "f32[4]", replica_groups=[[0, 1]])


# -- builder ---------------------------------------------------------------------------------------


def test_spec_example_builds_xlas_array_all_to_all():
    # Spec 002: XlaBuilder b("alltoall"); x = f32[4,16]; AllToAll(x, 1, 0, 4) -> f32[16,4].
    b = XlaBuilder("alltoall")
    x = ops.Parameter(b, 0, parse_shape("f32[4,16]"), "x")
    y = ops.AllToAll(x, 1, 0, 4)
    comp = b.build(y)
    assert str(comp.program_shape()) == "(x: f32[4,16]) -> f32[16,4]"
    # XlaBuilder::AllToAllArray: all-to-all (same shape, split dimension, a group of
    # split_count when none given), reshape, transpose, reshape.
    assert emitted(comp) == [("all-to-all", "f32[4,16]{1,0}"), ("reshape", "f32[4,4,4]{2,1,0}"),
                             ("transpose", "f32[4,4,4]{2,0,1}"), ("reshape", "f32[16,4]{1,0}")]
    a2a, _, transpose, _ = [i for i in comp.computation.instructions if i.opcode != "parameter"]
    assert printed_attrs(a2a) == "replica_groups={{0,1,2,3}}, dimensions={1}"
    assert transpose.attrs["dimensions"] == (1, 0, 2)


def test_builder_array_all_to_all_variants():
    b = XlaBuilder("a2a")
    x = ops.Parameter(b, 0, parse_shape("f32[6,2]"), "x")
    same = ops.AllToAll(x, 0, 0, 3, [[2, 1, 0]], channel_id=4)
    assert str(same.shape) == "f32[6,2]{1,0}" and same.instruction.opcode == "all-to-all"
    assert printed_attrs(same.instruction) == "channel_id=4, replica_groups={{2,1,0}}, dimensions={0}"
    moved = ops.AllToAll(x, 0, 1, 3)
    assert str(moved.shape) == "f32[2,6]{1,0}"
    with pytest.raises(ShapeError, match="AllToAll split dimension size 6 must be dividable by "
                                         "split_count 4"):
        ops.AllToAll(x, 0, 1, 4)
    with pytest.raises(ShapeError, match=r"all-to-all: Replica groups expected to be of uniform "
                                         r"size, got groups of sizes 1, 3"):
        ops.AllToAll(x, 0, 1, 3, [[0, 1, 2], [3]])


def test_builder_all_to_all_with_layout_uses_the_tuple_form():
    b = XlaBuilder("a2a")
    x = ops.Parameter(b, 0, parse_shape("f32[4,6]"), "x")
    y = ops.AllToAll(x, 1, 0, 2, layout=Layout((0, 1)))
    comp = b.build(y)
    assert str(comp.program_shape()) == "(x: f32[4,6]) -> f32[8,3]"
    ops_emitted = [op for op, _ in emitted(comp)]
    assert ops_emitted == ["slice", "slice", "all-to-all", "get-tuple-element",
                           "get-tuple-element", "concatenate"]
    a2a = next(i for i in comp.computation.instructions if i.opcode == "all-to-all")
    assert str(a2a.shape) == "(f32[4,3]{0,1}, f32[4,3]{0,1})"
    assert printed_attrs(a2a) == "replica_groups={}, constrain_layout=true"


def test_all_to_all_tuple_overloads():
    b = XlaBuilder("a2at")
    x = ops.Parameter(b, 0, parse_shape("f32[4]"), "x")
    y = ops.Parameter(b, 1, parse_shape("f32[4]"), "y")
    t = ops.AllToAllTuple([x, y], [[0, 1]])
    assert str(t.shape) == "(f32[4]{0}, f32[4]{0})"
    assert printed_attrs(t.instruction) == "replica_groups={{0,1}}"
    s = ops.AllToAllTuple(x, 0, 0, 2)
    assert str(s.shape) == "f32[4]{0}" and s.instruction.opcode == "concatenate"
    with pytest.raises(InvalidArgumentError, match=r"Provided layout must be compatible with the "
                                                   r"operands' shape. The layout is \{1,0\}, but "
                                                   r"operand 0 has shape f32\[4\]\{0\}."):
        ops.AllToAllTuple([x, y], layout=Layout((1, 0)))
    z = ops.Parameter(b, 2, parse_shape("f32[5]"), "z")
    with pytest.raises(ShapeError, match="operands with different shapes"):
        ops.AllToAllTuple([x, z])


# -- ragged-all-to-all ------------------------------------------------------------------------------

RAGGED = ["bf16[1024,256]", "bf16[1024,256]", "s32[8]", "s32[8]", "s32[8]", "s32[8]"]


def test_ragged_all_to_all_rule():
    assert str(infer("ragged-all-to-all", *RAGGED, replica_groups=[list(range(8))])) == \
        "bf16[1024,256]{1,0}"
    # The result is the output's shape, not the input's.
    shapes = ["f32[16,4]", "f32[32,4]", "s64[2,4]", "s64[2,4]", "s64[2,4]", "s64[2,4]"]
    assert str(infer("ragged-all-to-all", *shapes)) == "f32[32,4]{1,0}"


def test_ragged_all_to_all_errors():
    bad_rank = RAGGED[:2] + ["s32[2,2,2]"] + RAGGED[3:]
    with pytest.raises(ShapeError, match=r"ragged-all-to-all: RaggedAllToAll operand 2 "
                                         r"\(input_offsets\) must be rank 1 or 2"):
        infer("ragged-all-to-all", *bad_rank)
    mismatch = RAGGED[:5] + ["s32[4]"]
    with pytest.raises(ShapeError, match=r"RaggedAllToAll operands have different shapes \(4, 5\)"):
        infer("ragged-all-to-all", *mismatch)
    with pytest.raises(ShapeError, match="expects 6 operands, got 5"):
        infer("ragged-all-to-all", *RAGGED[:5])
    with pytest.raises(ShapeError, match="Expected array argument for operand 1 of ragged-all-to-all"):
        infer("ragged-all-to-all", RAGGED[0], "(f32[2])", *RAGGED[2:])


def test_builder_ragged_all_to_all_orders_operands_for_hlo():
    b = XlaBuilder("ra2a")
    names = ["input", "input_offsets", "send_sizes", "output", "output_offsets", "recv_sizes"]
    shapes = ["bf16[16,8]", "s32[4]", "s32[4]", "bf16[32,8]", "s32[4]", "s32[4]"]
    args = [ops.Parameter(b, i, parse_shape(s), n) for i, (n, s) in enumerate(zip(names, shapes))]
    r = ops.RaggedAllToAll(*args, replica_groups=[[0, 1, 2, 3]])
    assert str(r.shape) == "bf16[32,8]{1,0}"
    assert [o.name for o in r.instruction.operands] == [
        "input", "output", "input_offsets", "send_sizes", "output_offsets", "recv_sizes"]


@pytest.mark.parametrize("groups", ["{{0,1,2,3,4,5,6,7}}", "[2,4]<=[4,2]T(1,0)", "{}"])
def test_ragged_xla_texts_print_back(groups):
    # hlo_parser_test.cc RaggedAllToAllWithReplicaGroups / ...IotaList / ...EmptyReplicaGroups.
    body = "\n".join(f"  {n} = {s}{{{'1,0' if s.startswith('bf16') else '0'}}} parameter({i})"
                     for i, (n, s) in enumerate(zip(
                         ["input", "output", "input_offsets", "send_sizes", "output_offsets",
                          "recv_sizes"], RAGGED)))
    body += ("\n  ROOT ra2a = bf16[1024,256]{1,0} ragged-all-to-all(input, output, input_offsets, "
             f"send_sizes, output_offsets, recv_sizes), replica_groups={groups}")
    assert printed_attrs(parse_entry(body)["ra2a"]) == f"replica_groups={groups}"


# -- text ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("operands, result, attrs", [
    ("input", "(f32[128,32]{0,1})", "replica_groups={}"),
    ("input, input", "(f32[128,32]{0,1}, f32[128,32]{0,1})", "replica_groups={{1,2},{3,0}}"),
    ("input", "f32[128,32]{0,1}", "replica_groups=[4,8]<=[4,8]T(1,0), dimensions={0}"),
    ("input", "f32[128,32]{0,1}", "channel_id=1, replica_groups={{0,1,2,3,4,5,6,7}}, dimensions={0}"),
])
def test_xla_texts_print_back(operands, result, attrs):
    instrs = parse_entry(f"  input = f32[128,32]{{0,1}} parameter(0)\n"
                         f"  ROOT a2a = {result} all-to-all({operands}), {attrs}")
    assert printed_attrs(instrs["a2a"]) == attrs


def test_text_with_two_dimensions_is_rejected():
    with pytest.raises(ParseError, match=r"expected exactly one dimension, e.g. dimensions=\{0\}, "
                                         r"got \{0,1\}"):
        parse_entry("  input = f32[8,8] parameter(0)\n"
                    "  ROOT a2a = f32[8,8] all-to-all(input), replica_groups={}, dimensions={0,1}")

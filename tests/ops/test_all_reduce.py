"""all-reduce, all-reduce-start/-done, ops.AllReduce / AllReduceTuple / CrossReplicaSum:
shape rules (shape_inference_test.cc, spec 002 "AllReduce"), the verifier's replica-group
checks, the reducer, the builder's compositions, and XLA-printed texts."""

import pytest
from collective_helpers import infer, parse_entry, printed_attrs, reducer

from xlapy import ops
from xlapy.errors import InvalidArgumentError, ParseError
from xlapy.opdefs import ShapeError
from xlapy.ops.builder import XlaBuilder
from xlapy.shape import parse_shape

ADD = reducer().computation


def ar(*shapes, **attrs):
    attrs.setdefault("to_apply", ADD)
    return str(infer("all-reduce", *shapes, **attrs))


# -- shape rule -----------------------------------------------------------------------------------


def test_spec_example_shapes():
    # Spec: f32[2] operands ([1.0, 2.5] and [3.0, 5.25]) on two replicas: f32[2] results.
    assert ar("f32[2]", replica_groups=[[0, 1]]) == "f32[2]{0}"
    # A tuple of arrays reduces each: one operand per element, a tuple result.
    assert ar("f32[2]", "f32[3,4]") == "(f32[2]{0}, f32[3,4]{1,0})"


def test_unbounded_all_reduce():
    # shape_inference_test.cc UnboundedAllReduce.
    assert ar("f32[?,10]") == "f32[?,10]{1,0}"


def test_non_uniform_groups_are_allowed_for_all_reduce():
    # CheckReplicaGroups(..., uniform_replica_group_size=false) for all-reduce.
    assert ar("f32[8]", replica_groups=[[0, 1, 2], [3]]) == "f32[8]{0}"


def test_operand_must_be_an_array():
    with pytest.raises(ShapeError, match=r"all-reduce: Expected array argument for operand of "
                                         r"cross replica sum, but got \(f32\[2\]\{0\}\)"):
        ar("(f32[2])")


@pytest.mark.parametrize("groups, message", [
    ([[0, 1], []], r"Instruction cannot have an empty replica group: replica_groups=\{\{0,1\},\{\}\}"),
    ([[0, 2]], r"Replica 2 is out of range \(should be in \[0, 2\) range\) in replica_groups=\{\{0,2\}\}"),
    ([[0, 1], [1, 2]], r"Replica 1 is repeated in replica_groups=\{\{0,1\},\{1,2\}\}"),
])
def test_replica_group_errors(groups, message):
    with pytest.raises(ShapeError, match="all-reduce: " + message):
        ar("f32[8]", replica_groups=groups)


def test_group_mode_errors():
    with pytest.raises(ShapeError, match="all-reduce: Cannot have use_global_device_ids=true "
                                         "without channel_id"):
        ar("f32[8]", use_global_device_ids=True, replica_groups=[[0, 1]])
    with pytest.raises(ShapeError, match="all-reduce: Replica groups must be specified in "
                                         "flattened-id mode"):
        ar("f32[8]", use_global_device_ids=True, channel_id=1)
    assert ar("f32[8]", use_global_device_ids=True, channel_id=1, replica_groups=[[0, 1]]) == "f32[8]{0}"
    with pytest.raises(ShapeError, match="all-reduce: All reduce channel id must be greater than 0, "
                                         "got channel_id=0"):
        ar("f32[8]", channel_id=0)


def test_reducer_checks():
    # A wider reducer type is fine (StableHLO's is_promotable): bf16 summed in f32.
    assert ar("bf16[4]") == "bf16[4]{0}"
    with pytest.raises(ShapeError, match=r"all-reduce: operand 0 f32\[4\]\{0\} cannot be reduced "
                                         r"by %add of type .* F32 does not promote to BF16"):
        ar("f32[4]", to_apply=reducer("bf16").computation)
    with pytest.raises(ShapeError, match="does not promote to F32"):
        ar("s32[4]")
    vector = XlaBuilder("vadd")
    x = ops.Parameter(vector, 0, parse_shape("f32[2]"), "x")
    y = ops.Parameter(vector, 1, parse_shape("f32[2]"), "y")
    vadd = vector.build(ops.Add(x, y)).computation
    with pytest.raises(ShapeError, match=r"the reduction computation %vadd must take two scalars "
                                         r"of one type and return a scalar of that type, got "
                                         r"\(x: f32\[2\], y: f32\[2\]\) -> f32\[2\]"):
        ar("f32[2]", to_apply=vadd)


def test_all_reduce_start_and_done():
    assert str(infer("all-reduce-start", "f32[8]", to_apply=ADD)) == "f32[8]{0}"
    assert str(infer("all-reduce-start", "f32[8]", "f32[]", to_apply=ADD)) == "(f32[8]{0}, f32[])"
    assert str(infer("all-reduce-done", "f32[8]")) == "f32[8]{0}"


def test_missing_to_apply():
    with pytest.raises(InvalidArgumentError, match="all-reduce: missing required attribute 'to_apply'"):
        infer("all-reduce", "f32[8]")


# -- builder -------------------------------------------------------------------------------------


def test_builder_all_reduce():
    b = XlaBuilder("ar")
    x = ops.Parameter(b, 0, parse_shape("f32[2]"), "input")
    y = ops.AllReduce(x, reducer(), [[0, 1]], channel_id=ops.ChannelHandle(5),
                      use_global_device_ids=True)
    comp = b.build(y)
    assert str(comp.program_shape()) == "(input: f32[2]) -> f32[2]"
    instr = y.instruction
    assert instr.opcode == "all-reduce"
    assert printed_attrs(instr) == ("channel_id=5, replica_groups={{0,1}}, "
                                    "use_global_device_ids=true, to_apply=%add")
    # The reducer is part of the built module.
    assert [c.name for c in comp.module.computations] == ["add", "ar"]


def test_builder_all_reduce_tuple_operand():
    b = XlaBuilder("ar")
    x = ops.Parameter(b, 0, parse_shape("(f32[2], f32[3])"), "x")
    y = ops.AllReduce(x, reducer())
    assert str(y.shape) == "(f32[2]{0}, f32[3]{0})"
    assert [i.opcode for i in b.build(y).computation.instructions] == [
        "parameter", "get-tuple-element", "get-tuple-element", "all-reduce"]


def test_builder_all_reduce_one_element_tuple_is_rewrapped():
    b = XlaBuilder("ar")
    x = ops.Parameter(b, 0, parse_shape("(f32[2])"), "x")
    y = ops.AllReduce(x, reducer())
    assert str(y.shape) == "(f32[2]{0})"
    assert [i.opcode for i in b.build(y).computation.instructions] == [
        "parameter", "get-tuple-element", "all-reduce", "tuple"]


def test_builder_all_reduce_errors():
    b = XlaBuilder("ar")
    x = ops.Parameter(b, 0, parse_shape("(f32[2], s32[2])"), "x")
    with pytest.raises(InvalidArgumentError, match="All the shapes of a tuple input of AllReduce "
                                                   "must have the same element type"):
        ops.AllReduce(x, reducer())
    e = ops.Parameter(b, 1, parse_shape("()"), "e")
    with pytest.raises(InvalidArgumentError, match="0 element tuple AllReduce is not supported"):
        ops.AllReduce(e, reducer())
    z = ops.Parameter(b, 2, parse_shape("f32[2]"), "z")
    with pytest.raises(ShapeError, match="Replica groups expected|Replica 3 is out of range"):
        ops.AllReduce(z, reducer(), [[0, 3]])


def test_builder_shape_with_layout_constrains_the_layout():
    b = XlaBuilder("ar")
    x = ops.Parameter(b, 0, parse_shape("f32[4,8]"), "x")
    y = ops.AllReduce(x, reducer(), shape_with_layout=parse_shape("f32[4,8]{0,1}"))
    assert str(y.shape) == "f32[4,8]{0,1}"
    assert printed_attrs(y.instruction) == "replica_groups={}, constrain_layout=true, to_apply=%add"


def test_all_reduce_tuple():
    b = XlaBuilder("art")
    x = ops.Parameter(b, 0, parse_shape("f32[2]"), "x")
    y = ops.Parameter(b, 1, parse_shape("f32[3,3]"), "y")
    t = ops.AllReduceTuple([x, y], reducer(), [[0], [1]])
    assert str(t.shape) == "(f32[2]{0}, f32[3,3]{1,0})"
    assert t.instruction.opcode == "all-reduce" and len(t.instruction.operands) == 2


def test_cross_replica_sum_builds_an_add_reducer():
    b = XlaBuilder("crs")
    x = ops.Parameter(b, 0, parse_shape("f32[2]"), "input")
    y = ops.CrossReplicaSum(x, [[0, 1]])
    comp = b.build(y)
    reducer_comp = y.instruction.attrs["to_apply"]
    assert [i.opcode for i in reducer_comp.instructions] == ["parameter", "parameter", "add"]
    assert str(reducer_comp.program_shape()) == "(x: f32[], y: f32[]) -> f32[]"
    assert str(comp.program_shape()) == "(input: f32[2]) -> f32[2]"
    p = ops.Parameter(b := XlaBuilder("crs_pred"), 0, parse_shape("pred[4]"), "p")
    q = ops.CrossReplicaSum(p)
    assert [i.opcode for i in q.instruction.attrs["to_apply"].instructions][-1] == "or"
    assert b.build(q).program_shape().result == parse_shape("pred[4]")


# -- text ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("line, attrs", [
    ("ROOT crs = f32[8]{0} all-reduce(input), replica_groups={}, to_apply=add",
     "replica_groups={}, to_apply=%add"),
    ("ROOT crs = f32[8]{0} all-reduce(input), replica_groups={}, constrain_layout=true, to_apply=add",
     "replica_groups={}, constrain_layout=true, to_apply=%add"),
    ("ROOT crs = f32[8]{0} all-reduce(input), channel_id=1, replica_groups={{0}}, to_apply=add",
     "channel_id=1, replica_groups={{0}}, to_apply=%add"),
    ("ROOT crs = f32[8]{0} all-reduce(input), channel_id=1, replica_groups={{0}}, "
     + "use_global_device_ids=true, to_apply=add",
     "channel_id=1, replica_groups={{0}}, use_global_device_ids=true, to_apply=%add"),
    ("ROOT crs = f32[8]{0} all-reduce(input), replica_groups=[2,10]<=[20], to_apply=add",
     "replica_groups=[2,10]<=[20], to_apply=%add"),
    ("ROOT crs = f32[8]{0} all-reduce-start(input), replica_groups={}, to_apply=add",
     "replica_groups={}, to_apply=%add"),
])
def test_xla_texts_print_back(line, attrs):
    instrs = parse_entry("  input = f32[8]{0} parameter(0)\n  " + line)
    assert printed_attrs(instrs["crs"]) == attrs


def test_text_with_a_wrong_result_shape():
    with pytest.raises(ParseError, match="all-reduce: the given shape f32\\[4\\]\\{0\\} is not "
                                         "compatible with the inferred shape f32\\[8\\]"):
        parse_entry("  input = f32[8]{0} parameter(0)\n"
                    "  ROOT crs = f32[4]{0} all-reduce(input), replica_groups={}, to_apply=add")

"""reduce-scatter and ops.ReduceScatter: shape rule (spec 002 "ReduceScatter",
shape_inference_test.cc), the shard count against the replica groups, the reducer, and
XLA-printed texts."""

import pytest
from collective_helpers import infer, parse_entry, printed_attrs, reducer

from xlapy import ops
from xlapy.errors import InvalidArgumentError, ParseError
from xlapy.opdefs import ShapeError
from xlapy.ops.builder import XlaBuilder
from xlapy.shape import parse_shape
from xlapy.shape.layout import Layout

ADD = reducer().computation


def rs(*shapes, result=None, dimensions=0, **attrs):
    attrs.setdefault("to_apply", ADD)
    return str(infer("reduce-scatter", *shapes, result=result, dimensions=dimensions, **attrs))


def test_spec_example_shapes():
    # Spec: f32[2] ([1.0, 2.25] and [3.0, 5.25]) on two replicas, scatter_dim 0: f32[1] each.
    assert rs("f32[2]", replica_groups=[[0, 1]]) == "f32[1]{0}"
    assert rs("f32[8]{0}", result="f32[4]{0}", replica_groups=[[0, 1]]) == "f32[4]{0}"


def test_several_operands_and_dimensions():
    assert rs("f32[4,6]", "f32[8,6]", dimensions=1, replica_groups=[[0, 1, 2]]) == \
        "(f32[4,2]{1,0}, f32[8,2]{1,0})"
    assert rs("f32[8,4]", result="f32[4,4]", replica_groups="[2,2]<=[4]") == "f32[4,4]{1,0}"


def test_dynamic_dimensions():
    # shape_inference_test.cc UnboundedReduceScatter: ? stays ?.
    assert rs("f32[?,10]", replica_groups=[[0, 1]]) == "f32[?,10]{1,0}"
    # A bounded dynamic scattered dimension becomes unbounded (is_dynamic_dimension).
    assert rs("f32[<=8,3]", replica_groups=[[0, 1]]) == "f32[?,3]{1,0}"
    # From text, a ? dimension does not fix the shard count, and needs none.
    assert rs("f32[?,10]", result="f32[?,10]") == "f32[?,10]{1,0}"


def test_scatter_dimension_must_divide():
    with pytest.raises(ShapeError, match="reduce-scatter: ReduceScatter operand scatter dimension "
                                         "size 5 must be dividable by shard_count 2."):
        rs("f32[5]", replica_groups=[[0, 1], [2, 3]])


def test_uneven_groups_and_shard_mismatch():
    with pytest.raises(ShapeError, match=r"reduce-scatter: Replica groups expected to be of uniform "
                                         r"size, got groups of sizes 1, 2"):
        rs("f32[4]", replica_groups=[[0, 1], [2]])
    with pytest.raises(ShapeError, match=r"the shard count is 2 \(from the result shape\), but the "
                                         r"replica groups have 4 members"):
        rs("f32[8]", result="f32[4]", replica_groups=[[0, 1, 2, 3]])
    with pytest.raises(ShapeError, match="cannot infer the shard count"):
        rs("f32[8]")


def test_operand_and_attribute_errors():
    with pytest.raises(ShapeError, match=r"reduce-scatter: scatter_dimension 1 is out of bounds for "
                                         r"operand 0 f32\[8\]\{0\} of rank 1"):
        rs("f32[8]", dimensions=1, replica_groups=[[0, 1]])
    with pytest.raises(ShapeError, match="Expected array argument for operand of reduce-scatter"):
        rs("(f32[8])", replica_groups=[[0, 1]])
    with pytest.raises(ShapeError, match=r"reduce-scatter: operand 0 f32\[8\]\{0\} cannot be "
                                         r"reduced by %mul .* F32 does not promote to S32"):
        rs("f32[8]", replica_groups=[[0, 1]], to_apply=reducer("s32", "multiply", "mul").computation)
    with pytest.raises(InvalidArgumentError, match="missing required attribute 'to_apply'"):
        infer("reduce-scatter", "f32[8]", dimensions=0)


def test_builder_reduce_scatter():
    b = XlaBuilder("rs")
    x = ops.Parameter(b, 0, parse_shape("f32[8,3]"), "input")
    y = ops.ReduceScatter(x, reducer(), 0, 4, [[0, 1, 2, 3]], channel_id=7,
                          use_global_device_ids=True)
    assert printed_attrs(y.instruction) == ("channel_id=7, replica_groups={{0,1,2,3}}, "
                                            "use_global_device_ids=true, dimensions={0}, "
                                            "to_apply=%add")
    z = ops.ReduceScatter(x, reducer(), 1, 3, layout=Layout((0, 1)))
    assert str(z.shape) == "f32[8,1]{0,1}"
    assert printed_attrs(z.instruction) == ("replica_groups={}, constrain_layout=true, "
                                            "dimensions={1}, to_apply=%add")
    t = ops.ReduceScatter(ops.Tuple(b, [x, x]), reducer(), 0, 2)
    assert str(t.shape) == "(f32[4,3]{1,0}, f32[4,3]{1,0})"
    comp = b.build(y)
    assert str(comp.program_shape()) == "(input: f32[8,3]) -> f32[2,3]"


def test_builder_reduce_scatter_errors():
    b = XlaBuilder("rs")
    x = ops.Parameter(b, 0, parse_shape("f32[6]"), "input")
    with pytest.raises(ShapeError, match="size 6 must be dividable by shard_count 4"):
        ops.ReduceScatter(x, reducer(), 0, 4)
    with pytest.raises(ShapeError, match="reduce-scatter: shard_count must be > 0, got 0"):
        ops.ReduceScatter(x, reducer(), 0, 0)
    with pytest.raises(InvalidArgumentError, match="ReduceScatter: expected an XlaComputation"):
        ops.ReduceScatter(x, "add", 0, 2)
    t = ops.Parameter(b, 1, parse_shape("(f32[6], s32[6])"), "t")
    with pytest.raises(InvalidArgumentError, match="All the shapes of a tuple input of "
                                                   "ReduceScatter must have the same element type"):
        ops.ReduceScatter(t, reducer(), 0, 2)


def test_xla_text_prints_back():
    # hlo_parser_test.cc ReduceScatter.
    instrs = parse_entry("  input = f32[8]{0} parameter(0)\n"
                         "  ROOT ars = f32[4]{0} reduce-scatter(input), replica_groups={{0,1}}, "
                         "dimensions={0}, to_apply=add")
    assert printed_attrs(instrs["ars"]) == "replica_groups={{0,1}}, dimensions={0}, to_apply=%add"
    with pytest.raises(ParseError, match="expected exactly one dimension"):
        parse_entry("  input = f32[8,4] parameter(0)\n"
                    "  ROOT rs = f32[4,4] reduce-scatter(input), replica_groups={}, to_apply=add, "
                    "dimensions={}")

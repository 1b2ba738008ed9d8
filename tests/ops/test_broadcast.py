"""HLO broadcast, ops.Broadcast and ops.BroadcastInDim: shape rules, errors, and the HLO
XLA's builder emits (spec 002 "Broadcast" / "BroadcastInDim", shape_inference_test.cc)."""

import pytest

from xlapy import ops
from xlapy.opdefs import ShapeError, get_opdef
from xlapy.ops.builder import XlaBuilder
from xlapy.shape import parse_shape


def infer(opcode, *shapes, result=None, **attrs):
    d = get_opdef(opcode)
    return d.infer_shape([parse_shape(s) for s in shapes], d.check_attrs(attrs),
                         None if result is None else parse_shape(result))


def emitted(comp):
    """(opcode, shape text, attrs) of every non-parameter instruction, in order."""
    return [(i.opcode, str(i.shape), {k: v for k, v in i.attrs.items()})
            for i in comp.computation.instructions if i.opcode != "parameter"]


# -- HLO broadcast --------------------------------------------------------------------------


def test_hlo_broadcast_rule():
    # hlo_parser_test.cc: f32[2] -> f32[3,2,1,1] with dimensions={1}; scalar with {}.
    assert str(infer("broadcast", "f32[2]", result="f32[3,2,1,1]", dimensions=[1])) == "f32[3,2,1,1]{3,2,1,0}"
    assert str(infer("broadcast", "f32[]", result="f32[2,4]", dimensions=[])) == "f32[2,4]{1,0}"
    # The declared layout is kept.
    assert str(infer("broadcast", "f32[]", result="f32[1,2,3]{0,1,2}", dimensions=[])) == "f32[1,2,3]{0,1,2}"
    # A bounded dynamic operand dimension (shape_inference_test InferDynamicBroadcast).
    assert str(infer("broadcast", "s32[<=15]", result="s32[15,<=15]", dimensions=[1])) == "s32[15,<=15]{1,0}"


def test_hlo_broadcast_errors():
    with pytest.raises(ShapeError, match=r"broadcast: the result shape must be given"):
        infer("broadcast", "f32[2]", dimensions=[0])
    with pytest.raises(ShapeError, match=r"broadcast: operand dimension 0 \(size 1\) must have the "
                                         r"size of result dimension 0 \(size 3\)"):
        # HLO broadcast never stretches size-1 dimensions; the builder reshapes them away.
        infer("broadcast", "f32[1]", result="f32[3]", dimensions=[0])
    with pytest.raises(ShapeError, match=r"dimensions=\{0,1\} has 2 entries but the operand "
                                         r"f32\[2\]\{0\} has rank 1"):
        infer("broadcast", "f32[2]", result="f32[2,2]", dimensions=[0, 1])
    with pytest.raises(ShapeError, match=r"result dimension 2 is out of bounds"):
        infer("broadcast", "f32[2]", result="f32[2,2]", dimensions=[2])
    with pytest.raises(ShapeError, match=r"element types differ: f32\[2\]\{0\} vs s32\[2\]\{0\}"):
        infer("broadcast", "f32[2]", result="s32[2]", dimensions=[0])
    with pytest.raises(ShapeError, match=r"Expected array argument for operand of broadcast"):
        infer("broadcast", "(f32[2])", result="f32[2]", dimensions=[0])
    with pytest.raises(Exception, match="missing required attribute 'dimensions'"):
        infer("broadcast", "f32[2]", result="f32[2]")


# -- ops.Broadcast --------------------------------------------------------------------------


def test_broadcast_spec_example_scalar_to_2x3():
    # Spec: a scalar f32 with broadcast_sizes {2, 3} gives f32[2,3].
    b = XlaBuilder("bcast")
    x = ops.Parameter(b, 0, parse_shape("f32[]"), "x")
    y = ops.Broadcast(x, [2, 3])
    comp = b.build(y)
    assert str(comp.program_shape().result) == "f32[2,3]{1,0}"
    assert emitted(comp) == [("broadcast", "f32[2,3]{1,0}", {"dimensions": ()})]


def test_broadcast_prepends_major_dimensions():
    # Spec: sizes {a0..aN} and operand {b0..bM} give {a0..aN, b0..bM}; the HLO dimensions
    # are the n highest result dimensions.
    b = XlaBuilder("bcast")
    x = ops.Parameter(b, 0, parse_shape("s8[4,5]"), "x")
    y = ops.Broadcast(x, [2, 3])
    assert str(y.shape) == "s8[2,3,4,5]{3,2,1,0}"
    assert y.instruction.attrs["dimensions"] == (2, 3)
    # shape_inference_test BroadcastScalar / InferDynamicBroadcast.
    z = ops.Broadcast(ops.Parameter(b, 1, parse_shape("f32[<=15]")), [15])
    assert str(z.shape) == "f32[15,<=15]{1,0}"
    assert str(ops.Broadcast(x, []).shape) == "s8[4,5]{1,0}"


def test_broadcast_errors():
    b = XlaBuilder("bcast")
    x = ops.Parameter(b, 0, parse_shape("f32[<=2,4]"), "x")
    with pytest.raises(ShapeError, match="broadcast: Broadcast with negative dimension size -1."):
        ops.Broadcast(x, [-1])
    with pytest.raises(ShapeError, match="Non-broadcast dimensions must not be dynamic."):
        ops.Broadcast(x, [2, None, 4])
    u = ops.Parameter(b, 1, parse_shape("f32[<=2,?]"), "u")
    with pytest.raises(ShapeError, match="is_unbounded_dynamic"):
        ops.Broadcast(u, [1])


# -- ops.BroadcastInDim ---------------------------------------------------------------------


def test_broadcast_in_dim_plain():
    # xla_builder.h: s32[2] to s32[2,2] with {1} (rows repeat) or {0} (columns repeat).
    b = XlaBuilder("bid")
    x = ops.Parameter(b, 0, parse_shape("s32[2]"), "x")
    y = ops.BroadcastInDim(x, [2, 2], [1])
    z = ops.BroadcastInDim(x, [2, 2], [0])
    comp = b.build(ops.Tuple(b, [y, z]))
    assert emitted(comp)[:2] == [
        ("broadcast", "s32[2,2]{1,0}", {"dimensions": (1,)}),
        ("broadcast", "s32[2,2]{1,0}", {"dimensions": (0,)}),
    ]


def test_broadcast_in_dim_degenerate_dims_emit_reshape_then_broadcast():
    # Operand dims of size 1 stretched to larger sizes: XLA's builder emits the in-dim
    # broadcast with the operand's own sizes, then AddBroadcastSequence (reshape dropping the
    # size-1 dims + broadcast).
    b = XlaBuilder("bid")
    x = ops.Parameter(b, 0, parse_shape("f32[1,2]"), "x")
    y = ops.BroadcastInDim(x, [4, 3, 2], [1, 2])
    comp = b.build(y)
    assert str(comp.program_shape().result) == "f32[4,3,2]{2,1,0}"
    assert emitted(comp) == [
        ("broadcast", "f32[4,1,2]{2,1,0}", {"dimensions": (1, 2)}),
        ("reshape", "f32[4,2]{1,0}", {"inferred_dimension": -1}),
        ("broadcast", "f32[4,3,2]{2,1,0}", {"dimensions": (0, 2)}),
    ]


def test_broadcast_in_dim_size_one_to_size_one_is_not_degenerate():
    b = XlaBuilder("bid")
    x = ops.Parameter(b, 0, parse_shape("f32[1]"), "x")
    y = ops.BroadcastInDim(x, [3, 1], [1])
    assert [i.opcode for i in b.build(y).computation.instructions] == ["parameter", "broadcast"]


def test_broadcast_in_dim_bounded_dynamic():
    # shape_inference_test UnboundedBroadcastInDim(ToBounded): operand dims may be unbounded;
    # a bounded dynamic operand dim makes its output dim dynamic.
    b = XlaBuilder("bid")
    x = ops.Parameter(b, 0, parse_shape("f32[<=3]"), "x")
    assert str(ops.BroadcastInDim(x, [2, 3], [1]).shape) == "f32[2,<=3]{1,0}"


def test_broadcast_in_dim_errors():
    b = XlaBuilder("bid")
    x = ops.Parameter(b, 0, parse_shape("f32[2,3]"), "x")
    with pytest.raises(ShapeError, match=r"broadcast: Size of broadcast_dimensions has to match "
                                         r"operand's rank; operand rank: 2, size of "
                                         r"broadcast_dimensions 1."):
        ops.BroadcastInDim(x, [2, 3], [0])
    with pytest.raises(ShapeError, match="Broadcast dimension 3 is out of bound"):
        ops.BroadcastInDim(x, [2, 3, 4], [0, 3])
    with pytest.raises(ShapeError, match=r"Input dimension should be either 1 or equal to the "
                                         r"output dimension it is broadcasting into; the 1th "
                                         r"operand dimension is 3, the 1th output dimension is 4."):
        ops.BroadcastInDim(x, [2, 4], [0, 1])
    with pytest.raises(ShapeError, match="Broadcast dimensions order is wrong: 0 comes after 1."):
        ops.BroadcastInDim(x, [3, 2], [1, 0])
    with pytest.raises(ShapeError, match="InDim style broadcast must be to an equal or higher "
                                         "ranked shape; operand rank: 2; output rank: 1"):
        ops.BroadcastInDim(x, [6], [0, 0])
    with pytest.raises(ShapeError, match="Broadcast with negative dimension size -2."):
        ops.BroadcastInDim(x, [-2, 2, 3], [1, 2])

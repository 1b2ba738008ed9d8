"""tuple, get-tuple-element, iota, bitcast, get-dimension-size, set-dimension-size: shape
rules and the builder's Tuple, GetTupleElement, Iota, GetDimensionSize, SetDimensionSize,
RemoveDynamicDimension (spec 002; shape_inference_test.cc; hlo_verifier.cc)."""

import pytest

from xlapy import ops
from xlapy.errors import InvalidArgumentError
from xlapy.opdefs import ShapeError, get_opdef
from xlapy.ops.builder import XlaBuilder
from xlapy.shape import PrimitiveType as P
from xlapy.shape import parse_shape


def infer(opcode, *shapes, result=None, **attrs):
    d = get_opdef(opcode)
    return d.infer_shape([parse_shape(s) for s in shapes], d.check_attrs(attrs),
                         None if result is None else parse_shape(result))


def params(*texts):
    b = XlaBuilder("t")
    return b, [ops.Parameter(b, i, parse_shape(t), f"p{i}") for i, t in enumerate(texts)]


# -- tuple, get-tuple-element ---------------------------------------------------------------


def test_tuple_and_get_tuple_element_spec_example():
    # let t: (f32[10], s32) = tuple(v, s); gettupleelement(t, 1) has shape s32.
    b, (v, s) = params("f32[10]", "s32[]")
    t = ops.Tuple(b, [v, s])
    assert str(t.shape) == "(f32[10]{0}, s32[])"
    e1 = ops.GetTupleElement(t, 1)
    assert str(e1.shape) == "s32[]"
    assert e1.instruction.attrs["index"] == 1
    comp = b.build(e1)
    assert str(comp.program_shape()) == "(p0: f32[10], p1: s32[]) -> s32[]"


def test_tuple_rule():
    assert str(infer("tuple")) == "()"
    assert str(infer("tuple", "f32[?,10]")) == "(f32[?,10]{1,0})"  # UnboundedTuple
    assert str(infer("tuple", "f32[]", "(f32[2,4], (f32[2,4]))")) == \
        "(f32[], (f32[2,4]{1,0}, (f32[2,4]{1,0})))"


def test_get_tuple_element_rule_and_errors():
    # shape_inference_test InferConstIndexShape / InferTupleElementShapeOutOfBound.
    assert str(infer("get-tuple-element", "(f32[], s32[])", index=0)) == "f32[]"
    assert str(infer("get-tuple-element", "(f32[], s32[])", index=1)) == "s32[]"
    for index in (-1, 2):
        with pytest.raises(ShapeError, match=rf"get-tuple-element: Cannot infer shape: attempt to "
                                             rf"index out of tuple bounds: {index} >= 2 in shape "
                                             rf"\(f32\[\], s32\[\]\)."):
            infer("get-tuple-element", "(f32[], s32[])", index=index)
    with pytest.raises(ShapeError, match=r"attempting to index into non-tuple: f32\[2\]\{0\}."):
        infer("get-tuple-element", "f32[2]", index=0)
    _b, (x,) = params("f32[2]")
    with pytest.raises(ShapeError, match="index into non-tuple"):
        ops.GetTupleElement(x, 0)


# -- iota -----------------------------------------------------------------------------------


def test_iota_spec_examples():
    # Iota(s32[4, 8], 0) counts down the rows, Iota(s32[4, 8], 1) along them.
    b = XlaBuilder("iota")
    i0 = ops.Iota(b, parse_shape("s32[4,8]"), 0)
    i1 = ops.Iota(b, parse_shape("s32[4,8]"), 1)
    assert str(i0.shape) == str(i1.shape) == "s32[4,8]{1,0}"
    assert (i0.instruction.attrs["iota_dimension"], i1.instruction.attrs["iota_dimension"]) == (0, 1)
    assert i0.instruction.operands == []


def test_iota_type_and_size_form():
    b = XlaBuilder("iota")
    i = ops.Iota(b, P.F32, 5)
    assert str(i.shape) == "f32[5]{0}"
    assert i.instruction.attrs["iota_dimension"] == 0
    assert str(ops.Iota(b, "bf16", 3).shape) == "bf16[3]{0}"
    with pytest.raises(InvalidArgumentError, match="iota: The output of iota must not have "
                                                   "dynamic dimensions"):
        ops.Iota(b, parse_shape("s32[<=4]"), 0)
    with pytest.raises(InvalidArgumentError, match="Iota: expected an XlaBuilder, got NoneType"):
        ops.Iota(None, P.F32, 5)


def test_iota_rule_and_errors():
    assert str(infer("iota", result="f32[100]", iota_dimension=0)) == "f32[100]{0}"  # hlo_parser_test
    assert str(infer("iota", result="c64[2,3]", iota_dimension=1)) == "c64[2,3]{1,0}"
    with pytest.raises(ShapeError, match="iota: Iota does not support scalars."):
        infer("iota", result="s32[]", iota_dimension=0)
    with pytest.raises(ShapeError, match="The iota dimension cannot go beyond the operation rank "
                                         "or be negative"):
        infer("iota", result="s32[4]", iota_dimension=1)
    with pytest.raises(ShapeError, match="cannot go beyond the operation rank or be negative"):
        infer("iota", result="s32[4]", iota_dimension=-1)
    with pytest.raises(ShapeError, match="Only support iota of integral, floating point or complex "
                                         "primitive types, got PRED"):
        infer("iota", result="pred[4]", iota_dimension=0)
    with pytest.raises(ShapeError, match="Iota does not support non-array result"):
        infer("iota", result="(s32[4])", iota_dimension=0)
    with pytest.raises(ShapeError, match="the result shape must be given"):
        infer("iota", iota_dimension=0)


# -- bitcast --------------------------------------------------------------------------------


def test_bitcast_rule():
    assert str(infer("bitcast", "f32[1,1,2,3]{1,0,2,3}", result="f32[6]")) == "f32[6]{0}"
    assert str(infer("bitcast", "f32[2,3]", result="s32[3,2]{0,1}")) == "s32[3,2]{0,1}"
    assert str(infer("bitcast", "u8[8]", result="f64[]")) == "f64[]"
    with pytest.raises(ShapeError, match=r"bitcast: Bitcast cannot have different shape sizes of "
                                         r"output \(160 bits\) and operand \(192 bits\)"):
        infer("bitcast", "f32[6]", result="f32[5]")
    with pytest.raises(ShapeError, match="the result shape must be given"):
        infer("bitcast", "f32[6]")


# -- get-dimension-size, set-dimension-size -------------------------------------------------


def test_set_dimension_size_spec_example():
    # let padded_v_five: f32[10] = set_dimension_size(v, five, 0): the bound stays 10, the
    # dimension becomes dynamic.
    _b, (v, five) = params("f32[10]", "s32[]")
    padded = ops.SetDimensionSize(v, five, 0)
    assert str(padded.shape) == "f32[<=10]{0}"
    assert padded.instruction.attrs["dimensions"] == (0,)
    # Its runtime size is read back with get-dimension-size.
    g = ops.GetDimensionSize(padded, 0)
    assert g.instruction.opcode == "get-dimension-size"
    assert str(g.shape) == "s32[]"


def test_get_dimension_size_of_a_static_dimension_is_a_constant():
    _b, (x,) = params("f32[2,7]")
    g = ops.GetDimensionSize(x, 1)
    assert g.instruction.opcode == "constant"
    assert str(g.shape) == "s32[]"
    assert int(g.instruction.attrs["literal"].array) == 7
    with pytest.raises(ShapeError, match="GetDimensionSize dimension out of bounds: 2."):
        ops.GetDimensionSize(x, 2)


def test_remove_dynamic_dimension():
    _b, (x,) = params("f32[<=10,3]")
    r = ops.RemoveDynamicDimension(x, 0)
    assert str(r.shape) == "f32[10,3]{1,0}"
    assert r.instruction.opcode == "set-dimension-size"
    size = r.instruction.operands[1]
    assert size.opcode == "constant" and int(size.attrs["literal"].array) == 10
    with pytest.raises(InvalidArgumentError, match="RemoveDynamicDimension: dimension 2 is out of bounds"):
        ops.RemoveDynamicDimension(x, 2)


def test_dimension_size_rules_and_errors():
    assert str(infer("get-dimension-size", "f32[<=5,3]", dimensions=[0])) == "s32[]"
    assert str(infer("set-dimension-size", "f32[5,3]{0,1}", "s32[]", dimensions=[1])) == "f32[5,<=3]{0,1}"
    # shape_inference_test ErrorSetDimensionSize / ...WrongType.
    with pytest.raises(ShapeError, match=r"set-dimension-size: SetDimensionSize's value has to be S32 "
                                         r"scalar, got s32\[1\]\{0\}"):
        infer("set-dimension-size", "f32[5,3]", "s32[1]", dimensions=[0])
    with pytest.raises(ShapeError, match="value has to be S32 scalar, got u32"):
        infer("set-dimension-size", "f32[5,3]", "u32[]", dimensions=[0])
    with pytest.raises(ShapeError, match="SetDimensionSize dimension out of bounds: 2."):
        infer("set-dimension-size", "f32[5,3]", "s32[]", dimensions=[2])
    with pytest.raises(ShapeError, match="GetDimensionSize dimension out of bounds: -1."):
        infer("get-dimension-size", "f32[5,3]", dimensions=[-1])
    with pytest.raises(ShapeError, match="the 0th dimension exceeds the INT_MAX limit"):
        infer("get-dimension-size", "f32[2147483648]", dimensions=[0])
    # hlo_parser_test GetDimensionSizeEmptyDimensions.
    with pytest.raises(ShapeError, match=r"dimensions must name exactly one dimension, got \{\}"):
        infer("get-dimension-size", "f32[2,3]", dimensions=[])

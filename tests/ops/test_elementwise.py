"""Elementwise ops: unary/binary type rules, compare, clamp, select, conversions."""

import numpy as np
import pytest

from xlapy import ops
from xlapy.ops.builder import XlaBuilder
from xlapy.opdefs import ShapeError, get_opdef
from xlapy.opdefs.elementwise import BINARY_OPS, UNARY_OPS
from xlapy.shape import PrimitiveType as P, parse_shape


def infer(opcode, *shapes, result=None, **attrs):
    d = get_opdef(opcode)
    return d.infer_shape([parse_shape(s) for s in shapes], d.check_attrs(attrs),
                         None if result is None else parse_shape(result))


FLOATING_ONLY = ["floor", "ceil", "cbrt", "erf", "round-nearest-afz", "round-nearest-even"]
FLOAT_OR_COMPLEX = ["sine", "cosine", "tan", "exponential", "exponential-minus-one", "log",
                    "log-plus-one", "logistic", "rsqrt", "sqrt", "tanh", "asin", "acos",
                    "asinh", "acosh", "atanh", "sinh", "cosh"]


@pytest.mark.parametrize("opcode", FLOATING_ONLY)
def test_floating_only_unary(opcode):
    assert str(infer(opcode, "bf16[2,3]")) == "bf16[2,3]{1,0}"
    with pytest.raises(ShapeError, match=f"{opcode}: Expected element type in shape to be "
                                         f"floating for {opcode} operation; got C64."):
        infer(opcode, "c64[2]")
    with pytest.raises(ShapeError, match="got S32"):
        infer(opcode, "s32[2]")


@pytest.mark.parametrize("opcode", FLOAT_OR_COMPLEX)
def test_float_or_complex_unary(opcode):
    assert str(infer(opcode, "f32[4]")) == "f32[4]{0}"
    assert str(infer(opcode, "c128[]")) == "c128[]"
    with pytest.raises(ShapeError, match=f"to be floating or complex for {opcode} operation; got S8"):
        infer(opcode, "s8[3]")


def test_unary_special_cases():
    assert str(infer("abs", "c64[3]")) == "f32[3]{0}"
    assert str(infer("abs", "s32[3]")) == "s32[3]{0}"
    with pytest.raises(ShapeError, match="abs: .* got U32"):
        infer("abs", "u32[3]")
    assert str(infer("real", "c128[2]")) == "f64[2]{0}"
    assert str(infer("imag", "f32[2]")) == "f32[2]{0}"
    assert str(infer("is-finite", "bf16[2]")) == "pred[2]{0}"
    with pytest.raises(ShapeError, match="floating point for IsFinite operation; got S32"):
        infer("is-finite", "s32[2]")
    assert str(infer("not", "pred[2]")) == "pred[2]{0}"
    assert str(infer("not", "u8[2]")) == "u8[2]{0}"
    with pytest.raises(ShapeError, match="Expected pred or an integral element type in argument to Not operation; got F32"):
        infer("not", "f32[2]")
    assert str(infer("popcnt", "s4[2]")) == "s4[2]{0}"
    with pytest.raises(ShapeError, match="argument to PopulationCount operation; got F32"):
        infer("popcnt", "f32[2]")
    with pytest.raises(ShapeError, match="argument to Clz operation; got PRED"):
        infer("count-leading-zeros", "pred[2]")
    assert str(infer("negate", "u32[2]")) == "u32[2]{0}"
    with pytest.raises(ShapeError, match="integral, floating or complex for negate operation; got PRED"):
        infer("negate", "pred[]")
    assert str(infer("sign", "s32[]")) == "s32[]"
    with pytest.raises(ShapeError, match="signed or complex for sign operation; got U8"):
        infer("sign", "u8[]")
    with pytest.raises(ShapeError, match=r"Expected array argument for operand of unary operation, but got \(f32\[\]\)"):
        infer("sine", "(f32[])")
    assert str(infer("copy", "(f32[], s32[2])")) == "(f32[], s32[2]{0})"


def test_every_unary_and_binary_opcode_has_a_row():
    for opcode in UNARY_OPS:
        assert get_opdef(opcode).has("unary") and get_opdef(opcode).has("elementwise")
    for opcode in BINARY_OPS:
        assert get_opdef(opcode).has("binary")


def test_binary_rules():
    assert str(infer("add", "f32[2,3]", "f32[2,3]")) == "f32[2,3]{1,0}"
    # Mixed float precision is allowed by shape inference; the result is the wider type.
    assert str(infer("multiply", "bf16[2]", "f32[2]")) == "f32[2]{0}"
    with pytest.raises(ShapeError, match=r"add: Binary op add with different element types: f32\[2\]\{0\} and s32\[2\]\{0\}\."):
        infer("add", "f32[2]", "s32[2]")
    with pytest.raises(ShapeError, match="arithmetic type for operation subtract; got PRED"):
        infer("subtract", "pred[2]", "pred[2]")
    assert str(infer("and", "pred[2]", "pred[2]")) == "pred[2]{0}"
    with pytest.raises(ShapeError, match="Expected pred or integral type in argument to and/or operation; got F32"):
        infer("or", "f32[2]", "f32[2]")
    with pytest.raises(ShapeError, match="floating or complex for atan2 operation; got S32"):
        infer("atan2", "s32[2]", "s32[2]")
    assert str(infer("complex", "f32[2]", "f32[2]")) == "c64[2]{0}"
    assert str(infer("complex", "f64[]", "f64[]")) == "c128[]"
    with pytest.raises(ShapeError, match="floating for complex compose operation; got S32"):
        infer("complex", "s32[2]", "s32[2]")
    # Degenerate (size-1) dimensions broadcast in shape inference.
    assert str(infer("add", "f32[1,3]", "f32[2,1]")) == "f32[2,3]{1,0}"
    with pytest.raises(ShapeError, match=r"Binary op with incompatible shapes: f32\[2,3\]\{1,0\} and f32\[3,3\]\{1,0\}"):
        infer("add", "f32[2,3]", "f32[3,3]")
    # Dynamic dimensions propagate.
    assert str(infer("add", "f32[<=4]", "f32[4]")) == "f32[<=4]{0}"


def test_compare():
    assert str(infer("compare", "f32[3]", "f32[3]", direction="LT")) == "pred[3]{0}"
    assert str(infer("compare", "f32[3]", "f32[3]", direction="GE", type="TOTALORDER")) == "pred[3]{0}"
    assert str(infer("compare", "u32[3]", "u32[3]", direction="EQ", type="UNSIGNED")) == "pred[3]{0}"
    with pytest.raises(ShapeError, match="compare: Expected comparison type SIGNED for element type S32; got UNSIGNED"):
        infer("compare", "s32[3]", "s32[3]", direction="EQ", type="UNSIGNED")
    with pytest.raises(ShapeError, match="Expected comparison type UNSIGNED for element type PRED; got TOTALORDER"):
        infer("compare", "pred[3]", "pred[3]", direction="EQ", type="TOTALORDER")
    with pytest.raises(Exception, match="compare: attribute 'direction' must be one of EQ, NE, GE, GT, LE, LT; got 'XX'"):
        infer("compare", "f32[3]", "f32[3]", direction="XX")
    with pytest.raises(Exception, match="compare: missing required attribute 'direction'"):
        infer("compare", "f32[3]", "f32[3]")


def test_clamp():
    assert str(infer("clamp", "f32[]", "f32[3]", "f32[]")) == "f32[3]{0}"
    assert str(infer("clamp", "f32[3]", "f32[3]", "f32[3]")) == "f32[3]{0}"
    with pytest.raises(ShapeError, match=r"Clamp with incompatible shapes: f32\[2\]\{0\}, f32\[3\]\{0\}, f32\[\]"):
        infer("clamp", "f32[2]", "f32[3]", "f32[]")
    with pytest.raises(ShapeError, match="Clamp with incompatible element types"):
        infer("clamp", "s32[]", "f32[3]", "f32[]")


def test_select():
    # The page's examples: PRED[4] selecting between s32[4] arrays, and a scalar pred.
    assert str(infer("select", "pred[4]", "s32[4]", "s32[4]")) == "s32[4]{0}"
    assert str(infer("select", "pred[]", "s32[4]", "s32[4]")) == "s32[4]{0}"
    # Tuples are selected as scalars, with a scalar pred.
    assert str(infer("select", "pred[]", "(f32[], s32[2])", "(f32[], s32[2])")) == "(f32[], s32[2]{0})"
    with pytest.raises(ShapeError, match="Select between tuples requires a scalar PRED predicate"):
        infer("select", "pred[2]", "(f32[])", "(f32[])")
    with pytest.raises(ShapeError, match="Select's pred operand must have PRED element type; got s32"):
        infer("select", "s32[4]", "s32[4]", "s32[4]")
    with pytest.raises(ShapeError, match="Operands to select must be the same shape"):
        infer("select", "pred[4]", "s32[4]", "s32[5]")
    with pytest.raises(ShapeError, match="Operands to select and predicate must be the same shape"):
        infer("select", "pred[3]", "s32[4]", "s32[4]")


def test_convert_and_bitcast_convert():
    assert str(infer("convert", "f32[2,3]", result="bf16[2,3]")) == "bf16[2,3]{1,0}"
    with pytest.raises(ShapeError, match="convert: the result shape must be given"):
        infer("convert", "f32[2]")
    with pytest.raises(ShapeError, match=r"Convert does not allow non-arrays, so cannot convert from \(f32\[\]\) to F32"):
        infer("convert", "(f32[])", result="f32[]")
    # Narrower: a minor dimension with the pieces; wider: consumes the last dimension.
    assert str(infer("bitcast-convert", "f32[3]", result="u8[]")) == "u8[3,4]{1,0}"
    assert str(infer("bitcast-convert", "u16[5,2]", result="f32[]")) == "f32[5]{0}"
    assert str(infer("bitcast-convert", "s32[3]", result="f32[]")) == "f32[3]{0}"
    assert str(infer("bitcast-convert", "s8[3]", result="s4[]")) == "s4[3,2]{1,0}"
    with pytest.raises(ShapeError, match="Last dimension of input shape=3 is not equal to ratio of bit-widths=2"):
        infer("bitcast-convert", "u16[5,3]", result="f32[]")
    with pytest.raises(ShapeError, match="Conversion between complex and real type"):
        infer("bitcast-convert", "c64[2]", result="f64[]")


def test_reduce_precision_and_stochastic_convert():
    assert str(infer("reduce-precision", "f32[2]", exponent_bits=5, mantissa_bits=10)) == "f32[2]{0}"
    with pytest.raises(ShapeError, match="Expected exponent_bits >= 1; got 0"):
        infer("reduce-precision", "f32[2]", exponent_bits=0, mantissa_bits=10)
    with pytest.raises(ShapeError, match="Expected non-negative mantissa_bits; got -1"):
        infer("reduce-precision", "f32[2]", exponent_bits=8, mantissa_bits=-1)
    with pytest.raises(ShapeError, match="floating point for ReducePrecision operation; got S32"):
        infer("reduce-precision", "s32[2]", exponent_bits=8, mantissa_bits=1)
    assert str(infer("stochastic-convert", "f32[4]", "u32[4]", result="bf16[4]")) == "bf16[4]{0}"
    with pytest.raises(ShapeError, match="random bits: 16, operand bits: 32"):
        infer("stochastic-convert", "f32[4]", "u16[4]", result="bf16[4]")
    with pytest.raises(ShapeError, match="must be unsigned integers"):
        infer("stochastic-convert", "f32[4]", "s32[4]", result="bf16[4]")


def test_arity_is_checked():
    with pytest.raises(ShapeError, match="add: expects 2 operands, got 1"):
        infer("add", "f32[]")


# -- builder ----------------------------------------------------------------------------


def test_builder_unary_binary_and_operators():
    b = XlaBuilder("f")
    x = ops.Parameter(b, 0, parse_shape("f32[3]"), "x")
    y = ops.Parameter(b, 1, parse_shape("f32[3]"), "y")
    z = ops.Sqrt(ops.Add(ops.Abs(x), y))
    w = -(z * 2.0 + x)
    assert str(b.get_shape(w)) == "f32[3]{0}"
    lt = ops.LtTotalOrder(x, y)
    assert lt.instruction.attrs["type"].value == "TOTALORDER"
    assert str(ops.Eq(x, y).shape) == "pred[3]{0}"
    comp = b.build(w)
    assert str(comp.program_shape()) == "(x: f32[3], y: f32[3]) -> f32[3]"
    opcodes = [i.opcode for i in comp.computation.instructions]
    assert opcodes[:5] == ["parameter", "parameter", "abs", "add", "sqrt"]
    assert "negate" in opcodes and "constant" in opcodes


def test_builder_conversions():
    b = XlaBuilder("f")
    x = ops.Parameter(b, 0, parse_shape("f32[3]"), "x")
    assert str(ops.ConvertElementType(x, P.BF16).shape) == "bf16[3]{0}"
    assert str(ops.ConvertElementType(x, "s32").shape) == "s32[3]{0}"
    assert str(ops.BitcastConvertType(x, P.U8).shape) == "u8[3,4]{1,0}"
    assert str(ops.ReducePrecision(x, 5, 10).shape) == "f32[3]{0}"
    assert str(ops.Clamp(ops.ConstantR0(b, np.float32(0.0)), x, ops.ConstantR0(b, np.float32(1.0))).shape) == "f32[3]{0}"
    with pytest.raises(Exception, match=r"ConvertElementType: new_element_type must be an "
                                        r"element type \(a PrimitiveType, its name or a NumPy "
                                        r"dtype\), got 3.5"):
        ops.ConvertElementType(x, 3.5)


def test_builder_errors_name_the_op():
    b = XlaBuilder("f")
    x = ops.Parameter(b, 0, parse_shape("f32[3]"), "x")
    i = ops.Parameter(b, 1, parse_shape("s32[3]"), "i")
    with pytest.raises(ShapeError, match="add: Binary op add with different element types"):
        ops.Add(x, i)
    with pytest.raises(ShapeError, match="sine: .* got S32"):
        ops.Sin(i)
    with pytest.raises(Exception, match="Parameter: parameter number 0 already registered"):
        ops.Parameter(b, 0, parse_shape("f32[]"), "again")
    other = XlaBuilder("g")
    with pytest.raises(Exception, match="Add: operand 1 was built by builder 'g', not by 'f'"):
        ops.Add(x, ops.Parameter(other, 0, parse_shape("f32[3]")))

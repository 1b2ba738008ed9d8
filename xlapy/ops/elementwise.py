"""Elementwise builder functions: unary ops, binary ops with XLA's broadcasting (scalar,
``broadcast_dimensions`` into a higher rank, degenerate size-1 dimensions), comparisons
(and their TOTALORDER forms), Clamp, Select, ConvertElementType, BitcastConvertType,
ReducePrecision. The HLO they emit has equal operand shapes: the builder inserts the
broadcasts, as XLA's builder does."""

from __future__ import annotations

from typing import Sequence

from xlapy.errors import InvalidArgumentError
from xlapy.hlo.attrs.enums import ComparisonDirection, ComparisonType
from xlapy.opdefs.elementwise import infer_binary_shape
from xlapy.opdefs.registry import OpCall, get_opdef
from xlapy.ops.builder import XlaOp
from xlapy.ops.core import (
    add_broadcast_sequence,
    check_same_builder,
    element_type_arg,
    in_dim_broadcast,
    int_list,
)
from xlapy.shape import Shape, dtypes

# Builder name -> HLO opcode.
UNARY = {
    "Abs": "abs", "Ceil": "ceil", "Cos": "cosine", "Sin": "sine", "Tan": "tan",
    "Exp": "exponential", "Expm1": "exponential-minus-one", "Floor": "floor", "Imag": "imag",
    "IsFinite": "is-finite", "Log": "log", "Log1p": "log-plus-one", "Not": "not",
    "Logistic": "logistic", "PopulationCount": "popcnt", "Clz": "count-leading-zeros",
    "Neg": "negate", "Real": "real", "Rsqrt": "rsqrt", "Sign": "sign", "Sqrt": "sqrt",
    "Cbrt": "cbrt", "Tanh": "tanh", "Erf": "erf", "Round": "round-nearest-afz",
    "RoundNearestEven": "round-nearest-even", "Acos": "acos", "Asin": "asin",
    "Acosh": "acosh", "Asinh": "asinh", "Atanh": "atanh", "Cosh": "cosh", "Sinh": "sinh",
    "Copy": "copy",
}

BINARY = {
    "Add": "add", "Sub": "subtract", "Mul": "multiply", "Div": "divide", "Rem": "remainder",
    "Max": "maximum", "Min": "minimum", "Pow": "power", "Atan2": "atan2", "Complex": "complex",
    "And": "and", "Or": "or", "Xor": "xor", "ShiftLeft": "shift-left",
    "ShiftRightArithmetic": "shift-right-arithmetic", "ShiftRightLogical": "shift-right-logical",
    "MulHi": "mulhi",
}

COMPARISONS = {"Eq": "EQ", "Ne": "NE", "Ge": "GE", "Gt": "GT", "Le": "LE", "Lt": "LT"}

__all__ = (list(UNARY) + list(BINARY) + list(COMPARISONS)
           + [n + "TotalOrder" for n in COMPARISONS]
           + ["Compare", "Clamp", "Select", "ConvertElementType", "BitcastConvertType",
              "ReducePrecision"])


def _unary(name: str, opcode: str):
    def fn(operand: XlaOp) -> XlaOp:
        check_same_builder(name, [operand])
        return operand.builder.emit(opcode, [operand], op_name=name)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``ops.{name}(x)``: elementwise HLO ``{opcode}``."
    return fn


def _binary_op(name: str, opcode: str, lhs: XlaOp, rhs: XlaOp,
               broadcast_dimensions: Sequence[int] = (), attrs: dict | None = None) -> XlaOp:
    """XLA's XlaBuilder::BinaryOp: infer the broadcast result shape, broadcast the
    lower-rank operand through ``broadcast_dimensions`` and then size-1 dimensions."""
    b = check_same_builder(name, [lhs, rhs])
    bdims = int_list(broadcast_dimensions, "broadcast_dimensions", name)
    opdef = get_opdef(opcode)
    call = OpCall(opcode, (lhs.shape, rhs.shape), opdef.check_attrs(attrs or {}))
    out = infer_binary_shape(call, lhs.shape, rhs.shape, bdims)
    if lhs.shape.rank != rhs.shape.rank:
        lower_is_lhs = lhs.shape.rank < rhs.shape.rank
        small = lhs if lower_is_lhs else rhs
        sizes = list(out.dimensions)
        dyn = [False] * len(sizes)  # XLA broadcasts to the static output shape
        for i, d in enumerate(bdims):
            sizes[d] = small.shape.dimensions[i]
            dyn[d] = small.shape.dynamic_dimensions[i]
        widened = in_dim_broadcast(small, sizes, bdims, dyn)
        lhs, rhs = (widened, rhs) if lower_is_lhs else (lhs, widened)
    if lhs.shape.dimensions != out.dimensions:
        lhs = add_broadcast_sequence(out, lhs)
    if rhs.shape.dimensions != out.dimensions:
        rhs = add_broadcast_sequence(out, rhs)
    return b.emit(opcode, [lhs, rhs], attrs, op_name=name)


def _binary(name: str, opcode: str):
    def fn(lhs: XlaOp, rhs: XlaOp, broadcast_dimensions: Sequence[int] = ()) -> XlaOp:
        return _binary_op(name, opcode, lhs, rhs, broadcast_dimensions)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"``ops.{name}(lhs, rhs, broadcast_dimensions=())``: elementwise HLO "
                  f"``{opcode}`` with XLA's broadcasting.")
    return fn


def Compare(lhs: XlaOp, rhs: XlaOp, broadcast_dimensions: Sequence[int] = (),
            direction: ComparisonDirection | str = "EQ",
            compare_type: ComparisonType | str | None = None) -> XlaOp:
    """``ops.Compare(lhs, rhs, (), "LT", "TOTALORDER")``: HLO ``compare`` giving PRED."""
    attrs = {"direction": direction}
    if compare_type is not None:
        attrs["type"] = compare_type
    return _binary_op("Compare", "compare", lhs, rhs, broadcast_dimensions, attrs)


def _comparison(name: str, direction: str, total_order: bool):
    def fn(lhs: XlaOp, rhs: XlaOp, broadcast_dimensions: Sequence[int] = ()) -> XlaOp:
        ctype = None
        if total_order:
            check_same_builder(name, [lhs, rhs])
            t = lhs.shape.element_type
            if not dtypes.is_floating(t):
                raise InvalidArgumentError(
                    f"{name}: total order comparison needs a floating point operand, got {lhs.shape}")
            ctype = ComparisonType.TOTALORDER
        return _binary_op(name, "compare", lhs, rhs, broadcast_dimensions,
                          {"direction": direction, "type": ctype})

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"``ops.{name}(lhs, rhs, broadcast_dimensions=())``: compare "
                  f"direction={direction}{', type=TOTALORDER' if total_order else ''}.")
    return fn


for _name, _opcode in UNARY.items():
    globals()[_name] = _unary(_name, _opcode)
for _name, _opcode in BINARY.items():
    globals()[_name] = _binary(_name, _opcode)
for _name, _direction in COMPARISONS.items():
    globals()[_name] = _comparison(_name, _direction, False)
    globals()[_name + "TotalOrder"] = _comparison(_name + "TotalOrder", _direction, True)


def Clamp(min: XlaOp, operand: XlaOp, max: XlaOp) -> XlaOp:  # noqa: A002 (XLA's names)
    """``ops.Clamp(lo, x, hi)``: elementwise min(max(x, lo), hi); lo/hi may be scalars."""
    b = check_same_builder("Clamp", [min, operand, max])
    return b.emit("clamp", [min, operand, max], op_name="Clamp")


def Select(pred: XlaOp, on_true: XlaOp, on_false: XlaOp) -> XlaOp:
    """``ops.Select(pred, a, b)``: elementwise choice; a scalar pred picks a whole value."""
    b = check_same_builder("Select", [pred, on_true, on_false])
    return b.emit("select", [pred, on_true, on_false], op_name="Select")


def ConvertElementType(operand: XlaOp, new_element_type) -> XlaOp:
    """``ops.ConvertElementType(x, PrimitiveType.BF16)``: elementwise conversion."""
    b = check_same_builder("ConvertElementType", [operand])
    new = element_type_arg(new_element_type, "new_element_type", "ConvertElementType")
    shape = operand.shape
    if not shape.is_array() or not dtypes.is_array_type(new):
        raise InvalidArgumentError(
            f"convert: Convert does not allow non-arrays, so cannot convert from {shape} to "
            f"{new.name}.")
    return b.emit("convert", [operand], shape=shape.with_element_type(new),
                  op_name="ConvertElementType")


def BitcastConvertType(operand: XlaOp, new_element_type) -> XlaOp:
    """``ops.BitcastConvertType(x, PrimitiveType.U8)``: reinterpret bits; a narrower type
    adds a minor dimension, a wider one consumes the last dimension."""
    b = check_same_builder("BitcastConvertType", [operand])
    new = element_type_arg(new_element_type, "new_element_type", "BitcastConvertType")
    if not dtypes.is_array_type(new):
        raise InvalidArgumentError(f"bitcast-convert: cannot convert {operand.shape} to the "
                                   f"non-array type {new.name}")
    opdef = get_opdef("bitcast-convert")
    probe = Shape.array(new, ()) if dtypes.is_array_type(new) else None
    shape = opdef.infer_shape([operand.shape], opdef.check_attrs({}), probe)
    return b.emit("bitcast-convert", [operand], shape=shape, op_name="BitcastConvertType")


def ReducePrecision(operand: XlaOp, exponent_bits: int, mantissa_bits: int) -> XlaOp:
    """``ops.ReducePrecision(x, 5, 10)``: round to a narrower float format, keep the type."""
    b = check_same_builder("ReducePrecision", [operand])
    return b.emit("reduce-precision", [operand],
                  {"exponent_bits": exponent_bits, "mantissa_bits": mantissa_bits},
                  op_name="ReducePrecision")

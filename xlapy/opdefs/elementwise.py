"""Elementwise ops: unary, binary, compare, clamp, select, and the element-type conversions
(convert, bitcast-convert, reduce-precision, stochastic-convert), plus copy and domain.

Each unary/binary op is one table row: its opcode and which element types it accepts.
Shape rules follow ShapeInference::Infer{Unary,Binary,Ternary}OpShape, InferClampShape,
InferSelectShape, InferConvertShape, InferBitcastConvertShape, InferReducePrecisionShape
and InferStochasticConvertShape.
"""

from __future__ import annotations

from typing import Sequence

from xlapy.hlo.attrs import AttrSpec, IntKind, RawTextKind
from xlapy.hlo.attrs.enums import COMPARISON_DIRECTION, COMPARISON_TYPE, ComparisonType
from xlapy.opdefs.common import (
    expect_array,
    higher_precision_type,
    is_signed,
    require_result,
    same_type_ignoring_fp_precision,
    tname,
)
from xlapy.opdefs.registry import (
    BINARY,
    COMPARISON,
    ELEMENTWISE,
    RESULT_ACCURACY,
    TERNARY,
    UNARY,
    OpCall,
    op,
)
from xlapy.shape import PrimitiveType, Shape, dtypes
from xlapy.shape.shape import UNBOUNDED_SIZE

P = PrimitiveType
is_float, is_complex, is_int = dtypes.is_floating, dtypes.is_complex, dtypes.is_integral

# -- unary ----------------------------------------------------------------------------------

_FLOAT = "floating"
_FLOAT_OR_COMPLEX = "floating or complex"

# opcode -> (type check, message); the result keeps the operand's shape unless noted below.
UNARY_OPS: dict[str, tuple] = {
    **{o: (is_float, _FLOAT) for o in (
        "floor", "cbrt", "ceil", "erf", "round-nearest-afz", "round-nearest-even")},
    **{o: (lambda t: is_float(t) or is_complex(t), _FLOAT_OR_COMPLEX) for o in (
        "asin", "asinh", "acos", "acosh", "atanh", "cosh", "cosine", "sinh", "sine",
        "exponential", "exponential-minus-one", "log", "log-plus-one", "logistic", "rsqrt",
        "sqrt", "tan", "tanh")},
    "real": (lambda t: is_float(t) or is_complex(t), _FLOAT_OR_COMPLEX),
    "imag": (lambda t: is_float(t) or is_complex(t), _FLOAT_OR_COMPLEX),
    "abs": (lambda t: is_complex(t) or is_signed(t), _FLOAT_OR_COMPLEX),
    "negate": (lambda t: is_int(t) or is_float(t) or is_complex(t), "integral, floating or complex"),
    "sign": (lambda t: is_signed(t) or is_complex(t), "signed or complex"),
    "count-leading-zeros": (is_int, None),
    "popcnt": (is_int, None),
    "not": (lambda t: t == P.PRED or is_int(t), None),
    "is-finite": (is_float, None),
}

#: The unary ops that take ``result_accuracy=`` (HloInstruction's
#: IsUnaryOpWithResultAccuracy): the RESULT_ACCURACY trait.
RESULT_ACCURACY_OPS = frozenset({
    "acos", "acosh", "asin", "asinh", "atanh", "cbrt", "cosine", "cosh", "erf", "exponential",
    "exponential-minus-one", "log", "log-plus-one", "logistic", "rsqrt", "sine", "sinh", "sqrt",
    "tan", "tanh",
})

_SPECIAL_MESSAGES = {
    "count-leading-zeros": "Expected an integral element type in argument to Clz operation; got {t}.",
    "popcnt": "Expected an integral element type in argument to PopulationCount operation; got {t}.",
    "not": "Expected pred or an integral element type in argument to Not operation; got {t}.",
    "is-finite": "Expected element type in shape to be floating point for IsFinite operation; got {t}.",
}


def _unary_rule(call: OpCall) -> Shape:
    (x,) = call.operands
    expect_array(call, x, "operand of unary operation")
    check, kinds = UNARY_OPS[call.opcode]
    t = x.element_type
    if not check(t):
        message = _SPECIAL_MESSAGES.get(call.opcode) or (
            f"Expected element type in shape to be {kinds} for {call.opcode} operation; got {{t}}.")
        call.fail(message.format(t=tname(t)))
    if call.opcode in ("real", "imag", "abs") and is_complex(t):
        return x.with_element_type(dtypes.complex_component_type(t))
    if call.opcode == "is-finite":
        return x.with_element_type(P.PRED)
    return x


for _opcode in UNARY_OPS:
    op(_opcode, traits=[ELEMENTWISE, UNARY] + [RESULT_ACCURACY] * (_opcode in RESULT_ACCURACY_OPS),
       doc=f"Elementwise {_opcode}.")(_unary_rule)


@op("copy", doc="A copy of the operand (any shape, tuples too).")
def _copy(call: OpCall) -> Shape:
    return call.operands[0]


@op("domain", attrs=[AttrSpec("domain", RawTextKind(), default=None)],
    doc="Marks a sharding-domain boundary; the value passes through.")
def _domain(call: OpCall) -> Shape:
    return call.operands[0]


# -- binary ---------------------------------------------------------------------------------


def _no_pred(call, lhs, rhs):
    if lhs.element_type == P.PRED or rhs.element_type == P.PRED:
        call.fail(f"Expected element type in shape to be arithmetic type for operation "
                  f"{call.opcode}; got PRED.")


def _pred_or_int(call, lhs, rhs):
    if lhs.element_type != P.PRED and not is_int(lhs.element_type):
        call.fail(f"Expected pred or integral type in argument to and/or operation; "
                  f"got {tname(lhs.element_type)}.")


def _complex_parts(call, lhs, rhs):
    if not is_float(lhs.element_type):
        call.fail(f"Expected element type in shape to be floating for complex compose "
                  f"operation; got {tname(lhs.element_type)}.")


BINARY_OPS: dict[str, object] = {
    "add": None, "maximum": None, "minimum": None, "multiply": None, "mulhi": None,
    "subtract": _no_pred, "atan2": _no_pred, "power": _no_pred, "divide": _no_pred,
    "remainder": _no_pred, "shift-left": _no_pred, "shift-right-arithmetic": _no_pred,
    "shift-right-logical": _no_pred,
    "and": _pred_or_int, "or": _pred_or_int, "xor": _pred_or_int,
    "complex": _complex_parts,
}


def infer_binary_shape(call: OpCall, lhs: Shape, rhs: Shape,
                       broadcast_dimensions: Sequence[int] = ()) -> Shape:
    """ShapeInference::InferBinaryOpShape, shared by the HLO rule and the builder (which
    also passes ``broadcast_dimensions``)."""
    expect_array(call, lhs, f"lhs of binary operation {call.opcode}")
    expect_array(call, rhs, f"rhs of binary operation {call.opcode}")
    check = BINARY_OPS.get(call.opcode)
    if check is not None:
        check(call, lhs, rhs)
    shape = _elementwise_binary(call, lhs, rhs, tuple(broadcast_dimensions))
    if call.opcode == "complex":
        if lhs.element_type == P.F32 and rhs.element_type == P.F32:
            return shape.with_element_type(P.C64)
        if lhs.element_type == P.F64 and rhs.element_type == P.F64:
            return shape.with_element_type(P.C128)
        call.fail(f"Complex compose operands must both be F32 or both be F64; got "
                  f"{lhs} and {rhs}.")
    if call.opcode == "compare":
        return shape.with_element_type(P.PRED)
    return shape


def _elementwise_binary(call, lhs, rhs, bdims):
    if not same_type_ignoring_fp_precision(lhs, rhs):
        call.fail(f"Binary op {call.opcode} with different element types: {lhs} and {rhs}.")
    if lhs.rank == rhs.rank and bdims and bdims != tuple(range(lhs.rank)):
        call.fail("Broadcast dimensions field must either be not set or be the identity on "
                  "binary operations with operands of the same rank.")
    if call.opcode == "atan2" and not (is_float(lhs.element_type) or is_complex(lhs.element_type)):
        call.fail(f"Expected input element type to be floating or complex for atan2 operation; "
                  f"got {tname(lhs.element_type)}.")
    et = higher_precision_type(lhs.element_type, rhs.element_type)
    if (lhs.compatible_ignoring_fp_precision(rhs) and not lhs.is_unbounded_dynamic()
            and not rhs.is_unbounded_dynamic()):
        dyn = tuple(a or b for a, b in zip(lhs.dynamic_dimensions, rhs.dynamic_dimensions))
        return Shape.array(et, lhs.dimensions, dynamic_dimensions=dyn)
    if lhs.rank == rhs.rank:
        return _degenerate_broadcast(call, lhs, rhs, et)
    larger, smaller = (lhs, rhs) if lhs.rank > rhs.rank else (rhs, lhs)
    indim = _in_dim_broadcast(call, smaller, larger, bdims, et)
    return _degenerate_broadcast(call, indim, larger, et)


def _degenerate_broadcast(call, lhs, rhs, et):
    dims, dyn = [], []
    for i, (l, r) in enumerate(zip(lhs.dimensions, rhs.dimensions)):
        ld, rd = lhs.dynamic_dimensions[i], rhs.dynamic_dimensions[i]
        if l == 1 or r == 1:
            dims.append(r if l == 1 else l)
            dyn.append(rd if l == 1 else ld)
        elif l == r:
            dims.append(l)
            dyn.append(ld or rd)
        elif l == UNBOUNDED_SIZE or r == UNBOUNDED_SIZE:
            dims.append(r if l == UNBOUNDED_SIZE else l)
            dyn.append(rd if l == UNBOUNDED_SIZE else ld)
        else:
            call.fail(f"Binary op with incompatible shapes: {lhs} and "
                      f"{rhs}.")
    return Shape.array(et, dims, dynamic_dimensions=dyn)


def _in_dim_broadcast(call, smaller, larger, bdims, et):
    if not bdims and not smaller.is_scalar():
        call.fail(f"Shapes must be equal rank, but are {smaller} and "
                  f"{larger}")
    if len(bdims) != smaller.rank:
        call.fail(f"Size of broadcast_dimensions has to match lower-rank operand's rank;  "
                  f"lower-rank operand's rank is {smaller.rank}, size of broadcast_dimensions "
                  f"is {len(bdims)}.")
    dims = list(larger.dimensions)
    dyn = list(larger.dynamic_dimensions)
    for i, target in enumerate(bdims):
        if target < 0:
            call.fail(f"Broadcast dimension number ({target}) cannot be negative.")
        if target >= larger.rank:
            call.fail(f"Broadcast dimension number ({target}) too large; higher-rank operand "
                      f"has rank {larger.rank}.")
        small, large = smaller.dimensions[i], larger.dimensions[target]
        s_dyn, l_dyn = smaller.dynamic_dimensions[i], larger.dynamic_dimensions[target]
        if small != large and small != 1 and large != 1:
            call.fail(f"Broadcast dimension {i} mismatch: {small} != {large}; "
                      f"{smaller} and {larger}.")
        if s_dyn != l_dyn and not (small == large or (small == 1 and not s_dyn)
                                   or (large == 1 and not l_dyn)):
            call.fail(f"Broadcast dimension {i} dynamism mismatch: {smaller} "
                      f"and {larger}.")
        if i > 0 and bdims[i - 1] >= target:
            call.fail(f"Broadcast dimensions order is wrong: {target} comes after {bdims[i - 1]}.")
        dims[target] = small
        dyn[target] = s_dyn
    return Shape.array(et, dims, dynamic_dimensions=dyn)


def _binary_rule(call: OpCall) -> Shape:
    lhs, rhs = call.operands
    return infer_binary_shape(call, lhs, rhs)


for _opcode in BINARY_OPS:
    op(_opcode, traits=[ELEMENTWISE, BINARY], doc=f"Elementwise {_opcode}.")(_binary_rule)


def default_comparison_type(t: PrimitiveType) -> ComparisonType:
    """The comparison type XLA assumes when none is given (Comparison::DefaultType)."""
    if is_float(t) or is_complex(t):
        return ComparisonType.FLOAT
    if dtypes.is_signed_integral(t):
        return ComparisonType.SIGNED
    return ComparisonType.UNSIGNED


@op("compare", traits=[ELEMENTWISE, BINARY, COMPARISON], attrs=[
    AttrSpec("direction", COMPARISON_DIRECTION),
    AttrSpec("type", COMPARISON_TYPE, default=None,
             doc="FLOAT, TOTALORDER, SIGNED or UNSIGNED; omitted: the element type's default",
             omit=lambda value, instr: instr.operands and value == default_comparison_type(
                 instr.operands[0].shape.element_type)),
])
def _compare(call: OpCall) -> Shape:
    """Elementwise comparison giving PRED; ``type`` must suit the element type."""
    lhs, rhs = call.operands
    shape = infer_binary_shape(call, lhs, rhs)
    ctype = call.attrs["type"]
    if ctype is not None:
        t = lhs.element_type
        default = default_comparison_type(t)
        allowed = {default}
        if is_float(t) or is_complex(t):
            allowed.add(ComparisonType.TOTALORDER)
        if ctype not in allowed:
            call.fail(f"Expected comparison type {default.value} for element type "
                      f"{tname(t)}; got {ctype.value}.")
    return shape


# -- ternary --------------------------------------------------------------------------------


@op("clamp", traits=[ELEMENTWISE, TERNARY])
def _clamp(call: OpCall) -> Shape:
    """clamp(min, operand, max); min and max may be scalars."""
    lo, x, hi = call.operands
    expect_array(call, lo, "clamp min")
    expect_array(call, x, "clamp operand")
    expect_array(call, hi, "clamp max")
    if not (same_type_ignoring_fp_precision(lo, x) and same_type_ignoring_fp_precision(hi, x)
            and same_type_ignoring_fp_precision(lo, hi)):
        call.fail(f"Clamp with incompatible element types: {lo}, "
                  f"{x}, {hi}.")
    if ((not lo.is_scalar() and not lo.compatible_ignoring_fp_precision(x))
            or (not hi.is_scalar() and not hi.compatible_ignoring_fp_precision(x))
            or (not lo.is_scalar() and not hi.is_scalar()
                and not lo.compatible_ignoring_fp_precision(hi))):
        call.fail(f"Clamp with incompatible shapes: {lo}, "
                  f"{x}, {hi}.")
    return x


@op("select", traits=[ELEMENTWISE, TERNARY])
def _select(call: OpCall) -> Shape:
    """select(pred, on_true, on_false); a scalar pred picks whole arrays, or whole tuples
    (tuples are treated as scalars, as the semantics page says)."""
    pred, on_true, on_false = call.operands
    if on_true.is_tuple() or on_false.is_tuple():
        if not pred.is_array() or not pred.is_scalar() or pred.element_type != P.PRED:
            call.fail(f"Select between tuples requires a scalar PRED predicate; got {pred}.")
        if not on_true.compatible(on_false):
            call.fail(f"Operands to select must be the same shape; got {on_true} and {on_false}.")
        return on_true
    expect_array(call, pred, "select pred")
    expect_array(call, on_true, "select on-true")
    expect_array(call, on_false, "select on-false")
    if not on_true.compatible_ignoring_fp_precision(on_false):
        call.fail(f"Operands to select must be the same shape; got {on_true} "
                  f"and {on_false}.")
    if pred.element_type != P.PRED:
        call.fail(f"Select's pred operand must have PRED element type; got {pred}.")
    if not pred.is_scalar() and not (pred.compatible_ignoring_element_type(on_true)):
        call.fail(f"Operands to select and predicate must be the same shape; got "
                  f"{on_true} and {on_false} and "
                  f"{pred}.")
    full = on_true if pred.is_scalar() else pred
    et = higher_precision_type(on_true.element_type, on_false.element_type)
    dims, dyn = [], []
    for i, d in enumerate(full.dimensions):
        t, f = on_true.dimensions[i], on_false.dimensions[i]
        if t == UNBOUNDED_SIZE or f == UNBOUNDED_SIZE:
            dims.append(f if t == UNBOUNDED_SIZE else t)
            dyn.append(on_true.dynamic_dimensions[i] and on_false.dynamic_dimensions[i])
        else:
            dims.append(t)
            dyn.append((not pred.is_scalar() and pred.dynamic_dimensions[i])
                       or on_true.dynamic_dimensions[i] or on_false.dynamic_dimensions[i])
    return Shape.array(et, dims, dynamic_dimensions=dyn)


# -- element type conversions ---------------------------------------------------------------


@op("convert", traits=[ELEMENTWISE, UNARY])
def _convert(call: OpCall) -> Shape:
    """Elementwise conversion; the new element type comes from the result shape."""
    (x,) = call.operands
    result = require_result(call, "convert takes its new element type from the result shape")
    new = result.element_type
    if not x.is_array() or not dtypes.is_array_type(new):
        call.fail(f"Convert does not allow non-arrays, so cannot convert from {x} to {tname(new)}.")
    return x.with_element_type(new)


@op("bitcast-convert", traits=[ELEMENTWISE, UNARY])
def _bitcast_convert(call: OpCall) -> Shape:
    """Reinterprets bits; a narrower result type adds a minor dimension, a wider one
    drops the last dimension (which must be the ratio of bit widths)."""
    (x,) = call.operands
    result = require_result(call, "bitcast-convert takes its new element type from the result shape")
    new = result.element_type
    old = x.element_type
    if x.is_array() and is_complex(old) != is_complex(new):
        call.fail(f"Conversion between complex and real type {x} => {tname(new)}.")
    if not x.is_array() or not dtypes.is_array_type(new):
        call.fail(f"Cannot convert from or to tuple type; requested conversion: {x} => {tname(new)}.")
    in_bits, out_bits = dtypes.bit_width(old), dtypes.bit_width(new)
    if max(in_bits, out_bits) % min(in_bits, out_bits):
        call.fail(f"Cannot bitcast types with undivisible bit-widths: {tname(old)} => {tname(new)}.")
    ratio = max(in_bits, out_bits) // min(in_bits, out_bits)
    dims, dyn = list(x.dimensions), list(x.dynamic_dimensions)
    if in_bits > out_bits:
        dims.append(ratio)
        dyn.append(False)
    elif in_bits < out_bits:
        if not dims or dims[-1] != ratio:
            last = dims[-1] if dims else "none"
            call.fail(f"Last dimension of input shape={last} is not equal to ratio of "
                      f"bit-widths={ratio} for bitcast-convert from {x} to "
                      f"{tname(new)}")
        dims.pop()
        dyn.pop()
    return Shape.array(new, dims, dynamic_dimensions=dyn)


@op("reduce-precision", traits=[ELEMENTWISE, UNARY], attrs=[
    AttrSpec("exponent_bits", IntKind()),
    AttrSpec("mantissa_bits", IntKind()),
])
def _reduce_precision(call: OpCall) -> Shape:
    """Rounds to a float format with the given exponent and mantissa bits."""
    (x,) = call.operands
    expect_array(call, x, "operand of reduce-precision")
    if not is_float(x.element_type):
        call.fail(f"Expected element type in shape to be floating point for ReducePrecision "
                  f"operation; got {tname(x.element_type)}.")
    if call.exponent_bits < 1:
        call.fail(f"Expected exponent_bits >= 1; got {call.exponent_bits}.")
    if call.mantissa_bits < 0:
        call.fail(f"Expected non-negative mantissa_bits; got {call.mantissa_bits}.")
    return x


@op("stochastic-convert", traits=[ELEMENTWISE, BINARY])
def _stochastic_convert(call: OpCall) -> Shape:
    """Converts with stochastic rounding driven by unsigned random bits of equal width."""
    x, rnd = call.operands
    result = require_result(call, "stochastic-convert takes its new element type from the result shape")
    expect_array(call, x, "lhs of stochastic convert operation")
    expect_array(call, rnd, "rhs of stochastic convert operation")
    if not dtypes.is_unsigned_integral(rnd.element_type):
        call.fail(f"Random numbers for stochastic convert must be unsigned integers, but got: {rnd}")
    if not is_float(x.element_type):
        call.fail(f"Stochastic convert supports only floating point operand conversion, but got: {x}")
    if dtypes.bit_width(x.element_type) != dtypes.bit_width(rnd.element_type):
        call.fail(f"The random number is required to have same bits as the operand. But got "
                  f"random bits: {dtypes.bit_width(rnd.element_type)}, operand bits: "
                  f"{dtypes.bit_width(x.element_type)}")
    if x.dimensions != rnd.dimensions:
        call.fail(f"Stochastic convert operand shape does not match random tensor shape: "
                  f"{x} vs {rnd}.")
    return x.with_element_type(result.element_type)

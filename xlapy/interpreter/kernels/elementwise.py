"""Kernels of the elementwise ops: unary and binary arithmetic, compare, clamp, select, the
element-type conversions (convert, bitcast-convert, reduce-precision, stochastic-convert),
copy, domain, and constant.

Semantics are XLA's (hlo_evaluator, XLA:CPU's elemental emitters, and the measurements in
/work/shared/xla-cpu-behaviour.md); each table row says which function computes an opcode for
one class of element types. Narrow floats compute in f32 and round back with XLA's
conversion (numeric.convert); integers compute in int64/uint64 and wrap to their width;
libm functions of f32 values are evaluated in f64 and rounded once, except sin, cos, tan,
cbrt, atan2 and pow, which XLA computes with the C library's f32 functions (sinf, ...:
numeric.libm_single). Complex functions follow
XLA:CPU's formulas (elemental_ir_emitter.cc), component by component.
Imports numpy, the shape layer and the interpreter core; scipy.special only when erf is
evaluated (importing it costs some 20 MiB of resident memory that every user of the
interpreter's kernels, the CPU backend among them, would otherwise pay).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from xlapy.hlo.attrs.enums import ComparisonDirection as Dir
from xlapy.hlo.attrs.enums import ComparisonType
from xlapy.interpreter.evaluator import EvaluationError, UnimplementedError
from xlapy.interpreter.kernels import complex_math as cm
from xlapy.interpreter.kernels.numeric import (
    bit_width,
    convert,
    from_bits,
    libm,
    libm_single,
    to_bits,
    to_work,
    total_order_key,
    widen_int,
    work_dtype,
    wrap_int,
)
from xlapy.interpreter.kernels.numeric import tanh as tanh_xla
from xlapy.interpreter.registry import kernel
from xlapy.interpreter.values import literal_to_value
from xlapy.shape import dtypes
from xlapy.shape.tree import map_tuples

_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)


def _result_dtype(instr) -> np.dtype:
    return dtypes.to_dtype(instr.shape.element_type)


def _kind(dtype) -> str:
    """"pred", "int", "float" or "complex"."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return "pred"
    t = dtypes.from_dtype(dtype)
    if dtypes.is_integral(t):
        return "int"
    return "complex" if dtypes.is_complex(t) else "float"


def _signed(dtype) -> bool:
    return dtypes.is_signed_integral(dtypes.from_dtype(dtype))


def _unsupported(instr, dtype) -> UnimplementedError:
    return UnimplementedError(
        f"{instr.opcode}: unsupported element type {dtypes.type_name(dtypes.from_dtype(dtype))} "
        f"(instruction %{instr.name})")


# -- float functions (arguments and results in the work dtype, f32 or f64) ------------------


def _round_afz(x):
    t = np.trunc(x)
    return np.where(np.abs(x - t) >= 0.5, t + np.copysign(1.0, x).astype(x.dtype), t)


def _sign(x):
    return np.where(np.isnan(x), x, np.copysign((x != 0).astype(x.dtype), x))


def _logistic(x):
    # XLA's LogisticExpander: 1 / (1 + exp(-x)) in the element's work type.
    return np.asarray(1, x.dtype) / (np.asarray(1, x.dtype) + libm(np.exp, -x))


def _rsqrt(v):
    return 1.0 / np.sqrt(v)


def _erf(x):
    import scipy.special  # on first use: see the module docstring

    return scipy.special.erf(x)


FLOAT_UNARY: dict[str, Callable] = {
    "abs": np.abs,
    "acos": lambda x: libm(np.arccos, x),
    "acosh": lambda x: libm(np.arccosh, x),
    "asin": lambda x: libm(np.arcsin, x),
    "asinh": lambda x: libm(np.arcsinh, x),
    "atanh": lambda x: libm(np.arctanh, x),
    "cbrt": lambda x: libm_single("cbrtf", np.cbrt, x),
    "ceil": np.ceil,
    "cosh": lambda x: libm(np.cosh, x),
    "cosine": lambda x: libm_single("cosf", np.cos, x),
    "erf": lambda x: libm(_erf, x),
    "exponential": lambda x: libm(np.exp, x),
    "exponential-minus-one": lambda x: libm(np.expm1, x),
    "floor": np.floor,
    "imag": np.zeros_like,  # the imaginary part of a real number
    "is-finite": np.isfinite,
    "log": lambda x: libm(np.log, x),
    "log-plus-one": lambda x: libm(np.log1p, x),
    "logistic": _logistic,
    "negate": np.negative,
    "real": lambda x: x,
    "round-nearest-afz": _round_afz,  # halves away from zero
    "round-nearest-even": np.rint,  # halves to even
    "rsqrt": lambda x: libm(_rsqrt, x),
    "sign": _sign,  # sign(-0) = -0; NaN keeps its sign bit
    "sine": lambda x: libm_single("sinf", np.sin, x),
    "sinh": lambda x: libm(np.sinh, x),
    "sqrt": lambda x: libm(np.sqrt, x),
    "tan": lambda x: libm_single("tanf", np.tan, x),
    "tanh": tanh_xla,
}

# Complex functions take and return (real, imag) component arrays (see complex_math).
COMPLEX_UNARY: dict[str, Callable] = {
    "abs": cm.c_abs,  # a real result
    "acos": cm.via_numpy(np.arccos),
    "acosh": cm.via_numpy(np.arccosh),
    "asin": cm.via_numpy(np.arcsin),
    "asinh": cm.via_numpy(np.arcsinh),
    "atanh": cm.via_numpy(np.arctanh),
    "cosh": cm.via_numpy(np.cosh),
    "cosine": cm.c_cos,
    "exponential": cm.c_exp,
    "exponential-minus-one": cm.c_expm1,
    "imag": lambda re, im: im,
    "log": cm.c_log,
    "log-plus-one": cm.c_log1p,
    "logistic": cm.c_logistic,
    "negate": lambda re, im: (-re, -im),
    "real": lambda re, im: re,
    "rsqrt": cm.c_rsqrt,
    "sign": cm.c_sign,
    "sine": cm.c_sin,
    "sinh": cm.via_numpy(np.sinh),
    "sqrt": cm.c_sqrt,
    "tan": cm.c_tan,
    "tanh": cm.c_tanh,
}


# -- integer functions (arguments wide: int64, or uint64 for u64; ``bits`` the width) -------


def _unsigned_bits(x, bits):
    """The low ``bits`` bits of wide integers, as uint64."""
    u = x.astype(np.uint64)
    return u if bits >= 64 else u & np.uint64((1 << bits) - 1)


def _signed_value(x, bits):
    """Wide integers reinterpreted as signed ``bits``-bit values (int64)."""
    u = _unsigned_bits(x, bits).astype(np.int64)
    return u if bits >= 64 else np.where(u >= (1 << (bits - 1)), u - (1 << bits), u)


def _bit_length(u):
    n = np.zeros(u.shape, np.int64)
    for s in (32, 16, 8, 4, 2, 1):
        big = u >= np.uint64(1 << s)
        n = n + np.where(big, s, 0)
        u = np.where(big, u >> np.uint64(s), u)
    return n + (u > 0)


INT_UNARY: dict[str, Callable] = {
    "abs": lambda x, bits, signed: np.abs(x) if signed else x,  # abs(INT_MIN) = INT_MIN
    "negate": lambda x, bits, signed: -x,
    "sign": lambda x, bits, signed: np.sign(x),
    "not": lambda x, bits, signed: ~x,
    "popcnt": lambda x, bits, signed: np.bitwise_count(_unsigned_bits(x, bits)).astype(np.int64),
    "count-leading-zeros": lambda x, bits, signed: bits - _bit_length(_unsigned_bits(x, bits)),
}

PRED_UNARY: dict[str, Callable] = {
    "not": np.logical_not,
}


def _int_divide(a, b, bits, signed):
    zero = b == 0
    if not signed:
        safe = np.where(zero, 1, b).astype(a.dtype)
        return np.where(zero, np.asarray(-1).astype(a.dtype), a // safe)
    overflow = (a == -(1 << (bits - 1))) & (b == -1)
    safe = np.where(zero | overflow, 1, b)
    r = np.fmod(a, safe)
    q = (a - r) // safe
    return np.where(zero, -1, np.where(overflow, a, q))  # x / 0 = -1, INT_MIN / -1 = INT_MIN


def _int_remainder(a, b, bits, signed):
    zero = b == 0
    overflow = (a == -(1 << (bits - 1))) & (b == -1) if signed else np.zeros(a.shape, bool)
    safe = np.where(zero | overflow, 1, b).astype(a.dtype)
    r = np.fmod(a, safe)  # C's %: the dividend's sign
    return np.where(zero, a, np.where(overflow, 0, r).astype(a.dtype))  # x % 0 = x


def _shift_amount(b, bits):
    """Shift amounts read as unsigned ``bits``-bit values, and which are >= the width."""
    amount = _unsigned_bits(b, bits)
    out = amount >= np.uint64(bits)
    return np.where(out, 0, amount).astype(np.int64), out


def _shift_left(a, b, bits, signed):
    amount, out = _shift_amount(b, bits)
    return np.where(out, 0, a.astype(np.uint64) << amount.astype(np.uint64))


def _shift_right_logical(a, b, bits, signed):
    amount, out = _shift_amount(b, bits)
    return np.where(out, 0, _unsigned_bits(a, bits) >> amount.astype(np.uint64))


def _shift_right_arithmetic(a, b, bits, signed):
    amount, out = _shift_amount(b, bits)
    value = _signed_value(a, bits)
    return np.where(out, np.where(value < 0, -1, 0), value >> amount)


def _umulhi64(a, b):
    m32, s32 = np.uint64(0xFFFFFFFF), np.uint64(32)
    a_lo, a_hi, b_lo, b_hi = a & m32, a >> s32, b & m32, b >> s32
    lo_lo, hi_lo, lo_hi, hi_hi = a_lo * b_lo, a_hi * b_lo, a_lo * b_hi, a_hi * b_hi
    cross = (lo_lo >> s32) + (hi_lo & m32) + lo_hi
    return hi_hi + (hi_lo >> s32) + (cross >> s32)


def _mulhi(a, b, bits, signed):
    """The high half of the 2*bits-bit product."""
    if bits <= 32:
        if signed:
            return (_signed_value(a, bits) * _signed_value(b, bits)) >> bits
        return (_unsigned_bits(a, bits) * _unsigned_bits(b, bits)) >> np.uint64(bits)
    ua, ub = a.astype(np.uint64), b.astype(np.uint64)
    high = _umulhi64(ua, ub)
    if signed:  # the signed high word differs by b when a < 0 and by a when b < 0
        high = high - np.where(a < 0, ub, 0).astype(np.uint64)
        high = high - np.where(b < 0, ua, 0).astype(np.uint64)
    return high


def _int_power(a, b, bits, signed):
    """XLA:CPU's integer power (ElementalIrEmitter::EmitIntegerPow): square-and-multiply
    with wrap-around over the exponent's low 6 bits only (2**120 on s64 is 2**56), and a
    negative exponent - its sign bit set in the storage width, so also a u64 exponent of
    2**63 or more, while sub-byte types are widened to 8 bits first - gives 1 for base 1,
    +-1 by the exponent's parity for base -1 (all bits set), 0 otherwise. Checked against
    XLA:CPU (jaxlib 0.10.2) on every width, bases and exponents around the edges."""
    if signed:
        negative = b < 0
        all_ones = a == -1
    elif bits >= 8:  # the exponent is compared as a signed value of its width
        top = 1 << (bits - 1)
        negative = b >= top
        all_ones = a == (top << 1) - 1
    else:  # zero-extended to 8 bits: never negative, never all ones
        negative = np.zeros(b.shape, bool)
        all_ones = np.zeros(a.shape, bool)
    e = np.where(negative, 0, b).astype(np.uint64) & np.uint64(63)
    acc = np.ones(np.broadcast_shapes(a.shape, b.shape), a.dtype)
    base = np.broadcast_to(a, acc.shape).copy()
    e = np.broadcast_to(e, acc.shape).copy()
    while e.any():
        acc = np.where(e & np.uint64(1), acc * base, acc)
        base = base * base
        e = e >> np.uint64(1)
    if negative.any():
        odd = (b & 1) == 1
        minus_one = np.array(-1, np.int64).astype(a.dtype) if signed else \
            np.array((1 << bits) - 1, np.uint64).astype(a.dtype)
        one, zero = np.ones((), a.dtype), np.zeros((), a.dtype)
        negative_result = np.where(a == 1, one,
                                   np.where(all_ones, np.where(odd, minus_one, one), zero))
        acc = np.where(negative, negative_result, acc)
    return acc


INT_BINARY: dict[str, Callable] = {
    "add": lambda a, b, bits, signed: a + b,
    "subtract": lambda a, b, bits, signed: a - b,
    "multiply": lambda a, b, bits, signed: a * b,
    "divide": _int_divide,
    "remainder": _int_remainder,
    "maximum": lambda a, b, bits, signed: np.maximum(a, b),
    "minimum": lambda a, b, bits, signed: np.minimum(a, b),
    "power": _int_power,
    "and": lambda a, b, bits, signed: a & b,
    "or": lambda a, b, bits, signed: a | b,
    "xor": lambda a, b, bits, signed: a ^ b,
    "shift-left": _shift_left,
    "shift-right-arithmetic": _shift_right_arithmetic,
    "shift-right-logical": _shift_right_logical,
    "mulhi": _mulhi,
}

# pred arithmetic is int8(x) OP int8(y) != 0 (XLA's EmitPredBinaryOp).
PRED_BINARY: dict[str, Callable] = {
    "add": np.logical_or,
    "maximum": np.logical_or,
    "or": np.logical_or,
    "multiply": np.logical_and,
    "minimum": np.logical_and,
    "and": np.logical_and,
    "xor": np.logical_xor,
}


def _float_max(a, b):
    """NaN-propagating maximum (lhs NaN first) with -0 < +0."""
    r = np.where(a > b, a, b)
    r = np.where((a == 0) & (b == 0), np.where(np.signbit(a), b, a), r)
    return np.where(np.isnan(a), a, np.where(np.isnan(b), b, r))


def _float_min(a, b):
    r = np.where(a < b, a, b)
    r = np.where((a == 0) & (b == 0), np.where(np.signbit(a), a, b), r)
    return np.where(np.isnan(a), a, np.where(np.isnan(b), b, r))


FLOAT_BINARY: dict[str, Callable] = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "divide": np.divide,
    "remainder": np.fmod,  # the dividend's sign; x % 0 = NaN
    "maximum": _float_max,
    "minimum": _float_min,
    # C99 pow: pow(1, NaN) = 1, pow(NaN, 0) = 1
    "power": lambda a, b: libm_single("powf", np.power, a, b),
    "atan2": lambda a, b: libm_single("atan2f", np.arctan2, a, b),
}

def _complex_pick(pick, ar, ai, br, bi):
    return np.where(pick, ar, br), np.where(pick, ai, bi)


COMPLEX_BINARY: dict[str, Callable] = {
    "add": lambda ar, ai, br, bi: (ar + br, ai + bi),
    # XLA:CPU compares the real parts only: maximum is lhs when lhs.re >= rhs.re, else rhs
    # (so rhs when either real part is NaN), minimum likewise with <=; the imaginary parts
    # never decide. (XLA's HloEvaluator has no complex maximum/minimum: its constant folding
    # leaves them to XLA:CPU.)
    "maximum": lambda ar, ai, br, bi: _complex_pick(ar >= br, ar, ai, br, bi),
    "minimum": lambda ar, ai, br, bi: _complex_pick(ar <= br, ar, ai, br, bi),
    "subtract": lambda ar, ai, br, bi: (ar - br, ai - bi),
    "multiply": cm.c_mul,
    "divide": cm.c_div,
    "power": cm.c_pow,
    "atan2": cm.c_atan2,
}


# -- unary and binary kernels ---------------------------------------------------------------

UNARY_OPCODES = sorted(set(FLOAT_UNARY) | set(COMPLEX_UNARY) | set(INT_UNARY) | set(PRED_UNARY))
BINARY_OPCODES = sorted(set(FLOAT_BINARY) | set(INT_BINARY) | set(PRED_BINARY)
                        | set(COMPLEX_BINARY) | {"complex"})


@kernel(*UNARY_OPCODES)
def unary(ctx, instr, args):
    (x,) = args
    out = _result_dtype(instr)
    kind = _kind(x.dtype)
    op = instr.opcode
    with np.errstate(all="ignore"):
        if op in ("negate", "abs") and x.dtype == np.float16 and out == np.float16:
            # the sign bit, as XLA:CPU (a signalling NaN stays one; f32 work would quiet it)
            bits = x.view(np.uint16)
            return (bits ^ 0x8000 if op == "negate" else bits & 0x7FFF).astype(np.uint16) \
                .view(np.float16)
        if kind == "float" and op in FLOAT_UNARY:
            return _to_result(FLOAT_UNARY[op](to_work(x)), out)
        if kind == "complex" and op in COMPLEX_UNARY:
            parts = COMPLEX_UNARY[op](*cm.split(x))
            return cm.join(parts, out) if isinstance(parts, tuple) else _to_result(parts, out)
        if kind == "int" and op in INT_UNARY:
            signed = _signed(x.dtype)
            return wrap_int(INT_UNARY[op](widen_int(x), bit_width(x.dtype), signed), out)
        if kind == "pred" and op in PRED_UNARY:
            return np.asarray(PRED_UNARY[op](x))
    raise _unsupported(instr, x.dtype)


@kernel(*BINARY_OPCODES)
def binary(ctx, instr, args):
    lhs, rhs = args
    out = _result_dtype(instr)
    kind = _kind(out)
    op = instr.opcode
    with np.errstate(all="ignore"):
        if kind == "float" and op in FLOAT_BINARY:
            work = work_dtype(out)
            return _to_result(FLOAT_BINARY[op](_as_work(lhs, work), _as_work(rhs, work)), out)
        if kind == "complex" and op == "complex":
            component = _F32 if out == np.complex64 else _F64
            re, im = np.broadcast_arrays(lhs.astype(component), rhs.astype(component))
            return cm.join((re, im), out)
        if kind == "complex" and op in COMPLEX_BINARY:
            lhs, rhs = convert(lhs, out), convert(rhs, out)
            return cm.join(COMPLEX_BINARY[op](*cm.split(lhs), *cm.split(rhs)), out)
        if kind == "int" and op in INT_BINARY:
            result = INT_BINARY[op](widen_int(lhs), widen_int(rhs), bit_width(out), _signed(out))
            return wrap_int(np.asarray(result), out)
        if kind == "pred" and op in PRED_BINARY:
            return np.asarray(PRED_BINARY[op](lhs, rhs))
    raise _unsupported(instr, out)


def _as_work(x, work):
    """An operand in the work dtype (mixed-precision float operands meet there exactly)."""
    return x if x.dtype == work else convert(x, work) if work == _F64 else to_work(x).astype(work)


def _to_result(y, out):
    y = np.asarray(y)
    if out == np.bool_:
        return y.astype(np.bool_)
    return y if y.dtype == out else convert(y, out)


# -- compare --------------------------------------------------------------------------------

_DIRECTIONS = {
    Dir.EQ: np.equal, Dir.NE: np.not_equal, Dir.LT: np.less,
    Dir.LE: np.less_equal, Dir.GT: np.greater, Dir.GE: np.greater_equal,
}


@kernel("compare")
def compare(ctx, instr, args):
    lhs, rhs = args
    direction = instr.attrs["direction"]
    ctype = instr.attrs["type"]
    fn = _DIRECTIONS[direction]
    kind = _kind(lhs.dtype)
    with np.errstate(all="ignore"):
        if kind == "complex":
            if direction not in (Dir.EQ, Dir.NE):
                raise UnimplementedError(
                    f"compare: complex numbers compare only with EQ and NE, got "
                    f"direction={direction.value} (instruction %{instr.name})")
            return np.asarray(fn(lhs, rhs))
        if kind == "float":
            if ctype == ComparisonType.TOTALORDER:
                if lhs.dtype != rhs.dtype:  # mixed precision: compare the wider type's keys
                    wide = _F64
                    lhs, rhs = convert(lhs, wide), convert(rhs, wide)
                return np.asarray(fn(total_order_key(lhs), total_order_key(rhs)))
            return np.asarray(fn(_exact_float(lhs), _exact_float(rhs)))
        if kind == "int":
            return np.asarray(fn(widen_int(lhs), widen_int(rhs)))
        return np.asarray(fn(lhs.astype(np.uint8), rhs.astype(np.uint8)))


def _exact_float(x):
    return x if x.dtype in (_F32, _F64) else x.astype(_F32)


# -- clamp and select -----------------------------------------------------------------------


@kernel("clamp")
def clamp(ctx, instr, args):
    """clamp(lo, x, hi) = min(max(x, lo), hi); a NaN anywhere gives NaN; lo > hi gives hi."""
    lo, x, hi = args
    out = _result_dtype(instr)
    kind = _kind(out)
    with np.errstate(all="ignore"):
        if kind == "float":
            work = work_dtype(out)
            lo, x, hi = (_as_work(v, work) for v in (lo, x, hi))
            result = _float_min(_float_max(x, lo), hi)
            result = np.where(np.isnan(hi), hi, result)
            result = np.where(np.isnan(x), x, result)
            result = np.where(np.isnan(lo), lo, result)
            return _to_result(result, out)  # lo and hi are x's shape or scalars
        if kind == "int":
            lo, x, hi = (widen_int(v) for v in (lo, x, hi))
            return wrap_int(np.minimum(np.maximum(x, lo), hi), out)
        if kind == "pred":
            return np.asarray(np.logical_and(np.logical_or(x, lo), hi))
    raise _unsupported(instr, out)


@kernel("select")
def select(ctx, instr, args):
    """select(pred, on_true, on_false); a scalar pred picks a whole operand (tuples too)."""
    pred, on_true, on_false = args
    if isinstance(on_true, tuple) or np.ndim(pred) == 0:
        chosen = on_true if bool(pred) else on_false
        return chosen if isinstance(chosen, tuple) else _select_result(chosen, instr)
    out = _result_dtype(instr)
    return np.where(pred, _select_result(on_true, instr, out), _select_result(on_false, instr, out))


def _select_result(x, instr, out=None):
    out = _result_dtype(instr) if out is None else out
    return x if x.dtype == out else convert(x, out)


# -- conversions ----------------------------------------------------------------------------


@kernel("convert")
def convert_kernel(ctx, instr, args):
    (x,) = args
    out = _result_dtype(instr)
    if _kind(x.dtype) == "complex" and _kind(out) != "complex":
        raise UnimplementedError(
            f"convert: conversion from complex to real type {dtypes.type_name(dtypes.from_dtype(x.dtype))}"
            f" => {dtypes.type_name(instr.shape.element_type)} is not implemented "
            f"(instruction %{instr.name})")
    return convert(x, out)


@kernel("bitcast-convert")
def bitcast_convert(ctx, instr, args):
    """Reinterprets the bits. A narrower result type adds a minor dimension holding the
    pieces of each element, least significant first; a wider one consumes the last one."""
    (x,) = args
    out = _result_dtype(instr)
    in_bits, out_bits = bit_width(x.dtype), bit_width(out)
    if x.dtype.itemsize * 8 == in_bits and out.itemsize * 8 == out_bits and x.dtype != np.bool_:
        return _bitcast_bytes(x, out, in_bits, out_bits)
    if _kind(x.dtype) == "complex" or _kind(out) == "complex":
        raise _unsupported(instr, out)
    bits = to_bits(x)
    if in_bits == out_bits:
        return from_bits(bits, out)
    if in_bits > out_bits:
        ratio = in_bits // out_bits
        mask = np.uint64((1 << out_bits) - 1)
        pieces = [(bits >> np.uint64(k * out_bits)) & mask for k in range(ratio)]
        return from_bits(np.stack(pieces, axis=-1), out)
    ratio = out_bits // in_bits
    if x.ndim == 0 or x.shape[-1] != ratio:
        raise EvaluationError(
            f"bitcast-convert: the operand's last dimension must be {ratio} (the ratio of bit "
            f"widths) to make {dtypes.type_name(instr.shape.element_type)}, got shape "
            f"{list(x.shape)} (instruction %{instr.name})")
    combined = np.zeros(x.shape[:-1], np.uint64)
    for k in range(ratio):
        combined |= bits[..., k] << np.uint64(k * in_bits)
    return from_bits(combined, out)


def _bitcast_bytes(x, out, in_bits, out_bits):
    x = np.asarray(x, order="C")  # (ascontiguousarray would make a 0-d array 1-d)
    if in_bits == out_bits:
        return x.view(out)
    if in_bits > out_bits:
        flat = x.reshape(x.shape + (1,)).view(out)
        return flat.reshape(x.shape + (in_bits // out_bits,))
    ratio = out_bits // in_bits
    if x.ndim == 0 or x.shape[-1] != ratio:
        raise EvaluationError(
            f"bitcast-convert: the operand's last dimension must be {ratio} (the ratio of bit "
            f"widths), got shape {list(x.shape)}")
    return x.view(out).reshape(x.shape[:-1])


@kernel("reduce-precision")
def reduce_precision(ctx, instr, args):
    """Rounds the mantissa to ``mantissa_bits`` (to nearest even), then sends exponents above
    the reduced range to inf and those at or below its bottom to zero (denormals flush); NaNs
    pass through unchanged. XLA's bit algorithm on the type's own bits for f16, bf16, f32 and
    f64; the f8/f6/f4 types work on their exact f16 value (f8e8m0fnu on f32), as XLA:CPU
    does (measured: an f8e5m2 denormal survives e5m2)."""
    (x,) = args
    exponent_bits = instr.attrs["exponent_bits"]
    mantissa_bits = instr.attrs["mantissa_bits"]
    if x.dtype.name in ("float16", "bfloat16", "float32", "float64"):
        return _reduce_precision_bits(x, exponent_bits, mantissa_bits)
    wide = np.float32 if x.dtype.name == "float8_e8m0fnu" else np.float16
    reduced = _reduce_precision_bits(x.astype(np.float32).astype(wide), exponent_bits,
                                     mantissa_bits)
    return convert(reduced, x.dtype)


def _reduce_precision_bits(x, exponent_bits, mantissa_bits):
    nbits = x.dtype.itemsize * 8
    src_mantissa = 7 if x.dtype.name == "bfloat16" else int(np.finfo(x.dtype).nmant)
    src_exponent = nbits - 1 - src_mantissa
    u = to_bits(x)
    one = np.uint64(1)
    sign_mask = one << np.uint64(nbits - 1)
    exp_mask = np.uint64(((1 << src_exponent) - 1) << src_mantissa)
    is_nan = (u & ~sign_mask) > exp_mask
    if mantissa_bits < src_mantissa:
        shift = src_mantissa - mantissa_bits
        last_bit = np.uint64(1 << shift)
        # Round to nearest even: add 0111... plus the last kept bit, then truncate.
        bias = ((u & last_bit) >> np.uint64(shift)) + np.uint64((1 << (shift - 1)) - 1)
        u = (u + bias) & ~(last_bit - one)
        if nbits < 64:
            u &= np.uint64((1 << nbits) - 1)
    if exponent_bits < src_exponent:
        exponent_bias = (1 << (src_exponent - 1)) - 1
        reduced_bias = (1 << (exponent_bits - 1)) - 1
        max_exp = np.uint64((exponent_bias + reduced_bias) << src_mantissa)
        min_exp = np.uint64((exponent_bias - reduced_bias) << src_mantissa)
        exponent = u & exp_mask
        signed_zero = u & sign_mask
        u = np.where(exponent > max_exp, signed_zero | exp_mask, u)
        u = np.where(exponent <= min_exp, signed_zero, u)
    return np.where(is_nan, x, from_bits(u, x.dtype))


@kernel("stochastic-convert")
def stochastic_convert(ctx, instr, args):
    """Float -> signed integer, rounding the magnitude up when the random bits (read as a
    fraction of 2^bits) are below its fractional part (XLA's evaluator and
    StochasticConvertDecomposer). inf/out-of-range saturate, NaN -> 0. XLA implements no
    other target types."""
    x, random = args
    out = _result_dtype(instr)
    if _kind(out) != "int" or not _signed(out):
        raise UnimplementedError(
            f"stochastic-convert: stochastically converting from type "
            f"{dtypes.type_name(dtypes.from_dtype(x.dtype))} to type "
            f"{dtypes.type_name(instr.shape.element_type)} is not implemented "
            f"(instruction %{instr.name})")
    bits = bit_width(out)
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    value = x.astype(_F64)
    # The bounds as the operand's float type holds them (the comparison is done there).
    lo_f = float(convert(np.asarray(float(lo)), x.dtype).astype(_F64))
    hi_f = float(convert(np.asarray(float(hi)), x.dtype).astype(_F64))
    with np.errstate(all="ignore"):
        magnitude = np.abs(value)
        finite = np.isfinite(value)
        truncated_f = np.where(finite, np.trunc(magnitude), 0.0)
        fraction = magnitude - truncated_f
        fixed = np.where(finite, np.ldexp(fraction, bit_width(random.dtype)), 0.0)
        fixed = np.minimum(fixed, 2.0 ** 64 - 2048).astype(np.uint64)
        truncated = np.where(truncated_f < 2.0 ** 63, truncated_f, 0).astype(np.int64)
        up = random.astype(np.uint64) < fixed
        # Rounding INT_MAX up happens only for operands in (min, -max): they become min.
        rounded = np.where(up & (truncated == hi), lo, truncated + up)
        result = np.where(np.signbit(value), -rounded, rounded)
        result = np.where(value >= hi_f, hi, result)
        result = np.where(value <= lo_f, lo, result)
        result = np.where(np.isnan(value), 0, result)
    return wrap_int(result, out)


# -- pass-through ops and constants ---------------------------------------------------------


def _copy_value(value):
    return map_tuples(value, lambda v: v.copy() if isinstance(v, np.ndarray) else v)


@kernel("copy")
def copy(ctx, instr, args):
    return _copy_value(args[0])


@kernel("domain")
def domain(ctx, instr, args):
    return args[0]


@kernel("constant")
def constant(ctx, instr, args):
    """The literal's value (a writable copy: a Literal's array is read-only)."""
    return _copy_value(literal_to_value(instr.attrs["literal"]))

"""Interpreter kernels of the real-valued elementwise ops: integer arithmetic with XLA's
overflow rules (division by zero, INT_MIN / -1, shifts past the width, wrap-around) on every
integer width, float arithmetic and functions with their special values, narrow floats computed
in f32, compare (every direction and comparison type), clamp, select, and the pass-through ops.

Expected values are the operation-semantics page's examples (spec 002), Python-integer
references of the rules, or literals that came from XLA:CPU via jax 0.10.2 (said so below)."""

import math

import ml_dtypes
import numpy as np
import pytest
from elementwise_eval_helpers import (
    FLOATS,
    INTS,
    NARROW_FLOATS,
    SIGNED,
    UNSIGNED,
    assert_close,
    assert_same,
    bits_of,
    int_range,
    ints,
    run,
    values,
    wrap,
)

from xlapy import ops
from xlapy.interpreter import EvaluationError, UnimplementedError, evaluate
from xlapy.ops.builder import XlaBuilder
from xlapy.shape import PrimitiveType, Shape, parse_shape

NAN, INF = float("nan"), float("inf")


def name(dtype):
    return np.dtype(dtype).name


def sample_ints(dtype, count=24, seed=0):
    """Edge values of an integer type (min, max, 0, +-1, ...) and random ones."""
    lo, hi = int_range(dtype)
    edge = {lo, hi, 0, 1, lo + 1, hi - 1, 2, 3}
    if lo < 0:
        edge |= {-1, -2, -3}
    rng = np.random.default_rng(seed)
    rand = [lo + int(r) % (hi - lo + 1) for r in rng.integers(0, 2**62, count)]
    return sorted(v for v in edge | set(rand) if lo <= v <= hi)


def pairs(dtype):
    vals = sample_ints(dtype, 10)
    return [a for a in vals for _ in vals], [b for _ in vals for b in vals]


# -- the operation-semantics page's examples ---------------------------------------------------


def test_spec_clamp_example():
    # "Clamp(min, operand, max) = s32[3]{0, 5, 6}" with scalar bounds 0 and 6.
    b = XlaBuilder("clamp")
    x = ops.Parameter(b, 0, parse_shape("s32[3]"), "x")
    comp = b.build(ops.Clamp(ops.ConstantR0(b, np.int32(0)), x, ops.ConstantR0(b, np.int32(6))))
    assert_same(evaluate(comp, np.array([-1, 5, 9], np.int32)), np.array([0, 5, 6], np.int32))


def test_spec_select_examples():
    v1 = np.array([1, 2, 3, 4], np.int32)
    v2 = np.array([100, 200, 300, 400], np.int32)
    pred = np.array([True, False, False, True])
    assert_same(run("select", [pred, v1, v2], np.int32), np.array([1, 200, 300, 4], np.int32))
    assert_same(run("select", [np.bool_(True), v1, v2], np.int32, result_dims=[4]), v1)
    assert_same(run("select", [np.bool_(False), v1, v2], np.int32, result_dims=[4]), v2)


def test_spec_select_between_tuples_with_a_scalar_pred():
    text = """HloModule t
ENTRY e {
  p = pred[] parameter(0)
  a = (s32[2], f32[]) parameter(1)
  b = (s32[2], f32[]) parameter(2)
  ROOT r = (s32[2], f32[]) select(p, a, b)
}"""
    a = (np.array([1, 2], np.int32), np.float32(1.5))
    bb = (np.array([3, 4], np.int32), np.float32(-2))
    got = evaluate(text, np.bool_(False), a, bb)
    assert isinstance(got, tuple)
    assert_same(got[0], bb[0])
    assert_same(got[1], np.asarray(bb[1]))
    assert_same(evaluate(text, np.bool_(True), a, bb)[0], a[0])


def test_spec_sign_definition():
    # sgn(x) = -1 (x < 0), -0 (x = -0), NaN (x = NaN), +0 (x = +0), 1 (x > 0).
    for dtype in FLOATS:
        x = values(dtype, [-2.5, -0.0, NAN, 0.0, 3.0])
        assert_same(run("sign", [x]), values(dtype, [-1.0, -0.0, NAN, 0.0, 1.0]))


def test_spec_rem_takes_the_dividend_sign():
    # "the sign of the result is taken from the dividend, and the absolute value of the result
    # is always less than the divisor's absolute value"
    a = np.array([7, -7, 7, -7], np.int32)
    b = np.array([3, 3, -3, -3], np.int32)
    assert_same(run("remainder", [a, b]), np.array([1, -1, 1, -1], np.int32))
    fa, fb = np.float32([7.5, -7.5, 7.5, -7.5]), b.astype(np.float32)
    assert_same(run("remainder", [fa, fb]), np.array([1.5, -1.5, 1.5, -1.5], np.float32))


def test_spec_imag_and_real_of_a_real_operand():
    # Imag of a floating-point operand returns 0; Real returns the same value.
    x = np.array([1.5, -np.inf, np.nan], np.float32)
    assert_same(run("imag", [x]), np.zeros(3, np.float32))
    assert_same(run("real", [x]), x)


def test_spec_is_finite():
    for dtype in [np.float32, np.float64, np.float16, ml_dtypes.bfloat16, ml_dtypes.float8_e5m2]:
        x = values(dtype, [1.0, -0.0, INF, -INF, NAN])
        assert_same(run("is-finite", [x], np.bool_), np.array([1, 1, 0, 0, 0], bool))


def test_builder_broadcast_dimensions_add():
    # Add(matrix, vector, broadcast_dimensions={1}) adds the vector to every row.
    b = XlaBuilder("bcast")
    m = ops.Parameter(b, 0, parse_shape("f32[2,3]"), "m")
    v = ops.Parameter(b, 1, parse_shape("f32[3]"), "v")
    comp = b.build(ops.Add(m, v, [1]))
    got = evaluate(comp, np.arange(6, dtype=np.float32).reshape(2, 3), np.float32([10, 20, 30]))
    assert_same(got, np.float32([[10, 21, 32], [13, 24, 35]]))


# -- integer arithmetic --------------------------------------------------------------------------


def ref_divide(a, b, dtype):
    lo, _ = int_range(dtype)
    if b == 0:
        return wrap(-1, dtype)  # all bits set, for unsigned types too
    if a == lo and b == -1 and lo < 0:
        return lo
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def ref_remainder(a, b, dtype):
    lo, _ = int_range(dtype)
    if b == 0:
        return a
    if a == lo and b == -1 and lo < 0:
        return 0
    return a - ref_divide(a, b, dtype) * b


@pytest.mark.parametrize("dtype", INTS, ids=name)
def test_integer_divide_and_remainder(dtype):
    a, b = pairs(dtype)
    x, y = ints(a, dtype), ints(b, dtype)
    assert_same(run("divide", [x, y]), ints([ref_divide(p, q, dtype) for p, q in zip(a, b)], dtype))
    assert_same(run("remainder", [x, y]),
                ints([ref_remainder(p, q, dtype) for p, q in zip(a, b)], dtype))


def test_integer_divide_by_zero_and_int_min_as_xla():
    # From XLA:CPU via jax 0.10.2.
    cases = [
        (np.int8, [-128, -128, 7, -7, 7, -7, 100, 0], [-1, 0, 2, 2, -2, -2, 0, 0],
         [-128, -1, 3, -3, -3, 3, -1, -1], [0, -128, 1, -1, 1, -1, 100, 0]),
        (np.uint8, [7, 255, 0, 5, 100], [2, 3, 0, 0, 255], [3, 85, 255, 255, 0], [1, 0, 0, 5, 100]),
        (ml_dtypes.int4, [-8, -8, 7, -7, 5, 3], [-1, 0, 2, 2, 0, -3], [-8, -1, 3, -3, -1, -1],
         [0, -8, 1, -1, 5, 0]),
        (ml_dtypes.uint4, [15, 7, 0, 9], [0, 2, 0, 4], [15, 3, 15, 2], [15, 1, 0, 1]),
        (ml_dtypes.int2, [-2, -2, 1, -1], [-1, 0, 0, 1], [-2, -1, -1, -1], [0, -2, 1, 0]),
        (np.int64, [-2**63, -2**63, 7, -9], [-1, 0, -2, 0], [-2**63, -1, -3, -1], [0, -2**63, 1, -9]),
        (np.uint64, [2**64 - 1, 5, 0], [0, 2, 0], [2**64 - 1, 2, 2**64 - 1], [2**64 - 1, 1, 0]),
    ]
    for dtype, a, b, div, rem in cases:
        x, y = ints(a, dtype), ints(b, dtype)
        assert_same(run("divide", [x, y]), ints(div, dtype))
        assert_same(run("remainder", [x, y]), ints(rem, dtype))


@pytest.mark.parametrize("dtype", INTS, ids=name)
def test_integer_add_subtract_multiply_wrap(dtype):
    a, b = pairs(dtype)
    x, y = ints(a, dtype), ints(b, dtype)
    for opcode, fn in [("add", lambda p, q: p + q), ("subtract", lambda p, q: p - q),
                       ("multiply", lambda p, q: p * q), ("maximum", max), ("minimum", min)]:
        want = ints([wrap(fn(p, q), dtype) for p, q in zip(a, b)], dtype)
        assert_same(run(opcode, [x, y]), want)


@pytest.mark.parametrize("dtype", SIGNED, ids=name)
def test_integer_negate_abs_sign(dtype):
    vals = sample_ints(dtype)
    x = ints(vals, dtype)
    lo, _ = int_range(dtype)
    assert_same(run("negate", [x]), ints([wrap(-v, dtype) for v in vals], dtype))
    assert_same(run("abs", [x]), ints([wrap(abs(v), dtype) for v in vals], dtype))  # abs(MIN) = MIN
    assert_same(run("sign", [x]), ints([(v > 0) - (v < 0) for v in vals], dtype))
    assert run("abs", [ints([lo], dtype)])[0] == lo


@pytest.mark.parametrize("dtype", UNSIGNED, ids=name)
def test_unsigned_negate_wraps(dtype):
    vals = sample_ints(dtype)
    assert_same(run("negate", [ints(vals, dtype)]), ints([wrap(-v, dtype) for v in vals], dtype))


@pytest.mark.parametrize("dtype", INTS, ids=name)
def test_bitwise_ops_popcnt_clz(dtype):
    n = bits_of(dtype)
    a, b = pairs(dtype)
    x, y = ints(a, dtype), ints(b, dtype)
    mask = (1 << n) - 1
    for opcode, fn in [("and", lambda p, q: p & q), ("or", lambda p, q: p | q),
                       ("xor", lambda p, q: p ^ q)]:
        assert_same(run(opcode, [x, y]), ints([wrap(fn(p, q), dtype) for p, q in zip(a, b)], dtype))
    vals = sample_ints(dtype)
    v = ints(vals, dtype)
    assert_same(run("not", [v]), ints([wrap(~p, dtype) for p in vals], dtype))
    # Counted over the type's own width: popcnt(-1) = width, clz(0) = width.
    assert_same(run("popcnt", [v]), ints([wrap((p & mask).bit_count(), dtype) for p in vals], dtype))
    assert_same(run("count-leading-zeros", [v]),
                ints([wrap(n - (p & mask).bit_length(), dtype) for p in vals], dtype))


def test_popcnt_clz_as_xla():
    # From XLA:CPU via jax 0.10.2 (the int_bit_ops fixture's inputs).
    x = np.array([0, 1, -1, 0x7FFFFFFF, -2147483648, 0x00F0F000, 255], np.int32)
    assert_same(run("popcnt", [x]), np.array([0, 1, 32, 31, 1, 8, 8], np.int32))
    assert_same(run("count-leading-zeros", [x]), np.array([32, 31, 0, 1, 0, 8, 24], np.int32))
    u = np.array([0, 1, 0xFFFF, 0x8000, 0x0F0F, 3, 4], np.uint16)
    assert_same(run("count-leading-zeros", [u]), np.array([16, 15, 0, 0, 4, 14, 13], np.uint16))
    s = np.array([0, -1, 1, -128, 127, 64, -3], np.int8)
    assert_same(run("count-leading-zeros", [s]), np.array([8, 0, 7, 0, 1, 1, 0], np.int8))


def ref_shift(kind, a, s, dtype):
    n = bits_of(dtype)
    mask = (1 << n) - 1
    amount = s & mask  # the amount read as an unsigned n-bit number
    signed = a - (1 << n) if (a & mask) >> (n - 1) and int_range(dtype)[0] == 0 else a
    if kind == "shift-left":
        return wrap((a << amount) if amount < n else 0, dtype)
    if kind == "shift-right-logical":
        return wrap(((a & mask) >> amount) if amount < n else 0, dtype)
    return wrap(signed >> amount if amount < n else (-1 if signed < 0 else 0), dtype)


@pytest.mark.parametrize("dtype", INTS, ids=name)
@pytest.mark.parametrize("kind", ["shift-left", "shift-right-arithmetic", "shift-right-logical"])
def test_shifts_past_the_width(kind, dtype):
    n = bits_of(dtype)
    vals = sample_ints(dtype, 6)
    lo, hi = int_range(dtype)
    amounts = sorted({a for a in [0, 1, n - 1, n, n + 1, hi, 2, lo] if lo <= a <= hi} |
                     ({-1} if lo < 0 else set()))
    a = [v for v in vals for _ in amounts]
    s = [t for _ in vals for t in amounts]
    want = ints([ref_shift(kind, p, q, dtype) for p, q in zip(a, s)], dtype)
    assert_same(run(kind, [ints(a, dtype), ints(s, dtype)]), want)


def test_shifts_as_xla():
    # From XLA:CPU via jax 0.10.2 (the int_shifts fixture, s32): amounts <0, 0, 31, 32, 33, 100.
    x = np.array([1, -8, 0x40000001, -1, 12345, -2147483648, 7], np.int32)
    s = np.array([-1, 0, 1, 31, 32, 33, 100], np.int32)
    assert_same(run("shift-left", [x, s]), np.array([0, -8, -2147483646, -2147483648, 0, 0, 0], np.int32))
    assert_same(run("shift-right-arithmetic", [x, s]), np.array([0, -8, 536870912, -1, 0, -1, 0], np.int32))
    assert_same(run("shift-right-logical", [x, s]), np.array([0, -8, 536870912, 1, 0, 0, 0], np.int32))
    x4 = ints([1, -8, -1, 3, 7], ml_dtypes.int4)
    s4 = ints([3, 1, 4, -1, 2], ml_dtypes.int4)
    assert_same(run("shift-right-arithmetic", [x4, s4]), ints([0, -4, -1, 0, 1], ml_dtypes.int4))
    assert_same(run("shift-right-logical", [x4, s4]), ints([0, 4, 0, 0, 1], ml_dtypes.int4))
    u4 = ints([1, 8, 15, 3], ml_dtypes.uint4)
    assert_same(run("shift-right-arithmetic", [u4, ints([3, 1, 4, 12], ml_dtypes.uint4)]),
                ints([0, 12, 15, 0], ml_dtypes.uint4))


def ref_mulhi(a, b, dtype):
    n = bits_of(dtype)
    return wrap((a * b) >> n, dtype)


@pytest.mark.parametrize("dtype", INTS, ids=name)
def test_mulhi_is_the_high_half(dtype):
    a, b = pairs(dtype)
    got = run("mulhi", [ints(a, dtype), ints(b, dtype)])
    assert_same(got, ints([ref_mulhi(p, q, dtype) for p, q in zip(a, b)], dtype))


def ref_power(a, b, dtype):
    """XLA:CPU's integer power (checked on every width in tests/fixtures/xla_hlo): the
    exponent's low 6 bits by squaring; an exponent with its sign bit set (unsigned ones too)
    gives 1 for base 1, +-1 by parity for base -1 (all bits set), 0 otherwise."""
    bits = np.dtype(dtype).itemsize * 8
    mask = (1 << bits) - 1
    ua, ub = a & mask, b & mask
    if ub >> (bits - 1):
        return wrap(1 if ua == 1 else ((mask if ub & 1 else 1) if ua == mask else 0), dtype)
    return wrap(pow(ua, ub & 63, 1 << 64), dtype)


@pytest.mark.parametrize("dtype", INTS, ids=name)
def test_integer_power(dtype):
    a, b = pairs(dtype)
    got = run("power", [ints(a, dtype), ints(b, dtype)])
    assert_same(got, ints([ref_power(p, q, dtype) for p, q in zip(a, b)], dtype))


def test_integer_power_negative_exponents_as_xla():
    # From XLA:CPU via jax 0.10.2 (stablehlo.power on s32): (-1)^-1 = -1, (-1)^-2 = 1,
    # 2^-1 = 0, 1^-5 = 1, 0^-1 = 0; 2^31 wraps.
    a = np.array([-1, -1, 2, 1, 0, 2, -2, 3], np.int32)
    b = np.array([-1, -2, -1, -5, -1, 31, 31, 0], np.int32)
    assert_same(run("power", [a, b]), np.array([-1, 1, 0, 1, 0, -2**31, -2**31, 1], np.int32))


def test_pred_arithmetic_is_logical():
    a = np.array([0, 0, 1, 1], bool)
    b = np.array([0, 1, 0, 1], bool)
    or_, and_ = np.array([0, 1, 1, 1], bool), np.array([0, 0, 0, 1], bool)
    for opcode, want in [("add", or_), ("or", or_), ("maximum", or_), ("multiply", and_),
                         ("and", and_), ("minimum", and_), ("xor", np.array([0, 1, 1, 0], bool))]:
        assert_same(run(opcode, [a, b]), want)
    assert_same(run("not", [a]), ~a)


# -- floats --------------------------------------------------------------------------------------


WITH_NAN = [t for t in FLOATS if "float4" not in name(t) and "float6" not in name(t)]


@pytest.mark.parametrize("dtype", WITH_NAN, ids=name)
def test_max_min_propagate_nan_and_order_zeros(dtype):
    # XLA:CPU (behaviour doc): NaN in either operand gives NaN; max(-0, +0) = +0, min = -0.
    x = values(dtype, [NAN, 1.0, NAN, 0.0, -0.0, -0.0, 2.0, -1.0])
    y = values(dtype, [1.0, NAN, NAN, -0.0, 0.0, -0.0, 2.0, 0.5])
    assert_same(run("maximum", [x, y]), values(dtype, [NAN, NAN, NAN, 0.0, 0.0, -0.0, 2.0, 0.5]))
    assert_same(run("minimum", [x, y]), values(dtype, [NAN, NAN, NAN, -0.0, -0.0, -0.0, 2.0, -1.0]))


def test_f32_special_values_as_xla():
    # From XLA:CPU via jax 0.10.2: x / 0, fmod signs, C99 pow, atan2 of signed zeros.
    x = np.array([1, -1, 0, -0.0, 5.5, -5.5, 100, INF, NAN, 2, -INF, 1, -2, 0, -0.0], np.float32)
    y = np.array([0, 0, 0, -0.0, 2, 2, 0.5, 2, 0, -3, -INF, NAN, 0.5, -1, -1], np.float32)
    assert_same(run("divide", [x, y]), np.float32(
        [INF, -INF, NAN, NAN, 2.75, -2.75, 200, INF, NAN, -0.6666666865348816, NAN, NAN, -4, -0.0, 0]))
    assert_same(run("remainder", [x, y]), np.float32(
        [NAN, NAN, NAN, NAN, 1.5, -1.5, 0, NAN, NAN, 2, NAN, NAN, -0.0, 0, -0.0]))
    assert_same(run("power", [x, y]), np.float32(
        [1, 1, 1, 1, 30.25, 30.25, 10, INF, 1, 0.125, 0, 1, NAN, INF, -INF]))
    assert_close(run("atan2", [x, y]), np.float32(
        [1.5707963705062866, -1.5707963705062866, 0, -3.1415927410125732, 1.2220252752304077,
         -1.2220252752304077, 1.5657963752746582, 1.5707963705062866, NAN, 2.5535900592803955,
         -2.356194496154785, NAN, -1.3258177042007446, 3.1415927410125732, -3.1415927410125732]), 1)


def test_f32_functions_at_special_values_as_xla():
    # From XLA:CPU via jax 0.10.2.
    u = np.float32([0, -0.0, -1, INF, -INF, NAN, 1, 89, -1e-8])
    expected = {
        "log": [-INF, -INF, NAN, INF, NAN, NAN, 0, 4.488636493682861, NAN],
        "sqrt": [0, -0.0, NAN, INF, NAN, NAN, 1, 9.433980941772461, NAN],
        "exponential": [1, 1, 0.3678794503211975, INF, 0, NAN, 2.7182817459106445, INF, 1],
        "log-plus-one": [0, -0.0, -INF, INF, NAN, NAN, 0.6931471824645996, 4.499809741973877,
                         -9.99999993922529e-09],
        "exponential-minus-one": [0, -0.0, -0.6321205496788025, INF, -1, NAN, 1.7182817459106445,
                                  INF, -9.99999993922529e-09],
        "rsqrt": [INF, -INF, NAN, 0, NAN, NAN, 1, 0.10599978268146515, NAN],
        "cbrt": [0, -0.0, -1, INF, -INF, NAN, 1, 4.464745044708252, -0.002154434798285365],
        "tanh": [0, -0.0, -0.7615941762924194, 1, -1, NAN, 0.7615941762924194, 1,
                 -9.99999993922529e-09],
        "logistic": [0.5, 0.5, 0.2689414322376251, 1, 0, NAN, 0.7310585975646973, 1, 0.5],
        "tan": [0, -0.0, -1.5574077367782593, NAN, NAN, NAN, 1.5574077367782593,
                1.6858253479003906, -9.99999993922529e-09],
    }
    for opcode, want in expected.items():
        assert_close(run(opcode, [u]), np.float32(want), 1)


def test_erf_as_xla():
    # From XLA:CPU via jax 0.10.2 (lax.erf).
    x = np.float32([-3, -0.5, -0.0, 0, 0.5, 4, INF, -INF, NAN])
    assert_close(run("erf", [x]), np.float32(
        [-0.9999779462814331, -0.5204998850822449, -0.0, 0, 0.5204998850822449, 1, 1, -1, NAN]), 1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16],
                         ids=name)
def test_rounding_ops(dtype):
    # From XLA:CPU via jax 0.10.2 (f32): afz rounds halves away from zero, even to even.
    x = values(dtype, [0.5, 1.5, 2.5, -0.5, -2.5, 5.5, -0.4, -0.0, INF, NAN])
    assert_same(run("round-nearest-afz", [x]), values(dtype, [1, 2, 3, -1, -3, 6, -0.0, -0.0, INF, NAN]))
    assert_same(run("round-nearest-even", [x]), values(dtype, [0, 2, 2, -0.0, -2, 6, -0.0, -0.0, INF, NAN]))
    assert_same(run("floor", [x]), values(dtype, [0, 1, 2, -1, -3, 5, -1, -0.0, INF, NAN]))
    assert_same(run("ceil", [x]), values(dtype, [1, 2, 3, -0.0, -2, 6, -0.0, -0.0, INF, NAN]))


def test_round_afz_just_below_a_half():
    x = np.float32([0.49999997, -0.49999997, 8388609.0, 2.5000002])
    assert_same(run("round-nearest-afz", [x]), np.float32([0, -0.0, 8388609.0, 3]))


def test_sign_of_nan_keeps_its_sign_bit():
    x = np.array([0x7FC00000, 0xFFC00000], np.uint32).view(np.float32)
    got = run("sign", [x])
    assert got.view(np.uint32).tolist() == [0x7FC00000, 0xFFC00000]


@pytest.mark.parametrize("opcode,fn", [
    ("exponential", math.exp), ("log", math.log), ("sine", math.sin), ("cosine", math.cos),
    ("tan", math.tan), ("tanh", math.tanh), ("sqrt", math.sqrt), ("cbrt", lambda v: math.copysign(abs(v) ** (1 / 3), v)),
    ("exponential-minus-one", math.expm1), ("log-plus-one", math.log1p), ("erf", math.erf),
    ("asin", math.asin), ("acos", math.acos), ("asinh", math.asinh), ("acosh", math.acosh),
    ("atanh", math.atanh), ("sinh", math.sinh), ("cosh", math.cosh),
    ("rsqrt", lambda v: 1 / math.sqrt(v)), ("logistic", lambda v: 1 / (1 + math.exp(-v))),
])
def test_f32_functions_are_within_an_ulp(opcode, fn):
    rng = np.random.default_rng(3)
    x = rng.uniform(0.05, 0.95, 64).astype(np.float32)
    if opcode == "acosh":
        x = x + np.float32(1)
    want = np.float32([fn(float(v)) for v in x])
    # f32 tanh is XLA:CPU's rational approximation (numeric.tanh: up to 5 ulps from tanh)
    assert_close(run(opcode, [x]), want, 5 if opcode == "tanh" else 1)
    x64 = x.astype(np.float64)
    assert_close(run(opcode, [x64]), np.array([fn(float(v)) for v in x64]), 2)


def test_expm1_and_log1p_are_accurate_near_zero():
    x = np.float32([1e-8, -1e-7, 3e-6])
    assert_close(run("exponential-minus-one", [x]), np.float32([math.expm1(float(v)) for v in x]), 1)
    assert_close(run("log-plus-one", [x]), np.float32([math.log1p(float(v)) for v in x]), 1)


def test_narrow_float_arithmetic_rounds_once_from_f32():
    # From XLA:CPU via jax 0.10.2: f16 65504 + 16 = 65520 in f32, which rounds to inf in f16;
    # bf16 1 + 2^-8 is a tie that rounds to even; f8e4m3fn overflows to NaN (it has no inf).
    h = np.float16([65504, 65504, 1, 2048, 0.1])
    h2 = np.float16([16, 8, 2**-11, 1, 0.2])
    assert_same(run("add", [h, h2]), np.float16([INF, 65504, 1, 2048, 0.2998046875]))
    b = values(ml_dtypes.bfloat16, [1, 1, 256, 3.0e38])
    b2 = values(ml_dtypes.bfloat16, [2**-8, 2**-7, 1, 3.0e38])
    assert_same(run("add", [b, b2]), values(ml_dtypes.bfloat16, [1, 1.0078125, 256, INF]))
    e = values(ml_dtypes.float8_e4m3fn, [448, 240, 1, 0.5])
    e2 = values(ml_dtypes.float8_e4m3fn, [32, 16, 0.0625, 0.0625])
    assert_same(run("add", [e, e2]), values(ml_dtypes.float8_e4m3fn, [NAN, 256, 1, 0.5625]))


@pytest.mark.parametrize("dtype", NARROW_FLOATS, ids=name)
def test_narrow_floats_compute_in_f32(dtype):
    x = values(dtype, [0.5, 1.0, 1.5, 2.0, -3.0, 4.0])
    y = values(dtype, [0.5, 0.25, 1.0, -1.0, 1.5, 3.0])
    x32, y32 = x.astype(np.float32), y.astype(np.float32)
    for opcode, fn in [("add", np.add), ("subtract", np.subtract), ("multiply", np.multiply),
                       ("divide", np.divide)]:
        with np.errstate(all="ignore"):
            want = fn(x32, y32).astype(dtype)
        assert_same(run(opcode, [x, y]), want)
    got = run("exponential", [x])
    assert got.dtype == np.dtype(dtype)
    assert_same(got, np.exp(x32.astype(np.float64)).astype(np.float32).astype(dtype))


def test_mixed_precision_operands_meet_in_the_result_type():
    text = """HloModule t
ENTRY e {
  a = bf16[2] parameter(0)
  b = f32[2] parameter(1)
  ROOT r = f32[2] add(a, b)
}"""
    got = evaluate(text, np.array([1, 2], ml_dtypes.bfloat16), np.float32([1e-3, 0.5]))
    assert_same(got, np.float32([1.001, 2.5]))


def test_dynamic_operands_use_their_runtime_size():
    text = """HloModule t
ENTRY e {
  a = f32[<=4] parameter(0)
  b = f32[<=4] parameter(1)
  ROOT r = f32[<=4] multiply(a, b)
}"""
    assert_same(evaluate(text, np.float32([1, 2, 3]), np.float32([4, 5, 6])), np.float32([4, 10, 18]))


def test_scalar_operands():
    assert_same(run("add", [np.float32(1.5), np.float32(2)]), np.asarray(np.float32(3.5)))
    assert_same(run("divide", [np.int32(7), np.int32(0)]), np.asarray(np.int32(-1)))


# -- compare ---------------------------------------------------------------------------------------

DIRECTIONS = {"EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal,
              "GT": np.greater, "GE": np.greater_equal}


def compare(lhs, rhs, direction, ctype=None):
    attrs = f", direction={direction}" + (f", type={ctype}" if ctype else "")
    return run("compare", [lhs, rhs], np.bool_, attrs)


@pytest.mark.parametrize("dtype", WITH_NAN, ids=name)
def test_float_compare_is_ieee(dtype):
    x = values(dtype, [1.0, NAN, NAN, -0.0, 0.5, -1.0])
    y = values(dtype, [1.0, 1.0, NAN, 0.0, 1.0, -1.5])
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    for direction, fn in DIRECTIONS.items():
        assert_same(compare(x, y, direction), fn(x64, y64))
        assert_same(compare(x, y, direction, "FLOAT"), fn(x64, y64))


# In increasing total order; the first NaN gets its sign bit set below.
TOTAL_ORDER = [NAN, -INF, -2.0, -0.5, -0.0, 0.0, 0.5, 2.0, INF, NAN]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16,
                                   ml_dtypes.float8_e5m2, ml_dtypes.float8_e4m3, ml_dtypes.float8_e3m4],
                         ids=name)
def test_totalorder_compare(dtype):
    # -NaN < -inf < -finite < -0 < +0 < +finite < +inf < +NaN (the page's list).
    x = values(dtype, TOTAL_ORDER)
    x[0] = -x[0]  # -NaN
    n = len(x)
    lhs, rhs = np.repeat(x, n), np.tile(x, n)
    rank = np.arange(n)
    li, ri = np.repeat(rank, n), np.tile(rank, n)
    for direction, fn in DIRECTIONS.items():
        assert_same(compare(lhs, rhs, direction, "TOTALORDER"), fn(li, ri))


def test_totalorder_of_types_without_negative_zero():
    # f8e4m3fnuz: -0 has no encoding (it is the NaN); the NaN sorts first (XLA's
    # ToSignMagnitude); f8e8m0fnu has no sign and orders by its bits.
    t = ml_dtypes.float8_e4m3fnuz
    x = values(t, [NAN, -2.0, -0.5, 0.0, 0.5, 2.0])
    assert compare(x[:-1], x[1:], "LT", "TOTALORDER").all()
    e = np.array([0, 1, 127, 254, 255], np.uint8).view(ml_dtypes.float8_e8m0fnu)
    assert compare(e[:-1], e[1:], "LT", "TOTALORDER").all()


@pytest.mark.parametrize("dtype", INTS, ids=name)
def test_integer_compare(dtype):
    a, b = pairs(dtype)
    x, y = ints(a, dtype), ints(b, dtype)
    ctype = "SIGNED" if int_range(dtype)[0] < 0 else "UNSIGNED"
    for direction, fn in DIRECTIONS.items():
        want = np.array([fn(p, q) for p, q in zip(a, b)], bool)
        assert_same(compare(x, y, direction), want)
        assert_same(compare(x, y, direction, ctype), want)


def test_pred_compare_orders_false_before_true():
    a = np.array([0, 0, 1, 1], bool)
    b = np.array([0, 1, 0, 1], bool)
    assert_same(compare(a, b, "LT"), np.array([0, 1, 0, 0], bool))
    assert_same(compare(a, b, "GE", "UNSIGNED"), np.array([1, 0, 1, 1], bool))


# -- clamp ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16], ids=name)
def test_clamp_nan_and_crossed_bounds(dtype):
    # XLA:CPU (behaviour doc): a NaN operand or bound gives NaN; lo > hi gives hi.
    lo = values(dtype, [-1.0, 0.0, NAN, 2.0, 0.0, 3.0])
    x = values(dtype, [5.0, NAN, 0.5, 0.0, -2.0, 1.0])
    hi = values(dtype, [1.0, 1.0, 1.0, NAN, 1.0, -3.0])
    assert_same(run("clamp", [lo, x, hi]), values(dtype, [1.0, NAN, NAN, NAN, 0.0, -3.0]))


def test_clamp_as_xla():
    # From XLA:CPU via jax 0.10.2 (the select_clamp fixture's bounds).
    lo = np.float32([-1, 0, 1, 2, 0.5, 3.0])
    hi = np.float32([1, 1, 0, 3, 0.5, -3.0])
    x = np.float32([0.25, -4, 0.5, 5, 9, 1])
    assert_same(run("clamp", [lo, x, hi]), np.float32([0.25, 0, 0, 3, 0.5, -3]))


@pytest.mark.parametrize("dtype", INTS, ids=name)
def test_clamp_integers_with_scalar_bounds(dtype):
    vals = sample_ints(dtype)
    lo_v, hi_v = vals[2], vals[-3]
    got = run("clamp", [ints([lo_v], dtype).reshape(()), ints(vals, dtype),
                        ints([hi_v], dtype).reshape(())], result_dims=[len(vals)])
    assert_same(got, ints([min(max(v, lo_v), hi_v) for v in vals], dtype))


# -- select, copy, domain, constant ---------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS + INTS + [np.complex64, np.bool_], ids=name)
def test_select_keeps_every_type(dtype):
    x = np.arange(4).astype(np.float32).astype(dtype) if np.dtype(dtype).kind != "b" else \
        np.array([1, 0, 1, 0], bool)
    y = np.ones(4, np.float32).astype(dtype)
    pred = np.array([True, False, False, True])
    assert_same(run("select", [pred, x, y], dtype), np.where(pred, x, y).astype(dtype))


def test_copy_and_domain_pass_values_through():
    x = np.float32([1, NAN, -0.0])
    got = run("copy", [x])
    assert_same(got, x)
    assert got is not x
    assert_same(run("domain", [x]), x)
    text = """HloModule t
ENTRY e {
  p = (f32[2], s8[]) parameter(0)
  ROOT r = (f32[2], s8[]) copy(p)
}"""
    got = evaluate(text, (np.float32([1, 2]), np.int8(3)))
    assert_same(got[0], np.float32([1, 2]))


def test_constant_gives_its_literal():
    text = """HloModule t
ENTRY e {
  c = bf16[3] constant({1.5, -2, 65280})
  p = bf16[3] parameter(0)
  ROOT r = bf16[3] add(c, p)
}"""
    got = evaluate(text, np.zeros(3, ml_dtypes.bfloat16))
    assert_same(got, values(ml_dtypes.bfloat16, [1.5, -2, 65280]))
    tup = evaluate("HloModule t\nENTRY e {\n  ROOT c = (s32[], pred[2]) constant((7, {1, 0}))\n}\n")
    assert_same(tup[0], np.asarray(np.int32(7)))
    assert_same(tup[1], np.array([True, False]))


# -- errors -----------------------------------------------------------------------------------------


def test_unsupported_type_is_an_xlapy_error():
    c = np.array([1 + 1j], np.complex64)
    with pytest.raises(UnimplementedError, match="remainder: unsupported element type c64"):
        run("remainder", [c, c])
    with pytest.raises(EvaluationError, match="compare: complex numbers compare only with EQ"):
        compare(c, c, "LT")


def test_shapes_of_results():
    # Every kernel returns exactly the result element type's dtype.
    b = XlaBuilder("shapes")
    x = ops.Parameter(b, 0, Shape.array(PrimitiveType.S4, [3]), "x")
    comp = b.build(ops.Tuple(b, [ops.Add(x, x), ops.PopulationCount(x), ops.Eq(x, x)]))
    got = evaluate(comp, ints([7, -8, 1], ml_dtypes.int4))
    assert_same(got[0], ints([-2, 0, 2], ml_dtypes.int4))
    assert_same(got[1], ints([3, 1, 1], ml_dtypes.int4))
    assert_same(got[2], np.array([True] * 3))

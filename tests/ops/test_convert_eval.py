"""Interpreter kernels of the element-type conversions: convert (every pair of array types:
saturating float -> int with NaN -> 0, wrapping int -> int, float -> pred as x != 0, rounding
into each narrow float with its overflow rule), bitcast-convert (same width, narrower with a
new minor dimension of little-endian pieces, wider consuming the last dimension, sub-byte
types), reduce-precision (XLA's bit algorithm), stochastic-convert, and the numeric helpers
other kernel families share (xlapy.interpreter.kernels.numeric).

Expected values are the operation-semantics page's examples (spec 002), references written
from the rules, or literals that came from XLA:CPU via jax 0.10.2 (said so below)."""

import math

import ml_dtypes
import numpy as np
import pytest
from elementwise_eval_helpers import (
    FLOATS,
    INTS,
    NARROW_FLOATS,
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
from xlapy.interpreter.kernels import numeric
from xlapy.ops.builder import XlaBuilder
from xlapy.shape import PrimitiveType, parse_shape

NAN, INF = float("nan"), float("inf")
ALL = FLOATS + INTS + [np.bool_, np.complex64, np.complex128]


def name(dtype):
    return np.dtype(dtype).name


def convert(x, dtype):
    return run("convert", [x], dtype)


# -- the page's examples --------------------------------------------------------------------------


def test_spec_convert_example():
    # "let b: f32[3] = convert(a, f32); then b == f32[3]{0.0, 1.0, 2.0}"
    b = XlaBuilder("convert")
    a = ops.Parameter(b, 0, parse_shape("s32[3]"), "a")
    comp = b.build(ops.ConvertElementType(a, PrimitiveType.F32))
    assert_same(evaluate(comp, np.array([0, 1, 2], np.int32)), np.float32([0, 1, 2]))


def test_spec_bitcast_convert_examples():
    # f32[10] -> f16[10,2]; f32[] -> f16[2]; f16[10,2] -> f32[10].
    x = np.linspace(-3, 3, 10).astype(np.float32)
    halves = run("bitcast-convert", [x], np.float16, result_dims=[10, 2])
    assert_same(halves, x.view(np.float16).reshape(10, 2))
    assert_same(run("bitcast-convert", [np.float32(1.0)], np.float16, result_dims=[2]),
                np.array([0, 0x3F80], np.uint16).view(np.float16))
    assert_same(run("bitcast-convert", [halves], np.float32, result_dims=[10]), x)


def test_spec_bitcast_convert_same_width_via_builder():
    # "an s32 element becomes an f32 element via the bitcast routine"
    b = XlaBuilder("bitcast")
    a = ops.Parameter(b, 0, parse_shape("s32[2]"), "a")
    comp = b.build(ops.BitcastConvertType(a, PrimitiveType.F32))
    assert_same(evaluate(comp, np.array([0x3F800000, -0x40000000], np.int32)), np.float32([1, -2]))


# -- float -> integer and integer -> integer -------------------------------------------------------


def ref_float_to_int(v, dtype):
    lo, hi = int_range(dtype)
    if math.isnan(v):
        return 0
    if v <= lo:
        return lo
    if v >= hi:
        return hi
    return int(v)  # truncates toward zero


@pytest.mark.parametrize("source", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16],
                         ids=name)
@pytest.mark.parametrize("dtype", INTS, ids=name)
def test_float_to_int_truncates_and_saturates(source, dtype):
    x = values(source, [NAN, -NAN, INF, -INF, 0.0, -0.0, 0.75, -0.75, 2.5, -2.5, 3.9, -3.9,
                        100.5, -100.5, 1e4, -1e4, 3e9, -3e9, 1e30, -1e30])
    want = ints([ref_float_to_int(float(v), dtype) for v in x.astype(np.float64)], dtype)
    assert_same(convert(x, dtype), want)


def test_float_to_int_as_xla():
    # From XLA:CPU via jax 0.10.2 (f64 sources; 2^63 and 2^64 saturate, NaN -> 0).
    f = np.array([NAN, -NAN, INF, -INF, 9.2233720368547758e18, -9.3e18, 1.8446744073709552e19,
                  2.5e19, -0.99, 0.99])
    assert_same(convert(f, np.int64), np.array(
        [0, 0, 2**63 - 1, -2**63, 2**63 - 1, -2**63, 2**63 - 1, 2**63 - 1, 0, 0], np.int64))
    assert_same(convert(f, np.uint64), np.array(
        [0, 0, 2**64 - 1, 0, 2**63, 0, 2**64 - 1, 2**64 - 1, 0, 0], np.uint64))
    assert_same(convert(f, ml_dtypes.int4), ints([0, 0, 7, -8, 7, -8, 7, 7, 0, 0], ml_dtypes.int4))
    assert_same(convert(f, ml_dtypes.uint2), ints([0, 0, 3, 0, 3, 0, 3, 3, 0, 0], ml_dtypes.uint2))


@pytest.mark.parametrize("source", INTS, ids=name)
@pytest.mark.parametrize("dtype", INTS, ids=name)
def test_int_to_int_wraps(source, dtype):
    lo, hi = int_range(source)
    vals = sorted(v for v in {lo, hi, 0, 1, lo + 1, hi - 1, hi // 2, lo // 2, 3} if lo <= v <= hi)
    x = ints(vals, source)
    assert_same(convert(x, dtype), ints([wrap(v, dtype) for v in vals], dtype))


@pytest.mark.parametrize("dtype", INTS + FLOATS + [np.complex64], ids=name)
def test_to_and_from_pred(dtype):
    # float -> pred is x != 0: NaN -> true, -0 -> false; pred -> number is 0 or 1.
    p = np.array([True, False])
    got = convert(p, dtype)
    assert_same(got, np.array([1, 0]).astype(np.float32).astype(dtype) if np.dtype(dtype).kind in "fc"
                or "float" in name(dtype) else ints([1, 0], dtype))
    if np.dtype(dtype).kind != "c":
        assert_same(convert(got, np.bool_), p)
    f = values(np.float32, [NAN, -0.0, 0.0, 2.0, -INF])
    assert_same(convert(f, np.bool_), np.array([1, 0, 0, 1, 1], bool))


# -- into and between floats -----------------------------------------------------------------------

# Edge values of the convert fixtures (denormal inputs left out: XLA:CPU flushes them).
EDGE = [NAN, INF, -INF, 0.0, -0.0, 1e-8, 0.5, 1.5, 2.5, -0.5, -2.5, 3.7, -3.7, 7.5, 8.0, -9.0,
        127.5, 128.0, 255.5, 256.0, -129.0, 300.7, 448.0, 464.0, 500.0, 57344.0, 61440.0, 65504.0,
        65520.0, 1e10, -1e10, 3.4e38, -3.4e38, 2147483520.0, 4294967040.0]

# From XLA:CPU via jax 0.10.2 (the convert_from_f32 and convert_exotic_narrow fixtures).
EDGE_AS_XLA = {
    ml_dtypes.bfloat16: [NAN, INF, -INF, 0, -0.0, 1.0011717677116394e-08, 0.5, 1.5, 2.5, -0.5, -2.5,
        3.703125, -3.703125, 7.5, 8, -9, 127.5, 128, 256, 256, -129, 300, 448, 464, 500, 57344,
        61440, 65536, 65536, 9999220736, -9999220736, INF, -INF, 2147483648, 4294967296],
    np.float16: [NAN, INF, -INF, 0, -0.0, 0, 0.5, 1.5, 2.5, -0.5, -2.5, 3.69921875, -3.69921875,
        7.5, 8, -9, 127.5, 128, 255.5, 256, -129, 300.75, 448, 464, 500, 57344, 61440, 65504, INF,
        INF, -INF, INF, -INF, INF, INF],
    ml_dtypes.float8_e4m3fn: [NAN, NAN, NAN, 0, -0.0, 0, 0.5, 1.5, 2.5, -0.5, -2.5, 3.75, -3.75,
        7.5, 8, -9, 128, 128, 256, 256, -128, 288, 448, 448, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN,
        NAN, NAN, NAN],
    ml_dtypes.float8_e5m2: [NAN, INF, -INF, 0, -0.0, 0, 0.5, 1.5, 2.5, -0.5, -2.5, 3.5, -3.5, 8, 8,
        -8, 128, 128, 256, 256, -128, 320, 448, 448, 512, 57344, INF, INF, INF, INF, -INF, INF,
        -INF, INF, INF],
    ml_dtypes.float8_e4m3b11fnuz: [NAN, NAN, NAN, 0, 0, 0, 0.5, 1.5, 2.5, -0.5, -2.5, 3.75, -3.75,
        7.5, 8, -9, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN,
        NAN, NAN, NAN],
    ml_dtypes.float8_e4m3fnuz: [NAN, NAN, NAN, 0, 0, 0, 0.5, 1.5, 2.5, -0.5, -2.5, 3.75, -3.75, 7.5,
        8, -9, 128, 128, NAN, NAN, -128, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN,
        NAN, NAN],
    ml_dtypes.float8_e5m2fnuz: [NAN, NAN, NAN, 0, 0, 0, 0.5, 1.5, 2.5, -0.5, -2.5, 3.5, -3.5, 8, 8,
        -8, 128, 128, 256, 256, -128, 320, 448, 448, 512, 57344, NAN, NAN, NAN, NAN, NAN, NAN, NAN,
        NAN, NAN],
    ml_dtypes.float8_e3m4: [NAN, INF, -INF, 0, -0.0, 0, 0.5, 1.5, 2.5, -0.5, -2.5, 3.75, -3.75, 7.5,
        8, -9, INF, INF, INF, INF, -INF, INF, INF, INF, INF, INF, INF, INF, INF, INF, -INF, INF,
        -INF, INF, INF],
    ml_dtypes.float8_e4m3: [NAN, INF, -INF, 0, -0.0, 0, 0.5, 1.5, 2.5, -0.5, -2.5, 3.75, -3.75, 7.5,
        8, -9, 128, 128, INF, INF, -128, INF, INF, INF, INF, INF, INF, INF, INF, INF, -INF, INF,
        -INF, INF, INF],
    ml_dtypes.float8_e8m0fnu: [NAN, NAN, NAN, NAN, NAN, 7.450580596923828e-09, 0.5, 2, 2, NAN, NAN,
        4, NAN, 8, 8, NAN, 128, 128, 256, 256, NAN, 256, 512, 512, 512, 65536, 65536, 65536, 65536,
        8589934592, NAN, NAN, NAN, 2147483648, 4294967296],
    ml_dtypes.float4_e2m1fn: [-0.0, 6, -6, 0, -0.0, 0, 0.5, 1.5, 2, -0.5, -2, 4, -4, 6, 6, -6, 6, 6,
        6, 6, -6, 6, 6, 6, 6, 6, 6, 6, 6, 6, -6, 6, -6, 6, 6],
}


@pytest.mark.parametrize("dtype", list(EDGE_AS_XLA), ids=name)
def test_f32_to_narrow_floats_as_xla(dtype):
    x = np.float32(EDGE)
    want = EDGE_AS_XLA[dtype]
    assert len(want) == len(EDGE)
    assert_same(convert(x, dtype), values(dtype, want))


def test_f32_to_narrow_overflow_rules():
    # Behaviour doc: f16 65519 -> 65504, 65520 -> inf; f8e4m3fn 464 -> 448 but 480 -> NaN (the
    # tie rounds to even 512, which overflows); f8e5m2 57344 stays, 61440 -> inf; fnuz: -0 -> +0.
    assert_same(convert(np.float32([65519, 65520]), np.float16), np.float16([65504, INF]))
    assert_same(convert(np.float32([464, 480]), ml_dtypes.float8_e4m3fn),
                values(ml_dtypes.float8_e4m3fn, [448, NAN]))
    assert_same(convert(np.float32([57344, 61440]), ml_dtypes.float8_e5m2),
                values(ml_dtypes.float8_e5m2, [57344, INF]))
    got = convert(np.float32([-0.0]), ml_dtypes.float8_e4m3fnuz)
    assert got.view(np.uint8).tolist() == [0]
    # f4e2m1fn has no NaN: every NaN becomes -0 (encoding 0x8); inf saturates to 6.
    f4 = convert(np.float32([NAN, -NAN, INF, -INF]), ml_dtypes.float4_e2m1fn)
    assert f4.view(np.uint8).tolist() == [8, 8, 7, 15]


def test_bf16_rounds_to_nearest_even_and_keeps_denormals():
    # Behaviour doc: 1.00390625 -> 1.0, 1.01171875 -> 1.015625; 1e-40 -> bf16 bits 0x0001.
    got = convert(np.float32([1.00390625, 1.01171875, 1e-40]), ml_dtypes.bfloat16)
    assert got.view(np.uint16).tolist() == [0x3F80, 0x3F82, 0x0001]


def test_f64_to_narrow_floats_as_xla():
    # From XLA:CPU via jax 0.10.2: f64 -> f16/bf16 rounds through f32 (62.453125999 becomes the
    # f32 tie 62.453125, then rounds to even); f64 -> f8/f4 rounds once.
    d = np.array([62.45312599451785, 0.2500000000009095, 1.2500000009313226, 2.0**24 + 2**16 + 1,
                  65519.99, 480.0, 464.00000001, 1e300, -1e300, NAN])
    expected = {
        np.float16: [62.4375, 0.25, 1.25, INF, 65504, 480, 464, INF, -INF, NAN],
        ml_dtypes.bfloat16: [62.5, 0.25, 1.25, 16777216, 65536, 480, 464, INF, -INF, NAN],
        ml_dtypes.float4_e2m1fn: [6, 0.5, 1.5, 6, 6, 6, 6, 6, -6, -0.0],
        ml_dtypes.float8_e4m3fn: [64, 0.25, 1.25] + [NAN] * 7,
        ml_dtypes.float8_e5m2: [64, 0.25, 1.25, INF, INF, 512, 448, INF, -INF, NAN],
        np.float32: [62.453125, 0.25, 1.25, 16842752, 65519.98828125, 480, 464, INF, -INF, NAN],
    }
    for dtype, want in expected.items():
        assert_same(convert(d, dtype), values(dtype, want))


def test_int_to_float_as_xla():
    # From XLA:CPU via jax 0.10.2: s32 -> bf16 rounds through f32 (2^24 + 2^16 + 1 -> 2^24);
    # s32 -> f8e5m2 rounds once (4609 -> 5120).
    i = np.array([16777217, 2**24 + 2**16 + 1, -(2**24 + 2**16 + 1), 2**31 - 1, 4609, 65520,
                  2**31 - 2**7 - 1], np.int32)
    expected = {
        np.float16: [INF, INF, -INF, INF, 4608, INF, INF],
        ml_dtypes.bfloat16: [16777216, 16777216, -16777216, 2147483648, 4608, 65536, 2147483648],
        np.float32: [16777216, 16842752, -16842752, 2147483648, 4609, 65520, 2147483520],
        ml_dtypes.float8_e5m2: [INF, INF, -INF, INF, 5120, INF, INF],
        ml_dtypes.float8_e4m3fn: [NAN] * 7,
        ml_dtypes.float4_e2m1fn: [6, 6, -6, 6, 6, 6, 6],
    }
    for dtype, want in expected.items():
        assert_same(convert(i, dtype), values(dtype, want))
    u = np.array([2**64 - 1, 2**53 + 1, 2**63 + 2**10 + 1], np.uint64)
    assert_same(convert(u, np.float64), np.array([2.0**64, 2.0**53, 9.223372036854778e18]))
    assert_same(convert(u, np.float32), np.float32([2.0**64, 2.0**53, 2.0**63]))


@pytest.mark.parametrize("source", NARROW_FLOATS + [np.float32, np.float64], ids=name)
@pytest.mark.parametrize("dtype", NARROW_FLOATS + [np.float32, np.float64], ids=name)
def test_exact_values_survive_float_to_float(source, dtype):
    x = values(source, [0.0, 0.5, 1.0, -1.5, 2.0, -3.0, 4.0])
    assert_same(convert(x, dtype), values(dtype, [0.0, 0.5, 1.0, -1.5, 2.0, -3.0, 4.0]))


def test_e8m0_rounds_and_has_no_zero_or_sign():
    # Behaviour doc: 0 and negatives -> NaN; values round to a power of two (1.5 * 2^k up).
    got = convert(np.float32([0.0, -1.0, 1.0, 1.4, 1.5, 3.0, 0.75]), ml_dtypes.float8_e8m0fnu)
    assert_same(got, values(ml_dtypes.float8_e8m0fnu, [NAN, NAN, 1, 1, 2, 4, 1]))


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128], ids=name)
def test_to_complex_and_between_complex(dtype):
    assert_same(convert(np.float32([1.5, -INF, NAN]), dtype),
                np.array([1.5, -INF, NAN]).astype(dtype))
    assert_same(convert(ints([-3, 7], np.int8), dtype), np.array([-3, 7]).astype(dtype))
    assert_same(convert(values(ml_dtypes.bfloat16, [1.5]), dtype), np.array([1.5]).astype(dtype))
    z = np.array([1 + 2j, 1e300 - 1e-300j], np.complex128)
    assert_same(convert(z, np.complex64), z.astype(np.complex64))


def test_complex_to_real_is_not_implemented():
    with pytest.raises(UnimplementedError, match="from complex to real type c64 => f32"):
        convert(np.array([1j], np.complex64), np.float32)


@pytest.mark.parametrize("source", ALL, ids=name)
def test_convert_to_every_type_keeps_the_shape_and_dtype(source):
    x = np.array([[1, 0], [1, 1]]).astype(np.float32).astype(source) if np.dtype(source).kind != "b" \
        else np.array([[True, False], [True, True]])
    for dtype in ALL:
        if np.dtype(source).kind == "c" and np.dtype(dtype).kind != "c":
            continue
        got = convert(x, dtype)
        assert got.dtype == np.dtype(dtype) and got.shape == (2, 2)


# -- bitcast-convert ---------------------------------------------------------------------------------


def test_bitcast_to_narrower_is_little_endian():
    # Behaviour doc: f32 1.0 -> u8 [0, 0, 128, 63]; u16 [0, 0x3F80] -> f32 1.0.
    got = run("bitcast-convert", [np.float32([1.0, -2.5])], np.uint8, result_dims=[2, 4])
    assert got.tolist() == [[0, 0, 128, 63], [0, 0, 32, 192]]
    back = run("bitcast-convert", [np.array([[0, 0x3F80]], np.uint16)], np.float32, result_dims=[1])
    assert_same(back, np.float32([1.0]))


def test_bitcast_sub_byte_pieces():
    # The low nibble is the first piece; s4 pieces are signed.
    got = run("bitcast-convert", [np.array([0x1F, 0x80], np.uint8)], ml_dtypes.int4, result_dims=[2, 2])
    assert_same(got, np.array([[-1, 1], [0, -8]], np.int8).astype(ml_dtypes.int4))
    back = run("bitcast-convert", [got], np.uint8, result_dims=[2])
    assert_same(back, np.array([0x1F, 0x80], np.uint8))
    two = run("bitcast-convert", [np.array([0b11100100], np.uint8)], ml_dtypes.uint2, result_dims=[1, 4])
    assert_same(two, np.array([[0, 1, 2, 3]], np.uint8).astype(ml_dtypes.uint2))
    f4 = run("bitcast-convert", [ints([-8, 7], ml_dtypes.int4)], ml_dtypes.float4_e2m1fn)
    assert f4.view(np.uint8).tolist() == [8, 7]


def test_bitcast_of_a_scalar_and_pred():
    assert_same(run("bitcast-convert", [np.int32(-1)], np.uint16, result_dims=[2]),
                np.array([0xFFFF, 0xFFFF], np.uint16))
    assert_same(run("bitcast-convert", [np.array([True, False])], np.uint8), np.array([1, 0], np.uint8))
    assert_same(run("bitcast-convert", [np.array([1, 0], np.int8)], np.bool_), np.array([True, False]))


def test_bitcast_as_xla():
    # From XLA:CPU via jax 0.10.2 (the bitcast_convert fixture): f16[...,2] -> u32 and
    # s32 -> f16[...,2].
    h = np.float16([[1.0, 2.0], [-0.0, NAN]])
    assert run("bitcast-convert", [h], np.uint32, result_dims=[2]).tolist() == [0x40003C00, 0x7E008000]
    s = np.array([0x3C003C00, -1, 0x7BFF0001], np.int32)
    got = run("bitcast-convert", [s], np.float16, result_dims=[3, 2])
    assert got.view(np.uint16).tolist() == [[0x3C00, 0x3C00], [0xFFFF, 0xFFFF], [0x0001, 0x7BFF]]


def test_bitcast_wider_needs_the_ratio_as_last_dimension():
    text = """HloModule t
ENTRY e {
  p = u8[3,<=2] parameter(0)
  ROOT r = u16[3] bitcast-convert(p)
}"""
    assert evaluate(text, np.array([[1, 2], [3, 4], [0, 1]], np.uint8)).tolist() == [513, 1027, 256]
    with pytest.raises(EvaluationError, match="last dimension must be 2"):
        evaluate(text, np.array([[1], [2], [3]], np.uint8))


# -- reduce-precision ----------------------------------------------------------------------------------


def reduce_precision(x, exponent_bits, mantissa_bits):
    return run("reduce-precision", [x],
               attrs=f", exponent_bits={exponent_bits}, mantissa_bits={mantissa_bits}")


def test_reduce_precision_as_xla():
    # From XLA:CPU via jax 0.10.2 (the reduce_precision fixture): (5, 10) is f16-like, (8, 7)
    # bf16-like, (4, 3) e4m3-like with inf, (2, 1); overflow -> inf, NaN stays NaN.
    x = np.float32(EDGE)
    expected = {
        (5, 10): EDGE_AS_XLA[np.float16],
        (8, 7): EDGE_AS_XLA[ml_dtypes.bfloat16],
        (4, 3): [NAN, INF, -INF, 0, -0.0, 0, 0.5, 1.5, 2.5, -0.5, -2.5, 3.75, -3.75, 7.5, 8, -9, 128,
            128, INF, INF, -128, INF, INF, INF, INF, INF, INF, INF, INF, INF, -INF, INF, -INF, INF,
            INF],
        (2, 1): [NAN, INF, -INF, 0, -0.0, 0, 0, 1.5, 2, -0.0, -2, INF, -INF, INF, INF, -INF, INF, INF,
            INF, INF, -INF, INF, INF, INF, INF, INF, INF, INF, INF, INF, -INF, INF, -INF, INF, INF],
    }
    for (e, m), want in expected.items():
        assert_same(reduce_precision(x, e, m), np.float32(want))


def test_reduce_precision_spec_rules():
    # Rounds to nearest even; exponent or mantissa widths beyond the type's are no-ops;
    # NaNs are kept (XLA:CPU keeps them even with zero mantissa bits).
    x = np.float32([1 + 2**-11, 1 + 3 * 2**-11, 1 + 2**-10 + 2**-12, NAN, -NAN])
    assert_same(reduce_precision(x, 8, 10), np.float32([1, 1 + 2**-9, 1 + 2**-10, NAN, NAN]))
    assert_same(reduce_precision(x, 11, 52), x)
    # With no mantissa bits the tie 3 = 1.1b * 2^1 rounds to the even exponent: 2.
    got = reduce_precision(np.float32([NAN, 3.0, 5.0]), 3, 0)
    assert np.isnan(got[0]) and got[1:].tolist() == [2.0, 4.0]
    sub = np.float32([2.0**-14, 2.0**-15])  # the second is below e5's normal range: flushed
    assert_same(reduce_precision(sub, 5, 10), np.float32([2.0**-14, 0]))


def test_reduce_precision_works_on_the_types_own_bits():
    # f16 with 5 exponent bits keeps its denormals; an f8e5m2 denormal survives e5m2 (XLA:CPU).
    h = np.float16([2.0**-24, -(2.0**-20), 1 + 2**-10])
    assert_same(reduce_precision(h, 5, 10), h)
    assert_same(reduce_precision(h, 5, 9), np.float16([0, -(2.0**-20), 1]))  # ties to even
    e = values(ml_dtypes.float8_e5m2, [2.0**-16, -(2.0**-15), 1.25])
    assert_same(reduce_precision(e, 5, 2), e)
    b = values(ml_dtypes.bfloat16, [1 + 2**-7, 3.0e38])
    assert_same(reduce_precision(b, 5, 3), values(ml_dtypes.bfloat16, [1, INF]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16], ids=name)
def test_reduce_precision_matches_rounding_into_the_format(dtype):
    # Reducing to a type's own format equals rounding to it (away from the denormal range).
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(200) * 100).astype(np.float32).astype(dtype)
    assert_same(reduce_precision(x, 5, 10), x.astype(np.float16).astype(dtype))
    assert_same(reduce_precision(x, 8, 7), x.astype(np.float32).astype(ml_dtypes.bfloat16).astype(dtype))


# -- stochastic-convert ---------------------------------------------------------------------------------


def stochastic(x, random, dtype):
    return run("stochastic-convert", [x, random], dtype)


def test_stochastic_convert_rounds_up_below_the_fraction():
    # XLA's evaluator: round |x| up when random < fraction * 2^bits; the sign is applied after.
    x = np.float32([2.25, 2.25, -2.25, -2.25, 3.0, 0.5, 0.5])
    quarter = 2**30
    r = np.array([quarter - 1, quarter, quarter - 1, quarter, 0, 2**31 - 1, 2**31], np.uint32)
    assert_same(stochastic(x, r, np.int32), np.int32([3, 2, -3, -2, 3, 1, 0]))


def test_stochastic_convert_saturates():
    x = np.float32([INF, -INF, NAN, 1e10, -1e10, 127.5, -128.5, -127.5])
    r = np.zeros(8, np.uint32)
    assert_same(stochastic(x, r, np.int8), np.int8([127, -128, 0, 127, -128, 127, -128, -128]))
    h = np.float16([1.5, -1.5])
    assert_same(stochastic(h, np.array([0, 0xFFFF], np.uint16), ml_dtypes.int4),
                ints([2, -1], ml_dtypes.int4))


def test_stochastic_convert_to_floats_is_not_implemented():
    with pytest.raises(UnimplementedError, match="stochastically converting from type f32 to type bf16"):
        stochastic(np.float32([1.0]), np.array([0], np.uint32), ml_dtypes.bfloat16)


# -- the numeric helpers ------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS, ids=name)
def test_total_order_key_is_monotonic(dtype):
    n = bits_of(dtype)
    if n <= 16:
        every = np.arange(1 << n, dtype=np.uint64)  # every encoding
    else:
        rng = np.random.default_rng(1)
        every = rng.integers(0, 2**63, 5000, dtype=np.uint64) >> np.uint64(63 - n + 1)
        every = np.concatenate([every, every | np.uint64(1 << (n - 1)), [0, 1 << (n - 1)]])
    x = numeric.from_bits(every, dtype)
    finite = x.astype(np.float64)
    keys = numeric.total_order_key(x)
    order = np.argsort(keys, kind="stable")
    sorted_values = finite[order]
    real = sorted_values[~np.isnan(sorted_values)]
    assert (np.diff(real) >= 0).all()  # numbers ascend, -0 right before +0
    zeros = np.nonzero(real == 0)[0]
    assert np.signbit(real[zeros[0]]) or len(zeros) == 1


@pytest.mark.parametrize("dtype", INTS + FLOATS + [np.bool_], ids=name)
def test_bits_round_trip(dtype):
    n = bits_of(dtype) if dtype is not np.bool_ else 1
    every = np.arange(min(1 << n, 4096), dtype=np.uint64)
    assert (numeric.to_bits(numeric.from_bits(every, dtype)) == every).all()


def test_wrap_int_and_work_dtype():
    assert numeric.wrap_int(np.int64([255, 256, -129]), np.int8).tolist() == [-1, 0, 127]
    assert numeric.wrap_int(np.int64([16, -9]), ml_dtypes.int4).tolist() == [0, 7]
    assert numeric.work_dtype(ml_dtypes.bfloat16) == np.float32
    assert numeric.work_dtype(np.float64) == np.float64
    assert numeric.convert(np.float32([NAN, -1e10, 2.7]), np.int32).tolist() == [0, -2**31, 2]


def test_scalar_operands_keep_rank_zero():
    assert run("reduce-precision", [np.float32(1 + 2**-12)],
               attrs=", exponent_bits=5, mantissa_bits=10").shape == ()
    assert run("compare", [np.float32(-0.0), np.float32(0.0)], np.bool_,
               ", direction=LT, type=TOTALORDER") == np.True_
    assert run("exponential", [np.complex64(1j)]).shape == ()
    assert run("bitcast-convert", [np.float16(1.0)], np.int16).shape == ()
    assert run("stochastic-convert", [np.float32(2.5), np.uint32(0)], np.int32) == 3

"""Complex arithmetic and functions as XLA:CPU computes them (xla/service/elemental_ir_emitter.cc:
EmitComplexDivide, EmitComplexSqrt, EmitComplexRsqrt, EmitComplexLog, EmitComplexPower, the
tanh/tan, exp, expm1, log1p, sin and cos cases of EmitComplexUnaryOp), component by component.

Every function takes the real and imaginary component arrays (f32 for c64, f64 for c128) and
returns a (real, imag) pair, except ``c_abs`` (a real array). The special cases (division by
zero gives +-inf components, exp(x + 0i) has a +0 imaginary part, tanh at infinities, ...)
are XLA's. Real-valued pieces (exp, sin, atan2, ...) come from numeric.libm. The functions XLA:CPU
has no emitter for (acos, asin, acosh, asinh, atanh, cosh, sinh) use NumPy's C99 functions,
as XLA's evaluator uses std::complex's.
"""

from __future__ import annotations

import numpy as np

from xlapy.interpreter.kernels.numeric import libm

__all__ = [
    "c_abs", "c_atan2", "c_cos", "c_div", "c_exp", "c_expm1", "c_log", "c_log1p", "c_logistic",
    "c_mul", "c_pow", "c_rsqrt", "c_sign", "c_sin", "c_sqrt", "c_tan", "c_tanh", "join",
    "split", "via_numpy",
]


def split(z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The (real, imag) component arrays of a complex array."""
    return np.asarray(z.real, order="C"), np.asarray(z.imag, order="C")


def join(parts, dtype) -> np.ndarray:
    """A complex array of ``dtype`` from its (real, imag) components (never ``re + 1j*im``,
    which turns inf * 0 into NaN)."""
    re, im = np.broadcast_arrays(*parts)
    out = np.empty(re.shape, dtype)
    out.real = re
    out.imag = im
    return out


def via_numpy(fn):
    """A complex function computed by NumPy in c128 and rounded to the components' type."""

    def apply(re, im):
        z = join((re.astype(np.float64), im.astype(np.float64)), np.complex128)
        with np.errstate(all="ignore"):
            w = fn(z)
        return w.real.astype(re.dtype), w.imag.astype(re.dtype)

    return apply


def _const(value, like):
    return np.asarray(value, like.dtype)


def c_abs(re, im):
    """|z| (hypot); NaN when either part is NaN (XLA's max/min propagate NaN)."""
    r = libm(np.hypot, re, im)
    return np.where(np.isnan(re) | np.isnan(im), _const(np.nan, re), r)


def c_mul(ar, ai, br, bi):
    return ar * br - ai * bi, ar * bi + ai * br


def c_div(ar, ai, br, bi):
    """Smith's algorithm, then XLA's fix-ups where both parts came out NaN: a zero divisor
    gives (inf * a) with inf signed like the divisor's real part; an infinite numerator or
    denominator gives the signed infinite or zero limits."""
    zero, one, inf = _const(0, ar), _const(1, ar), _const(np.inf, ar)
    ratio_ri = br / bi
    denom_ri = bi + ratio_ri * br
    ratio_ir = bi / br
    denom_ir = br + ratio_ir * bi
    abs_br, abs_bi = np.abs(br), np.abs(bi)
    small_re = abs_br < abs_bi
    cr = np.where(small_re, (ratio_ri * ar + ai) / denom_ri, (ratio_ir * ai + ar) / denom_ir)
    ci = np.where(small_re, (ratio_ri * ai - ar) / denom_ri, (ai - ratio_ir * ar) / denom_ir)

    zero_denominator = (abs_br == 0) & (abs_bi == 0) & (~np.isnan(ar) | ~np.isnan(ai))
    inf_b = np.copysign(inf, br)
    zero_r, zero_i = inf_b * ar, inf_b * ai

    ar_inf, ai_inf = np.abs(ar) == inf, np.abs(ai) == inf
    inf_numerator = (ar_inf | ai_inf) & np.isfinite(br) & np.isfinite(bi)
    ar_s = np.copysign(np.where(ar_inf, one, zero), ar)
    ai_s = np.copysign(np.where(ai_inf, one, zero), ai)
    infn_r, infn_i = inf * (ar_s * br + ai_s * bi), inf * (ai_s * br - ar_s * bi)

    br_inf, bi_inf = abs_br == inf, abs_bi == inf
    inf_denominator = (br_inf | bi_inf) & np.isfinite(ar) & np.isfinite(ai)
    br_s = np.copysign(np.where(br_inf, one, zero), br)
    bi_s = np.copysign(np.where(bi_inf, one, zero), bi)
    infd_r, infd_i = zero * (ar * br_s + ai * bi_s), zero * (ai * br_s - ar * bi_s)

    both_nan = np.isnan(cr) & np.isnan(ci)

    def fix(normal, z, n, d):
        return np.where(both_nan, np.where(zero_denominator, z, np.where(
            inf_numerator, n, np.where(inf_denominator, d, normal))), normal)

    return fix(cr, zero_r, infn_r, infd_r), fix(ci, zero_i, infn_i, infd_i)


def c_exp(a, b):
    """e^a (cos b + i sin b); exp(a/2)^2 when e^a overflows; imag = +0 when b = 0."""
    zero, half, inf = _const(0, a), _const(0.5, a), _const(np.inf, a)
    exp_a = libm(np.exp, a)
    exp_half = libm(np.exp, a * half)
    cos_b, sin_b = libm(np.cos, b), libm(np.sin, b)
    overflow = exp_a == inf
    real = np.where(overflow, exp_half * cos_b * exp_half, exp_a * cos_b)
    imag = np.where(overflow, exp_half * sin_b * exp_half, exp_a * sin_b)
    return real, np.where(b == 0, zero, imag)


def c_expm1(a, b):
    one, zero = _const(1, a), _const(0, a)
    expm1_a = libm(np.expm1, a)
    sin_b = libm(np.sin, b)
    cos_m1 = libm(lambda v: -2.0 * np.sin(v / 2) ** 2, b)
    real = expm1_a * (cos_m1 + one) + cos_m1
    imag = np.where(b == 0, zero, (expm1_a + one) * sin_b)
    return real, imag


def c_log(a, b):
    """log|z| + i atan2(b, a); log(0) = -inf + 0i. log|z| comes from C99 clog in f64, which
    keeps |z| close to 1 accurate (XLA:CPU's result does not lose those digits either)."""
    z = join((a.astype(np.float64), b.astype(np.float64)), np.complex128)
    with np.errstate(all="ignore"):
        real = np.log(z).real.astype(a.dtype)
    real = np.where(np.isnan(a) | np.isnan(b), _const(np.nan, a), real)
    return real, libm(np.arctan2, b, a)


def c_log1p(a, b):
    one, half = _const(1, a), _const(0.5, a)
    a1 = a + one
    abs_a1, abs_b = np.abs(a1), np.abs(b)
    big, small = np.maximum(abs_a1, abs_b), np.minimum(abs_a1, abs_b)
    big_m1 = np.where(a1 > abs_b, a, big - one)
    ratio = small / big
    r = half * libm(np.log1p, ratio * ratio) + libm(np.log1p, big_m1)
    return np.where(np.isnan(r), small, r), libm(np.arctan2, b, a1)


def _sin_cos(x, y, sine: bool):
    half = _const(0.5, x)
    exp_y = libm(np.exp, y)
    half_exp_y, half_exp_neg_y = half * exp_y, half / exp_y
    sin_x, cos_x = libm(np.sin, x), libm(np.cos, x)
    sinh_y, cosh_y = half_exp_y - half_exp_neg_y, half_exp_y + half_exp_neg_y
    if sine:
        return sin_x * cosh_y, cos_x * sinh_y
    return cos_x * cosh_y, -(sin_x * sinh_y)


def c_sin(x, y):
    return _sin_cos(x, y, sine=True)


def c_cos(x, y):
    return _sin_cos(x, y, sine=False)


def _tanh(a0, b0, tan: bool):
    neg_one, four = _const(-1, a0), _const(4, a0)
    zero, inf, nan = _const(0, a0), _const(np.inf, a0), _const(np.nan, a0)
    a, b = (neg_one * b0, a0) if tan else (a0, b0)
    two_a = a + a
    e2m1, en2m1 = libm(np.expm1, two_a), libm(np.expm1, neg_one * two_a)
    real_numerator = e2m1 - en2m1
    cos_b, sin_b = libm(np.cos, b), libm(np.sin, b)
    imag_numerator = four * (cos_b * sin_b)
    exp_sum_m2 = e2m1 + en2m1
    denominator = exp_sum_m2 + cos_b * cos_b * four
    real = np.where(exp_sum_m2 == inf, np.copysign(neg_one, a), real_numerator / denominator)
    imag = imag_numerator / denominator
    a_inf = np.abs(a) == inf
    sin_2b_nan = np.isnan(imag_numerator)
    real = np.where(sin_2b_nan & ~a_inf, nan, real)
    imag = np.where((b == 0) | (a_inf & sin_2b_nan), zero, imag)
    return (imag, neg_one * real) if tan else (real, imag)


def c_tanh(a, b):
    return _tanh(a, b, tan=False)


def c_tan(a, b):
    """tan(x + iy) = -i tanh(-y + ix)."""
    return _tanh(a, b, tan=True)


def c_sqrt(a, b):
    """The principal square root with C99's special cases (csqrt in f64): XLA:CPU's result
    agrees, and stays accurate next to the negative real axis."""
    return via_numpy(np.sqrt)(a, b)


def c_rsqrt(a, b):
    """rsqrt(|z|) (cos(-t/2) + i sin(-t/2)), t = arg z, with XLA's special cases:
    rsqrt(0) = inf + NaN i; an infinite part (or an infinite imaginary part with a NaN real
    part) gives (+-0, -+0) signed like the operand."""
    zero, inf, nan = _const(0, a), _const(np.inf, a), _const(np.nan, a)
    r = libm(lambda x, y: 1.0 / np.sqrt(np.hypot(x, y)), a, b)
    r = np.where(np.isnan(a) | np.isnan(b), nan, r)
    angle = libm(np.arctan2, b, a) * _const(-0.5, a)
    cos, sin = libm(np.cos, angle), libm(np.sin, angle)
    zero_zero = (a == 0) & (b == 0)
    edge = ((np.abs(b) == inf) & np.isnan(a)) | (np.abs(a) == inf)
    real = np.where(zero_zero, inf, np.where(edge, np.copysign(zero, a), r * cos))
    imag = np.where(zero_zero, nan, np.where(edge, -np.copysign(zero, b), r * sin))
    return real, imag


def c_sign(a, b):
    """z / |z|, and 0 for 0."""
    zero = _const(0, a)
    r = c_abs(a, b)
    return np.where(r == 0, zero, a / r), np.where(r == 0, zero, b / r)


def c_pow(a, b, c, d):
    """(a + bi)^(c + di) = |z|^c e^(-d arg z) (cos q + i sin q), q = c arg z + d ln|z|, with
    XLA's cut-offs: 0^(c + 0i) = 0 for c > 0 and 1 for c = 0; x^0 = 1; 1^w = 1;
    inf^(c + 0i) = inf (c > 0) or 0 (c < 0)."""
    zero, one, inf = _const(0, a), _const(1, a), _const(np.inf, a)
    r = c_abs(a, b)
    arg = libm(np.arctan2, b, a)
    coeff = libm(np.power, r, c) * libm(np.exp, -d * arg)
    q = c * arg + d * libm(np.log, r)
    re, im = coeff * libm(np.cos, q), coeff * libm(np.sin, q)

    def case(cond, value, current):
        return np.where(cond, value[0], current[0]), np.where(cond, value[1], current[1])

    result = (re, im)
    result = case((r == 0) & (d == 0) & (zero <= c), (np.where(c == 0, one, zero), zero), result)
    result = case((c == 0) & (d == 0), (one, zero), result)
    result = case((a == one) & (b == 0), (one, zero), result)
    result = case((a == inf) & (b == 0) & (d == 0) & (c > 0), (inf, zero), result)
    result = case((a == inf) & (b == 0) & (d == 0) & (c < 0), (zero, zero), result)
    return result


def c_atan2(yr, yi, xr, xi):
    """atan2(y, x) = -i log((x + iy) / sqrt(x^2 + y^2)), in complex arithmetic."""
    zero, one = np.zeros_like(xr), np.ones_like(xr)
    x2 = c_mul(xr, xi, xr, xi)
    y2 = c_mul(yr, yi, yr, yi)
    root = c_sqrt(x2[0] + y2[0], x2[1] + y2[1])
    iy = c_mul(zero, one, yr, yi)
    quotient = c_div(xr + iy[0], xi + iy[1], root[0], root[1])
    return c_mul(zero, -one, *c_log(*quotient))


def c_logistic(a, b):
    """1 / (1 + exp(-z)) (XLA's LogisticExpander), in complex arithmetic."""
    er, ei = c_exp(-a, -b)
    one, zero = np.ones_like(a), np.zeros_like(a)
    return c_div(one, zero, one + er, zero + ei)

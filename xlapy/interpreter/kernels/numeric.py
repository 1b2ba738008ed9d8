"""Numeric helpers shared by the interpreter's kernels: XLA's element conversions, the
compute type of narrow floats, two's-complement integer wrapping, raw bit patterns and the
TOTALORDER key of floats.

The public API (everything else is private):

- ``work_dtype(dtype)`` / ``to_work(x)``: the type XLA computes an element type's arithmetic
  in: f32 for the narrow floats (bf16, f16, f8*, f6*, f4), the type itself otherwise.
- ``convert(x, dtype)``: XLA's ``convert`` of an array to ``dtype`` for every pair of array
  types (also the way back from the work type: ``convert(work_result, narrow_dtype)``).
- ``widen_int(x)`` / ``wrap_int(x, dtype)``: integers (any width, pred) to int64 (uint64 for
  u64) and back with two's-complement wrap-around.
- ``bit_width(dtype)``, ``to_bits(x)`` / ``from_bits(bits, dtype)``: raw encodings as uint64.
- ``total_order_key(x)``: int64 keys whose order is XLA's TOTALORDER float comparison
  (-NaN < -inf < ... < -0 < +0 < ... < inf < +NaN).
- ``libm(fn, *xs)``: a libm-style function of f32 (or f64) arrays, evaluated in f64 and
  rounded once to the first argument's dtype (so f32 results are within an ulp of exact).
- ``libm_single(name, fn, *xs)``: the same, except that f32 arrays go through the platform
  C library's f32 function ``name`` (sinf, cosf, tanf, cbrtf, atan2f, powf), element by
  element: XLA computes f32 sin, cos, tan, cbrt, atan2 and pow with those (XLA:CPU's results
  are glibc's sinf... bit for bit; rounding the f64 function differs in 1-15% of the
  elements by an ulp).

Conversion facts (measured on XLA:CPU through jax 0.10.2, see
/work/shared/xla-cpu-behaviour.md): float -> int truncates toward zero and saturates, NaN
gives 0; int -> narrower int wraps; float -> pred is ``x != 0``; f32 -> narrow floats round to
nearest even with each type's overflow rule (ml_dtypes agrees bit for bit, except that
f4e2m1fn maps every NaN to -0); f64 -> f16/bf16 rounds through f32 (XLA and Eigen's
constructors both do), f64 -> f8/f6/f4 rounds once (XLA truncates from f64 directly);
integer -> float rounds once per value as ml_dtypes does (checked on 300k values per pair).
Imports numpy, ml_dtypes and xlapy.shape only.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from xlapy.shape import dtypes

__all__ = [
    "bit_width", "convert", "from_bits", "is_narrow_float", "libm", "to_bits", "to_work",
    "total_order_key", "widen_int", "work_dtype", "wrap_int",
]

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_F16 = np.dtype(np.float16)
_BOOL = np.dtype(np.bool_)
_F4 = np.dtype(ml_dtypes.float4_e2m1fn)
_E8M0 = np.dtype(ml_dtypes.float8_e8m0fnu)
# f64 -> these types rounds through f32 on XLA (f8e8m0fnu: its f32 routine after a cast).
_VIA_F32 = (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16), _E8M0)
_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}

_BITS = {np.dtype(info.dtype): info.bits for info in (t.info for t in dtypes.ARRAY_TYPES)}
_KIND = {np.dtype(info.dtype): info.kind for info in (t.info for t in dtypes.ARRAY_TYPES)}


def _kind(dtype) -> str:
    """"pred", "signed", "unsigned", "float" or "complex"."""
    return _KIND[np.dtype(dtype)]


def bit_width(dtype) -> int:
    """XLA's bit width of an element dtype (8 for pred, 4 for int4 and f4e2m1fn)."""
    return _BITS[np.dtype(dtype)]


def is_narrow_float(dtype) -> bool:
    """bf16, f16, f8*, f6*, f4: the floats XLA computes in f32."""
    dtype = np.dtype(dtype)
    return _kind(dtype) == "float" and dtype.itemsize < 4


def work_dtype(dtype) -> np.dtype:
    """The dtype arithmetic on ``dtype`` elements is computed in: f32 for narrow floats."""
    return _F32 if is_narrow_float(dtype) else np.dtype(dtype)


def to_work(x: np.ndarray) -> np.ndarray:
    """``x`` in its work dtype (narrow floats widen exactly to f32)."""
    x = np.asarray(x)
    return x.astype(_F32) if is_narrow_float(x.dtype) else x


#: XLA:CPU's f32 tanh (xla/codegen/intrinsic/tanh.cc, EmitFastTanh with FMAs, as jaxlib
#: 0.10.2 runs it; bit for bit on 7.3M values from 1e-4 to 30 in magnitude, the edges, inf
#: and NaN): x for |x| < 0.0004, copysign(1, x) for |x| >= 20, else x P(x^2) / Q(x^2) with x
#: clamped to +-TANH_F32_CLAMP, P and Q (coefficients from the highest degree) in Horner form
#: by FMAs
TANH_F32_NUM = (-2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11,
                5.12229709037114e-08, 1.48572235717979e-05, 6.37261928875436e-04,
                4.89352455891786e-03)
TANH_F32_DEN = (1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03,
                4.89352518554385e-03)
TANH_F32_CLAMP = 7.99881172180175781


def _fma32(a: np.ndarray, b: np.ndarray, c) -> np.ndarray:
    """f32 a * b + c (an f32 constant) rounded once as an FMA: the f32 product is exact in
    f64; the sum rounds
    to f64 and then to f32, which differs from one rounding only when the f64 sum lands on
    an f32 midpoint it was not on (none in the 7.3M values above)."""
    return (a.astype(_F64) * b.astype(_F64) + np.float64(np.float32(c))).astype(_F32)


def tanh(x: np.ndarray) -> np.ndarray:
    """tanh as XLA:CPU computes it: f32 by its rational approximation (TANH_F32_*), other
    types by ``libm`` (f64 in f64)."""
    x = np.asarray(x)
    if x.dtype != _F32:
        return libm(np.tanh, x)
    with np.errstate(all="ignore"):
        clamp = np.float32(TANH_F32_CLAMP)
        xc = np.where(x > clamp, clamp, np.where(x < -clamp, -clamp, x)).astype(_F32)
        x2 = xc * xc
        p = np.full(x.shape, TANH_F32_NUM[0], _F32)
        for c in TANH_F32_NUM[1:]:
            p = _fma32(x2, p, c)
        q = np.full(x.shape, TANH_F32_DEN[0], _F32)
        for c in TANH_F32_DEN[1:]:
            q = _fma32(x2, q, c)
        r = (xc * p) / q
        ax = np.abs(x)
        r = np.where(ax < np.float32(0.0004), x, r)
        r = np.where(ax >= np.float32(20.0), np.copysign(np.float32(1.0), x), r)
    return np.asarray(r, _F32)


def libm_single(name: str, fn, *xs: np.ndarray) -> np.ndarray:
    """``fn`` of float arrays as XLA computes it: f32 through the C library's f32 function
    ``name`` (one call per element), other types as ``libm`` (f64 in f64). Without that C
    function (a platform whose libm lacks it), ``libm``."""
    first = np.asarray(xs[0])
    call = _single(name) if first.dtype == _F32 else None
    if call is None:
        return libm(fn, *xs)
    wide = np.broadcast_arrays(*(np.asarray(x, _F64) for x in xs))  # exact: f32 values
    out = np.empty(wide[0].shape, _F32)
    flat = out.reshape(-1)
    columns = [w.reshape(-1).tolist() for w in wide]
    for k, args in enumerate(zip(*columns)):
        flat[k] = call(*args)
    return out


_SINGLE: dict = {}


def _single(name: str):
    """The C library's f32 function ``name`` as a ctypes function (of as many f32
    arguments as it takes: atan2f and powf two), or None."""
    if name not in _SINGLE:
        import ctypes
        import ctypes.util

        fn = None
        path = ctypes.util.find_library("m")
        try:
            lib = ctypes.CDLL(path) if path else ctypes.CDLL(None)
            fn = getattr(lib, name)
            fn.argtypes = [ctypes.c_float] * (2 if name in ("atan2f", "powf") else 1)
            fn.restype = ctypes.c_float
        except (OSError, AttributeError):
            fn = None
        _SINGLE[name] = fn
    return _SINGLE[name]


def libm(fn, *xs: np.ndarray) -> np.ndarray:
    """``fn`` of float arrays computed in f64 and rounded to the dtype of ``xs[0]``.

    >>> libm(np.exp, np.float32([1.0]))
    array([2.7182817], dtype=float32)
    """
    dtype = np.asarray(xs[0]).dtype
    with np.errstate(all="ignore"):
        if dtype == _F64:
            return np.asarray(fn(*xs))
        return np.asarray(fn(*(np.asarray(x, _F64) for x in xs))).astype(dtype)


# -- integers --------------------------------------------------------------------------------


def index_int64(x) -> np.ndarray:
    """Start indices as int64 for clamping: signed values unchanged, unsigned ones by value,
    a u64 of 2**63 or more saturated to 2**63 - 1 (as large as any dimension allows; XLA:CPU
    compares u64 starts unsigned: 2**64 - 1 clamps to the largest start, not to 0)."""
    x = np.asarray(x)
    if x.dtype == np.uint64:
        x = np.minimum(x, np.uint64(2**63 - 1))
    return x.astype(np.int64)


def widen_int(x: np.ndarray) -> np.ndarray:
    """Integers or pred as int64 (uint64 for u64), values unchanged."""
    x = np.asarray(x)
    return x.astype(np.uint64 if x.dtype == np.uint64 else np.int64)


def wrap_int(x: np.ndarray, dtype) -> np.ndarray:
    """Wide integers reduced modulo 2^bits into ``dtype`` (two's complement for signed types);
    pred keeps ``x != 0``."""
    dtype = np.dtype(dtype)
    x = np.asarray(x)
    if dtype == _BOOL:
        return x != 0
    bits = bit_width(dtype)
    if bits >= 64:
        return x.astype(np.uint64).astype(dtype) if x.dtype != dtype else x
    low = x.astype(np.uint64) & np.uint64((1 << bits) - 1)
    if _kind(dtype) == "signed":
        signed = low.astype(np.int64)
        signed = np.where(signed >= (1 << (bits - 1)), signed - (1 << bits), signed)
        return signed.astype(dtype)
    return low.astype(dtype)


# -- raw bits --------------------------------------------------------------------------------


def to_bits(x: np.ndarray) -> np.ndarray:
    """The elements' encodings as uint64 (sub-byte types: the low ``bit_width`` bits)."""
    x = np.asarray(x, order="C")  # (ascontiguousarray would make a 0-d array 1-d)
    if x.dtype == _BOOL:
        return x.astype(np.uint64)
    bits = bit_width(x.dtype)
    if _kind(x.dtype) == "complex":
        raise ValueError("to_bits: complex elements have two encodings")
    raw = x.view(_UINT[x.dtype.itemsize]).astype(np.uint64)
    return raw & np.uint64((1 << bits) - 1) if bits < 8 else raw


def from_bits(bits: np.ndarray, dtype) -> np.ndarray:
    """Elements of ``dtype`` with the given encodings (the inverse of ``to_bits``)."""
    dtype = np.dtype(dtype)
    bits = np.asarray(bits, dtype=np.uint64)
    if dtype == _BOOL:
        return bits != 0
    width = bit_width(dtype)
    if width < 8 and _kind(dtype) in ("signed", "unsigned"):
        return wrap_int(bits, dtype)
    if width < 64:
        bits = bits & np.uint64((1 << width) - 1)
    return np.asarray(bits.astype(_UINT[dtype.itemsize]), order="C").view(dtype)


def total_order_key(x: np.ndarray) -> np.ndarray:
    """int64 keys ordering floats as XLA's TOTALORDER comparison (ToSignMagnitude): the
    magnitude bits, bit-inverted when the sign bit is set. Types without -0 (the *fnuz f8s)
    close the gap at zero; f8e8m0fnu has no sign and orders by its bits."""
    x = np.asarray(x)
    bits = to_bits(x).astype(np.int64)
    if x.dtype == _E8M0:
        return bits
    width = bit_width(x.dtype)
    sign = (bits >> (width - 1)) & 1
    magnitude = bits & ((1 << (width - 1)) - 1)
    if not _has_negative_zero(x.dtype):
        # XLA subtracts one from negative magnitudes; the NaN encoding (sign bit, zero
        # magnitude) keeps its magnitude and is therefore the smallest key.
        magnitude = np.where((sign == 1) & (magnitude != 0), magnitude - 1, magnitude)
        nan = (sign == 1) & (bits & ((1 << (width - 1)) - 1) == 0)
        return np.where(nan, -(1 << (width - 1)), np.where(sign == 1, -magnitude - 1, magnitude))
    return np.where(sign == 1, -magnitude - 1, magnitude)


def _has_negative_zero(dtype) -> bool:
    name = np.dtype(dtype).name
    return not name.endswith("fnuz")


# -- conversions -----------------------------------------------------------------------------


def convert(x: np.ndarray, dtype) -> np.ndarray:
    """XLA's ``convert`` of ``x`` (any array dtype) to ``dtype``.

    >>> convert(np.array([np.nan, -1e10, 2.7], np.float32), np.int32)
    array([0, -2147483648, 2], dtype=int32)
    """
    x = np.asarray(x)
    dtype = np.dtype(dtype)
    if x.dtype == dtype:
        return x
    src, dst = _kind(x.dtype), _kind(dtype)
    with np.errstate(all="ignore"):
        if src == "complex":
            if dst != "complex":
                raise ValueError(f"convert: complex {x.dtype} cannot become {dtype}")
            return x.astype(dtype)
        if dst == "complex":
            component = np.dtype(np.float32 if dtype == np.complex64 else np.float64)
            real = convert(x, component)
            out = np.zeros(x.shape, dtype)
            out.real = real
            return out
        if src in ("pred", "signed", "unsigned"):
            return _convert_from_int(x, dtype, dst)
        return _convert_from_float(x, dtype, dst)


def _convert_from_int(x, dtype, dst):
    if dst == "pred":
        return x != 0
    if dst in ("signed", "unsigned"):
        return wrap_int(widen_int(x), dtype)
    if x.dtype == _BOOL:
        x = x.astype(np.uint8)
    elif bit_width(x.dtype) < 8:
        x = widen_int(x)
    return x.astype(dtype)


def _convert_from_float(x, dtype, dst):
    if dst == "pred":
        return x != 0  # NaN != 0 is true
    if dst in ("signed", "unsigned"):
        return _float_to_int(x, dtype)
    # float -> float
    if x.dtype == _F64 and dtype != _F32:
        if dtype in _VIA_F32:
            return _convert_from_float(x.astype(_F32), dtype, dst)
        return _round_f64_once(x, dtype)
    if is_narrow_float(x.dtype) and is_narrow_float(dtype):
        x = x.astype(_F32)  # exact; every narrow -> narrow path goes through f32 values
    out = x.astype(dtype)
    if dtype == _F4:
        out = _fix_f4_nan(x, out)
    elif dtype == _F16 and x.dtype == _F32:
        out = _quiet_f16_nan(x, out)
    return out


def _quiet_f16_nan(x, out):
    # XLA:CPU converts f32 -> f16 with F16C (vcvtps2ph): a NaN becomes sign | 0x7E00 | the
    # top 9 bits of its payload - quiet, where NumPy keeps a signalling NaN signalling
    nan = np.isnan(x)
    if nan.any():
        b = x.view(np.uint32)
        h = ((b >> 16) & 0x8000) | 0x7E00 | ((b & 0x7FFFFF) >> 13)
        out = np.where(nan, h.astype(np.uint16).view(_F16), out)
    return out


def _fix_f4_nan(x, out):
    # f4e2m1fn has no NaN: XLA's conversion yields -0 (encoding 0x8) for every NaN input.
    nan = np.isnan(x)
    if nan.any():
        out = np.where(nan, from_bits(np.full(out.shape, 8, np.uint64), _F4), out)
    return out


def _round_f64_once(x: np.ndarray, dtype) -> np.ndarray:
    """f64 -> an f8/f6/f4 type with a single round-to-nearest-even (ml_dtypes' cast rounds
    through f32 first). Values are rounded to the type's precision in f64 (exact), then cast:
    the cast is exact unless the value overflows, where the type's own rule applies."""
    info = ml_dtypes.finfo(dtype)
    precision = int(info.nmant)
    min_exp = int(info.minexp)  # exponent of the smallest normal
    finite = np.isfinite(x) & (x != 0)
    _, e = np.frexp(np.where(finite, x, 1.0))
    quantum_exp = np.maximum(e - 1, min_exp) - precision
    rounded = np.ldexp(np.rint(np.ldexp(x, -quantum_exp)), quantum_exp)
    rounded = np.where(finite, rounded, x)
    out = rounded.astype(_F32).astype(dtype)
    if np.dtype(dtype) == _F4:
        out = _fix_f4_nan(x, out)
    return out


def _float_to_int(x: np.ndarray, dtype) -> np.ndarray:
    """Truncate toward zero and saturate; NaN -> 0 (XLA's fptosi/fptoui with clamps)."""
    x = x.astype(_F64) if x.dtype != _F64 else x
    bits = bit_width(dtype)
    if _kind(dtype) == "signed":
        lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
        wide = np.int64
    else:
        lo, hi = 0, (1 << bits) - 1
        wide = np.uint64
    # The bounds as the source float type would hold them (2^63 - 1 -> 2^63).
    lo_f, hi_f = float(lo), float(hi)
    too_low = x <= lo_f
    too_high = x >= hi_f
    nan = np.isnan(x)
    inside = np.where(too_low | too_high | nan, 0.0, np.trunc(x))
    out = inside.astype(wide)
    out = np.where(too_high, wide(hi), out)
    out = np.where(too_low, wide(lo), out)
    out = np.where(nan, wide(0), out)
    return wrap_int(out.astype(wide), dtype)

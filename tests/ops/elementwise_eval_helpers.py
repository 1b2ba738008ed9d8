"""Helpers of the elementwise-kernel tests: run one HLO instruction on NumPy operands, the
element-type lists, and bit-exact comparison (NaN matches NaN, -0 differs from +0)."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from xlapy.interpreter import evaluate
from xlapy.parser import parse_hlo_module
from xlapy.shape import dtypes

SIGNED = [np.int8, np.int16, np.int32, np.int64, ml_dtypes.int4, ml_dtypes.int2]
UNSIGNED = [np.uint8, np.uint16, np.uint32, np.uint64, ml_dtypes.uint4, ml_dtypes.uint2]
INTS = SIGNED + UNSIGNED
NARROW_FLOATS = [np.float16, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2,
                 ml_dtypes.float8_e4m3fnuz, ml_dtypes.float8_e5m2fnuz, ml_dtypes.float8_e4m3b11fnuz,
                 ml_dtypes.float8_e3m4, ml_dtypes.float8_e4m3, ml_dtypes.float4_e2m1fn,
                 ml_dtypes.float6_e2m3fn, ml_dtypes.float6_e3m2fn]
FLOATS = [np.float32, np.float64] + NARROW_FLOATS


def hlo_type(dtype) -> str:
    return dtypes.type_name(dtypes.from_dtype(np.dtype(dtype)))


def bits_of(dtype) -> int:
    return dtypes.bit_width(dtypes.from_dtype(np.dtype(dtype)))


def int_range(dtype) -> tuple[int, int]:
    n = bits_of(dtype)
    if dtypes.is_signed_integral(dtypes.from_dtype(np.dtype(dtype))):
        return -(1 << (n - 1)), (1 << (n - 1)) - 1
    return 0, (1 << n) - 1


def ints(values, dtype) -> np.ndarray:
    """Python ints (in range) as an array of ``dtype``."""
    wide = np.uint64 if int_range(dtype)[0] == 0 else np.int64
    return np.array([int(v) for v in values], dtype=wide).astype(dtype)


def wrap(value: int, dtype) -> int:
    """A Python int reduced into ``dtype``'s range (two's complement)."""
    lo, hi = int_range(dtype)
    span = hi - lo + 1
    return (value - lo) % span + lo


def _shape_text(a: np.ndarray, dtype=None) -> str:
    dims = ",".join(str(d) for d in a.shape)
    return f"{hlo_type(dtype if dtype is not None else a.dtype)}[{dims}]"


def run(opcode: str, operands, result_dtype=None, attrs: str = "", result_dims=None):
    """Evaluate ``ROOT r = <result> opcode(p0, p1, ...)`` on the operands (NumPy arrays; the
    parameter types come from their dtypes). The result has the first operand's dimensions
    unless ``result_dims`` is given, and its dtype (or ``result_dtype``)."""
    operands = [np.asarray(a) for a in operands]
    result_dtype = operands[0].dtype if result_dtype is None else result_dtype
    dims = operands[0].shape if result_dims is None else tuple(result_dims)
    lines = [f"  p{i} = {_shape_text(a)} parameter({i})" for i, a in enumerate(operands)]
    args = ", ".join(f"p{i}" for i in range(len(operands)))
    result = f"{hlo_type(result_dtype)}[{','.join(str(d) for d in dims)}]"
    lines.append(f"  ROOT r = {result} {opcode}({args}){attrs}")
    text = "HloModule t\n\nENTRY e {\n" + "\n".join(lines) + "\n}\n"
    return evaluate(parse_hlo_module(text), *operands)


def assert_same(got, want) -> None:
    """Same dtype and shape, and equal element by element: floats bit-exactly up to NaN
    (any NaN matches any NaN; the sign of zero counts)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, f"dtype {got.dtype} != {want.dtype}"
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    if want.dtype.kind == "c":
        assert_same(got.real.copy(), want.real.copy())
        assert_same(got.imag.copy(), want.imag.copy())
        return
    if _is_float(want.dtype):
        g, w = got.astype(np.float64), want.astype(np.float64)
        ok = ((g == w) & (np.signbit(g) == np.signbit(w))) | (np.isnan(g) & np.isnan(w))
    else:
        ok = got == want
    assert ok.all(), f"differ at {np.argwhere(~ok)[:5].ravel().tolist()}: got {got[~ok][:5]}, want {want[~ok][:5]}"


def assert_close(got, want, ulps: float = 4) -> None:
    """Within ``ulps`` units in the last place of ``want`` (NaN and infinities exactly)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    g, w = got.astype(np.float64), want.astype(np.float64)
    special = ~np.isfinite(w)
    assert_same(got[special], want[special])
    spacing = np.abs(np.spacing(want[~special])).astype(np.float64)
    assert (np.abs(g[~special] - w[~special]) <= ulps * spacing).all(), f"got {got}, want {want}"


def _is_float(dtype) -> bool:
    return dtypes.is_floating(dtypes.from_dtype(np.dtype(dtype)))


def values(dtype, floats) -> np.ndarray:
    """Python floats as an array of a float ``dtype`` (through f64, exact for these tests)."""
    return np.array(floats, np.float64).astype(np.float32).astype(dtype)

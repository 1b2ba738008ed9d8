"""Comparing interpreter results with XLA's outputs (the golden fixtures).

Tolerances (stated once, used by every golden test):
- integers, pred, and every RNG output: bit-exact;
- f64/c128: |a - b| <= 1e-12 + 1e-9 |b|;
- f32/c64: |a - b| <= 1e-6 + 2e-5 |b| (XLA:CPU's vectorised transcendentals differ from
  libm by a few ulp);
- f16/bf16/f8/f6/f4: compared in f32, within 1 unit in the last place of the narrow type
  (relative 2^-(mantissa bits)) plus the type's smallest normal as absolute slack;
- NaN must match NaN (either sign), inf must match inf of the same sign.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from xlapy.interpreter.values import flatten


def assert_close(got, want, what: str = "") -> None:
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    kind = want.dtype.kind
    if want.dtype == np.bool_ or kind in "iu" or _is_ml_int(want.dtype):
        mismatch = got != want
        assert not mismatch.any(), _report(got, want, mismatch, what)
        return
    if kind == "c":
        assert_close(got.real.copy(), want.real.copy(), what + " (real)")
        assert_close(got.imag.copy(), want.imag.copy(), what + " (imag)")
        return
    if want.dtype == np.float64:
        rtol, atol = 1e-9, 1e-12
    elif want.dtype == np.float32:
        rtol, atol = 2e-5, 1e-6
    else:
        info = ml_dtypes.finfo(want.dtype)
        rtol, atol = float(2.0 ** -int(info.nmant)), float(info.smallest_normal)
    g = got.astype(np.float64)
    w = want.astype(np.float64)
    both_nan = np.isnan(g) & np.isnan(w)
    same_inf = np.isinf(w) & (g == w)
    with np.errstate(invalid="ignore"):  # inf - inf: decided by same_inf above
        close = np.abs(g - w) <= atol + rtol * np.abs(w)
    ok = both_nan | same_inf | (close & ~np.isnan(g) & ~np.isnan(w) & ~np.isinf(w))
    assert ok.all(), _report(got, want, ~ok, what)


def _is_ml_int(dtype) -> bool:
    return dtype in (np.dtype(ml_dtypes.int4), np.dtype(ml_dtypes.uint4), np.dtype(ml_dtypes.int2),
                     np.dtype(ml_dtypes.uint2))


def _report(got, want, bad, what) -> str:
    idx = np.argwhere(bad)[:5]
    rows = [f"  at {tuple(int(i) for i in ix)}: got {got[tuple(ix)]!r}, XLA {want[tuple(ix)]!r}"
            for ix in idx]
    return f"{what}: {int(bad.sum())} of {bad.size} elements differ\n" + "\n".join(rows)


def assert_results(result, outputs: list, what: str) -> None:
    leaves = flatten(result) if isinstance(result, tuple) else [result]
    assert len(leaves) == len(outputs), f"{what}: {len(leaves)} results, XLA gave {len(outputs)}"
    for i, (g, w) in enumerate(zip(leaves, outputs)):
        assert_close(g, w, f"{what} out{i}")

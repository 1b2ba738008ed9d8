"""cholesky and triangular-solve on the cpu backend (LAPACK xPOTRF / BLAS xTRSM through
SciPy's function pointers) against the interpreter: lower/upper, left_side, every
transpose_a, unit_diagonal, batch dimensions, f32/f64/bf16/f16, odd sizes; only the chosen
triangle read; non-positive-definite matrices as the interpreter (XLA's expander: all NaN for
a negative pivot), the other matrices of the batch unaffected; complex stays interpreted."""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest

from xlapy.backends.cpu import backend as be
from xlapy.backends.cpu import blas, library
from xlapy.parser import parse_hlo_module
from xlapy.interpreter import evaluate
from xlapy.runtime import Client

TYPES = {"f32": np.float32, "f64": np.float64, "bf16": ml_dtypes.bfloat16, "f16": np.float16}
TOL = {"f32": 2e-4, "f64": 1e-10, "bf16": 3e-2, "f16": 4e-3}


def _dims(shape):
    return "[" + ",".join(map(str, shape)) + "]"


def _both(text, *args):
    module = parse_hlo_module(text)
    want = evaluate(module, *args)
    got = Client(backend="cpu").compile(module)(*args)
    program = be.compile_module(parse_hlo_module(text))
    return np.asarray(got), np.asarray(want), program


def _steps(program):
    return [type(s).__name__ for s in program.entry.steps]


def _close(got, want, t):
    got64, want64 = got.astype(np.float64), want.astype(np.float64)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(np.isnan(got64), np.isnan(want64))
    finite = ~np.isnan(want64)
    scale = max(1.0, float(np.abs(want64[finite]).max(initial=0)))
    np.testing.assert_allclose(got64[finite], want64[finite], atol=TOL[t] * scale, rtol=0)


def _spd(rng, batch, n):
    m = rng.standard_normal(batch + (n, n))
    return m @ np.swapaxes(m, -1, -2) + n * np.eye(n)


def _chol_text(t, shape, lower):
    return (f"HloModule m\nENTRY e {{\n  a = {t}{_dims(shape)} parameter(0)\n"
            f"  ROOT l = {t}{_dims(shape)} cholesky(a), lower={'true' if lower else 'false'}\n}}\n")


@pytest.mark.parametrize("t", list(TYPES))
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("shape", [(5, 5), (3, 17, 17), (2, 2, 1, 1), (4, 0, 0)])
def test_cholesky(t, lower, shape):
    rng = np.random.default_rng(len(shape) + shape[-1])
    a = _spd(rng, shape[:-2], shape[-1]) if shape[-1] else np.zeros(shape)
    # garbage in the triangle that must not be read
    n = shape[-1]
    if n > 1:
        unread = np.triu(np.full((n, n), 1e3), 1) if lower else np.tril(np.full((n, n), 1e3), -1)
        a = a + unread
    a = a.astype(TYPES[t])
    got, want, program = _both(_chol_text(t, shape, lower), a)
    assert "LibraryStep" in _steps(program)
    _close(got, want, t)


def test_cholesky_not_positive_definite_per_matrix():
    rng = np.random.default_rng(3)
    a = _spd(rng, (4,), 6)
    a[1] = -a[1]  # negative pivot: all NaN in XLA's expander
    a[2, 3, 3] = a[2, 3, :3] @ np.linalg.solve(a[2, :3, :3], a[2, :3, 3])  # zero pivot
    a = a.astype(np.float32)
    got, want, _ = _both(_chol_text("f32", a.shape, True), a)
    assert np.isnan(got[1]).all()
    assert not np.isnan(got[0]).any() and not np.isnan(got[3]).any()
    got64, want64 = got.astype(np.float64), want.astype(np.float64)
    for i in (0, 1, 3):
        assert np.array_equal(np.isnan(got64[i]), np.isnan(want64[i]))
        np.testing.assert_allclose(np.nan_to_num(got64[i]), np.nan_to_num(want64[i]),
                                   atol=1e-3)


def _ts_text(t, a_shape, b_shape, left, lower, unit, transpose):
    def f(v):
        return "true" if v else "false"

    return (f"HloModule m\nENTRY e {{\n  a = {t}{_dims(a_shape)} parameter(0)\n"
            f"  b = {t}{_dims(b_shape)} parameter(1)\n"
            f"  ROOT x = {t}{_dims(b_shape)} triangular-solve(a, b), left_side={f(left)}, "
            f"lower={f(lower)}, unit_diagonal={f(unit)}, transpose_a={transpose}\n}}\n")


@pytest.mark.parametrize("left,lower,unit,transpose", list(itertools.product(
    [True, False], [True, False], [True, False], ["NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"])))
@pytest.mark.parametrize("t", ["f32", "f64"])
def test_triangular_solve_options(t, left, lower, unit, transpose):
    rng = np.random.default_rng(7)
    n, k = 7, 5
    a = rng.standard_normal((3, n, n)) + 4 * np.eye(n)  # both triangles hold values
    b = rng.standard_normal((3, n, k) if left else (3, k, n))
    text = _ts_text(t, a.shape, b.shape, left, lower, unit, transpose)
    got, want, program = _both(text, a.astype(TYPES[t]), b.astype(TYPES[t]))
    assert "LibraryStep" in _steps(program)
    _close(got, want, t)


@pytest.mark.parametrize("t", ["bf16", "f16"])
@pytest.mark.parametrize("shape", [((4, 4), (4, 3)), ((2, 3, 9, 9), (2, 3, 9, 1))])
def test_triangular_solve_narrow_and_batched(t, shape):
    rng = np.random.default_rng(11)
    a_shape, b_shape = shape
    a = (rng.standard_normal(a_shape) + 3 * np.eye(a_shape[-1])).astype(TYPES[t])
    b = rng.standard_normal(b_shape).astype(TYPES[t])
    got, want, _ = _both(_ts_text(t, a_shape, b_shape, True, True, False, "NO_TRANSPOSE"),
                         a, b)
    _close(got, want, t)


def test_triangular_solve_zero_pivot_gives_inf_or_nan():
    a = np.eye(3, dtype=np.float32)
    a[1, 1] = 0
    b = np.ones((3, 2), np.float32)
    got, want, _ = _both(_ts_text("f32", (3, 3), (3, 2), True, True, False, "NO_TRANSPOSE"),
                         a, b)
    assert not np.isfinite(got[1]).any()
    assert np.array_equal(np.isfinite(got), np.isfinite(want))


def test_complex_stays_interpreted():
    text = _chol_text("c64", (3, 3), True)
    instr = parse_hlo_module(text).entry.root
    assert not library.supports(instr)


def test_c_callable_entries():
    """Native code can call the same routines: raw addresses of SciPy's LAPACK/BLAS."""
    for name in ("spotrf", "dpotrf"):
        assert blas.lapack_function_pointer(name) > 0
    for name in ("strsm", "dtrsm", "sgemm"):
        assert blas.blas_function_pointer(name) > 0
    with pytest.raises(KeyError, match="no routine 'nosuch'"):
        blas.lapack_function_pointer("nosuch")

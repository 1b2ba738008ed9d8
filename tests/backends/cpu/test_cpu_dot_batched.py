"""Dots on the cpu backend against the interpreter: batched dots (one single-threaded GEMM per
pool thread over the batch), GEMMs cut into panels, f32/f64/bf16/f16 results, and integer and
pred dots (NumPy's integer loops over the pool: two's-complement wrap, pred = OR of ANDs) on
s32/u32/s8->s32/s64/pred, odd sizes and transposed dimension numbers."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from xlapy.backends.cpu import backend as be
from xlapy.backends.cpu import library
from xlapy.parser import parse_hlo_module
from xlapy.interpreter import evaluate
from xlapy.runtime import Client

NP = {"f32": np.float32, "f64": np.float64, "bf16": ml_dtypes.bfloat16, "f16": np.float16,
      "s32": np.int32, "u32": np.uint32, "s8": np.int8, "s64": np.int64, "pred": np.bool_}


def _dims(shape):
    return "[" + ",".join(map(str, shape)) + "]"


def _text(lt, rt, ot, ls, rs, os_, dn):
    return (f"HloModule m\nENTRY e {{\n  a = {lt}{_dims(ls)} parameter(0)\n"
            f"  b = {rt}{_dims(rs)} parameter(1)\n"
            f"  ROOT d = {ot}{_dims(os_)} dot(a, b), {dn}\n}}\n")


def _sample(rng, t, shape):
    if t == "pred":
        return rng.random(shape) < 0.3
    if t in ("s32", "s64"):
        return rng.integers(-(1 << 30), 1 << 30, shape).astype(NP[t])  # products overflow
    if t == "u32":
        return rng.integers(0, 1 << 32, shape, dtype=np.uint64).astype(np.uint32)
    if t == "s8":
        return rng.integers(-128, 128, shape).astype(np.int8)
    return rng.standard_normal(shape).astype(NP[t])


def _check(text, *args, exact=True):
    module = parse_hlo_module(text)
    want = np.asarray(evaluate(module, *args))
    got = np.asarray(Client(backend="cpu").compile(module)(*args))
    steps = [type(s).__name__ for s in be.compile_module(parse_hlo_module(text)).entry.steps]
    assert "InterpretStep" not in steps, steps
    assert got.dtype == want.dtype and got.shape == want.shape
    if exact:
        assert np.array_equal(got, want)
    else:
        g, w = got.astype(np.float64), want.astype(np.float64)
        tol = 2e-2 if got.dtype.itemsize == 2 else 1e-4
        np.testing.assert_allclose(g, w, atol=tol * max(1.0, np.abs(w).max()), rtol=0)


BATCH = ("lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, "
         "rhs_contracting_dims={1}")
BATCH_T = ("lhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_batch_dims={0}, "
           "rhs_contracting_dims={2}")


@pytest.mark.parametrize("lt,rt,ot", [("s32", "s32", "s32"), ("u32", "u32", "u32"),
                                      ("s8", "s8", "s32"), ("s64", "s64", "s64"),
                                      ("pred", "pred", "pred"), ("s32", "s32", "s8")])
@pytest.mark.parametrize("b,m,k,n", [(1, 3, 5, 7), (6, 33, 17, 9), (2, 130, 70, 129)])
def test_integer_and_pred_dots(lt, rt, ot, b, m, k, n):
    rng = np.random.default_rng(b * m + k)
    a, w = _sample(rng, lt, (b, m, k)), _sample(rng, rt, (b, k, n))
    _check(_text(lt, rt, ot, (b, m, k), (b, k, n), (b, m, n), BATCH), a, w)


@pytest.mark.parametrize("t", ["s32", "pred"])
def test_integer_dot_transposed_operands(t):
    rng = np.random.default_rng(5)
    a, w = _sample(rng, t, (3, 19, 11)), _sample(rng, t, (3, 23, 19))
    _check(_text(t, t, t, (3, 19, 11), (3, 23, 19), (3, 11, 23), BATCH_T), a, w)


@pytest.mark.parametrize("t", ["f32", "f64", "bf16", "f16"])
@pytest.mark.parametrize("b,m,k,n", [(64, 32, 32, 32), (5, 129, 31, 67), (1, 300, 40, 520)])
def test_float_batched_dots(monkeypatch, t, b, m, k, n):
    monkeypatch.setattr(library, "PARALLEL_GEMM", 1 << 12)  # batches and panels at test sizes
    rng = np.random.default_rng(m + n)
    a, w = _sample(rng, t, (b, m, k)), _sample(rng, t, (b, k, n))
    _check(_text(t, t, t, (b, m, k), (b, k, n), (b, m, n), BATCH), a, w, exact=False)


def test_bf16_operands_f32_result():
    rng = np.random.default_rng(9)
    a, w = _sample(rng, "bf16", (8, 40, 24)), _sample(rng, "bf16", (8, 24, 40))
    _check(_text("bf16", "bf16", "f32", (8, 40, 24), (8, 24, 40), (8, 40, 40), BATCH), a, w,
           exact=False)


def test_results_held_by_the_caller_are_not_overwritten():
    text = _text("s32", "s32", "s32", (4, 64, 64), (4, 64, 64), (4, 64, 64), BATCH)
    program = Client(backend="cpu").compile(parse_hlo_module(text))
    rng = np.random.default_rng(1)
    x1, y1 = _sample(rng, "s32", (4, 64, 64)), _sample(rng, "s32", (4, 64, 64))
    first = np.asarray(program(x1, y1))
    keep = first.copy()
    program(_sample(rng, "s32", (4, 64, 64)), _sample(rng, "s32", (4, 64, 64)))
    assert np.array_equal(first, keep)

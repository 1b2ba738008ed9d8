"""Row fusion (xlapy/backends/cpu/row_fusion.py + xlapy/backends/cpu/row_reduction.py): a row
reduction and the elementwise work consuming it run as one kernel per row, against the
interpreter: softmax and layer norm as jax writes them (f32, f64), odd row lengths, rank 3
with two column dimensions, rows == cols (a column broadcast of a parameter is an input, a
column broadcast of a row value blocks the group), a reduction used outside the group left
out, inside a compiled while loop, and the aliasing rule."""

from __future__ import annotations

import numpy as np
import pytest

from xlapy.backends.cpu import backend as be
from xlapy.backends.cpu import control_flow as cf
from xlapy.parser import parse_hlo_module
from xlapy.interpreter import evaluate
from xlapy.runtime import Client

MAX = "mx {\n a = $T[] parameter(0)\n b = $T[] parameter(1)\n ROOT m = $T[] maximum(a, b)\n}\n"
ADD = "ad {\n a = $T[] parameter(0)\n b = $T[] parameter(1)\n ROOT s = $T[] add(a, b)\n}\n"


def _softmax(t, rows, cols):
    return ("HloModule softmax\n" + (MAX + ADD).replace("$T", t) +
            f"ENTRY e {{\n x = {t}[{rows},{cols}] parameter(0)\n"
            f" ninf = {t}[] constant(-inf)\n zero = {t}[] constant(0)\n"
            f" m = {t}[{rows}] reduce(x, ninf), dimensions={{1}}, to_apply=mx\n"
            f" mb = {t}[{rows},{cols}] broadcast(m), dimensions={{0}}\n"
            f" d = {t}[{rows},{cols}] subtract(x, mb)\n e = {t}[{rows},{cols}] exponential(d)\n"
            f" s = {t}[{rows}] reduce(e, zero), dimensions={{1}}, to_apply=ad\n"
            f" sb = {t}[{rows},{cols}] broadcast(s), dimensions={{0}}\n"
            f" ROOT r = {t}[{rows},{cols}] divide(e, sb)\n}}\n")


def _layernorm(t, rows, cols):
    return ("HloModule layernorm\n" + ADD.replace("$T", t) +
            f"ENTRY e {{\n x = {t}[{rows},{cols}] parameter(0)\n g = {t}[{cols}] parameter(1)\n"
            f" beta = {t}[{cols}] parameter(2)\n zero = {t}[] constant(0)\n"
            f" n = {t}[] constant({cols})\n eps = {t}[] constant(1e-5)\n"
            f" s = {t}[{rows}] reduce(x, zero), dimensions={{1}}, to_apply=ad\n"
            f" nb = {t}[{rows}] broadcast(n), dimensions={{}}\n"
            f" mean = {t}[{rows}] divide(s, nb)\n"
            f" mean2 = {t}[{rows},1] reshape(mean)\n mean1 = {t}[{rows}] reshape(mean2)\n"
            f" mb = {t}[{rows},{cols}] broadcast(mean1), dimensions={{0}}\n"
            f" xc = {t}[{rows},{cols}] subtract(x, mb)\n sq = {t}[{rows},{cols}] multiply(xc, xc)\n"
            f" v = {t}[{rows}] reduce(sq, zero), dimensions={{1}}, to_apply=ad\n"
            f" var = {t}[{rows}] divide(v, nb)\n epsb = {t}[{rows}] broadcast(eps), dimensions={{}}\n"
            f" ve = {t}[{rows}] add(var, epsb)\n inv = {t}[{rows}] rsqrt(ve)\n"
            f" ib = {t}[{rows},{cols}] broadcast(inv), dimensions={{0}}\n"
            f" y = {t}[{rows},{cols}] multiply(xc, ib)\n"
            f" gb = {t}[{rows},{cols}] broadcast(g), dimensions={{1}}\n"
            f" bb = {t}[{rows},{cols}] broadcast(beta), dimensions={{1}}\n"
            f" yg = {t}[{rows},{cols}] multiply(y, gb)\n"
            f" ROOT r = {t}[{rows},{cols}] add(yg, bb)\n}}\n")


def _steps(text):
    return [(type(s).__name__, s.instr.name) for s in
            be.compile_module(parse_hlo_module(text)).entry.steps]


def _check(text, *args, tol=2e-6):
    module = parse_hlo_module(text)
    want = np.asarray(evaluate(module, *args))
    got = np.asarray(Client(backend="cpu").compile(module)(*args))
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    return got


@pytest.mark.parametrize("t,dt", [("f32", np.float32), ("f64", np.float64)])
@pytest.mark.parametrize("rows,cols", [(7, 33), (64, 64), (1, 1000), (300, 5)])
def test_softmax_one_kernel(t, dt, rows, cols):
    text = _softmax(t, rows, cols)
    assert _steps(text) == [("KernelStep", "row_fusion")]
    x = (np.random.default_rng(rows).standard_normal((rows, cols)) * 5).astype(dt)
    _check(text, x, tol=2e-6 if t == "f32" else 1e-12)


@pytest.mark.parametrize("rows,cols", [(9, 31), (48, 48), (130, 260)])
def test_layernorm_one_kernel(rows, cols):
    text = _layernorm("f32", rows, cols)
    assert _steps(text) == [("KernelStep", "row_fusion")]  # gamma, beta: inputs
    rng = np.random.default_rng(cols)
    x = rng.standard_normal((rows, cols)).astype(np.float32) * 3 + 1
    g, b = rng.standard_normal(cols).astype(np.float32), rng.standard_normal(cols).astype(
        np.float32)
    _check(text, x, g, b, tol=2e-5)


def test_two_column_dimensions():
    text = ("HloModule r3\n" + ADD.replace("$T", "f32") +
            "ENTRY e {\n x = f32[5,6,7] parameter(0)\n zero = f32[] constant(0)\n"
            " s = f32[5] reduce(x, zero), dimensions={1,2}, to_apply=ad\n"
            " sb = f32[5,6,7] broadcast(s), dimensions={0}\n"
            " ROOT r = f32[5,6,7] subtract(x, sb)\n}\n")
    assert _steps(text) == [("KernelStep", "row_fusion")]
    _check(text, np.random.default_rng(1).standard_normal((5, 6, 7)).astype(np.float32),
           tol=1e-5)


def test_column_broadcast_of_a_row_value_is_not_fused():
    """rows == cols: broadcasting the row sums along the other dimension reads another
    row's value; no row fusion (the result still matches)."""
    text = ("HloModule cb\n" + ADD.replace("$T", "f32") +
            "ENTRY e {\n x = f32[16,16] parameter(0)\n zero = f32[] constant(0)\n"
            " s = f32[16] reduce(x, zero), dimensions={1}, to_apply=ad\n"
            " sb = f32[16,16] broadcast(s), dimensions={1}\n"
            " ROOT r = f32[16,16] subtract(x, sb)\n}\n")
    assert all(name != "row_fusion" for _, name in _steps(text))
    _check(text, np.random.default_rng(2).standard_normal((16, 16)).astype(np.float32),
           tol=1e-5)


def test_reduction_used_outside_stays_out():
    text = ("HloModule out\n" + ADD.replace("$T", "f32") +
            "ENTRY e {\n x = f32[8,20] parameter(0)\n zero = f32[] constant(0)\n"
            " s = f32[8] reduce(x, zero), dimensions={1}, to_apply=ad\n"
            " sb = f32[8,20] broadcast(s), dimensions={0}\n"
            " d = f32[8,20] subtract(x, sb)\n"
            " ROOT t = (f32[8,20], f32[8]) tuple(d, s)\n}\n")
    assert all(name != "row_fusion" for _, name in _steps(text))
    module = parse_hlo_module(text)
    x = np.random.default_rng(3).standard_normal((8, 20)).astype(np.float32)
    got = Client(backend="cpu").compile(module)(x)
    want = evaluate(module, x)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-5)


def test_inside_a_compiled_while():
    body = _softmax("f32", 4, 10).split("ENTRY")[0].replace("HloModule softmax\n", "")
    text = ("HloModule loop\n" + body +
            "c {\n s = (s32[], f32[4,10]) parameter(0)\n i = s32[] get-tuple-element(s), index=0\n"
            " k = s32[] constant(3)\n ROOT lt = pred[] compare(i, k), direction=LT\n}\n"
            "b {\n s = (s32[], f32[4,10]) parameter(0)\n i = s32[] get-tuple-element(s), index=0\n"
            " x = f32[4,10] get-tuple-element(s), index=1\n"
            " ninf = f32[] constant(-inf)\n zero = f32[] constant(0)\n"
            " m = f32[4] reduce(x, ninf), dimensions={1}, to_apply=mx\n"
            " mb = f32[4,10] broadcast(m), dimensions={0}\n d = f32[4,10] subtract(x, mb)\n"
            " e = f32[4,10] exponential(d)\n"
            " sm = f32[4] reduce(e, zero), dimensions={1}, to_apply=ad\n"
            " sb = f32[4,10] broadcast(sm), dimensions={0}\n r = f32[4,10] divide(e, sb)\n"
            " one = s32[] constant(1)\n i1 = s32[] add(i, one)\n"
            " ROOT t = (s32[], f32[4,10]) tuple(i1, r)\n}\n"
            "ENTRY e {\n x = f32[4,10] parameter(0)\n z = s32[] constant(0)\n"
            " init = (s32[], f32[4,10]) tuple(z, x)\n"
            " ROOT w = (s32[], f32[4,10]) while(init), condition=c, body=b\n}\n")
    steps = be.compile_module(parse_hlo_module(text)).entry.steps
    assert any(isinstance(s, cf.CompiledWhileStep) for s in steps)
    module = parse_hlo_module(text)
    x = np.random.default_rng(4).standard_normal((4, 10)).astype(np.float32)
    got = Client(backend="cpu").compile(module)(x)
    want = evaluate(module, x)
    np.testing.assert_allclose(np.asarray(got[1]), np.asarray(want[1]), rtol=1e-6, atol=1e-6)


def test_results_held_by_the_caller_are_not_overwritten():
    text = _softmax("f32", 256, 128)
    program = Client(backend="cpu").compile(parse_hlo_module(text))
    rng = np.random.default_rng(5)
    first = np.asarray(program(rng.standard_normal((256, 128)).astype(np.float32)))
    keep = first.copy()
    program(rng.standard_normal((256, 128)).astype(np.float32))
    assert np.array_equal(first, keep)

"""Small dots as generated kernels (backends/cpu/gemm_kernel.py) against the interpreter:
f32 and f64, any dimension numbers whose contracting and rhs free dimensions read as one
strided dimension (batch dimensions anywhere, several lhs free dimensions, transposed
operands), row counts and column counts around the kernel's tiles (ROWS rows, COLS vectors,
scalar tails), size-1 dimensions, NaN and infinity propagation, inside a compiled while loop;
the shapes it leaves to BLAS."""

from __future__ import annotations

import numpy as np
import pytest

from xlapy.backends.cpu import backend as be
from xlapy.backends.cpu import gemm_kernel
from xlapy.interpreter import evaluate
from xlapy.parser import parse_hlo_module
from xlapy.runtime import Client

NP = {"f32": np.float32, "f64": np.float64}
EPS = {"f32": 2.0 ** -23, "f64": 2.0 ** -52}


def _text(t, a, b, out, dn):
    def dims(d):
        return ",".join(map(str, d))

    return (f"HloModule m\nENTRY e {{\n  a = {t}[{dims(a)}] parameter(0)\n"
            f"  b = {t}[{dims(b)}] parameter(1)\n  ROOT d = {t}[{dims(out)}] dot(a, b), {dn}\n}}\n")


def _check(text, a, b, t, k, kernel=True):
    module = parse_hlo_module(text)
    steps = [type(s).__name__ for s in be.compile_module(module).entry.steps]
    assert steps == (["KernelStep"] if kernel else ["LibraryStep"]), steps
    got = np.asarray(Client(backend="cpu").compile(module)(a, b))
    want = np.asarray(evaluate(module, a, b))
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(np.isnan(got), np.isnan(want))
    finite = np.isfinite(want)
    assert np.array_equal(got[~finite], want[~finite], equal_nan=True)
    # each output is a sum of k products, summed in order: within k ulps of the magnitudes
    scale = np.abs(a[np.isfinite(a)]).max(initial=0) * np.abs(b[np.isfinite(b)]).max(initial=0)
    np.testing.assert_allclose(got[finite], want[finite], rtol=0,
                               atol=4 * k * EPS[t] * max(scale, 1e-30))
    return got


@pytest.mark.parametrize("t", ["f32", "f64"])
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (3, 5, 7), (4, 16, 16), (5, 9, 17), (8, 33, 24),
                                   (7, 3, 40), (13, 64, 31), (32, 32, 32), (4, 1, 8)])
@pytest.mark.parametrize("batch", [(), (3,), (2, 5)])
def test_shapes_and_batches(t, m, k, n, batch):
    rng = np.random.default_rng(m * 1000 + k * 10 + n)
    a = rng.standard_normal(batch + (m, k)).astype(NP[t])
    b = rng.standard_normal(batch + (k, n)).astype(NP[t])
    nb = len(batch)
    bd = ",".join(map(str, range(nb)))
    dn = (f"lhs_batch_dims={{{bd}}}, rhs_batch_dims={{{bd}}}, " if nb else "") + \
        f"lhs_contracting_dims={{{nb + 1}}}, rhs_contracting_dims={{{nb}}}"
    _check(_text(t, a.shape, b.shape, batch + (m, n), dn), a, b, t, k)


@pytest.mark.parametrize("t", ["f32", "f64"])
def test_transposed_operands_and_batch_dimensions_anywhere(t):
    rng = np.random.default_rng(1)
    # lhs [k, B1, m], rhs [n, B1, k]: a strided contracting dimension, strided b columns
    a = rng.standard_normal((6, 3, 5)).astype(NP[t])
    b = rng.standard_normal((9, 3, 6)).astype(NP[t])
    dn = ("lhs_batch_dims={1}, rhs_batch_dims={1}, lhs_contracting_dims={0}, "
          "rhs_contracting_dims={2}")
    _check(_text(t, a.shape, b.shape, (3, 5, 9), dn), a, b, t, 6)
    # two batch dimensions in another order, two lhs free dimensions
    a = rng.standard_normal((2, 4, 3, 7, 5)).astype(NP[t])  # B0, m0, B1, k, m1
    b = rng.standard_normal((3, 2, 7, 16)).astype(NP[t])  # B1, B0, k, n
    dn = ("lhs_batch_dims={0,2}, rhs_batch_dims={1,0}, lhs_contracting_dims={3}, "
          "rhs_contracting_dims={2}")
    _check(_text(t, a.shape, b.shape, (2, 3, 4, 5, 16), dn), a, b, t, 7)


def test_collapsed_contracting_dimensions_and_size_one():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((4, 3, 5)).astype(np.float32)  # m, k0, k1
    b = rng.standard_normal((3, 5, 1, 12)).astype(np.float32)  # k0, k1, 1, n
    dn = "lhs_contracting_dims={1,2}, rhs_contracting_dims={0,1}"
    _check(_text("f32", a.shape, b.shape, (4, 1, 12), dn), a, b, "f32", 15)


def test_contracting_dimensions_that_do_not_collapse_go_to_blas():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((4, 3, 5)).astype(np.float32)
    b = rng.standard_normal((5, 3, 8)).astype(np.float32)  # k1, k0, n: not one stride
    dn = "lhs_contracting_dims={1,2}, rhs_contracting_dims={1,0}"
    instr = parse_hlo_module(_text("f32", a.shape, b.shape, (4, 8), dn)).entry.root
    assert isinstance(gemm_kernel.form(instr), str)
    _check(_text("f32", a.shape, b.shape, (4, 8), dn), a, b, "f32", 15, kernel=False)


def test_nan_and_infinity_propagate():
    a = np.ones((5, 4), np.float32)
    b = np.ones((4, 16), np.float32)
    a[1, 2] = np.nan
    b[3, 5] = np.inf
    a[3, 0] = -np.inf
    _check(_text("f32", a.shape, b.shape, (5, 16),
                 "lhs_contracting_dims={1}, rhs_contracting_dims={0}"), a, b, "f32", 4)


def test_large_or_narrow_dots_stay_with_blas():
    def form(a, b, out):
        text = _text("f32", a, b, out, "lhs_contracting_dims={1}, rhs_contracting_dims={0}")
        return gemm_kernel.form(parse_hlo_module(text).entry.root)

    assert isinstance(form((256, 256), (256, 256), (256, 256)), str)  # above SMALL
    assert isinstance(form((1, 4096), (4096, 64), (1, 64)), str)  # one row, a long sum
    assert isinstance(form((64, 2048), (2048, 4), (64, 4)), str)  # four columns
    assert not isinstance(form((1, 16), (16, 4), (1, 4)), str)  # tiny: any shape
    assert not isinstance(form((32, 64), (64, 128), (32, 128)), str)


def test_inside_a_compiled_while_loop():
    text = """HloModule w
c {
  s = (s32[], f32[8,16], f32[16,16]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(6)
  ROOT lt = pred[] compare(i, n), direction=LT
}
b {
  s = (s32[], f32[8,16], f32[16,16]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  h = f32[8,16] get-tuple-element(s), index=1
  w = f32[16,16] get-tuple-element(s), index=2
  z = f32[8,16] dot(h, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  h1 = f32[8,16] tanh(z)
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  ROOT t = (s32[], f32[8,16], f32[16,16]) tuple(i1, h1, w)
}
ENTRY e {
  h0 = f32[8,16] parameter(0)
  w0 = f32[16,16] parameter(1)
  zero = s32[] constant(0)
  s0 = (s32[], f32[8,16], f32[16,16]) tuple(zero, h0, w0)
  r = (s32[], f32[8,16], f32[16,16]) while(s0), condition=c, body=b
  ROOT h = f32[8,16] get-tuple-element(r), index=1
}
"""
    from xlapy.backends.cpu import control_flow as cf

    module = parse_hlo_module(text)
    program = be.compile_module(module)
    assert any(isinstance(s, cf.CompiledWhileStep) for s in program.entry.steps)
    rng = np.random.default_rng(4)
    h0 = rng.standard_normal((8, 16)).astype(np.float32)
    w0 = (rng.standard_normal((16, 16)) / 4).astype(np.float32)
    got = np.asarray(Client(backend="cpu").compile(module)(h0, w0))
    want = np.asarray(evaluate(module, h0, w0))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)

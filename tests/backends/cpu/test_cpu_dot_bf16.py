"""bf16 dots on the CPU backend's bf16 core (backends/cpu/gemm_words.py: vdpbf16ps, f32
sums of the exact products) on hosts with AVX512-BF16: against the exact sum (each output
within k roundings of its magnitude), remainders, layouts, batches, bf16 and f32 results,
infinities and NaNs where the interpreter has them; the plan (the dot reads the bf16
operands themselves, no convert of them); and the rule: hosts without the instruction, or a
compile that keeps denormals (the instruction flushes them), take the f32 route."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from xlapy.backends.cpu import backend as be
from xlapy.backends.cpu import gemm_kernel, gemm_words
from xlapy.interpreter import evaluate
from xlapy.parser import parse_hlo_module
from xlapy.runtime import Client

BF16 = ml_dtypes.bfloat16
#: XLA:CPU's denormal flushing, which the core needs (the suite's default is off: conftest)
FLUSH = {"flush_denormals": True}
needs_core = pytest.mark.skipif(not gemm_words.bf16_supported(),
                                reason="the host has no AVX512-BF16 (the f32 route is tested "
                                       "in test_cpu_dot_kernel.py)")


def _dims(d):
    return ",".join(map(str, d))


def _text(res, lhs, rhs, out, lc=(1,), rc=(0,), lb=(), rb=()):
    return (f"HloModule m\nENTRY e {{\n  a = bf16[{_dims(lhs)}] parameter(0)\n"
            f"  b = bf16[{_dims(rhs)}] parameter(1)\n"
            f"  ROOT d = {res}[{_dims(out)}] dot(a, b), lhs_contracting_dims={{{_dims(lc)}}}, "
            f"rhs_contracting_dims={{{_dims(rc)}}}, lhs_batch_dims={{{_dims(lb)}}}, "
            f"rhs_batch_dims={{{_dims(rb)}}}\n}}\n")


def _dot_steps(module, **options):
    steps = be.compile_module(module, **options).entry.steps
    return [s for s in steps if s.instr.opcode == "dot"], steps


def _check(text, a, b, k):
    module = parse_hlo_module(text)
    dots, steps = _dot_steps(module)
    assert len(dots) == 1 and gemm_kernel.form(dots[0].instr).kind == "bf16"
    assert [o.shape.element_type.name for o in dots[0].instr.operands] == ["BF16", "BF16"]
    assert not any(s.instr.opcode == "convert" and s.instr.shape.element_type.name == "F32"
                   for s in steps)  # no operand is converted
    got = np.asarray(Client(backend="cpu", backend_options=FLUSH).compile(module)(a, b))
    want = np.asarray(evaluate(module, a, b))
    assert got.dtype == want.dtype and got.shape == want.shape
    g, w = got.astype(np.float64), want.astype(np.float64)
    assert np.array_equal(np.isnan(g), np.isnan(w))
    finite = np.isfinite(w)
    assert np.array_equal(g[~finite & ~np.isnan(w)], w[~finite & ~np.isnan(w)])
    scale = max(1e-30, float(np.abs(w[finite]).max(initial=0)))
    eps = 2.0 ** -8 if got.dtype == BF16 else 2.0 ** -23
    # f32 sums of exact products: within k f32 roundings (and one bf16 rounding) of scale
    tol = (k * 2.0 ** -23 + (eps if got.dtype == BF16 else 0)) * scale * 4
    assert float(np.abs(g[finite] - w[finite]).max(initial=0)) <= tol
    return got


def _values(rng, shape):
    return rng.standard_normal(shape).astype(BF16)


@needs_core
@pytest.mark.parametrize("res", ["f32", "bf16"])
@pytest.mark.parametrize("m,k,n", [(6, 700, 64), (131, 517, 70), (1030, 300, 129),
                                   (600, 64, 1100), (600, 1, 600)])
def test_shapes_and_remainders(res, m, k, n):
    """Rows past a tile and past a work item, columns past a panel and a pack, k odd (half
    a word, one value) and past a block."""
    rng = np.random.default_rng(m + k + n)
    a, b = _values(rng, (m, k)), _values(rng, (k, n))
    assert gemm_words.applies_bf16(parse_hlo_module(_text(res, a.shape, b.shape,
                                                          (m, n))).entry.root)
    _check(_text(res, a.shape, b.shape, (m, n)), a, b, k)


@needs_core
def test_layouts_and_batch_dimensions():
    rng = np.random.default_rng(3)
    a, b = _values(rng, (300, 700)), _values(rng, (200, 700))  # rhs along k
    _check(_text("f32", a.shape, b.shape, (300, 200), rc=(1,)), a, b, 700)
    a, b = _values(rng, (700, 300)), _values(rng, (700, 200))  # lhs transposed
    _check(_text("f32", a.shape, b.shape, (300, 200), lc=(0,)), a, b, 700)
    a, b = _values(rng, (4, 100, 130)), _values(rng, (4, 130, 90))
    _check(_text("bf16", a.shape, b.shape, (4, 100, 90), lc=(2,), rc=(1,), lb=(0,),
                 rb=(0,)), a, b, 130)


@needs_core
def test_infinities_and_nans_propagate():
    rng = np.random.default_rng(4)
    a, b = _values(rng, (64, 300)), _values(rng, (300, 96))
    a[3, 7] = np.inf
    a[5, :] = 0
    a[5, 11] = -np.inf
    b[11, 20] = 0  # -inf * 0: NaN in that output
    b[40, 50] = np.nan
    _check(_text("f32", a.shape, b.shape, (64, 96)), a, b, 300)


@needs_core
def test_denormals_kept_take_the_f32_route():
    """vdpbf16ps flushes denormals; a compile that keeps them (flush_denormals=False)
    converts the operands and runs the f32 GEMM, and its result keeps a product of
    denormal size that the core flushes."""
    text = _text("f32", (64, 300), (300, 96), (64, 96))
    module = parse_hlo_module(text)
    dots, _ = _dot_steps(module, flush_denormals=False)
    assert [o.shape.element_type.name for o in dots[0].instr.operands] == ["F32", "F32"]
    a = np.zeros((64, 300), BF16)
    b = np.zeros((300, 96), BF16)
    a[0, 0], b[0, 0] = 2.0 ** -70, 2.0 ** -70  # the product 2^-140: an f32 denormal
    kept = Client(backend="cpu", backend_options={"flush_denormals": False}).compile(text)
    assert np.asarray(kept(a, b))[0, 0] == np.float32(2.0 ** -140)
    flushed = np.asarray(Client(backend="cpu", backend_options=FLUSH).compile(text)(a, b))
    assert flushed[0, 0] == 0  # XLA:CPU's value (its FMAs under FTZ)
    a[1, 0], b[0, 1] = 2.0 ** -130, 1.0  # a denormal input is read as zero (DAZ)
    assert np.asarray(Client(backend="cpu", backend_options=FLUSH).compile(text)(a, b))[
        1, 1] == 0


def test_rule_follows_the_host(monkeypatch):
    text = _text("f32", (256, 512), (512, 256), (256, 256))
    dot = parse_hlo_module(text).entry.root
    want = gemm_words.bits() == 512 and "+avx512bf16" in gemm_words._features()
    assert gemm_words.applies_bf16(dot) == want
    monkeypatch.setattr(gemm_kernel, "BITS", 256)
    assert not gemm_words.applies_bf16(dot)
    be.clear_cache()
    dots, _ = _dot_steps(parse_hlo_module(text))  # the f32 route
    assert [o.shape.element_type.name for o in dots[0].instr.operands] == ["F32", "F32"]
    be.clear_cache()

"""XLA:CPU's default numerics on the CPU backend: excess precision, flushed denormals and
fused multiply-adds.

Fixtures: tests/fixtures/numerics (tools/gen_numerics_fixtures.py, real XLA:CPU of jaxlib
0.10.2). The CPU backend by default gives XLA:CPU's default answers bit for bit; with
``allow_excess_precision=False, flush_denormals=False, fma_contraction=False`` it gives the
interpreter's (the exact
HLO semantics), which for the bf16 programs are XLA's with
``--xla_allow_excess_precision=false``.
"""

from __future__ import annotations

import os

import ml_dtypes
import numpy as np
import pytest

from xlapy import Client
from xlapy.backends.cpu import backend as cpu_backend
from xlapy.interpreter import evaluate
from xlapy.npz import load_npz
from xlapy.parser import parse_hlo_module
from xlapy.passes import PASSES, make_pipeline

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "numerics")
EXCESS = ["bf16_softmax", "bf16_chain_to_f32", "bf16_div_to_f32", "bf16_explicit_roundtrip"]
DENORMALS = ["denormals_f32", "denormals_f64", "denormals_bf16", "denormals_f16"]
FMA = ["fma_f32", "fma_f64", "fma_c64"]
STRICT = {"allow_excess_precision": False, "flush_denormals": False, "fma_contraction": False}


@pytest.fixture(autouse=True)
def _xla_cpu_defaults(monkeypatch):
    # tests/conftest.py runs the suite with the exact semantics; here the shipped defaults
    for key, value in cpu_backend.XLA_CPU_DEFAULTS.items():
        monkeypatch.setitem(cpu_backend.DEFAULT_OPTIONS, key, value)


def test_shipped_defaults_are_xla_cpus():
    assert cpu_backend.XLA_CPU_DEFAULTS == {"allow_excess_precision": True,
                                            "flush_denormals": True, "fma_contraction": True}
    backend = cpu_backend.CpuBackend()
    assert backend.allow_excess_precision and backend.flush_denormals and \
        backend.fma_contraction


def _load(name):
    with open(os.path.join(FIXTURES, f"{name}.hlo")) as f:
        text = f.read()
    arrays = load_npz(os.path.join(FIXTURES, f"{name}.npz"))
    args = [arrays[f"arg{i}"] for i in range(sum(k.startswith("arg") for k in arrays))]
    return text, args, arrays


def _run(text, args, backend="cpu", **options):
    out = Client(backend=backend, backend_options=options).compile(text)(*args)
    return [np.asarray(o) for o in (out if isinstance(out, (tuple, list)) else [out])]


def _differing(got, want) -> int:
    assert got.shape == want.shape and got.dtype == want.dtype, (got.dtype, want.dtype)
    k = got.dtype.itemsize
    return int((got.reshape(-1).view(f"u{k}") != want.reshape(-1).view(f"u{k}")).sum())


def _outputs(arrays, prefix):
    return [arrays[f"{prefix}{i}"] for i in range(sum(k.startswith(prefix) for k in arrays))]


@pytest.mark.parametrize("name", EXCESS + DENORMALS + FMA)
def test_cpu_default_is_xla_cpu_bit_for_bit(name):
    text, args, arrays = _load(name)
    got = _run(text, args)
    for i, (g, w) in enumerate(zip(got, _outputs(arrays, "out"), strict=True)):
        assert _differing(g, w) == 0, f"{name} output {i}"


@pytest.mark.parametrize("name", EXCESS + DENORMALS + FMA)
def test_cpu_options_off_is_the_interpreter(name):
    text, args, _ = _load(name)
    for g, w in zip(_run(text, args, **STRICT), _run(text, args, "interpreter"), strict=True):
        assert _differing(g, w) == 0


@pytest.mark.parametrize("name", EXCESS)
def test_interpreter_is_xla_without_excess_precision(name):
    text, args, arrays = _load(name)
    for g, w in zip(_run(text, args, "interpreter"), _outputs(arrays, "strict"), strict=True):
        assert _differing(g, w) == 0


@pytest.mark.parametrize("name", ["bf16_softmax", "bf16_chain_to_f32", "bf16_div_to_f32"]
                         + DENORMALS[:3] + FMA)
def test_the_defaults_matter(name):
    # the exact HLO semantics differ from XLA:CPU's defaults on these programs (so the tests
    # above can fail); f16 is the exception: XLA:CPU keeps its denormals
    text, args, arrays = _load(name)
    got = _run(text, args, "interpreter")
    assert sum(_differing(g, w) for g, w in zip(got, _outputs(arrays, "out"))) > 0


def test_each_option_alone():
    text, args, arrays = _load("bf16_softmax")
    assert _differing(_run(text, args, flush_denormals=False)[0], arrays["out0"]) == 0
    assert _differing(_run(text, args, allow_excess_precision=False)[0], arrays["strict0"]) == 0
    text, args, arrays = _load("denormals_f32")
    got = _run(text, args, allow_excess_precision=False)
    assert all(_differing(g, w) == 0 for g, w in zip(got, _outputs(arrays, "out")))
    got = _run(text, args, flush_denormals=False)
    assert sum(_differing(g, w) for g, w in zip(got, _outputs(arrays, "out"))) > 0


def test_dot_converted_to_f32_is_not_rounded_to_bf16():
    # XLA computes the bf16 dot in f32 and the convert reads it unrounded; the f32
    # summation order of XLA's dot library is not xlapy's, so compare to a tolerance
    text, args, arrays = _load("bf16_dot_to_f32")
    (got,) = _run(text, args)
    np.testing.assert_allclose(got, arrays["out0"], rtol=1e-5, atol=1e-5)
    assert not np.array_equal(got, got.astype(arrays["arg0"].dtype).astype(np.float32))
    (strict,) = _run(text, args, **STRICT)
    assert np.array_equal(strict, strict.astype(arrays["arg0"].dtype).astype(np.float32))
    assert _differing(strict, arrays["strict0"]) <= 1  # summation order only


def test_interpreter_flush_option():
    text, args, arrays = _load("denormals_f32")
    plain = _run(text, args, "interpreter")
    flushed = _run(text, args, "interpreter", flush_denormals=True)
    want = _outputs(arrays, "out")
    assert sum(_differing(g, w) for g, w in zip(flushed, want)) < \
        sum(_differing(g, w) for g, w in zip(plain, want))
    assert _differing(flushed[0], want[0]) == 0  # sign of a denormal is 0


def test_program_cache_key_includes_the_options():
    module = parse_hlo_module(_load("bf16_softmax")[0])
    keys = {cpu_backend.fingerprint(module, a, f, c) for a in (True, False)
            for f in (True, False) for c in (True, False)}
    assert len(keys) == 8
    assert cpu_backend.fingerprint(module) == cpu_backend.fingerprint(module, True, True, True)


def test_excess_precision_pass():
    assert "excess-precision" in PASSES
    module = parse_hlo_module("""HloModule m
ENTRY e {
  x = bf16[4] parameter(0)
  e = bf16[4] exponential(x)
  c = f32[4] convert(e)
  r = bf16[4] convert(c)
  d = f64[4] convert(e)
  ROOT t = (f32[4], bf16[4], bf16[4], f64[4]) tuple(c, e, r, d)
}""")
    before = module.to_string()
    assert make_pipeline(["excess-precision", "dce"]).run(module)
    text = module.to_string()
    assert "f32[4]{0} exponential(" in text  # the convert reads exp at f32
    # the bf16 exp's other users read that value rounded (XLA's normalization): one exp
    assert text.count("exponential(") == 1 and "bf16[4]{0} convert(%e.f32)" in text
    assert "f64[4]{0} convert(%e.round)" in text  # only converts to f32 (XLA's high type)
    x = np.array([0.5, -3.0, 11.0, 88.5], ml_dtypes.bfloat16)
    old, new = (evaluate(parse_hlo_module(t), x) for t in (before, text))
    for k in (1, 2, 3):  # everything but the f32 convert is what it was, bit for bit
        assert np.asarray(old[k]).tobytes() == np.asarray(new[k]).tobytes()
    np.testing.assert_allclose(np.asarray(new[0]), np.exp(x.astype(np.float32)), rtol=1e-6)
    assert not make_pipeline(["excess-precision"]).run(parse_hlo_module("""HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  b = bf16[4] convert(x)
  ROOT c = f32[4] convert(b)
}"""))  # a user's f32 -> bf16 -> f32 stays (XLA:CPU keeps it too)


def test_client_rejects_unknown_backend_options():
    from xlapy.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match="does not take the options"):
        Client(backend="cpu", backend_options={"fast_math": True})


def test_kernels_called_from_native_code_leave_mxcsr_alone():
    # MXCSR is written by each kernel's entry point (the symbol Python calls), never by a
    # kernel or loop that native code calls (the entry computation's function calling the
    # loop's, the loop's calling its kernels): ldmxcsr per kernel call made loops several
    # times slower. The loop still flushes: the entry point Python called set FTZ|DAZ.
    from llvmlite import ir

    from xlapy.backends.cpu import denormals, native
    from xlapy.backends.cpu.backend import Planner

    text = """HloModule m
body {
  s = (s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  j = s32[] add(i, one)
  v = f32[8] get-tuple-element(s), index=1
  h = f32[] constant(0.5)
  hb = f32[8] broadcast(h), dimensions={}
  w = f32[8] multiply(v, hb)
  ROOT t = (s32[], f32[8]) tuple(j, w)
}
cond {
  s = (s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
ENTRY e {
  x = f32[8] parameter(0)
  z = s32[] constant(0)
  s = (s32[], f32[8]) tuple(z, x)
  r = (s32[], f32[8]) while(s), condition=cond, body=body
  ROOT v = f32[8] get-tuple-element(r), index=1
}"""
    planner = Planner(parse_hlo_module(text))
    entry = native.compile_entry(planner, planner.plan(planner.module.entry))
    assert entry is not None
    irmod = planner.irmod
    denormals.flush_in_module(irmod)
    if not denormals.supported():
        pytest.skip("no MXCSR on this host")
    ldmxcsr = irmod.globals["llvm.x86.sse.ldmxcsr"]
    writers = {fn.name for fn in irmod.functions if not fn.is_declaration and any(
        isinstance(i, ir.CallInstr) and i.callee is ldmxcsr
        for block in fn.blocks for i in block.instructions)}
    kernels = {fn.name for fn in irmod.functions
               if not fn.is_declaration and not fn.name.endswith(denormals.ENTRY_SUFFIX)}
    assert any(name.startswith("while.") for name in kernels) and entry.spec.name in kernels
    assert writers == {name + denormals.ENTRY_SUFFIX for name in kernels}
    # and the loop flushes: a denormal input reads as 0 (DAZ); unflushed it halves exactly
    x = np.full(8, 2.0 ** -130, np.float32)
    (got,) = _run(text, [x], flush_denormals=True)
    assert not got.any()
    (kept,) = _run(text, [x], flush_denormals=False)
    assert (kept == np.float32(2.0 ** -133)).all()


def test_multiply_adds_are_contracted_once_each():
    """Each output of fma_f32/fma_f64 (a*b+c, c+a*b, a*b-c, c-a*b, a*b+c*d, chains, a scalar
    constant, a broadcast row, a result converted to f64 after the add) and of fma_c64 (a
    complex product's parts) is XLA:CPU's fused multiply-add; with fma_contraction off
    alone, the two roundings the HLO asks for."""
    for name in FMA:
        text, args, arrays = _load(name)
        want = _outputs(arrays, "out")
        fused = _run(text, args, allow_excess_precision=False, flush_denormals=False)
        assert all(_differing(g, w) == 0 for g, w in zip(fused, want, strict=True)), name
        plain = _run(text, args, fma_contraction=False)
        exact = _run(text, args, "interpreter")
        assert all(_differing(g, w) == 0 for g, w in zip(plain, exact, strict=True)), name
        assert all(_differing(g, w) > 0 for g, w in zip(plain, want)), name


def test_a_product_with_two_uses_is_not_fused():
    """LLVM fuses a product into an add only when the add is its one use: (a*b + c) * (a*b)
    in one kernel keeps both roundings (the interpreter's bits), and jax's
    ``helper(x, y) + helper(y, x)`` (x*y and y*x, one product after XLA's CSE, used twice)
    gives XLA:CPU's output (fixture nested_jit_call)."""
    text = """HloModule m
ENTRY e {
  a = f32[4096] parameter(0)
  b = f32[4096] parameter(1)
  c = f32[4096] parameter(2)
  p = f32[4096] multiply(a, b)
  s = f32[4096] add(p, c)
  ROOT r = f32[4096] multiply(s, p)
}
"""
    rng = np.random.default_rng(5)
    args = [rng.standard_normal(4096).astype(np.float32) for _ in range(3)]
    (got,) = _run(text, args, allow_excess_precision=False, flush_denormals=False)
    (want,) = _run(text, args, "interpreter")
    assert _differing(got, want) == 0
    fused = text.replace("ROOT r = f32[4096] multiply(s, p)", "ROOT r = f32[4096] multiply(s, c)")
    (got,) = _run(fused, args)
    (want,) = _run(fused, args, "interpreter")
    assert _differing(got, want) > 0  # here the add is the product's one use: fused
    jax_dir = os.path.join(FIXTURES, "..", "jax")
    with open(os.path.join(jax_dir, "nested_jit_call.pre.hlo")) as f:
        text = f.read()
    arrays = load_npz(os.path.join(jax_dir, "nested_jit_call.npz"))
    (got,) = _run(text, [arrays["arg0"], arrays["arg1"]])
    assert _differing(got, arrays["out0"]) == 0


def test_f16_nans_as_xla_cpu():
    """XLA:CPU rounds f32 -> f16 with F16C: a signalling NaN comes out quiet (sign | 0x7E00 |
    the payload's top bits; NumPy keeps it signalling); negate and abs work on the sign bit
    and keep it. The interpreter and the CPU backend (in either numerics) give XLA's bits."""
    text, args, arrays = _load("f16_nans")
    want = _outputs(arrays, "out")
    for got in (_run(text, args), _run(text, args, **STRICT), _run(text, args, "interpreter")):
        assert all(_differing(g, w) == 0 for g, w in zip(got, want, strict=True))


def test_f32_tanh_as_xla_cpu():
    """XLA:CPU's f32 tanh is a rational approximation (x P(x^2) / Q(x^2) by FMAs, x itself
    near 0, +-1 from 20 on), up to 5 ulps from tanh; bf16 through it in f32. Both xlapy
    paths, in either numerics, give its bits."""
    text, args, arrays = _load("tanh_f32")
    want = _outputs(arrays, "out")
    for got in (_run(text, args), _run(text, args, **STRICT), _run(text, args, "interpreter")):
        assert [_differing(g, w) for g, w in zip(got, want, strict=True)] == [0] * len(want)


def test_f32_libm_functions_as_xla_cpu():
    """XLA:CPU computes f32 sin, cos, tan, cbrt, atan2 and pow with the C library's f32
    functions (glibc's sinf, cosf, ...; bf16 and f16 through them in f32), where rounding
    the f64 function differs by an ulp in 1-15% of the elements. The interpreter and the
    CPU backend (in either numerics: no denormal inputs) give XLA's bits."""
    text, args, arrays = _load("libm_f32")
    want = _outputs(arrays, "out")
    for got in (_run(text, args), _run(text, args, **STRICT), _run(text, args, "interpreter")):
        assert [_differing(g, w) for g, w in zip(got, want, strict=True)] == [0] * len(want)

"""The compiled CPU backend against the interpreter: every compiled op and element type on
edge-case inputs, a long fused chain and ``xlapy run`` (the golden jax fixtures are in
test_cpu_golden.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from xlapy.backends.cpu.backend import (
    CpuBackend,
    InterpretStep,
    KernelStep,
    clear_cache,
    compile_module,
)
from xlapy.interpreter.evaluator import evaluate
from xlapy.interpreter.values import flatten
from xlapy.parser import parse_hlo_module
from xlapy.runtime import Client

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
N = 257  # not a multiple of any vector width: the loop's remainder runs too

FLOATS = {"f32": np.float32, "f64": np.float64}
INTS = {"s32": np.int32, "s64": np.int64, "u32": np.uint32, "u64": np.uint64}
TYPES = {**FLOATS, **INTS}


def _inputs(name: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    dtype = np.dtype(TYPES[name])
    if name in FLOATS:
        x = rng.standard_normal(N).astype(dtype) * dtype.type(10)
        special = [np.nan, -np.nan, 0.0, -0.0, np.inf, -np.inf, 1e-40, 1.0, -1.0, 3e38]
        x[: len(special)] = rng.permutation(np.array(special, dtype))
        return x
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, N, dtype=dtype, endpoint=True)
    small = rng.integers(-3 if info.min else 0, 4, N).astype(dtype)
    x[N // 2:] = small[N // 2:]
    special = [info.min, info.max, 0, 1, -1 if info.min else 2]
    x[: len(special)] = rng.permutation(np.array([int(v) for v in special], dtype))
    return x


def _run_both(text: str, *args):
    module = parse_hlo_module(text)
    got = Client(backend="cpu").compile(module)(*args)
    want = evaluate(module, *args)
    return module, got, want


def _fused_count(text: str) -> int:
    """How many compiled kernels the entry computation runs."""
    steps = compile_module(parse_hlo_module(text)).steps()
    return sum(isinstance(s, KernelStep) for s in steps)


def _same(got, want, *, rtol=0.0):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    if got.dtype.kind == "f":
        nan = np.isnan(want)
        assert np.array_equal(np.isnan(got), nan)
        if rtol:
            np.testing.assert_allclose(got[~nan], want[~nan], rtol=rtol, atol=0)
        else:  # bit-exact, zeros' signs included
            assert np.array_equal(got[~nan].view(f"u{got.itemsize}"),
                                  want[~nan].view(f"u{got.itemsize}"))
    else:
        assert np.array_equal(got, want)


BINARY = ["add", "subtract", "multiply", "divide", "maximum", "minimum"]


@pytest.mark.parametrize("t", sorted(TYPES))
@pytest.mark.parametrize("op", BINARY)
def test_binary(op, t):
    text = (f"HloModule m\nENTRY e {{\n a = {t}[{N}] parameter(0)\n b = {t}[{N}] parameter(1)\n"
            f" ROOT r = {t}[{N}] {op}(a, b)\n}}\n")
    a, b = _inputs(t, 1), _inputs(t, 2)
    b[:40] = a[:40]  # equal operands, zero pairs, INT_MIN / -1 cases below
    if t in INTS and t[0] == "s":
        a[40], b[40] = np.iinfo(a.dtype).min, -1
        b[41:45] = 0
    if t in FLOATS:
        a[45:49] = [0.0, -0.0, -0.0, 0.0]
        b[45:49] = [-0.0, 0.0, -0.0, 0.0]
    assert _fused_count(text) == 1
    _, got, want = _run_both(text, a, b)
    _same(got, want)


@pytest.mark.parametrize("op,t", [(op, t) for op in ("negate", "abs") for t in sorted(TYPES)
                                  if not (op == "abs" and t[0] == "u")])  # HLO: no unsigned abs
def test_unary_exact(op, t):
    text = (f"HloModule m\nENTRY e {{\n a = {t}[{N}] parameter(0)\n"
            f" ROOT r = {t}[{N}] {op}(a)\n}}\n")
    assert _fused_count(text) == 1
    _, got, want = _run_both(text, _inputs(t, 3))
    _same(got, want)


@pytest.mark.parametrize("t", sorted(FLOATS))
@pytest.mark.parametrize("op", ["exponential", "log", "sqrt", "tanh"])
def test_transcendental(op, t):
    text = (f"HloModule m\nENTRY e {{\n a = {t}[{N}] parameter(0)\n"
            f" ROOT r = {t}[{N}] {op}(a)\n}}\n")
    x = _inputs(t, 4)
    x[20:40] = np.abs(x[20:40])
    assert _fused_count(text) == 1
    _, got, want = _run_both(text, x)
    _same(got, want, rtol=2e-5 if t == "f32" else 1e-12)


@pytest.mark.parametrize("t", sorted(TYPES))
@pytest.mark.parametrize("direction", ["EQ", "NE", "LT", "LE", "GT", "GE"])
def test_compare_select(direction, t):
    ctype = "FLOAT" if t in FLOATS else ("SIGNED" if t[0] == "s" else "UNSIGNED")
    text = (f"HloModule m\nENTRY e {{\n a = {t}[{N}] parameter(0)\n b = {t}[{N}] parameter(1)\n"
            f" c = pred[{N}] compare(a, b), direction={direction}, type={ctype}\n"
            f" s = {t}[{N}] select(c, a, b)\n ROOT r = (pred[{N}], {t}[{N}]) tuple(c, s)\n}}\n")
    a, b = _inputs(t, 5), _inputs(t, 6)
    b[:30] = a[:30]
    assert _fused_count(text) == 2
    _, got, want = _run_both(text, a, b)
    for g, w in zip(flatten(got), flatten(want)):
        _same(g, w)


@pytest.mark.parametrize("src", sorted(TYPES) + ["pred"])
@pytest.mark.parametrize("dst", sorted(TYPES) + ["pred"])
def test_convert(src, dst):
    text = (f"HloModule m\nENTRY e {{\n a = {src}[{N}] parameter(0)\n"
            f" ROOT r = {dst}[{N}] convert(a)\n}}\n")
    if src == "pred":
        x = np.random.default_rng(7).integers(0, 2, N).astype(bool)
    else:
        x = _inputs(src, 7)
        if src in FLOATS:  # around the integer ranges' edges
            x[20:30] = [2.0**31, -2.0**31 - 1e3, 2.0**32, 2.0**63, -2.0**63, 2.0**64, -0.5,
                        4294967295.7, 2147483647.5, -2147483648.9]
    assert _fused_count(text) == (0 if src == dst else 1)  # convert to itself: simplified
    _, got, want = _run_both(text, x)
    _same(got, want)


CHAIN = """HloModule chain
ENTRY e {
  x = f32[64,33] parameter(0)
  y = f32[64,33] parameter(1)
  v = f32[33] parameter(2)
  half = f32[] constant(0.5)
  h = f32[64,33] broadcast(half), dimensions={}
  vb = f32[64,33] broadcast(v), dimensions={1}
  m = f32[64,33] multiply(x, h)
  a = f32[64,33] add(m, vb)
  t = f32[64,33] tanh(a)
  s = f32[64,33] subtract(t, y)
  mx = f32[64,33] maximum(s, y)
  e = f32[64,33] exponential(mx)
  l = f32[64,33] log(e)
  q = f32[64,33] sqrt(l)
  c = pred[64,33] compare(q, x), direction=GT
  sel = f32[64,33] select(c, q, a)
  ROOT d = f32[64,33] divide(sel, vb)
}
"""


def test_fused_chain_matches_interpreter():
    steps = compile_module(parse_hlo_module(CHAIN)).steps()
    kernels = [s for s in steps if isinstance(s, KernelStep)]
    assert len(kernels) == 1 and kernels[0].instr.opcode == "fusion"
    fused = kernels[0].instr.attrs["calls"]
    assert sum(i.opcode not in ("parameter", "constant") for i in fused.instructions) == 13
    rng = np.random.default_rng(8)
    x = rng.standard_normal((64, 33)).astype(np.float32)
    y = rng.standard_normal((64, 33)).astype(np.float32)
    v = rng.standard_normal(33).astype(np.float32)
    x[0, :4] = [np.nan, -0.0, np.inf, -np.inf]
    _, got, want = _run_both(CHAIN, x, y, v)
    _same(got, want, rtol=2e-5)


def test_unsupported_ops_fall_back_and_cache():
    # complex triangular-solve stays interpreted (the real ones go to BLAS: test_cpu_linalg)
    text = ("HloModule m\nENTRY e {\n a = c64[4,4] parameter(0)\n b = c64[4,4] parameter(1)\n"
            " t = c64[4,4] triangular-solve(a, b), left_side=true, lower=true, "
            "transpose_a=NO_TRANSPOSE\n ROOT d = c64[4,4] multiply(t, t)\n}\n")
    steps = compile_module(parse_hlo_module(text)).steps()
    assert [type(s).__name__ for s in steps] == ["InterpretStep", "KernelStep"]
    assert isinstance(steps[0], InterpretStep)
    rng = np.random.default_rng(9)
    a = (np.tril(rng.standard_normal((4, 4))) + 4 * np.eye(4)).astype(np.complex64)
    b = (rng.standard_normal((4, 4)) + 1j * rng.standard_normal((4, 4))).astype(np.complex64)
    _, got, want = _run_both(text, a, b)
    _same(got, want, rtol=1e-6)
    backend = CpuBackend()
    first = backend.compile(parse_hlo_module(text))
    assert backend.compile(parse_hlo_module(text)) is first  # cached by fingerprint


def test_xlapy_run_cpu_against_interpreter():
    proc = subprocess.run(
        [sys.executable, "-m", "xlapy", "run", os.path.join(ROOT, "examples", "mlp.hlo"),
         "--backend", "cpu", "--reference", "interpreter"],
        capture_output=True, text=True, cwd=ROOT, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_disk_cache_reloads_object_code(tmp_path, monkeypatch):
    from xlapy.backends.cpu.jit import get_jit

    monkeypatch.setenv("XLAPY_CACHE_DIR", str(tmp_path))
    text = CHAIN.replace("HloModule chain", "HloModule chain_disk_cache")
    x = np.linspace(-2, 2, 64 * 33, dtype=np.float32).reshape(64, 33)
    y, v = x[::-1].copy(), np.linspace(1, 2, 33, dtype=np.float32)
    results = []
    for attempt in range(3):  # engines of dropped programs are freed in between
        clear_cache()
        exe = Client(backend="cpu").compile(parse_hlo_module(text))
        assert get_jit().last_from_cache == (attempt > 0)
        results.append(exe(x, y, v))
        del exe
    assert len(list(tmp_path.glob("cpu-*.o"))) == 1
    _same(results[1], results[0])
    _same(results[2], results[0])
    monkeypatch.setenv("XLAPY_DISK_CACHE", "0")
    clear_cache()
    Client(backend="cpu").compile(parse_hlo_module(text))
    assert not get_jit().last_from_cache


TRANSPOSED_DOT = """HloModule t
ENTRY e {
  a = f32[64,30] parameter(0)
  b = f32[64,20] parameter(1)
  d = f32[30,20] dot(a, b), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  ROOT t = f32[20,30] transpose(d), dimensions={1,0}
}
"""


@pytest.mark.parametrize("generated", [True, False])
def test_transpose_of_a_dot_is_the_swapped_dot(request, monkeypatch, generated):
    # the simplifier's transpose-dot rewrite: one dot(b, a), a generated GEMM kernel where
    # gemm_kernel takes it, else BLAS's
    from xlapy.backends.cpu import gemm_kernel

    request.addfinalizer(clear_cache)  # programs planned with the patched form go too
    if not generated:
        monkeypatch.setattr(gemm_kernel, "form", lambda instr: "not generated (the test)")
    clear_cache()
    steps = compile_module(parse_hlo_module(TRANSPOSED_DOT)).steps()
    assert [type(s).__name__ for s in steps] == \
        ["KernelStep" if generated else "LibraryStep"]
    assert steps[0].instr.opcode == "dot"
    assert [o.name for o in steps[0].instr.operands] == ["b", "a"]
    rng = np.random.default_rng(10)
    a = rng.standard_normal((64, 30)).astype(np.float32)
    b = rng.standard_normal((64, 20)).astype(np.float32)
    _, got, want = _run_both(TRANSPOSED_DOT, a, b)
    assert got.shape == (20, 30)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # the dot has another user: it is computed once, the transpose is a kernel
    text = TRANSPOSED_DOT.replace("ROOT t = f32[20,30] transpose(d), dimensions={1,0}",
                                  "t = f32[20,30] transpose(d), dimensions={1,0}\n"
                                  "  ROOT r = (f32[20,30], f32[30,20]) tuple(t, d)")
    names = [type(s).__name__ for s in compile_module(parse_hlo_module(text)).steps()]
    # the dot (a generated small GEMM) and the transpose
    assert names.count("KernelStep") + names.count("LibraryStep") == 2
    _, got, want = _run_both(text, a, b)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_compiling_and_running_imports_no_scipy_python_layers():
    """The backend's BLAS comes from SciPy's extension modules loaded alone: compiling and
    running a program with a GEMM and a convolution imports neither scipy.linalg's Python
    package nor scipy.special (some 45 MiB of resident memory a process would carry)."""
    code = r"""
import sys
import numpy as np
from xlapy.parser import parse_hlo_module
from xlapy.runtime import Client
text = '''HloModule m
ENTRY e {
  x = f32[2,9,9,5] parameter(0)
  k = f32[3,3,5,6] parameter(1)
  c = f32[2,9,9,6] convolution(x, k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  r = f32[162,6] reshape(c)
  w = f32[6,300] parameter(2)
  ROOT d = f32[162,300] dot(r, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}'''
rng = np.random.default_rng(0)
args = [rng.standard_normal(s).astype(np.float32) for s in ((2, 9, 9, 5), (3, 3, 5, 6), (6, 300))]
out = Client(backend="cpu").compile(parse_hlo_module(text))(*args)
assert np.isfinite(np.asarray(out)).all()
assert "scipy.linalg.cython_blas" in sys.modules  # SciPy's BLAS did the GEMMs
print(sorted(m for m in ("scipy.linalg", "scipy.special") if m in sys.modules))
import scipy.linalg  # imported afterwards, it finds the same extension module
from scipy.linalg import cython_blas
assert cython_blas is sys.modules["scipy.linalg.cython_blas"]
assert abs(scipy.linalg.solve([[2.0]], [1.0])[0] - 0.5) < 1e-12
"""
    env = dict(os.environ, XLAPY_DISK_CACHE="0")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, cwd=ROOT, timeout=120, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"

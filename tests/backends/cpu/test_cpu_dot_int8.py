"""Int8 dots (s8/u8 operands, 32-bit sums) on the CPU backend's integer core
(backends/cpu/gemm_words.py): every kind of core the hosts may take (vpdpbusd at 512 bits,
vpmaddwd at 512 and 256) bit for bit against the interpreter's integer dot - signedness
of each operand, extreme values (the correction terms and the wrap of 32-bit sums), tile
and block remainders, layouts (rhs stored along k, lhs transposed, batch dimensions
anywhere), results of other integer types through dot-upcast's convert, inside a compiled
loop; the dots' plan (one int8 kernel, no library call, no float dot)."""

from __future__ import annotations

import numpy as np
import pytest

from xlapy.backends.cpu import backend as be
from xlapy.backends.cpu import gemm_words, gemm_kernel
from xlapy.interpreter import evaluate
from xlapy.parser import parse_hlo_module
from xlapy.runtime import Client

NP = {"s8": np.int8, "u8": np.uint8}


def _features():
    return gemm_words._features()


KINDS = [("dot", 512), ("madd", 512), ("madd", 256)]


@pytest.fixture(params=KINDS, ids=lambda k: f"{k[0]}-{k[1]}")
def kind(request, monkeypatch):
    """Each core kind this host can run, forced."""
    name, bits = request.param
    if not gemm_words.supported():
        pytest.skip("the host has no AVX2")
    if bits == 512 and "+avx512bw" not in _features():
        pytest.skip("the host has no AVX-512BW")
    if name == "dot" and "+avx512vnni" not in _features():
        pytest.skip("the host has no AVX512-VNNI")
    monkeypatch.setattr(gemm_words, "MODE", name)
    monkeypatch.setattr(gemm_kernel, "BITS", bits)
    assert gemm_words.mode() == name and gemm_words.bits() == bits
    be.clear_cache()  # programs compiled in memory under another kind
    yield name, bits
    be.clear_cache()


def _dims(d):
    return ",".join(map(str, d))


def _text(ta, tb, res, lhs, rhs, out, lc=(1,), rc=(0,), lb=(), rb=()):
    return (f"HloModule m\nENTRY e {{\n  a = {ta}[{_dims(lhs)}] parameter(0)\n"
            f"  b = {tb}[{_dims(rhs)}] parameter(1)\n"
            f"  ROOT d = {res}[{_dims(out)}] dot(a, b), lhs_contracting_dims={{{_dims(lc)}}}, "
            f"rhs_contracting_dims={{{_dims(rc)}}}, lhs_batch_dims={{{_dims(lb)}}}, "
            f"rhs_batch_dims={{{_dims(rb)}}}\n}}\n")


def _values(rng, t, shape, extreme=None):
    info = np.iinfo(NP[t])
    if extreme == "low":
        return np.full(shape, info.min, NP[t])
    if extreme == "high":
        return np.full(shape, info.max, NP[t])
    return rng.integers(info.min, info.max, shape, dtype=NP[t], endpoint=True)


def _int8_steps(module):
    """The entry's steps as (step, opcode, element type); asserts the dot is the int8
    kernel."""
    steps = be.compile_module(module).entry.steps
    dots = [s for s in steps if s.instr.opcode == "dot"]
    assert len(dots) == 1 and type(dots[0]).__name__ == "KernelStep", steps
    f = gemm_kernel.form(dots[0].instr)
    assert isinstance(f, gemm_kernel.Form) and f.kind == "int8", f
    assert f.core == gemm_words.mode()
    return [(type(s).__name__, s.instr.opcode, s.instr.shape.element_type.name)
            for s in steps]


def _check(text, a, b):
    module = parse_hlo_module(text)
    steps = _int8_steps(module)
    got = np.asarray(Client(backend="cpu").compile(module)(a, b))
    want = np.asarray(evaluate(parse_hlo_module(text), a, b))
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    return steps, got


@pytest.mark.parametrize("ta,tb", [("s8", "s8"), ("u8", "s8"), ("s8", "u8"), ("u8", "u8")])
@pytest.mark.parametrize("m,k,n", [(6, 700, 64), (131, 517, 70), (257, 1030, 129),
                                   (600, 64, 200)])
def test_signedness_and_remainders(kind, ta, tb, m, k, n):
    """Rows not a multiple of the tile's 6 (and more than a work item's), columns not a
    multiple of a panel, k not a multiple of a word (4 or 2) and past a block of 512."""
    rng = np.random.default_rng(m * 7 + k + n)
    a, b = _values(rng, ta, (m, k)), _values(rng, tb, (k, n))
    res = "u32" if ta == tb == "u8" else "s32"
    steps, got = _check(_text(ta, tb, res, (m, k), (k, n), (m, n)), a, b)
    assert steps == [("KernelStep", "dot", res.upper())]
    exact = a.astype(np.int64) @ b.astype(np.int64)  # no sum wraps at these sizes
    np.testing.assert_array_equal(got.astype(np.int64), exact)


@pytest.mark.parametrize("ta,tb", [("s8", "s8"), ("u8", "s8"), ("s8", "u8"), ("u8", "u8")])
@pytest.mark.parametrize("ea,eb", [("low", "low"), ("high", "low"), ("low", "high"),
                                   ("high", "high")])
def test_extreme_values_and_wrapping_sums(kind, ta, tb, ea, eb):
    """Operands at their types' ends (the offsets' corrections at their largest), with k
    large enough that u8 x u8 sums pass 2^32 (they wrap, as XLA's integer dot does)."""
    m, k, n = 12, 70000, 64
    rng = np.random.default_rng(3)
    a, b = _values(rng, ta, (m, k), ea), _values(rng, tb, (k, n), eb)
    res = "u32" if ta == tb == "u8" else "s32"
    _, got = _check(_text(ta, tb, res, (m, k), (k, n), (m, n)), a, b)
    exact = int(a.flat[0]) * int(b.flat[0]) * k
    bits = np.iinfo(got.dtype).bits
    wrapped = exact % (1 << bits)
    if got.dtype.kind == "i" and wrapped >= 1 << (bits - 1):
        wrapped -= 1 << bits
    assert (got == wrapped).all()


def test_layouts_and_batch_dimensions(kind):
    """rhs stored along k (weights [out, in]), the lhs transposed (its rows strided), batch
    dimensions first and in the middle."""
    rng = np.random.default_rng(5)
    a, b = _values(rng, "s8", (300, 700)), _values(rng, "s8", (200, 700))
    _check(_text("s8", "s8", "s32", a.shape, b.shape, (300, 200), rc=(1,)), a, b)
    a, b = _values(rng, "u8", (700, 300)), _values(rng, "s8", (700, 200))
    _check(_text("u8", "s8", "s32", a.shape, b.shape, (300, 200), lc=(0,)), a, b)
    a, b = _values(rng, "s8", (4, 100, 130)), _values(rng, "u8", (4, 130, 90))
    _check(_text("s8", "u8", "s32", a.shape, b.shape, (4, 100, 90), lc=(2,), rc=(1,),
                 lb=(0,), rb=(0,)), a, b)
    a, b = _values(rng, "s8", (2, 3, 60, 600)), _values(rng, "s8", (600, 3, 2, 80))
    _check(_text("s8", "s8", "s32", a.shape, b.shape, (2, 3, 60, 80), lc=(3,), rc=(0,),
                 lb=(0, 1), rb=(2, 1)), a, b)


@pytest.mark.parametrize("res", ["s8", "u8", "s16", "u16", "s64", "u64"])
def test_other_integer_results_are_an_s32_dot_and_a_convert(kind, res):
    rng = np.random.default_rng(6)
    a, b = _values(rng, "s8", (100, 600)), _values(rng, "u8", (600, 70))
    steps, _ = _check(_text("s8", "u8", res, a.shape, b.shape, (100, 70)), a, b)
    assert steps == [("KernelStep", "dot", "S32"), ("KernelStep", "convert", res.upper())]


def test_64_bit_results_whose_sums_pass_31_bits_keep_the_float_route():
    """k * 255 * 255 >= 2^31: the s32 sums would wrap where the s64 result does not."""
    text = _text("u8", "u8", "u64", (8, 40000), (40000, 64), (8, 64))
    module = parse_hlo_module(text)
    steps = be.compile_module(module).entry.steps
    assert any(s.instr.opcode == "dot" and s.instr.shape.element_type.name == "F64"
               for s in steps)
    rng = np.random.default_rng(8)
    a, b = _values(rng, "u8", (8, 40000), "high"), _values(rng, "u8", (40000, 64), "high")
    got = np.asarray(Client(backend="cpu").compile(module)(a, b))
    assert (got == 255 * 255 * 40000).all()


def test_small_dots_keep_the_f32_kernels():
    module = parse_hlo_module(_text("s8", "s8", "s32", (32, 64), (64, 32), (32, 32)))
    assert not gemm_words.applies(module.entry.root)
    steps = be.compile_module(module).entry.steps
    assert any(s.instr.opcode == "dot" and s.instr.shape.element_type.name == "F32"
               for s in steps)


def test_inside_a_compiled_loop(kind):
    """A quantised layer applied in a fori loop: the dot is a kernel of the native loop."""
    text = """HloModule m
body {
  p = (s32[], s8[96,256], s8[256,128], s32[96,128]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = s8[96,256] get-tuple-element(p), index=1
  w = s8[256,128] get-tuple-element(p), index=2
  acc = s32[96,128] get-tuple-element(p), index=3
  d = s32[96,128] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  s = s32[96,128] add(acc, d)
  one = s32[] constant(1)
  n = s32[] add(i, one)
  ROOT t = (s32[], s8[96,256], s8[256,128], s32[96,128]) tuple(n, x, w, s)
}
cond {
  p = (s32[], s8[96,256], s8[256,128], s32[96,128]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  c = s32[] constant(5)
  ROOT lt = pred[] compare(i, c), direction=LT
}
ENTRY e {
  x = s8[96,256] parameter(0)
  w = s8[256,128] parameter(1)
  z = s32[] constant(0)
  zs = s32[] constant(0)
  acc = s32[96,128] broadcast(zs), dimensions={}
  t = (s32[], s8[96,256], s8[256,128], s32[96,128]) tuple(z, x, w, acc)
  l = (s32[], s8[96,256], s8[256,128], s32[96,128]) while(t), condition=cond, body=body
  ROOT r = s32[96,128] get-tuple-element(l), index=3
}
"""
    rng = np.random.default_rng(9)
    x, w = _values(rng, "s8", (96, 256)), _values(rng, "s8", (256, 128))
    got = np.asarray(Client(backend="cpu").compile(parse_hlo_module(text))(x, w))
    np.testing.assert_array_equal(got, 5 * (x.astype(np.int64) @ w.astype(np.int64)))
    from xlapy.backends.cpu import control_flow as cf

    plan = be.compile_module(parse_hlo_module(text))
    loops = [s for s in plan.entry.steps if s.instr.opcode == "while"]
    assert loops and all(isinstance(s, cf.CompiledWhileStep) for s in loops), plan.entry.steps


def test_mode_follows_the_host(monkeypatch):
    monkeypatch.setattr(gemm_words, "MODE", None)
    feats = _features()
    want = "dot" if "+avx512vnni" in feats and gemm_words.bits() == 512 else "madd"
    assert gemm_words.mode() == want
    monkeypatch.setattr(gemm_kernel, "BITS", 256)
    assert gemm_words.bits() == 256 and gemm_words.mode() == "madd"

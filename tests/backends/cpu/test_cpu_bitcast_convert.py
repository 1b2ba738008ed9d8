"""bitcast-convert between element types of different bit widths on the cpu backend (the
element generator ``ElementalEmitter._bitcast_resize``) against the interpreter, bit for bit:
every pair of non-complex element types whose widths differ (a narrower result adds a minor
dimension holding the pieces of each element, least significant first; a wider one joins
the pieces of the operand's minor dimension), alone and fused with the data movement and
arithmetic around it, as jax's PRNG key handling emits it (u32[..., 2] <-> u64[...])."""

from __future__ import annotations

import numpy as np
import pytest

from xlapy.backends.cpu import backend as be
from xlapy.backends.cpu import elemental as el
from xlapy.interpreter import evaluate
from xlapy.interpreter.kernels.numeric import from_bits
from xlapy.parser import parse_hlo_module
from xlapy.runtime import Client
from xlapy.shape import PrimitiveType, dtypes

_TYPES = [t for t in el.TYPES if not dtypes.is_complex(t)]
PAIRS = [(a, b) for a in _TYPES for b in _TYPES
         if dtypes.bit_width(a) != dtypes.bit_width(b)
         and max(dtypes.bit_width(a), dtypes.bit_width(b))
         % min(dtypes.bit_width(a), dtypes.bit_width(b)) == 0]


def _name(t) -> str:
    return dtypes.type_name(t)


def _values(t, dims, rng) -> np.ndarray:
    """Elements with random encodings (every bit pattern: NaNs with payloads, denormals,
    negative zeros); pred 0 or 1."""
    if t == PrimitiveType.PRED:
        return rng.random(dims) < 0.5
    width = dtypes.bit_width(t)
    bits = rng.integers(0, 1 << 63, size=dims, dtype=np.uint64) * np.uint64(2) + \
        rng.integers(0, 2, size=dims, dtype=np.uint64)
    if width < 64:
        bits &= np.uint64((1 << width) - 1)
    return from_bits(bits, dtypes.to_dtype(t))


def _bits(a) -> np.ndarray:
    """The bytes of ``a``; for pred its truth values (the interpreter's NumPy view of the
    bytes as bool keeps a byte such as 0x46 as it is, the backend stores 1)."""
    a = np.ascontiguousarray(np.asarray(a))
    if a.dtype == np.bool_:
        return a.reshape(-1).view(np.uint8) != 0
    return a.reshape(-1).view(np.uint8)


def _run(text, *args):
    module = parse_hlo_module(text)
    want = evaluate(module, *args)
    options = {"allow_excess_precision": False, "flush_denormals": False}
    got = Client(backend="cpu", backend_options=options).compile(module)(*args)
    program = be.CpuBackend(**options).compile(module)
    return np.asarray(got), np.asarray(want), program


def _check(text, *args):
    got, want, program = _run(text, *args)
    assert program.interpreted() == []
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(_bits(got), _bits(want))


@pytest.mark.parametrize("src,dst", PAIRS, ids=[f"{_name(a)}-{_name(b)}" for a, b in PAIRS])
def test_every_pair_of_widths(src, dst):
    ws, wd = dtypes.bit_width(src), dtypes.bit_width(dst)
    rng = np.random.default_rng(ws * 131 + wd)
    batch = (3, 5)
    if ws < wd:
        in_dims, out_dims = batch + (wd // ws,), batch
    else:
        in_dims, out_dims = batch, batch + (ws // wd,)
    x = _values(src, in_dims, rng)
    text = (f"HloModule m\nENTRY e {{\n  a = {_name(src)}{list(in_dims)} parameter(0)\n"
            f"  ROOT r = {_name(dst)}{list(out_dims)} bitcast-convert(a)\n}}\n")
    _check(text, x)


def test_rank_zero_and_rank_one():
    rng = np.random.default_rng(1)
    x = _values(PrimitiveType.U64, (), rng)
    _check("HloModule m\nENTRY e {\n  a = u64[] parameter(0)\n"
           "  ROOT r = u32[2] bitcast-convert(a)\n}\n", x)
    y = _values(PrimitiveType.U8, (4,), rng)
    _check("HloModule m\nENTRY e {\n  a = u8[4] parameter(0)\n"
           "  ROOT r = f32[] bitcast-convert(a)\n}\n", y)


def test_fused_with_movement_and_arithmetic():
    """jax's key handling: a u64 key split into u32 halves, arithmetic on the halves, joined
    again, in one fusion with a transpose and a slice around the width changes."""
    text = """HloModule m
ENTRY e {
  k = u64[6,4] parameter(0)
  t = u64[4,6] transpose(k), dimensions={1,0}
  h = u32[4,6,2] bitcast-convert(t)
  one = u32[] constant(1)
  ones = u32[4,6,2] broadcast(one), dimensions={}
  s = u32[4,6,2] add(h, ones)
  r = u32[4,6,2] reverse(s), dimensions={2}
  j = u64[4,6] bitcast-convert(r)
  ROOT out = u64[2,6] slice(j), slice={[1:3], [0:6]}
}
"""
    x = _values(PrimitiveType.U64, (6, 4), np.random.default_rng(2))
    _check(text, x)
    program = be.compile_module(parse_hlo_module(text))
    fused = [s.instr.attrs["calls"].instructions for s in program.entry.steps
             if s.instr.opcode == "fusion"]
    assert sum(i.opcode == "bitcast-convert" for f in fused for i in f) == 2


def test_jax_rng_key_handling():
    jax = pytest.importorskip("jax")
    import xlapy

    def fn(key):
        k1, k2 = jax.random.split(jax.random.wrap_key_data(key, impl="rbg"))
        return jax.random.bits(k1, (8,)), jax.random.key_data(k2)

    key = np.arange(4, dtype=np.uint32)
    compiled = xlapy.jit(fn, backend="cpu")
    program = be.compile_module(compiled.lower(key))
    assert not [r for r in program.interpreted() if r[1] in ("bitcast-convert", "fusion")]
    got = compiled(key)
    want = jax.jit(fn)(key)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        assert np.array_equal(np.asarray(g), np.asarray(w))

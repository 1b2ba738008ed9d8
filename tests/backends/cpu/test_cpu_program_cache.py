"""The CPU backend's in-memory program cache (issue 12, items 1 and 3): a program is shared
only by modules that agree on everything it depends on (constants past the printer's
10-element elision, layouts, attributes, config), and the cache is bounded (LRU by count
and bytes) and releases what it drops."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import weakref

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from llvmlite import ir

import xlapy
from xlapy import ops
from xlapy.backends import cpu
from xlapy.backends.cpu import backend as be
from xlapy.errors import InvalidArgumentError
from xlapy.hlo.attrs import Attrs
from xlapy.interpreter.evaluator import evaluate
from xlapy.parser import parse_hlo_module
from xlapy.runtime import Client
from xlapy.shape import Layout, Shape, parse_shape
from xlapy.shape.literal import Literal

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))


@pytest.fixture
def limits():
    """Restore the cache's limits (and empty it) after a test that changes them."""
    before = cpu.cache_limits()
    yield
    cpu.set_cache_limits(before["programs"], before["bytes"])
    be.clear_cache()


def _eleven(v) -> str:
    c = ", ".join([str(v)] * 11)
    return (f"HloModule m\nENTRY e {{\n x = f32[11] parameter(0)\n c = f32[11] constant({{{c}}})\n"
            f" ROOT a = f32[11] add(x, c)\n}}")


# -- item 1: the key ----------------------------------------------------------------------------


def test_modules_differing_in_an_elided_constant_get_their_own_programs():
    client = Client(backend="cpu")
    x = np.zeros(11, np.float32)
    assert client.compile(_eleven(1.0))(x).tolist() == [1.0] * 11
    assert client.compile(_eleven(100.0))(x).tolist() == [100.0] * 11
    assert client.compile(_eleven(1.0))(x).tolist() == [1.0] * 11


def test_builder_models_of_one_name_with_different_weights():
    client = Client(backend="cpu")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4)).astype(np.float32)
    for _ in range(5):
        w = rng.standard_normal((4, 4)).astype(np.float32)
        b = xlapy.XlaBuilder("affine")
        ops.Dot(ops.Parameter(b, 0, parse_shape("f32[2,4]"), "x"), ops.Constant(b, w))
        got = client.compile(b.build())(x)
        np.testing.assert_allclose(got, x @ w, rtol=1e-5)


def test_xlapy_run_prints_each_files_result(tmp_path):
    for name, v in (("a", 1.0), ("b", 100.0)):
        (tmp_path / f"{name}.hlo").write_text(_eleven(v))
    proc = subprocess.run(  # the same seeded random argument for both
        [sys.executable, "-m", "xlapy", "run", str(tmp_path / "a.hlo"), str(tmp_path / "b.hlo"),
         "--backend", "cpu"], capture_output=True, text=True, cwd=ROOT, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    a, b = proc.stdout.split("== ")[1:]
    assert "a.hlo" in a and "b.hlo" in b

    def values(block):
        return np.array([float(v) for v in block.split("{")[1].split("}")[0].split(",")])

    np.testing.assert_allclose(values(b) - values(a), 99.0, rtol=1e-5)


BASE = """HloModule m, replica_count=1
sum {
  p = f32[] parameter(0)
  q = f32[] parameter(1)
  ROOT t = f32[] add(p, q)
}

ENTRY e {
  x = f32[3,4]{1,0} parameter(0)
  i = s32[12]{0} parameter(1)
  c = f32[3,4]{1,0} constant({{1, 2, 3, 4}, {5, 6, 7, 8}, {9, 10, 11, 12}})
  k = s32[12]{0} constant({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
  a = f32[3,4]{1,0} add(x, c), metadata={op_name="add"}
  z = f32[] constant(0)
  g = pred[3,4]{1,0} compare(a, x), direction=GT
  s = f32[3,4]{1,0} select(g, a, x)
  sl = f32[3,2]{1,0} slice(s), slice={[0:3], [1:3]}
  r = f32[3]{0} reduce(s, z), dimensions={1}, to_apply=sum
  m = s32[12]{0} multiply(i, k), frontend_attributes={f="1"}
  ROOT out = (f32[3,2]{1,0}, f32[3]{0}, s32[12]{0}) tuple(sl, r, m)
}
"""

#: One attribute (or module datum) changed at a time: (what, old text, new text).
ATTRIBUTE_MUTATIONS = [
    ("module name", "HloModule m,", "HloModule n,"),
    ("replica_count", "replica_count=1", "replica_count=2"),
    ("compare direction", "direction=GT", "direction=GE"),
    ("slice start", "[1:3]}", "[0:2]}"),
    ("reduce init", "z = f32[] constant(0)", "z = f32[] constant(1)"),
    ("reducer", "ROOT t = f32[] add(p, q)", "ROOT t = f32[] maximum(p, q)"),
    ("metadata", 'op_name="add"', 'op_name="add2"'),
    ("frontend attribute", 'f="1"', 'f="2"'),
    ("backend_config", "multiply(i, k),", 'multiply(i, k), backend_config="x",'),
    ("sharding", "multiply(i, k),", "multiply(i, k), sharding={replicated},"),
    ("operand order", "add(x, c)", "add(c, x)"),
    ("select operands", "select(g, a, x)", "select(g, x, a)"),
]


def _variants():
    """(what, module): the base module and every single change of one constant element,
    one layout or one attribute."""
    base = parse_hlo_module(BASE)
    out = [("base", base)]
    for instr in [i for i in base.entry.instructions if i.opcode == "constant" and i.shape.dimensions]:
        lit = instr.attrs["literal"]
        for j in range(lit.array.size):
            for how, change in (("+1", lambda v: v + 1), ("negated", lambda v: -v)):
                array = lit.array.copy()
                array.reshape(-1)[j] = change(array.reshape(-1)[j])
                out.append((f"{instr.name}[{j}] {how}",
                            _with(base, instr.name, literal=Literal.from_array(array, lit.shape))))
    nan = np.full((3, 4), np.nan, np.float32)
    quiet, payload = nan.copy(), nan.copy()
    payload.view(np.uint32)[0, 0] |= 1  # another NaN: prints the same as text
    out.append(("c all NaN", _with(base, "c", literal=Literal.from_array(quiet))))
    out.append(("c all NaN, one payload", _with(base, "c", literal=Literal.from_array(payload))))
    zeros = np.zeros((3, 4), np.float32)
    signed = zeros.copy()
    signed[2, 3] = -0.0
    out.append(("c zeros", _with(base, "c", literal=Literal.from_array(zeros))))
    out.append(("c zeros, one -0", _with(base, "c", literal=Literal.from_array(signed))))
    for instr in base.entry.instructions:
        if instr.shape.is_array() and len(instr.shape.dimensions) == 2:
            out.append((f"{instr.name} layout {{0,1}}", _with(base, instr.name, layout=(0, 1))))
    for what, old, new in ATTRIBUTE_MUTATIONS:
        assert old in BASE, what
        out.append((what, parse_hlo_module(BASE.replace(old, new, 1))))
    return out


def _with(module, name: str, *, literal=None, layout=None):
    """A clone of ``module`` with instruction ``name`` given ``literal`` or ``layout``."""
    clone = module.clone(suffix="")
    instr = next(i for i in clone.entry.instructions if i.name == name)
    if literal is not None:
        instr.attrs = Attrs(dict(instr.attrs.values, literal=literal))
    if layout is not None:
        s = instr.shape
        instr.shape = Shape.array(s.element_type, s.dimensions, layout=Layout(layout))
    return clone


def test_no_two_distinct_modules_share_a_key():
    variants = _variants()
    assert len(variants) > 70
    keys = {}
    for what, module in variants:
        key = be.fingerprint(module)
        assert key not in keys, f"{what!r} shares its key with {keys.get(key)!r}"
        keys[key] = what
    # and the key is a function of the module: an equal module (parsed again, cloned) hits
    base = parse_hlo_module(BASE)
    assert be.fingerprint(parse_hlo_module(BASE)) == be.fingerprint(base)
    assert be.fingerprint(base.clone(suffix="")) == be.fingerprint(base)


def test_constant_variants_compute_their_own_results():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    i = rng.integers(-5, 5, 12).astype(np.int32)
    client = Client(backend="cpu")
    for what, module in _variants():
        if not what.startswith(("c", "k")) or "layout" in what:
            continue
        got = client.compile(module)(x, i)
        want = evaluate(module, x, i)
        for g, w in zip(got, want):  # (a vectorised reduce adds in another order)
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, err_msg=what)


@settings(max_examples=40, deadline=None)
@given(a=st.lists(st.integers(-3, 3), min_size=12, max_size=12),
       b=st.lists(st.integers(-3, 3), min_size=12, max_size=12))
def test_keys_equal_exactly_when_the_constants_are(a, b):
    def module(values):
        text = ", ".join(str(v) for v in values)
        return parse_hlo_module(f"HloModule m\nENTRY e {{\n x = s32[12] parameter(0)\n"
                                f" c = s32[12] constant({{{text}}})\n ROOT a = s32[12] add(x, c)\n}}")

    assert (be.fingerprint(module(a)) == be.fingerprint(module(b))) == (a == b)


def test_custom_call_literal_bytes_count():
    ones = ", ".join(["1"] * 12)
    text = ('HloModule m\nENTRY e {\n ROOT c = f32[] custom-call(), custom_call_target="t", '
            f'literal=f32[12]{{0}} {{{ones}}}\n}}')
    other = text.replace("{1, 1", "{1, 2", 1)
    assert be.fingerprint(parse_hlo_module(text)) != be.fingerprint(parse_hlo_module(other))


def test_config_entries_not_in_the_header_count():
    a = parse_hlo_module(BASE)
    b = a.clone(suffix="")
    b.config["some_option"] = 1
    assert be.fingerprint(a) != be.fingerprint(b)


# -- item 3: the bound ------------------------------------------------------------------------


def _distinct(k: int) -> str:
    return (f"HloModule bound_{k}\nENTRY e {{\n x = f32[{8 + k}] parameter(0)\n"
            f" c = f32[] constant({k + 0.5})\n b = f32[{8 + k}] broadcast(c), dimensions={{}}\n"
            f" ROOT m = f32[{8 + k}] multiply(x, b)\n}}")


def test_the_cache_keeps_at_most_its_bound_and_releases_what_it_drops(limits):
    be.clear_cache()
    cpu.set_cache_limits(programs=3)
    assert cpu.cache_limits()["programs"] == 3
    client = Client(backend="cpu")
    held = client.compile(_distinct(0))  # an Executable keeps its program past eviction
    refs = []
    for k in range(1, 16):
        exe = client.compile(_distinct(k))
        refs.append((weakref.ref(exe.program), weakref.ref(exe.program._compiled._engine)))
        assert cpu.cache_info()["programs"] <= 3
        del exe
    gc.collect()
    alive = [k for k, (p, _) in enumerate(refs, 1) if p() is not None]
    assert alive == [13, 14, 15]  # the three most recent, held by the cache only
    assert all(e() is None for p, e in refs if p() is None)  # their engines are freed too
    info = cpu.cache_info()
    assert info["evictions"] >= 13 and info["programs"] == 3
    x = np.arange(8, dtype=np.float32)
    np.testing.assert_array_equal(held(x), x * np.float32(0.5))  # evicted, still valid
    assert be.PROGRAMS.get(be.fingerprint(parse_hlo_module(_distinct(0)))) is None


def test_the_byte_bound_holds(limits):
    be.clear_cache()
    cpu.set_cache_limits(programs=1000, bytes=1 << 20)
    client = Client(backend="cpu")
    for k in range(12):
        big = np.arange(40_000, dtype=np.float32) + k  # 160 KB of constants per program
        b = xlapy.XlaBuilder(f"big_{k}")
        ops.Add(ops.Parameter(b, 0, parse_shape("f32[40000]"), "x"), ops.Constant(b, big))
        client.compile(b.build())
        info = cpu.cache_info()
        assert info["bytes"] <= 1 << 20
    assert 1 <= info["programs"] < 12
    cpu.set_cache_limits(bytes=0)  # lowering a bound evicts at once
    assert cpu.cache_info()["programs"] == 0


def test_a_program_cache_of_size_zero_caches_nothing(limits):
    cpu.set_cache_limits(programs=0)
    client = Client(backend="cpu")
    x = np.zeros(11, np.float32)
    a = client.compile(_eleven(2.0))
    assert client.compile(_eleven(2.0)).program is not a.program
    assert a(x).tolist() == [2.0] * 11 and cpu.cache_info()["programs"] == 0


WHILE = """HloModule w
cond {
  s = (s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(5)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  v = f32[8] get-tuple-element(s), index=1
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  v2 = f32[8] add(v, v)
  ROOT t = (s32[], f32[8]) tuple(i2, v2)
}
ENTRY e {
  x = f32[8] parameter(0)
  zero = s32[] constant(0)
  t = (s32[], f32[8]) tuple(zero, x)
  w = (s32[], f32[8]) while(t), condition=cond, body=body
  ROOT r = f32[8] get-tuple-element(w), index=1
}
"""


def test_programs_keep_no_llvm_ir():
    """The llvmlite IR (Python objects for every instruction of every kernel) goes once the
    machine code is loaded: a compiled while loop kept its ir.Function, and so the whole
    ir.Module, alive."""
    be.clear_cache()
    gc.collect()
    before = sum(isinstance(o, ir.Module) for o in gc.get_objects())
    programs = [be.compile_module(parse_hlo_module(WHILE.replace("constant(5)", f"constant({k})")))
                for k in range(3)]
    programs.append(be.compile_module(parse_hlo_module(BASE)))
    gc.collect()
    assert sum(isinstance(o, ir.Module) for o in gc.get_objects()) == before
    x = np.ones(8, np.float32)
    assert Client(backend="cpu").compile(WHILE)(x).tolist() == [32.0] * 8


SORT = """HloModule s
cmp {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT lt = pred[] compare(a, b), direction=LT
}
ENTRY e {
  x = f32[64] parameter(0)
  ROOT s = f32[64] sort(x), dimensions={0}, to_apply=cmp
}
"""


@pytest.mark.parametrize("text", [SORT, WHILE, BASE, _eleven(5.0)], ids=["sort", "while", "base",
                                                                      "constant"])
def test_a_dropped_program_takes_its_module_and_engine_along(limits, text):
    """Nothing global keeps a program, its optimised module or its engine (a sort's
    comparator plan, cached in a global map keyed by the instruction, kept its module)."""
    cpu.set_cache_limits(programs=0)
    exe = Client(backend="cpu").compile(text)
    args = [np.ones(p.shape.dimensions, np.float32) if p.shape.element_type.name == "F32"
            else np.ones(p.shape.dimensions, np.int32) for p in exe.module.entry.parameters]
    exe(*args)
    refs = [weakref.ref(exe.program), weakref.ref(exe.program.module)]
    if exe.program._compiled is not None:
        refs.append(weakref.ref(exe.program._compiled._engine))
    del exe
    gc.collect()
    assert [r() is None for r in refs] == [True] * len(refs)


def _malloc_in_use():
    import ctypes

    class Info(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks",
                    "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = Info
    except (OSError, AttributeError):
        pytest.skip("needs glibc's mallinfo2 to count native memory")
    info = libc.mallinfo2()
    return info.uordblks + info.hblkhd


def test_compiles_of_dropped_programs_leave_little_native_memory(limits):
    """llvmlite leaked each compile's pass pipeline (~95 KB) and MCJIT engines kept their
    optimised modules; what remains is llvmlite's PassBuilder callbacks (~2 KB)."""
    cpu.set_cache_limits(programs=0)
    client = Client(backend="cpu")

    def compile_some(start):
        for k in range(start, start + 30):
            client.compile(_distinct(100 + k))(np.ones(108 + k, np.float32))

    compile_some(0)
    gc.collect()
    before = _malloc_in_use()
    compile_some(30)
    gc.collect()
    per_compile = (_malloc_in_use() - before) / 30
    assert per_compile < 20_000, f"{per_compile:.0f} bytes of native memory per compile"


@pytest.mark.parametrize("value, want", [("7", 7), ("2K", 2048), ("3m", 3 << 20), ("1G", 1 << 30)])
def test_limits_from_the_environment(monkeypatch, value, want):
    from xlapy.backends.cpu.program_cache import ProgramCache

    monkeypatch.setenv("XLAPY_CPU_CACHE_BYTES", value)
    monkeypatch.setenv("XLAPY_CPU_CACHE_PROGRAMS", "5")
    assert ProgramCache().limits() == {"programs": 5, "bytes": want}


def test_bad_limits_are_refused(monkeypatch, limits):
    from xlapy.backends.cpu.program_cache import ProgramCache

    monkeypatch.setenv("XLAPY_CPU_CACHE_PROGRAMS", "many")
    with pytest.raises(InvalidArgumentError, match="XLAPY_CPU_CACHE_PROGRAMS: expected a "
                       "non-negative integer with an optional K, M or G suffix, got 'many'"):
        ProgramCache().limits()
    for bad in (-1, 1.5, True, "3"):
        with pytest.raises(InvalidArgumentError, match="set_cache_limits: programs must be an "
                           "integer >= 0"):
            cpu.set_cache_limits(programs=bad)


def test_lookups_and_compiles_count_hits_and_misses_once():
    be.clear_cache()
    before = cpu.cache_info()
    client = Client(backend="cpu")
    for _ in range(3):
        client.compile(_eleven(3.0))
    after = cpu.cache_info()
    assert (after["misses"] - before["misses"], after["hits"] - before["hits"]) == (1, 2)


def test_a_client_compile_fingerprints_the_module_once(monkeypatch):
    """Client.compile looks the module up and compiles it with one fingerprint
    (CpuBackend.lookup_keyed hands the key to compile)."""
    be.clear_cache()
    calls = []
    real = be.fingerprint

    def counted(module, *args):
        calls.append(module.name)
        return real(module, *args)

    monkeypatch.setattr(be, "fingerprint", counted)
    text = _eleven(4.0).replace("HloModule m", "HloModule fingerprinted_once")
    x = np.zeros(11, np.float32)
    assert Client(backend="cpu").compile(text)(x).tolist() == [4.0] * 11
    assert calls == ["fingerprinted_once"]
    key = real(parse_hlo_module(text), False, False, False)  # the suite's numerics (conftest)
    assert be.PROGRAMS.get(key, count_miss=False) is not None
    assert Client(backend="cpu").compile(text)(x).tolist() == [4.0] * 11  # a hit
    assert calls == ["fingerprinted_once"] * 2

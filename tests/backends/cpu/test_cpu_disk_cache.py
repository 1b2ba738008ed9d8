"""The CPU backend's disk cache of object code (issue 12, item 2) and of whole programs
(issue 14: plan_cache, the plan and object code of a program, loaded without compiling).

Entries carry a header (format, sizes, checksums, the key material they were built from);
a bad entry - empty, truncated, bytes flipped in its header, its code, its plan or its
constants, another module's entry under this name, another version's or another xlapy
source's - is found before LLVM sees a byte, discarded with one warning line, compiled
again and rewritten. Writes are atomic, so processes compiling one module at once all stay
correct. A restored program computes what the compiled one does, bit for bit; programs
with host calls are not stored.

The end-to-end cases run in child processes: before the header existed these entries
crashed the process that loaded them (SIGSEGV, SIGABRT, SIGILL) or gave wrong numbers."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import xlapy
from xlapy.backends.cpu import jit, plan_cache
from xlapy.backends.cpu.backend import RestoredProgram, clear_cache, compile_module, fingerprint
from xlapy.backends.cpu.jit import FORMAT, pack_entry, unpack_entry
from xlapy.interpreter.evaluator import EvalOptions, evaluate
from xlapy.parser import parse_hlo_module

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))

MODULE = """HloModule disk_cache_a
ENTRY e {
  x = f32[256] parameter(0)
  two = f32[] constant(2)
  b2 = f32[256] broadcast(two), dimensions={}
  m = f32[256] multiply(x, b2)
  t = f32[256] tanh(m)
  ROOT r = f32[256] add(t, x)
}
"""
OTHER = MODULE.replace("disk_cache_a", "disk_cache_b").replace("tanh", "sine")

CHILD = r"""
import json, os, sys, time
import numpy as np
import xlapy
from xlapy.backends.cpu.jit import get_jit
get_jit()
ready, go = sys.argv[2:4] if len(sys.argv) > 3 else (None, None)
if ready:  # start compiling together with the other children
    open(ready, "w").close()
    while not os.path.exists(go):
        time.sleep(0.005)
with open(sys.argv[1]) as f:
    text = f.read()
x = np.linspace(-3, 3, 256, dtype=np.float32)
got = xlapy.Client(backend="cpu").compile(text)(x)
ok = bool(np.allclose(got, np.tanh(x * 2) + x, rtol=1e-5, atol=1e-6))
print(json.dumps({"ok": ok, "from_cache": get_jit().last_from_cache}))
"""

_FIXED = jit._FIXED


def _entries(directory) -> list:
    """The object entries in ``directory`` (program entries, ``.plan``, are not)."""
    return sorted(p for p in os.listdir(directory) if p.startswith("cpu-") and p.endswith(".o"))


def _child(cache, module_file, *extra, wait=True):
    env = dict(os.environ, XLAPY_CACHE_DIR=str(cache))
    env.pop("XLAPY_DISK_CACHE", None)
    env.pop("XLAPY_PLAN_CACHE", None)  # the disk cache as it ships: objects and programs
    args = [sys.executable, "-c", CHILD, str(module_file), *map(str, extra)]
    if not wait:
        return subprocess.Popen(args, env=env, cwd=ROOT, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    return subprocess.run(args, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300,
                          check=False)


def _report(proc):
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stdout}{proc.stderr}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _material(entry: bytes) -> bytes:
    _, _, mlen, _, _ = _FIXED.unpack_from(entry)
    return entry[_FIXED.size:_FIXED.size + mlen]


@pytest.fixture(scope="module")
def cached(tmp_path_factory):
    """A cache directory holding MODULE's entry (and the module files): (dir, files, entry
    name, entry bytes, OTHER's entry bytes)."""
    base = tmp_path_factory.mktemp("disk-cache")
    cache = base / "cache"
    files = {"a": base / "a.hlo", "b": base / "b.hlo"}
    files["a"].write_text(MODULE)
    files["b"].write_text(OTHER)
    assert _report(_child(cache, files["a"])) == {"ok": True, "from_cache": False}
    (name,) = _entries(cache)
    _report(_child(cache, files["b"]))
    (other,) = set(_entries(cache)) - {name}
    data, other_data = (cache / name).read_bytes(), (cache / other).read_bytes()
    (cache / other).unlink()
    return cache, files, name, data, other_data


def _flip(data: bytes, pos: int) -> bytes:
    out = bytearray(data)
    out[pos] ^= 0xFF
    return bytes(out)


def _with_header(data: bytes, *, version=None, material=None) -> bytes:
    """``data`` re-packed with another format version or key material (checksums valid)."""
    magic, fmt, mlen, olen, sha = _FIXED.unpack_from(data)
    obj = data[_FIXED.size + mlen + 32:]
    material = material if material is not None else data[_FIXED.size:_FIXED.size + mlen]
    head = _FIXED.pack(magic, fmt if version is None else version, len(material), olen, sha)
    head += material
    import hashlib

    return head + hashlib.sha256(head).digest() + obj


def _corruptions(data: bytes, other: bytes) -> dict:
    """name -> (entry bytes, the reason's expected text)."""
    n = len(data)
    mlen = _FIXED.unpack_from(data)[2]
    head_end = _FIXED.size + mlen
    llvm_changed = json.loads(_material(data))
    llvm_changed["llvm"] = "1.0.0"
    return {
        "empty": (b"", "is truncated (0 bytes"),
        "only part of the header": (data[:20], "is truncated (20 bytes"),
        "truncated to half": (data[: n // 2], "bytes where its header says"),
        "truncated by one byte": (data[:-1], "bytes where its header says"),
        "one byte appended": (data + b"\0", "bytes where its header says"),
        "the entry twice": (data + data, "bytes where its header says"),
        "magic flipped": (_flip(data, 0), "bad magic"),
        "format field flipped": (_flip(data, 8), "has format version"),
        "material length flipped": (_flip(data, 12), "bytes where its header says"),
        "object length flipped": (_flip(data, 16), "bytes where its header says"),
        "object checksum flipped": (_flip(data, 24), "corrupt header"),
        "key material flipped": (_flip(data, _FIXED.size + mlen // 2), "corrupt header"),
        "header checksum flipped": (_flip(data, head_end + 5), "corrupt header"),
        "first code byte flipped": (_flip(data, head_end + 32), "corrupt object code"),
        "middle code byte flipped": (_flip(data, (head_end + 32 + n) // 2), "corrupt object code"),
        "last code byte flipped": (_flip(data, n - 1), "corrupt object code"),
        "another module's entry": (other, "built from something else (differs in ir_sha256)"),
        "an older format": (_with_header(data, version=FORMAT - 1),
                            f"has format version {FORMAT - 1}, expected {FORMAT}"),
        "another LLVM's entry": (_with_header(data, material=json.dumps(
            llvm_changed, sort_keys=True).encode()), "built from something else (differs in llvm)"),
        "a bare object file (no header)": (data[head_end + 32:], "bad magic"),
        "zeros": (bytes(n), "bad magic"),
    }


def test_a_whole_entry_is_accepted(cached):
    _, _, _, data, _ = cached
    obj, problem = unpack_entry(data, _material(data))
    assert problem == "" and obj is not None
    if sys.platform.startswith("linux"):
        assert obj[:4] == b"\x7fELF"  # the payload is the object file itself
    assert pack_entry(_material(data), obj) == data


def test_every_corruption_is_refused_before_llvm(cached):
    _, _, _, data, other = cached
    material = _material(data)
    for name, (blob, reason) in _corruptions(data, other).items():
        obj, problem = unpack_entry(blob, material)
        assert obj is None, name
        assert reason in problem, f"{name}: {problem}"


END_TO_END = ["empty", "truncated to half", "key material flipped", "middle code byte flipped",
              "another module's entry", "another LLVM's entry"]


@pytest.mark.parametrize("case", END_TO_END)
def test_a_bad_entry_is_discarded_recompiled_and_rewritten(cached, tmp_path, case):
    _, files, name, data, other = cached
    blob, reason = _corruptions(data, other)[case]
    work = tmp_path / "cache"
    work.mkdir()
    (work / name).write_bytes(blob)
    proc = _child(work, files["a"])
    assert _report(proc) == {"ok": True, "from_cache": False}
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr  # one warning line
    assert lines[0].startswith(f"xlapy: disk cache entry {work / name} ")
    assert reason in lines[0] and lines[0].endswith("; discarded, compiling again")
    rewritten = (work / name).read_bytes()
    assert unpack_entry(rewritten, _material(data))[0] is not None
    assert [p for p in os.listdir(work) if not p.startswith("cpu-")] == []  # no temporaries
    if case == "empty":  # the next process loads the rewritten entry, silently
        again = _child(work, files["a"])
        assert _report(again) == {"ok": True, "from_cache": True} and again.stderr == ""


def test_in_process_a_bad_entry_warns_once_and_is_replaced(cached, tmp_path, monkeypatch,
                                                           caplog):
    _, _, name, data, _ = cached
    monkeypatch.setenv("XLAPY_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("XLAPY_DISK_CACHE", raising=False)
    (tmp_path / name).write_bytes(_flip(data, len(data) - 100))
    clear_cache()
    with caplog.at_level(logging.WARNING, logger="xlapy.backends.cpu.jit"):
        exe = compile_module(parse_hlo_module(MODULE))
    assert [r.getMessage() for r in caplog.records] == [
        (f"xlapy: disk cache entry {tmp_path / name} has corrupt object code (checksum "
         f"mismatch); discarded, compiling again")]
    assert not exe._compiled.from_cache
    assert unpack_entry((tmp_path / name).read_bytes(), _material(data))[0] is not None
    caplog.clear()
    clear_cache()
    with caplog.at_level(logging.WARNING, logger="xlapy.backends.cpu.jit"):
        again = compile_module(parse_hlo_module(MODULE))
    assert again._compiled.from_cache and caplog.records == []
    x = np.linspace(-3, 3, 256, dtype=np.float32)
    np.testing.assert_allclose(again.run([x], None), np.tanh(x * 2) + x, rtol=1e-5, atol=1e-6)


def test_processes_compiling_one_module_at_once(cached, tmp_path):
    _, files, name, data, _ = cached
    work = tmp_path / "cache"
    children = []
    for k in range(4):
        children.append(_child(work, files["a"], tmp_path / f"ready{k}", tmp_path / "go",
                               wait=False))
    deadline = time.monotonic() + 240
    while not all((tmp_path / f"ready{k}").exists() for k in range(4)):
        assert time.monotonic() < deadline and all(c.poll() is None for c in children)
        time.sleep(0.01)
    (tmp_path / "go").touch()
    for c in children:
        out, err = c.communicate(timeout=300)
        assert c.returncode == 0, out + err
        assert json.loads(out.strip().splitlines()[-1])["ok"] and err == ""
    (plan,) = [p for p in os.listdir(work) if p.endswith(".plan")]  # the program's entry
    assert sorted(os.listdir(work)) == sorted([name, plan])  # no temporaries left
    assert unpack_entry((work / name).read_bytes(), _material(data))[0] is not None
    assert _report(_child(work, files["a"])) == {"ok": True, "from_cache": True}


def test_an_unwritable_cache_costs_only_time(tmp_path, monkeypatch, caplog):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("XLAPY_CACHE_DIR", str(blocker / "cache"))
    monkeypatch.delenv("XLAPY_DISK_CACHE", raising=False)
    clear_cache()
    with caplog.at_level(logging.WARNING):
        program = compile_module(parse_hlo_module(MODULE.replace("disk_cache_a", "unwritable")))
    assert caplog.records == [] and not program._compiled.from_cache
    x = np.zeros(256, np.float32)
    np.testing.assert_array_equal(program.run([x], None), x)


def test_the_llvm_options_are_part_of_every_key(monkeypatch):
    # The process-wide LLVM options (jit.LLVM_OPTIONS, e.g. -disable-lsr) change the code
    # generated from the same IR: an object built under other options is another entry.
    current, options = jit.get_jit(), jit.LLVM_OPTIONS
    assert current.identity["llvm-options"] == " ".join(options)
    text = 'define void @f() {\n  ret void\n}\n'
    monkeypatch.setattr(jit, "LLVM_OPTIONS", ())  # sets nothing: the process keeps its own
    other = jit.Jit()
    assert other.identity["llvm-options"] == ""
    assert (other.cache_key(text) != current.cache_key(text)) == bool(options)


# -- program entries (plan_cache: the plan and the object code of a whole program) ------------

WHILE_DOTS = """HloModule while_dots
cond {
  s = (s32[], f32[24,24]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(6)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[24,24]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[24,24] get-tuple-element(s), index=1
  d = f32[24,24] dot(x, x), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  t = f32[24,24] tanh(d)
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  ROOT r = (s32[], f32[24,24]) tuple(i1, t)
}
ENTRY e {
  x = f32[24,24] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[24,24]) tuple(zero, x)
  ROOT w = (s32[], f32[24,24]) while(init), condition=cond, body=body
}
"""

TUPLES = """HloModule tuples
ENTRY e {
  x = f32[64] parameter(0)
  p = (s32[3], f32[64]) parameter(1)
  c = f32[64] iota(), iota_dimension=0
  k = f32[64] constant({%s})
  v = f32[64] get-tuple-element(p), index=1
  a = f32[64] add(x, k)
  m = f32[64] multiply(a, v)
  s = f32[64] subtract(m, c)
  n = s32[3] get-tuple-element(p), index=0
  ROOT r = (f32[64], (s32[3], f32[64]), f32[64]) tuple(s, (s32[3], f32[64]) tuple(n, a), x)
}
""" % ", ".join(f"{0.25 * k - 3:g}" for k in range(64))

DONATED = """HloModule donated, input_output_alias={ {0}: (0, {}, may-alias), {1}: (1, {}, may-alias) }
ENTRY e {
  t = f32[4096] parameter(0)
  b = f32[4096] parameter(1)
  u = f32[100] parameter(2)
  i = s32[] parameter(3)
  d = f32[4096] dynamic-update-slice(t, u, i)
  ROOT r = (f32[4096], f32[4096]) tuple(d, t)
}
"""

HOST_CALLS = """HloModule host_calls
ENTRY e {
  x = f32[32,32] parameter(0)
  xi = s32[32,32] convert(x)
  xs = s32[1,32,32,1] reshape(xi)
  k = s32[1,1,1,1] constant({{{{3}}}})
  c = s32[1,32,32,1] convolution(xs, k), window={size=1x1}, dim_labels=b01f_01io->b01f
  cr = s32[32,32] reshape(c)
  m = f32[32,32] convert(cr)
  ROOT r = f32[32,32] tanh(m)
}
"""


def _mlp_text() -> str:
    with open(os.path.join(ROOT, "benchmarks", "hlo", "mlp_train.tiny.hlo")) as f:
        return f.read()


def _args(module, seed=0):
    rng = np.random.default_rng(seed)

    def value(shape):
        if shape.is_tuple():
            return tuple(value(s) for s in shape.tuple_shapes)
        dt = np.dtype(np.int32) if shape.element_type.name == "S32" else np.dtype(np.float32)
        dims = tuple(shape.dimensions)
        if dt.kind == "i":
            return rng.integers(0, 50, dims).astype(dt)
        return (rng.standard_normal(dims) * 0.3).astype(dt)

    return [value(p.shape) for p in sorted(module.entry.parameters,
                                           key=lambda p: p.parameter_number)]


def _leaves(value) -> list:
    if isinstance(value, tuple):
        return [leaf for v in value for leaf in _leaves(v)]
    return [np.asarray(value)]


def _identical(got, want) -> None:
    """Same structure, dtypes and bits."""
    assert type(got) is type(want) or not isinstance(want, tuple)
    g, w = _leaves(got), _leaves(want)
    assert len(g) == len(w)
    for a, b in zip(g, w):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert np.array_equal(a, b, equal_nan=True)


def _close(got, want) -> None:
    for a, b in zip(_leaves(got), _leaves(want), strict=True):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-5)


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """An empty disk cache, on; the in-memory cache emptied before and after."""
    monkeypatch.setenv("XLAPY_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("XLAPY_DISK_CACHE", raising=False)
    monkeypatch.setenv("XLAPY_PLAN_CACHE", "1")  # tests/conftest.py turns it off
    clear_cache()
    yield tmp_path
    clear_cache()


def _plans(directory) -> list:
    return sorted(p for p in os.listdir(directory) if p.endswith(plan_cache.SUFFIX))


def _cold_then_restored(text):
    """(the program compiled cold, the program loaded from its entry)."""
    clear_cache()
    cold = compile_module(parse_hlo_module(text))
    assert not isinstance(cold, RestoredProgram)
    assert plan_cache.unpersistable(cold) is None
    clear_cache()
    restored = compile_module(parse_hlo_module(text))
    assert isinstance(restored, RestoredProgram) and restored._compiled.from_cache
    assert jit.get_jit().last_from_cache
    return cold, restored


@pytest.mark.parametrize("name", ["mlp", "while_dots", "tuples"])
def test_a_restored_program_computes_what_the_compiled_one_does(cache_dir, name):
    text = {"mlp": _mlp_text(), "while_dots": WHILE_DOTS, "tuples": TUPLES}[name]
    cold, restored = _cold_then_restored(text)
    assert len(_plans(cache_dir)) == 1
    module = parse_hlo_module(text)
    for seed in range(2):
        args = _args(module, seed)
        want = cold.run(args, EvalOptions())
        got = restored.run(args, EvalOptions())
        _identical(got, want)
        _close(got, evaluate(module, *args))
    # what the program is made of, planned again on first access
    assert [type(s).__name__ for s in restored.entry.steps] == \
        [type(s).__name__ for s in cold.entry.steps]
    assert restored.interpreted() == cold.interpreted() == []
    assert restored.native.ws_bytes == cold.native.ws_bytes
    assert len(restored.native.consts) == len(cold.native.consts)
    # what an out-of-memory error names (steps._named): the optimised module's instructions
    assert [(i.name, i.opcode, str(i.shape)) for i in restored.native.result_instrs] == \
        [(i.name, i.opcode, str(i.shape)) for i in cold.native.result_instrs]
    if name == "while_dots":  # the loop's cancel poll is in the restored host table
        assert restored.native.needs_run and [type(c).__name__ for c in
                                              restored.native.host_table.calls] == ["Polling"]
    if name == "tuples":  # the 64-element constant came from the entry's constants part
        assert any(c.shape == (64,) for c in restored.native.consts)


def test_a_restored_program_through_the_client(cache_dir):
    text = _mlp_text()
    module = parse_hlo_module(text)
    args = _args(module, 3)
    want = xlapy.Client(backend="cpu").compile(text)(*args)
    clear_cache()
    exe = xlapy.Client(backend="cpu").compile(text)
    assert isinstance(exe.program, RestoredProgram)
    _identical(exe(*args), want)


def test_donated_parameters_of_a_restored_program(cache_dir):
    cold, restored = _cold_then_restored(DONATED)
    assert restored.takes_donations and restored.native.aliases == cold.native.aliases
    module = parse_hlo_module(DONATED)
    t = np.arange(4096, dtype=np.float32)
    b = np.ones(4096, np.float32)
    u = np.full(100, -1, np.float32)
    want = evaluate(module, t, b, u, np.int32(40))
    for program in (cold, restored):
        args = [t.copy(), b.copy(), u, np.int32(40)]
        got = program.run(args, EvalOptions(), frozenset({(0, ()), (1, ())}))
        assert got[0] is args[0] and got[1] is args[1]  # written where the caller donated
        _identical(got, want)
        kept = [t.copy(), b.copy(), u, np.int32(40)]
        got = program.run(kept, EvalOptions())  # nothing donated: nothing written
        assert np.array_equal(kept[0], t) and np.array_equal(kept[1], b)
        _identical(got, want)


def test_a_program_with_host_calls_is_compiled_every_time(cache_dir, caplog):
    """A host call runs a step over the optimised module's instructions, which the cache
    does not keep: such a program is not stored, and compiles in full (its object code
    from the object cache)."""
    clear_cache()
    cold = compile_module(parse_hlo_module(HOST_CALLS))
    assert "out to Python" in plan_cache.unpersistable(cold)
    assert _plans(cache_dir) == []
    clear_cache()
    with caplog.at_level(logging.WARNING):
        again = compile_module(parse_hlo_module(HOST_CALLS))
    assert not isinstance(again, RestoredProgram) and again._compiled.from_cache
    assert caplog.records == []
    x = (np.random.default_rng(4).standard_normal((32, 32)) * 10).astype(np.float32)
    want = evaluate(parse_hlo_module(HOST_CALLS), x)
    _close(again.run([x], EvalOptions()), want)
    _identical(again.run([x], EvalOptions()), cold.run([x], EvalOptions()))


def _entry_of(text, directory):
    """(path, bytes, key material) of ``text``'s program entry in ``directory``."""
    material = plan_cache.key_material(fingerprint(parse_hlo_module(text)))
    path = plan_cache.entry_path(str(directory), material)
    with open(path, "rb") as f:
        return path, f.read(), material


def test_an_entry_of_another_xlapy_source_is_never_used(cache_dir, monkeypatch, caplog):
    clear_cache()
    compile_module(parse_hlo_module(TUPLES))
    old_path, old, _ = _entry_of(TUPLES, cache_dir)
    monkeypatch.setattr(plan_cache, "_SOURCE", ["0" * 64])  # xlapy edited since
    clear_cache()
    with caplog.at_level(logging.WARNING):
        program = compile_module(parse_hlo_module(TUPLES))
    assert not isinstance(program, RestoredProgram) and caplog.records == []  # another key
    assert len(_plans(cache_dir)) == 2
    path, _, material = _entry_of(TUPLES, cache_dir)
    assert path != old_path
    with open(path, "wb") as f:  # the stale entry under the new key's name
        f.write(old)
    clear_cache()
    with caplog.at_level(logging.WARNING):
        program = compile_module(parse_hlo_module(TUPLES))
    assert not isinstance(program, RestoredProgram)
    assert [r.getMessage() for r in caplog.records] == [
        f"xlapy: disk cache entry {path} was built from something else (differs in source); "
        f"discarded, compiling again"]
    with open(path, "rb") as f:
        assert plan_cache.unpack_entry(f.read(), material)[0] is not None  # rewritten


def _parts(data):
    """[(start, end)] of the plan, the object code and the constants in entry ``data``."""
    fixed = plan_cache._FIXED
    _, _, mlen, plen, olen, clen = fixed.unpack_from(data)[:6]
    start = fixed.size + mlen + 32
    return [(start, start + plen), (start + plen, start + plen + olen),
            (start + plen + olen, start + plen + olen + clen)]


@pytest.mark.parametrize("part, reason", [(0, "has a corrupt plan (checksum mismatch)"),
                                          (1, "has corrupt object code (checksum mismatch)"),
                                          (2, "has corrupt constants (checksum mismatch)")])
def test_a_corrupt_part_is_detected_and_the_entry_rewritten(cache_dir, caplog, part, reason):
    clear_cache()
    cold = compile_module(parse_hlo_module(TUPLES))
    path, data, material = _entry_of(TUPLES, cache_dir)
    lo, hi = _parts(data)[part]
    assert hi > lo
    with open(path, "wb") as f:
        f.write(_flip(data, (lo + hi) // 2))
    clear_cache()
    with caplog.at_level(logging.WARNING):
        program = compile_module(parse_hlo_module(TUPLES))
    assert [r.getMessage() for r in caplog.records] == [
        f"xlapy: disk cache entry {path} {reason}; discarded, compiling again"]
    assert not isinstance(program, RestoredProgram)
    args = _args(parse_hlo_module(TUPLES), 5)
    _identical(program.run(args, EvalOptions()), cold.run(args, EvalOptions()))
    with open(path, "rb") as f:
        assert f.read() == data  # rewritten, the same bytes
    caplog.clear()
    clear_cache()
    with caplog.at_level(logging.WARNING):
        again = compile_module(parse_hlo_module(TUPLES))
    assert isinstance(again, RestoredProgram) and caplog.records == []


def test_every_corruption_of_a_program_entry_is_refused(cache_dir):
    clear_cache()
    compile_module(parse_hlo_module(TUPLES))
    _, data, material = _entry_of(TUPLES, cache_dir)
    assert plan_cache.unpack_entry(data, material)[0] is not None
    fixed = plan_cache._FIXED
    mlen = fixed.unpack_from(data)[2]
    head_end = fixed.size + mlen
    cases = {"empty": b"", "a partial header": data[:30], "truncated": data[:len(data) // 2],
             "one byte short": data[:-1], "one byte more": data + b"\0",
             "magic": _flip(data, 0), "format": _flip(data, 8),
             "a length": _flip(data, 20), "a checksum": _flip(data, 50),
             "the key material": _flip(data, fixed.size + mlen // 2),
             "the header checksum": _flip(data, head_end + 3),
             "an object entry": pack_entry(material, b"\x7fELF")}
    for (lo, hi), what in zip(_parts(data), ("plan", "object", "constants")):
        cases[f"first {what} byte"] = _flip(data, lo)
        cases[f"last {what} byte"] = _flip(data, hi - 1)
    for name, blob in cases.items():
        parts, problem = plan_cache.unpack_entry(blob, material)
        assert parts is None and problem, name


def test_a_plan_that_does_not_decode_is_discarded(cache_dir, caplog):
    """Checksums that hold over a plan that does not describe the program (written by a
    broken xlapy): refused before anything runs."""
    clear_cache()
    compile_module(parse_hlo_module(TUPLES))
    path, data, material = _entry_of(TUPLES, cache_dir)
    plan, obj, consts = (bytes(p) for p in plan_cache.unpack_entry(data, material)[0])
    doc = json.loads(plan)
    for bad, reason in ((b"{}", "has an unreadable plan (KeyError"),
                        (json.dumps(dict(doc, symbol="nowhere")).encode(),
                         "has no entry function 'nowhere' in its object code"),
                        (json.dumps(dict(doc, consts=[["<f4", [64], 0, 999999]])).encode(),
                         "has an unreadable plan (ValueError")):
        plan_cache.store(path, material, bad, obj, consts)
        clear_cache()
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            program = compile_module(parse_hlo_module(TUPLES))
        assert not isinstance(program, RestoredProgram)
        (record,) = caplog.records
        assert record.getMessage().startswith(f"xlapy: disk cache entry {path} {reason}")


def test_the_disk_cache_off_stores_no_program(cache_dir, monkeypatch):
    monkeypatch.setenv("XLAPY_DISK_CACHE", "0")
    clear_cache()
    program = compile_module(parse_hlo_module(TUPLES))
    assert program._compiled.object_code is None and os.listdir(cache_dir) == []


def test_program_entries_alone_turned_off(cache_dir, monkeypatch):
    """XLAPY_PLAN_CACHE=0: object entries only, no program entry stored or loaded."""
    clear_cache()
    compile_module(parse_hlo_module(TUPLES))  # stores the program entry
    monkeypatch.setenv("XLAPY_PLAN_CACHE", "0")
    clear_cache()
    program = compile_module(parse_hlo_module(TUPLES))
    assert not isinstance(program, RestoredProgram) and program._compiled.from_cache
    assert program._compiled.object_code is None
    assert len(_plans(cache_dir)) == 1 and len(_entries(cache_dir)) == 1
    other = TUPLES.replace("HloModule tuples", "HloModule tuples_other")
    compile_module(parse_hlo_module(other))
    assert len(_plans(cache_dir)) == 1  # none stored for the new module


def test_a_new_process_loads_the_program(cached, tmp_path):
    """MODULE's program, stored by one process, is loaded by the next one."""
    _, files, _, _, _ = cached
    work = tmp_path / "cache"
    assert _report(_child(work, files["a"])) == {"ok": True, "from_cache": False}
    assert len(_plans(work)) == 1
    probe = CHILD.replace("print(json.dumps(", "from xlapy.backends.cpu.backend import "
                          "PROGRAMS, RestoredProgram\nprint('RESTORED', isinstance("
                          "list(PROGRAMS._entries.values())[0][0], RestoredProgram))\n"
                          "print(json.dumps(")
    env = dict(os.environ, XLAPY_CACHE_DIR=str(work))
    env.pop("XLAPY_DISK_CACHE", None)
    env.pop("XLAPY_PLAN_CACHE", None)
    proc = subprocess.run([sys.executable, "-c", probe, str(files["a"])], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert "RESTORED True" in proc.stdout
    assert _report(proc) == {"ok": True, "from_cache": True}


PACKED_CHILD = r"""
import sys
import numpy as np
from xlapy.backends.cpu import gemm_kernel
from xlapy.backends.cpu.backend import RestoredProgram
from xlapy.runtime import Client

# the packed GEMM on any x86-64 host: 512-bit vectors (LLVM splits them on narrower ones)
# against a BLAS said to have 256-bit kernels
gemm_kernel.BITS = 512
gemm_kernel.blas_vector_bits = lambda: 256
text = '''HloModule packed_dot
ENTRY e {
  a = f32[96,80]{1,0} parameter(0)
  b = f32[80,128]{1,0} parameter(1)
  ROOT d = f32[96,128]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
'''
exe = Client(backend="cpu").compile(text)
a = np.linspace(-1, 1, 96 * 80, dtype=np.float32).reshape(96, 80)
b = np.linspace(2, -1, 80 * 128, dtype=np.float32).reshape(80, 128)
got = np.asarray(exe.execute([[a, b]])[0])
want = a.astype(np.float64) @ b.astype(np.float64)
print("RESTORED", isinstance(exe.program, RestoredProgram))
print("OK", bool(np.allclose(got, want, rtol=1e-5, atol=1e-4)))
"""


def test_a_new_process_loads_a_program_calling_the_packed_gemm(tmp_path):
    """A stored program whose dot is the packed GEMM calls the process's shared core, which
    the loading process has not emitted: it is provided before the object is loaded (the
    load crashed the process before)."""
    env = dict(os.environ, XLAPY_CACHE_DIR=str(tmp_path), XLAPY_PLAN_CACHE="1")
    env.pop("XLAPY_DISK_CACHE", None)
    runs = [subprocess.run([sys.executable, "-c", PACKED_CHILD], env=env, cwd=ROOT,
                           capture_output=True, text=True, timeout=300, check=False)
            for _ in range(2)]
    for proc in runs:
        assert proc.returncode == 0, proc.stderr
        assert "OK True" in proc.stdout, proc.stdout + proc.stderr
    assert "RESTORED False" in runs[0].stdout
    assert "RESTORED True" in runs[1].stdout


WORDS_CHILD = r"""
import sys
import ml_dtypes
import numpy as np
from xlapy.backends.cpu import gemm_kernel
from xlapy.backends.cpu.backend import RestoredProgram
from xlapy.runtime import Client

t, r = ("s8", "s32") if sys.argv[1] == "int8" else ("bf16", "f32")
text = f'''HloModule words_dot
ENTRY e {{
  a = {t}[96,512]{{1,0}} parameter(0)
  b = {t}[512,80]{{1,0}} parameter(1)
  ROOT d = {r}[96,80]{{1,0}} dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
}}
'''
exe = Client(backend="cpu").compile(text)
steps = exe.program.entry.steps if not isinstance(exe.program, RestoredProgram) else []
print("WORDS", all(gemm_kernel.form(s.instr).kind == sys.argv[1] for s in steps
                   if s.instr.opcode == "dot"))
rng = np.random.default_rng(0)
if t == "s8":
    a = rng.integers(-128, 128, (96, 512)).astype(np.int8)
    b = rng.integers(-128, 128, (512, 80)).astype(np.int8)
else:  # small integers: every sum exact in f32
    a = rng.integers(-4, 5, (96, 512)).astype(ml_dtypes.bfloat16)
    b = rng.integers(-4, 5, (512, 80)).astype(ml_dtypes.bfloat16)
got = np.asarray(exe.execute([[a, b]])[0])
print("RESTORED", isinstance(exe.program, RestoredProgram))
print("OK", bool(np.array_equal(got, a.astype(np.int64) @ b.astype(np.int64))))
"""


@pytest.mark.parametrize("kind", ["int8", "bf16"])
def test_a_new_process_loads_a_program_calling_a_words_core(tmp_path, kind):
    """The int8 and bf16 cores (gemm_words.py) are shared cores too: a stored program
    calling one is loaded by a process that has not emitted it."""
    from xlapy.backends.cpu import gemm_words

    if kind == "int8" and not gemm_words.supported():
        pytest.skip("the host has no AVX2")
    if kind == "bf16" and not gemm_words.bf16_supported():
        pytest.skip("the host has no AVX512-BF16")
    env = dict(os.environ, XLAPY_CACHE_DIR=str(tmp_path), XLAPY_PLAN_CACHE="1")
    env.pop("XLAPY_DISK_CACHE", None)
    runs = [subprocess.run([sys.executable, "-c", WORDS_CHILD, kind], env=env, cwd=ROOT,
                           capture_output=True, text=True, timeout=300, check=False)
            for _ in range(2)]
    for proc in runs:
        assert proc.returncode == 0, proc.stderr
        assert "OK True" in proc.stdout, proc.stdout + proc.stderr
    assert "RESTORED False" in runs[0].stdout and "WORDS True" in runs[0].stdout
    assert "RESTORED True" in runs[1].stdout

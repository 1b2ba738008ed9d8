"""The CPU backend's disk cache of object code (issue 12, item 2): entries carry a header
(format, sizes, checksums, the key material they were built from); a bad entry - empty,
truncated, bytes flipped in its header or its code, another module's entry under this name,
another version's - is found before LLVM sees a byte, discarded with one warning line,
compiled again and rewritten. Writes are atomic, so processes compiling one module at once
all stay correct.

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

from xlapy.backends.cpu import jit
from xlapy.backends.cpu.backend import clear_cache, compile_module
from xlapy.backends.cpu.jit import FORMAT, pack_entry, unpack_entry
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

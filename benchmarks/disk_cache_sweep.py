"""Corrupt the cpu backend's disk cache entries of a module 49 ways each and load them in a
fresh process each time. Not a timing benchmark: a robustness probe (every corruption must
be detected, the module compiled again and the entry rewritten).

    python benchmarks/disk_cache_sweep.py

Two sweeps: the module's object entry (``cpu-<key>.o``, jit.py; its program entry removed,
so that the object entry is what a process loads) and its program entry (``cpu-<key>.plan``,
plan_cache.py: plan, object code and constants; the object entry left in place).

Corruptions: an empty file, truncations, one byte flipped at 33 offsets (header, plan, code),
another module's entry under this module's name, garbage, zeros, the entry twice, a byte
appended, a text file. Each outcome is one of: crash (the process died of a signal), error
(an exception), wrong result (silently wrong numbers), right result but undetected, detected
(the one warning line, right numbers, the entry rewritten: a next process loads it silently,
a program entry as a restored program).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

A = """HloModule sweep_a
ENTRY e {
  x = f32[256] parameter(0)
  two = f32[] constant(2)
  b2 = f32[256] broadcast(two), dimensions={}
  m = f32[256] multiply(x, b2)
  t = f32[256] tanh(m)
  ROOT r = f32[256] add(t, x)
}
"""
B = A.replace("sweep_a", "sweep_b").replace("tanh", "sine")

CHILD = r"""
import sys, warnings, numpy as np
warnings.simplefilter("always")
import xlapy
from xlapy.backends.cpu.jit import get_jit
with open(sys.argv[1]) as f:
    text = f.read()
x = np.linspace(-3, 3, 256, dtype=np.float32)
from xlapy.backends.cpu.backend import RestoredProgram
exe = xlapy.Client(backend="cpu").compile(text)
got = exe(x)
want = np.tanh(x * 2) + x
ok = np.allclose(got, want, rtol=1e-5, atol=1e-6)
print("RESULT", "OK" if ok else "WRONG", "from_cache=%s" % get_jit().last_from_cache,
      "restored=%s" % isinstance(exe.program, RestoredProgram))
"""


def _warned(err: str) -> bool:
    return "disk cache" in err


def run(cache: str, path: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, XLAPY_CACHE_DIR=cache)
    env.pop("XLAPY_DISK_CACHE", None)
    return subprocess.run([sys.executable, "-c", CHILD, path], capture_output=True, text=True,
                          env=env, timeout=300, check=False)


def corruptions(data: bytes, other: bytes) -> list[tuple[str, bytes]]:
    n = len(data)
    cases = [("empty (0 bytes)", b"")]
    for frac in (0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99):
        cases.append((f"truncated to {frac:.0%}", data[: int(n * frac)]))
    cases.append(("truncated by 1 byte", data[:-1]))
    positions = [0, 1, 4, 8, 12, 16, 20, 24, 32, 40, 48, 56, 63, 64, 80, 100, 128, 200, 256,
                 400, 512, n // 3, n // 2, n - 700, 2 * n // 3, 3 * n // 4, n - 200, n - 64,
                 n - 16, n - 8, n - 4, n - 2, n - 1]
    for pos in sorted({p for p in positions if 0 <= p < n}):
        flipped = bytearray(data)
        flipped[pos] ^= 0xFF
        cases.append((f"byte {pos} of {n} flipped", bytes(flipped)))
    cases.append(("another module's entry", other))
    cases.append(("another module's entry, truncated", other[: len(other) // 2]))
    garbage = np.random.default_rng(0).integers(0, 256, n, dtype=np.uint8).tobytes()
    cases.append(("garbage of the same length", garbage))
    cases.append(("zeros of the same length", bytes(n)))
    cases.append(("the entry twice", data + data))
    cases.append(("one byte appended", data + b"\0"))
    cases.append(("text file", b"hello\n" * 50))
    return cases


def outcome(proc, cache, target, blob, pa, clean_mark) -> str:
    if proc.returncode < 0:
        return f"crash (signal {-proc.returncode})"
    if proc.returncode != 0:
        last = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "?"
        return f"error: {last[:80]}"
    if "WRONG" in proc.stdout:
        return "wrong result"
    warned = _warned(proc.stderr)
    repaired = target.read_bytes() != blob
    if warned and repaired:
        if clean_mark.endswith("restored=False"):  # the object entry is what must load now
            for f in glob.glob(os.path.join(cache, "cpu-*.plan")):
                os.remove(f)
        again = run(cache, pa)
        clean = clean_mark in again.stdout and not _warned(again.stderr)
        return "detected, repaired" + ("" if clean else " (next run NOT clean)")
    if warned:
        return "detected, not repaired"
    return "right result, undetected"


def sweep(kind: str, suffix: str, base: Path, work: Path, pa: Path, pb: Path) -> dict:
    """Every corruption of ``pa``'s entry ending in ``suffix`` (entries of the other kind
    of ``pa``: removed for object entries, kept for program entries)."""
    a_entries = set(glob.glob(str(base / "cpu-*")))
    assert "OK" in run(str(base), str(pa)).stdout
    a_entries = set(glob.glob(str(base / "cpu-*"))) - a_entries
    run(str(base), str(pb))
    (fa,) = [f for f in a_entries if f.endswith(suffix)]
    (fb,) = [f for f in set(glob.glob(str(base / f"cpu-*{suffix}"))) - a_entries]
    data, other = Path(fa).read_bytes(), Path(fb).read_bytes()
    drop = [f for f in a_entries if not f.endswith(suffix)] if suffix == ".o" else []
    clean_mark = "OK from_cache=True restored=" + ("False" if suffix == ".o" else "True")
    tally: dict[str, int] = {}
    cases = corruptions(data, other)
    print(f"-- {kind} entry ({len(data)} bytes): {len(cases)} corruptions")
    for label, blob in cases:
        cache = work / "c"
        shutil.rmtree(cache, ignore_errors=True)
        shutil.copytree(base, cache)
        for f in drop:
            (cache / os.path.basename(f)).unlink()
        target = cache / os.path.basename(fa)
        target.write_bytes(blob)
        proc = run(str(cache), str(pa))
        result = outcome(proc, str(cache), target, blob, str(pa), clean_mark)
        kind_of = result.split(":")[0].split(" (")[0]
        tally[kind_of] = tally.get(kind_of, 0) + 1
        print(f"{label:45s} {result}")
        lines = [line for line in proc.stderr.splitlines() if "disk cache" in line]
        if lines:
            print(f"    warning ({len(proc.stderr.splitlines())} stderr line(s)): ...{lines[0][-110:]}")
    print(f"\n{kind} entry, {len(cases)} corruptions:",
          ", ".join(f"{v} {k}" for k, v in sorted(tally.items())), "\n")
    return tally


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="xlapy-sweep-"))
    pa, pb = work / "a.hlo", work / "b.hlo"
    pa.write_text(A)
    pb.write_text(B)
    tallies = {}
    for kind, suffix in (("object", ".o"), ("program", ".plan")):
        base = work / f"base-{suffix[1:]}"
        tallies[kind] = sweep(kind, suffix, base, work, pa, pb)
    for kind, tally in tallies.items():
        print(f"{kind} entries:", ", ".join(f"{v} {k}" for k, v in sorted(tally.items())))
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

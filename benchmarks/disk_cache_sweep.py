"""Corrupt the cpu backend's disk cache entry of a module 49 ways and load it in a fresh
process each time. Not a timing benchmark: a robustness probe (every corruption must be
detected, the module compiled again and the entry rewritten).

    python benchmarks/disk_cache_sweep.py

Corruptions: an empty file, truncations, one byte flipped at 33 offsets (header and code),
another module's entry under this module's name, garbage, zeros, the entry twice, a byte
appended, a text file. Each outcome is one of: crash (the process died of a signal), error
(an exception), wrong result (silently wrong numbers), right result but undetected, detected
(the one warning line, right numbers, the entry rewritten: a next process loads it silently).
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
got = xlapy.Client(backend="cpu").compile(text)(x)
want = np.tanh(x * 2) + x
ok = np.allclose(got, want, rtol=1e-5, atol=1e-6)
print("RESULT", "OK" if ok else "WRONG", "from_cache=%s" % get_jit().last_from_cache)
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
    for pos in positions:
        flipped = bytearray(data)
        flipped[pos] ^= 0xFF
        cases.append((f"byte {pos} of {n} flipped", bytes(flipped)))
    cases.append(("another module's object file", other))
    cases.append(("another module's object, truncated", other[: len(other) // 2]))
    garbage = np.random.default_rng(0).integers(0, 256, n, dtype=np.uint8).tobytes()
    cases.append(("garbage of the same length", garbage))
    cases.append(("zeros of the same length", bytes(n)))
    cases.append(("the object twice", data + data))
    cases.append(("one byte appended", data + b"\0"))
    cases.append(("text file", b"hello\n" * 50))
    return cases


def outcome(proc, cache, target, blob, pa) -> str:
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
        again = run(cache, pa)
        clean = "OK from_cache=True" in again.stdout and not _warned(again.stderr)
        return "detected, repaired" + ("" if clean else " (next run NOT clean)")
    if warned:
        return "detected, not repaired"
    return "right result, undetected"


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="xlapy-sweep-"))
    base = work / "base"
    pa, pb = work / "a.hlo", work / "b.hlo"
    pa.write_text(A)
    pb.write_text(B)
    assert "OK" in run(str(base), str(pa)).stdout
    obj_a = set(glob.glob(str(base / "cpu-*")))
    run(str(base), str(pb))
    obj_b = set(glob.glob(str(base / "cpu-*"))) - obj_a
    (fa,), (fb,) = obj_a, obj_b
    data, other = Path(fa).read_bytes(), Path(fb).read_bytes()
    tally: dict[str, int] = {}
    cases = corruptions(data, other)
    for label, blob in cases:
        cache = work / "c"
        shutil.rmtree(cache, ignore_errors=True)
        shutil.copytree(base, cache)
        target = cache / os.path.basename(fa)
        target.write_bytes(blob)
        proc = run(str(cache), str(pa))
        result = outcome(proc, str(cache), target, blob, str(pa))
        kind = result.split(":")[0].split(" (")[0]
        tally[kind] = tally.get(kind, 0) + 1
        print(f"{label:45s} {result}")
        lines = [line for line in proc.stderr.splitlines() if "disk cache" in line]
        if lines:
            print(f"    warning ({len(proc.stderr.splitlines())} stderr line(s)): ...{lines[0][-110:]}")
    print(f"\n{len(cases)} corruptions:", ", ".join(f"{v} {k}" for k, v in sorted(tally.items())))
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

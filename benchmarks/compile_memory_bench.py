"""Memory of a long-running process that keeps compiling new modules.

    python benchmarks/compile_memory_bench.py [--count 2000] [--every 200] [--disk]

Compiles ``--count`` distinct modules (each a small fused kernel: its own LLVM module,
engine and object code) on ``Client(backend="cpu")``, runs each once, drops the executable,
and prints the process's resident set size (RSS, from /proc/self/status) every ``--every``
compiles; then ``clear_caches()`` and a garbage collection, and RSS again (and once more
after glibc's ``malloc_trim(0)``, which hands freed heap pages back: RSS alone cannot tell
memory still in use from memory freed but kept by the allocator). With the program cache
bounded (``xlapy.backends.cpu.set_cache_limits``, ``XLAPY_CPU_CACHE_*``; ``--programs`` sets
the count bound here), RSS must flatten once the cache is full; what still grows per compile
after that is a leak.

The disk cache is off unless ``--disk`` (then a temporary directory). No timing targets:
the figures are memory, and the compile rate printed is for orientation only.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import time


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def malloc_trim() -> float | None:
    """RSS after glibc returned its free pages (None without glibc)."""
    import ctypes

    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        return None
    return rss_mb()


def module_text(k: int) -> str:
    """A distinct module per ``k``: the scalar is embedded in the kernel's IR, the length
    varies too, so no two modules share a program or an object file."""
    n = 64 + k % 61
    return f"""HloModule mem_{k}
ENTRY e {{
  x = f32[{n}] parameter(0)
  c = f32[] constant({1 + k * 0.001:.6f})
  b = f32[{n}] broadcast(c), dimensions={{}}
  m = f32[{n}] multiply(x, b)
  t = f32[{n}] tanh(m)
  ROOT r = f32[{n}] add(t, x)
}}
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--every", type=int, default=200)
    ap.add_argument("--disk", action="store_true", help="keep the disk cache on (temp dir)")
    ap.add_argument("--programs", type=int, help="the program cache's count bound")
    args = ap.parse_args()
    if args.disk:
        os.environ["XLAPY_CACHE_DIR"] = tempfile.mkdtemp(prefix="xlapy-membench-")
    else:
        os.environ["XLAPY_DISK_CACHE"] = "0"

    import numpy as np

    import xlapy
    from xlapy.backends import cpu

    client = xlapy.Client(backend="cpu")
    if args.programs is not None:
        cpu.set_cache_limits(programs=args.programs)
    limits = getattr(cpu, "cache_limits", None)
    print(f"python {sys.version.split()[0]}, cache limits: "
          f"{limits() if limits else 'none (unbounded cache)'}")
    # Warm-up: LLVM's one-time state, the kernel registry, the first engine.
    for k in range(20):
        client.compile(module_text(args.count + k))(np.ones(64 + (args.count + k) % 61,
                                                            np.float32))
    cpu.clear_caches(disk=False)
    gc.collect()
    start = rss_mb()
    print(f"{'compiles':>9} {'RSS MB':>9} {'+MB':>8} {'KB/compile (last block)':>24}")
    print(f"{0:9d} {start:9.1f} {0:8.1f}")
    last, t0 = start, time.perf_counter()
    for k in range(1, args.count + 1):
        text = module_text(k)
        n = 64 + k % 61
        out = client.compile(text)(np.ones(n, np.float32))
        assert out.shape == (n,)
        if k % args.every == 0:
            now = rss_mb()
            print(f"{k:9d} {now:9.1f} {now - start:8.1f} "
                  f"{(now - last) * 1024 / args.every:24.1f}")
            last = now
    elapsed = time.perf_counter() - t0
    cpu.clear_caches(disk=False)
    gc.collect()
    after = rss_mb()
    print(f"after clear_caches(): RSS {after:.1f} MB ({after - start:+.1f} MB over the start, "
          f"{(after - start) * 1024 / args.count:.1f} KB per compile)")
    trimmed = malloc_trim()
    if trimmed is not None:
        print(f"after malloc_trim(0): RSS {trimmed:.1f} MB ({trimmed - start:+.1f} MB over the "
              f"start, {(trimmed - start) * 1024 / args.count:.1f} KB per compile)")
    print(f"{args.count} compiles in {elapsed:.1f} s ({elapsed / args.count * 1e3:.1f} ms each; "
          f"shared machine: orientation only)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

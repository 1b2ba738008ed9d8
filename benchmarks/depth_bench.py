"""Long and deep programs: compile and run times of an elementwise chain of N ops on xlapy's
CPU backend, xlapy's interpreter and XLA:CPU (jax.jit, when jax is importable), and the
interpreter/CPU times of call chains and tuple nesting.

    python benchmarks/depth_bench.py [--sizes 400,2000,20000] [--no-jax]

The chain is ``x = op(x, c)`` with op cycling through add, multiply, subtract, maximum on
f32[64] (jax: the same Python loop, jitted). CPU compile times are cold (the disk cache is
off for the run; the in-memory cache is cleared per case); run times are the median of 5
calls after one warm-up call. Compile time should grow linearly in N.
Figures depend on the machine's load: run it on a quiet machine to compare.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

OPS = ("add", "multiply", "subtract", "maximum")


def chain_text(n: int) -> str:
    lines = ["HloModule chain", "ENTRY e {", "  x0 = f32[64] parameter(0)",
             "  c = f32[] constant(1.0001)", "  cb = f32[64] broadcast(c), dimensions={}"]
    for i in range(1, n + 1):
        lines.append(f"  {'ROOT ' if i == n else ''}x{i} = f32[64] {OPS[i % 4]}(x{i - 1}, cb)")
    return "\n".join(lines + ["}"])


def call_chain_text(n: int) -> str:
    out = ["HloModule calls", "fn0 {\n  p = f32[64] parameter(0)\n  ROOT r = f32[64] add(p, p)\n}"]
    for i in range(1, n + 1):
        out.append(f"fn{i} {{\n  p = f32[64] parameter(0)\n"
                   f"  ROOT r = f32[64] call(p), to_apply=fn{i - 1}\n}}")
    out.append(f"ENTRY e {{\n  p = f32[64] parameter(0)\n"
               f"  ROOT r = f32[64] call(p), to_apply=fn{n}\n}}")
    return "\n".join(out)


def tuple_text(n: int) -> str:
    lines = ["HloModule tuples", "ENTRY e {", "  p = f32[64] parameter(0)"]
    prev, shape = "p", "f32[64]"
    for i in range(1, n + 1):
        shape = f"({shape})"
        lines.append(f"  t{i} = {shape} tuple({prev})")
        prev = f"t{i}"
    for i in range(n, 0, -1):
        shape = shape[1:-1]
        lines.append(f"  {'ROOT ' if i == 1 else ''}g{i} = {shape} get-tuple-element({prev}), "
                     f"index=0")
        prev = f"g{i}"
    return "\n".join(lines + ["}"])


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def run_time(fn, x) -> float:
    fn(x)
    times = []
    for _ in range(5):
        t = time.perf_counter()
        fn(x)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def xlapy_case(text: str, x, max_depth: int = 500) -> dict:
    import xlapy
    from xlapy.backends.cpu.backend import clear_cache

    module, parse = timed(lambda: xlapy.parse_hlo_module(text, max_recursion_depth=max_depth))
    _, interp = timed(lambda: xlapy.evaluate(module, x))
    clear_cache()
    program, compile_ = timed(lambda: xlapy.Client(backend="cpu").compile(module))
    return {"parse": parse, "interpreter": interp, "cpu compile": compile_,
            "cpu run": run_time(program, x)}


def jax_case(n: int, x) -> dict:
    import jax
    import jax.numpy as jnp

    c = np.float32(1.0001)

    def f(v):
        for i in range(1, n + 1):
            k = i % 4
            v = v + c if k == 1 else v * c if k == 2 else v - c if k == 3 else jnp.maximum(v, c)
        return v

    lowered, lower = timed(lambda: jax.jit(f).lower(x))
    compiled, compile_ = timed(lowered.compile)
    return {"jax trace+lower": lower, "xla compile": compile_,
            "xla run": run_time(lambda v: compiled(v).block_until_ready(), x)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="400,2000,20000")
    parser.add_argument("--no-jax", action="store_true")
    args = parser.parse_args()
    os.environ["XLAPY_DISK_CACHE"] = "0"
    x = np.linspace(-1, 1, 64, dtype=np.float32)
    for n in (int(s) for s in args.sizes.split(",")):
        row = xlapy_case(chain_text(n), x)
        if not args.no_jax:
            try:
                row.update(jax_case(n, x))
            except ImportError:
                row["jax"] = float("nan")
        print(f"chain {n:>6}: " + ", ".join(f"{k} {v:.3f}s" for k, v in row.items()), flush=True)
    for n in (1000, 2000):
        row = xlapy_case(call_chain_text(n), x)
        print(f"call chain {n}: " + ", ".join(f"{k} {v:.3f}s" for k, v in row.items()),
              flush=True)
    row = xlapy_case(tuple_text(1000), x, max_depth=1002)
    print("tuple nesting 1000: " + ", ".join(f"{k} {v:.3f}s" for k, v in row.items()))


if __name__ == "__main__":
    main()

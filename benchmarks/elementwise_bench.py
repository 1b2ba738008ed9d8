"""A 10-op f32 elementwise chain on 16M elements: xlapy's compiled CPU backend, eager NumPy
and XLA:CPU (jax.jit, when jax is importable). Prints each one's median and the ratios.

    python benchmarks/elementwise_bench.py [--n 16777216] [--repeats 7]

The chain: y = max(tanh(x * 0.5 + v) - w, w); z = select(y > x, sqrt(|y|), y * w) / (w*w + 1)
(multiply, add, tanh, subtract, maximum, compare, abs, sqrt, multiply, select, multiply, add,
divide: all fused into one loop by the cpu backend).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

HLO = """HloModule chain
ENTRY e {{
  x = f32[{n}] parameter(0)
  v = f32[{n}] parameter(1)
  w = f32[{n}] parameter(2)
  half = f32[] constant(0.5)
  one = f32[] constant(1)
  h = f32[{n}] broadcast(half), dimensions={{}}
  o = f32[{n}] broadcast(one), dimensions={{}}
  m = f32[{n}] multiply(x, h)
  a = f32[{n}] add(m, v)
  t = f32[{n}] tanh(a)
  s = f32[{n}] subtract(t, w)
  y = f32[{n}] maximum(s, w)
  c = pred[{n}] compare(y, x), direction=GT
  ab = f32[{n}] abs(y)
  q = f32[{n}] sqrt(ab)
  yw = f32[{n}] multiply(y, w)
  sel = f32[{n}] select(c, q, yw)
  ww = f32[{n}] multiply(w, w)
  den = f32[{n}] add(ww, o)
  ROOT z = f32[{n}] divide(sel, den)
}}
"""


def numpy_chain(x, v, w):
    y = np.maximum(np.tanh(x * np.float32(0.5) + v) - w, w)
    return np.where(y > x, np.sqrt(np.abs(y)), y * w) / (w * w + np.float32(1))


def _median(fn, repeats):
    fn()  # warm up (and compile)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=1 << 24)
    p.add_argument("--repeats", type=int, default=7)
    args = p.parse_args(argv)
    n = args.n
    rng = np.random.default_rng(0)
    x, v, w = (rng.standard_normal(n).astype(np.float32) for _ in range(3))

    from xlapy.runtime import Client

    start = time.perf_counter()
    exe = Client(backend="cpu").compile(HLO.format(n=n))
    compile_s = time.perf_counter() - start
    ours = exe(x, v, w)
    want = numpy_chain(x, v, w)
    err = float(np.max(np.abs(ours - want)) / np.max(np.abs(want)))  # relative to the largest
    results = {"xlapy-cpu": _median(lambda: exe(x, v, w), args.repeats)}
    results["numpy"] = _median(lambda: numpy_chain(x, v, w), args.repeats)
    try:
        import jax
        import jax.numpy as jnp

        jitted = jax.jit(lambda x, v, w: (lambda y: jnp.where(
            y > x, jnp.sqrt(jnp.abs(y)), y * w) / (w * w + 1))(
            jnp.maximum(jnp.tanh(x * 0.5 + v) - w, w)))
        jx, jv, jw = (jax.device_put(a) for a in (x, v, w))
        results["xla-cpu (jax.jit)"] = _median(
            lambda: jitted(jx, jv, jw).block_until_ready(), args.repeats)
    except ImportError:
        print("jax not importable: XLA:CPU skipped")

    print(f"{n} f32 elements, 13-op chain, median of {args.repeats} "
          f"(xlapy-cpu compile {compile_s * 1e3:.1f} ms, max error vs NumPy relative to max |z| {err:.2e})")
    base = results["xlapy-cpu"]
    for name, t in results.items():
        print(f"  {name:18s} {t * 1e3:9.2f} ms   {t / base:6.2f}x xlapy-cpu's time")


if __name__ == "__main__":
    main()

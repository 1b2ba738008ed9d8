"""Reductions: xlapy's compiled reduction kernels against XLA:CPU (jax.jit) on the same
inputs, in one process, measurements interleaved (a round of xlapy, a round of XLA, ...).

    python benchmarks/reduce_bench.py [--repeats 15] [--quick]

Cases (fixed sizes; --quick divides them by 16):
- sum of f32[64M] (a chunked full reduction: partials on both cores, then combined);
- softmax over f32[4096,4096]: its two reductions as xlapy's fusion pass leaves them (row
  max of x, row sum of exp(x - max)); XLA: jnp.max(x, 1) and jnp.sum(e, 1);
- layernorm over f32[8192,1024]: row sum of x and row sum of squared deviations (the
  multiply fused into the reduce); XLA: jnp.sum(x, 1) and jnp.sum(d * d, 1);
- a column sum of f32[8192,1024] (reduce dimension 0);
- a 3x3 stride-2 max pool (reduce-window, SAME padding) of f32[32,64,64,64] NHWC;
- the whole softmax and layernorm modules through ``Client(backend="cpu")`` against
  jax.jit of the same functions, for context (the other kernels belong to the loop
  emitter).

Each xlapy kernel runs the way the backend runs it (``buffers.run_parallel``: two halves
of the work items on two threads, then the ``then`` kernel). GB/s = bytes read / time.
Calls alternate (xlapy, XLA, xlapy, ...); the ratio is the median of the per-pair ratios
(xlapy / XLA, below 1 is faster), the figure least sensitive to other processes.
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import time

import numpy as np
from llvmlite import ir

SUM = """HloModule s
add {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}}
ENTRY e {{
  p = f32[{n}] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[] reduce(p, z), dimensions={{0}}, to_apply=add
}}
"""

ROWS = """HloModule r
{op} {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] {op}(a, b)
}}
ENTRY e {{
  p = f32[{r},{c}] parameter(0)
  z = f32[] constant({init})
  ROOT r = f32[{out}] reduce(p, z), dimensions={{{dim}}}, to_apply={op}
}}
"""

SQUARES = """HloModule q
add {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}}
ENTRY e {{
  d = f32[{r},{c}] parameter(0)
  sq = f32[{r},{c}] multiply(d, d)
  z = f32[] constant(0)
  ROOT r = f32[{r}] reduce(sq, z), dimensions={{1}}, to_apply=add
}}
"""


def _kernel(text):
    """Compile the reduce of ``text`` (fused with its producers: the fusion pass runs);
    returns run(arrays) -> outputs."""
    from xlapy.backends.cpu import reduction
    from xlapy.backends.cpu.buffers import run_parallel
    from xlapy.backends.cpu.jit import get_jit
    from xlapy.parser import parse_hlo_module
    from xlapy.passes import make_pipeline
    from xlapy.shape import dtypes

    module = parse_hlo_module(text)
    make_pipeline(("inline", "simplify", "cse", "dce", "fusion"), verify=False).run(module)
    root = module.entry.root
    if root.opcode == "fusion":
        comp = root.attrs["calls"]
        root, inputs = comp.root, comp.parameters
    else:
        inputs = [root.operands[0]]
    irmod = ir.Module(name="bench")
    spec = reduction.emit(irmod, "k", root, inputs)
    compiled = get_jit().compile(irmod)
    proto = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
    fns = []
    s = spec
    while s is not None:
        fns.append((s, proto(compiled.function_address(s.name))))
        s = s.then
    outs = [np.empty(tuple(o.dimensions), dtypes.to_dtype(o.element_type))
            for o in spec.outputs]
    scratch = [np.empty(n, dt) for dt, n in spec.scratch]

    def run(arrays):
        held = list(arrays) + outs + scratch
        bufs = (ctypes.c_void_p * len(held))(*[a.ctypes.data for a in held])
        for s, fn in fns:
            run_parallel(fn, bufs, s.domain, s.domain * s.cost, s.parallel)
        return outs

    run.compiled = compiled
    run.spec = spec
    return run


def _once(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _compare(name, ours, theirs, nbytes, repeats, check=None):
    """Alternate single calls of ``ours`` and ``theirs`` (both see the same machine load);
    print the medians and the median of the per-pair ratios."""
    ours(), theirs()  # warm up
    if check is not None:
        check()
    a, b = [], []
    for _ in range(repeats):
        a.append(_once(ours))
        b.append(_once(theirs))
    ta, tb = statistics.median(a), statistics.median(b)
    ratio = statistics.median(x / y for x, y in zip(a, b))
    print(f"{name:<34} xlapy {ta * 1e3:7.2f} ms {nbytes / ta / 1e9:5.1f} GB/s   "
          f"XLA {tb * 1e3:7.2f} ms {nbytes / tb / 1e9:5.1f} GB/s   ratio {ratio:5.2f}")
    return ratio


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=31)
    parser.add_argument("--quick", action="store_true", help="sizes divided by 16")
    args = parser.parse_args(argv)
    import jax
    import jax.numpy as jnp

    div = 16 if args.quick else 1
    rng = np.random.default_rng(0)
    ratios = []

    n = (64 << 20) // div
    x = rng.standard_normal(n, dtype=np.float32)
    xd = jax.device_put(x)
    run = _kernel(SUM.format(n=n))
    jsum = jax.jit(jnp.sum)

    def check_sum():
        got, want = float(run([x])[0]), float(jsum(xd))
        exact = float(x.astype(np.float64).sum())
        assert abs(got - exact) <= 1e-6 * float(np.abs(x).sum()), (got, want, exact)

    ratios.append(_compare(f"sum f32[{n}]", lambda: run([x]),
                           lambda: jsum(xd).block_until_ready(), x.nbytes, args.repeats,
                           check_sum))

    r, c = 4096 // (4 if args.quick else 1), 4096 // (4 if args.quick else 1)
    x = rng.standard_normal((r, c), dtype=np.float32)
    xd = jax.device_put(x)
    rmax = _kernel(ROWS.format(op="maximum", r=r, c=c, init="-inf", out=r, dim=1))
    jmax = jax.jit(lambda a: jnp.max(a, axis=1))
    ratios.append(_compare(f"softmax row max f32[{r},{c}]", lambda: rmax([x]),
                           lambda: jmax(xd).block_until_ready(), x.nbytes, args.repeats))
    e = np.exp(x - x.max(axis=1, keepdims=True))
    ed = jax.device_put(e)
    rsum = _kernel(ROWS.format(op="add", r=r, c=c, init="0", out=r, dim=1))
    jrsum = jax.jit(lambda a: jnp.sum(a, axis=1))
    ratios.append(_compare(f"softmax row sum f32[{r},{c}]", lambda: rsum([e]),
                           lambda: jrsum(ed).block_until_ready(), e.nbytes, args.repeats))

    r, c = 8192 // div, 1024
    x = rng.standard_normal((r, c), dtype=np.float32) + 1
    xd = jax.device_put(x)
    lsum = _kernel(ROWS.format(op="add", r=r, c=c, init="0", out=r, dim=1))
    ratios.append(_compare(f"layernorm row sum f32[{r},{c}]", lambda: lsum([x]),
                           lambda: jrsum(xd).block_until_ready(), x.nbytes, args.repeats))
    d = x - x.mean(axis=1, keepdims=True)
    dd = jax.device_put(d)
    lsq = _kernel(SQUARES.format(r=r, c=c))
    jsq = jax.jit(lambda a: jnp.sum(a * a, axis=1))
    ratios.append(_compare(f"layernorm sum (d*d) f32[{r},{c}]", lambda: lsq([d]),
                           lambda: jsq(dd).block_until_ready(), d.nbytes, args.repeats))
    csum = _kernel(ROWS.format(op="add", r=r, c=c, init="0", out=c, dim=0))
    jcsum = jax.jit(lambda a: jnp.sum(a, axis=0))
    ratios.append(_compare(f"column sum f32[{r},{c}]", lambda: csum([x]),
                           lambda: jcsum(xd).block_until_ready(), x.nbytes, args.repeats))

    x = rng.standard_normal((32 // div, 64, 64, 64), dtype=np.float32)
    xd = jax.device_put(x)
    jpool = jax.jit(lambda a: jax.lax.reduce_window(a, -jnp.inf, jax.lax.max, (1, 3, 3, 1),
                                                    (1, 2, 2, 1), "SAME"))
    pool = _kernel(jpool.lower(x).as_text(dialect="hlo"))
    ratios.append(_compare(f"maxpool 3x3/2 f32{list(x.shape)}", lambda: pool([x]),
                           lambda: jpool(xd).block_until_ready(), x.nbytes, args.repeats))

    print(f"geometric mean of the kernel ratios: "
          f"{float(np.exp(np.mean(np.log(ratios)))):.2f}")

    # the whole programs, for context
    from xlapy.parser import parse_hlo_module
    from xlapy.runtime import Client

    def ln(a):
        m = jnp.mean(a, axis=-1, keepdims=True)
        v = jnp.mean((a - m) ** 2, axis=-1, keepdims=True)
        return (a - m) * jax.lax.rsqrt(v + 1e-5)

    for name, f, shape in (("softmax", jax.nn.softmax, (4096 // div, 4096)),
                           ("layernorm", ln, (8192 // div, 1024))):
        a = rng.standard_normal(shape, dtype=np.float32)
        ad = jax.device_put(a)
        jf = jax.jit(f)
        text = jf.lower(a).as_text(dialect="hlo")
        program = Client(backend="cpu").compile(parse_hlo_module(text))
        _compare(f"{name} f32{list(shape)} (whole)", lambda p=program, a=a: p(a),
                 lambda f=jf, a=ad: f(a).block_until_ready(), a.nbytes,
                 max(3, args.repeats // 4))


if __name__ == "__main__":
    main()

"""How the CPU backend cuts GEMMs over its worker pool (library.gemm_split), measured: for
each shape, the strategies below run in turns on the same operands (wall time and process
CPU time, medians), next to XLA:CPU (jax.jit of the same matmul, when jax is installed).

    PYTHONPATH=. python benchmarks/gemm_split_sweep.py [--repeats 9] [--dtype f32]
        [--shapes "1,1024,1024,1024;64,256,256,256"] [--strategies policy,rows2,cols4,blas]

A shape is batch,m,k,n: C[b] = A[b] (m x k) B[b] (k x n), row-major. Strategies:

- ``policy``: what library.gemm_split chooses (the backend's path);
- ``rowsP`` / ``colsP``: every matrix cut into P panels of rows / columns, the items
  handed out over the pool (single-threaded BLAS per item);
- ``whole``: whole matrices handed out over the pool (batch-parallel);
- ``serial``: every GEMM on the calling thread, single-threaded BLAS;
- ``blas``: every GEMM on the calling thread with OpenBLAS's own threads (one per core).

The default shapes: square matrices 256..4096, batches 8..128 of 64..512, and the GEMMs of
the bench's MLP, transformer and CNN cases. Wall time shows the gain of using both cores;
CPU time (all threads) shows what a strategy costs: panels repack the operand the cut does
not divide, so CPU time grows as panels narrow. On a shared machine read the ratios within
one shape (the strategies take turns run by run), not single numbers.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from xlapy.backends.cpu import blas, library, threads, workers

SHAPES = [
    (1, 256, 256, 256), (1, 512, 512, 512), (1, 1024, 1024, 1024), (1, 2048, 2048, 2048),
    (1, 4096, 4096, 4096),
    (8, 256, 256, 256), (64, 64, 64, 64), (64, 256, 256, 256), (128, 128, 128, 128),
    (16, 512, 512, 512), (8, 512, 512, 512), (32, 128, 64, 128), (32, 128, 128, 64),
    # mlp_train (batch 512, widths 1024)
    (1, 512, 1024, 1024), (1, 1024, 512, 1024), (1, 512, 1024, 10),
    # transformer_fwd (8x128x256, ffn 1024)
    (1, 1024, 256, 256), (1, 1024, 256, 1024), (1, 1024, 1024, 256),
    # cnn_train's dense layer and an im2col-sized GEMM
    (1, 32, 8192, 10), (1, 32768, 288, 32),
]

DEFAULT_STRATEGIES = "policy,rows2,rows4,rows8,cols2,cols4,cols8,whole,serial,blas"


def _descriptor(a, b, c, split):
    bsz, m, k = a.shape
    n = b.shape[2]
    isz = c.itemsize
    fa, fb = library._form(a), library._form(b)
    real = library.gemm_split
    library.gemm_split = lambda *args: split
    try:
        d = library.gemm_descriptor(c.dtype, bsz, m, n, k, fa, fb, n, a.strides[0] // isz,
                                    b.strides[0] // isz, c.strides[0] // isz)
    finally:
        library.gemm_split = real
    d[workers.G_A], d[workers.G_B], d[workers.G_C] = b.ctypes.data, a.ctypes.data, c.ctypes.data
    return d


def _strategy(name, a, b, c):
    bsz, m, _ = a.shape
    n = b.shape[2]
    pool = threads.pool()
    if name == "policy":
        return lambda: library.batched_gemm(a, b, c)
    if name == "blas":
        d = _descriptor(a, b, c, (0, 1, 0))

        def run():
            previous = blas.set_local_threads(threads.WORKERS)
            try:
                pool.gemm(d.ctypes.data)
            finally:
                blas.set_local_threads(previous if previous is not None else 0)
        return run
    if name == "serial":
        split = (0, 1, 0)
    elif name == "whole":
        split = (0, 1, bsz)
    else:
        axis = 0 if name.startswith("rows") else 1
        panels = min(int(name[4:]), m if axis == 0 else n)
        split = (axis, panels, bsz * panels)
    d = _descriptor(a, b, c, split)

    def run():
        with threads.blas_calls():
            pool.gemm(d.ctypes.data)
    return run


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--dtype", default="f32", choices=["f32", "f64"])
    parser.add_argument("--shapes", default=None)
    parser.add_argument("--strategies", default=DEFAULT_STRATEGIES)
    parser.add_argument("--no-jax", action="store_true")
    args = parser.parse_args(argv)
    dtype = np.float32 if args.dtype == "f32" else np.float64
    shapes = SHAPES if not args.shapes else [tuple(int(v) for v in s.split(","))
                                             for s in args.shapes.split(";")]
    names = args.strategies.split(",")
    jax = None
    if not args.no_jax:
        try:
            import jax
            import jax.numpy as jnp
            if dtype == np.float64:
                jax.config.update("jax_enable_x64", True)
        except ImportError:
            jax = None
    print(f"threads {threads.WORKERS}, BLAS {blas.library_info().get('core')}; wall ms "
          f"(CPU ms) per strategy, median of {args.repeats}")
    for bsz, m, k, n in shapes:
        rng = np.random.default_rng(0)
        a = rng.standard_normal((bsz, m, k)).astype(dtype)
        b = rng.standard_normal((bsz, k, n)).astype(dtype)
        want = np.matmul(a, b)
        sides, outs = {}, {}
        for name in names:
            outs[name] = np.empty((bsz, m, n), dtype)
            sides[name] = _strategy(name, a, b, outs[name])
        if jax is not None:
            fn = jax.jit(jnp.matmul)
            ja, jb = jnp.asarray(a), jnp.asarray(b)
            sides["XLA"] = lambda fn=fn, ja=ja, jb=jb: fn(ja, jb).block_until_ready()
        for side in sides.values():
            side()
        for name in names:
            np.testing.assert_allclose(outs[name], want, rtol=1e-3,
                                       atol=1e-4 * np.sqrt(k) * np.abs(want).max())
        wall = {name: [] for name in sides}
        cpu = {name: [] for name in sides}
        for _ in range(args.repeats):
            for name, side in sides.items():
                c0, t0 = time.process_time(), time.perf_counter()
                side()
                wall[name].append(time.perf_counter() - t0)
                cpu[name].append(time.process_time() - c0)
        flops = 2.0 * bsz * m * n * k
        cells = []
        for name in sides:
            w, c = statistics.median(wall[name]), statistics.median(cpu[name])
            cells.append(f"{name} {w * 1e3:.2f} ({c * 1e3:.2f})")
        split = library.gemm_split(bsz, m, n, k)
        best = min((statistics.median(wall[x]), x) for x in names)
        xla = statistics.median(wall["XLA"]) if "XLA" in wall else None
        pol = statistics.median(wall["policy"]) if "policy" in wall else None
        print(f"{bsz}x{m},{k},{n} [{flops / 1e9:.2f} GFLOP] policy={split}: " + ", ".join(cells))
        print(f"    best {best[1]} {flops / best[0] / 1e9:.0f} GFLOP/s"
              + (f"; policy/XLA {pol / xla:.2f}x" if xla and pol else "")
              + (f"; best/XLA {best[0] / xla:.2f}x" if xla else ""), flush=True)


if __name__ == "__main__":
    main()

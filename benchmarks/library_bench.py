"""The CPU backend's library calls (xlapy.backends.cpu.library.run) against XLA:CPU
(jax.jit, when jax is importable) and eager NumPy on the same inputs: matmul 1024^3 and
2048^3 f32, conv2d NHWC 32x64x64x64 with a 3x3x64x64 HWIO kernel (SAME), sort of 4M f32
(jax's comparator). Prints medians and ratios; also GEMM through SciPy's BLAS pointer vs
numpy.matmul (the two ways xlapy can reach BLAS).

    python benchmarks/library_bench.py [--repeats 7] [--cases matmul1024,matmul2048,conv,sort]

The machine is shared: run it on a quiet machine, and read the ratios, not single numbers.
The CPU ratio (process CPU time, all threads) is steadier than wall time on a loaded machine;
it does not show the gain of using both cores.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from xlapy.backends.cpu import blas, library
from xlapy.parser import parse_hlo_module

SORT_COMPARATOR = """
cmp {
  a = f32[] parameter(0)
  ne.a = pred[] compare(a, a), direction=NE
  cnan = f32[] constant(nan)
  czero = f32[] constant(0)
  eq.a = pred[] compare(a, czero), direction=EQ
  s.a = f32[] select(eq.a, czero, a)
  c.a = f32[] select(ne.a, cnan, s.a)
  b = f32[] parameter(1)
  ne.b = pred[] compare(b, b), direction=NE
  eq.b = pred[] compare(b, czero), direction=EQ
  s.b = f32[] select(eq.b, czero, b)
  c.b = f32[] select(ne.b, cnan, s.b)
  ROOT lt = pred[] compare(c.a, c.b), direction=LT, type=TOTALORDER
}
"""


def _instr(params: list[str], root: str, extra: str = ""):
    lines = "\n".join(f"  p{i} = {s} parameter({i})" for i, s in enumerate(params))
    module = parse_hlo_module(f"HloModule m\n{extra}\nENTRY e {{\n{lines}\n  ROOT r = {root}\n}}")
    return module.entry.root


def _median(fn, repeats: int) -> float:
    return _interleaved([fn], repeats)[0]


CPU_TIMES: list[float] = []  # the process CPU time medians of the last _interleaved call


def _interleaved(fns, repeats: int, rounds: int = 3) -> list[float]:
    """Median time of each function over ``repeats`` calls, in ``rounds`` rounds in which
    each function runs a block of consecutive calls after a pause and a warm-up call (a load
    that comes and goes on a shared machine hits all of them alike; within a block, the
    thread pools of the other libraries - OpenBLAS spins a while after each call - are
    idle)."""
    times = [[] for _ in fns]
    cpu = [[] for _ in fns]
    per_round = max(1, -(-repeats // rounds))
    for _ in range(rounds):
        for fn, acc, acc_cpu in zip(fns, times, cpu):
            time.sleep(0.2)
            fn()  # warm up (jax compiles, BLAS threads start)
            for _ in range(per_round):
                start, start_cpu = time.perf_counter(), time.process_time()
                fn()
                acc.append(time.perf_counter() - start)
                acc_cpu.append(time.process_time() - start_cpu)
    CPU_TIMES[:] = [statistics.median(c) for c in cpu]
    return [statistics.median(t) for t in times]


def _jax():
    try:
        import jax
        import jax.numpy as jnp
        from jax import lax
    except ImportError:
        return None
    return jax, jnp, lax


def numpy_conv_same(x, w):
    """Eager NumPy reference: per-tap matmul accumulation on a zero-padded input."""
    kh, kw = w.shape[:2]
    n, h, wd, _ = x.shape
    xp = np.pad(x, ((0, 0), (kh // 2, kh // 2), (kw // 2, kw // 2), (0, 0)))
    out = np.zeros((n, h, wd, w.shape[3]), x.dtype)
    for i in range(kh):
        for j in range(kw):
            out += xp[:, i:i + h, j:j + wd] @ w[i, j]
    return out


def _cases(rng, jx):
    cases = {}
    for n in (1024, 2048):
        a = rng.standard_normal((n, n)).astype(np.float32)
        b = rng.standard_normal((n, n)).astype(np.float32)
        instr = _instr([f"f32[{n},{n}]", f"f32[{n},{n}]"],
                       "dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}")
        jfn = None if jx is None else jx[0].jit(jx[1].dot)
        cases[f"matmul{n}"] = (f"{n}^3 f32", instr, [a, b], jfn, lambda a, b: a @ b)
    x = rng.standard_normal((32, 64, 64, 64)).astype(np.float32)
    w = rng.standard_normal((3, 3, 64, 64)).astype(np.float32)
    instr = _instr(["f32[32,64,64,64]", "f32[3,3,64,64]"],
                   "convolution(p0, p1), window={size=3x3 pad=1_1x1_1}, "
                   "dim_labels=b01f_01io->b01f")
    jfn = None
    if jx is not None:
        lax = jx[2]
        jfn = jx[0].jit(lambda x, w: lax.conv_general_dilated(
            x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")))
    cases["conv"] = ("NHWC 32x64x64x64 * 3x3x64x64", instr, [x, w], jfn, numpy_conv_same)
    s = rng.standard_normal(1 << 22).astype(np.float32)
    instr = _instr(["f32[4194304]"], "sort(p0), dimensions={0}, is_stable=true, to_apply=cmp",
                   SORT_COMPARATOR)
    jfn = None if jx is None else jx[0].jit(jx[1].sort)
    cases["sort"] = ("4M f32", instr, [s], jfn, np.sort)
    return cases


def _gemm_pair(n: int, repeats: int) -> tuple[float, float]:
    rng = np.random.default_rng(1)
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    c = np.empty((n, n), np.float32)
    form = blas.matrix_form(n, n, n, 1)

    def scipy_gemm():
        blas.gemm_rowmajor(np.float32, n, n, n, a.ctypes.data, form, b.ctypes.data, form,
                           c.ctypes.data, n)

    return tuple(_interleaved([scipy_gemm, lambda: np.matmul(a, b, out=c)], repeats))


def gemm_paths(repeats: int) -> None:
    """SciPy's BLAS through its function pointer (what library.run uses) vs numpy.matmul
    (NumPy's own OpenBLAS), same inputs, into a reused output."""
    for n in (1024, 2048):
        t_s, t_n = _gemm_pair(n, repeats)
        print(f"  gemm {n}^3: scipy BLAS pointer {t_s * 1e3:8.1f} ms   numpy.matmul "
              f"{t_n * 1e3:8.1f} ms   ratio {t_s / t_n:5.2f}")


def bench_case(name: str, case, jx, repeats: int) -> None:
    size, instr, operands, jfn, npfn = case
    want = npfn(*operands)
    got = library.run(instr, operands)
    err = float(np.max(np.abs(got - want))) / max(1.0, float(np.max(np.abs(want))))
    if err > 1e-3:
        print(f"!!! {name}: xlapy differs from NumPy (relative error {err:.2e})")
    out = np.empty_like(got)
    fns = [lambda: library.run(instr, operands),
           lambda: library.run(instr, operands, out=out), lambda: npfn(*operands)]
    if jfn is not None:
        dev = [jx[1].asarray(o) for o in operands]
        fns.append(lambda: jfn(*dev).block_until_ready())
    t_x, t_o, t_n, *rest = _interleaved(fns, repeats)
    t_j = rest[0] if rest else float("nan")
    c_o, c_j = CPU_TIMES[1], (CPU_TIMES[3] if rest else float("nan"))
    print(f"{name:11} {size:30} {t_x * 1e3:7.1f}ms {t_o * 1e3:8.1f}ms {t_j * 1e3:7.1f}ms "
          f"{t_n * 1e3:7.1f}ms {t_o / t_j:9.2f} {t_o / t_n:11.2f} {c_o / c_j:9.2f}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--cases", default="matmul1024,matmul2048,conv,sort")
    parser.add_argument("--no-gemm-paths", action="store_true")
    args = parser.parse_args(argv)
    jx = _jax()
    cases = _cases(np.random.default_rng(0), jx)
    print(f"cores: {library.CORES}; medians of about {args.repeats} calls each, in 3 "
          f"rounds of consecutive calls")
    print(f"{'case':11} {'size':30} {'xlapy':>9} {'xlapy out=':>10} {'XLA:CPU':>9} "
          f"{'NumPy':>9} {'xlapy/XLA':>9} {'xlapy/NumPy':>11} {'CPU ratio':>9}")
    print("(ratios use xlapy out=; CPU ratio: process CPU time of xlapy out= / XLA:CPU)")
    for name in args.cases.split(","):
        bench_case(name, cases[name], jx, args.repeats)
    if not args.no_gemm_paths:
        print("GEMM paths:")
        gemm_paths(args.repeats)


if __name__ == "__main__":
    main()

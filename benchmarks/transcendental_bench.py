"""Transcendental loops: xlapy's compiled elementwise exp/log/tanh (and expm1, log1p,
logistic, power, a bf16 exp) against XLA:CPU (jax.jit) and NumPy on the same inputs, in one
process, measurements interleaved (a round of each side in turn).

    python benchmarks/transcendental_bench.py [--n 16777216] [--repeats 9] [--quick]

Each case is ``ROOT r = f32[n] op(x)`` through ``Client(backend="cpu")`` (the backend's
kernel, both cores when it splits the loop), ``jax.jit(jnp.op)`` and the NumPy ufunc
(one core; NumPy has no logistic or bf16 exp, those rows compute them from ufuncs). Inputs
are drawn once per case from a range where the function is not constant. Reported: median
and best time in ms, and the ratios xlapy/XLA and xlapy/NumPy of the medians.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

CASES = {  # name -> (HLO opcode, jnp function name, NumPy function, input range, type)
    "exp": ("exponential", "exp", np.exp, (-80.0, 80.0), "f32"),
    "log": ("log", "log", np.log, (1e-30, 1e30), "f32"),
    "tanh": ("tanh", "tanh", np.tanh, (-8.0, 8.0), "f32"),
    "expm1": ("exponential-minus-one", "expm1", np.expm1, (-10.0, 10.0), "f32"),
    "log1p": ("log-plus-one", "log1p", np.log1p, (-0.9, 10.0), "f32"),
    "logistic": ("logistic", "sigmoid", lambda x: 1 / (1 + np.exp(-x)), (-20.0, 20.0), "f32"),
    "power": ("power", "power", np.power, (0.0, 4.0), "f32"),
    "exp bf16": ("exponential", "exp", None, (-20.0, 20.0), "bf16"),
}


def _timed(fn, *args) -> float:
    t = time.perf_counter()
    out = fn(*args)
    if hasattr(out, "block_until_ready"):
        out.block_until_ready()
    return time.perf_counter() - t


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1 << 24)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--quick", action="store_true", help="n / 16, 5 repeats")
    ap.add_argument("cases", nargs="*", help=f"a subset of {', '.join(CASES)}")
    args = ap.parse_args(argv)
    n = args.n // 16 if args.quick else args.n
    repeats = 5 if args.quick else args.repeats

    import jax
    import jax.numpy as jnp
    import ml_dtypes

    from xlapy.parser import parse_hlo_module
    from xlapy.runtime import Client

    jax.config.update("jax_platforms", "cpu")
    client = Client(backend="cpu")
    rng = np.random.default_rng(0)
    print(f"n = {n}, {repeats} interleaved rounds; times in ms (median / best)")
    print(f"{'case':10s} {'xlapy':>15s} {'XLA':>15s} {'NumPy':>15s} {'x/XLA':>7s} {'x/NumPy':>8s}")
    for name in args.cases or CASES:
        opcode, jname, npfn, (lo, hi), t = CASES[name]
        binary = opcode == "power"
        dtype = ml_dtypes.bfloat16 if t == "bf16" else np.float32
        xs = [rng.uniform(lo, hi, n).astype(np.float32).astype(dtype)]
        if binary:
            xs.append(rng.uniform(-8, 8, n).astype(dtype))
        params = "\n".join(f"  p{k} = {t}[{n}] parameter({k})" for k in range(len(xs)))
        operands = ", ".join(f"p{k}" for k in range(len(xs)))
        text = (f"HloModule bench\nENTRY e {{\n{params}\n"
                f"  ROOT r = {t}[{n}] {opcode}({operands})\n}}\n")
        exe = client.compile(parse_hlo_module(text))
        jfn = jax.jit(getattr(jax.nn, jname) if jname == "sigmoid" else getattr(jnp, jname))
        jxs = [jax.device_put(x) for x in xs]
        if npfn is None:  # bf16: NumPy computes in f32 and rounds
            def npfn_(x, dtype=dtype):
                return np.exp(x.astype(np.float32)).astype(dtype)
        else:
            npfn_ = npfn
        for fn, a in ((exe, xs), (jfn, jxs), (npfn_, xs)):  # warm up
            _timed(fn, *a)
        times: dict[str, list[float]] = {"xlapy": [], "xla": [], "numpy": []}
        for _ in range(repeats):
            times["xlapy"].append(_timed(exe, *xs))
            times["xla"].append(_timed(jfn, *jxs))
            with np.errstate(all="ignore"):
                times["numpy"].append(_timed(npfn_, *xs))
        med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
        best = {k: min(v) * 1e3 for k, v in times.items()}
        cells = [f"{med[k]:7.1f}/{best[k]:6.1f}" for k in ("xlapy", "xla", "numpy")]
        print(f"{name:10s} {cells[0]:>15s} {cells[1]:>15s} {cells[2]:>15s} "
              f"{med['xlapy'] / med['xla']:7.2f} {med['xlapy'] / med['numpy']:8.2f}")


if __name__ == "__main__":
    main()

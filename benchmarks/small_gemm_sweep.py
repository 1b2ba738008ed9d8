"""Small dots: the generated GEMM kernel (backends/cpu/gemm_kernel.py) against BLAS calls
(library.batched_gemm) over a sweep of shapes, on the same module in one process, the two
programs (and XLA:CPU through jax, when installed) taking turns run by run.

    PYTHONPATH=. python benchmarks/small_gemm_sweep.py [--repeats 31] [--dtype f32]
        [--limit 32768] [--shapes "64,32,32,32;1,16,16,16"]

A shape is batch,m,k,n: ``dot(a[batch,m,k], b[batch,k,n])`` with one batch dimension
(batch 1: a plain 2-D dot). ``--limit`` is the m*n*k up to which the small kernel is used
(gemm_kernel.SMALL); both programs are compiled with it set (kernel) and with the kernel
off (BLAS). Prints per shape the path taken (small kernel, packed GEMM or BLAS), the median
time of each program, kernel/BLAS and kernel/XLA.

    PYTHONPATH=. python benchmarks/small_gemm_sweep.py --set large [--layout tn]
        [--packed rule|on|off] [--bits 256|512] [--cols 2]

Mid and large shapes (square 128..2048, skinny, batched): above the limit the kernel side
is the packed GEMM (gemm_packed.py) where its rule allows (``--packed on``: on any host),
BLAS otherwise; ``--layout`` stores a ([k, m]) and/or b ([n, k]) transposed.

    PYTHONPATH=. python benchmarks/small_gemm_sweep.py --set loops [--steps 200]

Dots inside loops: a recurrent step ``h = tanh(dot(h[B,H], w[H,H]))`` run ``--steps``
times by a while loop, per (B, H) of ``LOOPS``: the generated kernels by their rules
(dots split over the pool by their work, gemm_kernel.FMA_COST; few rows read b in place,
gemm_kernel.SKINNY), the same with every dot on one thread (FMA_COST 0), BLAS calls for
every dot, and XLA:CPU's ``lax.fori_loop``; microseconds per step.

    PYTHONPATH=. python benchmarks/small_gemm_sweep.py --cases lstm_scan,transformer_fwd

A/B on whole programs instead: the ``xlapy bench`` cases' modules (benchmarks/hlo, full
sizes) compiled with the generated kernels (small and packed, by their rules) and without,
run in turns on the suite's inputs. With
``--ab prepared`` the A/B is the BLAS path's prepared GEMM arguments (blas.PreparedGemm)
against marshalling every argument per call (blas.gemm_rowmajor), on one program.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

SHAPES = [
    (1, 4, 4, 4), (1, 8, 8, 8), (1, 16, 16, 16), (1, 32, 32, 32), (1, 8, 32, 128),
    (1, 32, 16, 64), (1, 64, 8, 64),
    (8, 8, 8, 8), (8, 16, 16, 16), (8, 32, 32, 32),
    (64, 4, 4, 4), (64, 8, 8, 8), (64, 16, 16, 16), (64, 32, 32, 32), (64, 16, 64, 16),
    (512, 4, 4, 4), (512, 8, 8, 8), (512, 16, 16, 16), (4096, 4, 4, 4),
    (16, 32, 32, 33), (64, 7, 13, 9),
    # around and above the small limit: lstm_scan's step (32x128 @ 128x512), attention
    # (128x64 @ 64x128 per head), square and skinny
    (1, 64, 64, 64), (1, 32, 128, 128), (1, 32, 128, 512), (1, 128, 64, 128),
    (8, 128, 64, 128), (32, 128, 64, 128), (1, 128, 128, 128), (1, 96, 96, 96),
    (1, 256, 64, 256), (1, 256, 256, 256), (1, 8, 256, 256), (1, 256, 256, 16),
]


#: mid and large shapes (the packed GEMM against BLAS): square, skinny, batched
LARGE = [
    (1, 128, 128, 128), (1, 256, 256, 256), (1, 384, 384, 384), (1, 512, 512, 512),
    (1, 768, 768, 768), (1, 1024, 1024, 1024), (1, 1536, 1536, 1536), (1, 2048, 2048, 2048),
    (1, 32, 128, 512), (1, 512, 1024, 1024), (1, 1024, 1024, 128), (1, 128, 4096, 128),
    (1, 4096, 64, 4096), (1, 16, 1024, 1024), (1, 1024, 1024, 16), (1, 1000, 999, 1001),
    (64, 256, 256, 256), (32, 128, 64, 128), (8, 512, 64, 512), (16, 128, 128, 128),
]

#: recurrent steps (batch rows B, width H) of --set loops
LOOPS = [(1, 256), (1, 1024), (2, 2048), (4, 1024), (8, 128), (8, 512), (16, 128), (16, 256),
         (16, 1024), (20, 512), (32, 128), (32, 256), (64, 128), (48, 1024), (128, 128)]


def _loop_text(bsz, h, steps, t="f32"):
    return f"""HloModule rnn
cond {{
  s = (s32[], {t}[{bsz},{h}], {t}[{h},{h}]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant({steps})
  ROOT lt = pred[] compare(i, n), direction=LT
}}
body {{
  s = (s32[], {t}[{bsz},{h}], {t}[{h},{h}]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = {t}[{bsz},{h}] get-tuple-element(s), index=1
  w = {t}[{h},{h}] get-tuple-element(s), index=2
  z = {t}[{bsz},{h}] dot(x, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  y = {t}[{bsz},{h}] tanh(z)
  one = s32[] constant(1)
  j = s32[] add(i, one)
  ROOT r = (s32[], {t}[{bsz},{h}], {t}[{h},{h}]) tuple(j, y, w)
}}
ENTRY e {{
  x = {t}[{bsz},{h}] parameter(0)
  w = {t}[{h},{h}] parameter(1)
  zero = s32[] constant(0)
  s = (s32[], {t}[{bsz},{h}], {t}[{h},{h}]) tuple(zero, x, w)
  l = (s32[], {t}[{bsz},{h}], {t}[{h},{h}]) while(s), condition=cond, body=body
  ROOT y = {t}[{bsz},{h}] get-tuple-element(l), index=1
}}
"""


def _loops(args):
    """--set loops (see the module docstring)."""
    from xlapy.backends.cpu import backend as be
    from xlapy.backends.cpu import gemm_kernel
    from xlapy.parser import parse_hlo_module
    from xlapy.runtime import Client

    jax = None
    if not args.no_jax:
        try:
            import jax
            import jax.numpy as jnp
            from jax import lax
        except ImportError:
            jax = None
    gemm_kernel.BITS = args.bits
    saved = {name: getattr(gemm_kernel, name)
             for name in ("FMA_COST", "SKINNY", "SMALL", "TINY", "PACKED")}
    variants = {"rule": {}, "one thread": {"FMA_COST": 0},
                "BLAS": {"SKINNY": 0, "SMALL": 0, "TINY": 0, "PACKED": False}}
    print(f"{'B':>4} {'H':>5} {'rule':>9} {'one thread':>11} {'BLAS':>9} {'XLA':>9}  "
          f"(us per step, medians of {args.repeats}, in turns)")
    for bsz, h in LOOPS:
        module = parse_hlo_module(_loop_text(bsz, h, args.steps))
        rng = np.random.default_rng(0)
        x = rng.standard_normal((bsz, h)).astype(np.float32)
        w = (rng.standard_normal((h, h)) / np.sqrt(h)).astype(np.float32)
        sides = {}
        for name, changes in variants.items():
            for key, value in {**saved, **changes}.items():
                setattr(gemm_kernel, key, value)
            be.clear_cache()
            program = Client(backend="cpu").compile(module)
            sides[name] = lambda p=program: p(x, w)
        for key, value in saved.items():
            setattr(gemm_kernel, key, value)
        if jax is not None:
            steps = args.steps
            fn = jax.jit(lambda x, w: lax.fori_loop(0, steps, lambda i, y: jnp.tanh(y @ w), x))
            jx, jw = jnp.asarray(x), jnp.asarray(w)
            sides["XLA"] = lambda: fn(jx, jw).block_until_ready()
        want = np.asarray(sides["BLAS"]())
        np.testing.assert_allclose(np.asarray(sides["rule"]()), want, rtol=1e-3, atol=1e-3)
        times = {name: [] for name in sides}
        for _ in range(args.repeats):
            for name, side in sides.items():
                t0 = time.perf_counter()
                side()
                times[name].append(time.perf_counter() - t0)
        per = {name: statistics.median(t) / args.steps * 1e6 for name, t in times.items()}
        print(f"{bsz:>4} {h:>5} {per['rule']:>9.2f} {per['one thread']:>11.2f} "
              f"{per['BLAS']:>9.2f} {per.get('XLA', float('nan')):>9.2f}", flush=True)


def _module(bsz, m, k, n, t, layout="nn"):
    from xlapy.parser import parse_hlo_module

    if layout != "nn":  # a as [k, m] (t.), b as [n, k] (.t)
        a_dims, a_c = ((k, m), 0) if layout[0] == "t" else ((m, k), 1)
        b_dims, b_c = ((n, k), 1) if layout[1] == "t" else ((k, n), 0)
        bd = "" if bsz == 1 else f"{bsz},"
        dn = "" if bsz == 1 else "lhs_batch_dims={0}, rhs_batch_dims={0}, "
        off = 0 if bsz == 1 else 1
        text = (f"HloModule m\nENTRY e {{\n  a = {t}[{bd}{a_dims[0]},{a_dims[1]}] parameter(0)\n"
                f"  b = {t}[{bd}{b_dims[0]},{b_dims[1]}] parameter(1)\n  ROOT d = {t}[{bd}{m},{n}] "
                f"dot(a, b), {dn}lhs_contracting_dims={{{a_c + off}}}, "
                f"rhs_contracting_dims={{{b_c + off}}}\n}}\n")
        return parse_hlo_module(text)
    if bsz == 1:
        text = (f"HloModule m\nENTRY e {{\n  a = {t}[{m},{k}] parameter(0)\n"
                f"  b = {t}[{k},{n}] parameter(1)\n  ROOT d = {t}[{m},{n}] dot(a, b), "
                f"lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}\n}}\n")
    else:
        text = (f"HloModule m\nENTRY e {{\n  a = {t}[{bsz},{m},{k}] parameter(0)\n"
                f"  b = {t}[{bsz},{k},{n}] parameter(1)\n  ROOT d = {t}[{bsz},{m},{n}] "
                f"dot(a, b), lhs_batch_dims={{0}}, rhs_batch_dims={{0}}, "
                f"lhs_contracting_dims={{2}}, rhs_contracting_dims={{1}}\n}}\n")
    return parse_hlo_module(text)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=31)
    parser.add_argument("--dtype", default="f32", choices=["f32", "f64"])
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--shapes", default=None)
    parser.add_argument("--set", default="small", choices=["small", "large", "loops"],
                        help="the shapes swept when --shapes is not given")
    parser.add_argument("--layout", default="nn", choices=["nn", "tn", "nt", "tt"],
                        help="t: that operand is stored transposed (a as [k, m], b as [n, k])")
    parser.add_argument("--no-jax", action="store_true")
    parser.add_argument("--packed", default="rule", choices=["rule", "on", "off"],
                        help="dots above the limit: the packed GEMM where its rule says "
                             "(rule), on any host (on), never (off: such shapes are skipped)")
    parser.add_argument("--bits", type=int, default=None, choices=[256, 512],
                        help="the kernel's vector width (default: the host's)")
    parser.add_argument("--cols", type=int, default=None,
                        help="vectors of columns per tile (default: gemm_kernel.COLS)")
    parser.add_argument("--cases", default=None,
                        help="comma-separated bench cases to compare whole (see xlapy bench)")
    parser.add_argument("--tier", default="full", choices=["full", "quick", "tiny"])
    parser.add_argument("--ab", default="kernel", choices=["kernel", "prepared"],
                        help="with --cases: what the two sides differ in")
    parser.add_argument("--steps", type=int, default=200, help="--set loops: loop steps")
    args = parser.parse_args(argv)
    if args.cases:
        return _cases(args)
    if args.set == "loops" and not args.shapes:
        return _loops(args)

    from xlapy.backends.cpu import backend as be
    from xlapy.backends.cpu import gemm_kernel
    from xlapy.runtime import Client

    gemm_kernel.BITS = args.bits
    if args.cols:
        gemm_kernel.COLS = dict.fromkeys(gemm_kernel.COLS, args.cols)
    limit = gemm_kernel.SMALL if args.limit is None else args.limit
    blas_bits, packed = gemm_kernel.blas_vector_bits, gemm_kernel.PACKED
    dtype = np.float32 if args.dtype == "f32" else np.float64
    shapes = (SHAPES if args.set == "small" else LARGE) if not args.shapes else [
        tuple(int(v) for v in s.split(",")) for s in args.shapes.split(";")]
    jax = None
    if not args.no_jax:
        try:
            import jax
            import jax.numpy as jnp
            if dtype == np.float64:
                jax.config.update("jax_enable_x64", True)
        except ImportError:
            jax = None

    print(f"{'batch x m,k,n':>22} {'path':>6} {'kernel':>10} {'BLAS':>10} {'XLA':>10} "
          f"{'kern/BLAS':>9} {'kern/XLA':>9}")
    ratios = []
    for bsz, m, k, n in shapes:
        if m * n * k > limit and args.packed == "off":
            continue
        module = _module(bsz, m, k, n, args.dtype, args.layout)
        rng = np.random.default_rng(0)
        shape_a = (k, m) if args.layout[0] == "t" else (m, k)
        shape_b = (n, k) if args.layout[1] == "t" else (k, n)
        if bsz != 1:
            shape_a, shape_b = (bsz, *shape_a), (bsz, *shape_b)
        a = rng.standard_normal(shape_a).astype(dtype)
        b = rng.standard_normal(shape_b).astype(dtype)
        programs = {}
        tiny, skinny = gemm_kernel.TINY, gemm_kernel.SKINNY
        kind = None
        for name, small in (("kernel", limit), ("BLAS", 0)):
            gemm_kernel.SMALL, gemm_kernel.TINY = small, (tiny if small else 0)
            gemm_kernel.SKINNY = skinny if small else 0
            gemm_kernel.PACKED = bool(small) and args.packed != "off"
            if small and args.packed == "on":
                gemm_kernel.blas_vector_bits = lambda: 0
            be.clear_cache()
            programs[name] = Client(backend="cpu").compile(module)
            kinds = [type(s).__name__ for s in be.compile_module(module).entry.steps]
            if small:
                got = gemm_kernel.form(module.entry.root)
                kind = getattr(got, "kind", "BLAS")
            assert kinds == (["LibraryStep"] if kind == "BLAS" or not small
                             else ["KernelStep"]), kinds
            gemm_kernel.blas_vector_bits = blas_bits
        gemm_kernel.SMALL, gemm_kernel.TINY, gemm_kernel.PACKED = limit, tiny, packed
        gemm_kernel.SKINNY = skinny
        sides = {name: (lambda p=p, a=a, b=b: p(a, b)) for name, p in programs.items()}
        if jax is not None:
            ta, tb = args.layout[0] == "t", args.layout[1] == "t"
            fn = jax.jit(lambda x, y: jnp.matmul(jnp.swapaxes(x, -1, -2) if ta else x,
                                                 jnp.swapaxes(y, -1, -2) if tb else y))
            ja, jb = jnp.asarray(a), jnp.asarray(b)
            sides["XLA"] = lambda fn=fn, ja=ja, jb=jb: fn(ja, jb).block_until_ready()
        got = np.asarray(sides["kernel"]())
        want = np.asarray(sides["BLAS"]())
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.sqrt(k))
        times = {name: [] for name in sides}
        for side in sides.values():
            side()
        for _ in range(args.repeats):
            for name, side in sides.items():
                t0 = time.perf_counter()
                side()
                times[name].append(time.perf_counter() - t0)
        med = {name: statistics.median(t) for name, t in times.items()}
        ratio = med["kernel"] / med["BLAS"]
        ratios.append(ratio)
        xla = med.get("XLA")
        print(f"{bsz:>6} x {m:>4},{k:>4},{n:>4} {kind:>6} {med['kernel'] * 1e6:>8.1f}us "
              f"{med['BLAS'] * 1e6:>8.1f}us "
              f"{(xla or float('nan')) * 1e6:>8.1f}us {ratio:>8.2f}x "
              f"{med['kernel'] / xla if xla else float('nan'):>8.2f}x")
    geo = float(np.exp(np.mean(np.log(ratios))))
    print(f"geometric mean kernel/BLAS: {geo:.2f}x over {len(ratios)} shapes")


def _set(gemm_kernel, on, small, tiny, skinny):
    gemm_kernel.SMALL, gemm_kernel.TINY = (small, tiny) if on else (0, 0)
    gemm_kernel.SKINNY = skinny if on else 0
    gemm_kernel.PACKED = on


class _PerCall:
    """The BLAS path before blas.PreparedGemm: every argument marshalled per call."""

    def __init__(self, dtype, m, n, k, a_form, b_form, ldc):
        self.args = (dtype, m, n, k, a_form, b_form, ldc)

    def __call__(self, a, b, c):
        from xlapy.backends.cpu import blas

        dtype, m, n, k, a_form, b_form, ldc = self.args
        blas.gemm_rowmajor(dtype, m, n, k, a, a_form, b, b_form, c, ldc)


def _prepared_ab(args, suite):
    from xlapy.backends.cpu import blas
    from xlapy.parser import parse_hlo_module
    from xlapy.runtime import Client

    prepared = blas.PreparedGemm
    print(f"{'case':>22} {'prepared':>10} {'per call':>10} {'ratio':>9}  (medians of "
          f"{args.repeats}, in turns)")
    for name in args.cases.split(","):
        case = suite.CASES[name]
        program = Client(backend="cpu").compile(
            parse_hlo_module(case.hlo_path(args.tier).read_text()))
        inputs = suite.make_inputs(case, args.tier)
        program(*inputs)
        times = {"prepared": [], "per call": []}
        try:
            for _ in range(args.repeats):
                for side, cls in (("prepared", prepared), ("per call", _PerCall)):
                    blas.PreparedGemm = cls
                    t0 = time.perf_counter()
                    program(*inputs)
                    times[side].append(time.perf_counter() - t0)
        finally:
            blas.PreparedGemm = prepared
        med = {side: statistics.median(t) for side, t in times.items()}
        print(f"{name:>22} {med['prepared'] * 1e3:>8.2f}ms {med['per call'] * 1e3:>8.2f}ms "
              f"{med['prepared'] / med['per call']:>8.3f}x")


def _cases(args):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    import suite

    if args.ab == "prepared":
        return _prepared_ab(args, suite)

    from xlapy.backends.cpu import backend as be
    from xlapy.backends.cpu import gemm_kernel
    from xlapy.parser import parse_hlo_module
    from xlapy.runtime import Client

    small, tiny, skinny = gemm_kernel.SMALL, gemm_kernel.TINY, gemm_kernel.SKINNY
    print(f"{'case':>22} {'kernel':>10} {'BLAS':>10} {'kern/BLAS':>9}  (medians of "
          f"{args.repeats}, in turns)")
    for name in args.cases.split(","):
        case = suite.CASES[name]
        module = parse_hlo_module(case.hlo_path(args.tier).read_text())
        inputs = suite.make_inputs(case, args.tier)
        programs = {}
        for side, on in (("kernel", True), ("BLAS", False)):
            _set(gemm_kernel, on, small, tiny, skinny)
            be.clear_cache()
            programs[side] = Client(backend="cpu").compile(module)
        _set(gemm_kernel, True, small, tiny, skinny)
        times = {side: [] for side in programs}
        for p in programs.values():
            p(*inputs)
        for _ in range(args.repeats):
            for side, p in programs.items():
                t0 = time.perf_counter()
                p(*inputs)
                times[side].append(time.perf_counter() - t0)
        med = {side: statistics.median(t) for side, t in times.items()}
        print(f"{name:>22} {med['kernel'] * 1e3:>8.2f}ms {med['BLAS'] * 1e3:>8.2f}ms "
              f"{med['kernel'] / med['BLAS']:>8.2f}x")


if __name__ == "__main__":
    main()

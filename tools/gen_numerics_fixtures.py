"""Regenerate tests/fixtures/numerics/: XLA:CPU's default numerics, pinned.

Two behaviours of XLA:CPU that the HLO text does not show (see docs/numerics.md):

- excess precision (``xla_allow_excess_precision``, on by default): bf16 programs, run by
  real XLA:CPU twice (only exactly rounded operations - add, multiply, divide, sqrt,
  conversions - so that the comparison sees the numerics options and not the accuracy of
  a transcendental kernel; softmax's exp is rounded to bf16 before it is seen), with the default flags and with
  ``XLA_FLAGS=--xla_allow_excess_precision=false`` (a separate process each: XLA reads
  XLA_FLAGS once);
- denormals flushed (FTZ/DAZ): f32, f64, bf16 and f16 programs over denormal inputs;
- multiply-adds contracted (FMA): f32 and f64 programs of multiplies feeding adds and
  subtracts, and c64 products (whose parts XLA:CPU fuses too);
- f16 NaNs: signalling NaNs through f32 -> f16 conversion (quieted), negate and abs (not);
- f32 sin, cos, tan, cbrt, atan2 and pow: the C library's f32 functions (sinf, ...).

For each program ``<name>``: ``<name>.hlo`` (jax's HLO before any XLA pass, what xlapy
runs) and ``<name>.npz`` (``arg0..``, then ``out0..`` from XLA:CPU's default flags and, for
the excess-precision programs, ``strict0..`` with excess precision off), written with
xlapy.npz (bf16 as its bits). Run from the repository root:

    python tools/gen_numerics_fixtures.py          # needs jax/jaxlib 0.10.2

jax is a test-only dependency; the tests read these files.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "numerics")


def _programs():
    import jax
    import jax.numpy as jnp
    import ml_dtypes
    import numpy as np

    jax.config.update("jax_enable_x64", True)
    bf16 = ml_dtypes.bfloat16
    rng = np.random.default_rng(17)
    x = rng.standard_normal((16, 128)).astype(bf16)
    w = rng.standard_normal((128, 16)).astype(bf16)
    rows = rng.standard_normal((64, 256)).astype(bf16)

    def layernorm_gelu(x):
        m = jnp.mean(x, axis=-1, keepdims=True)
        v = jnp.mean((x - m) ** 2, axis=-1, keepdims=True)
        return jax.nn.gelu((x - m) * jax.lax.rsqrt(v + 1e-5))
    progs = {  # name -> (function, args, excess-precision program?)
        "bf16_softmax": (lambda x: jax.nn.softmax(x, axis=-1), (x,), True),
        "bf16_chain_to_f32": (lambda x: (x * x + x).astype(jnp.float32) * 3, (x,), True),
        "bf16_div_to_f32": (lambda x: (x / (x * x + 3)).astype(jnp.float32) + 1, (x,), True),
        "bf16_dot_to_f32": (lambda x, w: (x @ w).astype(jnp.float32), (x, w), True),
        "bf16_explicit_roundtrip": (
            lambda x: jnp.sin(x.astype(jnp.float32)).astype(bf16).astype(jnp.float32), (x,), True),
        # XLA:CPU's reduction library skips the bf16 rounding of the squares before the
        # variance's f32 sum, with excess precision off too (docs/numerics.md)
        "bf16_layernorm_gelu": (layernorm_gelu, (rows,), True),
    }

    # FMA contraction: XLA:CPU's LLVM target options allow FP-op fusion, so a multiply
    # feeding an add or subtract in one kernel is one fused multiply-add
    a, b, c, d = (rng.standard_normal((32, 256)).astype(np.float32) for _ in range(4))

    def multiply_adds(a, b, c, d):
        return (a * b + c, c + a * b, a * b - c, c - a * b, a * b + c * d, (a * b + c) * d + a,
                a * 0.01 + 1, ((a * 0.5 + 0.25) * a + 0.125) * a - b, a * b + c[0],
                (a * b + c).astype(jnp.float64) * 3)
    progs["fma_f32"] = (multiply_adds, (a, b, c, d), False)
    progs["fma_f64"] = (multiply_adds, tuple(v.astype(np.float64) * 1.1 for v in (a, b, c, d)),
                        False)
    z = [(a + 1j * b).astype(np.complex64), (c + 1j * d).astype(np.complex64),
         (d + 1j * a).astype(np.complex64)]
    progs["fma_c64"] = (lambda x, y, w: (x * y, x * y + w, w - x * y), tuple(z), False)

    # f16 NaNs: XLA:CPU converts f32 -> f16 with F16C, which quiets a signalling NaN;
    # negate and abs flip or clear the sign bit and keep it signalling (f16 -> f32, which
    # XLA:CPU's vcvtph2ps quiets too, is left out: xlapy keeps the NaN signalling there)
    snan32 = np.array([0x7F800001, 0x7FA00000, 0xFFA00000, 0x7FC00001, 0x00000001, 0x33000001,
                       0x7F800000, 0x477FF000], np.uint32).view(np.float32)
    snan16 = np.array([0x7C01, 0x7D00, 0xFD00, 0x7E01, 0x0001, 0x03FF, 0x7C00, 0x3C00],
                      np.uint16).view(np.float16)
    progs["f16_nans"] = (lambda x, h: (x.astype(jnp.float16), -h, jnp.abs(h), h * h,
                                       jnp.maximum(h, jnp.float16(1))),
                         (snan32, snan16), False)

    # the C library's f32 functions: XLA:CPU computes f32 sin, cos, tan, cbrt, atan2 and pow
    # with sinf, cosf, ... (glibc's, bit for bit), bf16/f16 through them in f32
    lx = np.concatenate([rng.uniform(-10, 10, 1500), rng.uniform(-1e4, 1e4, 400),
                         rng.uniform(-0.01, 0.01, 100),
                         [0.0, -0.0, np.inf, -np.inf, np.nan, 3e38, -1e-30]]).astype(np.float32)
    ly = rng.uniform(-4, 4, lx.size).astype(np.float32)
    ly[-2:] = 2.0, 0.5  # no denormal powers of 3e38 and 1e-30 (XLA:CPU flushes those)
    progs["libm_f32"] = (
        lambda x, y: (jnp.sin(x), jnp.cos(x), jnp.tan(x), jnp.cbrt(x), jnp.arctan2(x, y),
                      jax.lax.pow(jnp.abs(x), y), jax.lax.pow(x, jnp.round(y)),
                      jnp.sin(x.astype(bf16)), jnp.cos(x.astype(jnp.float16))),
        (lx, ly), False)

    # XLA:CPU's f32 tanh: a rational approximation (up to 5 ulps from tanh), bf16 through it
    tx = np.concatenate([rng.standard_normal(600) * s for s in (1e-4, 0.01, 0.3, 1.0, 3.0, 8.0,
                                                                 30.0)] +
                        [[0.0, -0.0, np.inf, -np.inf, np.nan, 4e-4, -4e-4, 20.0, -20.0, 7.9988117,
                          8.0, 1e-38]]).astype(np.float32)
    progs["tanh_f32"] = (lambda x: (jnp.tanh(x), jnp.tanh(x.astype(bf16))), (tx,), False)

    def denormal_ops(x):
        zero = jnp.zeros_like(x)
        return (jnp.sign(x), jnp.round(x), jax.lax.rsqrt(x), jnp.sqrt(x), jnp.floor(x),
                x.astype(jnp.int32), x / jnp.asarray(2, x.dtype), x * x[::-1], x == zero,
                jnp.abs(x), -x, x.astype(jnp.float64), x.astype(jnp.float32))

    for dt, tag in ((np.float32, "f32"), (np.float64, "f64"), (bf16, "bf16"),
                    (np.float16, "f16")):
        fi = ml_dtypes.finfo(dt)
        d = np.array([fi.smallest_subnormal, -fi.smallest_subnormal, fi.smallest_normal / 2,
                      -fi.smallest_normal / 4, fi.smallest_normal, -fi.smallest_normal * 3,
                      1.0, 2.0, 0.0, 0.5], dt)
        progs[f"denormals_{tag}"] = (denormal_ops, (d,), False)
    return progs


def _run(names: list[str]) -> dict:
    """Run ``names`` on XLA:CPU with this process's XLA_FLAGS; their outputs, flattened."""
    import jax
    import numpy as np

    progs = _programs()
    results = {}
    for name in names:
        f, args, _ = progs[name]
        outs = jax.tree_util.tree_leaves(jax.jit(f)(*args))
        results[name] = [np.asarray(o) for o in outs]
    return results


def _child(flags: str, names: list[str]) -> dict:
    """The outputs of ``names`` from a fresh process with XLA_FLAGS=flags."""
    import ml_dtypes
    import numpy as np

    env = dict(os.environ, XLA_FLAGS=flags)
    here = os.path.dirname(os.path.abspath(__file__))
    code = (f"import json, sys; sys.path.insert(0, {here!r}); import gen_numerics_fixtures as g;"
            f"r = g._run({names!r}); print(json.dumps({{k: [[str(a.dtype), a.shape, a.reshape(-1)"
            ".view(f'u{a.dtype.itemsize}').tolist()] for a in v] for k, v in r.items()}))")
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True,
                         text=True).stdout
    decoded = {}
    for k, v in json.loads(out.strip().splitlines()[-1]).items():
        arrays = []
        for dtype, shape, bits in v:
            dt = np.dtype(getattr(ml_dtypes, dtype, None) or dtype)
            arrays.append(np.array(bits, f"u{dt.itemsize}").view(dt).reshape(shape))
        decoded[k] = arrays
    return decoded


def main() -> int:
    import jax

    sys.path.insert(0, ROOT)
    from xlapy.npz import save_npz

    os.makedirs(OUT, exist_ok=True)
    progs = _programs()
    default = _child("", list(progs))
    excess = [n for n, (_, _, e) in progs.items() if e]
    strict = _child("--xla_allow_excess_precision=false", excess)
    for name, (f, args, _) in progs.items():
        text = jax.jit(f).lower(*args).as_text(dialect="hlo")
        with open(os.path.join(OUT, f"{name}.hlo"), "w") as fh:
            fh.write(text)
        arrays = {f"arg{i}": a for i, a in enumerate(args)}
        arrays.update({f"out{i}": a for i, a in enumerate(default[name])})
        if name in strict:
            arrays.update({f"strict{i}": a for i, a in enumerate(strict[name])})
        save_npz(os.path.join(OUT, f"{name}.npz"), arrays)
        print(f"{name}: {len(default[name])} outputs")
    return 0


if __name__ == "__main__":
    sys.exit(main())

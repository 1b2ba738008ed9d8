"""The jax side of ``xlapy bench``: one jax function per case of benchmarks/suite.py, and the
script that regenerates the committed dumps benchmarks/hlo/<case>.<tier>.hlo.

    python benchmarks/make_hlo.py            # rewrite every dump (needs jax)
    python benchmarks/make_hlo.py --check    # exit 1 if a dump differs from what jax lowers

A dump is ``jax.jit(f).lower(*args).as_text(dialect="hlo")``: the module jax hands to XLA,
which xlapy runs; the bench runs the same ``f`` through ``jax.jit`` for the XLA:CPU column.
jax is imported inside the functions: ``xlapy bench`` loads this module only when jax is
importable (jax is never a dependency of xlapy).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import suite  # benchmarks/suite.py, a sibling of this script


def _functions() -> dict:
    """case name -> f(*args), the computation of the case in jax."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    def elementwise(x, v, w):
        t = jnp.tanh(x * 0.5 + v) - w
        return jnp.where(t > x, jnp.sqrt(jnp.abs(t)), t * w) / (w * w + 1.0)

    def softmax(x):
        return jax.nn.softmax(x, axis=-1)

    def layernorm(x, gamma, beta):
        mean = jnp.mean(x, axis=-1, keepdims=True)
        xc = x - mean
        var = jnp.mean(xc * xc, axis=-1, keepdims=True)
        return xc * (1.0 / jnp.sqrt(var + suite.LAYERNORM_EPS)) * gamma + beta

    def softmax_loss(x, t):
        return jnp.sum(jax.nn.softmax(x, axis=-1) * t)

    def softmax_train(x, t):
        return jax.value_and_grad(softmax_loss)(x, t)

    def layernorm_loss(x, gamma, beta, t):
        return jnp.sum(layernorm(x, gamma, beta) * t)

    def layernorm_train(x, gamma, beta, t):
        loss, grads = jax.value_and_grad(layernorm_loss, argnums=(0, 1, 2))(x, gamma, beta, t)
        return (loss, *grads)

    def matmul(a, b):
        return a @ b

    def mlp_loss(w1, b1, w2, b2, x, y):
        h = jnp.maximum(x @ w1 + b1, 0.0)
        d = h @ w2 + b2 - y
        return jnp.mean(d * d)

    def mlp_train(x, y, w1, b1, w2, b2):
        loss, grads = jax.value_and_grad(mlp_loss, argnums=(0, 1, 2, 3))(w1, b1, w2, b2, x, y)
        return (loss, *grads)

    def conv2d(x, k):
        return lax.conv_general_dilated(x, k, window_strides=(1, 1), padding="SAME",
                                        dimension_numbers=("NHWC", "HWIO", "NHWC"))

    def reduce_sum(x):
        return jnp.sum(x)

    def while_scalar_for(iters):
        def while_scalar(c, a, b):
            return lax.fori_loop(0, iters, lambda i, c: c * a + b, c)
        return while_scalar

    def while_vector_for(iters):
        def while_vector(c, w, b):
            return lax.fori_loop(0, iters, lambda i, c: jnp.tanh(c * w + b), c)
        return while_vector

    def sort(x):
        return jnp.sort(x)

    # data-dependent kernels
    def embedding_lookup(table, idx):
        return table[idx]

    def embedding_grad(table, idx, g):
        return table.at[idx].add(g)

    def cnn_loss(k, w, x, y):
        conv = lax.conv_general_dilated(x, k, window_strides=(1, 1), padding="SAME",
                                        dimension_numbers=("NHWC", "HWIO", "NHWC"))
        a = jnp.maximum(conv, 0.0)
        pooled = lax.reduce_window(a, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        d = pooled.reshape(x.shape[0], -1) @ w - y
        return jnp.mean(d * d)

    def cnn_train(x, y, k, w):
        loss, grads = jax.value_and_grad(cnn_loss, argnums=(0, 1))(k, w, x, y)
        return (loss, *grads)

    def dus_loop_for(iters):
        def dus_loop(buf, row):
            m = row.shape[0]

            def body(i, b):
                return lax.dynamic_update_slice(b, row * i.astype(jnp.float32), (i * m,))
            return lax.fori_loop(0, iters, body, buf)
        return dus_loop

    # the sort family and scans
    def topk_for(k):
        def topk(x):
            return lax.top_k(x, k)
        return topk

    def cumsum(x, y):
        return jnp.cumsum(x, axis=1), jnp.cumprod(y, axis=1)

    def argmax(x):
        return jnp.argmax(x, axis=1).astype(jnp.int32)

    def sort_kv(k, v):
        return lax.sort((k, v), dimension=1, num_keys=1, is_stable=True)

    # batched GEMMs, a transformer block, rng-bit-generator
    def batched_matmul(a, b):
        return jnp.matmul(a, b)

    def transformer_fwd_for(heads):
        def transformer_fwd(x, wq, wk, wv, wo, w1, w2, gamma, beta):
            b, s, dm = x.shape
            dh = dm // heads

            def split(t):
                return t.reshape(b, s, heads, dh).transpose(0, 2, 1, 3)

            q, k, v = split(x @ wq), split(x @ wk), split(x @ wv)
            scores = (q @ k.transpose(0, 1, 3, 2)) * (dh ** -0.5)
            att = jax.nn.softmax(scores, axis=-1) @ v
            h = x + att.transpose(0, 2, 1, 3).reshape(b, s, dm) @ wo
            h = layernorm(h, gamma, beta)
            return h + jax.nn.gelu(h @ w1, approximate=True) @ w2
        return transformer_fwd

    def rng_bits_for(rows, cols):
        def rng_bits(key):
            return lax.rng_bit_generator(key, (rows, cols), dtype=jnp.uint32,
                                         algorithm=lax.RandomAlgorithm.RNG_PHILOX)
        return rng_bits


    # loops holding dots, the per-call cost
    def lstm_loss(params, xs, h0, c0):
        wx, wh, b = params

        def step(carry, x):
            h, c = carry
            z = x @ wx + h @ wh + b
            i, f, g, o = jnp.split(z, 4, axis=-1)
            c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
            h = jax.nn.sigmoid(o) * jnp.tanh(c)
            return (h, c), h

        _, hs = lax.scan(step, (h0, c0), xs)
        return jnp.sum(hs * hs)

    def lstm_scan(wx, wh, b, xs, h0, c0):
        return jax.grad(lstm_loss)((wx, wh, b), xs, h0, c0)

    def transformer_train_for(heads):
        block = transformer_fwd_for(heads)

        def loss(weights, x, t):
            return jnp.sum(block(x, *weights) * t)

        def transformer_train(x, wq, wk, wv, wo, w1, w2, gamma, beta, t):
            value, grads = jax.value_and_grad(loss)((wq, wk, wv, wo, w1, w2, gamma, beta), x, t)
            return (value, *grads)
        return transformer_train

    def random_gamma(key, a):
        return jax.random.gamma(jax.random.wrap_key_data(key), a)

    def igammac(a, x):
        return lax.igammac(a, x)

    def per_call(x):
        for k in range(10):
            x = jnp.sin(x) * 1.5 + x if k % 2 else jnp.tanh(x) - 0.5 * x
        return x

    return {
        "embedding_lookup": lambda p: embedding_lookup,
        "embedding_grad": lambda p: embedding_grad,
        "cnn_train": lambda p: cnn_train,
        "dus_loop": lambda p: dus_loop_for(p["iters"]),
        "rng_bits": lambda p: rng_bits_for(p["rows"], p["cols"]),
        "batched_matmul": lambda p: batched_matmul,
        "batched_matmul_bf16": lambda p: batched_matmul,
        "transformer_fwd": lambda p: transformer_fwd_for(p["heads"]),
        "lstm_scan": lambda p: lstm_scan,
        # compile-only modules (suite.COMPILE_MODULES)
        "transformer_train": lambda p: transformer_train_for(p["heads"]),
        "random_gamma": lambda p: random_gamma,
        "igammac": lambda p: igammac,
        "per_call": lambda p: per_call,
        "elementwise": lambda p: elementwise,
        "softmax": lambda p: softmax,
        "layernorm": lambda p: layernorm,
        "softmax_train": lambda p: softmax_train,
        "layernorm_train": lambda p: layernorm_train,
        "matmul": lambda p: matmul,
        "matmul_big": lambda p: matmul,
        "mlp_train": lambda p: mlp_train,
        "conv2d": lambda p: conv2d,
        "reduce_sum": lambda p: reduce_sum,
        "while_scalar": lambda p: while_scalar_for(p["iters"]),
        "while_vector": lambda p: while_vector_for(p["iters"]),
        "sort": lambda p: sort,
        # the sort family and scans
        "topk": lambda p: topk_for(p["k"]),
        "cumsum": lambda p: cumsum,
        "argmax": lambda p: argmax,
        "sort_kv": lambda p: sort_kv,
    }


def jax_function(name: str, tier: str):
    """``f`` of case ``name`` (a run case or a compile-only module) at ``tier`` (iteration
    counts are part of the function)."""
    return _functions()[name](suite.module_case(name).sizes[tier])


def arg_specs(name: str, tier: str) -> list:
    """jax.ShapeDtypeStruct of every argument (the same shapes the bench's inputs have)."""
    import jax
    import numpy as np

    case = suite.module_case(name)
    args = suite.make_inputs(case, tier)
    return [jax.ShapeDtypeStruct(np.shape(a), np.asarray(a).dtype) for a in args]


def lower_text(name: str, tier: str) -> str:
    """The HLO text jax hands to XLA for case ``name`` at ``tier``."""
    import jax

    return jax.jit(jax_function(name, tier)).lower(*arg_specs(name, tier)).as_text(dialect="hlo")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true",
                   help="compare instead of writing; exit 1 when a dump is out of date")
    p.add_argument("--cases", help="comma-separated case names (default all)")
    args = p.parse_args(argv)
    names = args.cases.split(",") if args.cases else \
        list(suite.CASES) + list(suite.COMPILE_MODULES)
    stale = 0
    suite.HLO_DIR.mkdir(exist_ok=True)
    for name in names:
        for tier in suite.TIERS:
            path = suite.module_case(name).hlo_path(tier)
            text = lower_text(name, tier)
            if args.check:
                same = path.exists() and path.read_text() == text
                stale += not same
                print(f"{'ok   ' if same else 'STALE'} {path.name}")
            else:
                path.write_text(text)
                print(f"wrote {path.relative_to(suite.HERE.parent)} ({len(text)} chars)")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())

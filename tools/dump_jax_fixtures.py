#!/usr/bin/env python
"""Regenerate the golden fixtures in ``tests/fixtures/jax/`` from real XLA (through jax).

Usage::

    python tools/dump_jax_fixtures.py [--out tests/fixtures/jax] [--only name,...] [--list]

jax and jaxlib are *test-only* dependencies of xlapy: this script imports them, the xlapy
package never does.  The script holds a corpus of small named programs (``CORPUS`` below);
for each program ``<name>`` it writes

``<name>.pre.hlo``
    ``jax.jit(f, keep_unused=True).lower(*args).as_text(dialect="hlo")``: the HLO module as
    jax hands it to XLA, before any XLA pass.
``<name>.post.hlo``
    ``....lower(*args).compile().as_text()``: the module after XLA:CPU's optimisation
    pipeline (fusions, layout assignment, expanders, scheduling).  It carries XLA's
    ``metadata={...}`` and the ``FileNames``/``FunctionNames``/``FileLocations``/
    ``StackFrames`` tables; source paths are made relative to the repository root and only
    the innermost frame is recorded (a line inside the program's function in this script).
``<name>.npz``
    The inputs ``arg0, arg1, ...`` in HLO parameter order (``keep_unused=True`` is always
    passed so that every argument is a parameter, and arguments are flat arrays) and the
    outputs ``out0, out1, ...`` that the compiled XLA:CPU executable returned, the result
    tuple flattened depth first (jax's pytree order, which is the HLO result-tuple order).

and, for the whole corpus, ``MANIFEST.json`` (per fixture: name, description, seed, jit
options, jax/jaxlib versions, dtypes and shapes of inputs and outputs, the HLO opcodes that
occur in the pre and post text, the custom-call targets).

npz format
----------
Every ``.npz`` is an ordinary NumPy zip archive (``np.load(path)`` reads it; entries are
deflate-compressed and written with a fixed timestamp so regeneration is byte-for-byte
reproducible).  NumPy has no native bf16/f8/f4/int4/int2 dtypes, so arrays of an ml_dtypes
type are stored as their raw storage bits: ``arr.view(np.uint8)`` for one-byte ml_dtypes
types (all f8 kinds, float4_e2m1fn, int4/uint4, int2/uint2: one element per byte, sub-byte
values in the low bits exactly as ml_dtypes holds them, e.g. int4 -1 is ``0x0f``) and
``arr.view(np.uint16)`` for bfloat16, plus an extra string entry ``__dtype__<key>`` whose
value is the ml_dtypes dtype name (``"bfloat16"``, ``"float8_e4m3fn"``, ``"int4"``, ...).
To read an entry back::

    z = np.load(path)
    a = z[key]
    if f"__dtype__{key}" in z.files:
        a = a.view(getattr(ml_dtypes, str(z[f"__dtype__{key}"])))

(``load_npz`` below does exactly that for all entries.)  Every other dtype (bool, integers,
f16/f32/f64, c64/c128) is stored natively.

Determinism
-----------
Inputs come from ``np.random.default_rng(crc32(name))`` (plus hand-written edge values), so
a program's inputs do not depend on which other programs run.  Programs that need 64-bit
types run under ``jax.enable_x64(True)`` (``x64`` in the manifest).  LAPACK results
(eigenvectors' signs, SVD, ...) and transcendental functions are what this machine's
XLA:CPU produced; compare them with a tolerance.  ``rng_stateful_uniform`` uses the
deprecated stateful ``rng`` op, whose values depend on XLA:CPU's process-global RNG state:
its outputs are the first draw of a fresh process and only one program in the corpus uses
that op.

Failures
--------
If a program fails to lower, compile or run, the script names it, prints the traceback and
exits non-zero (after trying the other selected programs; MANIFEST.json is then not
touched).  Programs that XLA:CPU cannot run at all are left out of the corpus; with
jax/jaxlib 0.10.2 there are none: everything asked for (all f8/f4/int4/int2 conversions,
the LAPACK custom calls, fft, rng-bit-generator with every algorithm, collectives on a
one-device mesh, ...) lowers, compiles and runs on XLA:CPU.

A full run (no ``--only``) also deletes fixture files in the output directory whose program
is no longer in the corpus; ``--only`` regenerates the named programs and updates their
MANIFEST entries.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import re
import sys
import traceback
import zipfile
import zlib
from functools import partial
from pathlib import Path
from typing import Any, Callable

import ml_dtypes
import numpy as np

import jax
import jax.numpy as jnp
import jaxlib
from jax import lax

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO_ROOT / "tests" / "fixtures" / "jax"

# Source locations in the post-optimisation text are relative to the repository root.
jax.config.update("jax_hlo_source_file_canonicalization_regex", "^" + re.escape(str(REPO_ROOT)) + "/")
# Record only the innermost user frame (the line inside the program's function), not the call
# chain through this script's driver, so that editing the driver does not touch every fixture.
jax.config.update("jax_include_full_tracebacks_in_locations", False)

F32 = np.float32
I32 = np.int32
U32 = np.uint32


# --------------------------------------------------------------------------------------
# Corpus
# --------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Program:
    name: str
    description: str
    fn: Callable[..., Any]
    make_args: Callable[[np.random.Generator], tuple]
    jit_kwargs: dict
    x64: bool = False

    @property
    def seed(self) -> int:
        return zlib.crc32(self.name.encode())


CORPUS: list[Program] = []


def program(description: str, args: Callable[[np.random.Generator], tuple], *, x64: bool = False, **jit_kwargs):
    """Register the decorated function as a corpus program named after the function."""

    def register(fn):
        if any(p.name == fn.__name__ for p in CORPUS):
            raise ValueError(f"duplicate program name {fn.__name__}")
        CORPUS.append(Program(fn.__name__, description, fn, args, dict(jit_kwargs), x64))
        return fn

    return register


def normal(rng, *shape, scale=1.0, dtype=F32):
    return (rng.standard_normal(shape) * scale).astype(dtype)


def uniform(rng, *shape, low=0.0, high=1.0, dtype=F32):
    return rng.uniform(low, high, shape).astype(dtype)


def ints(rng, *shape, low=-10, high=10, dtype=I32):
    return rng.integers(low, high, shape, endpoint=True).astype(dtype)


def arr(values, dtype=F32):
    return np.asarray(values, dtype=dtype)


def spd(rng, *batch, n=4):
    a = normal(rng, *batch, n, n)
    return (a @ np.swapaxes(a, -1, -2) + n * np.eye(n, dtype=F32)).astype(F32)


# Float values that exercise rounding, overflow, NaN and signed zero in conversions.
EDGE_F32 = arr([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-40, 1e-8, 0.5, 1.5, 2.5, -0.5, -2.5,
                3.7, -3.7, 7.5, 8.0, -9.0, 127.5, 128.0, 255.5, 256.0, -129.0, 300.7, 448.0, 464.0, 500.0,
                57344.0, 61440.0, 65504.0, 65520.0, 1e10, -1e10, 3.4e38, -3.4e38, 2147483520.0, 4294967040.0])

CONV_NHWC = ("NHWC", "HWIO", "NHWC")


# -- networks ----------------------------------------------------------------------------


def _mlp(w1, b1, w2, b2, x):
    return jax.nn.relu(x @ w1 + b1) @ w2 + b2


def _mlp_args(rng, with_labels=False):
    x = normal(rng, 8, 16)
    params = (normal(rng, 16, 32, scale=0.25), normal(rng, 32, scale=0.1), normal(rng, 32, 10, scale=0.18),
              normal(rng, 10, scale=0.1))
    if with_labels:
        return (x, ints(rng, 8, low=0, high=9), *params)
    return (x, *params)


@program("2-layer MLP forward: relu(x @ w1 + b1) @ w2 + b2 (f32, batch 8, 16->32->10)", _mlp_args)
def mlp_forward(x, w1, b1, w2, b2):
    return _mlp(w1, b1, w2, b2, x)


@program("jax.value_and_grad of a 2-layer MLP softmax cross-entropy loss (labels via take_along_axis); "
         "outputs loss then grads of w1, b1, w2, b2", partial(_mlp_args, with_labels=True))
def mlp_grad(x, labels, w1, b1, w2, b2):
    def loss(params):
        logp = jax.nn.log_softmax(_mlp(*params, x))
        return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=1))

    return jax.value_and_grad(loss)((w1, b1, w2, b2))


def _softmax_args(rng):
    x = normal(rng, 4, 10, scale=3.0)
    x[1, :] += 1e4  # large but equal offsets: must stay finite
    x[2, 3] = -np.inf
    x[3, :] = -np.inf  # fully masked row -> NaN
    return (x,)


@program("jax.nn.softmax over the last axis; a row offset by 1e4, one -inf entry, a row of all -inf", _softmax_args)
def softmax(x):
    return jax.nn.softmax(x, axis=-1)


@program("layer normalisation over the last axis with gamma/beta, rsqrt(var + 1e-5)",
         lambda r: (normal(r, 4, 16, scale=2.0) + 1.0, normal(r, 16), normal(r, 16)))
def layernorm(x, gamma, beta):
    mean = x.mean(-1, keepdims=True)
    var = jnp.square(x - mean).mean(-1, keepdims=True)
    return (x - mean) * lax.rsqrt(var + 1e-5) * gamma + beta


@program("conv2d NHWC/HWIO/NHWC via lax.conv_general_dilated, stride 1, SAME padding, 3->4 channels",
         lambda r: (normal(r, 2, 8, 8, 3), normal(r, 3, 3, 3, 4, scale=0.3)))
def conv2d_nhwc(x, w):
    return lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=CONV_NHWC)


@program("gradient of sum(conv2d(x, w)**2) w.r.t. x and w; NHWC, stride 2, explicit padding (1,1) "
         "(backward passes use lhs_dilation and a transposed kernel)",
         lambda r: (normal(r, 2, 7, 7, 3), normal(r, 3, 3, 3, 4, scale=0.3)))
def conv2d_grad(x, w):
    def loss(x, w):
        y = lax.conv_general_dilated(x, w, (2, 2), ((1, 1), (1, 1)), dimension_numbers=CONV_NHWC)
        return jnp.sum(y * y)

    return jax.value_and_grad(loss, argnums=(0, 1))(x, w)


@program("depthwise conv2d NHWC: feature_group_count = 4 channels, VALID padding, kernel HWIO [3,3,1,4]",
         lambda r: (normal(r, 1, 6, 6, 4), normal(r, 3, 3, 1, 4, scale=0.5)))
def conv_depthwise(x, w):
    return lax.conv_general_dilated(x, w, (1, 1), "VALID", dimension_numbers=CONV_NHWC, feature_group_count=4)


@program("gradient of a depthwise conv w.r.t. its kernel (feature-grouped forward, batch_group_count "
         "style backward)", lambda r: (normal(r, 2, 5, 5, 4), normal(r, 3, 3, 1, 4, scale=0.5)))
def conv_depthwise_grad(x, w):
    def loss(w):
        y = lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=CONV_NHWC, feature_group_count=4)
        return jnp.sum(jnp.sin(y))

    return jax.grad(loss)(w)


@program("1-D conv NWC/WIO: window stride 2, padding (2,1), lhs_dilation 2, rhs_dilation 2",
         lambda r: (normal(r, 2, 9, 3), normal(r, 3, 3, 5, scale=0.5)))
def conv1d_dilated(x, w):
    return lax.conv_general_dilated(x, w, (2,), ((2, 1),), lhs_dilation=(2,), rhs_dilation=(2,),
                                    dimension_numbers=("NWC", "WIO", "NWC"))


@program("lax.conv_transpose NHWC, stride 2, SAME padding (lowers to an lhs-dilated convolution)",
         lambda r: (normal(r, 1, 4, 4, 2), normal(r, 3, 3, 2, 3, scale=0.5)))
def conv_transpose(x, w):
    return lax.conv_transpose(x, w, (2, 2), "SAME", dimension_numbers=CONV_NHWC)


# -- control flow ----------------------------------------------------------------------


@program("lax.fori_loop with a dynamic trip count n (int32 input = 7): while loop carrying (i, x, acc)",
         lambda r: (normal(r, 5), arr(7, I32)))
def fori_loop(x, n):
    def body(i, carry):
        x, acc = carry
        return x * 0.9 + i.astype(F32), acc + jnp.sum(x)

    return lax.fori_loop(0, n, body, (x, jnp.float32(0)))


@program("lax.fori_loop with static bounds 0..6 (jax lowers it through scan); carries a [3,3] matrix",
         lambda r: (normal(r, 3, 3, scale=0.5),))
def fori_loop_static(m):
    return lax.fori_loop(0, 6, lambda i, a: jnp.tanh(a @ a.T + i.astype(F32)), m)


@program("lax.while_loop with a data-dependent condition: halve x until sum(|x|) < 1, count iterations",
         lambda r: (normal(r, 6, scale=20.0),))
def while_loop(x):
    def cond(c):
        return jnp.sum(jnp.abs(c[0])) >= 1.0

    def body(c):
        return c[0] * 0.5, c[1] + 1

    return lax.while_loop(cond, body, (x, jnp.int32(0)))


@program("lax.scan of a tiny RNN h = tanh(h @ w + x_t @ u) over 5 steps; outputs final h and per-step sums",
         lambda r: (normal(r, 4), normal(r, 5, 3), normal(r, 4, 4, scale=0.5), normal(r, 3, 4, scale=0.5)))
def scan_rnn(h0, xs, w, u):
    def step(h, x):
        h = jnp.tanh(h @ w + x @ u)
        return h, h.sum()

    return lax.scan(step, h0, xs)


@program("lax.scan with reverse=True and two stacked outputs (cumulative product and running max)",
         lambda r: (normal(r, 6, 2),))
def scan_reverse(xs):
    def step(c, x):
        p, m = c
        p, m = p * x, jnp.maximum(m, x)
        return (p, m), (p, m)

    return lax.scan(step, (jnp.ones(2, F32), jnp.full(2, -jnp.inf, F32)), xs, reverse=True)


@program("lax.cond on a bool input (true) and on its negation (jax converts the pred to s32 and emits an "
         "index-form conditional with two branch_computations)",
         lambda r: (arr(True, np.bool_), normal(r, 4)))
def cond(p, x):
    def t(x):
        return jnp.sin(x)

    def f(x):
        return jnp.cos(x) * 2.0

    return lax.cond(p, t, f, x), lax.cond(jnp.logical_not(p), t, f, x)


@program("lax.switch over 3 branches with index 2, 7 and -3 (jax clamps the index into range before the "
         "index-based conditional)", lambda r: (arr(2, I32), normal(r, 4)))
def switch(i, x):
    branches = [lambda x: x + 1.0, lambda x: x * x, lambda x: jnp.exp(x)]
    return lax.switch(i, branches, x), lax.switch(i + 5, branches, x), lax.switch(i - 5, branches, x)


@program("a jitted helper called twice from the outer function (call op in pre, inlined in post)",
         lambda r: (normal(r, 3), normal(r, 3)))
def nested_jit_call(x, y):
    @jax.jit
    def helper(a, b):
        return a * b + jnp.sin(a)

    return helper(x, y) + helper(y, x)


@program("lax.composite 'xlapy.softplus' (call with is_composite=true and composite.* frontend_attributes)",
         lambda r: (normal(r, 5),))
def composite_call(x):
    @partial(lax.composite, name="xlapy.softplus")
    def softplus(x):
        return jnp.log1p(jnp.exp(x))

    return softplus(x)


@program("lax.optimization_barrier on a tuple (opt-barrier op) between two computations",
         lambda r: (normal(r, 4), normal(r, 4)))
def optimization_barrier(x, y):
    a, b = lax.optimization_barrier((x * 2.0, y + 1.0))
    return a * b


@program("jax.grad through jax.checkpoint (rematerialisation; the recomputation sits behind an opt-barrier)",
         lambda r: (normal(r, 6),))
def checkpoint_grad(x):
    @jax.checkpoint
    def f(x):
        return jnp.sin(jnp.sin(x) * 3.0)

    return jax.grad(lambda x: jnp.sum(f(x)))(x)


# -- sorting and selection -------------------------------------------------------------


@program("jnp.sort of a 1-D f32 vector with NaNs, infinities, signed zeros and duplicates",
         lambda r: (arr([3.0, np.nan, -1.0, 0.0, -0.0, np.inf, 2.0, -np.inf, 3.0, -np.nan, 1.0, -7.5, 0.0,
                         2.0, 1e-40, -2.0]),))
def sort_1d(x):
    return jnp.sort(x)


@program("jnp.sort of a [5,4] matrix along axis 0, and descending along axis 1 (int32)",
         lambda r: (normal(r, 5, 4), ints(r, 5, 4, low=-3, high=3)))
def sort_2d(x, k):
    return jnp.sort(x, axis=0), jnp.sort(k, axis=1, descending=True)


@program("multi-operand lax.sort((k1, k2, v), num_keys=2, stable): lexicographic keys with ties, "
         "payload follows", lambda r: (ints(r, 10, low=0, high=2), ints(r, 10, low=0, high=3), normal(r, 10)))
def sort_multi_operand(k1, k2, v):
    return lax.sort((k1, k2, v), num_keys=2, is_stable=True)


@program("jnp.argsort (stable) with ties, ascending and descending (sort with an iota operand)",
         lambda r: (arr([3, 1, 2, 1, 3, 0, 2, 1, -1, 3], F32),))
def argsort(x):
    return jnp.argsort(x, stable=True), jnp.argsort(x, stable=True, descending=True)


@program("lax.top_k(k=3) over rows of [4,10] with ties (topk op; XLA:CPU rewrites it to a TopK custom call)",
         lambda r: (np.round(normal(r, 4, 10, scale=2.0)),))
def top_k(x):
    return lax.top_k(x, 3)


@program("lax.approx_max_k(k=3) (jax lowers to sort+slice on CPU; XLA recognises the pattern)",
         lambda r: (normal(r, 3, 16),))
def approx_max_k(x):
    return lax.approx_max_k(x, 3)


@program("jnp.searchsorted (default 'scan' method: while loop; and 'compare_all') on a sorted vector",
         lambda r: (np.sort(normal(r, 8)), normal(r, 5)))
def searchsorted(a, q):
    return jnp.searchsorted(a, q), jnp.searchsorted(a, q, side="right", method="compare_all")


# -- gather / scatter / dynamic slicing --------------------------------------------------


@program("gathers: x[idx] with a negative index, jnp.take(mode='clip') and .at[].get(mode='fill', -1) "
         "with out-of-range indices", lambda r: (normal(r, 6, 3), arr([0, 5, -1, 2, 2], I32),
                                                    arr([-3, 0, 9, 5], I32)))
def gather(x, idx, oob):
    return x[idx], jnp.take(x, oob, axis=0, mode="clip"), x.at[oob].get(mode="fill", fill_value=-1.0)


@program("advanced indexing x[i, :, j] and take_along_axis (gathers with several index dims)",
         lambda r: (normal(r, 4, 5, 6), arr([3, 0, 1], I32), arr([5, 2, 0], I32), ints(r, 4, 2, 6, low=0,
                                                                                          high=4)))
def gather_advanced(x, i, j, along):
    return x[i, :, j], jnp.take_along_axis(x, along, axis=1)


def _scatter_args(rng, idx):
    return (normal(rng, 6, 3), arr(idx, I32), normal(rng, len(idx), 3))


@program("x.at[idx].add(u) with duplicate indices (scatter with add combiner)",
         partial(_scatter_args, idx=[0, 2, 0, 5, 2, 0]))
def scatter_add(x, idx, u):
    return x.at[idx].add(u)


@program("x.at[idx].set(u) with duplicate indices (which duplicate wins is unspecified; this is XLA:CPU's)",
         partial(_scatter_args, idx=[1, 3, 1, 4, 3]))
def scatter_set(x, idx, u):
    return x.at[idx].set(u)


@program("x.at[idx].max(u) and x.at[idx].min(u) with duplicate indices",
         partial(_scatter_args, idx=[0, 1, 0, 1, 5]))
def scatter_max_min(x, idx, u):
    return x.at[idx].max(u), x.at[idx].min(u)


@program("x.at[idx].add(u, mode='drop') with out-of-range indices 7, -9 (dropped) and -1 (wraps)",
         partial(_scatter_args, idx=[1, 7, -9, 3, -1]))
def scatter_drop(x, idx, u):
    return x.at[idx].add(u, mode="drop")


@program("x.at[idx].set(u, mode='clip') with out-of-range indices clipped to the edges",
         partial(_scatter_args, idx=[-20, 2, 100]))
def scatter_clip(x, idx, u):
    return x.at[idx].set(u, mode="clip")


@program("point scatter x.at[rows, cols].mul(v) into a [4,5] matrix (scatter with multiply combiner)",
         lambda r: (normal(r, 4, 5), arr([0, 3, 0, 2], I32), arr([1, 4, 1, 0], I32), normal(r, 4)))
def scatter_mul_points(x, rows, cols, v):
    return x.at[rows, cols].mul(v)


@program("jax.ops.segment_sum and segment_max with 4 segments (an id of 4 is out of range and dropped)",
         lambda r: (normal(r, 8, 2), arr([0, 0, 1, 3, 3, 3, 4, 1], I32)))
def segment_ops(data, seg):
    return jax.ops.segment_sum(data, seg, num_segments=4), jax.ops.segment_max(data, seg, num_segments=4)


@program("jnp.nonzero with a static size=5 and fill_value=-1 (cumsum + scatter pattern)",
         lambda r: (arr([0, 1.5, 0, 0, -2, 3, 0, 4], F32),))
def nonzero_fixed_size(x):
    return jnp.nonzero(x, size=5, fill_value=-1)[0]


@program("lax.dynamic_slice [2,3] out of [5,6] at (1,2), and at (4,-2) which XLA clamps to (3,0)",
         lambda r: (normal(r, 5, 6), arr(1, I32), arr(2, I32)))
def dynamic_slice(x, i, j):
    return lax.dynamic_slice(x, (i, j), (2, 3)), lax.dynamic_slice(x, (i + 3, j - 4), (2, 3))


@program("lax.dynamic_update_slice of a [2,3] update into [5,6] at (1,2) and at a clamped start (9,9)",
         lambda r: (normal(r, 5, 6), normal(r, 2, 3), arr(1, I32), arr(2, I32)))
def dynamic_update_slice(x, u, i, j):
    return lax.dynamic_update_slice(x, u, (i, j)), lax.dynamic_update_slice(x, u, (i + 8, j + 7))


# -- windows and scans -----------------------------------------------------------------


@program("2x2 max pool stride 2 NHWC (reduce-window with max)", lambda r: (normal(r, 1, 6, 6, 2),))
def maxpool(x):
    return lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")


@program("3x3 average pool stride 2 with padding 1, dividing by the count of non-padding elements "
         "(two reduce-windows)", lambda r: (normal(r, 1, 5, 5, 2),))
def avgpool_padded(x):
    pad = ((0, 0), (1, 1), (1, 1), (0, 0))
    s = lax.reduce_window(x, 0.0, lax.add, (1, 3, 3, 1), (1, 2, 2, 1), pad)
    n = lax.reduce_window(jnp.ones_like(x), 0.0, lax.add, (1, 3, 3, 1), (1, 2, 2, 1), pad)
    return s / n


@program("reduce-window sum with base_dilation (2,1), window_dilation (1,2), strides (1,2), padding "
         "((1,1),(0,2))", lambda r: (normal(r, 5, 7),))
def reduce_window_dilated(x):
    return lax.reduce_window(x, 0.0, lax.add, (3, 3), (1, 2), ((1, 1), (0, 2)), base_dilation=(2, 1),
                             window_dilation=(1, 2))


@program("jnp.cumsum along axis 1 (f32) and reversed lax.cumsum on int32 (reduce-window on CPU)",
         lambda r: (normal(r, 3, 8), ints(r, 9)))
def cumsum(x, k):
    return jnp.cumsum(x, axis=1), lax.cumsum(k, reverse=True)


@program("lax.cumprod, cummax, cummin and cumlogsumexp along axis 0", lambda r: (normal(r, 6, 2),))
def cumulative_ops(x):
    return lax.cumprod(x, axis=0), lax.cummax(x, axis=0), lax.cummin(x, axis=0), lax.cumlogsumexp(x, axis=0)


@program("long cumulative sums, products and maxima (XLA:CPU's ReduceWindowRewriter tree of base 16): "
         "bf16 rows of 1000, an f32 column of 300, a reverse f16 scan of 77, an exclusive f32 scan, "
         "a cumprod of 40, a cummax of 5000 with ties and NaN",
         lambda r: (normal(r, 4, 1000, scale=3, dtype=ml_dtypes.bfloat16), normal(r, 300, 3),
                    normal(r, 2, 77, dtype=np.float16), uniform(r, 40, low=0.9, high=1.1),
                    np.where(np.arange(5000) == 1234, np.nan,
                             np.round(normal(r, 5000, scale=20))).astype(F32)))
def cumulative_long(a, b, c, d, e):
    exclusive = jnp.concatenate([jnp.zeros((1, 3), b.dtype), jnp.cumsum(b, axis=0)[:-1]], axis=0)
    return (jnp.cumsum(a, axis=1), jnp.cumsum(b, axis=0), lax.cumsum(c, axis=1, reverse=True),
            exclusive, lax.cumprod(d), lax.cummax(e), lax.cummin(a, axis=1, reverse=True))


@program("lax.associative_scan: prefix sum, and a first-order linear recurrence with a tuple combiner "
         "(slice/pad/concatenate tree)", lambda r: (normal(r, 11), uniform(r, 11), normal(r, 11)))
def associative_scan(x, a, b):
    def combine(l, r):
        return l[0] * r[0], r[0] * l[1] + r[1]

    return lax.associative_scan(jnp.add, x), lax.associative_scan(combine, (a, b))


# -- fft -------------------------------------------------------------------------------


def _complex(rng, *shape):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)


@program("jnp.fft.fft of a c64[2,8] (FFT along the last axis)", lambda r: (_complex(r, 2, 8),))
def fft_fft(x):
    return jnp.fft.fft(x)


@program("jnp.fft.ifft of a c64[8] (IFFT, 1/n scaling)", lambda r: (_complex(r, 8),))
def fft_ifft(x):
    return jnp.fft.ifft(x)


@program("jnp.fft.rfft of f32[3,8] -> c64[3,5] (RFFT)", lambda r: (normal(r, 3, 8),))
def fft_rfft(x):
    return jnp.fft.rfft(x)


@program("jnp.fft.irfft of c64[5] -> f32[8] (IRFFT, fft_length 8)", lambda r: (_complex(r, 5),))
def fft_irfft(x):
    return jnp.fft.irfft(x, n=8)


@program("jnp.fft.fft2 of c64[4,6] (2-D FFT)", lambda r: (_complex(r, 4, 6),))
def fft_fft2(x):
    return jnp.fft.fft2(x)


# -- random numbers --------------------------------------------------------------------


def _random_draws(key):
    k1, k2, k3 = jax.random.split(key, 3)
    return jax.random.uniform(k1, (3, 4)), jax.random.normal(k2, (5,)), jax.random.bits(k3, (4,), dtype=jnp.uint32)


@program("jax.random.key(seed, impl='threefry2x32'): split into 3, uniform [3,4], normal [5], "
         "u32 bits [4] (threefry expanded into integer HLO)", lambda r: (arr(42, U32),))
def rng_threefry(seed):
    return _random_draws(jax.random.key(seed, impl="threefry2x32"))


@program("jax.random.key(seed, impl='rbg'): split into 3, uniform, normal, u32 bits (rng-bit-generator "
         "with algorithm=rng_default)", lambda r: (arr(42, U32),))
def rng_rbg(seed):
    return _random_draws(jax.random.key(seed, impl="rbg"))


@program("jax.random.key(seed, impl='unsafe_rbg'): split into 3, uniform, normal, u32 bits",
         lambda r: (arr(42, U32),))
def rng_unsafe_rbg(seed):
    return _random_draws(jax.random.key(seed, impl="unsafe_rbg"))


@program("lax.rng_bit_generator on one u32[4] key with RNG_DEFAULT, RNG_THREE_FRY and RNG_PHILOX "
         "(new state and u32[2,4] bits for each; shows which algorithm XLA:CPU's default is)",
         lambda r: (arr([1, 2, 3, 4], U32),))
def rng_bit_generator(key):
    out = []
    for alg in (lax.RandomAlgorithm.RNG_DEFAULT, lax.RandomAlgorithm.RNG_THREE_FRY, lax.RandomAlgorithm.RNG_PHILOX):
        out.extend(lax.rng_bit_generator(key, (2, 4), dtype=jnp.uint32, algorithm=alg))
    return tuple(out)


@program("deprecated stateful lax.rng_uniform (rng op; XLA:CPU expands it with rng-get-and-update-state). "
         "Outputs are the first draw of a fresh process", lambda r: (arr(-1.0), arr(2.0)))
def rng_stateful_uniform(lo, hi):
    return lax.rng_uniform(lo, hi, (6,))


# -- linear algebra --------------------------------------------------------------------


@program("jnp.linalg.cholesky of a batch of two SPD 4x4 matrices (LAPACK potrf custom call)",
         lambda r: (spd(r, 2),))
def linalg_cholesky(a):
    return jnp.linalg.cholesky(a)


@program("lax.linalg.triangular_solve: lower, left side; and upper, right side, transpose_a "
         "(a lapack_strsm_ffi custom call on CPU)", lambda r: (np.tril(normal(r, 4, 4)) + 4 * np.eye(4, dtype=F32), normal(r, 4, 3),
                                           normal(r, 2, 4)))
def linalg_triangular_solve(a, b, c):
    return (lax.linalg.triangular_solve(a, b, left_side=True, lower=True),
            lax.linalg.triangular_solve(a.T, c, left_side=False, lower=False, transpose_a=True,
                                        unit_diagonal=False))


@program("jnp.linalg.qr (reduced) of a [5,3] matrix (geqrf + orgqr custom calls)", lambda r: (normal(r, 5, 3),))
def linalg_qr(a):
    return jnp.linalg.qr(a)


@program("jnp.linalg.eigh of a symmetric 4x4 (syevd custom call); eigenvalues then eigenvectors",
         lambda r: (spd(r),))
def linalg_eigh(a):
    w, v = jnp.linalg.eigh(a)
    return w, v


@program("jnp.linalg.svd (full_matrices=False) of a [4,3] matrix (gesdd custom call)",
         lambda r: (normal(r, 4, 3),))
def linalg_svd(a):
    return jnp.linalg.svd(a, full_matrices=False)


@program("lax.linalg.lu of a 4x4 matrix: LU factors, pivots, permutation (getrf custom call)",
         lambda r: (normal(r, 4, 4),))
def linalg_lu(a):
    return lax.linalg.lu(a)


@program("jnp.linalg.eig of a non-symmetric 3x3 (geev custom call, complex eigenvalues/vectors)",
         lambda r: (arr([[0.0, -1.0, 0.5], [1.0, 0.0, 0.25], [0.0, 0.0, 2.0]]),))
def linalg_eig(a):
    return jnp.linalg.eig(a)


@program("jnp.linalg.solve and jnp.linalg.slogdet of a 4x4 system (LU + triangular solves)",
         lambda r: (normal(r, 4, 4) + 3 * np.eye(4, dtype=F32), normal(r, 4, 2)))
def linalg_solve_slogdet(a, b):
    sign, logdet = jnp.linalg.slogdet(a)
    return jnp.linalg.solve(a, b), sign, logdet


# -- dots and mixed precision ------------------------------------------------------------


@program("bf16 x bf16 matmul with f32 accumulation (preferred_element_type=f32) and a plain bf16 matmul",
         lambda r: (normal(r, 4, 8, dtype=ml_dtypes.bfloat16), normal(r, 8, 3, dtype=ml_dtypes.bfloat16)))
def matmul_bf16(a, b):
    dn = (((1,), (0,)), ((), ()))
    return lax.dot_general(a, b, dn, preferred_element_type=jnp.float32), a @ b


@program("int8 x int8 dot with int32 accumulation (preferred_element_type=int32); products overflow int8",
         lambda r: (ints(r, 4, 8, low=-128, high=127, dtype=np.int8), ints(r, 8, 3, low=-128, high=127,
                                                                          dtype=np.int8)))
def dot_int8(a, b):
    return lax.dot(a, b, preferred_element_type=jnp.int32)


@program("batched einsums 'bij,bjk->bik' (precision HIGHEST) and 'bij,bkj->bki' (dot_general with batch "
         "dims and a transposed result)", lambda r: (normal(r, 2, 3, 4), normal(r, 2, 4, 5), normal(r, 2, 5, 4)))
def batched_matmul(a, b, c):
    return (jnp.einsum("bij,bjk->bik", a, b, precision=lax.Precision.HIGHEST),
            jnp.einsum("bij,bkj->bki", a, c))


@program("lax.ragged_dot: [6,4] rows split into groups of 2 and 4, each multiplied by its own [4,3] matrix "
         "(jax expands it into masked dots on CPU)",
         lambda r: (normal(r, 6, 4), normal(r, 2, 4, 3), arr([2, 4], I32)))
def ragged_dot(lhs, rhs, group_sizes):
    return lax.ragged_dot(lhs, rhs, group_sizes)


@program("f16 and bf16 elementwise arithmetic and a f16 sum (XLA:CPU's handling of narrow floats)",
         lambda r: (normal(r, 8, dtype=np.float16), normal(r, 8, dtype=ml_dtypes.bfloat16)))
def narrow_float_arith(h, b):
    return h * h + jnp.exp(h), jnp.sum(h), b * b - jnp.tanh(b), jnp.sum(b)


# -- integers --------------------------------------------------------------------------


def _divrem_args(rng):
    a = arr([7, -7, 7, -7, 0, 5, -2147483648, -2147483648, 2147483647, 13], I32)
    b = arr([2, 2, -2, -2, 3, 0, -1, 0, -1, 0], I32)
    ua = arr([7, 4294967295, 0, 5, 100], U32)
    ub = arr([2, 3, 0, 0, 4294967295], U32)
    sa = arr([-128, 127, -5, 9], np.int8)
    sb = arr([-1, 0, 0, 4], np.int8)
    return a, b, ua, ub, sa, sb


@program("lax.div / lax.rem (C semantics) for s32, u32, s8 including division by zero and INT_MIN / -1, "
         "plus jnp.floor_divide / jnp.mod on s32", _divrem_args)
def int_div_rem(a, b, ua, ub, sa, sb):
    return (lax.div(a, b), lax.rem(a, b), lax.div(ua, ub), lax.rem(ua, ub), lax.div(sa, sb), lax.rem(sa, sb),
            jnp.floor_divide(a, b), jnp.mod(a, b))


@program("shift_left / shift_right_arithmetic / shift_right_logical with amounts <0, 0, 31, 32, 33, 100 on "
         "s32, and on u8", lambda r: (arr([1, -8, 0x40000001, -1, 12345, -2147483648, 7], I32),
                                     arr([-1, 0, 1, 31, 32, 33, 100], I32),
                                     arr([1, 0x80, 0xFF, 0x55, 3], np.uint8), arr([0, 1, 7, 8, 200], np.uint8)))
def int_shifts(x, s, u, us):
    return (lax.shift_left(x, s), lax.shift_right_arithmetic(x, s), lax.shift_right_logical(x, s),
            lax.shift_left(u, us), lax.shift_right_arithmetic(u, us), lax.shift_right_logical(u, us))


@program("population_count, clz, and/or/xor/not on s32, u16 and s8",
         lambda r: (arr([0, 1, -1, 0x7FFFFFFF, -2147483648, 0x00F0F000, 255], I32),
                    arr([0, 1, 0xFFFF, 0x8000, 0x0F0F, 3, 4], np.uint16), arr([0, -1, 1, -128, 127, 64, -3], np.int8)))
def int_bit_ops(x, u, s):
    return (lax.population_count(x), lax.clz(x), lax.population_count(u), lax.clz(u), lax.clz(s),
            x & 0x00FF00FF, x | 0x0F, x ^ -0x5556, ~x, ~u, u & 0x0FF0, s ^ -s)


@program("wrapping s32/u8 add, mul, neg, abs of INT_MIN, integer_pow (x**3), sign, min/max",
         lambda r: (arr([2147483647, -2147483648, 65536, -3, 0, 46341], I32), arr([1, -1, 65536, 7, 0, 46341], I32),
                    arr([250, 16, 0, 255, 128, 1], np.uint8)))
def int_arith_wrap(a, b, u):
    return a + b, a * b, -a, jnp.abs(a), a ** 3, jnp.sign(a), jnp.minimum(a, b), u + u, u * u, lax.integer_pow(u, 2)


# -- floats ----------------------------------------------------------------------------


@program("lax.max/min, jnp.fmax/fmin with NaN operands and signed zeros",
         lambda r: (arr([np.nan, 1.0, np.nan, 0.0, -0.0, -np.inf, 2.0]),
                    arr([1.0, np.nan, np.nan, -0.0, 0.0, np.inf, 2.0])))
def float_minmax_nan(x, y):
    return lax.max(x, y), lax.min(x, y), jnp.fmax(x, y), jnp.fmin(x, y)


@program("sign, round (half away from zero and half to even), floor, ceil, is_finite, nextafter towards "
         "+inf/-inf/0 on edge values", lambda r: (EDGE_F32,))
def float_rounding(x):
    return (jnp.sign(x), lax.round(x, lax.RoundingMethod.AWAY_FROM_ZERO),
            lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN), jnp.floor(x), jnp.ceil(x), lax.is_finite(x),
            lax.nextafter(x, jnp.full_like(x, jnp.inf)), lax.nextafter(x, jnp.full_like(x, -jnp.inf)),
            lax.nextafter(x, jnp.zeros_like(x)))


@program("IEEE special cases: x/0, 0/0, sqrt(-1), log(0), log(-1), exp overflow, fmod (lax.rem) signs, "
         "pow edge cases, atan2 of signed zeros",
         lambda r: (arr([1.0, -1.0, 0.0, -0.0, 5.5, -5.5, 100.0, np.inf, np.nan, 2.0]),
                    arr([0.0, 0.0, 0.0, -0.0, 2.0, 2.0, 0.5, 2.0, 0.0, -3.0])))
def float_special_values(x, y):
    return (x / y, jnp.sqrt(x), jnp.log(x), jnp.exp(x), lax.rem(x, y), lax.pow(x, y), lax.atan2(x, y),
            lax.atan2(y, x))


@program("HLO transcendentals: exp, expm1, log, log1p, tanh, sin, cos, tan, sqrt, rsqrt, cbrt, pow, atan2, "
         "and lax.logistic (which jax lowers as 1 / (1 + exp(-x)))", lambda r: (uniform(r, 9, low=0.05, high=3.0), normal(r, 9)))
def transcendental(x, y):
    return (jnp.exp(y), jnp.expm1(y), jnp.log(x), jnp.log1p(y * 0.5), jnp.tanh(y), lax.logistic(y), jnp.sin(y),
            jnp.cos(y), jnp.tan(y), jnp.sqrt(x), lax.rsqrt(x), jnp.cbrt(y), lax.pow(x, y), lax.atan2(y, x))


@program("functions jax expands in lowering (CHLO): asin, acos, atan, sinh, cosh, asinh, acosh, atanh, "
         "exp2, integer and float powers", lambda r: (uniform(r, 7, low=-0.95, high=0.95), uniform(r, 7, low=1.0, high=4.0)))
def transcendental_expanded(x, y):
    return (jnp.arcsin(x), jnp.arccos(x), jnp.arctan(x), jnp.sinh(x), jnp.cosh(x), jnp.arcsinh(y), jnp.arccosh(y),
            jnp.arctanh(x), jnp.exp2(y), x ** 5, y ** -2, lax.pow(y, jnp.int32(3)))


@program("lax.erf and lax.erfc", lambda r: (arr([-3.0, -1.0, -0.5, -0.0, 0.0, 0.1, 0.5, 1.0, 2.0, 4.0, np.inf,
                                                np.nan]),))
def special_erf(x):
    return lax.erf(x), lax.erfc(x)


@program("lax.erf_inv including the -1, 1 and out-of-domain endpoints",
         lambda r: (arr([-1.0, -0.999, -0.5, -0.0, 0.0, 0.3, 0.9, 0.99999, 1.0, 1.5, np.nan]),))
def special_erf_inv(x):
    return lax.erf_inv(x)


@program("lax.lgamma and lax.digamma at positive, negative, pole and large arguments",
         lambda r: (arr([0.5, 1.0, 1.5, 2.0, 3.7, 10.0, 100.0, 1e6, -0.5, -1.0, -2.5, 0.0, 1e-6]),))
def special_lgamma_digamma(x):
    return lax.lgamma(x), lax.digamma(x)


@program("lax.igamma / igammac (regularized incomplete gamma; series and continued fraction while loops)",
         lambda r: (arr([0.5, 1.0, 2.0, 5.0, 10.0, 3.0]), arr([0.3, 1.0, 3.5, 2.0, 12.0, 0.0])))
def special_igamma(a, x):
    return lax.igamma(a, x), lax.igammac(a, x)


@program("lax.bessel_i0e, bessel_i1e and lax.zeta(s, q)",
         lambda r: (arr([-5.0, -1.0, 0.0, 0.5, 2.0, 30.0]), arr([2.0, 3.0, 1.5, 4.0, 2.5, 6.0]),
                    arr([1.0, 0.5, 2.0, 3.0, 1.0, 0.25])))
def special_bessel_zeta(x, s, q):
    return lax.bessel_i0e(x), lax.bessel_i1e(x), lax.zeta(s, q)


@program("lax.reduce_precision to (5,10) [f16-like], (8,7) [bf16-like], (4,3) [e4m3-like] and (2,1) on edge "
         "values", lambda r: (EDGE_F32,))
def reduce_precision(x):
    return (lax.reduce_precision(x, 5, 10), lax.reduce_precision(x, 8, 7), lax.reduce_precision(x, 4, 3),
            lax.reduce_precision(x, 2, 1))


# -- conversions -----------------------------------------------------------------------


@program("convert f32 -> bf16, f16, f8e4m3fn, f8e5m2, s4, u8, s8, s32, u32, pred on edge values (NaN, inf, "
         "overflow, halfway cases, denormals)", lambda r: (EDGE_F32,))
def convert_from_f32(x):
    return tuple(x.astype(t) for t in (jnp.bfloat16, jnp.float16, jnp.float8_e4m3fn, jnp.float8_e5m2, jnp.int4,
                                       jnp.uint8, jnp.int8, jnp.int32, jnp.uint32, jnp.bool_))


@program("convert f32 -> the other narrow types: f8e4m3b11fnuz, f8e4m3fnuz, f8e5m2fnuz, f8e3m4, f8e4m3, "
         "f8e8m0fnu, f4e2m1fn, u4, s2, u2", lambda r: (EDGE_F32,))
def convert_exotic_narrow(x):
    return tuple(x.astype(getattr(ml_dtypes, n)) for n in (
        "float8_e4m3b11fnuz", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e3m4", "float8_e4m3", "float8_e8m0fnu",
        "float4_e2m1fn", "uint4", "int2", "uint2"))


def _narrow_inputs(rng):
    x = normal(rng, 8, scale=4.0)
    return (x.astype(ml_dtypes.bfloat16), x.astype(np.float16), x.astype(ml_dtypes.float8_e4m3fn),
            x.astype(ml_dtypes.float8_e5m2), np.clip(np.round(x), -8, 7).astype(ml_dtypes.int4),
            np.clip(np.round(x), 0, 15).astype(ml_dtypes.uint4))


@program("narrow-typed inputs (bf16, f16, f8e4m3fn, f8e5m2, s4, u4) converted to f32 and across narrow "
         "types (bf16->f16, f16->f8e5m2, f8e4m3fn->bf16, s4->s8, u4->s4)", _narrow_inputs)
def convert_narrow_inputs(b, h, e4, e5, s4, u4):
    return (b.astype(F32), h.astype(F32), e4.astype(F32), e5.astype(F32), s4.astype(F32), u4.astype(F32),
            b.astype(jnp.float16), h.astype(jnp.float8_e5m2), e4.astype(jnp.bfloat16), s4.astype(jnp.int8),
            u4.astype(jnp.int4))


@program("integer conversions: s32 -> s8, u8, s16, u16, u32, pred, f16, bf16; u32 -> s32, f32; f16 -> s32",
         lambda r: (arr([0, 1, -1, 127, 128, -129, 255, 256, 65535, 65536, -2147483648, 2147483647, 16777217], I32),
                    arr([0, 1, 2147483648, 4294967295, 16777217, 123456789], U32),
                    arr([np.inf, -np.inf, np.nan, 65504, -0.5, 1.5], np.float16)))
def convert_integers(x, u, h):
    return (x.astype(jnp.int8), x.astype(jnp.uint8), x.astype(jnp.int16), x.astype(jnp.uint16),
            x.astype(jnp.uint32), x.astype(jnp.bool_), x.astype(jnp.float16), x.astype(jnp.bfloat16),
            u.astype(jnp.int32), u.astype(F32), h.astype(jnp.int32))


@program("64-bit types (under jax_enable_x64): f64 arithmetic and dot, f64 <-> f32/s64/u64 conversions, "
         "s64 wrapping, c128 multiply", lambda r: (normal(r, 5, dtype=np.float64) * 1e3,
                                                   arr([-1, 2**40, -2**63, 2**63 - 1, 7], np.int64),
                                                   arr([0, 1, 2**64 - 1, 2**53 + 1, 3], np.uint64),
                                                   _complex(r, 3).astype(np.complex128)), x64=True)
def x64_types(d, s, u, c):
    return (d * d + 1.0 / 3.0, d @ d, d.astype(jnp.float32), d.astype(jnp.int64), s + s, s.astype(jnp.int32),
            s.astype(jnp.float64), u.astype(jnp.float64), u.astype(jnp.float32), u * u, c * c, jnp.abs(c))


@program("lax.bitcast_convert_type across widths: f32 -> u8[...,4], u8[...,4] -> f32, f32 -> s32, "
         "f32 -> bf16[...,2], u16 -> bf16, f16[...,2] -> u32, s32 -> f16[...,2]",
         lambda r: (arr([1.0, -2.5, np.inf]), ints(r, 2, 4, low=0, high=255, dtype=np.uint8),
                    arr([0x3F80, 0x7FC0, 0x8000], np.uint16), arr([[1.0, 2.0], [-0.0, np.nan]], np.float16),
                    arr([0x3C003C00, -1, 0x7BFF0001], I32)))
def bitcast_convert(f, b, u16, h, s):
    return (lax.bitcast_convert_type(f, jnp.uint8), lax.bitcast_convert_type(b, F32),
            lax.bitcast_convert_type(f, I32), lax.bitcast_convert_type(f, jnp.bfloat16),
            lax.bitcast_convert_type(u16, jnp.bfloat16), lax.bitcast_convert_type(h, jnp.uint32),
            lax.bitcast_convert_type(s, jnp.float16))


# -- shape manipulation ----------------------------------------------------------------


@program("iota variants: s32[5], broadcasted f32 iota along dim 1 of [3,4], u8 iota along dim 0 of [2,3,2], "
         "jnp.arange(2, 5, 0.5); added to inputs so they are not constant-folded away",
         lambda r: (normal(r, 3, 4), arr(3, I32)))
def iota(x, k):
    return (lax.iota(I32, 5) * k, lax.broadcasted_iota(F32, (3, 4), 1) + x,
            lax.broadcasted_iota(jnp.uint8, (2, 3, 2), 0) + k.astype(jnp.uint8), jnp.arange(2.0, 5.0, 0.5) * x[0, 0])


@program("concatenate along axis 1 (widths 2, 0 and 3) and along axis 0",
         lambda r: (normal(r, 3, 2), normal(r, 3, 0), normal(r, 3, 3), normal(r, 1, 2)))
def concatenate(a, e, b, c):
    return jnp.concatenate([a, e, b], axis=1), jnp.concatenate([a, c, a], axis=0)


@program("lax.pad with negative low/high edges and interior padding: [(-1,2,1),(2,-3,0)] and [(1,1,2)]",
         lambda r: (normal(r, 4, 5), normal(r, 3)))
def pad(x, v):
    return lax.pad(x, F32(0.5), [(-1, 2, 1), (2, -3, 0)]), lax.pad(v, F32(-1), [(1, 1, 2)])


@program("transpose of [2,3,4] with permutation (2,0,1), and a matrix transpose feeding an add",
         lambda r: (normal(r, 2, 3, 4), normal(r, 3, 5)))
def transpose(x, m):
    return jnp.transpose(x, (2, 0, 1)), m.T + 1.0


@program("lax.rev over dims (0,2) of a [3,2,4] and over dim 0 of a vector",
         lambda r: (normal(r, 3, 2, 4), ints(r, 5)))
def reverse(x, k):
    return lax.rev(x, (0, 2)), lax.rev(k, (0,))


@program("lax.broadcast_in_dim [3,1] -> [2,3,4] (dims (1,2), a size-1 dim expanded), scalar broadcast, "
         "numpy-style broadcasting", lambda r: (normal(r, 3, 1), arr(2.5), normal(r, 4)))
def broadcast_in_dim(x, s, v):
    return lax.broadcast_in_dim(x, (2, 3, 4), (1, 2)), lax.broadcast_in_dim(s, (2, 2), ()), x * v


@program("strided lax.slice, reshape, squeeze, expand_dims and a reshape that splits dims",
         lambda r: (normal(r, 4, 6), normal(r, 1, 3, 1)))
def slice_reshape(x, y):
    return (lax.slice(x, (1, 0), (4, 6), (2, 3)), x.reshape(3, 8), jnp.squeeze(y), jnp.expand_dims(y, 0),
            x.reshape(2, 2, 3, 2).sum(axis=(1, 3)))


@program("lax.select with a pred array, jnp.where with broadcasting, lax.clamp with array bounds "
         "(including lo > hi) and scalar bounds",
         lambda r: (normal(r, 6) > 0, normal(r, 6), normal(r, 6), arr([-1, 0, 1, 2, 0.5, 3.0]),
                    arr([1, 1, 0, 3, 0.5, -3.0]), normal(r, 6, scale=3.0)))
def select_clamp(p, a, b, lo, hi, x):
    return lax.select(p, a, b), jnp.where(p, a, 0.0), lax.clamp(lo, x, hi), lax.clamp(F32(-1), x, F32(1))


@program("a program with zero-size arrays: f32[0,3] concatenated, reduced (sum -> zeros, max -> -inf) and "
         "broadcast", lambda r: (np.zeros((0, 3), F32), normal(r, 2, 3)))
def empty_arrays(e, y):
    return jnp.concatenate([e, y]), e.sum(axis=0), e.max(axis=0, initial=-jnp.inf), e * 2.0


@program("scalar-only program mixing f32, s32 and pred scalars", lambda r: (arr(1.5), arr(-4, I32), arr(True,
                                                                                                    np.bool_)))
def scalar_program(x, n, p):
    y = jnp.where(p, x * n, x - n)
    return y, (n * n) % 3, y > 0


@program("nested pytree outputs {'b': (x+1, [x*2, n]), 'a': sum(x)}: results flattened depth first in "
         "sorted-key order (a, b0, b1, b2)", lambda r: (normal(r, 3), arr(5, I32)))
def nested_outputs(x, n):
    return {"b": (x + 1.0, [x * 2.0, n]), "a": jnp.sum(x)}


@program("jit with donate_argnums=(0,): the state buffer is donated (input_output_alias in the module)",
         lambda r: (normal(r, 6), normal(r, 6)), donate_argnums=(0,))
def donated_update(state, delta):
    return state + 0.1 * delta, jnp.sum(delta)


@program("one-device collectives through jax.shard_map: psum and pmax (all-reduce), all_gather, ppermute "
         "(collective-permute), psum_scatter (reduce-scatter), axis_index (partition-id); all_to_all over the "
         "size-1 axis is elided by jax",
         lambda r: (normal(r, 4, 2),))
def collectives(x):
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("i",))
    P = jax.sharding.PartitionSpec

    def body(x):
        return (lax.psum(x, "i"), lax.pmax(x, "i"), lax.all_gather(x, "i"), lax.ppermute(x, "i", [(0, 0)]),
                lax.psum_scatter(x, "i", tiled=True), lax.all_to_all(x, "i", 0, 0, tiled=True),
                lax.axis_index("i"))

    return jax.shard_map(body, mesh=mesh, in_specs=P(), out_specs=P(), check_vma=False)(x)


# -- complex and reductions --------------------------------------------------------------


@program("c64 arithmetic: mul, div (including by 0), abs (with huge parts), exp, log, sqrt, conj, real, "
         "imag, lax.complex, angle",
         lambda r: (np.concatenate([_complex(r, 4), arr([3e30 + 4e30j, 1 + 1j], np.complex64)]),
                    np.concatenate([_complex(r, 4), arr([0j, 0j], np.complex64)]), normal(r, 6), normal(r, 6)))
def complex_arith(a, b, x, y):
    return (a * b, a / b, jnp.abs(a), jnp.exp(a), jnp.log(a), jnp.sqrt(a), jnp.conj(a), jnp.real(a),
            jnp.imag(a), lax.complex(x, y), jnp.angle(a))


@program("reductions: sum over axis 0, max/min over axis 1 (with a NaN), prod, mean, int32 sum, all/any, "
         "and/or/xor reductions", lambda r: (np.where(np.arange(20).reshape(4, 5) == 7, np.nan,
                                                      normal(r, 4, 5)).astype(F32),
                                             ints(r, 4, 5), normal(r, 4, 5) > 0, ints(r, 6, low=0, high=1000,
                                                                                         dtype=U32)))
def reductions(x, k, p, u):
    return (x.sum(axis=0), x.max(axis=1), x.min(axis=1), x.prod(axis=1), x.mean(), k.sum(), p.all(axis=1),
            p.any(axis=0), lax.reduce_and(u, (0,)), lax.reduce_or(u, (0,)), lax.reduce_xor(u, (0,)))


@program("jnp.argmax / argmin along axis 1 with ties and NaN (variadic reduce over (value, index))",
         lambda r: (arr([[1, 3, 3, 0], [np.nan, 1, 2, np.nan], [-1, -1, -1, -1], [0, 5, np.nan, 9]]),))
def argmax(x):
    return jnp.argmax(x, axis=1), jnp.argmin(x, axis=1)


@program("a hand-written two-operand lax.reduce over (values, weights): per row, the value whose weight is "
         "largest (ties keep the left operand) and that weight", lambda r: (normal(r, 3, 5), np.round(uniform(r, 3, 5),
                                                                                                     1)))
def reduce_variadic(x, w):
    def comp(a, b):
        take_a = a[1] >= b[1]
        return jnp.where(take_a, a[0], b[0]), jnp.where(take_a, a[1], b[1])

    return lax.reduce((x, w), (F32(jnp.nan), F32(-jnp.inf)), comp, (1,))


@program("jax.nn.logsumexp over the last axis, including an all -inf row",
         lambda r: (np.concatenate([normal(r, 3, 6, scale=10.0), np.full((1, 6), -np.inf, F32)]),))
def logsumexp(x):
    return jax.nn.logsumexp(x, axis=-1)


# --------------------------------------------------------------------------------------
# Writing fixtures
# --------------------------------------------------------------------------------------

_HLO_TYPE = {
    "bool": "pred", "int8": "s8", "int16": "s16", "int32": "s32", "int64": "s64", "uint8": "u8", "uint16": "u16",
    "uint32": "u32", "uint64": "u64", "float16": "f16", "float32": "f32", "float64": "f64", "complex64": "c64",
    "complex128": "c128", "bfloat16": "bf16", "int4": "s4", "uint4": "u4", "int2": "s2", "uint2": "u2",
    "float8_e4m3fn": "f8e4m3fn", "float8_e5m2": "f8e5m2", "float8_e4m3b11fnuz": "f8e4m3b11fnuz",
    "float8_e4m3fnuz": "f8e4m3fnuz", "float8_e5m2fnuz": "f8e5m2fnuz", "float8_e3m4": "f8e3m4",
    "float8_e4m3": "f8e4m3", "float8_e8m0fnu": "f8e8m0fnu", "float4_e2m1fn": "f4e2m1fn",
}

_INSTR_RE = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*(.*)$")
_OPCODE_RE = re.compile(r"\s*([a-z][a-z0-9\-]*)\(")
_TARGET_RE = re.compile(r'custom_call_target="([^"]*)"')


def _skip_shape(text: str) -> str:
    """Return the text after the leading shape of an instruction's right-hand side."""
    if text.startswith("("):
        depth = 0
        for i, ch in enumerate(text):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0:
                return text[i + 1:]
        return ""
    m = re.match(r"\S+", text)
    return text[m.end():] if m else ""


def hlo_opcodes(text: str) -> list[str]:
    """The set of opcodes of all instructions in HLO text, sorted."""
    ops = set()
    for line in text.splitlines():
        m = _INSTR_RE.match(line)
        if not m:
            continue
        m2 = _OPCODE_RE.match(_skip_shape(m.group(1)))
        if m2:
            ops.add(m2.group(1))
    return sorted(ops)


def _is_ml_dtype(dtype: np.dtype) -> bool:
    # Not dtype.kind: ml_dtypes reports some of its types (e.g. float8_e5m2) with kind "f".
    return dtype.type.__module__.split(".")[0] == "ml_dtypes"


def _npz_entries(key: str, a: np.ndarray) -> dict[str, np.ndarray]:
    if _is_ml_dtype(a.dtype):
        if getattr(ml_dtypes, a.dtype.name, None) is not a.dtype.type:
            raise TypeError(f"{key}: ml_dtypes has no dtype named {a.dtype.name!r}")
        raw = {1: np.uint8, 2: np.uint16}[a.dtype.itemsize]
        return {key: np.asarray(a, order="C").view(raw), f"__dtype__{key}": np.array(a.dtype.name)}
    if a.dtype.kind not in "biufc":
        raise TypeError(f"cannot store dtype {a.dtype} for {key}")
    return {key: np.asarray(a, order="C")}


def write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Write an .npz byte-for-byte deterministically (fixed zip timestamps, sorted by insertion)."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for key, a in arrays.items():
            for k, v in _npz_entries(key, a).items():
                buf = io.BytesIO()
                np.lib.format.write_array(buf, v, allow_pickle=False)
                info = zipfile.ZipInfo(k + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = 0o644 << 16
                zf.writestr(info, buf.getvalue())


def load_npz(path) -> dict[str, np.ndarray]:
    """Read a fixture .npz, turning raw-bit entries back into their ml_dtypes arrays."""
    with np.load(path, allow_pickle=False) as z:
        out = {}
        for k in z.files:
            if k.startswith("__dtype__"):
                continue
            a = z[k]
            tag = f"__dtype__{k}"
            if tag in z.files:
                a = a.view(getattr(ml_dtypes, str(z[tag])))
            out[k] = a
        return out


def _describe(a: np.ndarray) -> dict:
    return {"dtype": a.dtype.name, "hlo_type": _HLO_TYPE[a.dtype.name], "shape": list(a.shape)}


def run_program(p: Program, out_dir: Path) -> dict:
    rng = np.random.default_rng(p.seed)
    args = tuple(np.asarray(a) for a in p.make_args(rng))
    with jax.enable_x64(p.x64):
        lowered = jax.jit(p.fn, keep_unused=True, **p.jit_kwargs).lower(*args)
        pre = lowered.as_text(dialect="hlo")
        compiled = lowered.compile()
        post = compiled.as_text()
        results = compiled(*[np.array(a, copy=True) for a in args])
    outs = [np.asarray(o) for o in jax.tree_util.tree_leaves(results)]

    if not pre.endswith("\n"):
        pre += "\n"
    if not post.endswith("\n"):
        post += "\n"
    (out_dir / f"{p.name}.pre.hlo").write_text(pre)
    (out_dir / f"{p.name}.post.hlo").write_text(post)
    arrays = {f"arg{i}": a for i, a in enumerate(args)}
    arrays.update({f"out{i}": o for i, o in enumerate(outs)})
    write_npz(out_dir / f"{p.name}.npz", arrays)
    back = load_npz(out_dir / f"{p.name}.npz")
    for k, a in arrays.items():
        b = back[k]
        if b.dtype != a.dtype or b.shape != a.shape or b.tobytes() != np.asarray(a, order="C").tobytes():
            raise RuntimeError(f"{p.name}: {k} does not round-trip through the .npz")

    n_params = len(re.findall(r"\bparameter\(\d+\)", pre.split("ENTRY", 1)[1].split("\n}", 1)[0]))
    if n_params != len(args):
        raise RuntimeError(f"{p.name}: entry has {n_params} parameters but {len(args)} inputs were stored")
    return {
        "name": p.name,
        "description": p.description,
        "seed": p.seed,
        "x64": p.x64,
        "jit_options": {"keep_unused": True, **{k: list(v) if isinstance(v, tuple) else v
                                                for k, v in p.jit_kwargs.items()}},
        "jax_version": jax.__version__,
        "jaxlib_version": jaxlib.__version__,
        "inputs": [{"key": f"arg{i}", **_describe(a)} for i, a in enumerate(args)],
        "outputs": [{"key": f"out{i}", **_describe(o)} for i, o in enumerate(outs)],
        "pre_opcodes": hlo_opcodes(pre),
        "post_opcodes": hlo_opcodes(post),
        "pre_custom_call_targets": sorted(set(_TARGET_RE.findall(pre))),
        "post_custom_call_targets": sorted(set(_TARGET_RE.findall(post))),
    }


def _summary(entry: dict, out_dir: Path) -> str:
    size = sum((out_dir / f"{entry['name']}{ext}").stat().st_size for ext in (".pre.hlo", ".post.hlo", ".npz"))
    ins = ",".join(f"{d['hlo_type']}{d['shape']}".replace(" ", "") for d in entry["inputs"]) or "-"
    return (f"{entry['name']:<26} {len(entry['inputs'])} in / {len(entry['outputs'])} out  "
            f"pre {len(entry['pre_opcodes']):>2} ops, post {len(entry['post_opcodes']):>2} ops  "
            f"{size / 1024:6.1f} KiB  [{ins}]")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output directory (default: %(default)s)")
    ap.add_argument("--only", default=None, help="comma-separated program names to regenerate")
    ap.add_argument("--list", action="store_true", help="list the corpus and exit")
    args = ap.parse_args(argv)

    if args.list:
        for p in CORPUS:
            print(f"{p.name:<26} {p.description}")
        return 0

    by_name = {p.name: p for p in CORPUS}
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in by_name]
        if unknown:
            print(f"error: unknown program(s): {', '.join(unknown)}", file=sys.stderr)
            return 2
        selected = [by_name[n] for n in names]
    else:
        selected = list(CORPUS)

    out_dir = args.out
    out_dir.mkdir(parents=True, exist_ok=True)
    if jax.default_backend() != "cpu":
        print(f"error: fixtures are XLA:CPU's; jax's default backend is {jax.default_backend()}", file=sys.stderr)
        return 2

    entries, failures = {}, []
    for p in selected:
        try:
            entries[p.name] = run_program(p, out_dir)
        except Exception:  # noqa: BLE001 - report every failing program by name
            failures.append(p.name)
            print(f"FAILED {p.name}:", file=sys.stderr)
            traceback.print_exc()
            continue
        print(_summary(entries[p.name], out_dir))

    if failures:
        print(f"error: {len(failures)} program(s) failed: {', '.join(failures)}; MANIFEST.json not updated",
              file=sys.stderr)
        return 1

    manifest_path = out_dir / "MANIFEST.json"
    manifest = {}
    if args.only and manifest_path.exists():
        manifest = {f["name"]: f for f in json.loads(manifest_path.read_text())["fixtures"]}
    manifest.update(entries)
    manifest = {n: manifest[n] for n in by_name if n in manifest}  # corpus order, drop retired programs
    if not args.only:
        for f in sorted(out_dir.iterdir()):
            stem = f.name.split(".", 1)[0]
            if f.name.endswith((".pre.hlo", ".post.hlo", ".npz")) and stem not in by_name:
                print(f"removing stale {f.name}")
                f.unlink()
    doc = {
        "generator": "tools/dump_jax_fixtures.py",
        "jax_version": jax.__version__,
        "jaxlib_version": jaxlib.__version__,
        "numpy_version": np.__version__,
        "ml_dtypes_version": ml_dtypes.__version__,
        "backend": "cpu",
        "fixtures": list(manifest.values()),
    }
    manifest_path.write_text(json.dumps(doc, indent=1) + "\n")
    total = sum(f.stat().st_size for f in out_dir.iterdir() if f.is_file())
    print(f"{len(entries)} fixture(s) written to {out_dir}; {len(manifest)} in MANIFEST.json; "
          f"directory size {total / 1024:.1f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())

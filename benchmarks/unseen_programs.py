"""Programs outside the ``xlapy bench`` suite (no case was tuned on them): jax functions of
common model pieces - attention with a causal mask, a GRU scan, depthwise 1-D convolution,
pooling and its gradient, einsums with transposed outputs, column statistics, one-hot
cross entropy, segment sums, argsort, cumulative products and maxima, reflect padding, an
integer hash, a bf16 MLP layer, a loop of dynamic slices and dots, an FFT magnitude,
random normals, logsumexp over rows, a bf16 layer-norm gradient - each lowered by jax,
compiled by xlapy's CPU backend and run against XLA:CPU (``jax.jit``) in one process.

    PYTHONPATH=. python benchmarks/unseen_programs.py [a | b | c | d | e | all | name,...]

Set ``a`` (the default) is the first twenty; set ``b``, twenty-nine more written on
2026-11-29 after set a had been worked on (sorts, top-k, LAPACK-backed linalg, strided and
transposed convolutions, RNG, while loops with convergence tests, matrix-vector loops,
complex FFTs, int8 matmuls, histograms, per-example gradients, associative scans, image
resizing, bf16 attention), to find what set a no longer shows; set ``c``, twenty-nine more
written in the session after that (column softmax, batch norm, odd-sized matmuls, loops of
dynamic slices, bf16 reductions and layer norm, int32/f16/complex matmuls, many-operand
concatenates, batched 3x3 products, QR/eigh/SVD, segment max, one-hot matmuls, KV-cache
updates in a scan, int8 elementwise, top-k of wide rows); set ``d``, twenty variants of the
programs the suite's cases stand for (in-place loops, scans, scatters, top-k, recurrent
gradients, per-call cost, gathers, batched products, CNN and transformer steps, argmax,
matmuls) at other sizes and layouts, written on 2026-11-29 after the others; set ``e``,
twenty-three more written in the session after that (int8 layers and an int8 product with
its rhs stored along k, bf16 products and softmax, odd-sized products, RMS norm, tanh-GELU in
bf16, a scan of tiny steps, a Newton iteration in a while loop, a causal depthwise 1-D
convolution, max-pooling and an average-pool gradient, cross entropy over 32k classes,
bf16 row sorts, argsort of 1M integers, column updates in a loop, vmapped windows, a
scatter of unique indices, bf16 column variance, causal bf16 attention, complex phases,
random bits, integer cumulative sums).

Prints per program xlapy's and XLA's median times, their ratio, xlapy's cold compile time
and the largest difference from XLA's result relative to its largest magnitude (gru_scan
and layernorm_bwd_bf16 show large ones on every backend: the GRU is chaotic in f32 and the
gradient is a cancellation near zero; xlapy's interpreter agrees with its backend there),
then the geometric mean of the ratios. Timings: medians of up to 30 runs after a warm-up.
"""

import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from xlapy.runtime import Client

rng = np.random.default_rng(0)


def f32(*s):
    return rng.standard_normal(s).astype(np.float32)


P = {}


def prog(name, *args):
    def deco(f):
        P[name] = (f, args)
        return f
    return deco


@prog('attention_causal', f32(8, 256, 64), f32(8, 256, 64), f32(8, 256, 64))
def _(q, k, v):
    s = jnp.einsum('hqd,hkd->hqk', q, k) / 8.0
    mask = jnp.tril(jnp.ones((256, 256), bool))
    s = jnp.where(mask, s, -1e9)
    return jnp.einsum('hqk,hkd->hqd', jax.nn.softmax(s, -1), v)

@prog('gru_scan', f32(64, 16, 128), f32(128, 384), f32(128, 384), f32(16, 128))
def _(xs, wx, wh, h0):
    def step(h, x):
        gx = x @ wx; gh = h @ wh
        r = jax.nn.sigmoid(gx[:, :128] + gh[:, :128]); z = jax.nn.sigmoid(gx[:, 128:256] + gh[:, 128:256])
        n = jnp.tanh(gx[:, 256:] + r * gh[:, 256:])
        h = (1 - z) * n + z * h
        return h, h
    return lax.scan(step, h0, xs)[1]

@prog('conv1d_depthwise', f32(16, 1024, 128), f32(7, 1, 128))
def _(x, k):
    return lax.conv_general_dilated(x, k, (1,), 'SAME', dimension_numbers=('NWC', 'WIO', 'NWC'), feature_group_count=128)

@prog('avg_pool', f32(32, 64, 64, 32))
def _(x):
    return lax.reduce_window(x, 0.0, lax.add, (1, 3, 3, 1), (1, 2, 2, 1), 'SAME') / 9.0

@prog('einsum_transpose', f32(16, 8, 128, 64), f32(8, 64, 64))
def _(a, b):
    return jnp.einsum('bhqd,hde->bqhe', a, b)

@prog('transpose4d', f32(32, 128, 16, 64))
def _(x):
    return jnp.transpose(x, (0, 2, 1, 3)) * 2.0

@prog('col_stats', f32(8192, 512))
def _(x):
    m = x.mean(0); v = x.var(0)
    return (x - m) / jnp.sqrt(v + 1e-5)

@prog('xent_onehot', f32(4096, 1000), np.random.default_rng(1).integers(0, 1000, 4096).astype(np.int32))
def _(logits, labels):
    oh = jax.nn.one_hot(labels, 1000)
    return -(jax.nn.log_softmax(logits) * oh).sum(-1).mean()

@prog('segment_sum', f32(200000, 64), np.sort(np.random.default_rng(2).integers(0, 1000, 200000)).astype(np.int32))
def _(x, seg):
    return jax.ops.segment_sum(x, seg, num_segments=1000)

@prog('argsort_rows', f32(1024, 1024))
def _(x):
    return jnp.argsort(x, axis=-1)

@prog('cumprod_cummax', f32(512, 2048))
def _(x):
    return jnp.cumprod(1 + 0.001 * x, axis=1), lax.cummax(x, axis=1)

@prog('pad_slice_image', f32(16, 3, 256, 256))
def _(x):
    p = jnp.pad(x, ((0, 0), (0, 0), (4, 4), (4, 4)), mode='reflect')
    return p[:, :, 2:-2, 2:-2] + p[:, :, :-4, 4:]

@prog('int_hash', np.arange(1 << 22, dtype=np.uint32))
def _(x):
    for _ in range(4):
        x = (x ^ (x >> 16)) * np.uint32(0x45d9f3b)
    return x

@prog('gelu_bf16_mlp', f32(512, 1024).astype(jnp.bfloat16), f32(1024, 2048).astype(jnp.bfloat16))
def _(x, w):
    return jax.nn.gelu(x @ w)

@prog('rnn_input_proj_loop', f32(256, 64, 256), f32(256, 256))
def _(xs, w):
    def body(i, acc):
        return acc + jnp.tanh(lax.dynamic_index_in_dim(xs, i, keepdims=False) @ w)
    return lax.fori_loop(0, 256, body, jnp.zeros((64, 256), jnp.float32))

@prog('fft_rows', f32(1024, 1024))
def _(x):
    return jnp.abs(jnp.fft.rfft(x, axis=-1))

@prog('random_normal', np.array([0, 42], np.uint32))
def _(key):
    return jax.random.normal(jax.random.wrap_key_data(key, impl='threefry2x32'), (2048, 2048))

@prog('max_pool_grad', f32(32, 32, 32, 64))
def _(x):
    def f(x): return lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), 'VALID').sum()
    return jax.grad(f)(x)

@prog('logsumexp_axis0', f32(4096, 2048))
def _(x):
    return jax.nn.logsumexp(x, axis=0)

@prog('layernorm_bwd_bf16', f32(4096, 1024).astype(jnp.bfloat16))
def _(x):
    def f(x):
        xf = x.astype(jnp.float32)
        m = xf.mean(-1, keepdims=True); v = ((xf - m) ** 2).mean(-1, keepdims=True)
        return ((xf - m) * lax.rsqrt(v + 1e-5)).astype(jnp.bfloat16).astype(jnp.float32).sum()
    return jax.grad(f)(x)

def in_set(members):
    """``prog`` that also lists the program's name in ``members`` (a later set, written
    after the earlier ones had been worked on)."""
    def register(name, *args):
        members.append(name)
        return prog(name, *args)
    return register


SET_B = []
prog_b = in_set(SET_B)



@prog_b('sort_1d', f32(1 << 20))
def _(x):
    return jnp.sort(x)

@prog_b('top_k_rows', f32(2048, 4096))
def _(x):
    return lax.top_k(x, 8)

_a = f32(64, 64, 64); _spd = (_a @ _a.transpose(0, 2, 1) + 64 * np.eye(64, dtype=np.float32)).astype(np.float32)
@prog_b('cholesky_batch', _spd)
def _(a):
    return jnp.linalg.cholesky(a)

@prog_b('solve_batch', f32(32, 128, 128) + 16 * np.eye(128, dtype=np.float32), f32(32, 128, 4))
def _(a, b):
    return jnp.linalg.solve(a, b)

@prog_b('take_along', f32(4096, 512), np.random.default_rng(3).integers(0, 512, (4096, 16)).astype(np.int32))
def _(x, i):
    return jnp.take_along_axis(x, i, axis=1)

@prog_b('conv2d_stride2', f32(32, 56, 56, 64), f32(3, 3, 64, 128))
def _(x, k):
    return jax.nn.relu(lax.conv_general_dilated(x, k, (2, 2), 'SAME', dimension_numbers=('NHWC', 'HWIO', 'NHWC')))

@prog_b('conv_transpose', f32(16, 32, 32, 64), f32(4, 4, 64, 32))
def _(x, k):
    return lax.conv_transpose(x, k, (2, 2), 'SAME', dimension_numbers=('NHWC', 'HWIO', 'NHWC'))

@prog_b('cumsum_axis0', f32(4096, 256))
def _(x):
    return jnp.cumsum(x, axis=0)

@prog_b('dropout', np.array([0, 7], np.uint32), f32(4096, 1024))
def _(key, x):
    keep = jax.random.bernoulli(jax.random.wrap_key_data(key, impl='threefry2x32'), 0.9, x.shape)
    return jnp.where(keep, x / 0.9, 0.0)

@prog_b('newton_while', np.abs(f32(1 << 20)) + 1.0)
def _(a):
    def cond(s):
        y, it = s
        return (jnp.max(jnp.abs(y * y - a)) > 1e-3) & (it < 100)
    def body(s):
        y, it = s
        return 0.5 * (y + a / y), it + 1
    return lax.while_loop(cond, body, (a, 0))[0]

@prog_b('argmax_axis0', f32(4096, 1024))
def _(x):
    return jnp.argmax(x, axis=0)

@prog_b('power_iter', f32(2048, 2048), f32(2048))
def _(a, v):
    def body(i, v):
        w = a @ v
        return w / jnp.linalg.norm(w)
    return lax.fori_loop(0, 50, body, v)

@prog_b('tiny_batched_mm', f32(16384, 8, 8), f32(16384, 8, 8))
def _(a, b):
    return jnp.einsum('bij,bjk->bik', a, b)

@prog_b('fft2_complex', (f32(256, 256) + 1j * f32(256, 256)).astype(np.complex64))
def _(x):
    return jnp.fft.fft2(x) * jnp.conj(x)

@prog_b('int8_matmul', np.random.default_rng(4).integers(-128, 127, (512, 1024)).astype(np.int8), np.random.default_rng(5).integers(-128, 127, (1024, 512)).astype(np.int8))
def _(a, b):
    return lax.dot(a, b, preferred_element_type=jnp.int32)

@prog_b('histogram', np.random.default_rng(6).integers(0, 256, 1 << 20).astype(np.int32))
def _(b):
    return jnp.zeros(256, jnp.int32).at[b].add(1)

@prog_b('embedding_2d', f32(32000, 512), np.random.default_rng(7).integers(0, 32000, (64, 128)).astype(np.int32))
def _(t, i):
    return t[i]

@prog_b('per_example_grads', f32(64, 256), f32(256, 256), f32(256, 10), np.random.default_rng(8).integers(0, 10, 64).astype(np.int32))
def _(x, w1, w2, y):
    def loss(ws, x, y):
        h = jnp.tanh(x @ ws[0]); l = jax.nn.log_softmax(h @ ws[1])
        return -l[y]
    return jax.vmap(jax.grad(loss), (None, 0, 0))((w1, w2), x, y)

@prog_b('assoc_scan', f32(64, 4096))
def _(x):
    return lax.associative_scan(jnp.add, x, axis=1)

@prog_b('searchsorted', np.sort(f32(65536)), f32(1 << 20))
def _(s, q):
    return jnp.searchsorted(s, q)

@prog_b('image_resize', f32(8, 128, 128, 3))
def _(x):
    return jax.image.resize(x, (8, 256, 256, 3), 'bilinear')

@prog_b('roll_flip', f32(256, 4096))
def _(x):
    return jnp.roll(x, 3, axis=1) + jnp.flip(x, 0)

@prog_b('mean_middle', f32(64, 1024, 64))
def _(x):
    return x.mean(1)

@prog_b('nll_take', f32(4096, 1000), np.random.default_rng(9).integers(0, 1000, 4096).astype(np.int32))
def _(l, y):
    return -jnp.take_along_axis(jax.nn.log_softmax(l), y[:, None], 1).mean()

@prog_b('inv', f32(256, 256) + 16 * np.eye(256, dtype=np.float32))
def _(a):
    return jnp.linalg.inv(a)

@prog_b('sort_kv', f32(1024, 1024), f32(1024, 1024))
def _(k, v):
    return lax.sort((k, v), dimension=1, num_keys=1)

@prog_b('softplus_f16', f32(2048, 2048).astype(np.float16))
def _(x):
    return jax.nn.softplus(x) * x

@prog_b('conv1d_dilated', f32(16, 2048, 64), f32(3, 64, 64))
def _(x, k):
    return lax.conv_general_dilated(x, k, (1,), 'SAME', rhs_dilation=(4,), dimension_numbers=('NWC', 'WIO', 'NWC'))

@prog_b('mha_bf16', f32(4, 128, 512).astype(jnp.bfloat16), f32(512, 1536).astype(jnp.bfloat16), f32(512, 512).astype(jnp.bfloat16))
def _(x, wqkv, wo):
    q, k, v = jnp.split(x @ wqkv, 3, -1)
    sh = lambda t: t.reshape(4, 128, 8, 64).transpose(0, 2, 1, 3)
    q, k, v = sh(q), sh(k), sh(v)
    p = jax.nn.softmax(jnp.einsum('bhqd,bhkd->bhqk', q, k).astype(jnp.float32) / 8.0).astype(jnp.bfloat16)
    o = jnp.einsum('bhqk,bhkd->bhqd', p, v).transpose(0, 2, 1, 3).reshape(4, 128, 512)
    return o @ wo

SET_C = []
prog_c = in_set(SET_C)


@prog_c('softmax_axis0', f32(4096, 512))
def _(x):
    return jax.nn.softmax(x, axis=0)

@prog_c('batchnorm_train', f32(32, 28, 28, 128), f32(128), f32(128))
def _(x, g, b):
    m = x.mean((0, 1, 2)); v = ((x - m) ** 2).mean((0, 1, 2))
    return (x - m) * lax.rsqrt(v + 1e-5) * g + b

@prog_c('matmul_odd_gelu', f32(1000, 1000), f32(1000, 1000), f32(1000))
def _(a, b, c):
    return jax.nn.gelu(a @ b + c)

@prog_c('dyn_slice_loop', f32(1024, 1024))
def _(x):
    def body(i, acc):
        return acc + lax.dynamic_slice_in_dim(x, i, 1, 0)[0] * i
    return lax.fori_loop(0, 1024, body, jnp.zeros(1024, jnp.float32))

@prog_c('bf16_reduce', f32(2048, 2048).astype(jnp.bfloat16))
def _(x):
    return x.sum(1), x.max(0), x.max(1)

@prog_c('argsort_int', np.random.default_rng(10).integers(0, 1 << 30, (256, 4096)).astype(np.int32))
def _(x):
    return jnp.argsort(x, axis=1)

@prog_c('concat_many', *[f32(64, 37) for _ in range(32)])
def _(*xs):
    return jnp.concatenate(xs, axis=1) * 2.0

@prog_c('vmap_3x3', f32(65536, 3, 3), f32(65536, 3))
def _(a, v):
    return jnp.einsum('bij,bj->bi', a, v)

@prog_c('l2_normalize_rows', f32(8192, 300))
def _(x):
    return x / jnp.linalg.norm(x, axis=1, keepdims=True)

@prog_c('xent_loss_grad', f32(2048, 1000), np.random.default_rng(11).integers(0, 1000, 2048).astype(np.int32))
def _(l, y):
    return jax.grad(lambda l: -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(l), y[:, None], 1)))(l)

@prog_c('conv3x3_nchw', f32(8, 64, 56, 56), f32(64, 64, 3, 3))
def _(x, k):
    return lax.conv_general_dilated(x, k, (1, 1), 'SAME', dimension_numbers=('NCHW', 'OIHW', 'NCHW'))

@prog_c('cumsum_last', f32(512, 8192))
def _(x):
    return jnp.cumsum(x, axis=1)

@prog_c('int_matmul_s32', np.random.default_rng(12).integers(-100, 100, (256, 256)).astype(np.int32), np.random.default_rng(13).integers(-100, 100, (256, 256)).astype(np.int32))
def _(a, b):
    return a @ b

@prog_c('scan_ema', f32(2048, 256))
def _(x):
    def step(c, xt):
        c = 0.9 * c + 0.1 * xt
        return c, c
    return lax.scan(step, jnp.zeros(256, jnp.float32), x)[1]

@prog_c('pairwise_dist', f32(2048, 64), f32(2048, 64))
def _(a, b):
    return jnp.sqrt(jnp.maximum(((a[:, None, :] - b[None, :, :]) ** 2).sum(-1), 0))

@prog_c('unique_count_sort', np.random.default_rng(14).integers(0, 1000, 1 << 20).astype(np.int32))
def _(x):
    s = jnp.sort(x)
    return (s[1:] != s[:-1]).sum()

@prog_c('bf16_layernorm', f32(4096, 1024).astype(jnp.bfloat16), f32(1024).astype(jnp.bfloat16))
def _(x, g):
    m = x.mean(-1, keepdims=True); v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) * lax.rsqrt(v + 1e-5) * g

@prog_c('f16_matmul', f32(512, 512).astype(np.float16), f32(512, 512).astype(np.float16))
def _(a, b):
    return a @ b

@prog_c('c64_matmul', (f32(256, 256) + 1j * f32(256, 256)).astype(np.complex64), (f32(256, 256) + 1j * f32(256, 256)).astype(np.complex64))
def _(a, b):
    return a @ b

@prog_c('qr', f32(256, 128))
def _(a):
    return jnp.linalg.qr(a)

_m = f32(128, 128)
@prog_c('eigh', (_m + _m.T) / 2)
def _(a):
    return jnp.linalg.eigh(a)[0]

@prog_c('svd_values', f32(128, 64))
def _(a):
    return jnp.linalg.svd(a, compute_uv=False)

@prog_c('segment_max', f32(100000, 32), np.sort(np.random.default_rng(15).integers(0, 500, 100000)).astype(np.int32))
def _(x, s):
    return jax.ops.segment_max(x, s, num_segments=500)

@prog_c('onehot_matmul', np.random.default_rng(16).integers(0, 1000, 4096).astype(np.int32), f32(1000, 256))
def _(i, w):
    return jax.nn.one_hot(i, 1000) @ w

@prog_c('sort_bf16', f32(512, 2048).astype(jnp.bfloat16))
def _(x):
    return jnp.sort(x, axis=1)

@prog_c('kv_cache_scan', f32(128, 8, 64), f32(256, 8, 64))
def _(new, cache):
    def step(c, xi):
        i, x = xi
        c = lax.dynamic_update_slice(c, x[None], (i, 0, 0))
        return c, c[i].sum()
    return lax.scan(step, cache, (jnp.arange(128), new))

@prog_c('uniform_bits', np.array([0, 3], np.uint32))
def _(k):
    return jax.random.uniform(jax.random.wrap_key_data(k, impl='threefry2x32'), (1 << 20,))

@prog_c('s8_elementwise', np.random.default_rng(17).integers(-100, 100, (4096, 1024)).astype(np.int8), np.random.default_rng(18).integers(-100, 100, (4096, 1024)).astype(np.int8))
def _(a, b):
    return jnp.clip(a.astype(jnp.int16) * b.astype(jnp.int16) >> 4, -128, 127).astype(jnp.int8)

@prog_c('topk_wide_rows', f32(64, 50000))
def _(x):
    return lax.top_k(x, 5)


SET_D = []
prog_d = in_set(SET_D)


@prog_d('dus_rows_loop', f32(2000, 512), f32(512))
def _(buf, row):
    return lax.fori_loop(0, 500, lambda i, b: b.at[(i * 7) % 2000].set(row * i), buf)

@prog_d('scan_stack_outputs', f32(1000, 256), f32(256))
def _(xs, h):
    return lax.scan(lambda h, x: (jnp.tanh(h * 0.9 + x), h * 2.0), h, xs)

@prog_d('cummax_rev_axis0', f32(2048, 512))
def _(x):
    return lax.cummax(x, axis=0, reverse=True)

@prog_d('cumsum_bf16_long', f32(16, 65536).astype(jnp.bfloat16))
def _(x):
    return jnp.cumsum(x, axis=1)

@prog_d('weighted_bincount', np.random.default_rng(20).integers(0, 1000, 1 << 20).astype(np.int32), f32(1 << 20))
def _(i, w):
    return jnp.zeros(1000, jnp.float32).at[i].add(w)

@prog_d('scatter_add_wide_rows', f32(10000, 1024), np.random.default_rng(21).integers(0, 10000, 4096).astype(np.int32), f32(4096, 1024))
def _(t, i, g):
    return t.at[i].add(g)

@prog_d('topk_k64', f32(512, 32768))
def _(x):
    return lax.top_k(x, 64)

@prog_d('topk_k1_bf16', f32(8192, 1024).astype(jnp.bfloat16))
def _(x):
    return lax.top_k(x, 1)

@prog_d('lstm_h256_b8', f32(64, 8, 256), f32(256, 1024) * 0.05, f32(256, 1024) * 0.05, f32(1024) * 0.05)
def _(xs, wx, wh, b):
    def loss(wx, wh):
        def step(c, x):
            h, cc = c
            g = x @ wx + h @ wh + b
            i, f, o, u = jnp.split(g, 4, -1)
            cc = jax.nn.sigmoid(f) * cc + jax.nn.sigmoid(i) * jnp.tanh(u)
            h = jax.nn.sigmoid(o) * jnp.tanh(cc)
            return (h, cc), h
        z = jnp.zeros((8, 256), jnp.float32)
        return (lax.scan(step, (z, z), xs)[1] ** 2).sum()
    return jax.grad(loss, argnums=(0, 1))(wx, wh)

@prog_d('per_call_3in_5out', f32(128), f32(128), f32(128))
def _(a, b, c):
    s = a * b + c
    return s, jnp.maximum(s, 0), s.sum(), a - c, jnp.exp(-b * b)

@prog_d('gather_narrow_rows', f32(1 << 20, 16), np.random.default_rng(22).integers(0, 1 << 20, 100000).astype(np.int32))
def _(t, i):
    return t[i]

@prog_d('gather_points_2d', f32(4096, 4096), np.random.default_rng(23).integers(0, 4096, (2, 1 << 20)).astype(np.int32))
def _(x, ij):
    return x[ij[0], ij[1]]

@prog_d('bmm_256x64', f32(256, 64, 64), f32(256, 64, 64))
def _(a, b):
    return a @ b

@prog_d('bmm_nt_attention', f32(16, 512, 64), f32(16, 512, 64))
def _(q, k):
    return jnp.einsum('bqd,bkd->bqk', q, k)

@prog_d('bmm_bf16_32x128', f32(32, 128, 128).astype(jnp.bfloat16), f32(32, 128, 128).astype(jnp.bfloat16))
def _(a, b):
    return a @ b

@prog_d('cnn_stride2_train', f32(16, 32, 32, 32), f32(3, 3, 32, 64), f32(16 * 16 * 64, 10), f32(16, 10))
def _(x, k, w, y):
    def loss(k, w):
        h = jax.nn.relu(lax.conv_general_dilated(x, k, (2, 2), 'SAME', dimension_numbers=('NHWC', 'HWIO', 'NHWC')))
        return ((h.reshape(16, -1) @ w - y) ** 2).mean()
    return jax.grad(loss, argnums=(0, 1))(k, w)

@prog_d('transformer_fwd_512', f32(4, 512, 512), f32(512, 1536), f32(512, 512), f32(512, 2048), f32(2048, 512))
def _(x, wqkv, wo, w1, w2):
    q, k, v = jnp.split(x @ wqkv, 3, -1)
    q, k, v = (t.reshape(4, 512, 8, 64).transpose(0, 2, 1, 3) for t in (q, k, v))
    a = jax.nn.softmax(q @ k.transpose(0, 1, 3, 2) / 8.0, -1) @ v
    h = x + a.transpose(0, 2, 1, 3).reshape(4, 512, 512) @ wo
    m, s = h.mean(-1, keepdims=True), h.std(-1, keepdims=True)
    h = (h - m) / (s + 1e-5)
    return h + jax.nn.gelu(h @ w1) @ w2

@prog_d('argmin_axis0_i32', np.random.default_rng(24).integers(0, 1 << 30, (4096, 1024)).astype(np.int32))
def _(x):
    return jnp.argmin(x, axis=0)

@prog_d('matmul_1000', f32(1000, 1000), f32(1000, 1000))
def _(a, b):
    return a @ b

@prog_d('matmul_tn', f32(1024, 2048), f32(1024, 512))
def _(a, b):
    return a.T @ b

SET_E = []
prog_e = in_set(SET_E)


@prog_e('int8_mlp_layer', np.random.default_rng(30).integers(-128, 128, (256, 1024)).astype(np.int8), np.random.default_rng(31).integers(-128, 128, (1024, 1024)).astype(np.int8), f32(1024))
def _(x, w, scale):
    acc = lax.dot(x, w, preferred_element_type=jnp.int32)
    y = jnp.maximum(acc.astype(jnp.float32) * (scale * 1e-4), 0.0)
    return jnp.clip(jnp.round(y), -128, 127).astype(jnp.int8)

@prog_e('int8_matmul_nt', np.random.default_rng(32).integers(-128, 128, (1024, 2048)).astype(np.int8), np.random.default_rng(33).integers(-128, 128, (768, 2048)).astype(np.int8))
def _(x, w):
    return lax.dot_general(x, w, (((1,), (1,)), ((), ())), preferred_element_type=jnp.int32)

@prog_e('bf16_matmul_f32acc', f32(1024, 1024).astype(jnp.bfloat16), f32(1024, 1024).astype(jnp.bfloat16))
def _(a, b):
    return jnp.dot(a, b, preferred_element_type=jnp.float32)

@prog_e('matmul_odd_sizes', f32(777, 1531), f32(1531, 333))
def _(a, b):
    return a @ b

@prog_e('bf16_softmax', f32(4096, 1024).astype(jnp.bfloat16))
def _(x):
    return jax.nn.softmax(x, axis=-1)

@prog_e('rmsnorm', f32(8192, 1024), f32(1024))
def _(x, g):
    return x * lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * g

@prog_e('gelu_tanh_bf16', f32(4096, 4096).astype(jnp.bfloat16))
def _(x):
    return jax.nn.gelu(x, approximate=True)

@prog_e('scan_tiny_steps', f32(2000, 1024), f32(1024))
def _(xs, a):
    def step(h, x):
        h = jnp.tanh(h * a + x)
        return h, None
    return lax.scan(step, jnp.zeros(1024, jnp.float32), xs)[0]

@prog_e('newton_sqrt_while', np.linspace(1.0, 100.0, 4096).astype(np.float32))
def _(c):
    def cond(s):
        x, i = s
        return jnp.logical_and(jnp.max(jnp.abs(x * x - c) / c) > 1e-6, i < 100)
    def body(s):
        x, i = s
        return 0.5 * (x + c / x), i + 1
    return lax.while_loop(cond, body, (c, 0))[0]

@prog_e('conv1d_causal_depthwise', f32(8, 2048, 512), f32(4, 1, 512))
def _(x, k):
    return lax.conv_general_dilated(x, k, (1,), [(3, 0)], dimension_numbers=('NWC', 'WIO', 'NWC'), feature_group_count=512)

@prog_e('maxpool_3x3_s2', f32(32, 112, 112, 64))
def _(x):
    return lax.reduce_window(x, -jnp.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), 'SAME')

@prog_e('avgpool_grad', f32(32, 56, 56, 64))
def _(x):
    return jax.grad(lambda x: jnp.sum(lax.reduce_window(x, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), 'VALID') ** 2))(x)

@prog_e('xent_vocab_32k', f32(512, 32000), np.random.default_rng(34).integers(0, 32000, 512).astype(np.int32))
def _(logits, y):
    lp = jax.nn.log_softmax(logits)
    return -jnp.mean(jnp.take_along_axis(lp, y[:, None], axis=1))

@prog_e('sort_rows_bf16', f32(1024, 4096).astype(jnp.bfloat16))
def _(x):
    return jnp.sort(x, axis=-1)

@prog_e('argsort_i32_1m', np.random.default_rng(35).integers(0, 1 << 30, 1 << 20).astype(np.int32))
def _(x):
    return jnp.argsort(x)

@prog_e('dus_column_loop', f32(512, 512), f32(512, 512))
def _(x, v):
    return lax.fori_loop(0, 512, lambda i, x: x.at[:, i].set(v[i] * 2.0), x)

@prog_e('window_slices_vmap', f32(8192, 256), np.random.default_rng(36).integers(0, 8192 - 16, 4096).astype(np.int32))
def _(x, idx):
    return jax.vmap(lambda i: lax.dynamic_slice(x, (i, 0), (16, 256)).sum(0))(idx)

@prog_e('scatter_set_unique', f32(1 << 20), np.random.default_rng(37).permutation(1 << 20)[:1 << 18].astype(np.int32), f32(1 << 18))
def _(x, i, v):
    return x.at[i].set(v, unique_indices=True)

@prog_e('var_axis0_bf16', f32(8192, 1024).astype(jnp.bfloat16))
def _(x):
    return jnp.var(x.astype(jnp.float32), axis=0).astype(jnp.bfloat16)

@prog_e('attention_causal_bf16', f32(8, 1024, 64).astype(jnp.bfloat16), f32(8, 1024, 64).astype(jnp.bfloat16), f32(8, 1024, 64).astype(jnp.bfloat16))
def _(q, k, v):
    s = jnp.einsum('hqd,hkd->hqk', q, k, preferred_element_type=jnp.float32) / 8.0
    mask = jnp.tril(jnp.ones((1024, 1024), bool))
    p = jax.nn.softmax(jnp.where(mask, s, -1e9), axis=-1).astype(jnp.bfloat16)
    return jnp.einsum('hqk,hkd->hqd', p, v)

@prog_e('complex_phase', f32(1 << 20), (f32(1 << 20) + 1j * f32(1 << 20)).astype(np.complex64))
def _(phase, x):
    return jnp.exp(1j * phase) * x

@prog_e('random_bits_4m', np.array([0, 42], dtype=np.uint32))
def _(key):
    return jax.random.bits(jax.random.wrap_key_data(key), (1 << 22,))

@prog_e('cumsum_i32_rows', np.random.default_rng(38).integers(-1000, 1000, (4096, 1024)).astype(np.int32))
def _(x):
    return jnp.cumsum(x, axis=1)


def timeit(fn, n=None):
    fn(); t = time.perf_counter(); fn(); one = time.perf_counter() - t
    n = n or max(3, min(30, int(0.5 / max(one, 1e-6))))
    ts = []
    for _ in range(n):
        t = time.perf_counter(); fn(); ts.append(time.perf_counter() - t)
    return float(np.median(ts))

SET_A = [n for n in P if n not in SET_B and n not in SET_C and n not in SET_D and
         n not in SET_E]
arg = sys.argv[1] if len(sys.argv) > 1 else "a"
names = {"a": SET_A, "b": SET_B, "c": SET_C, "d": SET_D, "e": SET_E,
         "all": list(P)}.get(arg) or \
    arg.split(',')
print(f"jax {jax.__version__}; xlapy/XLA per program (medians), xlapy's cold compile", flush=True)
# SciPy's OpenBLAS, which xlapy loads on its first compile, starts its threads then and they
# spin for ~0.1 s (OpenBLAS's thread timeout), taking the second core from the first
# program's runs: loaded here, and left to settle, so no program is timed during it
from xlapy.backends.cpu import blas as _blas  # noqa: E402

_blas.library_info()
time.sleep(0.5)
ratios = []
for name in names:
    f, args = P[name]
    j = jax.jit(f)
    try:
        text = j.lower(*args).as_text(dialect='hlo')
        jargs = [jax.device_put(a) for a in args]
        tx = timeit(lambda: jax.block_until_ready(j(*jargs)))
        c = Client(backend='cpu')
        t0 = time.perf_counter(); exe = c.compile(text); tc = time.perf_counter() - t0
        bufs = [c.buffer_from_pyval(np.asarray(a)) for a in args]
        got = exe.execute([bufs], return_buffers=True)[0]
        ty = timeit(lambda: exe.execute([bufs], return_buffers=True))
        want = j(*jargs)
        def parts(v):
            return list(v) if isinstance(v, (tuple, list)) else [v]

        def real(x):  # complex results: both parts compared
            x = np.asarray(x)
            return np.stack([x.real, x.imag]).astype(np.float64) if x.dtype.kind == 'c' \
                else x.astype(np.float64)

        gl = [real(g.to_numpy()) for g in parts(got)]
        wl = [real(w) for w in parts(want)]
        err = max(float(np.max(np.abs(g - w)) / (np.max(np.abs(w)) + 1e-30)) if w.size else 0 for g, w in zip(gl, wl))
        ratios.append(ty / tx)
        print(f'{name:22s} xlapy {ty*1e3:9.3f} ms  XLA {tx*1e3:9.3f} ms  ratio {ty/tx:6.2f}x  compile {tc*1e3:7.0f} ms  relerr {err:.1e}', flush=True)
    except Exception as e:
        print(f'{name:22s} FAILED {type(e).__name__}: {str(e)[:200]}', flush=True)
print('geomean %.2fx over %d' % (float(np.exp(np.mean(np.log(ratios)))), len(ratios)))

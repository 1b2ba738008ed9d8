"""Programs outside the ``xlapy bench`` suite (no case was tuned on them): jax functions of
common model pieces - attention with a causal mask, a GRU scan, depthwise 1-D convolution,
pooling and its gradient, einsums with transposed outputs, column statistics, one-hot
cross entropy, segment sums, argsort, cumulative products and maxima, reflect padding, an
integer hash, a bf16 MLP layer, a loop of dynamic slices and dots, an FFT magnitude,
random normals, logsumexp over rows, a bf16 layer-norm gradient - each lowered by jax,
compiled by xlapy's CPU backend and run against XLA:CPU (``jax.jit``) in one process.

    PYTHONPATH=. python benchmarks/unseen_programs.py [name,name,...]

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

def timeit(fn, n=None):
    fn(); t = time.perf_counter(); fn(); one = time.perf_counter() - t
    n = n or max(3, min(30, int(0.5 / max(one, 1e-6))))
    ts = []
    for _ in range(n):
        t = time.perf_counter(); fn(); ts.append(time.perf_counter() - t)
    return float(np.median(ts))

names = sys.argv[1].split(',') if len(sys.argv) > 1 else list(P)
print(f"jax {jax.__version__}; xlapy/XLA per program (medians), xlapy's cold compile", flush=True)
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
        gl = [np.asarray(g.to_numpy()).astype(np.float64) for g in (got if isinstance(got, tuple) else (got,))]
        wl = [np.asarray(w).astype(np.float64) for w in (want if isinstance(want, tuple) else (want,))]
        err = max(float(np.max(np.abs(g - w)) / (np.max(np.abs(w)) + 1e-30)) if w.size else 0 for g, w in zip(gl, wl))
        ratios.append(ty / tx)
        print(f'{name:22s} xlapy {ty*1e3:9.3f} ms  XLA {tx*1e3:9.3f} ms  ratio {ty/tx:6.2f}x  compile {tc*1e3:7.0f} ms  relerr {err:.1e}', flush=True)
    except Exception as e:
        print(f'{name:22s} FAILED {type(e).__name__}: {str(e)[:200]}', flush=True)
print('geomean %.2fx over %d' % (float(np.exp(np.mean(np.log(ratios)))), len(ratios)))

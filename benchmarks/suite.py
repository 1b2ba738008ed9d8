"""The cases of ``xlapy bench`` and their speed targets: per case the largest xlapy/XLA:CPU
time ratio accepted (``Case.target``), the geometric mean of the ratios (< GEOMEAN_TARGET), the
bandwidth of memory-bound cases (>= BANDWIDTH_TARGET of a measured copy) and the compile
time of the MLP module (COMPILE_COLD_TARGET, COMPILE_CACHED_TARGET_S).

Every case is a computation jax defines (benchmarks/make_hlo.py holds the jax functions),
dumped once per size tier as ``benchmarks/hlo/<case>.<tier>.hlo``: xlapy runs that dump,
XLA:CPU runs the same jax function through ``jax.jit`` (the bench checks that it still lowers
to the committed text), and NumPy runs the eager version written here, which is also the
reference every xlapy result is checked against.

Tiers: ``full`` (the sizes the targets are set for), ``quick`` (``xlapy bench --quick``: the whole run in
under a minute; memory-bound working sets still larger than this machine's 32 MiB L3),
``tiny`` (``--tiny``: seconds, for the tests).

This module needs only NumPy (no jax, no xlapy): the bench, make_hlo.py and the tests import
it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
HLO_DIR = HERE / "hlo"
TIERS = ("full", "quick", "tiny")


@dataclass(frozen=True)
class Case:
    """One benchmark case.

    ``sizes[tier]``: the parameters of the case (dimensions, iteration counts);
    ``inputs(rng, p)``: the arguments (NumPy arrays, in the HLO's parameter order);
    ``numpy(p, *args)``: the eager NumPy computation (an array or a tuple of arrays, in the
    HLO's result order); ``describe(p)``: the size column; ``target``: the largest
    xlapy/XLA time ratio accepted; ``memory_bound``: the bandwidth target (>= 80% of the
    measured copy bandwidth) applies; ``rtol``: a result element passes when
    ``|xlapy - numpy| <= rtol * max|numpy|`` (per output).
    """

    name: str
    summary: str
    sizes: dict
    inputs: Callable
    numpy: Callable
    describe: Callable
    target: float = 1.0
    memory_bound: bool = False
    rtol: float = 1e-3
    notes: str = ""
    extra: dict = field(default_factory=dict)

    def hlo_path(self, tier: str) -> Path:
        return HLO_DIR / f"{self.name}.{tier}.hlo"


# -- helpers ------------------------------------------------------------------------------------

F32 = np.float32


def _normal(rng, *shape, scale=1.0) -> np.ndarray:
    return (rng.standard_normal(shape, dtype=F32) * F32(scale)).astype(F32)


def _uniform(rng, lo, hi, *shape) -> np.ndarray:
    return rng.uniform(lo, hi, shape).astype(F32)


def moved_bytes(args, result) -> int:
    """The bytes a memory-bound case must move at least: every input read once and every
    output written once."""
    leaves = list(result) if isinstance(result, tuple) else [result]
    return int(sum(np.asarray(a).nbytes for a in args) + sum(np.asarray(r).nbytes for r in leaves))


def _count(n: int) -> str:
    for unit, scale in (("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    return str(n)


# -- elementwise chain: 12 ops ------------------------------------------------------------------

def elementwise_np(p, x, v, w):
    t = np.tanh(x * F32(0.5) + v) - w
    return np.where(t > x, np.sqrt(np.abs(t)), t * w) / (w * w + F32(1))


ELEMENTWISE = Case(
    "elementwise", "12-op f32 chain: t = tanh(x*0.5+v)-w; select(t>x, sqrt|t|, t*w)/(w*w+1)",
    sizes={"full": {"n": 1 << 24}, "quick": {"n": 1 << 22}, "tiny": {"n": 4096}},
    inputs=lambda rng, p: [_normal(rng, p["n"]) for _ in range(3)],
    numpy=elementwise_np,
    describe=lambda p: f"{_count(p['n'])} f32",
    memory_bound=True,
)


# -- softmax over the last dimension -----------------------------------------------------------

def softmax_np(p, x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


SOFTMAX = Case(
    "softmax", "softmax over the last dimension (jax.nn.softmax)",
    sizes={"full": {"rows": 4096, "cols": 4096}, "quick": {"rows": 2048, "cols": 2048},
           "tiny": {"rows": 64, "cols": 64}},
    inputs=lambda rng, p: [_normal(rng, p["rows"], p["cols"], scale=3.0)],
    numpy=softmax_np,
    describe=lambda p: f"[{p['rows']},{p['cols']}]",
    memory_bound=True,
)


# -- layernorm over the last dimension ---------------------------------------------------------

LAYERNORM_EPS = 1e-5


def layernorm_np(p, x, gamma, beta):
    mean = x.mean(axis=-1, keepdims=True)
    xc = x - mean
    var = (xc * xc).mean(axis=-1, keepdims=True)
    return xc * (F32(1) / np.sqrt(var + F32(LAYERNORM_EPS))) * gamma + beta


LAYERNORM = Case(
    "layernorm", "layer normalisation over the last dimension, with scale and offset",
    sizes={"full": {"rows": 8192, "cols": 1024}, "quick": {"rows": 4096, "cols": 1024},
           "tiny": {"rows": 64, "cols": 64}},
    inputs=lambda rng, p: [_normal(rng, p["rows"], p["cols"], scale=2.0) + F32(1),
                           _uniform(rng, 0.5, 1.5, p["cols"]), _normal(rng, p["cols"])],
    numpy=layernorm_np,
    describe=lambda p: f"[{p['rows']},{p['cols']}]",
    memory_bound=True,
)


# -- softmax and layernorm, forward and backward -----------------------------------------------

def softmax_train_np(p, x, t):
    """loss = sum(softmax(x) * t) and its gradient wrt x."""
    s = softmax_np(p, x)
    st = s * t
    return (np.float32(np.sum(st, dtype=F32)), s * t - s * st.sum(axis=-1, keepdims=True))


SOFTMAX_TRAIN = Case(
    "softmax_train", "softmax over the last dimension, forward and backward: "
    "jax.value_and_grad of sum(softmax(x) * t)",
    sizes={"full": {"rows": 4096, "cols": 4096}, "quick": {"rows": 2048, "cols": 2048},
           "tiny": {"rows": 24, "cols": 40}},
    # t >= 0: the loss is a sum of positive terms (no cancellation to hide a lossy sum)
    inputs=lambda rng, p: [_normal(rng, p["rows"], p["cols"], scale=3.0),
                           _uniform(rng, 0.0, 1.0, p["rows"], p["cols"])],
    numpy=softmax_train_np,
    describe=lambda p: f"[{p['rows']},{p['cols']}]",
    memory_bound=True,
)


def layernorm_train_np(p, x, gamma, beta, t):
    """loss = sum(layernorm(x) * t) and its gradients wrt x, gamma and beta."""
    mean = x.mean(axis=-1, keepdims=True)
    xc = x - mean
    inv = F32(1) / np.sqrt((xc * xc).mean(axis=-1, keepdims=True) + F32(LAYERNORM_EPS))
    xhat = xc * inv
    loss = np.sum((xhat * gamma + beta) * t, dtype=F32)
    g = t * gamma
    dx = inv * (g - g.mean(axis=-1, keepdims=True) -
                xhat * (g * xhat).mean(axis=-1, keepdims=True))
    return (np.float32(loss), dx, (t * xhat).sum(axis=0), t.sum(axis=0))


LAYERNORM_TRAIN = Case(
    "layernorm_train", "layer normalisation, forward and backward: jax.value_and_grad of "
    "sum(layernorm(x) * t) wrt x, scale and offset",
    sizes={"full": {"rows": 8192, "cols": 1024}, "quick": {"rows": 4096, "cols": 1024},
           "tiny": {"rows": 24, "cols": 40}},
    inputs=lambda rng, p: [_normal(rng, p["rows"], p["cols"], scale=2.0) + F32(1),
                           _uniform(rng, 0.5, 1.5, p["cols"]), _uniform(rng, 0.0, 1.0, p["cols"]),
                           _uniform(rng, 0.5, 1.5, p["rows"], p["cols"])],
    numpy=layernorm_train_np,
    describe=lambda p: f"[{p['rows']},{p['cols']}]",
    memory_bound=True,
)


# -- matmul ---------------------------------------------------------------------------------------

def matmul_np(p, a, b):
    return a @ b


def _matmul(name, full, quick, tiny, target):
    return Case(
        name, "f32 matrix product a @ b",
        sizes={"full": {"n": full}, "quick": {"n": quick}, "tiny": {"n": tiny}},
        inputs=lambda rng, p: [_normal(rng, p["n"], p["n"]), _normal(rng, p["n"], p["n"])],
        numpy=matmul_np,
        describe=lambda p: f"{p['n']}^3 f32",
        target=target,
    )


MATMUL = _matmul("matmul", 1024, 512, 32, target=1.05)
MATMUL_BIG = _matmul("matmul_big", 2048, 1024, 64, target=1.0)


# -- 2-layer MLP, forward and backward -----------------------------------------------------------

def mlp_train_np(p, x, y, w1, b1, w2, b2):
    """loss = mean((relu(x@w1+b1)@w2+b2 - y)^2) and its gradients wrt w1, b1, w2, b2."""
    pre = x @ w1 + b1
    h = np.maximum(pre, F32(0))
    d = h @ w2 + b2 - y
    loss = np.mean(d * d, dtype=F32)
    dout = d * F32(2.0 / d.size)
    gw2 = h.T @ dout
    gb2 = dout.sum(axis=0)
    dpre = (dout @ w2.T) * (pre > 0)
    gw1 = x.T @ dpre
    gb1 = dpre.sum(axis=0)
    return (np.float32(loss), gw1, gb1, gw2, gb2)


def _mlp_inputs(rng, p):
    b, w = p["batch"], p["width"]
    return [_normal(rng, b, w), _normal(rng, b, w),
            _normal(rng, w, w, scale=w ** -0.5), _normal(rng, w, scale=0.1),
            _normal(rng, w, w, scale=w ** -0.5), _normal(rng, w, scale=0.1)]


MLP_TRAIN = Case(
    "mlp_train", "2-layer MLP (relu, squared error): loss and gradients of w1, b1, w2, b2",
    sizes={"full": {"batch": 512, "width": 1024}, "quick": {"batch": 256, "width": 512},
           "tiny": {"batch": 16, "width": 32}},
    inputs=_mlp_inputs,
    numpy=mlp_train_np,
    describe=lambda p: f"batch {p['batch']}, widths {p['width']}",
)


# -- conv2d NHWC, SAME ---------------------------------------------------------------------------

def conv2d_np(p, x, k):
    """Cross-correlation (XLA's convolution), stride 1, SAME padding: one matrix product
    per kernel tap."""
    kh, kw = k.shape[:2]
    n, h, w, c = x.shape
    top, left = (kh - 1) // 2, (kw - 1) // 2
    xp = np.zeros((n, h + kh - 1, w + kw - 1, c), F32)
    xp[:, top:top + h, left:left + w, :] = x
    out = np.zeros((n, h, w, k.shape[3]), F32)
    for i in range(kh):
        for j in range(kw):
            out += xp[:, i:i + h, j:j + w, :] @ k[i, j]
    return out


CONV2D = Case(
    "conv2d", "2-D convolution, NHWC input, HWIO kernel, stride 1, SAME padding",
    sizes={"full": {"n": 32, "hw": 64, "c": 64, "k": 3, "o": 64},
           "quick": {"n": 8, "hw": 64, "c": 64, "k": 3, "o": 64},
           "tiny": {"n": 2, "hw": 8, "c": 4, "k": 3, "o": 4}},
    inputs=lambda rng, p: [_normal(rng, p["n"], p["hw"], p["hw"], p["c"]),
                           _normal(rng, p["k"], p["k"], p["c"], p["o"],
                                   scale=(p["k"] * p["k"] * p["c"]) ** -0.5)],
    numpy=conv2d_np,
    describe=lambda p: (f"{p['n']}x{p['hw']}x{p['hw']}x{p['c']} * "
                        f"{p['k']}x{p['k']}x{p['c']}x{p['o']}"),
)


# -- reduce-sum ------------------------------------------------------------------------------------

REDUCE_SUM = Case(
    "reduce_sum", "sum of every element (to an f32 scalar)",
    sizes={"full": {"n": 1 << 26}, "quick": {"n": 1 << 24}, "tiny": {"n": 16384}},
    # Positive values: an accumulation that loses precision (a single f32 accumulator stops
    # growing at 2^24) shows up as a mismatch instead of hiding in cancellation.
    inputs=lambda rng, p: [_uniform(rng, 0.0, 1.0, p["n"])],
    numpy=lambda p, x: np.sum(x, dtype=F32),
    describe=lambda p: f"{_count(p['n'])} f32",
    memory_bound=True,
)


# -- while loops -------------------------------------------------------------------------------------

def while_scalar_np(p, c, a, b):
    for _ in range(p["iters"]):
        c = c * a + b
    return c


WHILE_SCALAR = Case(
    "while_scalar", "lax.fori_loop with a scalar body: c = c * a + b",
    sizes={"full": {"iters": 10000}, "quick": {"iters": 10000}, "tiny": {"iters": 100}},
    inputs=lambda rng, p: [np.float32(rng.standard_normal()), np.float32(0.999),
                           np.float32(rng.uniform(0.5, 1.5))],
    numpy=while_scalar_np,
    describe=lambda p: f"{p['iters']} iterations, f32[]",
    target=2.0,
)


def while_vector_np(p, c, w, b):
    for _ in range(p["iters"]):
        c = np.tanh(c * w + b)
    return c


WHILE_VECTOR = Case(
    "while_vector", "lax.fori_loop with an f32[256] body: c = tanh(c * w + b)",
    sizes={"full": {"iters": 10000, "width": 256}, "quick": {"iters": 10000, "width": 256},
           "tiny": {"iters": 100, "width": 256}},
    inputs=lambda rng, p: [_normal(rng, p["width"]), _uniform(rng, -0.9, 0.9, p["width"]),
                           _normal(rng, p["width"], scale=0.5)],
    numpy=while_vector_np,
    describe=lambda p: f"{p['iters']} iterations, f32[{p['width']}]",
)


# -- sort ----------------------------------------------------------------------------------------

SORT = Case(
    "sort", "ascending sort of f32 (jnp.sort: a TOTALORDER comparator)",
    sizes={"full": {"n": 1 << 22}, "quick": {"n": 1 << 18}, "tiny": {"n": 1024}},
    inputs=lambda rng, p: [_normal(rng, p["n"])],
    numpy=lambda p, x: np.sort(x),
    describe=lambda p: f"{_count(p['n'])} f32",
    target=0.1,
    rtol=0.0,
)


# -- data-dependent kernels (gather, scatter, select-and-scatter, in place) ---------------------

def _embedding_inputs(rng, p, grad=False):
    out = [_normal(rng, p["vocab"], p["dim"]),
           rng.integers(0, p["vocab"], p["rows"]).astype(np.int32)]
    return out + [_normal(rng, p["rows"], p["dim"])] if grad else out


def embedding_grad_np(p, table, idx, g):
    out = table.copy()
    np.add.at(out, idx, g)
    return out


_EMBEDDING_SIZES = {"full": {"vocab": 50000, "dim": 256, "rows": 65536},
                    "quick": {"vocab": 10000, "dim": 256, "rows": 16384},
                    "tiny": {"vocab": 100, "dim": 16, "rows": 64}}

EMBEDDING_LOOKUP = Case(
    "embedding_lookup", "embedding lookup: table[idx] (a gather of rows)",
    sizes=_EMBEDDING_SIZES,
    inputs=_embedding_inputs,
    numpy=lambda p, table, idx: table[idx],
    describe=lambda p: f"{p['rows']} rows of [{p['vocab']},{p['dim']}] f32",
    rtol=0.0,
)

EMBEDDING_GRAD = Case(
    "embedding_grad", "embedding gradient: table.at[idx].add(g) (a scatter-add of rows)",
    sizes=_EMBEDDING_SIZES,
    inputs=lambda rng, p: _embedding_inputs(rng, p, grad=True),
    numpy=embedding_grad_np,
    describe=lambda p: f"{p['rows']} rows into [{p['vocab']},{p['dim']}] f32",
)


def _maxpool_np(a):
    n, h, w, c = a.shape
    win = a.reshape(n, h // 2, 2, w // 2, 2, c).transpose(0, 1, 3, 5, 2, 4).reshape(
        n, h // 2, w // 2, c, 4)
    return win.max(axis=-1), win.argmax(axis=-1)  # argmax: the first maximum, row-major


def cnn_train_np(p, x, y, k, w):
    """loss = mean((maxpool2x2(relu(conv3x3(x, k))).flatten() @ w - y)^2) and its gradients
    wrt k and w."""
    conv = conv2d_np(p, x, k)
    a = np.maximum(conv, F32(0))
    pooled, arg = _maxpool_np(a)
    n = x.shape[0]
    flat = pooled.reshape(n, -1)
    d = flat @ w - y
    loss = np.mean(d * d, dtype=F32)
    dout = d * F32(2.0 / d.size)
    gw = flat.T @ dout
    dpool = (dout @ w.T).reshape(pooled.shape)
    onehot = np.eye(4, dtype=F32)[arg] * dpool[..., None]  # [n, h/2, w/2, c, 4]
    nn, hh, ww, cc, _ = onehot.shape
    da = onehot.reshape(nn, hh, ww, cc, 2, 2).transpose(0, 1, 4, 2, 5, 3).reshape(a.shape)
    dconv = da * (conv > 0)
    kh, kw = k.shape[:2]
    _, h, wd, c = x.shape
    xp = np.zeros((n, h + kh - 1, wd + kw - 1, c), F32)
    xp[:, (kh - 1) // 2:(kh - 1) // 2 + h, (kw - 1) // 2:(kw - 1) // 2 + wd, :] = x
    gk = np.zeros_like(k)
    for i in range(kh):
        for j in range(kw):
            gk[i, j] = xp[:, i:i + h, j:j + wd, :].reshape(-1, c).T @ dconv.reshape(
                -1, k.shape[3])
    return (np.float32(loss), gk, gw)


def _cnn_inputs(rng, p):
    n, hw, c, o, k, classes = p["n"], p["hw"], p["c"], p["o"], p["k"], p["classes"]
    feat = (hw // 2) * (hw // 2) * o
    return [_normal(rng, n, hw, hw, c), _normal(rng, n, classes),
            _normal(rng, k, k, c, o, scale=(k * k * c) ** -0.5),
            _normal(rng, feat, classes, scale=feat ** -0.5)]


CNN_TRAIN = Case(
    "cnn_train", "CNN training step: conv3x3 SAME, relu, 2x2 max-pool, dense, squared error;"
    " loss and gradients of the kernel and the dense weights",
    sizes={"full": {"n": 32, "hw": 32, "c": 16, "o": 32, "k": 3, "classes": 10},
           "quick": {"n": 16, "hw": 32, "c": 16, "o": 32, "k": 3, "classes": 10},
           "tiny": {"n": 2, "hw": 8, "c": 2, "o": 4, "k": 3, "classes": 3}},
    inputs=_cnn_inputs,
    numpy=cnn_train_np,
    describe=lambda p: (f"{p['n']}x{p['hw']}x{p['hw']}x{p['c']}, {p['k']}x{p['k']}x{p['o']}"
                        f" conv, {p['classes']} outputs"),
)


def dus_loop_np(p, buf, row):
    buf = buf.copy()
    m = row.shape[0]
    for i in range(p["iters"]):
        buf[i * m:(i + 1) * m] = row * F32(i)
    return buf


DUS_LOOP = Case(
    "dus_loop", "lax.fori_loop of dynamic_update_slice: buf[i*m:(i+1)*m] = row * i",
    sizes={"full": {"iters": 1000, "n": 1 << 20, "m": 1000},
           "quick": {"iters": 1000, "n": 1 << 20, "m": 1000},
           "tiny": {"iters": 10, "n": 1024, "m": 100}},
    inputs=lambda rng, p: [_normal(rng, p["n"]), _normal(rng, p["m"])],
    numpy=dus_loop_np,
    describe=lambda p: f"{p['iters']} updates of f32[{p['m']}] into f32[{_count(p['n'])}]",
)


# -- the sort family and scans -------------------------------------------------------------------

def _topk_np(p, x):
    order = np.argsort(-x, axis=-1, kind="stable")[..., :p["k"]]
    return np.take_along_axis(x, order, axis=-1), order.astype(np.int32)


TOPK = Case(
    "topk", "lax.top_k (the topk instruction: partial selection per row)",
    sizes={"full": {"rows": 4096, "n": 4096, "k": 16}, "quick": {"rows": 1024, "n": 4096, "k": 16},
           "tiny": {"rows": 64, "n": 256, "k": 16}},
    inputs=lambda rng, p: [_normal(rng, p["rows"], p["n"])],
    numpy=_topk_np,
    describe=lambda p: f"k={p['k']} of {p['rows']}x{p['n']} f32",
    rtol=0.0,
)


def _cumulative_inputs(rng, p):
    return [_normal(rng, p["rows"], p["n"]), _uniform(rng, 0.9995, 1.0005, p["rows"], p["n"])]


CUMSUM = Case(
    "cumsum", "jnp.cumsum and jnp.cumprod along rows (cumulative reduce-windows)",
    sizes={"full": {"rows": 256, "n": 4096}, "quick": {"rows": 256, "n": 4096},
           "tiny": {"rows": 8, "n": 512}},
    inputs=_cumulative_inputs,
    numpy=lambda p, x, y: (np.cumsum(x, axis=1, dtype=F32), np.cumprod(y, axis=1, dtype=F32)),
    describe=lambda p: f"{p['rows']}x{p['n']} f32",
)

ARGMAX = Case(
    "argmax", "jnp.argmax over rows (a variadic reduce of (values, iota))",
    sizes={"full": {"rows": 4096, "n": 4096}, "quick": {"rows": 1024, "n": 4096},
           "tiny": {"rows": 64, "n": 256}},
    inputs=lambda rng, p: [_normal(rng, p["rows"], p["n"])],
    numpy=lambda p, x: np.argmax(x, axis=1).astype(np.int32),
    describe=lambda p: f"{p['rows']}x{p['n']} f32",
    rtol=0.0,
)


def _sort_kv_np(p, k, v):
    order = np.argsort(k, axis=1, kind="stable")
    return np.take_along_axis(k, order, axis=1), np.take_along_axis(v, order, axis=1)


SORT_KV = Case(
    "sort_kv", "lax.sort of (key, value) rows by key, stable (a two-operand comparator)",
    sizes={"full": {"rows": 512, "n": 4096}, "quick": {"rows": 256, "n": 4096},
           "tiny": {"rows": 16, "n": 256}},
    # keys with ties (integers as f32): stability decides the values' order
    inputs=lambda rng, p: [rng.integers(0, 64, (p["rows"], p["n"])).astype(F32),
                           _normal(rng, p["rows"], p["n"])],
    numpy=_sort_kv_np,
    describe=lambda p: f"{p['rows']}x{p['n']} f32 pairs",
    rtol=0.0,
)


# -- batched GEMMs, a transformer block, rng-bit-generator -----------------------------------------

def _bf16():
    import ml_dtypes

    return ml_dtypes.bfloat16


def _batched_inputs(dtype):
    def make(rng, p):
        b, n = p["batch"], p["n"]
        return [_normal(rng, b, n, n).astype(dtype()), _normal(rng, b, n, n).astype(dtype())]
    return make


def batched_matmul_np(p, a, b):
    return np.matmul(a.astype(F32), b.astype(F32)).astype(a.dtype)


BATCHED_MATMUL = Case(
    "batched_matmul", "batched f32 matrix product (jnp.matmul over a batch of 64)",
    sizes={"full": {"batch": 64, "n": 256}, "quick": {"batch": 64, "n": 128},
           "tiny": {"batch": 4, "n": 16}},
    inputs=_batched_inputs(lambda: F32),
    numpy=batched_matmul_np,
    describe=lambda p: f"{p['batch']} x {p['n']}^3 f32",
)

BATCHED_MATMUL_BF16 = Case(
    "batched_matmul_bf16", "batched bf16 matrix product (bf16 result, f32 sums)",
    sizes=BATCHED_MATMUL.sizes,
    inputs=_batched_inputs(_bf16),
    numpy=batched_matmul_np,
    describe=lambda p: f"{p['batch']} x {p['n']}^3 bf16",
    rtol=2e-2,
)


def _gelu(x):
    return F32(0.5) * x * (F32(1) + np.tanh(F32(np.sqrt(2 / np.pi)) *
                                            (x + F32(0.044715) * x * x * x)))


def transformer_fwd_np(p, x, wq, wk, wv, wo, w1, w2, gamma, beta):
    """One pre-norm-free transformer block: multi-head self-attention and a gelu MLP, each
    with a residual, layer norm after the attention."""
    b, s, dm = x.shape
    heads = p["heads"]
    dh = dm // heads

    def split(t):
        return t.reshape(b, s, heads, dh).transpose(0, 2, 1, 3)

    q, k, v = split(x @ wq), split(x @ wk), split(x @ wv)
    scores = (q @ k.transpose(0, 1, 3, 2)) * F32(dh ** -0.5)
    scores = scores - scores.max(axis=-1, keepdims=True)
    e = np.exp(scores)
    att = (e / e.sum(axis=-1, keepdims=True)) @ v
    h = x + att.transpose(0, 2, 1, 3).reshape(b, s, dm) @ wo
    h = layernorm_np(p, h, gamma, beta)
    return h + _gelu(h @ w1) @ w2


def _transformer_inputs(rng, p):
    b, s, dm, f = p["batch"], p["seq"], p["dim"], p["ffn"]
    return [_normal(rng, b, s, dm)] + [_normal(rng, dm, dm, scale=dm ** -0.5)
                                        for _ in range(4)] + \
        [_normal(rng, dm, f, scale=dm ** -0.5), _normal(rng, f, dm, scale=f ** -0.5),
         _uniform(rng, 0.5, 1.5, dm), _normal(rng, dm, scale=0.1)]


TRANSFORMER_FWD = Case(
    "transformer_fwd", "transformer block forward: 4-head self-attention + layer norm + gelu "
    "MLP, residuals",
    sizes={"full": {"batch": 8, "seq": 128, "dim": 256, "heads": 4, "ffn": 1024},
           "quick": {"batch": 4, "seq": 64, "dim": 128, "heads": 4, "ffn": 512},
           "tiny": {"batch": 2, "seq": 8, "dim": 16, "heads": 2, "ffn": 32}},
    inputs=_transformer_inputs,
    numpy=transformer_fwd_np,
    describe=lambda p: f"{p['batch']}x{p['seq']}x{p['dim']}, ffn {p['ffn']}",
)


_M32 = np.uint64(0xFFFFFFFF)


def rng_bits_np(p, key):
    """XLA's Philox4x32 bit generator with a 2-word state (jax's uint32[4] key read as two
    u64 words: the key, the counter's low half; the high half is the key word): stream
    word 4v + k is word k of counter v; the new state advances the low half."""
    n = p["rows"] * p["cols"]
    k64 = key.view(np.uint64)
    key_word, lo = int(k64[0]), int(k64[1])
    k0, k1 = key_word & 0xFFFFFFFF, key_word >> 32
    vectors = -(-n // 4)
    with np.errstate(over="ignore"):
        c_lo = np.uint64(lo) + np.arange(vectors, dtype=np.uint64)
        c_hi = np.uint64(key_word) + (c_lo < np.uint64(lo)).astype(np.uint64)
        x = [c_lo & _M32, c_lo >> np.uint64(32), c_hi & _M32, c_hi >> np.uint64(32)]
        for _ in range(10):
            p0 = x[0] * np.uint64(0xD2511F53)
            p1 = x[2] * np.uint64(0xCD9E8D57)
            x = [(p1 >> np.uint64(32)) ^ x[1] ^ np.uint64(k0), p1 & _M32,
                 (p0 >> np.uint64(32)) ^ x[3] ^ np.uint64(k1), p0 & _M32]
            k0, k1 = (k0 + 0x9E3779B9) & 0xFFFFFFFF, (k1 + 0xBB67AE85) & 0xFFFFFFFF
    bits = np.stack(x, axis=1).reshape(-1)[:n].astype(np.uint32).reshape(p["rows"], p["cols"])
    new = np.array([key_word, (lo + vectors) & 0xFFFFFFFFFFFFFFFF], np.uint64).view(np.uint32)
    return (new, bits)


RNG_BITS = Case(
    "rng_bits", "random bits: lax.rng_bit_generator, Philox, u32",
    sizes={"full": {"rows": 4096, "cols": 4096}, "quick": {"rows": 2048, "cols": 2048},
           "tiny": {"rows": 16, "cols": 16}},
    inputs=lambda rng, p: [rng.integers(0, 1 << 32, 4, dtype=np.uint64).astype(np.uint32)],
    numpy=rng_bits_np,
    describe=lambda p: f"{p['rows']}x{p['cols']} u32",
    rtol=0.0,
)

#: Cases whose time is mostly GEMMs: ``xlapy bench`` runs them again with OPENBLAS_CORETYPE
#: unset when the environment pins OpenBLAS below the host's best kernel.
GEMM_CASES = ("matmul", "matmul_big", "mlp_train", "conv2d", "batched_matmul",
              "batched_matmul_bf16", "cnn_train", "transformer_fwd")


# -- loops holding dots (a scan whose body holds dots runs in native code) and the per-call cost --


def _sigmoid(x):
    return F32(1) / (F32(1) + np.exp(-x))


def lstm_scan_np(p, wx, wh, b, xs, h0, c0):
    """Gradients (wx, wh, b) of sum(h_t^2) over an LSTM run by lax.scan (gates i, f, g, o)."""
    h, c = h0, c0
    saved = []
    for x in xs:
        z = x @ wx + h @ wh + b
        i, f, g, o = np.split(z, 4, axis=-1)
        si, sf, tg, so = _sigmoid(i), _sigmoid(f), np.tanh(g), _sigmoid(o)
        c_new = sf * c + si * tg
        tc = np.tanh(c_new)
        h_new = so * tc
        saved.append((x, h, c, si, sf, tg, so, tc, h_new))
        h, c = h_new, c_new
    gwx, gwh, gb = np.zeros_like(wx), np.zeros_like(wh), np.zeros_like(b)
    dh, dc = np.zeros_like(h0), np.zeros_like(c0)
    for x, h_prev, c_prev, si, sf, tg, so, tc, h_t in reversed(saved):
        dh_t = dh + F32(2) * h_t
        dc_t = dc + dh_t * so * (F32(1) - tc * tc)
        dz = np.concatenate([dc_t * tg * si * (F32(1) - si), dc_t * c_prev * sf * (F32(1) - sf),
                             dc_t * si * (F32(1) - tg * tg), dh_t * tc * so * (F32(1) - so)],
                            axis=-1)
        gwx += x.T @ dz
        gwh += h_prev.T @ dz
        gb += dz.sum(axis=0)
        dh = dz @ wh.T
        dc = dc_t * sf
    return (gwx, gwh, gb)


def _lstm_inputs(rng, p):
    t, b, d, h = p["steps"], p["batch"], p["input"], p["hidden"]
    return [_normal(rng, d, 4 * h, scale=0.1), _normal(rng, h, 4 * h, scale=0.1),
            np.zeros(4 * h, F32), _normal(rng, t, b, d), np.zeros((b, h), F32),
            np.zeros((b, h), F32)]


LSTM_SCAN = Case(
    "lstm_scan", "LSTM via lax.scan, forward and backward (gradients of sum(h^2))",
    sizes={"full": {"steps": 128, "batch": 32, "input": 64, "hidden": 128},
           "quick": {"steps": 64, "batch": 32, "input": 64, "hidden": 128},
           "tiny": {"steps": 8, "batch": 4, "input": 8, "hidden": 16}},
    inputs=_lstm_inputs,
    numpy=lstm_scan_np,
    describe=lambda p: f"{p['steps']} steps, batch {p['batch']}, hidden {p['hidden']}",
    rtol=1e-3,
)


def per_call_np(p, x):
    for k in range(10):
        x = np.sin(x) * F32(1.5) + x if k % 2 else np.tanh(x) - F32(0.5) * x
    return x


PER_CALL = Case(
    "per_call", "10 small elementwise ops on f32[16] (one fusion): the cost of a call",
    sizes={"full": {"n": 16}, "quick": {"n": 16}, "tiny": {"n": 16}},
    inputs=lambda rng, p: [_normal(rng, p["n"])],
    numpy=per_call_np,
    describe=lambda p: f"f32[{p['n']}]",
    target=1.5,
)


#: The execution cases, in the order of the table.
CASES: dict[str, Case] = {c.name: c for c in (
    ELEMENTWISE, SOFTMAX, LAYERNORM, SOFTMAX_TRAIN, LAYERNORM_TRAIN, MATMUL, MATMUL_BIG,
    MLP_TRAIN, CONV2D, REDUCE_SUM,
    WHILE_SCALAR, WHILE_VECTOR, SORT,
    EMBEDDING_LOOKUP, EMBEDDING_GRAD, CNN_TRAIN, DUS_LOOP,  # data-dependent kernels
    TOPK, CUMSUM, ARGMAX, SORT_KV,  # the sort family and scans
    BATCHED_MATMUL, BATCHED_MATMUL_BF16, TRANSFORMER_FWD, RNG_BITS,  # batched GEMMs...
    LSTM_SCAN, PER_CALL,  # loops holding dots, the per-call cost
)}

#: The compile-time case: the mlp_train module compiled cold (every xlapy cache bypassed;
#: XLA: jax.jit(f).lower(..).compile() with jax's caches cleared) and from xlapy's cache.
COMPILE_CASE = "compile_mlp"
COMPILE_MODULE = "mlp_train"
COMPILE_COLD_TARGET = 3.0  # at most 3x XLA's compile time
COMPILE_CACHED_TARGET_S = 0.010  # under 10 ms

ALL_CASE_NAMES = tuple(CASES) + (COMPILE_CASE,)

#: f32 elements of the copy-bandwidth reference per tier (beyond the L3 cache in full/quick).
COPY_ELEMENTS = {"full": 1 << 26, "quick": 1 << 24, "tiny": 1 << 20}

#: The geometric mean of every case's xlapy/XLA ratio stays below this.
GEOMEAN_TARGET = 0.8

#: The bandwidth target of memory-bound cases: this fraction of the copy bandwidth.
BANDWIDTH_TARGET = 0.80


def make_inputs(case: Case, tier: str, seed: int = 0) -> list:
    """The deterministic arguments of ``case`` at ``tier`` (seeded by the case's name too,
    so selecting cases does not change anyone's inputs)."""
    mix = sum(ord(ch) * 31 ** i for i, ch in enumerate(case.name)) % (1 << 32)
    rng = np.random.default_rng([seed, mix])
    return case.inputs(rng, case.sizes[tier])


def check_result(case: Case, got, want) -> tuple[bool, str]:
    """``(ok, detail)``: ``got`` against the NumPy result, output by output."""
    gots = list(got) if isinstance(got, (tuple, list)) else [got]
    wants = list(want) if isinstance(want, tuple) else [want]
    if len(gots) != len(wants):
        return False, f"{len(gots)} outputs, NumPy gives {len(wants)}"
    worst = 0.0
    for k, (g, w) in enumerate(zip(gots, wants)):
        g = np.asarray(g)
        w = np.asarray(w)
        if g.shape != w.shape:
            return False, f"output {k} has dimensions {list(g.shape)}, NumPy's {list(w.shape)}"
        if not np.all(np.isfinite(g) == np.isfinite(w)):
            return False, f"output {k}: non-finite values where NumPy has finite ones (or back)"
        finite = np.isfinite(w)
        g64 = g[finite].astype(np.float64)
        w64 = w[finite].astype(np.float64)
        if not w64.size:
            continue
        scale = float(np.max(np.abs(w64))) or 1.0
        err = float(np.max(np.abs(g64 - w64))) / scale
        worst = max(worst, err)
        if err > case.rtol:
            return False, (f"output {k}: max |error| / max |NumPy| = {err:.3g} "
                           f"(tolerance {case.rtol:g})")
    return True, f"max |error| / max |NumPy| = {worst:.2g}"

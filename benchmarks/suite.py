"""The cases of ``xlapy bench`` (issue 7, "Speed: a benchmark suite, with targets").

Every case is a computation jax defines (benchmarks/make_hlo.py holds the jax functions),
dumped once per size tier as ``benchmarks/hlo/<case>.<tier>.hlo``: xlapy runs that dump,
XLA:CPU runs the same jax function through ``jax.jit`` (the bench checks that it still lowers
to the committed text), and NumPy runs the eager version written here, which is also the
reference every xlapy result is checked against.

Tiers: ``full`` (the issue's sizes), ``quick`` (``xlapy bench --quick``: the whole run in
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
    xlapy/XLA time ratio the issue accepts; ``memory_bound``: the issue's bandwidth target
    (>= 80% of the measured copy bandwidth) applies; ``rtol``: a result element passes when
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


# -- matmul ---------------------------------------------------------------------------------------

def matmul_np(p, a, b):
    return a @ b


def _matmul(name, full, quick, tiny):
    return Case(
        name, "f32 matrix product a @ b",
        sizes={"full": {"n": full}, "quick": {"n": quick}, "tiny": {"n": tiny}},
        inputs=lambda rng, p: [_normal(rng, p["n"], p["n"]), _normal(rng, p["n"], p["n"])],
        numpy=matmul_np,
        describe=lambda p: f"{p['n']}^3 f32",
        target=1.05,
    )


MATMUL = _matmul("matmul", 1024, 512, 32)
MATMUL_BIG = _matmul("matmul_big", 2048, 1024, 64)


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


# issue 14 part C -------------------------------------------------------------------------------
# (the executor: a scan whose body holds dots runs in native code; the per-call cost)


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
    ELEMENTWISE, SOFTMAX, LAYERNORM, MATMUL, MATMUL_BIG, MLP_TRAIN, CONV2D, REDUCE_SUM,
    WHILE_SCALAR, WHILE_VECTOR, SORT,
    LSTM_SCAN, PER_CALL,  # issue 14 part C
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

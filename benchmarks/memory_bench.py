"""Peak memory of xlapy's CPU backend against XLA:CPU.

    PYTHONPATH=$PWD python benchmarks/memory_bench.py [--programs transformer,lstm,cnn]

For each program (a transformer block forward+backward, an LSTM run by lax.scan forward and
backward, a CNN training step), each side runs in a fresh subprocess: it imports what it
needs, makes the inputs, reads its peak RSS (``VmHWM`` of /proc/self/status: the process's
own, where ``ru_maxrss`` would carry over the parent's peak; the baseline), then compiles
the program and runs it three times, and reads its peak RSS again. The figure is the rise
of the peak over the baseline (MiB). XLA's side imports jax before the baseline and runs
``jax.jit``; xlapy's side imports xlapy before the baseline and runs the HLO text jax
lowers (``Client(backend="cpu")``, the disk cache off: a cold compile), never importing
jax. Target: xlapy <= XLA.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

PROGRAMS = ("transformer", "lstm", "cnn")


def _functions():
    import jax
    import jax.numpy as jnp
    from jax import lax

    def transformer(x, wq, wk, wv, wo, w1, w2):
        def loss(params, x):
            wq, wk, wv, wo, w1, w2 = params
            b, t, d = x.shape
            heads = 8
            q = (x @ wq).reshape(b, t, heads, d // heads)
            k = (x @ wk).reshape(b, t, heads, d // heads)
            v = (x @ wv).reshape(b, t, heads, d // heads)
            a = jax.nn.softmax(jnp.einsum("bthd,bshd->bhts", q, k) / np.sqrt(d // heads), -1)
            o = jnp.einsum("bhts,bshd->bthd", a, v).reshape(b, t, d) @ wo
            h = x + o
            mu = h.mean(-1, keepdims=True)
            h = (h - mu) / jnp.sqrt(((h - mu) ** 2).mean(-1, keepdims=True) + 1e-5)
            y = h + jax.nn.gelu(h @ w1) @ w2
            return jnp.mean(y * y)
        return jax.grad(loss)((wq, wk, wv, wo, w1, w2), x)

    def lstm(wx, wh, b, xs, h0, c0):
        def loss(params):
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
        return jax.grad(loss)((wx, wh, b))

    def cnn(x, k1, k2, w, y):
        def loss(params):
            k1, k2, w = params
            dn = ("NHWC", "HWIO", "NHWC")
            h = jax.nn.relu(lax.conv_general_dilated(x, k1, (1, 1), "SAME",
                                                     dimension_numbers=dn))
            h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
            h = jax.nn.relu(lax.conv_general_dilated(h, k2, (1, 1), "SAME",
                                                     dimension_numbers=dn))
            h = h.reshape(h.shape[0], -1) @ w
            return jnp.mean((h - y) ** 2)
        return jax.grad(loss)((k1, k2, w))

    return {"transformer": transformer, "lstm": lstm, "cnn": cnn}


def _inputs(name: str) -> list:
    rng = np.random.default_rng(0)

    def n(*shape, scale=1.0):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    if name == "transformer":
        d, f = 512, 2048
        return [n(8, 256, d), n(d, d, scale=d ** -0.5), n(d, d, scale=d ** -0.5),
                n(d, d, scale=d ** -0.5), n(d, d, scale=d ** -0.5), n(d, f, scale=d ** -0.5),
                n(f, d, scale=f ** -0.5)]
    if name == "lstm":
        t, b, d, h = 128, 32, 64, 128
        return [n(d, 4 * h, scale=0.1), n(h, 4 * h, scale=0.1), np.zeros(4 * h, np.float32),
                n(t, b, d), np.zeros((b, h), np.float32), np.zeros((b, h), np.float32)]
    return [n(32, 32, 32, 3), n(3, 3, 3, 32, scale=0.2), n(3, 3, 32, 64, scale=0.06),
            n(16 * 16 * 64, 10, scale=0.01), n(32, 10)]


_CHILD = r"""
import json, resource, sys
import numpy as np


def peak_kib():
    # VmHWM: this process's own peak (a new one from exec); ru_maxrss is not - Linux carries
    # it over from the parent through fork and exec, so a child of a big parent would
    # measure the parent's peak
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


side, name, hlo, npz = sys.argv[1:5]
data = np.load(npz)
args = [data[f"arr_{k}"] for k in range(len(data.files))]
if side == "xla":
    sys.path.insert(0, sys.argv[5])
    import jax
    import memory_bench
    f = memory_bench._functions()[name]
else:  # imported before the baseline, as jax is on XLA's side
    from xlapy.parser import parse_hlo_module
    from xlapy.runtime import Client
base = peak_kib()
if side == "xla":
    g = jax.jit(f)
    for _ in range(3):
        jax.block_until_ready(g(*args))
else:
    exe = Client(backend="cpu").compile(parse_hlo_module(open(hlo).read()))
    for _ in range(3):
        exe(*args)
peak = peak_kib()
print(json.dumps({"rise_mib": (peak - base) / 1024.0}))
"""


def _measure(side: str, name: str, hlo: Path, npz: Path) -> float:
    env = dict(os.environ, XLAPY_DISK_CACHE="0")  # a cold compile, as jax's
    out = subprocess.run([sys.executable, "-c", _CHILD, side, name, str(hlo), str(npz),
                          str(Path(__file__).resolve().parent)],
                         capture_output=True, text=True, check=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])["rise_mib"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--programs", default=",".join(PROGRAMS))
    args = p.parse_args(argv)
    import jax

    fns = _functions()
    print(f"{'program':12} {'xlapy MiB':>10} {'XLA MiB':>10} {'ratio':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.programs.split(","):
            inputs = _inputs(name)
            hlo = Path(tmp) / f"{name}.hlo"
            hlo.write_text(jax.jit(fns[name]).lower(*inputs).as_text(dialect="hlo"))
            npz = Path(tmp) / f"{name}.npz"
            np.savez(npz, *inputs)
            mine = _measure("xlapy", name, hlo, npz)
            xla = _measure("xla", name, hlo, npz)
            print(f"{name:12} {mine:10.1f} {xla:10.1f} {mine / max(xla, 1e-9):7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

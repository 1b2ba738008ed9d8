#!/usr/bin/env python
"""Regenerate the SPMD fixtures in ``tests/fixtures/spmd/`` from real XLA (through jax, with
``--xla_force_host_platform_device_count=8`` host devices).

Usage::

    python tools/dump_spmd_fixtures.py [--out tests/fixtures/spmd] [--only name,...] [--list]

jax is a test-only dependency: this script imports it, xlapy never does. For each program
``<name>`` of the corpus below (shard_map with psum / all_gather / ppermute / all_to_all,
jit with NamedSharding on 1-D and 2-D meshes - a data and model parallel MLP training
step, a sharded attention block, an embedding lookup, a convolution, a loop -, pmap) it
writes

``<name>.shardy.pre.hlo``
    ``jax.jit(...).lower(*args).as_text(dialect="hlo")`` with Shardy, jax's default
    partitioner: the sharded module with ``xla.sdy.*`` attributes and custom calls.
``<name>.gspmd.pre.hlo``
    The same with ``jax_use_shardy_partitioner=False``: GSPMD ``sharding=`` attributes and
    the ``Sharding`` / ``SPMDFullToShardShape`` / ``SPMDShardToFullShape`` custom calls.
``<name>.mlir``
    ``....lower(*args).as_text()``: the same program as StableHLO (MLIR) with Shardy's
    ``sdy`` ops and attributes (``sdy.manual_computation`` for a shard_map).
``<name>.post.hlo``
    ``....compile().as_text()`` (Shardy): XLA:CPU's per-device module after SPMD
    partitioning and optimisation, with the metadata and stack-frame tables removed (they
    hold this machine's paths).
``<name>.npz``
    Global arrays: inputs ``arg0, arg1, ...`` in parameter order and the outputs ``out0,
    out1, ...`` the compiled executable returned (assembled by jax from the devices).

and ``MANIFEST.json`` (per fixture: description, device count, the jax/jaxlib versions,
input and output shapes and dtypes, the collectives in the post module).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import zlib
from pathlib import Path

DEVICES = 8
ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "tests" / "fixtures" / "spmd"


# -- the corpus ---------------------------------------------------------------------------------
# Each entry: name -> (description, devices, builder). A builder gets (jax modules, rng) and
# returns (jitted function, argument arrays); it is called inside the worker process.

def _corpus():
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    def mesh1(n, name="i"):
        return Mesh(np.array(jax.devices()[:n]), (name,))

    def mesh2(a, b, names=("data", "model")):
        return Mesh(np.array(jax.devices()[:a * b]).reshape(a, b), names)

    def ns(mesh, *spec):
        return NamedSharding(mesh, P(*spec))

    def normal(rng, *shape):
        return rng.standard_normal(shape).astype(np.float32)

    corpus = {}

    def program(name, description, devices):
        def register(fn):
            corpus[name] = (description, devices, fn)
            return fn
        return register

    @program("sm_psum_ppermute", "shard_map on a 4-device mesh: psum and a ring ppermute", 4)
    def _(rng):
        mesh = mesh1(4)

        def body(x):
            return jax.lax.psum(x, "i") + jax.lax.ppermute(x, "i", [(j, (j + 1) % 4)
                                                                    for j in range(4)])
        f = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P("i"), out_specs=P("i")))
        return f, [normal(rng, 8, 3)]

    @program("sm_all_gather", "shard_map: tiled all_gather then a local reduction", 4)
    def _(rng):
        mesh = mesh1(4)

        def body(x):
            g = jax.lax.all_gather(x, "i", axis=0, tiled=True)
            return g * jnp.sum(x)
        f = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P("i"), out_specs=P("i")))
        return f, [normal(rng, 8, 2)]

    @program("sm_all_to_all", "shard_map: all_to_all moving the split from rows to columns", 4)
    def _(rng):
        mesh = mesh1(4)

        def body(x):
            return jax.lax.all_to_all(x, "i", 1, 0, tiled=True)
        f = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P("i", None),
                                  out_specs=P(None, "i")))
        return f, [normal(rng, 8, 8)]

    @program("sm_nested", "shard_map manual over 'x' of a 4x2 mesh holding a shard_map manual "
             "over 'y': psum over y inside, a product outside (argument and result split "
             "over x only)", 8)
    def _(rng):
        mesh = mesh2(4, 2, ("x", "y"))

        def inner(b):
            return jax.lax.psum(b, "y")

        def outer(a):
            return jax.shard_map(inner, mesh=jax.sharding.get_abstract_mesh(),
                                 in_specs=P(None, "y"),
                                 out_specs=P(None, None), axis_names={"y"})(a) * 2.0
        f = jax.jit(jax.shard_map(outer, mesh=mesh, in_specs=P("x"), out_specs=P("x"),
                                  axis_names={"x"}),
                    in_shardings=ns(mesh, "x", None), out_shardings=ns(mesh, "x", None))
        return f, [normal(rng, 8, 8)]

    @program("sm_partial_manual", "shard_map manual over 'x' of a 4x2 mesh, 'y' left to "
             "the partitioner: psum over x, then an elementwise op", 8)
    def _(rng):
        mesh = mesh2(4, 2, ("x", "y"))

        def body(a):
            return jax.lax.psum(a, "x") * 2.0
        f = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P("x", None), out_specs=P(None),
                                  axis_names={"x"}))
        return f, [normal(rng, 8, 8)]

    @program("sm_2d_psum", "shard_map over a 4x2 mesh: psum over x of a 2-D tiled input, "
             "and a second output", 8)
    def _(rng):
        mesh = mesh2(4, 2, ("x", "y"))

        def body(a, b):
            return jax.lax.psum(a, "x") * 2.0, b + 1.0
        f = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=(P("x", "y"), P(None, "y")),
                                  out_specs=(P(None, "y"), P(None, "y"))))
        return f, [normal(rng, 8, 8), normal(rng, 4, 4)]

    @program("pmap_psum", "pmap over 4 devices: psum times the input", 4)
    def _(rng):
        f = jax.pmap(lambda x: jax.lax.psum(x, "i") * x, axis_name="i",
                     devices=jax.devices()[:4])
        return f, [normal(rng, 4, 3)]

    @program("jit_matmul_tanh", "jit on a 2x2 mesh: a dot contracting a sharded dimension, "
             "tanh, a reduction to a replicated result", 4)
    def _(rng):
        mesh = mesh2(2, 2, ("x", "y"))
        f = jax.jit(lambda a, b: jnp.tanh(a @ b).sum(0),
                    in_shardings=(ns(mesh, "x", "y"), ns(mesh, "y", None)),
                    out_shardings=ns(mesh))
        return f, [normal(rng, 8, 16), normal(rng, 16, 4)]

    @program("jit_reshard", "jit on a 4x2 mesh: a sharding constraint moving the split, "
             "a transpose and a dot", 8)
    def _(rng):
        mesh = mesh2(4, 2, ("x", "y"))

        def h(a):
            a = jax.lax.with_sharding_constraint(a * 2, ns(mesh, None, "x"))
            return a.T @ a
        f = jax.jit(h, in_shardings=ns(mesh, "x", "y"))
        return f, [normal(rng, 8, 8)]

    def mlp_step(mesh):
        def loss_fn(params, x, y):
            w1, b1, w2 = params
            h = jax.nn.relu(x @ w1 + b1)
            return jnp.mean((h @ w2 - y) ** 2)

        def step(w1, b1, w2, x, y):
            loss, grads = jax.value_and_grad(loss_fn)((w1, b1, w2), x, y)
            new = [p - 0.1 * g for p, g in zip((w1, b1, w2), grads)]
            return (*new, loss)
        shard = (ns(mesh, None, "model"), ns(mesh, "model"), ns(mesh, "model", None),
                 ns(mesh, "data", None), ns(mesh, "data", None))
        return jax.jit(step, in_shardings=shard,
                       out_shardings=shard[:3] + (ns(mesh),))

    def mlp_args(rng, batch=16, d=8, hidden=16, out=4):
        return [normal(rng, d, hidden) * 0.3, normal(rng, hidden) * 0.1,
                normal(rng, hidden, out) * 0.3, normal(rng, batch, d), normal(rng, batch, out)]

    @program("mlp_train_step", "jit on a 2x4 (data, model) mesh: one SGD step of a 2-layer "
             "MLP (forward, backward, update), data and model parallel", 8)
    def _(rng):
        return mlp_step(mesh2(2, 4)), mlp_args(rng)

    @program("mlp_train_step_4", "the MLP training step on a 2x2 (data, model) mesh", 4)
    def _(rng):
        return mlp_step(mesh2(2, 2)), mlp_args(rng)

    @program("attention", "jit on a 2x4 (data, model) mesh: a multi-head attention block, "
             "heads split over model, batch over data, the output projection contracting the "
             "heads", 8)
    def _(rng):
        mesh = mesh2(2, 4)
        heads, dh, d, s, b = 4, 4, 16, 8, 4

        def attn(x, wq, wk, wv, wo):
            q = jnp.einsum("bsd,dhk->bhsk", x, wq)
            k = jnp.einsum("bsd,dhk->bhsk", x, wk)
            v = jnp.einsum("bsd,dhk->bhsk", x, wv)
            a = jax.nn.softmax(jnp.einsum("bhsk,bhtk->bhst", q, k) / np.sqrt(dh), axis=-1)
            o = jnp.einsum("bhst,bhtk->bhsk", a, v)
            return jnp.einsum("bhsk,hkd->bsd", o, wo)
        w = ns(mesh, None, "model", None)
        f = jax.jit(attn, in_shardings=(ns(mesh, "data", None, None), w, w, w,
                                        ns(mesh, "model", None, None)),
                    out_shardings=ns(mesh, "data", None, None))
        return f, [normal(rng, b, s, d), normal(rng, d, heads, dh) * 0.3,
                   normal(rng, d, heads, dh) * 0.3, normal(rng, d, heads, dh) * 0.3,
                   normal(rng, heads, dh, d) * 0.3]

    @program("embedding", "jit on 4 devices: an embedding lookup (gather) from a table split "
             "along the feature dimension, with batch-split ids", 4)
    def _(rng):
        mesh = mesh2(2, 2)
        f = jax.jit(lambda table, ids: jnp.take(table, ids, axis=0) * 2.0,
                    in_shardings=(ns(mesh, None, "model"), ns(mesh, "data")),
                    out_shardings=ns(mesh, "data", "model"))
        return f, [normal(rng, 10, 8), rng.integers(0, 10, (8,)).astype(np.int32)]

    @program("scatter_add", "jit on 4 devices: scatter-add of rows into a table split along "
             "its columns", 4)
    def _(rng):
        mesh = mesh1(4, "i")
        f = jax.jit(lambda t, i, u: t.at[i].add(u),
                    in_shardings=(ns(mesh, None, "i"), ns(mesh), ns(mesh, None, "i")),
                    out_shardings=ns(mesh, None, "i"))
        return f, [normal(rng, 6, 8), np.array([0, 2, 2, 5], np.int32), normal(rng, 4, 8)]

    @program("conv_batch", "jit on 4 devices: a 2-D convolution, the batch split (data "
             "parallel)", 4)
    def _(rng):
        mesh = mesh1(4, "i")

        def conv(x, k):
            return jax.lax.conv_general_dilated(x, k, (1, 1), "SAME",
                                                dimension_numbers=("NHWC", "HWIO", "NHWC"))
        f = jax.jit(conv, in_shardings=(ns(mesh, "i"), ns(mesh)), out_shardings=ns(mesh, "i"))
        return f, [normal(rng, 4, 6, 6, 3), normal(rng, 3, 3, 3, 5)]

    @program("loop_sgd", "jit on a 2x2 mesh: three SGD steps of a linear model in a "
             "fori_loop (a while loop with sharded state)", 4)
    def _(rng):
        mesh = mesh2(2, 2)

        def train(w, x, y):
            def body(_, w):
                g = jax.grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)
                return w - 0.05 * g
            return jax.lax.fori_loop(0, 3, body, w)
        f = jax.jit(train, in_shardings=(ns(mesh, None, "model"), ns(mesh, "data", None),
                                         ns(mesh, "data", "model")),
                    out_shardings=ns(mesh, None, "model"))
        return f, [normal(rng, 8, 4), normal(rng, 8, 8), normal(rng, 8, 4)]

    @program("shape_ops", "jit on 4 devices: slice, pad, concatenate, reverse, iota, cumsum "
             "and a reshape of a split array", 4)
    def _(rng):
        mesh = mesh1(4, "i")

        def f(x):
            y = jnp.concatenate([x[:, 1:], x[:, :1]], axis=1)
            y = jnp.pad(y, ((0, 0), (1, 1))) + jnp.arange(y.shape[1] + 2, dtype=np.float32)
            z = jnp.cumsum(y[::-1], axis=1)
            return z.reshape(4, 2, -1).sum(1), jnp.sort(x, axis=1)
        f = jax.jit(f, in_shardings=ns(mesh, "i", None))
        return f, [normal(rng, 8, 6)]

    @program("reshape_split", "jit on 4 devices: reshapes that move the split: f32[48] split "
             "4 ways to f32[6,8] split by columns, f32[4,12] by columns to f32[48], f32[16,6] "
             "by rows to f32[4,4,6] split on its middle dimension", 4)
    def _(rng):
        mesh = mesh1(4, "i")
        f = jax.jit(lambda a, b, c: (a.reshape(6, 8) * 2.0, b.reshape(48) + 1.0,
                                     c.reshape(4, 4, 6) - 1.0),
                    in_shardings=(ns(mesh, "i"), ns(mesh, None, "i"), ns(mesh, "i", None)),
                    out_shardings=(ns(mesh, None, "i"), ns(mesh, "i"), ns(mesh, None, "i")))
        return f, [normal(rng, 48), normal(rng, 4, 12), normal(rng, 16, 6)]

    @program("embedding_rows", "jit on a 2x2 (data, model) mesh: an embedding lookup from a "
             "table split by rows over model, the ids split over data", 4)
    def _(rng):
        mesh = mesh2(2, 2)
        f = jax.jit(lambda table, ids: jnp.take(table, ids, axis=0) * 2.0,
                    in_shardings=(ns(mesh, "model"), ns(mesh, "data")),
                    out_shardings=ns(mesh, "data"))
        return f, [normal(rng, 16, 8), rng.integers(0, 16, (8,)).astype(np.int32)]

    @program("scatter_rows", "jit on 4 devices: scatter-add of rows into a table split by "
             "rows (repeated and out-of-range ids)", 4)
    def _(rng):
        mesh = mesh1(4, "i")
        f = jax.jit(lambda t, i, u: t.at[i].add(u, mode="drop"),
                    in_shardings=(ns(mesh, "i"), ns(mesh), ns(mesh)),
                    out_shardings=ns(mesh, "i"))
        return f, [normal(rng, 16, 8), np.array([0, 5, 5, 15, 9, 17, 3, 12], np.int32),
                   normal(rng, 8, 8)]

    @program("halo_windows", "jit on 4 devices, arrays split along a spatial dimension: a 3x3 "
             "convolution (SAME), a 3-wide windowed sum (SAME) and a difference of "
             "neighbours (slices shifted by one, padded back): halo exchanges", 4)
    def _(rng):
        mesh = mesh1(4, "i")

        def f(x, k, a):
            conv = jax.lax.conv_general_dilated(x, k, (1, 1), "SAME",
                                                dimension_numbers=("NHWC", "HWIO", "NHWC"))
            window = jax.lax.reduce_window(a, 0.0, jax.lax.add, (3, 1), (1, 1), "SAME")
            diff = jnp.pad(a[1:] - a[:-1], ((0, 1), (0, 0)))
            return conv, window, diff
        f = jax.jit(f, in_shardings=(ns(mesh, None, "i"), ns(mesh), ns(mesh, "i")),
                    out_shardings=(ns(mesh, None, "i"), ns(mesh, "i"), ns(mesh, "i")))
        return f, [normal(rng, 2, 16, 8, 3), normal(rng, 3, 3, 3, 4), normal(rng, 16, 8)]

    return corpus


# -- the worker ---------------------------------------------------------------------------------


def _strip_post(text: str) -> str:
    """The post module without metadata and stack-frame tables (they hold local paths)."""
    text = re.sub(r"\n(FileNames|FunctionNames|FileLocations|StackFrames)\n(.*\n)*?(?=\n)", "\n",
                  text)
    text = re.sub(r", metadata=\{[^{}]*\}", "", text)
    return re.sub(r"\n{3,}", "\n\n", text)


def worker(name: str, mode: str, out: Path) -> dict:
    import jax
    import numpy as np

    if mode == "gspmd":
        jax.config.update("jax_use_shardy_partitioner", False)
    description, devices, build = _corpus()[name]
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    fn, args = build(rng)
    lowered = fn.lower(*args)
    (out / f"{name}.{mode}.pre.hlo").write_text(lowered.as_text(dialect="hlo"))
    if mode == "shardy":
        (out / f"{name}.mlir").write_text(lowered.as_text())
    info = {"name": name, "description": description, "devices": devices}
    if mode == "shardy":
        compiled = lowered.compile()
        post = _strip_post(compiled.as_text())
        (out / f"{name}.post.hlo").write_text(post)
        results = fn(*args)
        leaves = jax.tree_util.tree_leaves(results)
        arrays = {f"arg{i}": np.asarray(a) for i, a in enumerate(args)}
        arrays.update({f"out{i}": np.asarray(r) for i, r in enumerate(leaves)})
        np.savez(out / f"{name}.npz", **arrays)
        info.update({
            "jax": jax.__version__,
            "inputs": [[str(a.dtype), list(a.shape)] for a in args],
            "outputs": [[str(np.asarray(r).dtype), list(np.shape(r))] for r in leaves],
            "post_collectives": sorted(set(re.findall(
                r"\b(all-reduce|all-gather|all-to-all|collective-permute|reduce-scatter)\(",
                post))),
        })
    return info


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    parser.add_argument("--only")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--worker", nargs=2, metavar=("NAME", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    out = Path(args.out)
    if args.worker:
        os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={DEVICES}"
        info = worker(args.worker[0], args.worker[1], out)
        print(json.dumps(info))
        return 0
    os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={DEVICES}"
    names = list(_corpus())
    if args.list:
        corpus = _corpus()
        for n in names:
            print(f"{n:<20} {corpus[n][1]} devices: {corpus[n][0]}")
        return 0
    if args.only:
        names = [n for n in args.only.split(",") if n]
    out.mkdir(parents=True, exist_ok=True)
    manifest_path = out / "MANIFEST.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    env = dict(os.environ)
    for name in names:
        for mode in ("gspmd", "shardy"):
            proc = subprocess.run([sys.executable, __file__, "--out", str(out), "--worker",
                                   name, mode], capture_output=True, text=True, env=env,
                                  check=False)
            if proc.returncode:
                sys.stderr.write(proc.stderr)
                return 1
            if mode == "shardy":
                manifest[name] = json.loads(proc.stdout.strip().splitlines()[-1])
        print(f"{name}: ok")
    manifest_path.write_text(json.dumps(dict(sorted(manifest.items())), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python
"""Regenerate ``tests/fixtures/proto/``: XLA's own protobuf dumps of small jax programs.

Usage::

    python tools/dump_proto_fixtures.py [--out tests/fixtures/proto]

jax is a test-only dependency; this script imports it, xlapy's package does not. It runs
the programs of ``PROGRAMS`` once each on XLA:CPU with

    XLA_FLAGS=--xla_dump_to=<tmp> --xla_dump_hlo_as_proto --xla_dump_hlo_as_text
              --xla_dump_hlo_snapshots

(and once more with ``--xla_dump_hlo_unoptimized_snapshots --xla_dump_hlo_as_proto``, which
makes XLA dump nothing but those snapshots)

and copies, per program ``<name>`` (the module XLA names ``jit_<name>``):

``<name>.before_optimizations.hlo.pb`` / ``.txt``
    the module as jax handed it to XLA: XLA's HloProto (binary) and its HLO text dump;
``<name>.cpu_after_optimizations.hlo.pb`` / ``.txt``
    the module after XLA:CPU's pipeline (fusions, layouts, a schedule), both forms;
``<name>.snapshot.pb``
    the HloSnapshot XLA:CPU dumped when it ran the program: the optimized module, the
    arguments and the result it computed;
``<name>.hlo_unoptimized_snapshot.pb``
    the HloUnoptimizedSnapshot: the module as jax handed it over, with the arguments;
``<name>.before_optimizations.pbtxt``
    the same HloProto in protobuf text format (written here with google.protobuf's
    text_format from the binary dump, with xlapy's declaration of XLA's messages).

For the first program the files of the dump that hold no module are kept as well
(``not_a_module/``: buffer assignment, memory usage report (text and binary proto), debug
options, an object file), for the "not an HLO module" tests. The programs' source is
compiled under the file name ``programs.py`` so the stack frames in the dumps name no path
of this machine. Inputs come from ``np.random.default_rng(seed)``: the dumps are the same on
every run of the same jax version (module ids and the snapshot file suffix aside).
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The programs, as source compiled under the name programs.py (see the module docstring).
PROGRAMS_SOURCE = '''
import jax, jax.numpy as jnp, numpy as np

def mlp(x, w, b):
    h = jnp.tanh(x @ w + b)
    return h.sum(axis=0), h.astype(jnp.bfloat16)

def scan_loop(xs, c):
    def body(carry, x):
        carry = jnp.where(carry > 1.0, carry * 0.5, carry + x)
        return carry, carry * 2.0
    return jax.lax.scan(body, c, xs)

def donated_update(state, g):
    return state - 0.1 * g, jnp.linalg.norm(g)

def narrow_types(x):
    q = x.astype(jnp.int4).astype(jnp.float32)
    e = x.astype(jnp.float8_e4m3fn).astype(jnp.float32)
    k = jnp.array([1, -2, 3, -8], jnp.int4).astype(jnp.float32)
    return q + e + k

def x64_ops(x, n):
    return jnp.cumsum(x * 1e-300) + n.astype(jnp.float64), (n * n) >> 3

def cholesky_solve(a, b):
    spd = a @ a.T + 4.0 * jnp.eye(a.shape[0], dtype=a.dtype)
    return jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(spd), b)

def make(seed, shapes, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(dtype) for s in shapes]

PROGRAMS = {
    "mlp": (mlp, lambda: make(1, [(4, 3), (3, 5), (5,)]), {}),
    "scan_loop": (scan_loop, lambda: make(2, [(6,), ()]), {}),
    "donated_update": (donated_update, lambda: make(3, [(8,), (8,)]), {"donate_argnums": 0}),
    "narrow_types": (narrow_types, lambda: [np.array([0.5, -3.0, 7.25, 100.0], np.float32)], {}),
    "x64_ops": (x64_ops, lambda: [np.linspace(0, 1, 5), np.arange(5, dtype=np.int64)],
                {"x64": True}),
    "cholesky_solve": (cholesky_solve, lambda: make(4, [(4, 4), (4, 2)]), {}),
}
'''

_NOT_A_MODULE = ("cpu_after_optimizations-buffer-assignment.txt",
                 "cpu_after_optimizations-memory-usage-report.txt",
                 "cpu_after_optimizations-memory-usage-report.pb", "debug_options")


# Runs in a fresh interpreter (XLA reads XLA_FLAGS when jax starts its backend), with the
# programs compiled under the name programs.py: the dumps' stack frames name no local path.
_DRIVER = """
import sys, jax
source = sys.stdin.read()
namespace = {}
exec(compile(source, "programs.py", "exec"), namespace)
for name, (fun, make_args, options) in namespace["PROGRAMS"].items():
    options = dict(options)
    x64 = options.pop("x64", False)
    with jax.enable_x64(x64):
        jax.block_until_ready(jax.jit(fun, keep_unused=True, **options)(*make_args()))
print(",".join(namespace["PROGRAMS"]))
"""


def _run_programs(dump: str, flags: str) -> list[str]:
    env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=f"--xla_dump_to={dump} {flags}")
    proc = subprocess.run([sys.executable, "-c", _DRIVER], input=PROGRAMS_SOURCE, env=env,
                          capture_output=True, text=True, cwd=tempfile.gettempdir())
    if proc.returncode != 0:
        raise SystemExit(f"running the programs failed:\n{proc.stderr}")
    return proc.stdout.strip().splitlines()[-1].split(",")


def _text_proto(binary_path: str, out_path: str) -> None:
    sys.path.insert(0, ROOT)
    from google.protobuf import text_format

    from xlapy.proto.schema import message_class

    msg = message_class("HloProto")()
    with open(binary_path, "rb") as f:
        msg.ParseFromString(f.read())
    with open(out_path, "w", encoding="utf-8") as f:
        f.write(text_format.MessageToString(msg))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures", "proto"))
    args = parser.parse_args(argv)
    dump = tempfile.mkdtemp(prefix="xlapy-proto-dump-")
    unoptimized_dump = tempfile.mkdtemp(prefix="xlapy-proto-dump-")
    try:
        programs = _run_programs(dump, "--xla_dump_hlo_as_proto --xla_dump_hlo_as_text "
                                 "--xla_dump_hlo_snapshots")
        _run_programs(unoptimized_dump, "--xla_dump_hlo_unoptimized_snapshots "
                      "--xla_dump_hlo_as_proto")
        os.makedirs(args.out, exist_ok=True)
        for i, name in enumerate(programs):
            pattern = f"module_*.jit_{name}.before_optimizations.txt"
            prefixes = glob.glob(os.path.join(dump, pattern))
            if len(prefixes) != 1:
                raise SystemExit(f"expected one dump of jit_{name}, found {len(prefixes)}")
            prefix = prefixes[0][: -len("before_optimizations.txt")]
            for suffix in ("before_optimizations.hlo.pb", "before_optimizations.txt",
                           "cpu_after_optimizations.hlo.pb", "cpu_after_optimizations.txt"):
                shutil.copyfile(prefix + suffix, os.path.join(args.out, f"{name}.{suffix}"))
            snapshots = sorted(glob.glob(prefix + "snapshot.*.pb"))
            if not snapshots:
                raise SystemExit(f"XLA dumped no snapshot of jit_{name}")
            shutil.copyfile(snapshots[0], os.path.join(args.out, f"{name}.snapshot.pb"))
            unoptimized = sorted(glob.glob(os.path.join(
                unoptimized_dump, f"module_*.jit_{name}.execution_*.hlo_unoptimized_snapshot.pb")))
            if not unoptimized:
                raise SystemExit(f"XLA dumped no unoptimized snapshot of jit_{name}")
            shutil.copyfile(unoptimized[0],
                            os.path.join(args.out, f"{name}.hlo_unoptimized_snapshot.pb"))
            _text_proto(prefix + "before_optimizations.hlo.pb",
                        os.path.join(args.out, f"{name}.before_optimizations.pbtxt"))
            if i == 0:
                other = os.path.join(args.out, "not_a_module")
                os.makedirs(other, exist_ok=True)
                for suffix in _NOT_A_MODULE:
                    shutil.copyfile(prefix + suffix, os.path.join(other, f"{name}.{suffix}"))
                objects = sorted(glob.glob(prefix + "obj-file.*.o"))
                if objects:
                    shutil.copyfile(objects[0], os.path.join(other, f"{name}.kernel.o"))
        print(f"wrote {len(programs)} programs' dumps to {args.out}")
    finally:
        shutil.rmtree(dump, ignore_errors=True)
        shutil.rmtree(unoptimized_dump, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

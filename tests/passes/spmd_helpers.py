"""Helpers of the SPMD partitioner tests: run a sharded module partitioned over n devices
(threads, the interpreter) and the same module on one device (shardings removed), on the
same global arguments, and compare; list the collectives of a partitioned module."""

from __future__ import annotations

import numpy as np

from xlapy.parser import parse_hlo_module
from xlapy.verifier import verify_module
from xlapy.interpreter.fake_args import make_fake_arguments
from xlapy.passes.spmd import partition
from xlapy.passes.spmd.arrays import assemble_results, shard_arguments
from xlapy.runtime import Client

COLLECTIVES = ("all-reduce", "all-gather", "all-to-all", "collective-permute", "reduce-scatter")

ADD = """
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT r = f32[] add(x, y)
}
"""
MAX = """
max {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT r = f32[] maximum(x, y)
}
"""


def module(body: str, comps: str = ADD + MAX) -> str:
    return f"HloModule m\n{comps}\nENTRY e {{\n{body}\n}}\n"


def partitioned(text: str, n: int, replicas: int | None = None):
    """``text`` (HLO, or StableHLO MLIR) partitioned over ``n`` devices and verified."""
    from xlapy.stablehlo import parse_module_text

    m = parse_module_text(text)
    partition(m, n, replicas)
    verify_module(m)
    # the per-device module is ordinary HLO: it prints and parses back
    assert parse_hlo_module(m.to_string()).to_string() == m.to_string()
    return m


def run_partitioned(m, args, replicas: int = 1, backend: str = "interpreter"):
    layout = m.spmd_layout
    per = shard_arguments(layout, args, replicas)
    exe = Client(backend=backend, timeout=60).compile(m, replicas=replicas,
                                                      partitions=layout.num_partitions)
    results = exe.execute(per)
    return [assemble_results(layout, results, r) for r in range(replicas)]


def run_single(text: str, args):
    m = parse_hlo_module(text)
    partition(m, 1)
    return Client().compile(m)(*args)


def check(text: str, n: int, args=None, seed: int = 0, replicas: int = 1, rtol: float = 1e-5):
    """Partition ``text`` over ``n`` devices, run it, and compare with one device; returns
    the partitioned module."""
    if args is None:
        args = make_fake_arguments(parse_hlo_module(text), seed)
    want = run_single(text, args)
    m = partitioned(text, n, replicas)
    for got in run_partitioned(m, args, replicas):
        assert_close(got, want, rtol)
    return m


def assert_close(got, want, rtol=1e-5):
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            assert_close(g, w, rtol)
        return
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)


def collectives(m) -> list[str]:
    """The collective opcodes of a module, in instruction order (all computations)."""
    return [i.opcode for c in m.computations for i in c.instructions if i.opcode in COLLECTIVES]


def ops(m) -> list[str]:
    return [i.opcode for i in m.entry.instructions]

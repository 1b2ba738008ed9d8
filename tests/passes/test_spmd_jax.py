"""The SPMD partitioner on what jax emits: every program of tests/fixtures/spmd (shard_map
with psum / all_gather / ppermute / all_to_all, jit with NamedSharding on 1-D and 2-D
meshes - the data and model parallel MLP training step, the attention block, an embedding
lookup, a scatter, a convolution, a loop -, pmap), in both of jax's forms (Shardy's
``xla.sdy.*`` attributes and GSPMD's ``sharding=``), partitioned and run on threads against
jax's outputs; and xlapy's per-device module against XLA's post-partitioning module (same
parameter and result shapes, same collectives over the same device groups).

Regenerate the fixtures with ``python tools/dump_spmd_fixtures.py``.
"""

import json
from collections import Counter
from math import prod
from pathlib import Path

import numpy as np
import pytest
from spmd_helpers import COLLECTIVES, partitioned, run_partitioned

from xlapy.parser import parse_hlo_module
from xlapy.interpreter.values import flatten

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "spmd"
MANIFEST = json.loads((FIXTURES / "MANIFEST.json").read_text())
NAMES = sorted(MANIFEST)


def load(name: str, form: str):
    text = (FIXTURES / f"{name}.{form}.pre.hlo").read_text()
    arrays = np.load(FIXTURES / f"{name}.npz")
    info = MANIFEST[name]
    args = [arrays[f"arg{i}"] for i in range(len(info["inputs"]))]
    outs = [arrays[f"out{i}"] for i in range(len(info["outputs"]))]
    return text, args, outs, info["devices"]


def check_against_jax(name: str, form: str, backend: str):
    text, args, outs, devices = load(name, form)
    m = partitioned(text, devices)
    got = run_partitioned(m, args, backend=backend)[0]
    leaves = flatten(got) if isinstance(got, tuple) else [got]
    assert len(leaves) == len(outs)
    for i, (g, w) in enumerate(zip(leaves, outs)):
        g = np.asarray(g)
        assert g.shape == w.shape and g.dtype == w.dtype, f"out{i}: {g.dtype}{g.shape}"
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-5, err_msg=f"{name} out{i}")
    return m


@pytest.mark.parametrize("form", ["shardy", "gspmd"])
@pytest.mark.parametrize("name", NAMES)
def test_partitioned_on_threads_gives_jax_outputs(name, form):
    check_against_jax(name, form, "interpreter")


@pytest.mark.parametrize("name", ["mlp_train_step", "attention", "sm_psum_ppermute",
                                  "sm_partial_manual", "loop_sgd"])
def test_partitioned_on_the_cpu_backend(name):
    check_against_jax(name, "shardy", "cpu")


# -- against XLA's post-partitioning module ----------------------------------------------------


def collective_signature(m) -> Counter:
    """(opcode, element counts, device groups) of each collective. XLA's post module is also
    optimised: its all-reduce combiner merges all-reduces into one of a tuple (counted here
    per leaf), and all-to-all is split into its per-peer pieces (counted by its total)."""
    out = Counter()
    for comp in m.computations:
        for instr in comp.instructions:
            op = instr.opcode.removesuffix("-start")
            if op not in COLLECTIVES:
                continue
            if op == "collective-permute":
                groups = tuple(sorted(instr.attrs["source_target_pairs"]))
            else:
                groups = tuple(sorted(tuple(g) for g in
                                      instr.attrs["replica_groups"].flattened_replica_groups()))
            shape = instr.operands[0].shape if op == "all-to-all" and len(instr.operands) == 1 \
                else instr.shape
            leaves = [leaf for _, leaf in shape.leaves()]
            if op == "all-to-all" and shape.is_tuple():
                leaves = [sum(prod(s.dimensions) for s in leaves)]
            else:
                leaves = [prod(s.dimensions) for s in leaves]
            if op == "all-reduce":
                for n in leaves:
                    out[(op, n, groups)] += 1
            else:
                out[(op, sum(leaves), groups)] += 1
    return out


def io_shapes(m):
    entry = m.entry
    dims = [tuple(p.shape.dimensions) for p in entry.parameters]
    root = entry.root.shape
    rdims = [tuple(s.dimensions) for _, s in root.leaves()]
    return dims, rdims


@pytest.mark.parametrize("name", NAMES)
def test_per_device_module_matches_xlas(name):
    text, _, _, devices = load(name, "shardy")
    ours = partitioned(text, devices)
    xla = parse_hlo_module((FIXTURES / f"{name}.post.hlo").read_text())
    assert ours.num_partitions == xla.num_partitions == devices
    assert io_shapes(ours) == io_shapes(xla)
    assert collective_signature(ours) == collective_signature(xla)


def test_the_signature_sees_a_difference():
    # the comparison above can fail: a module with one all-reduce fewer differs
    text, _, _, devices = load("mlp_train_step", "shardy")
    ours = collective_signature(partitioned(text, devices))
    fewer = ours.copy()
    fewer[next(iter(fewer))] -= 1
    assert +fewer != ours

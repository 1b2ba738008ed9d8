"""The SPMD partitioner on what jax emits: every program of tests/fixtures/spmd (shard_map
with psum / all_gather / ppermute / all_to_all, jit with NamedSharding on 1-D and 2-D
meshes - the data and model parallel MLP training step, the attention block, an embedding
lookup, a scatter, a convolution, a loop -, pmap), in both of jax's forms (Shardy's
``xla.sdy.*`` attributes and GSPMD's ``sharding=``), partitioned and run on threads against
jax's outputs; and xlapy's per-device module against XLA's post-partitioning module (same
parameter and result shapes, same collectives over the same device groups).

The same programs as StableHLO (``<name>.mlir``: ``sdy.manual_computation``,
``sdy.sharding_constraint``, ``sdy.sharding`` attributes) are read into the HLO form jax
dumps (the same Shardy custom calls, attributes and shardings), then partitioned and run the
same way.

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
    text = (FIXTURES / (f"{name}.mlir" if form == "mlir" else f"{name}.{form}.pre.hlo")
            ).read_text()
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


@pytest.mark.parametrize("form", ["shardy", "gspmd", "mlir"])
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


def shardy_signature(m):
    """What a module says about shardings, names aside: the Shardy custom calls and manual
    computation body calls (operand and result shapes, frontend attributes, the HLO sharding
    of a Sharding call), the entry parameters' shardings, the root's sharding and the
    module's meshes."""
    calls = Counter()
    for comp in m.computations:
        for i in comp.instructions:
            fe = tuple(sorted((k, v) for k, v in i.frontend_attributes.items()
                              if k.startswith("xla.sdy.") or k == "inlineable"))
            operands = tuple(str(o.shape) for o in i.operands)
            target = i.attrs.get("custom_call_target") if i.opcode == "custom-call" else None
            if target == "Sharding" or (target or "").startswith("xla.sdy."):
                calls[(target, operands, str(i.shape), fe,
                       i.sharding if target == "Sharding" else None)] += 1
            elif i.opcode == "call" and i.attrs["to_apply"].name.startswith(
                    "xla.sdy.manual_computation_body"):
                calls[("call", operands, str(i.shape), fe)] += 1
    params = sorted((p.parameter_number, str(p.shape), p.sharding,
                     p.frontend_attributes.get("xla.sdy.sharding"))
                    for p in m.entry.parameters)
    return calls, params, m.entry.root.sharding, m.config.get("frontend_attributes")


@pytest.mark.parametrize("name", NAMES)
def test_stablehlo_reads_as_jaxs_hlo(name):
    """The StableHLO text becomes what jax's own HLO dump of the program holds: a shard_map's
    GlobalToLocalShape / body call / LocalToGlobalShape, constraints, result shardings."""
    from xlapy.stablehlo import parse_stablehlo

    ours = parse_stablehlo((FIXTURES / f"{name}.mlir").read_text())
    jax_hlo = parse_hlo_module((FIXTURES / f"{name}.shardy.pre.hlo").read_text())
    assert shardy_signature(ours) == shardy_signature(jax_hlo)


def test_the_shardy_signature_sees_a_difference():
    from xlapy.stablehlo import parse_stablehlo

    text = (FIXTURES / "sm_2d_psum.mlir").read_text()
    changed = text.replace('manual_axes={"x", "y"}', 'manual_axes={"y", "x"}')
    assert changed != text
    assert shardy_signature(parse_stablehlo(changed)) != shardy_signature(
        parse_stablehlo(text))


def io_shapes(m):
    entry = m.entry
    dims = [tuple(p.shape.dimensions) for p in entry.parameters]
    root = entry.root.shape
    rdims = [tuple(s.dimensions) for _, s in root.leaves()]
    return dims, rdims


@pytest.mark.parametrize("form", ["shardy", "mlir"])
@pytest.mark.parametrize("name", NAMES)
def test_per_device_module_matches_xlas(name, form):
    text, _, _, devices = load(name, form)
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

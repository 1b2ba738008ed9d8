"""XLA's own protobuf dumps (tests/fixtures/proto, made by tools/dump_proto_fixtures.py with
``--xla_dump_hlo_as_proto --xla_dump_hlo_as_text --xla_dump_hlo_snapshots``): each proto
must read into a module that prints exactly as XLA's text dump of the same module, write
back to a proto that reads into the same module, and an HloSnapshot must bring the
arguments XLA ran on. No jax needed: the files are committed."""

from __future__ import annotations

import glob
import os
import re

import numpy as np
import pytest

import xlapy
from xlapy.interpreter.values import flatten, literal_to_value
from xlapy.proto import (
    NotAnHloModuleError,
    load_hlo,
    module_to_proto,
    parse_hlo_module_proto,
    parse_hlo_snapshot,
    snapshot_to_proto,
    to_text_proto,
)

pytest.importorskip("google.protobuf")

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "proto")
PROGRAMS = sorted({os.path.basename(p).split(".")[0]
                   for p in glob.glob(os.path.join(FIXTURES, "*.snapshot.pb"))})
STAGES = ["before_optimizations", "cpu_after_optimizations"]


def _read(path: str, mode: str = "rb"):
    with open(path, mode) as f:
        return f.read()


def _dump_text(program: str, stage: str) -> str:
    """XLA's text dump without the header keys of HloModuleConfig, which HloModuleProto
    does not carry (allow_spmd_sharding_propagation_to_*)."""
    text = _read(os.path.join(FIXTURES, f"{program}.{stage}.txt"), "r")
    head, rest = text.split("\n", 1)
    head = re.sub(r", allow_spmd_sharding_propagation_to_(?:parameters|output)=\{[^}]*\}", "",
                  head)
    return head + "\n" + rest


def test_the_fixtures_are_there():
    assert PROGRAMS == ["cholesky_solve", "donated_update", "mlp", "narrow_types", "scan_loop",
                        "x64_ops"]


@pytest.mark.parametrize("stage", STAGES)
@pytest.mark.parametrize("program", PROGRAMS)
def test_binary_dump_prints_as_xla_text_dump(program, stage):
    loaded = load_hlo(_read(os.path.join(FIXTURES, f"{program}.{stage}.hlo.pb")), program)
    assert (loaded.form, loaded.message) == ("binary-proto", "HloProto")
    assert loaded.module.to_string() == _dump_text(program, stage)
    xlapy.verify_module(loaded.module)


@pytest.mark.parametrize("program", PROGRAMS)
def test_text_proto_reads_as_the_binary(program):
    text = _read(os.path.join(FIXTURES, f"{program}.before_optimizations.pbtxt"), "r")
    loaded = load_hlo(text, program)
    assert (loaded.form, loaded.message) == ("text-proto", "HloProto")
    assert loaded.module.to_string() == _dump_text(program, "before_optimizations")


@pytest.mark.parametrize("stage", STAGES)
@pytest.mark.parametrize("program", PROGRAMS)
def test_module_round_trips_through_its_proto(program, stage):
    module = parse_hlo_module_proto(_read(os.path.join(FIXTURES, f"{program}.{stage}.hlo.pb")))
    data = module_to_proto(module).SerializeToString()
    again = parse_hlo_module_proto(data)
    assert again.to_string() == module.to_string()
    # and through the text format of the proto
    assert parse_hlo_module_proto(to_text_proto(module_to_proto(module))).to_string() == \
        module.to_string()


def test_hlo_text_round_trips_through_the_proto():
    module = xlapy.parse_hlo_module(_dump_text("scan_loop", "cpu_after_optimizations"))
    assert parse_hlo_module_proto(module_to_proto(module).SerializeToString()).to_string() == \
        module.to_string()


def test_the_config_travels_with_with_config():
    module = xlapy.parse_hlo_module(
        "HloModule m, replica_count=2, num_partitions=3, "
        "allow_spmd_sharding_propagation_to_output={true}\n"
        "ENTRY e { p = f32[2] parameter(0) ROOT n = f32[2] negate(p) }")
    plain = parse_hlo_module_proto(module_to_proto(module).SerializeToString())
    assert (plain.replica_count, plain.num_partitions) == (1, 1)  # HloModuleProto has no config
    wrapped = module_to_proto(module, with_config=True)
    assert wrapped.DESCRIPTOR.name == "HloModuleProtoWithConfig"
    again = parse_hlo_module_proto(wrapped.SerializeToString())
    assert again.to_string() == module.to_string()
    assert (again.replica_count, again.num_partitions) == (2, 3)


@pytest.mark.parametrize("program", PROGRAMS)
def test_snapshot_brings_arguments_and_xla_result(program):
    snap = parse_hlo_snapshot(_read(os.path.join(FIXTURES, f"{program}.snapshot.pb")))
    params = snap.module.entry.parameters
    assert len(snap.arguments) == len(params)
    for arg, p in zip(snap.arguments, params):
        assert arg.shape.compatible(p.shape)
    assert snap.result is not None
    if program == "donated_update":
        # XLA:CPU cannot read back a donated buffer after the run: it records an empty tuple
        # ("Failed to get literal for argument ... donated buffer").
        assert snap.result.shape.is_empty_tuple()
        assert snap.module.config["input_output_alias"]
        return
    result = xlapy.Client(backend="interpreter").compile(snap.module)(
        *[literal_to_value(a) for a in snap.arguments])
    got = [np.asarray(v) for v in flatten(result)]
    want = [np.asarray(v) for v in flatten(literal_to_value(snap.result))]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=2e-5,
                                   atol=1e-6)


@pytest.mark.parametrize("program", PROGRAMS)
def test_unoptimized_snapshot_is_the_module_jax_gave_and_its_arguments(program):
    loaded = load_hlo(_read(os.path.join(FIXTURES, f"{program}.hlo_unoptimized_snapshot.pb")),
                      program)
    assert loaded.message == "HloUnoptimizedSnapshot" and len(loaded.partitions) == 1
    assert loaded.module.to_string() == _dump_text(program, "before_optimizations")
    snap = parse_hlo_snapshot(_read(os.path.join(FIXTURES, f"{program}.snapshot.pb")))
    assert loaded.arguments == snap.arguments  # the same run's inputs


def test_snapshot_written_by_xlapy_reads_back():
    module = xlapy.parse_hlo_module(
        "HloModule m\nENTRY e { p = bf16[3] parameter(0) q = s4[2,2]{0,1} parameter(1) "
        "ROOT t = (bf16[3], s4[2,2]) tuple(p, q) }")
    args = [np.array([1.5, -2.0, 3.25], xlapy.shape.dtypes.to_dtype(xlapy.PrimitiveType.BF16)),
            np.array([[1, -2], [-8, 7]], xlapy.shape.dtypes.to_dtype(xlapy.PrimitiveType.S4))]
    data = snapshot_to_proto(module, args, execution_platform="Host").SerializeToString()
    snap = parse_hlo_snapshot(data)
    assert snap.execution_platform == "Host"
    assert snap.module.to_string() == module.to_string()
    for got, want in zip(snap.arguments, args):
        np.testing.assert_array_equal(got.array, want)


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(FIXTURES, "not_a_module", "*"))))
def test_other_dump_files_are_not_hlo_modules(path):
    with pytest.raises(NotAnHloModuleError, match=r": not an HLO module \("):
        load_hlo(_read(path), os.path.basename(path))


def test_not_a_module_kinds_are_all_present():
    names = sorted(os.path.basename(p) for p in glob.glob(os.path.join(FIXTURES,
                                                                       "not_a_module", "*")))
    assert names == ["mlp.cpu_after_optimizations-buffer-assignment.txt",
                     "mlp.cpu_after_optimizations-memory-usage-report.pb",
                     "mlp.cpu_after_optimizations-memory-usage-report.txt",
                     "mlp.debug_options", "mlp.kernel.o"]

"""jax's sharded programs over MPI: every SPMD fixture (tests/fixtures/spmd, Shardy form)
partitioned by xlapy, its per-device module run by one MPI rank per device (one ``mpiexec
-n 4`` job for the 4-device ones, one ``-n 8`` job for the 8-device ones, through
tests/runtime/mpi_driver.py), the device results
assembled by the result's sharding and compared with jax's outputs; and ``mpiexec -n 4
xlapy run <jax dump> --distributed mpi`` (HLO, and a shard_map as StableHLO) with global
arrays in and out."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from test_mpi import DRIVER, launch

from xlapy.parser import parse_hlo_module
from xlapy.interpreter.values import flatten
from xlapy.npz import load_npz, save_npz
from xlapy.passes.spmd import partition
from xlapy.passes.spmd.arrays import assemble_results, shard_arguments
from xlapy.shape.tree import build_shaped

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "spmd"
MANIFEST = json.loads((FIXTURES / "MANIFEST.json").read_text())
FOUR = sorted(n for n, info in MANIFEST.items() if info["devices"] == 4)
EIGHT = sorted(n for n, info in MANIFEST.items() if info["devices"] == 8)


def jax_arrays(name: str) -> tuple[list, list]:
    arrays = np.load(FIXTURES / f"{name}.npz")
    info = MANIFEST[name]
    return ([arrays[f"arg{i}"] for i in range(len(info["inputs"]))],
            [arrays[f"out{i}"] for i in range(len(info["outputs"]))])


def mpi_job(tmp_path_factory, n: int, names: list[str]):
    """Partition the fixtures for ``n`` devices, write each per-device module and its device
    blocks, run them all in one MPI job of ``n`` ranks."""
    cases = tmp_path_factory.mktemp(f"spmd_mpi{n}")
    layouts = {}
    for name in names:
        m = parse_hlo_module((FIXTURES / f"{name}.shardy.pre.hlo").read_text())
        partition(m, n)
        layouts[name] = m.spmd_layout
        args, _ = jax_arrays(name)
        per_device = shard_arguments(m.spmd_layout, args)
        blocks = {}
        for k, device_args in enumerate(per_device):
            leaves = [leaf for a in device_args for leaf in flatten(a)]
            blocks.update({f"r{k}.arg{i}": leaf for i, leaf in enumerate(leaves)})
        (cases / f"{name}.hlo").write_text(m.to_string())
        save_npz(str(cases / f"{name}.npz"), blocks)
        (cases / f"{name}.json").write_text(json.dumps({"partitions": n, "timeout": 120}))
    proc = launch(n, [sys.executable, str(DRIVER), str(cases)], timeout=600)
    return cases, layouts, proc


@pytest.fixture(scope="module")
def four_device_job(tmp_path_factory):
    return mpi_job(tmp_path_factory, 4, FOUR)


@pytest.fixture(scope="module")
def eight_device_job(tmp_path_factory):
    return mpi_job(tmp_path_factory, 8, EIGHT)


@pytest.mark.parametrize("name", FOUR)
def test_partitioned_over_mpi_gives_jax_outputs(name, four_device_job):
    check_job(name, 4, four_device_job)


@pytest.mark.parametrize("name", EIGHT)
def test_partitioned_over_8_mpi_ranks_gives_jax_outputs(name, eight_device_job):
    check_job(name, 8, eight_device_job)


def check_job(name: str, n: int, job) -> None:
    cases, layouts, proc = job
    assert proc.returncode == 0, f"mpiexec -n {n} failed:\n{proc.stdout}\n{proc.stderr}"
    layout = layouts[name]
    saved = load_npz(str(cases / f"{name}.out.npz"))
    results = []
    for k in range(n):
        count = len([key for key in saved if key.startswith(f"r{k}.")])
        leaves = iter([saved[f"r{k}.out{i}"] for i in range(count)])
        results.append(build_shaped(layout.result_shape, lambda s, path, it=leaves: next(it))
                       if layout.result_shape.is_tuple() else next(leaves))
    got = assemble_results(layout, results, 0)
    got = flatten(got) if isinstance(got, tuple) else [got]
    _, want = jax_arrays(name)
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(np.asarray(g), w, rtol=2e-5, atol=2e-5,
                                   err_msg=f"{name} out{i}")


@pytest.mark.parametrize("name,file", [("mlp_train_step_4", "gspmd.pre.hlo"),
                                       ("sm_psum_ppermute", "mlir")])
def test_cli_runs_a_jax_dump_over_mpi_with_global_arrays(tmp_path, name, file):
    args, want = jax_arrays(name)
    save_npz(str(tmp_path / "in.npz"), {f"arg{i}": a for i, a in enumerate(args)})
    module = FIXTURES / f"{name}.{file}"
    proc = launch(4, [sys.executable, "-m", "xlapy", "run", str(module), "--distributed",
                      "mpi", "--partitions", "4", "--inputs", "in.npz", "--output", "out.npz",
                      "--quiet"], cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    saved = load_npz(str(tmp_path / "out.npz"))
    assert sorted(saved) == [f"out{i}" for i in range(len(want))]
    for i, w in enumerate(want):
        np.testing.assert_allclose(saved[f"out{i}"], w, rtol=2e-5, atol=2e-5)

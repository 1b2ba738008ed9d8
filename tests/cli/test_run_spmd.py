"""``xlapy run`` of a sharded module as jax dumps it (xlapy/cli/spmd_run.py): partitioned,
run on threads, with global arrays (``arg<i>`` / ``out<i>``, jax's inputs and outputs) or
per-device blocks (``r<k>.arg<i>`` / ``r<k>.out<i>``); ``xlapy opt
--passes=spmd-partition`` prints the per-device module; ``xlapy graph`` shows shardings."""

from pathlib import Path

import numpy as np

from xlapy.cli import main
from xlapy.npz import load_npz, save_npz

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "spmd"


def fixture(name: str, form: str = "shardy") -> tuple[str, dict]:
    arrays = dict(np.load(FIXTURES / f"{name}.npz"))
    return str(FIXTURES / f"{name}.{form}.pre.hlo"), arrays


def inputs(tmp_path, arrays: dict) -> str:
    path = tmp_path / "in.npz"
    save_npz(path, {k: v for k, v in arrays.items() if k.startswith("arg")})
    return str(path)


def test_global_arrays_in_and_out_are_jaxs(tmp_path, capsys):
    module, arrays = fixture("mlp_train_step_4", "gspmd")
    out = tmp_path / "out.npz"
    assert main(["run", module, "--inputs", inputs(tmp_path, arrays), "--output", str(out),
                 "--quiet"]) == 0
    assert capsys.readouterr().out == ""
    saved = load_npz(out)
    assert sorted(saved) == ["out0", "out1", "out2", "out3"]
    for k in saved:
        np.testing.assert_allclose(saved[k], arrays[k], rtol=2e-5, atol=2e-5)


def test_shard_map_module_prints_the_global_result(tmp_path, capsys):
    module, arrays = fixture("sm_psum_ppermute")
    assert main(["run", module, "--inputs", inputs(tmp_path, arrays), "--partitions",
                 "4"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("f32[8,3] {\n") and "replica" not in printed


def test_a_shard_map_as_stablehlo_runs_partitioned(tmp_path, capsys):
    # jax's StableHLO text (sdy.manual_computation): partitioned over the 8 devices asked for
    _, arrays = fixture("sm_2d_psum")
    module = str(FIXTURES / "sm_2d_psum.mlir")
    out = tmp_path / "out.npz"
    assert main(["run", module, "--partitions", "8", "--inputs", inputs(tmp_path, arrays),
                 "--output", str(out), "--quiet"]) == 0
    saved = load_npz(out)
    assert sorted(saved) == ["out0", "out1"]
    for k in saved:
        np.testing.assert_allclose(saved[k], arrays[k], rtol=1e-5, atol=1e-5)
    assert main(["opt", "--passes=spmd-partition", module]) == 0
    text = capsys.readouterr().out
    assert "num_partitions=8" in text and "all-reduce(" in text
    assert "f32[2,4]{1,0} parameter(0), sharding={devices=[4,2]<=[8]}" in text


def test_per_device_blocks(tmp_path):
    module, arrays = fixture("sm_psum_ppermute")
    x = arrays["arg0"]
    blocks = {f"r{k}.arg0": x[2 * k:2 * k + 2] for k in range(4)}
    save_npz(tmp_path / "in.npz", blocks)
    out = tmp_path / "out.npz"
    assert main(["run", module, "--arrays", "per-device", "--inputs",
                 str(tmp_path / "in.npz"), "--output", str(out), "--quiet"]) == 0
    saved = load_npz(out)
    assert sorted(saved) == [f"r{k}.out0" for k in range(4)]
    got = np.concatenate([saved[f"r{k}.out0"] for k in range(4)])
    np.testing.assert_allclose(got, arrays["out0"], rtol=1e-6)


def test_random_global_arguments_equal_one_device(tmp_path, capsys):
    module, _ = fixture("jit_matmul_tanh")
    assert main(["run", module, "--seed", "3"]) == 0
    four = capsys.readouterr().out
    assert main(["run", module, "--seed", "3", "--partitions", "1"]) == 0
    one = capsys.readouterr().out
    got = np.array([float(v) for v in four.split("{")[1].split("}")[0].split(",")])
    want = np.array([float(v) for v in one.split("{")[1].split("}")[0].split(",")])
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_input_errors_name_the_mode(tmp_path, capsys):
    module, arrays = fixture("sm_psum_ppermute")
    save_npz(tmp_path / "pd.npz", {"r0.arg0": arrays["arg0"][:2]})
    assert main(["run", module, "--inputs", str(tmp_path / "pd.npz")]) != 0
    err = capsys.readouterr().err
    assert "holds per-device keys (r0.arg0...)" in err and "--arrays per-device" in err
    assert main(["run", module, "--arrays", "per-device", "--inputs",
                 inputs(tmp_path, arrays)]) != 0
    assert "arg0 is f32[8,3], but parameter 0 %x.1 is f32[2,3]{1,0}" in capsys.readouterr().err
    assert main(["run", module, "--partitions", "2"]) != 0
    assert ("the module's shardings name 4 devices, but it is partitioned for 2"
            in capsys.readouterr().err)


def test_opt_prints_the_per_device_module(capsys):
    module, _ = fixture("jit_reshard", "gspmd")
    assert main(["opt", "--passes=spmd-partition", module]) == 0
    text = capsys.readouterr().out
    assert "num_partitions=8" in text and "ENTRY %main" in text and "_spmd" in text
    assert "all-to-all(" in text and "all-gather(" in text
    assert "f32[2,4]{1,0} parameter(0), sharding={devices=[4,2]<=[8]}" in text


def test_graph_labels_shardings(tmp_path, capsys):
    module, _ = fixture("jit_matmul_tanh", "gspmd")
    assert main(["graph", module]) == 0
    written = capsys.readouterr().out
    assert "sharding={devices=[2,2]&lt;=[4]}" in written
    assert "dot_general.1</font><br/>lhs" in written  # no sharding written on the dot
    module, _ = fixture("jit_matmul_tanh", "shardy")
    assert main(["graph", "--shardings", "propagated", module]) == 0
    propagated = capsys.readouterr().out
    assert ("dot_general.1</font><br/>lhs_contracting_dims={1}<br/>rhs_contracting_dims={0}"
            "<br/><font color=\"#6a1b9a\">sharding={devices=[2,1,2]&lt;=[4] "
            "last_tile_dim_replicate}") in propagated

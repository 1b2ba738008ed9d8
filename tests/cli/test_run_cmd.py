"""``xlapy run``: the real command in a subprocess and in-process."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from xlapy.cli import main
from xlapy.npz import load_npz, save_npz

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "mlp.hlo"

ADD = """HloModule add
ENTRY main {
  x = f32[3] parameter(0)
  y = bf16[2] parameter(1)
  c = f32[3] add(x, x)
  d = bf16[2] negate(y)
  ROOT t = (f32[3], bf16[2]) tuple(c, d)
}
"""


def test_example_runs_in_a_subprocess():
    proc = subprocess.run([sys.executable, "-m", "xlapy", "run", str(EXAMPLE)],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("f32[2,3] {")
    rows = [line for line in proc.stdout.splitlines() if line.strip().startswith("{")]
    for row in rows:  # softmax rows sum to 1
        values = [float(v) for v in row.strip(" {},").split(",")]
        assert abs(sum(values) - 1) < 1e-5


def test_inputs_and_outputs_npz(tmp_path, capsys):
    module = tmp_path / "m.hlo"
    module.write_text(ADD)
    import ml_dtypes

    save_npz(tmp_path / "in.npz", {"arg0": np.array([1, 2, 3], np.float32),
                                   "arg1": np.array([1.5, -2], ml_dtypes.bfloat16)})
    assert main(["run", str(module), "--inputs", str(tmp_path / "in.npz"),
                 "--output", str(tmp_path / "out.npz")]) == 0
    out = load_npz(tmp_path / "out.npz")
    np.testing.assert_array_equal(out["out0"], [2, 4, 6])
    assert out["out1"].dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(out["out1"].astype(np.float32), [-1.5, 2])
    printed = capsys.readouterr().out
    assert "f32[3] {2, 4, 6}" in printed and "bf16[2] {-1.5, 2}" in printed


def test_a_glob_skips_directories(tmp_path, capsys):
    """An XLA dump folder holds a subdirectory per module: a glob that picks one skips it as
    it skips any file holding no module; a directory named on the command line is an error."""
    (tmp_path / "a.hlo").write_text(ADD)
    (tmp_path / "module_0001").mkdir()
    assert main(["run", f"{tmp_path}/*", "--backend", "interpreter", "--quiet"]) == 0
    captured = capsys.readouterr()
    assert f"skipped {tmp_path}/module_0001: not an HLO module (a directory)" in captured.out
    assert f"== {tmp_path}/a.hlo" in captured.out and captured.err == ""
    assert main(["run", str(tmp_path / "module_0001")]) == 2
    assert capsys.readouterr().err.startswith(
        f"xlapy run: error: {tmp_path}/module_0001: not an HLO module (a directory)")


def test_random_inputs_are_deterministic(tmp_path, capsys):
    module = tmp_path / "m.hlo"
    module.write_text(ADD)
    main(["run", str(module), "--seed", "3"])
    first = capsys.readouterr().out
    main(["run", str(module), "--seed", "3"])
    assert capsys.readouterr().out == first


def test_index_operands_stay_in_bounds(tmp_path, capsys):
    module = tmp_path / "ds.hlo"
    module.write_text("""HloModule ds
ENTRY main {
  x = f32[10] parameter(0)
  i = s32[] parameter(1)
  ROOT s = f32[4] dynamic-slice(x, i), dynamic_slice_sizes={4}
}
""")
    from xlapy.interpreter.fake_args import make_fake_arguments
    from xlapy.parser import parse_hlo_module

    m = parse_hlo_module(module.read_text())
    for seed in range(20):
        _, i = make_fake_arguments(m, seed)
        assert 0 <= int(i) <= 6


@pytest.mark.parametrize("argv,message", [
    (["run", "/nonexistent.hlo"], "cannot read /nonexistent.hlo"),
    (["run", "MODULE", "--inputs", "MISSING"], "cannot read npz file MISSING"),
])
def test_bad_input(tmp_path, capsys, argv, message):
    module = tmp_path / "m.hlo"
    module.write_text(ADD)
    argv = [str(module) if a == "MODULE" else a for a in argv]
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_parse_error_exit_code_and_caret(tmp_path):
    module = tmp_path / "bad.hlo"
    module.write_text("HloModule m\nENTRY e {\n  ROOT x = f32[] negat(1)\n}\n")
    proc = subprocess.run([sys.executable, "-m", "xlapy", "run", str(module)],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2
    assert ("xlapy run: error: was parsing 3:18: error: expects opcode but sees: negat, error: "
            "Unknown opcode: negat\n    ROOT x = f32[] negat(1)\n                   ^") in proc.stderr
    assert "Traceback" not in proc.stderr


def test_missing_and_extra_npz_keys(tmp_path, capsys):
    module = tmp_path / "m.hlo"
    module.write_text(ADD)
    save_npz(tmp_path / "in.npz", {"arg0": np.zeros(3, np.float32)})
    assert main(["run", str(module), "--inputs", str(tmp_path / "in.npz")]) == 2
    assert "missing arg1 for parameter 1 %y (bf16[2]{0})" in capsys.readouterr().err


def test_npz_keeps_scalars_of_ml_dtypes(tmp_path):
    import ml_dtypes

    save_npz(tmp_path / "s.npz", {"a": np.array(1.5, ml_dtypes.bfloat16)})
    a = load_npz(tmp_path / "s.npz")["a"]
    assert a.shape == () and a.dtype == ml_dtypes.bfloat16 and float(a) == 1.5

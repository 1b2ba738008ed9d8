"""``xlapy run``, ``opt`` and ``graph`` take StableHLO (MLIR) text, told apart from HLO text
by its content; its errors point at the MLIR line and column (exit code 2)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from xlapy.cli import main
from xlapy.npz import load_npz

ROOT = Path(__file__).resolve().parents[2]
MLIR = ROOT / "tests" / "stablehlo" / "fixtures"
JAX = ROOT / "tests" / "fixtures" / "jax"


def test_run_a_jax_stablehlo_file_on_its_recorded_inputs(tmp_path, capsys):
    out = tmp_path / "out.npz"
    code = main(["run", str(MLIR / "mlp_forward.mlir"), "--inputs", str(JAX / "mlp_forward.npz"),
                 "--output", str(out), "--quiet"])
    assert code == 0
    got = load_npz(out)["out0"]
    want = load_npz(JAX / "mlp_forward.npz")["out0"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_run_stablehlo_from_stdin_in_a_subprocess():
    text = """func.func @main() -> tensor<3xi32> {
  %0 = stablehlo.iota dim = 0 : tensor<3xi32>
  %1 = stablehlo.multiply %0, %0 : tensor<3xi32>
  return %1 : tensor<3xi32>
}
"""
    proc = subprocess.run([sys.executable, "-m", "xlapy", "run", "-"], input=text,
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "s32[3] {0, 1, 4}"


def test_errors_name_the_mlir_position(capsys):
    bad = MLIR.parent / "does_not_exist.mlir"
    assert not bad.exists()
    text = "func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {\n" \
           "  %0 = stablehlo.add %a, %b : tensor<2xf32>\n  return %0 : tensor<2xf32>\n}\n"
    proc = subprocess.run([sys.executable, "-m", "xlapy", "run", "-"], input=text,
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2
    lines = proc.stderr.splitlines()
    assert lines[0] == "xlapy run: error: stablehlo:2:26: use of undefined value '%b'"
    assert lines[2].index("^") == lines[1].index("%b")


def test_opt_prints_hlo(tmp_path, capsys):
    out = tmp_path / "o.hlo"
    assert main(["opt", str(MLIR / "nested_jit_call.mlir"), "--passes", "inline", "-o",
                 str(out)]) == 0
    text = out.read_text()
    assert text.startswith("HloModule jit_nested_jit_call")
    assert "call(" not in text and "sine(" in text


def test_graph_draws_stablehlo(capsys):
    assert main(["graph", str(MLIR / "cond.mlir")]) == 0
    assert capsys.readouterr().out.startswith("digraph")

"""``xlapy opt``: prints the optimised module as HLO text that parses back and computes the
same bits; --passes order and validation, --list, --fixed-point, --stats, -o, stdin, and
one-line errors with exit code 2 (in-process ``main`` calls plus real subprocess runs)."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np

import xlapy
from xlapy.cli import main

ROOT = Path(__file__).resolve().parents[2]
MLP_GRAD = ROOT / "tests" / "fixtures" / "jax" / "mlp_grad.pre.hlo"

TEXT = """
HloModule m
f {
  a = f32[4] parameter(0)
  ROOT e = f32[4] exponential(a)
}
ENTRY e {
  x = f32[4] parameter(0)
  c1 = f32[4] call(x), to_apply=f
  c2 = f32[4] call(x), to_apply=f
  n = f32[4] negate(c1)
  nn = f32[4] negate(n)
  two = f32[] constant(2)
  three = f32[] constant(3)
  six = f32[] multiply(two, three)
  b = f32[4] broadcast(six), dimensions={}
  dead = f32[4] subtract(x, b)
  s = f32[4] add(nn, c2)
  ROOT r = f32[4] multiply(s, b)
}
"""


def _ops(text: str) -> Counter:
    m = xlapy.parse_hlo_module(text)
    return Counter(i.opcode for c in m.computations for i in c.instructions)


def _run(argv, capsys, stdin: str | None = None, monkeypatch=None):
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_default_pipeline_prints_equivalent_module(tmp_path, capsys):
    path = tmp_path / "m.hlo"
    path.write_text(TEXT)
    code, out, err = _run(["opt", str(path)], capsys)
    assert code == 0 and err == ""
    assert out.startswith("HloModule m")
    assert dict(_ops(out)) == {"parameter": 1, "exponential": 1, "add": 1, "multiply": 1,
                               "constant": 1, "broadcast": 1}
    x = np.array([0.0, -0.0, np.inf, np.nan], np.float32)
    before = xlapy.evaluate(xlapy.parse_hlo_module(TEXT), x)
    after = xlapy.evaluate(xlapy.parse_hlo_module(out), x)
    assert before.tobytes() == after.tobytes()


def test_passes_option_runs_only_those(tmp_path, capsys, monkeypatch):
    code, out, _ = _run(["opt", "-", "--passes=dce"], capsys, TEXT, monkeypatch)
    assert code == 0
    ops = _ops(out)
    assert ops["call"] == 2 and ops["negate"] == 2 and ops["subtract"] == 0
    code, out, _ = _run(["opt", "-", "--passes", "inline,cse,dce"], capsys, TEXT, monkeypatch)
    assert _ops(out)["exponential"] == 1 and _ops(out)["negate"] == 2


def test_fixed_point_and_stats(capsys, monkeypatch):
    code, out, err = _run(["opt", "-", "--passes=dce,simplify", "--stats"], capsys, TEXT,
                          monkeypatch)
    assert code == 0
    assert _ops(out)["negate"] == 1  # simplify orphaned the inner one after dce had run
    assert err.startswith("instructions: 14 -> 12; ")
    code, out, err = _run(["opt", "-", "--passes=dce,simplify", "--fixed-point", "--stats"],
                          capsys, TEXT, monkeypatch)
    assert _ops(out)["negate"] == 0
    assert "changed by: dce, simplify" in err


def test_list(capsys):
    code, out, _ = _run(["opt", "--list"], capsys)
    assert code == 0
    names = [line.split()[0] for line in out.splitlines() if re.match(r"  \S", line)]
    assert names == ["inline", "simplify", "constant-folding", "cse", "dce", "fusion",
                     "layout-assignment", "spmd-partition", "excess-precision", "map-inline",
                     "batch-norm-expander", "dot-upcast", "reduce-window-rewriter"]
    # (further description lines are indented more)


def test_errors_are_one_line_exit_2(tmp_path, capsys, monkeypatch):
    code, _, err = _run(["opt", "-", "--passes=dce,bogus"], capsys, TEXT, monkeypatch)
    assert code == 2
    assert err == ("xlapy opt: error: --passes: unknown pass 'bogus' (known: inline, simplify, "
                   "constant-folding, cse, dce, fusion, layout-assignment, spmd-partition, "
                   "excess-precision, map-inline, batch-norm-expander, dot-upcast, "
                   "reduce-window-rewriter)\n")
    code, _, err = _run(["opt", str(tmp_path / "missing.hlo")], capsys)
    assert code == 2 and err.startswith("xlapy opt: error: cannot read ") and err.count("\n") == 1
    code, _, err = _run(["opt"], capsys)
    assert code == 2 and "expected MODULE" in err
    code, _, err = _run(["opt", "-"], capsys, "HloModule m\nENTRY e {\n  ROOT x = f32[] bogus()\n}\n",
                        monkeypatch)
    assert code == 2 and err.startswith("xlapy opt: error: ")


def test_output_file(tmp_path, capsys):
    out_path = tmp_path / "out.hlo"
    code, out, _ = _run(["opt", str(MLP_GRAD), "-o", str(out_path)], capsys)
    assert code == 0 and out == ""
    text = out_path.read_text()
    assert sum(_ops(text).values()) < sum(_ops(MLP_GRAD.read_text()).values())
    xlapy.verify_module(xlapy.parse_hlo_module(text))


def test_subprocess_stdin_and_help():
    r = subprocess.run([sys.executable, "-m", "xlapy", "opt", "-", "--fixed-point"], input=TEXT,
                       capture_output=True, text=True, cwd=ROOT, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    assert _ops(r.stdout)["call"] == 0
    r = subprocess.run([sys.executable, "-m", "xlapy", "opt", "--help"], capture_output=True,
                       text=True, cwd=ROOT, timeout=120, check=False)
    assert r.returncode == 0 and "examples:" in r.stdout and "constant-folding" in r.stdout
    r = subprocess.run([sys.executable, "-m", "xlapy", "opt", "nope.hlo"], capture_output=True,
                       text=True, cwd=ROOT, timeout=120, check=False)
    assert r.returncode == 2 and r.stderr.startswith("xlapy opt: error: cannot read nope.hlo")

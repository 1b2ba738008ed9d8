"""``xlapy run / opt / graph`` on XLA's protos: detected by content whatever the file is
called, an HloSnapshot runs on its own arguments, a glob skips the files of a dump that hold
no module ("not an HLO module"), a named one is an error; ``--reference xla`` compares with
real XLA:CPU (when jax is installed). Fixtures: tests/fixtures/proto."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from xlapy.cli import main
from xlapy.npz import load_npz

pytest.importorskip("google.protobuf")

ROOT = Path(__file__).resolve().parents[2]
PROTO = ROOT / "tests" / "fixtures" / "proto"
JAX_FIXTURES = ROOT / "tests" / "fixtures" / "jax"


def run_cli(argv, capsys):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_snapshot_runs_on_its_arguments(tmp_path, capsys):
    from xlapy.interpreter.values import flatten, literal_to_value
    from xlapy.proto import parse_hlo_snapshot

    path = PROTO / "mlp.snapshot.pb"
    out_npz = tmp_path / "out.npz"
    code, out, err = run_cli(["run", path, "--backend", "interpreter", "--output", out_npz],
                             capsys)
    assert code == 0, err
    assert out.startswith("(\nf32[5] {")
    snap = parse_hlo_snapshot(path.read_bytes())
    want = [np.asarray(v) for v in flatten(literal_to_value(snap.result))]  # XLA:CPU's result
    got = load_npz(str(out_npz))
    for i, w in enumerate(want):
        np.testing.assert_allclose(got[f"out{i}"].astype(np.float64), w.astype(np.float64),
                                   rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["mlp.before_optimizations.hlo.pb",
                                  "mlp.before_optimizations.pbtxt",
                                  "mlp.cpu_after_optimizations.hlo.pb"])
def test_proto_files_run_like_the_text(tmp_path, capsys, name):
    renamed = tmp_path / "module.bin"  # the content decides, not the name
    shutil.copyfile(PROTO / name, renamed)
    code, out, err = run_cli(["run", renamed, "--backend", "interpreter", "--seed", "3"], capsys)
    assert code == 0, err
    text = PROTO / name.replace(".hlo.pb", ".txt").replace(".pbtxt", ".txt")
    code, out_text, _ = run_cli(["run", text, "--backend", "interpreter", "--seed", "3"], capsys)
    assert code == 0 and out == out_text


def test_a_glob_skips_files_that_hold_no_module(tmp_path, capsys):
    for path in (PROTO / "not_a_module").iterdir():
        shutil.copyfile(path, tmp_path / path.name)
    shutil.copyfile(PROTO / "mlp.before_optimizations.hlo.pb", tmp_path / "mlp.hlo.pb")
    code, out, err = run_cli(["run", f"{tmp_path}/*", "--backend", "interpreter", "--quiet"],
                             capsys)
    assert code == 0, err
    skipped = [line for line in out.splitlines() if line.startswith("skipped ")]
    assert len(skipped) == 5
    assert all(": not an HLO module (" in line for line in skipped)
    assert f"skipped {tmp_path}/mlp.kernel.o: not an HLO module (binary data that is not a " \
           f"serialized HloSnapshot" in out
    assert f"== {tmp_path}/mlp.hlo.pb" in out and err == ""


def test_a_named_file_that_holds_no_module_is_an_error(capsys):
    path = PROTO / "not_a_module" / "mlp.cpu_after_optimizations-memory-usage-report.pb"
    code, _, err = run_cli(["run", path], capsys)
    assert code == 2
    assert err.startswith(f"xlapy run: error: {path}: not an HLO module (binary data")


def test_binary_proto_on_stdin():
    data = (PROTO / "narrow_types.before_optimizations.hlo.pb").read_bytes()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "xlapy", "run", "-", "--backend",
                           "interpreter"], input=data, capture_output=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout.decode().startswith("f32[4] {")


def test_opt_and_graph_read_protos(tmp_path, capsys):
    code, out, err = run_cli(["opt", PROTO / "scan_loop.before_optimizations.hlo.pb",
                              "--passes=dce"], capsys)
    assert code == 0, err
    assert out.startswith("HloModule jit_scan_loop, entry_computation_layout=")
    dot = tmp_path / "g.dot"
    code, _, err = run_cli(["graph", PROTO / "mlp.snapshot.pb", "-o", dot], capsys)
    assert code == 0, err
    assert dot.read_text().startswith("digraph")


# -- --reference xla (real XLA:CPU through jax) ----------------------------------------------


def test_reference_xla_matches(capsys):
    pytest.importorskip("jax")
    path = JAX_FIXTURES / "softmax.pre.hlo"
    code, out, err = run_cli(["run", path, "--backend", "interpreter", "--reference", "xla"],
                             capsys)
    assert code == 0, err
    assert f"compare {path}: interpreter against reference xla" in out
    assert "OK: 1 output within the tolerances" in out


def test_unoptimized_snapshot_against_xla(capsys):
    pytest.importorskip("jax")
    path = PROTO / "cholesky_solve.hlo_unoptimized_snapshot.pb"
    code, out, err = run_cli(["run", path, "--backend", "interpreter", "--reference", "xla"],
                             capsys)
    assert code == 0, err
    assert "OK: 1 output within the tolerances" in out


def test_reference_xla_bisects(tmp_path, capsys):
    pytest.importorskip("jax")
    from xlapy.backends.base import BACKENDS, register_backend
    from xlapy.backends.interpreter import InterpreterBackend, InterpreterProgram
    from xlapy.interpreter.evaluator import EvalContext

    class Ctx(EvalContext):
        def run_instruction(self, instr, args):
            out = super().run_instruction(instr, args)
            return out + np.float32(0.5) if instr.opcode == "exponential" else out

    class Program(InterpreterProgram):
        def run(self, args, options):
            return Ctx(self.module, options).call(self.module.entry, list(args))

    class Backend(InterpreterBackend):
        def compile(self, module):
            super().compile(module)
            return Program(module)

    register_backend("exp-off", Backend)
    try:
        code, out, _ = run_cli(["run", JAX_FIXTURES / "softmax.pre.hlo", "--backend", "exp-off",
                                "--reference", "xla"], capsys)
    finally:
        BACKENDS.pop("exp-off", None)
    assert code == 1
    lines = out.splitlines()
    at = lines.index(next(line for line in lines if line.startswith("first divergent")))
    assert " exponential(" in lines[at + 1]


def test_reference_xla_refuses_an_optimized_module(capsys):
    pytest.importorskip("jax")
    code, _, err = run_cli(["run", PROTO / "mlp.cpu_after_optimizations.hlo.pb",
                            "--reference", "xla"], capsys)
    assert code == 2
    assert "the xla backend compiles modules before XLA's optimizations" in err

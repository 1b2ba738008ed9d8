"""``xlapy run --backend B --reference R``: comparison summary, exit codes, bisection through
the command, several modules and globs, --iterations, --print-literals, the progress line
only on a terminal. The faulty backend (the interpreter with multiply perturbed by +0.5) is
registered by this test only."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from xlapy.cli import main
from xlapy.npz import save_npz

ROOT = Path(__file__).resolve().parents[2]

FAULTY_SOURCE = '''
import numpy as np
from xlapy.interpreter.evaluator import EvalContext
from xlapy.backends.base import register_backend
from xlapy.backends.interpreter import InterpreterBackend, InterpreterProgram

def faulty(delta):
    class Ctx(EvalContext):
        def run_instruction(self, instr, args):
            out = super().run_instruction(instr, args)
            if instr.opcode == "multiply":
                out = (out + np.asarray(delta, out.dtype)).astype(out.dtype)
            return out

    class Program(InterpreterProgram):
        def run(self, args, options):
            return Ctx(self.module, options).call(self.module.entry, list(args))

    class Backend(InterpreterBackend):
        def compile(self, module):
            super().compile(module)
            return Program(module)
    return Backend

register_backend("faulty", faulty(0.5))
register_backend("slightly-off", faulty(0.0009))
'''

MODULE = """HloModule chain
ENTRY e {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  sum = f32[4] add(x, y)
  prod = f32[4] multiply(sum, x)
  neg = f32[4] negate(prod)
  ROOT ex = f32[4] exponential(neg)
}
"""

NO_MULTIPLY = """HloModule plain
ENTRY e {
  x = s32[3] parameter(0)
  ROOT n = s32[3] negate(x)
}
"""


@pytest.fixture(autouse=True)
def backends():
    from xlapy.backends.base import BACKENDS

    exec(compile(FAULTY_SOURCE, "faulty_backend", "exec"), {})  # noqa: S102 - test code
    yield
    BACKENDS.pop("faulty", None)
    BACKENDS.pop("slightly-off", None)


@pytest.fixture
def module(tmp_path):
    path = tmp_path / "chain.hlo"
    path.write_text(MODULE)
    return path


def run_cli(args, capsys):
    code = main(["run", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def test_equal_backends_exit_0_with_a_summary(module, capsys):
    code, out, err = run_cli([module, "--reference", "interpreter"], capsys)
    assert code == 0, err
    assert f"compare {module}: cpu against reference interpreter" in out  # cpu: the default
    assert "out0 f32[4]: max abs error 0, max rel error 0, mismatches 0/4" in out
    assert "OK: 1 output within the tolerances" in out
    assert err == ""


def test_mismatch_exits_1_and_bisects_to_the_faulty_instruction(module, capsys):
    code, out, _ = run_cli([module, "--backend", "faulty", "--reference", "interpreter"], capsys)
    assert code == 1
    assert "MISMATCH: 1 of 1 output differ" in out
    assert "mismatches 4/4" in out
    lines = out.splitlines()
    at = lines.index(next(line for line in lines if line.startswith("first divergent")))
    assert lines[at + 1].strip().startswith("%prod = f32[4]{0} multiply(")
    assert lines[at + 2].startswith("  operand 0 %sum: f32[4] min=")
    assert lines[at + 3].startswith("  operand 1 %x: f32[4] min=")
    assert "max abs error 0.5" in lines[at + 4]
    assert "%neg" not in "\n".join(lines[at:])  # consumers are not blamed


def test_no_bisect(module, capsys):
    code, out, _ = run_cli([module, "--backend", "faulty", "--reference", "interpreter",
                            "--no-bisect"], capsys)
    assert code == 1 and "first divergent" not in out


def test_tolerances_decide(module, capsys):
    # +0.0009 on multiply: within the default 1e-3 (the exponential shrinks it further)
    code, out, _ = run_cli([module, "--backend", "slightly-off", "--reference", "interpreter"],
                           capsys)
    assert code == 0, out
    # tighter bounds: the same difference fails, and bisection still names the multiply
    code, out, _ = run_cli([module, "--backend", "slightly-off", "--reference", "interpreter",
                            "--abs-error", "1e-6", "--rel-error", "1e-6"], capsys)
    assert code == 1
    assert "abs error 1e-06, rel error 1e-06" in out
    assert "  %prod = " in out
    # looser bounds accept the faulty +0.5
    code, out, _ = run_cli([module, "--backend", "faulty", "--reference", "interpreter",
                            "--abs-error", "1", "--rel-error", "0"], capsys)
    assert code == 0, out


def test_bad_input_exits_2(module, tmp_path, capsys):
    code, _, err = run_cli([module, "--backend", "tpu", "--reference", "interpreter"], capsys)
    assert code == 2
    assert err.strip() == ("xlapy run: error: unknown backend 'tpu'; registered backends: "
                           "cpu, faulty, interpreter, slightly-off, xla")
    code, _, err = run_cli([module, "--reference", "gpu"], capsys)
    assert code == 2 and "unknown backend 'gpu'" in err
    code, _, err = run_cli([module, "--iterations", "0"], capsys)
    assert code == 2 and "--iterations must be at least 1" in err
    code, _, err = run_cli([module, "--abs-error", "-1", "--reference", "interpreter"], capsys)
    assert code == 2 and "--abs-error must be >= 0" in err
    broken = tmp_path / "broken.hlo"
    broken.write_text("HloModule x\nENTRY e {\n  ROOT r = f32[] bogus()\n}\n")
    code, _, err = run_cli([broken, "--reference", "interpreter"], capsys)
    assert code == 2 and "error" in err


def test_inputs_from_npz_are_compared(module, tmp_path, capsys):
    save_npz(tmp_path / "in.npz", {"arg0": np.float32([0, 0, 0, 0]),
                                   "arg1": np.float32([1, 2, 3, 4])})
    # multiply(sum, x) with x = 0: the faulty +0.5 still shows
    code, out, _ = run_cli([module, "--backend", "faulty", "--reference", "interpreter",
                            "--inputs", tmp_path / "in.npz", "--print-literals"], capsys)
    assert code == 1
    assert "input 0 %x: f32[4] {0, 0, 0, 0}" in out
    assert "output (interpreter, reference): f32[4] {1, 1, 1, 1}" in out
    assert "output (faulty): f32[4] {0.60653" in out


def test_several_modules_and_a_glob_the_shell_did_not_expand(tmp_path, capsys):
    dumps = tmp_path / "dumps"
    dumps.mkdir()
    (dumps / "a.hlo").write_text(MODULE)
    (dumps / "b.hlo").write_text(NO_MULTIPLY)
    (dumps / "c.txt").write_text("not a module")
    code, out, _ = run_cli([str(dumps / "*.hlo"), "--backend", "faulty",
                            "--reference", "interpreter"], capsys)
    assert code == 1  # a.hlo differs, b.hlo matches
    assert f"== {dumps / 'a.hlo'}" in out and f"== {dumps / 'b.hlo'}" in out
    assert "c.txt" not in out
    assert out.rstrip().endswith("2 modules: 1 match, 1 differ, 0 failed")
    # the same module twice plus the glob, without a reference: every one runs
    code, out, _ = run_cli([dumps / "b.hlo", str(dumps / "*.hlo")], capsys)
    assert code == 0 and out.count("== ") == 3


def test_a_failing_module_among_several_gives_2_and_the_others_still_run(tmp_path, capsys):
    (tmp_path / "a.hlo").write_text(NO_MULTIPLY)
    (tmp_path / "b.hlo").write_text("HloModule nope\n")
    code, out, err = run_cli([tmp_path / "a.hlo", tmp_path / "b.hlo", "--reference",
                              "interpreter"], capsys)
    assert code == 2
    assert "OK: 1 output" in out and f"xlapy run: error: {tmp_path / 'b.hlo'}: " in err
    assert "2 modules: 1 match, 0 differ, 1 failed" in out


def test_glob_without_match_and_single_module_options(tmp_path, capsys):
    code, _, err = run_cli([str(tmp_path / "*.hlo")], capsys)
    assert code == 2 and err.strip().endswith(f"no file matches {tmp_path / '*.hlo'}")
    (tmp_path / "a.hlo").write_text(NO_MULTIPLY)
    (tmp_path / "b.hlo").write_text(NO_MULTIPLY)
    code, _, err = run_cli([str(tmp_path / "*.hlo"), "--output", tmp_path / "o.npz"], capsys)
    assert code == 2 and "--output takes a single module, got 2" in err


def test_iterations_report_min_and_median_per_backend(module, capsys):
    code, out, _ = run_cli([module, "--backend", "faulty", "--reference", "interpreter",
                            "--iterations", "3", "--no-bisect"], capsys)
    assert code == 1
    times = [line.strip() for line in out.splitlines() if line.strip().startswith("time ")]
    assert len(times) == 2
    assert times[0].startswith("time faulty: min ") and "median" in times[0]
    assert times[1].startswith("time interpreter: min ")
    assert all("over 3 iterations" in t for t in times)


def test_iterations_without_reference(module, capsys):
    code, out, _ = run_cli([module, "--iterations", "2", "--quiet"], capsys)
    assert code == 0
    assert out.startswith("time cpu: min ") and "over 2 iterations" in out


def test_print_literals_without_reference_prints_inputs_then_results(module, capsys):
    code, out, _ = run_cli([module, "--print-literals", "--seed", "1"], capsys)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("input 0 %x: f32[4] {")
    assert lines[1].startswith("input 1 %y: f32[4] {")
    assert lines[2].startswith("f32[4] {")
    code, plain, _ = run_cli([module, "--seed", "1"], capsys)
    assert plain.splitlines() == lines[2:]  # same result as the plain run


def test_no_progress_line_when_stderr_is_not_a_terminal(module, capsys):
    code, _, err = run_cli([module, "--backend", "faulty", "--reference", "interpreter"], capsys)
    assert code == 1 and err == ""


def test_progress_forced_on(module, capsys):
    code, _, err = run_cli([module, "--backend", "faulty", "--reference", "interpreter",
                            "--progress", "always"], capsys)
    assert code == 1
    assert "\r[" in err and "bisect: instruction" in err
    assert err.endswith("\r")  # the line is erased at the end


def _script(args):
    return (FAULTY_SOURCE + "\nimport sys\nfrom xlapy.cli import main\n"
            f"sys.exit(main({['run', *map(str, args)]!r}))\n")


def test_subprocess_compare_and_exit_code(module):
    proc = subprocess.run([sys.executable, "-c", _script([module, "--backend", "faulty",
                                                          "--reference", "interpreter"])],
                          check=False, capture_output=True, text=True,
                          cwd=ROOT)
    assert proc.returncode == 1, proc.stderr
    assert "  %prod = f32[4]{0} multiply(" in proc.stdout
    assert proc.stderr == ""  # stderr is a pipe: no progress line
    proc = subprocess.run([sys.executable, "-m", "xlapy", "run", str(module), "--reference",
                           "interpreter"], check=False, capture_output=True, text=True,
                          cwd=ROOT)
    assert proc.returncode == 0 and "OK: 1 output" in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "xlapy", "run", "--help"],
                          check=False, capture_output=True, text=True,
                          cwd=ROOT)
    assert "--reference" in proc.stdout and "--iterations" in proc.stdout
    assert "xlapy run m.hlo --backend cpu --reference interpreter" in proc.stdout


def test_progress_line_on_a_terminal(module):
    import pty
    import select

    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-c", _script([module, "--backend", "faulty", "--reference",
                                            "interpreter"])],
            stdout=subprocess.PIPE, stderr=follower, cwd=ROOT)
        os.close(follower)
        follower = None
        err = b""
        while True:
            ready, _, _ = select.select([leader], [], [], 30)
            if not ready:
                break
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the child closed its side
                break
            if not chunk:
                break
            err += chunk
        out = proc.stdout.read().decode()
        assert proc.wait(30) == 1
    finally:
        os.close(leader)
        if follower is not None:
            os.close(follower)
    text = err.decode()
    assert "\r[" in text and "] " in text
    assert "chain.hlo: compiling for faulty" in text or "run 1/1" in text
    assert "%prod" in out

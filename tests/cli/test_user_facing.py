"""The command and API as a new user meets them (issue 17, item 3): one default backend for
``xlapy.Client()``, ``xlapy.jit``, ``xlapy.compare`` and ``xlapy run``; help texts that say
what runs and what is measured; ``opt --help`` and ``--list`` showing every pass with a
description; ``--version`` naming the libraries, the BLAS kernel and the host CPU features;
large results summarised (``--print-all`` for every element); ``--output`` writing exactly
the name given, an unwritable one refused before the run; a bf16 array saved with plain
``np.savez`` explained; the progress line on a terminal (a pseudo-terminal) and nothing on a
pipe."""

from __future__ import annotations

import inspect
import os
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import xlapy
from xlapy.cli import main
from xlapy.npz import load_npz, save_npz

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "mlp.hlo"

BIG = """HloModule big
ENTRY main {
  x = f32[] parameter(0)
  ROOT b = f32[2048,2048] broadcast(x), dimensions={}
}
"""

LOOP = """HloModule loop
cond {
  p = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(%d)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  p = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[4] get-tuple-element(p), index=1
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  x1 = f32[4] add(x, x)
  ROOT t = (s32[], f32[4]) tuple(i1, x1)
}
ENTRY e {
  x = f32[4] parameter(0)
  z = s32[] constant(0)
  t = (s32[], f32[4]) tuple(z, x)
  w = (s32[], f32[4]) while(t), condition=cond, body=body
  ROOT r = f32[4] get-tuple-element(w), index=1
}
"""


def _env(**extra) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.update(extra)
    return env


def run_cli(*argv, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "xlapy", *map(str, argv)], capture_output=True,
                          text=True, cwd=ROOT, env=_env(**env), timeout=600, check=False)


# -- one default backend ------------------------------------------------------------------


def test_one_default_backend_everywhere():
    from xlapy.cli import run_cmd
    from xlapy.runtime.client import DEFAULT_BACKEND

    assert DEFAULT_BACKEND == "cpu"
    assert xlapy.Client().platform == DEFAULT_BACKEND
    assert run_cmd.DEFAULT_BACKEND == DEFAULT_BACKEND
    for fn in (xlapy.jit, xlapy.compare):
        assert inspect.signature(fn).parameters["backend"].default == DEFAULT_BACKEND


def test_run_help_says_the_backend():
    proc = run_cli("run", "--help")
    assert proc.returncode == 0
    text = " ".join(proc.stdout.split())
    assert "compiled CPU backend (--backend cpu, the default, as xlapy.Client()" in text
    assert "reference interpreter" in text
    top = " ".join(run_cli("--help").stdout.split())
    assert "run an HLO module (on the CPU backend)" in top
    assert "on the interpreter" not in top


def test_bench_help_says_what_it_measures():
    text = " ".join(run_cli("bench", "--help").stdout.split())
    assert "Measure the wall time of the benchmark suite's cases" in text
    assert "xlapy/XLA and xlapy/NumPy" in text
    assert "issue" not in text


def test_opt_help_and_list_show_every_pass_with_a_description():
    from xlapy.cli.opt_cmd import _DEFAULT, _SUMMARIES
    from xlapy.passes import DEFAULT_PASSES, PASSES

    assert list(_SUMMARIES) == list(PASSES)
    assert _DEFAULT == DEFAULT_PASSES
    listed = run_cli("opt", "--list").stdout
    help_text = run_cli("opt", "--help").stdout
    help_passes = help_text[help_text.index("passes (run in"):help_text.index("The module is")]
    for name in PASSES:
        line = re.search(rf"^  {re.escape(name)} +(\S.*)$", listed, re.MULTILINE)
        assert line and len(line.group(1)) > 10, (name, listed)
        assert re.search(rf"^  {re.escape(name)} +\S", help_passes, re.MULTILINE), name
    assert listed.strip() in help_passes


def test_opt_help_says_which_passes_are_exact():
    """The passes that change results are named as such, not covered by 'every pass is
    exact'."""
    text = " ".join(run_cli("opt", "--help").stdout.split())
    assert "Every pass is exact" not in text
    assert ("Every pass but spmd-partition, excess-precision, batch-norm-expander and dot-upcast "
            "is exact: the printed module computes the same bits as the input") in text
    assert "excess-precision gives XLA:CPU's answers" in text
    assert "batch-norm-expander gives batch norms in the operand's precision" in text
    assert "dot-upcast gives narrow-float dots summed in f32" in text


def test_layout_png_help_names_the_converter_it_uses_first():
    text = " ".join(run_cli("layout", "--help").stdout.split())
    png = text[text.index("--png FILE"):]
    assert png.index("resvg-py") < png.index("rsvg-convert")
    assert "pip install 'xlapy[pictures]'" in png


def test_version_names_libraries_blas_and_cpu():
    proc = run_cli("--version")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    import llvmlite
    import llvmlite.binding as llvm
    import scipy

    assert out.startswith(f"xlapy {xlapy.__version__} ")
    assert f"Python {sys.version.split()[0]}" in out
    for name, module in (("numpy", np), ("ml_dtypes", ml_dtypes), ("scipy", scipy)):
        assert f"{name} {module.__version__}" in out
    llvm_version = ".".join(map(str, llvm.llvm_version_info))
    assert f"llvmlite {llvmlite.__version__}, LLVM {llvm_version}" in out
    blas = re.search(r"^BLAS of the CPU backend \(SciPy's\): (.*)$", out, re.MULTILINE)
    assert blas, out
    if "OpenBLAS" in blas.group(1):  # SciPy's wheels bundle OpenBLAS: config and kernel
        assert re.search(r"OpenBLAS \d+\.\d+", blas.group(1)) and ", kernel " in blas.group(1)
    cpu = re.search(r"^host CPU: (\S+) .*vector features: (.*)$", out, re.MULTILINE)
    assert cpu and cpu.group(1) == llvm.get_host_cpu_name()
    features = llvm.get_host_cpu_features()
    for feature in ("avx2", "avx512f"):  # whichever this host has, and only those
        assert (feature in cpu.group(2).split()) == bool(features.get(feature))
    assert ("no AVX-512" in cpu.group(2)) == (not features.get("avx512f"))


# -- results: summaries, --output, npz ----------------------------------------------------


def test_large_results_are_summarised(tmp_path):
    module = tmp_path / "big.hlo"
    module.write_text(BIG)
    proc = run_cli("run", module)
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stdout) < 2_000, len(proc.stdout)  # not 4M elements
    lines = proc.stdout.splitlines()
    assert lines[0] == "f32[2048,2048] {"
    assert re.fullmatch(r"  \{ \S+, \S+, \S+, \.\.\., \S+, \S+, \S+ \},", lines[1])
    assert lines[4] == "  ...,"
    assert len(lines) == 9 and lines[-1] == "}"
    assert "--print-all prints every element" in proc.stderr
    full = run_cli("run", module, "--print-all")
    assert full.returncode == 0 and full.stdout.count("\n") == 2048 + 2
    assert "..." not in full.stdout and full.stderr == ""


def test_small_results_print_whole_and_summary_marks(capsys):
    from xlapy.shape.literal import Literal

    lit = Literal.from_array(np.arange(1001, dtype=np.int32))
    assert lit.to_string(summarize_over=1000) == "s32[1001] {0, 1, 2, ..., 998, 999, 1000}"
    assert lit.to_string(summarize_over=1001) == lit.to_string()  # at the threshold: whole
    cube = Literal.from_array(np.zeros((3, 500), np.float32))
    text = cube.to_string(summarize_over=1000)
    assert text.count("...") == 3 and text.startswith("f32[3,500] {\n  { 0, 0, 0, ..., 0,")


def test_output_is_written_under_exactly_the_name_given(tmp_path, capsys):
    module = tmp_path / "m.hlo"
    module.write_text(EXAMPLE.read_text())
    target = tmp_path / "outfile"
    assert main(["run", str(module), "--output", str(target), "--quiet"]) == 0
    assert target.is_file() and not (tmp_path / "outfile.npz").exists()
    assert list(load_npz(target)) == ["out0"]


@pytest.mark.parametrize("where,message", [
    ("missing/dir/out.npz", "does not exist"),
    (".", "it is a directory"),
])
def test_unwritable_output_is_refused_before_the_run(tmp_path, capsys, where, message):
    module = tmp_path / "m.hlo"
    module.write_text(EXAMPLE.read_text())
    code = main(["run", str(module), "--output", str(tmp_path / where)])
    out, err = capsys.readouterr()
    assert code == 2 and message in err and "internal error" not in err
    assert out == ""  # refused before running: nothing printed


def test_output_that_fails_while_writing_is_a_clean_error(tmp_path, capsys, monkeypatch):
    """Past the check (here skipped), the write itself fails: exit 2, one line."""
    from xlapy.cli import run_cmd

    monkeypatch.setattr(run_cmd, "check_output_path", lambda path, flag: None)
    save_path = "/proc/self/xlapy-cannot-write-here.npz"
    module = tmp_path / "m.hlo"
    module.write_text(EXAMPLE.read_text())
    code = main(["run", str(module), "--output", save_path, "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and f"cannot write {save_path}" in err and "Traceback" not in err


def test_bf16_saved_with_plain_savez_is_explained(tmp_path, capsys):
    module = tmp_path / "m.hlo"
    module.write_text("HloModule m\nENTRY e {\n  p = bf16[2,3] parameter(0)\n"
                      "  ROOT n = bf16[2,3] negate(p)\n}\n")
    plain = tmp_path / "plain.npz"
    np.savez(plain, arg0=np.ones((2, 3), ml_dtypes.bfloat16))
    for extra in ([], ["--cast-inputs"]):
        code = main(["run", str(module), "--inputs", str(plain), *extra])
        err = capsys.readouterr().err
        assert code == 2
        assert "this is what np.savez makes of a bf16" in err
        assert "xlapy.npz.save_npz(path, {'arg0': a})" in err
        assert "No cast function" not in err
    good = tmp_path / "good.npz"
    save_npz(good, {"arg0": np.ones((2, 3), ml_dtypes.bfloat16)})
    assert main(["run", str(module), "--inputs", str(good), "--output", str(tmp_path / "o")]) \
        == 0
    out = load_npz(tmp_path / "o")["out0"]
    assert out.dtype == ml_dtypes.bfloat16 and (out.astype(np.float32) == -1).all()


# -- progress -----------------------------------------------------------------------------


def _loop_module(tmp_path, iterations: int) -> Path:
    path = tmp_path / "loop.hlo"
    path.write_text(LOOP % iterations)
    return path


def test_progress_on_a_terminal(tmp_path):
    """stderr is a pseudo-terminal: the line appears (after XLAPY_PROGRESS_DELAY, here 0)
    with the interpreter's instruction and while-iteration counts, and is erased at the
    end; stdout (a pipe) holds only the result."""
    import pty

    module = _loop_module(tmp_path, 20000)  # ~1 s: several of the line's 0.25 s redraws
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "xlapy", "run", str(module), "--backend",
                             "interpreter"], stdout=subprocess.PIPE, stderr=slave, cwd=ROOT,
                            env=_env(XLAPY_PROGRESS_DELAY="0"))
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 1.0)
        if ready:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
        elif proc.poll() is not None:
            break
    out = proc.stdout.read().decode()
    proc.wait(timeout=60)
    os.close(master)
    assert proc.returncode == 0
    assert out.startswith("f32[4] {")
    text = seen.decode(errors="replace")
    assert "running loop on interpreter: " in text
    assert re.search(r"[\d,]+ instructions", text), text
    assert text.rstrip(" \r").endswith("\r") or text.endswith("\r"), repr(text[-80:])


def test_no_progress_on_a_pipe(tmp_path):
    module = _loop_module(tmp_path, 3000)
    proc = run_cli("run", module, "--backend", "interpreter", XLAPY_PROGRESS_DELAY="0")
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout.startswith("f32[4] {")


def test_ticker_counts_and_clears():
    """RunTicker in process: the counts come from the interpreter, the line is erased."""
    import io

    from xlapy.cli.run_progress import RunTicker
    from xlapy.interpreter import evaluator

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    m = xlapy.parse_hlo_module(LOOP % 50)
    stream = Terminal()
    with RunTicker("loop", "auto", stream=stream) as ticker:
        assert evaluator.COUNTERS is not None
        xlapy.evaluate(m, np.ones(4, np.float32))
        line = ticker.line()
    assert evaluator.COUNTERS is None
    assert "50 while iterations" in line and "instructions" in line
    quiet = io.StringIO()  # not a terminal
    with RunTicker("loop", "auto", stream=quiet):
        assert evaluator.COUNTERS is None
    assert quiet.getvalue() == ""

"""``xlapy run``'s numerics flags: each sets its option on every backend of the run that has
it (--flush-denormals: cpu and interpreter; --xla_allow_excess_precision: cpu), a flag no
backend of the run has is an error (never silently ignored), and without a flag each backend
keeps its own default (cpu: XLA:CPU's numerics; interpreter: the exact HLO semantics)."""

from __future__ import annotations

import numpy as np
import pytest

from xlapy.cli import main
from xlapy.npz import load_npz, save_npz

# Multiplying a denormal by 1 (a parameter: no pass removes it) keeps it; with XLA:CPU's
# FTZ/DAZ it is zero.
MODULE = """HloModule denormal
ENTRY e {
  x = f32[3] parameter(0)
  ones = f32[3] parameter(1)
  ROOT m = f32[3] multiply(x, ones)
}
"""
DENORMAL = np.float32(1e-40)


def _run(tmp_path, *flags) -> tuple[int, np.ndarray | None]:
    (tmp_path / "m.hlo").write_text(MODULE)
    save_npz(tmp_path / "in.npz", {"arg0": np.array([DENORMAL, 1.5, -DENORMAL], np.float32),
                                   "arg1": np.ones(3, np.float32)})
    out = tmp_path / "out.npz"
    if out.exists():
        out.unlink()
    code = main(["run", str(tmp_path / "m.hlo"), "--inputs", str(tmp_path / "in.npz"),
                 "--output", str(out), "--quiet", *flags])
    return code, (load_npz(out)["out0"] if code == 0 else None)


@pytest.mark.parametrize("flags, flushed", [
    (["--backend", "interpreter"], False),  # the interpreter's own default
    (["--backend", "interpreter", "--flush-denormals=true"], True),
    (["--backend", "interpreter", "--flush-denormals=false"], False),
    (["--backend", "cpu"], True),  # XLA:CPU's default
    (["--backend", "cpu", "--flush-denormals=false"], False),
])
def test_flush_denormals_applies_to_the_backend_that_runs(tmp_path, flags, flushed):
    code, out = _run(tmp_path, *flags)
    assert code == 0
    want = [0.0, 1.5, 0.0] if flushed else [DENORMAL, 1.5, -DENORMAL]
    np.testing.assert_array_equal(out, np.array(want, np.float32))


def test_a_flag_no_backend_of_the_run_has_is_an_error(tmp_path, capsys):
    code, _ = _run(tmp_path, "--backend", "interpreter", "--xla_allow_excess_precision=false")
    assert code == 2
    assert capsys.readouterr().err.startswith(
        "xlapy run: error: --xla_allow_excess_precision: the backend of this run (interpreter) "
        "has no such option; only cpu has it")


def test_a_flag_some_backend_of_the_run_has_applies_to_it(tmp_path, capsys):
    """--reference cpu has excess precision: the flag sets it there; both backends flush."""
    code, _ = _run(tmp_path, "--backend", "interpreter", "--reference", "cpu",
                   "--xla_allow_excess_precision=false", "--flush-denormals=true")
    assert code == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "match" in out

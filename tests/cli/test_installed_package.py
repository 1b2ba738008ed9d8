"""``pip install .`` as the README's Quick start does it, not editable: the wheel built from
this tree, installed in a fresh virtual environment (its dependencies taken from this
Python's site-packages, so nothing is downloaded but the build backend), run from a folder
outside the checkout. ``xlapy bench`` finds the suite the wheel carries (benchmarks/ shipped
as ``xlapy._benchmarks``; setup.py) and runs a case; ``xlapy run`` runs the README's example.

Slow-ish (a wheel build and a venv, about a minute): one test."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _clean_env(**extra) -> dict:
    """This environment less PYTHONPATH (it would import the checkout's xlapy)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "XLAPY_BENCHMARKS")}
    env.update(extra)
    return env


def _run(argv, cwd, **env) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, cwd=cwd,
                          env=_clean_env(**env), timeout=900, check=False)


def _copy_tree(dest: Path) -> None:
    """The files git would put in a clone (tracked, and new ones not ignored)."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                            capture_output=True, check=True).stdout.split(b"\0")
    for name in filter(None, listed):
        src = ROOT / os.fsdecode(name)
        if src.is_file():
            target = dest / os.fsdecode(name)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(src.read_bytes())


def test_bench_and_run_from_an_installed_wheel(tmp_path):
    src, wheels, env_dir, elsewhere = (tmp_path / d for d in ("src", "wheels", "venv", "work"))
    elsewhere.mkdir()
    _copy_tree(src)
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", wheels, src],
                 cwd=tmp_path)
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = wheels.glob("xlapy-*.whl")
    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    # --ignore-installed: this Python may hold an xlapy of the same version already (CI's
    # `pip install .`), which the venv sees through its system site-packages; pip would keep it.
    installed = _run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps",
                      "--ignore-installed", "-q", wheel], cwd=tmp_path)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    where = _run([python, "-c", "import xlapy; print(xlapy.__file__)"], cwd=elsewhere)
    assert where.stdout.strip() == str(env_dir / "lib" / f"python{sys.version_info.major}."
                                       f"{sys.version_info.minor}" / "site-packages" / "xlapy"
                                       / "__init__.py"), where.stdout + where.stderr
    xlapy = env_dir / "bin" / "xlapy"
    listed = _run([xlapy, "bench", "--list"], cwd=elsewhere)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.startswith("case ") and "elementwise" in listed.stdout
    bench = _run([xlapy, "bench", "--tiny", "--cases", "elementwise", "--no-jax", "--repeats",
                  "1"], cwd=elsewhere, XLAPY_CACHE_DIR=str(tmp_path / "cache"))
    assert bench.returncode == 0, bench.stdout + bench.stderr
    assert "needs a source checkout" not in bench.stderr
    row = next(line for line in bench.stdout.splitlines() if line.startswith("elementwise "))
    assert "left out" in row and re.search(r" \d+\.\d+x ", row), row  # xlapy/NumPy ratio
    example = (ROOT / "examples" / "mlp.hlo").read_text()
    (elsewhere / "mlp.hlo").write_text(example)
    ran = _run([xlapy, "run", "mlp.hlo"], cwd=elsewhere, XLAPY_CACHE_DIR=str(tmp_path / "cache"))
    assert ran.returncode == 0 and ran.stdout.startswith("f32[2,3] {"), ran.stderr

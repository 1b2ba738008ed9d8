"""``xlapy bench``: the table (columns, one row per case, the geometric-mean line, the
bandwidth section), --json, the XLA column with and without jax, a wrong backend flagged as
MISMATCH with exit code 1, the --timeout guard, bad --cases, and the committed jax dumps
being what benchmarks/make_hlo.py lowers to. Every run uses --tiny sizes (seconds)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from xlapy.backends.base import BACKENDS, register_backend
from xlapy.backends.interpreter import InterpreterBackend, InterpreterProgram
from xlapy.cli import main

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"
HEADERS = ["case", "size", "xlapy", "XLA", "NumPy", "xlapy/XLA", "xlapy/NumPy", "target",
           "result"]
CHEAP = "elementwise,reduce_sum"
HAVE_JAX = importlib.util.find_spec("jax") is not None


def _bench(capsys, *argv):
    code = main(["bench", "--tiny", "--repeats", "2", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def _table(out: str) -> tuple[list[str], dict[str, list[str]]]:
    """The header cells and {case: cells} of the main table (cells split on 2+ spaces)."""
    import re

    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("case "))
    header = re.split(r"\s{2,}", lines[start].strip())
    rows = {}
    for line in lines[start + 2:]:
        if line.startswith("geometric mean"):
            break
        if line.strip():
            cells = re.split(r"\s{2,}", line.strip())
            rows[cells[0]] = cells
    return header, rows


def test_table_columns_rows_and_geomean(capsys, tmp_path):
    out_json = tmp_path / "bench.json"
    code, out, err = _bench(capsys, "--cases", CHEAP, "--json", str(out_json))
    assert code == 0, out + err
    header, rows = _table(out)
    assert header == HEADERS
    assert list(rows) == ["elementwise", "reduce_sum"]
    for cells in rows.values():
        assert len(cells) == len(HEADERS), cells
        assert cells[2].endswith(("us", "ms", " s")), cells  # xlapy median
        assert cells[4].endswith(("us", "ms", " s")), cells  # NumPy median
        assert cells[6].endswith("x")  # xlapy/NumPy
        assert cells[7] == "<= 1x"
    assert "copy bandwidth (np.copyto" in out
    mem = out[out.index("memory-bound cases"):].splitlines()
    assert mem[1].split() == ["case", "bytes", "copy", "GB/s", "xlapy", "GB/s", "of", "copy",
                              "XLA", "GB/s", "of", "copy", "target", "result"]
    assert [line.split()[0] for line in mem[3:5]] == ["elementwise", "reduce_sum"]
    assert all(line.split()[-3:-1] == [">=", "80%"] for line in mem[3:5])
    data = json.loads(out_json.read_text())
    assert data["tier"] == "tiny" and data["backend"] == "cpu"
    assert [c["case"] for c in data["cases"]] == ["elementwise", "reduce_sum"]
    for c in data["cases"]:
        assert c["mismatch"] is False and c["xlapy"]["median_s"] > 0 and c["bytes"] > 0
        assert c["check"].startswith("max |error|")
        assert c["copy_bandwidth_bytes_per_s"] > 0
        assert c["xlapy_bandwidth_fraction_of_copy"] > 0
    if not HAVE_JAX:
        assert all(cells[3] == "jax not installed" for cells in rows.values())
        assert "geometric mean of xlapy/XLA: n/a (jax not installed)" in out
        return
    ratios = []
    for cells in rows.values():
        assert cells[3].endswith(("us", "ms", " s")), cells  # XLA median
        assert cells[8] in ("met", "missed"), cells
        ratios.append(float(cells[5].rstrip("x")))
    geo = [line for line in out.splitlines() if line.startswith("geometric mean")]
    assert len(geo) == 1 and "over 2 cases" in geo[0] and "target < 0.8x" in geo[0]
    # the line's value is the geometric mean of the ratios (the JSON's, unrounded; the
    # printed ones are rounded to 2 digits: 0.00x for a tiny case XLA runs 400x slower)
    value = float(geo[0].split(": ")[1].split("x")[0])
    exact = [c["xlapy_over_xla"] for c in data["cases"]]
    assert [float(f"{r:.2f}") for r in exact] == ratios
    assert value == pytest.approx(float(np.sqrt(exact[0] * exact[1])), abs=0.006)
    assert data["geomean_xlapy_over_xla"] == pytest.approx(float(np.sqrt(exact[0] * exact[1])))
    assert data["geomean_xlapy_over_xla"] == pytest.approx(value, abs=0.006)
    assert "jax 0." in out.splitlines()[0]
    assert "warning" not in out  # the committed dumps are what jax lowers


def test_without_xla_column(capsys):
    code, out, _ = _bench(capsys, "--cases", "matmul", "--no-jax")
    assert code == 0
    _, rows = _table(out)
    assert rows["matmul"][3] == "left out"
    assert rows["matmul"][8] == "n/a (no XLA)"
    assert "geometric mean of xlapy/XLA: n/a (left out)" in out


class _WrongProgram(InterpreterProgram):
    def run(self, args, options):
        return super().run(args, options) + np.float32(1)


class _WrongBackend(InterpreterBackend):
    name = "test-wrong"

    def compile(self, module):
        super().compile(module)
        return _WrongProgram(module)


@pytest.fixture
def wrong_backend():
    register_backend("test-wrong", _WrongBackend)
    yield "test-wrong"
    BACKENDS.pop("test-wrong", None)


def test_wrong_results_are_flagged(capsys, wrong_backend):
    code, out, err = _bench(capsys, "--cases", "matmul", "--no-jax", "--backend", wrong_backend)
    assert code == 1
    _, rows = _table(out)
    assert rows["matmul"][8] == "MISMATCH"
    assert rows["matmul"][6] == "-"  # no ratio from a wrong result
    assert "MISMATCH in matmul" in err and "WRONG OR NO xlapy results: matmul" in out


def test_timeout_skips_the_case(capsys):
    # The interpreter takes milliseconds to compile and run 100 loop iterations.
    code, out, _ = _bench(capsys, "--cases", "while_scalar", "--no-jax", "--backend",
                          "interpreter", "--timeout", "0.0005")
    assert code == 0
    _, rows = _table(out)
    assert rows["while_scalar"][2] == "skipped: >0.0005 s"
    assert rows["while_scalar"][8] == "skipped: >0.0005 s"


def test_compile_rows(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("XLAPY_CACHE_DIR", str(tmp_path))
    code, out, _ = _bench(capsys, "--cases", "compile_mlp", "--no-jax")
    assert code == 0
    _, rows = _table(out)
    assert list(rows) == ["compile_mlp cold", "compile_mlp disk cache", "compile_mlp cached"]
    assert rows["compile_mlp cold"][1] == "mlp_train.tiny.hlo"
    assert rows["compile_mlp cold"][3] == "left out"
    assert rows["compile_mlp cold"][7] == "<= 3x"
    for name in ("compile_mlp disk cache", "compile_mlp cached"):
        assert rows[name][2].endswith(("us", "ms", " s")), rows[name]
        assert rows[name][7] == "< 10 ms"
        assert rows[name][8] in ("met", "missed")
    assert "clear_caches(disk=False) before each and XLAPY_DISK_CACHE=0" in out


def test_compile_only_case_rows(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("XLAPY_CACHE_DIR", str(tmp_path))
    code, out, _ = _bench(capsys, "--cases", "compile_transformer_train", "--no-jax")
    assert code == 0
    _, rows = _table(out)
    assert list(rows) == ["compile_transformer_train cold"]
    row = rows["compile_transformer_train cold"]
    assert row[1] == "transformer_train.tiny.hlo"
    assert row[2].endswith(("us", "ms", " s")), row
    assert row[3] == "left out"
    assert row[7] == "<= 1.5x"


def test_bad_arguments(capsys):
    code, _, err = _bench(capsys, "--cases", "elementwise,nope")
    assert code == 2 and "unknown case 'nope'" in err and "softmax" in err
    code, _, err = _bench(capsys, "--repeats", "0")
    assert code == 2 and "--repeats must be at least 1" in err
    code, _, err = _bench(capsys, "--backend", "nope", "--cases", "matmul")
    assert code == 2 and "unknown backend 'nope'" in err


def test_list(capsys):
    assert main(["bench", "--list"]) == 0
    out = capsys.readouterr().out
    for name in ("elementwise", "softmax", "layernorm", "matmul", "matmul_big", "mlp_train",
                 "conv2d", "reduce_sum", "while_scalar", "while_vector", "sort", "compile_mlp",
                 "compile_transformer_train", "compile_random_gamma", "compile_igammac"):
        assert f"\n{name} " in out
    assert "16M f32" in out and "[4096,4096]" in out and "32x64x64x64 * 3x3x64x64" in out


def test_subprocess_table():
    done = subprocess.run([sys.executable, "-m", "xlapy", "bench", "--tiny", "--repeats", "1",
                           "--no-jax", "--cases", "softmax,sort"],
                          capture_output=True, text=True, check=False, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    header, rows = _table(done.stdout)
    assert header == HEADERS and list(rows) == ["softmax", "sort"]
    assert rows["sort"][7] == "<= 0.1x"
    assert "geometric mean of xlapy/XLA: n/a (left out)" in done.stdout
    assert "bench: sort (1K f32) ..." in done.stderr  # progress on stderr


def test_quick_and_tiny_exclude_each_other(capsys):
    assert main(["bench", "--quick", "--tiny"]) == 2
    assert "not allowed with argument" in capsys.readouterr().err


@pytest.mark.skipif(not HAVE_JAX, reason="jax (the oracle) is not installed")
def test_committed_dumps_are_what_jax_lowers():
    sys.path.insert(0, str(BENCH))
    try:
        import make_hlo
        import suite
    finally:
        sys.path.remove(str(BENCH))
    for name, case in [*suite.CASES.items(), *suite.COMPILE_MODULES.items()]:
        assert case.hlo_path("tiny").read_text() == make_hlo.lower_text(name, "tiny"), name
        for tier in suite.TIERS:
            assert case.hlo_path(tier).is_file()

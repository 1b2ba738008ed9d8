"""``xlapy bench``'s BLAS report (xlapy/cli/bench_blas.py): the library and kernel named, the
environment's OPENBLAS_CORETYPE reported and never changed in-process, a pin below the host's
best kernel detected by a subprocess with the variable unset."""

from __future__ import annotations

import os

from xlapy.backends.cpu import blas
from xlapy.cli import bench_blas

START_PIN = os.environ.get("OPENBLAS_CORETYPE")


def test_names_library_and_kernel():
    info = bench_blas.blas_state()
    lines = bench_blas.describe(info)
    assert info["core"] and info["core"] in lines[0]
    assert "OpenBLAS" in (info["config"] or "")
    assert any("threads" in line for line in lines)


def test_pin_below_the_host_is_detected(monkeypatch):
    best = blas.library_info()["core"]
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Prescott")  # this process keeps its kernel
    info = bench_blas.blas_state()
    assert info["coretype"] == "Prescott"
    assert os.environ["OPENBLAS_CORETYPE"] == "Prescott"
    assert info["unpinned_core"]  # what OpenBLAS picks by itself on this host
    if not START_PIN:  # this process was not pinned either: the same kernel
        assert info["unpinned_core"] == best
    assert info["pinned_below"] == (info["unpinned_core"] != info["core"])
    text = "\n".join(bench_blas.describe(info))
    assert "OPENBLAS_CORETYPE=Prescott" in text
    assert f"OpenBLAS picks {info['unpinned_core']}" in text


def test_unpinned_run_is_skipped_without_gemm_cases():
    rows, error = bench_blas.run_unpinned(None, ["elementwise"], ("matmul",))
    assert rows == [] and error is None

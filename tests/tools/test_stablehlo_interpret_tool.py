"""tools/stablehlo_interpret_tests.py: it writes only stablehlo/tests/interpret/ of the
fetched tarball (no path outside the destination), keeps a folder already fetched, and
counts the outcomes of every configuration (offline: the tarball is made here)."""

from __future__ import annotations

import importlib.util
import io
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CASE = """// RUN: stablehlo-translate --interpret %s

func.func @main() {
  %0 = stablehlo.constant dense<[-1.5, 0.5, 2.0]> : tensor<3xf32>
  %1 = stablehlo.ceil %0 : tensor<3xf32>
  check.expect_almost_eq_const %1, dense<[-1.0, 1.0, 2.0]> : tensor<3xf32>
  func.return
}

// -----

func.func @main() {
  %0 = stablehlo.constant dense<[1, 2]> : tensor<2xi32>
  %1 = stablehlo.add %0, %0 : tensor<2xi32>
  check.expect_eq_const %1, dense<[2, 5]> : tensor<2xi32>
  func.return
}
"""


def _tool():
    spec = importlib.util.spec_from_file_location(
        "stablehlo_interpret_tests", ROOT / "tools" / "stablehlo_interpret_tests.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tarball(files: dict[str, str]) -> bytes:
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w:gz") as tar:
        for name, text in files.items():
            info = tarfile.TarInfo(name)
            payload = text.encode()
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))
    return data.getvalue()


def test_fetch_writes_the_interpret_folder_only(tmp_path, monkeypatch):
    tool = _tool()
    top = f"stablehlo-{tool.COMMIT}/"
    blob = _tarball({
        top + "README.md": "x",
        top + "stablehlo/tests/interpret/add.mlir": CASE,
        top + "stablehlo/tests/interpret/chlo/erf.mlir": CASE,
        top + "stablehlo/tests/interpret/../../../escape.mlir": "no",
        top + "stablehlo/tests/other/sub.mlir": "no",
    })
    urls = []

    def urlopen(url, timeout=None):
        urls.append(url)
        return io.BytesIO(blob)

    monkeypatch.setattr(tool.urllib.request, "urlopen", urlopen)
    dest = tmp_path / "interpret"
    assert tool.fetch(tool.COMMIT, dest) == dest
    assert urls == [f"https://codeload.github.com/openxla/stablehlo/tar.gz/{tool.COMMIT}"]
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert written == ["interpret/add.mlir", "interpret/chlo/erf.mlir"]
    tool.fetch(tool.COMMIT, dest)  # already there: not fetched again
    assert len(urls) == 1


def test_run_counts_every_configuration(tmp_path):
    (tmp_path / "cases.mlir").write_text(CASE)
    results = _tool().run(tmp_path)
    assert list(results) == ["interpreter", "cpu, exact numerics", "cpu, XLA:CPU's numerics"]
    for r in results.values():
        assert (r["pass"], r["fail"], r["unsupported"]) == (1, 1, 0)
        assert r["failing"] == ["cases.mlir:11"]

"""The StableHLO text of every golden jax fixture (tests/stablehlo/fixtures, made by
tools/dump_stablehlo_fixtures.py from the same jax functions) imported with
``xlapy.parse_stablehlo`` must give exactly what the HLO text XLA translated from it
(tests/fixtures/jax/<name>.pre.hlo) gives, on the interpreter and on the CPU backend, for
the fixture's recorded inputs; and the module's interface must be XLA's (entry computation
layout, input/output aliasing, replica and partition counts)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import xlapy.backends  # noqa: F401 - registers the "cpu" backend
from xlapy import parse_hlo_module, parse_stablehlo, verify_module
from xlapy.interpreter import evaluate
from xlapy.interpreter.values import flatten
from xlapy.npz import load_npz
from xlapy.runtime import Client

TESTS = Path(__file__).resolve().parents[1]
FIXTURES = TESTS / "fixtures" / "jax"
MLIR = Path(__file__).resolve().parent / "fixtures"
NAMES = sorted(p.stem for p in MLIR.glob("*.mlir"))

def _inputs(name: str) -> list:
    data = load_npz(FIXTURES / f"{name}.npz")
    return [data[f"arg{i}"] for i in range(sum(1 for k in data if k.startswith("arg")))]


def _leaves(result) -> list:
    return [np.asarray(x) for x in (flatten(result) if isinstance(result, tuple) else [result])]


def _same(got, want, where: str) -> None:
    g, w = _leaves(got), _leaves(want)
    assert len(g) == len(w), f"{where}: {len(g)} results, the HLO text gives {len(w)}"
    for i, (a, b) in enumerate(zip(g, w)):
        assert (a.dtype, a.shape) == (b.dtype, b.shape), f"{where}: result {i}"
        assert a.tobytes() == b.tobytes(), f"{where}: result {i} differs:\n{a}\n{b}"


def _modules(name: str):
    module = parse_stablehlo((MLIR / f"{name}.mlir").read_text())
    verify_module(module)
    reference = parse_hlo_module((FIXTURES / f"{name}.pre.hlo").read_text())
    return module, reference


@pytest.mark.parametrize("name", NAMES)
def test_interface_is_xlas(name):
    module, reference = _modules(name)
    sig = module.entry.program_shape()
    want = reference.entry.program_shape()
    assert [str(p) for p in sig.parameters] == [str(p) for p in want.parameters]
    assert sig.result.to_string(print_layout=False) == want.result.to_string(print_layout=False)
    for key in ("input_output_alias", "buffer_donor"):
        assert module.config.get(key) == reference.config.get(key), key
    assert (module.replica_count, module.num_partitions) == \
        (reference.replica_count, reference.num_partitions)
    assert module.name == reference.name


@pytest.mark.parametrize("name", NAMES)
def test_interpreter_gives_the_hlo_texts_results(name):
    module, reference = _modules(name)
    args = _inputs(name)
    got = evaluate(module, *args)
    want = evaluate(reference, *args)
    _same(got, want, f"{name} (interpreter)")


@pytest.mark.parametrize("name", NAMES)
def test_cpu_gives_the_hlo_texts_results(name):
    module, reference = _modules(name)
    args = _inputs(name)
    client = Client(backend="cpu")
    got = client.compile(module)(*[np.array(a, copy=True) for a in args])
    want = client.compile(reference)(*[np.array(a, copy=True) for a in args])
    _same(got, want, f"{name} (cpu)")


def test_every_fixture_has_its_stablehlo_text():
    hlo = sorted(p.name[: -len(".npz")] for p in FIXTURES.glob("*.npz"))
    assert NAMES == hlo, "run tools/dump_stablehlo_fixtures.py"
    assert os.path.exists(MLIR / "mlp_grad.mlir")

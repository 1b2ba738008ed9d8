"""The compiled CPU backend against real XLA and the interpreter: every golden jax fixture
(tests/fixtures/jax), its pre- AND post-optimisation module, on ``Client(backend="cpu")``.

Each result must match XLA:CPU's recorded outputs within the tolerances of
tests/interpreter/golden.py (the interpreter's golden test, with its stated exceptions:
NOT_VALUE_EXACT checks shapes and dtypes only, FLUSHES_DENORMAL_INPUTS runs on flushed
inputs), and every integer/pred output must equal the interpreter's bit for bit."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

import xlapy.backends  # noqa: F401 - registers the "cpu" backend
from xlapy.errors import XlaError
from xlapy.interpreter import evaluate
from xlapy.interpreter.values import flatten
from xlapy.npz import load_npz
from xlapy.parser import parse_hlo_module
from xlapy.runtime import Client

_TESTS = Path(__file__).resolve().parents[2]
for _d in ("interpreter", "ops"):  # golden.py, test_golden.py; backend_check.py
    if str(_TESTS / _d) not in sys.path:
        sys.path.insert(0, str(_TESTS / _d))

from backend_check import OutputGuard, compare_arrays, exact_type, module_text
from golden import assert_results
from test_golden import FLUSHES_DENORMAL_INPUTS, NOT_VALUE_EXACT, _flush_denormals

FIXTURES = _TESTS / "fixtures" / "jax"
NAMES = sorted(p.name[: -len(".npz")] for p in FIXTURES.glob("*.npz"))

#: (name, stage) -> the cpu backend bug that makes it fail today (xfail, strict).
KNOWN_BACKEND_BUGS: dict[tuple[str, str], str] = {}


def _inputs(name: str):
    data = load_npz(FIXTURES / f"{name}.npz")
    args = [data[f"arg{i}"] for i in range(sum(1 for k in data if k.startswith("arg")))]
    if name in FLUSHES_DENORMAL_INPUTS:
        args = [_flush_denormals(a) for a in args]
    outs = [data[f"out{i}"] for i in range(sum(1 for k in data if k.startswith("out")))]
    return args, outs


def _leaves(result) -> list:
    return flatten(result) if isinstance(result, tuple) else [result]


def _cases():
    for name in NAMES:
        for stage in ("pre", "post"):
            marks = []
            if (name, stage) in KNOWN_BACKEND_BUGS:
                marks.append(pytest.mark.xfail(strict=True, reason="cpu backend: "
                                               + KNOWN_BACKEND_BUGS[(name, stage)]))
            yield pytest.param(name, stage, id=f"{name}-{stage}", marks=marks)


@pytest.mark.parametrize("name,stage", list(_cases()))
def test_cpu_golden(name, stage):
    text = (FIXTURES / f"{name}.{stage}.hlo").read_text()
    module = parse_hlo_module(text)
    args, outs = _inputs(name)
    client = Client(backend="cpu")
    if "constant({...})" in text:
        # Elided constants: the values are unknown; the backend must say so, as the
        # interpreter does, instead of computing with made-up values.
        with pytest.raises(XlaError, match=r"elided"):
            client.compile(module)(*args)
        return
    with OutputGuard() as guard:
        got = client.compile(module)(*args)
    assert not guard.overruns(), f"{name}.{stage}: {guard.overruns()}"
    leaves = _leaves(got)
    assert [(np.shape(g), np.asarray(g).dtype) for g in leaves] == \
        [(o.shape, o.dtype) for o in outs], f"{name}.{stage}: result shapes/types"
    if (name, stage) in NOT_VALUE_EXACT:
        return
    assert_results(got, outs, f"{name}.{stage} on cpu vs XLA")
    want = _leaves(evaluate(module, *args))
    for i, (g, w) in enumerate(zip(leaves, want)):
        if exact_type(np.asarray(w).dtype):
            msg = compare_arrays(g, w, f"{name}.{stage} out{i} (cpu vs interpreter)")
            assert msg is None, msg + "\nmodule:\n" + module_text(module, 30)


def test_cases_cover_every_fixture():
    assert len(NAMES) == 109, "tests/fixtures/jax changed: update this count"
    assert all(os.path.exists(FIXTURES / f"{n}.{s}.hlo") for n in NAMES for s in ("pre", "post"))

"""Edges against real XLA:CPU on hand-written HLO (tests/fixtures/xla_hlo, made by
tools/dump_xla_hlo_fixtures.py): integer power over every width and edge exponent (XLA:CPU
uses the exponent's low 6 bits: 2**120 on s64 is 2**56), dynamic-slice, dynamic-update-slice
and gather with signed and unsigned start indices of every width (a u64 start of 2**64 - 1
clamps to the largest start), complex maximum/minimum over NaN, infinities and signed zeros
(the real parts decide). The interpreter and the cpu backend must give XLA's bits,
except where XLA:CPU departs from the spec (listed in SPEC_OVER_XLA, checked to differ)."""

import json
from pathlib import Path

import numpy as np
import pytest

from xlapy.interpreter import evaluate
from xlapy.npz import load_npz
from xlapy.parser import parse_hlo_module
from xlapy.runtime import Client

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "xla_hlo"
NAMES = [f["name"] for f in json.loads((FIXTURES / "MANIFEST.json").read_text())["fixtures"]]


def _spec_start(start: int, dim: int, size: int) -> int:
    """The spec's clamp(start, 0, dim - size) (dynamic-update-slice, operation semantics)."""
    return min(max(start, 0), dim - size)


def _narrow_clamp(t: str, dim: int, size: int) -> int:
    """XLA:CPU's in-place dynamic-update-slice clamps in the start index's own type: the
    largest start truncated to its width (299 -> 43 for 8 bits)."""
    bits = int(t[1:])
    largest = (dim - size) & ((1 << bits) - 1)
    if t[0] == "s" and largest >> (bits - 1):
        largest -= 1 << bits
    return largest


def _spec_over_xla(name: str, arrays: dict) -> dict[int, np.ndarray]:
    """Outputs where xlapy follows the spec and XLA:CPU does not, with the spec's value:
    dynamic-update-slice starts past the largest start truncated to the index width."""
    if not name.startswith("dynamic_update_slice_"):
        return {}
    t, dim = name.split("_")[-2], int(name.split("_")[-1])
    size = arrays["arg1"].size
    bits = int(t[1:])
    if (dim - size) < (1 << (bits - (t[0] == "s"))):
        return {}  # the largest start fits the index type: XLA:CPU follows the spec
    out = {}
    for j in range(len(arrays) - 2):
        if f"out{j}" not in arrays:
            break
        start = int(arrays[f"arg{j + 2}"])
        spec, narrow = _spec_start(start, dim, size), _narrow_clamp(t, dim, size)
        xla = int(np.flatnonzero(arrays[f"out{j}"])[0])
        if spec != xla:
            assert xla == min(max(start, 0), narrow), (name, start, xla)  # XLA's truncation
            want = np.zeros(dim, np.int8)
            want[spec:spec + size] = 1
            out[j] = want
    return out


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
@pytest.mark.parametrize("name", NAMES)
def test_matches_xla_cpu(name, backend):
    module = parse_hlo_module((FIXTURES / f"{name}.hlo").read_text())
    arrays = load_npz(FIXTURES / f"{name}.npz")
    args = [arrays[f"arg{i}"] for i in range(len(module.entry.parameters))]
    if backend == "interpreter":
        got = evaluate(module, *args)
    else:
        got = Client(backend="cpu").compile(module)(*args)
    got = list(got) if isinstance(got, tuple) else [got]
    spec = _spec_over_xla(name, arrays)
    for i, g in enumerate(got):
        want = spec.get(i, arrays[f"out{i}"])
        g = np.asarray(g)
        assert g.dtype == want.dtype and g.shape == want.shape, (name, i)
        if not np.array_equal(g.view(np.uint8), np.asarray(want).view(np.uint8)):
            differ = (g.reshape(-1).view(np.uint8).reshape(g.size, -1)
                      != np.asarray(want).reshape(-1).view(np.uint8).reshape(want.size, -1))
            bad = np.flatnonzero(differ.any(axis=1))[:5]
            detail = [(tuple(np.asarray(a).ravel()[k].item() for a in args if np.size(a) > 1),
                       g.ravel()[k].item(), want.ravel()[k].item()) for k in bad]
            pytest.fail(f"{name} output {i}: (inputs, got, want) {detail}")


def test_power_edges_named_in_the_issue():
    arrays = load_npz(FIXTURES / "power_s64.npz")
    base, exponent, out = arrays["arg0"], arrays["arg1"], arrays["out0"]
    k = np.flatnonzero((base == 2) & (exponent == 120))[0]
    assert int(out[k]) == 2**56  # XLA:CPU: the exponent's low 6 bits (120 & 63 = 56)
    arrays = load_npz(FIXTURES / "dynamic_slice_u64_5.npz")
    j = [int(arrays[f"arg{i}"]) for i in range(1, 60) if f"arg{i}" in arrays].index(2**64 - 1)
    assert arrays[f"out{j}"].tolist() == [3, 4]  # clamped to the largest start, not to 0


def test_spec_departures_are_the_narrow_dynamic_update_slices():
    departures = {n for n in NAMES if _spec_over_xla(n, load_npz(FIXTURES / f"{n}.npz"))}
    assert departures == {"dynamic_update_slice_s8_300", "dynamic_update_slice_u8_300",
                          "dynamic_update_slice_s8_70000", "dynamic_update_slice_u8_70000",
                          "dynamic_update_slice_s16_70000", "dynamic_update_slice_u16_70000"}

"""Shared helpers of the backend tests of gather, scatter, select-and-scatter and
dynamic-update-slice (xlapy.backends.cpu.gather_scatter): run HLO text on the cpu backend
and on the interpreter, check which step ran the op, compare bit for bit."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from xlapy.backends.cpu import backend as be
from xlapy.backends.cpu import control_flow as cf
from xlapy.parser import parse_hlo_module
from xlapy.interpreter import evaluate
from xlapy.runtime import Client

# The interpreter's op tests (tests/ops) hold the HLO generators and references reused here.
OPS_TESTS = Path(__file__).resolve().parents[2] / "ops"
if str(OPS_TESTS) not in sys.path:
    sys.path.insert(0, str(OPS_TESTS))

#: The element types every compiled path covers (issue 14).
TYPES = ["f32", "f64", "bf16", "s32", "u32", "pred"]


def walk(plan, seen=None):
    """Every step of ``plan`` and of the plans it runs (compiled whiles, calls, branches)."""
    seen = set() if seen is None else seen
    for step in plan.steps:
        yield step
        subs = [getattr(step, "cond", None), getattr(step, "body", None)]
        for p in subs + list(getattr(step, "branches", [])):
            if p is not None and id(p) not in seen:
                seen.add(id(p))
                yield from walk(p, seen)


def steps_of(text: str, opcode: str) -> list:
    """The steps running instructions of ``opcode`` in the compiled module."""
    program = be.compile_module(parse_hlo_module(text))
    return [s for s in walk(program.entry) if s.instr.opcode == opcode]


def compiled_whiles(text: str) -> list:
    program = be.compile_module(parse_hlo_module(text))
    return [s for s in walk(program.entry) if isinstance(s, cf.CompiledWhileStep)]


def same_bits(got, want) -> None:
    """Equal dtype, shape and bits (NaNs: equal positions, any payload)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape,
                                                                  want.dtype, want.shape)
    if got.dtype.kind == "b":
        assert np.array_equal(got, want)
        return
    if got.dtype.kind == "c":  # compare the float parts
        same_bits(np.ascontiguousarray(got.real), np.ascontiguousarray(want.real))
        same_bits(np.ascontiguousarray(got.imag), np.ascontiguousarray(want.imag))
        return
    bits = f"u{got.itemsize}"
    g, w = got.view(bits), want.view(bits)
    try:
        nan = np.isnan(want.astype(np.float64)) if got.dtype.kind not in "iu" else \
            np.zeros(want.shape, bool)
    except (TypeError, ValueError):
        nan = np.zeros(want.shape, bool)
    if nan.any():
        assert np.array_equal(np.isnan(got.astype(np.float64)), nan)
    diff = (g != w) & ~nan
    assert not diff.any(), f"{int(diff.sum())} of {diff.size} elements differ: " \
        f"got {got[diff][:5]}, want {want[diff][:5]}"


def leaves(value) -> list:
    return list(value) if isinstance(value, tuple) else [value]


def check(text: str, *args, opcode: str, compiled: bool = True):
    """Run ``text`` on the cpu backend and on the interpreter; the instructions of
    ``opcode`` ran as compiled kernels (or, ``compiled=False``, not); the results are the
    same bits. Returns the backend's result."""
    kinds = {type(s).__name__ for s in steps_of(text, opcode)}
    if compiled:
        assert kinds == {"KernelStep"}, kinds
    else:
        assert "KernelStep" not in kinds, kinds
    module = parse_hlo_module(text)
    got = Client(backend="cpu").compile(module)(*args)
    want = evaluate(module, *args)
    for g, w in zip(leaves(got), leaves(want), strict=True):
        same_bits(g, w)
    return got


def run_cpu(text: str, *args):
    return Client(backend="cpu").compile(parse_hlo_module(text))(*args)

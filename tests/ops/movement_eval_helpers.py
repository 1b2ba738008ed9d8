"""Shared helpers of the shape-op, gather/scatter and sort kernel tests (the *_eval.py files
of those families): running HLO text, sample values of every element type, exact
comparison."""

from __future__ import annotations

import numpy as np

from xlapy.interpreter import evaluate
from xlapy.parser import parse_hlo_module
from xlapy.shape import dtypes

# Every array element type, by its HLO name.
ALL_TYPES = ["pred", "s1", "s2", "s4", "s8", "s16", "s32", "s64", "u1", "u2", "u4", "u8", "u16",
             "u32", "u64", "f16", "bf16", "f32", "f64", "f8e5m2", "f8e4m3", "f8e4m3fn",
             "f8e4m3b11fnuz", "f8e3m4", "f8e5m2fnuz", "f8e4m3fnuz", "f4e2m1fn", "f8e8m0fnu",
             "f6e3m2fn", "f6e2m3fn", "c64", "c128"]


def np_dtype(type_name: str) -> np.dtype:
    return dtypes.to_dtype(dtypes.from_name(type_name))


def sample(type_name: str, shape, offset: int = 0) -> np.ndarray:
    """Values of ``shape`` in the type, exactly representable, varied so that data movement
    is visible (integers count and wrap; floats step through small exact values)."""
    dtype = np_dtype(type_name)
    et = dtypes.from_name(type_name)
    n = int(np.prod(shape, dtype=np.int64))
    k = np.arange(offset, offset + n, dtype=np.int64)
    if dtypes.is_pred(et):
        out = (k % 3) == 1
    elif dtypes.is_integral(et):
        bits = min(dtypes.bit_width(et), 8)
        v = k % (1 << bits)
        if dtypes.is_signed_integral(et):
            v = np.where(v >= 1 << (bits - 1), v - (1 << bits), v)
        out = (v * 1000003 if bits == 8 and dtypes.bit_width(et) > 8 else v).astype(dtype)
    elif type_name == "f8e8m0fnu":
        out = (2.0 ** (k % 9 - 4)).astype(dtype)
    elif dtypes.is_complex(et):
        out = (k - 3 + 1j * (k % 5)).astype(dtype)
    else:
        # 0, 0.5, 1, ..., 3.5 and their negatives: exact in every float type (f4e2m1fn: 3.5
        # rounds, so it gets 0..3 in halves and 4, 6).
        table = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.5, -1, -1.5, -2, -3, -4, -6, -0.0])
        if type_name in ("f8e4m3fnuz", "f8e5m2fnuz", "f8e4m3b11fnuz"):
            table = table[:-1]  # no negative zero in the fnuz types
        out = table[k % len(table)].astype(dtype)
    return out.reshape(shape)


def same(got, want) -> bool:
    got, want = np.asarray(got), np.asarray(want)
    if got.dtype != want.dtype or got.shape != want.shape:
        return False
    if got.dtype.kind == "f" or got.dtype.kind == "V" or got.dtype.kind == "c":
        try:
            both_nan = np.isnan(got) & np.isnan(want)
        except TypeError:
            both_nan = np.zeros(got.shape, bool)
        return bool(np.all((got == want) | both_nan))
    return bool(np.all(got == want))


def assert_same(got, want) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, f"dtype {got.dtype} != {want.dtype}"
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    assert same(got, want), f"values differ:\n{got}\nexpected\n{want}"


def assert_bits(got, want) -> None:
    """Equal bit patterns (so -0.0 differs from 0.0, NaN payloads count)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, f"dtype {got.dtype} != {want.dtype}"
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    assert got.tobytes() == want.tobytes(), f"bits differ:\n{got}\nexpected\n{want}"


def run(text: str, *args):
    """Parse an HLO module and evaluate it on ``args``."""
    return evaluate(parse_hlo_module(text), *args)


def module(body: str) -> str:
    """A one-computation module text: ``body`` lines of the entry (the last one is ROOT)."""
    lines = [line.strip() for line in body.strip().splitlines() if line.strip()]
    lines[-1] = "ROOT " + lines[-1] if not lines[-1].startswith("ROOT") else lines[-1]
    return "HloModule m\n\nENTRY e {\n  " + "\n  ".join(lines) + "\n}\n"

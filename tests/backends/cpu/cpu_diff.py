"""Helpers of the differential tests of the sort family and scans (test_cpu_sort.py,
test_cpu_topk.py, test_cpu_argmax.py, test_cpu_scan.py): values of every element type with
NaNs, signed zeros and ties, the CPU backend run against the interpreter, and the steps a
compiled program took."""

from __future__ import annotations

import zlib

import ml_dtypes
import numpy as np

from xlapy.backends.cpu import backend as be
from xlapy.parser import parse_hlo_module
from xlapy.interpreter.evaluator import evaluate
from xlapy.interpreter.values import flatten
from xlapy.runtime import Client

TYPES = ("f32", "f64", "bf16", "s32", "u32", "pred")
NP = {"f32": np.float32, "f64": np.float64, "bf16": ml_dtypes.bfloat16, "s32": np.int32,
      "u32": np.uint32, "pred": np.bool_, "s64": np.int64, "u64": np.uint64,
      "f16": np.float16, "s8": np.int8}
FLOATS = ("f32", "f64", "bf16", "f16")


def values(t: str, shape, rng, *, specials=True, spread=7) -> np.ndarray:
    """Values of type ``t``: few distinct ones (ties), and for floats NaNs of both signs,
    -0 and +0, infinities."""
    shape = tuple(shape)
    if t == "pred":
        return rng.random(shape) < 0.5
    if t in FLOATS:
        x = rng.integers(-spread, spread, shape).astype(np.float64) / 2
        flat = x.reshape(-1)
        if specials and flat.size >= 8:
            picks = rng.choice(flat.size, size=min(flat.size, 8), replace=False)
            flat[picks[0]] = np.nan
            flat[picks[1]] = -np.nan
            flat[picks[2]] = -0.0
            flat[picks[3]] = 0.0
            flat[picks[4]] = np.inf
            flat[picks[5]] = -np.inf
            flat[picks[6]] = -0.0
        return x.astype(NP[t])
    if t[0] == "u":
        return rng.integers(0, spread, shape).astype(NP[t])
    return rng.integers(-spread, spread, shape).astype(NP[t])


def bits(a) -> np.ndarray:
    a = np.ascontiguousarray(np.asarray(a))
    return a.reshape(-1).view(np.uint8).reshape(a.shape + (a.dtype.itemsize,))


def leaves(value) -> list:
    return list(flatten(value)) if isinstance(value, tuple) else [value]


def seed(*key) -> int:
    """A seed from ``key`` that is the same in every process (str hashes are not)."""
    return zlib.crc32(repr(key).encode())


def _nan_mask(a) -> np.ndarray | None:
    if a.dtype.kind == "c":
        return np.isnan(a.real) | np.isnan(a.imag)
    if a.dtype.kind == "f" or a.dtype == ml_dtypes.bfloat16:
        return np.isnan(a.astype(np.float64))
    return None


def same_bits(got, want, nan_payloads=False) -> None:
    """Bit for bit; NaNs anywhere the other has a NaN, of any sign and payload, unless
    ``nan_payloads``."""
    g, w = leaves(got), leaves(want)
    assert len(g) == len(w)
    for a, b in zip(g, w):
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, a.shape, b.dtype, b.shape)
        nan = None if nan_payloads else _nan_mask(b)
        if nan is not None and nan.any():
            assert np.array_equal(_nan_mask(a), nan), (a, b)
            assert np.array_equal(bits(a)[~nan], bits(b)[~nan]), (a, b)
        else:
            assert np.array_equal(bits(a), bits(b)), (a, b)


def close(got, want, rtol) -> None:
    """Floats within ``rtol`` of the largest magnitude of their row (NaNs at the same
    places); other types exact."""
    g, w = leaves(got), leaves(want)
    assert len(g) == len(w)
    for a, b in zip(g, w):
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape
        if a.dtype.kind != "f" and a.dtype != ml_dtypes.bfloat16:
            assert np.array_equal(a, b)
            continue
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        assert np.array_equal(np.isnan(a64), np.isnan(b64))
        fin = np.isfinite(b64)
        assert np.array_equal(a64[~fin & ~np.isnan(b64)], b64[~fin & ~np.isnan(b64)])
        scale = np.max(np.abs(np.where(fin, b64, 0)), initial=1.0)
        assert np.all(np.abs(a64[fin] - b64[fin]) <= rtol * scale)


def run_both(text: str, *args):
    """(backend result, interpreter result, the program's steps of the entry computation
    and of the computations it runs)."""
    module = parse_hlo_module(text)
    got = Client(backend="cpu").compile(module)(*args)
    want = evaluate(parse_hlo_module(text), *args)
    return got, want, steps(text)


def steps(text: str) -> list:
    program = be.compile_module(parse_hlo_module(text))
    out, seen, stack = [], set(), [program.entry]
    while stack:
        plan = stack.pop()
        for step in plan.steps:
            out.append(step)
            for sub in [getattr(step, "cond", None), getattr(step, "body", None),
                        *getattr(step, "branches", ())]:
                if sub is not None and hasattr(sub, "steps") and id(sub) not in seen:
                    seen.add(id(sub))
                    stack.append(sub)
    return out


def step_kinds(text: str, opcode: str) -> list[str]:
    """The step classes that run instructions of ``opcode`` (fusions: by their root)."""
    out = []
    for s in steps(text):
        instr = s.instr
        op = instr.opcode
        if op == "fusion":
            op = instr.attrs["calls"].root.opcode
        if op == opcode:
            out.append(type(s).__name__)
    return out


def shape_text(t: str, dims) -> str:
    return f"{t}[{','.join(str(int(d)) for d in dims)}]"

"""Deterministic random arguments for a module, as XLA's run_hlo_module makes them
(MakeFakeArguments): every entry parameter gets values from a seeded generator, and an
integer parameter that is used as a start index (dynamic-slice, dynamic-update-slice) or as
gather/scatter indices gets values that keep those indices in bounds.

Distributions: floats (and both parts of complex numbers) standard normal, rounded to the
type; signed integers uniform in [-50, 50], unsigned in [0, 100]; pred 50/50; an index
parameter uniform in [0, largest valid start]."""

from __future__ import annotations

import numpy as np

from xlapy.hlo.ir import Instruction, Module
from xlapy.interpreter.values import TOKEN
from xlapy.shape import Shape, dtypes

# Ops that forward their operand's values unchanged (or elementwise-converted) to users.
_FORWARDING = {"convert", "bitcast", "reshape", "broadcast", "copy", "transpose", "slice",
               "get-tuple-element", "concatenate"}


def _index_bound(param: Instruction) -> int | None:
    """The largest value the parameter's elements may take to keep every index use in
    bounds, or None if it is not used as an index."""
    bound = None
    stack = [param]
    seen = set()
    while stack:
        value = stack.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        for user in value.users:
            limit = None
            if user.opcode in ("dynamic-slice", "dynamic-update-slice"):
                positions = [i for i, o in enumerate(user.operands) if o is value]
                first = 1 if user.opcode == "dynamic-slice" else 2
                operand = user.operands[0].shape
                for pos in positions:
                    if pos >= first:
                        dim = pos - first
                        size = (user.attrs["dynamic_slice_sizes"][dim] if user.opcode == "dynamic-slice"
                                else user.operands[1].shape.dimensions[dim])
                        limit = _min(limit, operand.dimensions[dim] - size)
            elif user.opcode in ("gather", "scatter"):
                n = 1 if user.opcode == "gather" else (len(user.operands) - 1) // 2
                index_pos = 1 if user.opcode == "gather" else n
                if user.operands[index_pos] is value:
                    dims = user.operands[0].shape.dimensions
                    limit = _min(limit, max(0, min(dims) - 1) if dims else 0)
            elif user.opcode in _FORWARDING:
                stack.append(user)
            if limit is not None:
                bound = _min(bound, max(limit, 0))
    return bound


def _min(a, b):
    return b if a is None else min(a, b)


def fake_value(shape: Shape, rng: np.random.Generator, bound: int | None = None):
    if shape.is_tuple():
        from xlapy.shape.tree import build_shaped

        return build_shaped(shape, lambda s, _path: fake_value(s, rng))
    if shape.is_token():
        return TOKEN
    t = shape.element_type
    dims = tuple(shape.dimensions)
    dtype = dtypes.to_dtype(t)
    if bound is not None and dtypes.is_integral(t):
        return rng.integers(0, bound + 1, size=dims).astype(dtype)
    if t == dtypes.PrimitiveType.PRED:
        return rng.integers(0, 2, size=dims).astype(np.bool_)
    if dtypes.is_complex(t):
        return (rng.standard_normal(dims) + 1j * rng.standard_normal(dims)).astype(dtype)
    if dtypes.is_floating(t):
        return rng.standard_normal(dims).astype(np.float32).astype(dtype)
    if dtypes.is_signed_integral(t):
        lo = max(-50, int(np.iinfo(np.int64).min) if dtypes.bit_width(t) >= 64 else -(1 << (dtypes.bit_width(t) - 1)))
        hi = min(50, (1 << (dtypes.bit_width(t) - 1)) - 1)
        return rng.integers(lo, hi + 1, size=dims).astype(dtype)
    hi = min(100, (1 << dtypes.bit_width(t)) - 1)
    return rng.integers(0, hi + 1, size=dims).astype(dtype)


def make_fake_arguments(module: Module, seed: int = 0) -> list:
    """One value per entry parameter, in parameter order."""
    rng = np.random.default_rng(seed)
    return [fake_value(p.shape, rng, _index_bound(p)) for p in module.entry.parameters]

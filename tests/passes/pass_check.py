"""Helpers of the pass tests: random inputs with NaN/inf/-0, bit-exact comparison, and
``check`` = run passes, verify, and compare the results before and after bit for bit."""

from __future__ import annotations

from collections import Counter

import numpy as np

import xlapy
from xlapy.interpreter.values import flatten
from xlapy.passes import make_pipeline
from xlapy.shape import dtypes

SPECIALS = [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, -np.nan, 0.5, 3.0]


def random_array(shape, rng):
    dt = dtypes.to_dtype(shape.element_type)
    dims = tuple(shape.dimensions)
    et = shape.element_type
    if dtypes.is_pred(et):
        return rng.integers(0, 2, dims).astype(bool)
    if dtypes.is_integral(et):
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, dims, dtype=dt, endpoint=True)
    if dtypes.is_complex(et):
        out = np.empty(dims, dt)
        out.real = rng.choice(SPECIALS, dims)
        out.imag = rng.choice(SPECIALS, dims)
        return out
    return np.asarray(rng.choice(SPECIALS, dims) * rng.choice([1.0, 1.5], dims)).astype(dt)


def random_args(module, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for p in module.entry.parameters:
        s = p.shape
        out.append(tuple(random_array(t, rng) for t in s.tuple_shapes) if s.is_tuple()
                   else random_array(s, rng))
    return out


def bits(value):
    return [(a.dtype, a.shape, np.ascontiguousarray(a).tobytes())
            for a in (flatten(value) if isinstance(value, tuple) else [value])]


def assert_same_bits(before, after, what=""):
    b, a = bits(before), bits(after)
    assert len(b) == len(a), what
    for i, (x, y) in enumerate(zip(b, a)):
        assert x[:2] == y[:2], f"{what} output {i}: {x[:2]} vs {y[:2]}"
        assert x[2] == y[2], f"{what} output {i}: the bits differ"


def opcodes(module, entry_only=True) -> Counter:
    comps = [module.entry] if entry_only else module.computations
    return Counter(i.opcode for c in comps for i in c.instructions)


def check(text, passes, *, seeds=(0, 1, 2), args=None, fixed_point=False):
    """Parse ``text``, run ``passes`` (names), verify, and check that the results on random
    inputs (or ``args``) have the same bits before and after. Returns the new module."""
    original = xlapy.parse_hlo_module(text)
    module = xlapy.parse_hlo_module(text)
    make_pipeline(passes, fixed_point=fixed_point).run(module)
    xlapy.verify_module(module)
    arg_sets = [args] if args is not None else [random_args(original, s) for s in seeds]
    for a in arg_sets:
        assert_same_bits(xlapy.evaluate(original, *a), xlapy.evaluate(module, *a),
                         f"passes {passes}")
    return module

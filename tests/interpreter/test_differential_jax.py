"""Differential test against real XLA: hypothesis builds random small jax programs, jax
lowers them to HLO and runs them on XLA:CPU, and xlapy's interpreter must give the same
results on the same HLO text (tolerances of golden.py).

jax is in the test extras (pip install '.[test]'), never a dependency of xlapy itself."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
lax = pytest.importorskip("jax.lax")

from golden import assert_close  # noqa: E402

from xlapy.interpreter import evaluate  # noqa: E402
from xlapy.parser import parse_hlo_module  # noqa: E402

UNARY_F = [jnp.abs, jnp.negative, jnp.exp, jnp.tanh, jnp.sin, jnp.cos, jnp.floor, jnp.ceil,
           jnp.sign, lax.logistic, jnp.round, lambda x: jnp.sqrt(jnp.abs(x)),
           lambda x: jnp.log1p(jnp.abs(x)), lambda x: x.astype(jnp.bfloat16).astype(jnp.float32)]
BINARY_F = [jnp.add, jnp.subtract, jnp.multiply, jnp.maximum, jnp.minimum,
            lambda a, b: jnp.where(a > b, a, b * 2), lambda a, b: a / (jnp.abs(b) + 1.0),
            jnp.arctan2]
UNARY_I = [jnp.negative, jnp.abs, lambda x: x >> 2, lambda x: x * 3, jnp.bitwise_not,
           lambda x: lax.population_count(x), lambda x: jnp.clip(x, -5, 7)]
BINARY_I = [jnp.add, jnp.subtract, jnp.multiply, jnp.maximum, jnp.minimum, lax.div, lax.rem,
            jnp.bitwise_and, jnp.bitwise_xor, lambda a, b: jnp.where(a < b, a, b)]
SHAPE_OPS = [
    lambda x: x,
    lambda x: x.T,
    lambda x: x[::-1],
    lambda x: jnp.cumsum(x, axis=0),
    lambda x: jnp.sort(x, axis=1),
    lambda x: jnp.concatenate([x, x[:1]], axis=0),
    lambda x: jnp.pad(x, ((1, 0), (0, 2))),
    lambda x: x.sum(axis=0, keepdims=True) + x,
    lambda x: x.max(axis=1, keepdims=True) - x,
    lambda x: (x @ x.T)[:, :1] * x if x.dtype == jnp.float32 else x,
]


@st.composite
def programs(draw):
    is_float = draw(st.booleans())
    steps = draw(st.lists(st.tuples(st.integers(0, 100), st.integers(0, 100), st.integers(0, 100)),
                          min_size=1, max_size=6))
    rows, cols = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    unary, binary = (UNARY_F, BINARY_F) if is_float else (UNARY_I, BINARY_I)

    def f(x, y):
        values = [x, y]
        for a, b, c in steps:
            kind = c % 3
            u = values[a % len(values)]
            if kind == 0:
                values.append(unary[b % len(unary)](u))
            elif kind == 1:
                values.append(binary[b % len(binary)](u, values[b % len(values)]))
            else:
                out = SHAPE_OPS[b % len(SHAPE_OPS)](u)
                values.append(out if out.shape == u.shape else u)
        return values[-1], values[-2]

    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    if is_float:
        x = rng.standard_normal((rows, cols)).astype(np.float32)
        y = rng.standard_normal((rows, cols)).astype(np.float32)
    else:
        x = rng.integers(-20, 20, (rows, cols)).astype(np.int32)
        y = rng.integers(-20, 20, (rows, cols)).astype(np.int32)
    return f, x, y


# derandomize: the same 40 programs every run. jax compiles each with XLA in this process,
# and a run once died of "Floating point exception" inside XLA's compile of a random
# program (not reproduced): a crash there takes the whole suite down, so CI runs a fixed
# set that is known to compile.
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck),
          derandomize=True)
@given(programs())
def test_interpreter_matches_xla(program):
    f, x, y = program
    jitted = jax.jit(f, keep_unused=True)
    lowered = jitted.lower(x, y)
    expected = [np.asarray(v) for v in jitted(x, y)]
    module = parse_hlo_module(lowered.as_text(dialect="hlo"))
    got = evaluate(module, x, y)
    assert isinstance(got, tuple) and len(got) == len(expected)
    for g, w in zip(got, expected):
        assert_close(g, w, "differential")

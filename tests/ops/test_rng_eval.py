"""The stateful rng op (RngUniform / RngNormal) and rng-get-and-update-state.

rng draws from the evaluation's seeded generator (EvalOptions.rng_seed): the same seed gives
the same values, values of RngUniform lie in [a, b) (spec: "uniform distribution over the
interval [a,b)"), RngNormal has mean mu and deviation sigma; floats and (uniform)
integers of every supported type. rng-get-and-update-state returns XLA:CPU's RngState
(initial value 0x7012395, xla/backends/cpu/runtime/rng_state_lib.cc) and advances it by
delta per execution of the instruction; with it the post-optimisation golden fixture
rng_stateful_uniform reproduces XLA:CPU's first draw exactly (checked below)."""

from pathlib import Path

import numpy as np
import pytest
from movement_eval_helpers import assert_same, np_dtype

from xlapy import ops
from xlapy.interpreter import evaluate
from xlapy.npz import load_npz
from xlapy.ops.builder import XlaBuilder
from xlapy.parser import parse_hlo_module
from xlapy.shape import parse_shape


def rng_module(type_name: str, dims: str, distribution: str) -> str:
    return f"""
HloModule m
ENTRY e {{
  a = {type_name}[] parameter(0)
  b = {type_name}[] parameter(1)
  ROOT r = {type_name}[{dims}] rng(a, b), distribution={distribution}
}}
"""


FLOATS = ["f16", "bf16", "f32", "f64"]
INTS = ["s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64"]


@pytest.mark.parametrize("type_name", FLOATS)
def test_uniform_float_in_half_open_interval(type_name):
    m = parse_hlo_module(rng_module(type_name, "1000", "rng_uniform"))
    dtype = np_dtype(type_name)
    got = evaluate(m, np.asarray(-2, dtype), np.asarray(3, dtype))
    assert got.dtype == dtype and got.shape == (1000,)
    values = got.astype(np.float64)
    assert values.min() >= -2 and values.max() < 3
    assert values.std() > 1  # spread over the interval, not a constant


@pytest.mark.parametrize("type_name", INTS)
def test_uniform_int_in_half_open_interval(type_name):
    m = parse_hlo_module(rng_module(type_name, "2000", "rng_uniform"))
    dtype = np_dtype(type_name)
    lo = 0 if type_name.startswith("u") else -3
    got = evaluate(m, np.asarray(lo, dtype), np.asarray(4, dtype))
    assert got.dtype == dtype
    assert set(np.unique(got).tolist()) == set(range(lo, 4))


def test_uniform_pred():
    m = parse_hlo_module(rng_module("pred", "50", "rng_uniform"))
    got = evaluate(m, False, True)
    assert got.dtype == np.bool_ and not got.any()  # [false, true) holds only false


@pytest.mark.parametrize("type_name", FLOATS)
def test_normal_mean_and_deviation(type_name):
    m = parse_hlo_module(rng_module(type_name, "4000", "rng_normal"))
    dtype = np_dtype(type_name)
    got = evaluate(m, np.asarray(5, dtype), np.asarray(2, dtype)).astype(np.float64)
    assert abs(got.mean() - 5) < 0.2 and abs(got.std() - 2) < 0.2


def test_same_seed_same_values_other_seed_other_values():
    m = parse_hlo_module(rng_module("f32", "8", "rng_uniform"))
    a, b = np.float32(0), np.float32(1)
    first = evaluate(m, a, b, rng_seed=7)
    assert_same(evaluate(m, a, b, rng_seed=7), first)
    assert not np.array_equal(evaluate(m, a, b, rng_seed=8), first)


def test_two_rng_ops_draw_different_values():
    text = """
HloModule m
ENTRY e {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  x = f32[4] rng(a, b), distribution=rng_uniform
  y = f32[4] rng(a, b), distribution=rng_uniform
  ROOT t = (f32[4], f32[4]) tuple(x, y)
}
"""
    x, y = evaluate(parse_hlo_module(text), np.float32(0), np.float32(1))
    assert not np.array_equal(x, y)


def test_builder_rng_uniform_and_normal():
    b = XlaBuilder("r")
    lo = ops.ConstantR0(b, np.float32(10))
    hi = ops.ConstantR0(b, np.float32(11))
    u = ops.RngUniform(lo, hi, parse_shape("f32[3,2]"))
    n = ops.RngNormal(lo, hi, parse_shape("f32[5]"))
    got_u, got_n = evaluate(b.build(ops.Tuple(b, [u, n])))
    assert got_u.shape == (3, 2) and np.all((got_u >= 10) & (got_u < 11))
    assert got_n.shape == (5,) and got_n.dtype == np.float32


def test_uniform_empty_interval_gives_the_lower_bound():
    # b <= a is implementation-defined (spec); the interpreter returns a.
    m = parse_hlo_module(rng_module("s32", "3", "rng_uniform"))
    assert_same(evaluate(m, np.int32(5), np.int32(5)), np.full(3, 5, np.int32))


# -- rng-get-and-update-state -------------------------------------------------------------------

STATE = """
HloModule m
ENTRY e {
  ROOT s = u64[2] rng-get-and-update-state(), delta=6
}
"""


def test_rng_get_and_update_state_starts_at_xla_cpu_initial_value():
    assert_same(evaluate(parse_hlo_module(STATE)), np.array([0x7012395, 0], np.uint64))
    # The seed offsets the state.
    assert_same(evaluate(parse_hlo_module(STATE), rng_seed=5),
                np.array([0x7012395 + 5, 0], np.uint64))


def test_rng_get_and_update_state_advances_by_delta_per_execution():
    text = """
HloModule m
cond {
  t = (s32[], u64[2], u64[2]) parameter(0)
  i = s32[] get-tuple-element(t), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  t = (s32[], u64[2], u64[2]) parameter(0)
  i = s32[] get-tuple-element(t), index=0
  first = u64[2] get-tuple-element(t), index=1
  s = u64[2] rng-get-and-update-state(), delta=6
  one = s32[] constant(1)
  next = s32[] add(i, one)
  ROOT r = (s32[], u64[2], u64[2]) tuple(next, first, s)
}
ENTRY e {
  zero = s32[] constant(0)
  z = u64[2] constant({0, 0})
  init = (s32[], u64[2], u64[2]) tuple(zero, z, z)
  ROOT w = (s32[], u64[2], u64[2]) while(init), condition=cond, body=body
}
"""
    _, _, last = evaluate(parse_hlo_module(text))
    assert_same(last, np.array([0x7012395 + 12, 0], np.uint64))


def test_stateful_uniform_post_optimisation_fixture_is_exact():
    # XLA:CPU expands rng into rng-get-and-update-state + Philox; the post-optimisation
    # module therefore reproduces XLA:CPU's first execution bit for bit.
    fixtures = Path(__file__).parent.parent / "fixtures" / "jax"
    data = load_npz(fixtures / "rng_stateful_uniform.npz")
    module = parse_hlo_module((fixtures / "rng_stateful_uniform.post.hlo").read_text())
    got = evaluate(module, data["arg0"], data["arg1"])
    assert got.tobytes() == data["out0"].tobytes()

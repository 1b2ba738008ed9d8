"""The reduce kernel: the semantics page's examples (1-D, 2-D and 3-D reductions over one,
several and all dimensions, the variadic max/argmax reduction), jax's argmax reducer with
ties and NaN (values from XLA:CPU), the left-fold order of short reductions, the tree of long
ones, init applied once, size-0 and dynamic dimensions, integer wrapping, narrow floats
rounding at every step, every element type, and reducers that are not elementwise."""

import ml_dtypes
import numpy as np
import pytest
from movement_eval_helpers import ALL_TYPES, assert_same, np_dtype, sample

from xlapy import ops
from xlapy.interpreter import evaluate
from xlapy.ops.builder import XlaBuilder
from xlapy.parser import parse_hlo_module
from xlapy.shape import PrimitiveType, Shape


def run(text, *args):
    return evaluate(parse_hlo_module(text), *args)


def binary(name, op, t):
    return f"""
{name} {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ROOT r = {t}[] {op}(a, b)
}}
"""


def reduce_module(t, shape, dims, out_shape, op="add", init="0", out_t=None):
    out_t = out_t or t
    return f"""
HloModule m
{binary("red", op, t)}
ENTRY e {{
  x = {t}{shape} parameter(0)
  i = {t}[] constant({init})
  ROOT r = {out_t}{out_shape} reduce(x, i), dimensions={{{",".join(map(str, dims))}}}, to_apply=red
}}
"""


# -- the page's examples ------------------------------------------------------------------------


def test_page_1d_sum():
    # f(10, f(11, f(12, f(init_value, 13)))) with add and init 0.
    x = np.array([10, 11, 12, 13], np.float32)
    assert_same(run(reduce_module("f32", "[4]", [0], "[]"), x), np.float32(46))


def test_page_2d_reductions():
    # A 2x3 array reduced over dimension 0 or 1 with "add".
    x = np.array([[1, 2, 3], [4, 5, 6]], np.int32)
    assert_same(run(reduce_module("s32", "[2,3]", [0], "[3]"), x), np.array([5, 7, 9], np.int32))
    assert_same(run(reduce_module("s32", "[2,3]", [1], "[2]"), x), np.array([6, 15], np.int32))


PAGE_3D = np.array([[[1, 2, 3], [4, 5, 6]]] * 4, np.float32)  # values 1..6 repeated on dim 0


@pytest.mark.parametrize("dims,out_shape,expected", [
    ([0], "[2,3]", [[4, 8, 12], [16, 20, 24]]),
    ([2], "[4,2]", [[6, 15]] * 4),
    ([0, 1], "[3]", [20, 28, 36]),
    ([1, 0], "[3]", [20, 28, 36]),   # the dimensions are unordered
    ([0, 1, 2], "[]", 84),
    ([2, 0, 1], "[]", 84),
])
def test_page_3d_reductions(dims, out_shape, expected):
    got = run(reduce_module("f32", "[4,2,3]", dims, out_shape), PAGE_3D)
    assert_same(got, np.array(expected, np.float32))


PAGE_ARGMAX = """
HloModule m
maxargmax {
  max = f32[] parameter(0)
  argmax = s32[] parameter(1)
  value = f32[] parameter(2)
  index = s32[] parameter(3)
  ge = pred[] compare(value, max), direction=GE
  m = f32[] select(ge, value, max)
  k = s32[] select(ge, index, argmax)
  ROOT t = (f32[], s32[]) tuple(m, k)
}
ENTRY e {
  v = f32[6] parameter(0)
  k = s32[6] iota(), iota_dimension=0
  iv = f32[] constant(-inf)
  ik = s32[] constant(-1)
  ROOT r = (f32[], s32[]) reduce(v, k, iv, ik), dimensions={0}, to_apply=maxargmax
}
"""


def test_page_variadic_max_argmax():
    # f(max, argmax, value, index): value >= max keeps (value, index); iterating
    # f_0 = f(I_V, I_K, V_0, K_0), f_1 = f(f_0, V_1, K_1), ... gives the max and its index
    # (with ">=", the last of equal maxima).
    v = np.array([3, 7, 1, 7, 2, 5], np.float32)
    m, k = run(PAGE_ARGMAX, v)
    assert_same(m, np.float32(7))
    assert_same(k, np.int32(3))


# jax's argmax/argmin reducers (tests/fixtures/jax/argmax): NaN wins, ties keep the lower index.
JAX_ARG = """
HloModule m
argmax {
  a = f32[] parameter(0)
  ai = s32[] parameter(1)
  b = f32[] parameter(2)
  bi = s32[] parameter(3)
  gt = pred[] compare(a, b), direction=GT
  isnan = pred[] compare(a, a), direction=NE
  pick = pred[] or(gt, isnan)
  v = f32[] select(pick, a, b)
  eq = pred[] compare(a, b), direction=EQ
  lt = pred[] compare(ai, bi), direction=LT
  tie = pred[] and(eq, lt)
  pick_i = pred[] or(pick, tie)
  i = s32[] select(pick_i, ai, bi)
  ROOT t = (f32[], s32[]) tuple(v, i)
}
ENTRY e {
  x = f32[4,5] parameter(0)
  k = s32[4,5] iota(), iota_dimension=1
  iv = f32[] constant(-inf)
  ik = s32[] constant(0)
  ROOT r = (f32[4], s32[4]) reduce(x, k, iv, ik), dimensions={1}, to_apply=argmax
}
"""


def test_jax_argmax_ties_and_nan():
    x = np.array([[1, 3, 3, 2, 0], [np.nan, 1, np.nan, 0, 5], [-1, -1, -1, -1, -1],
                  [2, -np.inf, np.inf, np.inf, 0]], np.float32)
    m, k = run(JAX_ARG, x)
    # XLA:CPU via jax 0.10.2: jnp.argmax(x, 1) = [1, 0, 0, 2], jnp.max(x, 1) = [3, nan, -1, inf]
    assert_same(k, np.array([1, 0, 0, 2], np.int32))
    assert_same(m, np.array([3, np.nan, -1, np.inf], np.float32))


def test_jax_argmax_long_row_uses_first_of_ties():
    # 1000 elements per row (a pairwise tree): the reducer still decides ties (lower index).
    text = JAX_ARG.replace("[4,5]", "[2,1000]").replace("[4]", "[2]")
    x = np.zeros((2, 1000), np.float32)
    x[0, [17, 400, 999]] = 5
    x[1, [998, 3]] = np.nan
    m, k = run(text, x)
    assert_same(k, np.array([17, 3], np.int32))
    assert_same(m, np.array([5, np.nan], np.float32))


# -- order, init, sizes -------------------------------------------------------------------------


ORDER = """
HloModule m
digits {
  a = f64[] parameter(0)
  b = f64[] parameter(1)
  ten = f64[] constant(10)
  m = f64[] multiply(a, ten)
  ROOT r = f64[] add(m, b)
}
ENTRY e {
  x = f64[2,3] parameter(0)
  i = f64[] constant(0)
  ROOT r = f64[] reduce(x, i), dimensions={0,1}, to_apply=digits
}
"""


def test_short_reduction_is_a_left_fold_in_row_major_order():
    # f(a, b) = 10a + b records the order: f(f(f(f(f(f(0, 1), 2), 3), 4), 5), 6) = 123456,
    # what XLA:CPU computes (through jax 0.10.2) and XLA's evaluator's order.
    x = np.array([[1, 2, 3], [4, 5, 6]], np.float64)
    assert_same(run(ORDER, x), np.float64(123456))


def test_init_is_applied_once():
    # sum with init 100 over 5 ones: 105 (XLA:CPU through jax also gives 105 for 5 and 17
    # elements; for long reductions it may start several accumulators at init).
    x = np.ones(5, np.float32)
    assert_same(run(reduce_module("f32", "[5]", [0], "[]", init="100"), x), np.float32(105))


def test_long_reduction_is_exact_for_integers():
    x = np.arange(5000, dtype=np.int32).reshape(2, 2500)
    got = run(reduce_module("s32", "[2,2500]", [1], "[2]"), x)
    assert_same(got, x.sum(axis=1).astype(np.int32))


def test_bf16_rounds_at_every_step():
    # bf16 add reducer: 256 + 1 rounds back to 256 (ties to even), so [256, 1, 1] sums to 256
    # and [1, 1, 256] to 258 - XLA:CPU's values through jax 0.10.2.
    text = reduce_module("bf16", "[3]", [0], "[]")
    assert_same(run(text, np.array([256, 1, 1], ml_dtypes.bfloat16)), ml_dtypes.bfloat16(256))
    assert_same(run(text, np.array([1, 1, 256], ml_dtypes.bfloat16)), ml_dtypes.bfloat16(258))


def test_size_zero_dimension_gives_init():
    x = np.zeros((3, 0), np.float32)
    got = run(reduce_module("f32", "[3,0]", [1], "[3]", init="7.5"), x)
    assert_same(got, np.full(3, 7.5, np.float32))
    got = run(reduce_module("f32", "[3,0]", [0], "[0]", init="7.5"), x)
    assert_same(got, np.zeros(0, np.float32))


def test_no_reduced_dimensions_with_identity_init():
    x = np.array([1.5, -2, 3], np.float32)
    assert_same(run(reduce_module("f32", "[3]", [], "[3]"), x), x)


def test_dynamic_dimension_ignores_padding():
    text = f"""
HloModule m
{binary("red", "add", "f32")}
ENTRY e {{
  x = f32[5] parameter(0)
  n = s32[] constant(3)
  d = f32[<=5] set-dimension-size(x, n), dimensions={{0}}
  i = f32[] constant(0)
  ROOT r = f32[] reduce(d, i), dimensions={{0}}, to_apply=red
}}
"""
    assert_same(run(text, np.array([1, 2, 3, 100, 1000], np.float32)), np.float32(6))


@pytest.mark.parametrize("t,values,expected", [
    ("s8", [100, 100], -56),
    ("u8", [200, 100], 44),
    ("s32", [2**31 - 1, 1], -2**31),
    ("u64", [2**64 - 1, 2], 1),
])
def test_integer_sums_wrap(t, values, expected):
    x = np.array(values, np_dtype(t))
    assert_same(run(reduce_module(t, "[2]", [0], "[]"), x), np.array(expected).astype(np_dtype(t)))


def test_max_propagates_nan():
    text = reduce_module("f32", "[2,3]", [1], "[2]", op="maximum", init="-inf")
    x = np.array([[1, np.nan, 3], [-0.0, 0.0, -1]], np.float32)
    assert_same(run(text, x), np.array([np.nan, 0.0], np.float32))


# -- element types ------------------------------------------------------------------------------


MAX_TYPES = [t for t in ALL_TYPES if t not in ("c64", "c128")]


NO_INF = ("f8e4m3fn", "f8e4m3fnuz", "f8e5m2fnuz", "f8e4m3b11fnuz", "f4e2m1fn", "f6e3m2fn",
          "f6e2m3fn", "f8e8m0fnu")


def lowest(t: str) -> str:
    """The init value of a max reduction: -inf, or the lowest value of types without inf."""
    dt = np_dtype(t)
    if t == "pred":
        return "false"
    if np.issubdtype(dt, np.integer) or t in ("s1", "s2", "s4", "u1", "u2", "u4"):
        return str(int(ml_dtypes.iinfo(dt).min))
    if t in NO_INF:
        return repr(float(ml_dtypes.finfo(dt).min))
    return "-inf"


@pytest.mark.parametrize("t", MAX_TYPES)
def test_max_every_type(t):
    x = sample(t, (3, 4))
    got = run(reduce_module(t, "[3,4]", [1], "[3]", op="maximum", init=lowest(t)), x)
    assert_same(got, np.max(x.astype(np.float64) if t != "pred" else x, axis=1).astype(x.dtype))


SUM_TYPES = ["s2", "s4", "s8", "s16", "s32", "s64", "u2", "u4", "u8", "u16", "u32", "u64", "f16",
             "bf16", "f32", "f64", "c64", "c128"]


@pytest.mark.parametrize("t", SUM_TYPES)
def test_sum_every_type(t):
    x = sample(t, (2, 3, 4))
    zero = "(0, 0)" if t.startswith("c") else "0"
    got = run(reduce_module(t, "[2,3,4]", [0, 2], "[3]", init=zero), x)
    dt = np_dtype(t)
    if dt.kind in "fc" or t in ("bf16",):
        want = x.astype(np.complex128 if dt.kind == "c" else np.float64).sum(axis=(0, 2))
    else:  # wrapping sums: exact in int64, then the type's bits
        want = x.astype(np.int64).sum(axis=(0, 2))
    assert_same(got, want.astype(dt))


def test_pred_and_or():
    x = np.array([[True, True], [True, False], [False, False]])
    assert_same(run(reduce_module("pred", "[3,2]", [1], "[3]", op="and", init="true"), x),
                np.array([True, False, False]))
    assert_same(run(reduce_module("pred", "[3,2]", [1], "[3]", op="or", init="false"), x),
                np.array([True, True, False]))


# -- reducers that are not elementwise, the builder ---------------------------------------------


def test_reducer_with_non_elementwise_instructions():
    # A reshape round trip inside the reducer: evaluated element by element.
    text = """
HloModule m
red {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  s = f32[] add(a, b)
  r1 = f32[1] reshape(s)
  ROOT r = f32[] reshape(r1)
}
ENTRY e {
  x = f32[3,4] parameter(0)
  i = f32[] constant(0)
  ROOT r = f32[3] reduce(x, i), dimensions={1}, to_apply=red
}
"""
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert_same(run(text, x), np.array([6, 22, 38], np.float32))


def test_builder_reduce():
    b = XlaBuilder("add")
    p, q = (ops.Parameter(b, i, Shape.array(PrimitiveType.F32, ()), n) for i, n in enumerate("pq"))
    ops.Add(p, q)
    add = b.build()
    mb = XlaBuilder("m")
    x = ops.Parameter(mb, 0, Shape.array(PrimitiveType.F32, (2, 3)), "x")
    ops.Reduce(x, ops.ConstantR0(mb, np.float32(0)), add, [1])
    got = evaluate(mb.build(), np.array([[1, 2, 3], [4, 5, 6]], np.float32))
    assert_same(got, np.array([6, 15], np.float32))

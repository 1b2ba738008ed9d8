"""The dot, ragged-dot and scaled-dot kernels: the semantics page's Dot table (vector .
vector, matrix . vector, matrix . matrix) and DotGeneral examples (contracting dimensions, a
batch of 2x2 matrices, the batch-matmul table), the preferred element type (s8 x s8 -> s32,
bf16 x bf16 -> f32, f32 x f32 -> bf16 computed in f32 and rounded once - XLA:CPU's values),
integer wrapping, pred (OR of ANDs), every element type, empty contractions, the three
ragged modes and block scales."""

import ml_dtypes
import numpy as np
import pytest
from movement_eval_helpers import ALL_TYPES, assert_same, np_dtype, sample

from xlapy import ops
from xlapy.hlo.attrs.dot import DotDimensionNumbers
from xlapy.interpreter import evaluate
from xlapy.ops.builder import XlaBuilder
from xlapy.parser import parse_hlo_module
from xlapy.shape import PrimitiveType, Shape


def run(text, *args):
    return evaluate(parse_hlo_module(text), *args)


def dot_module(lt, ls, rt, rs, out, attrs="", op="dot", extra_params=""):
    return f"""
HloModule m
ENTRY e {{
  a = {lt}{ls} parameter(0)
  b = {rt}{rs} parameter(1){extra_params}
  ROOT r = {out} {op}(a, b{", g" if op == "ragged-dot" else ""}){attrs}
}}
"""


MATMUL = ", lhs_contracting_dims={1}, rhs_contracting_dims={0}"


# -- the page's examples ------------------------------------------------------------------------


def test_page_dot_table():
    v = np.array([1, 2, 3], np.float32)
    w = np.array([4, 5, 6], np.float32)
    m = np.array([[1, 0, 2], [0, 1, -1]], np.float32)
    n = np.array([[1, 2], [3, 4], [5, 6]], np.float32)
    vv = dot_module("f32", "[3]", "f32", "[3]", "f32[]",
                    ", lhs_contracting_dims={0}, rhs_contracting_dims={0}")
    assert_same(run(vv, v, w), np.float32(32))  # vector [n] dot vector [n] -> scalar
    mv = dot_module("f32", "[2,3]", "f32", "[3]", "f32[2]",
                    ", lhs_contracting_dims={1}, rhs_contracting_dims={0}")
    assert_same(run(mv, m, v), np.array([7, -1], np.float32))  # matrix [m x k] dot vector [k]
    mm = dot_module("f32", "[2,3]", "f32", "[3,2]", "f32[2,2]", MATMUL)
    assert_same(run(mm, m, n), np.array([[11, 14], [-2, -2]], np.float32))


def test_page_dot_general_contracting_dimensions():
    lhs = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
    rhs = np.array([[1, 1, 1], [2, 2, 2]], np.float32)
    text = dot_module("f32", "[2,3]", "f32", "[2,3]", "f32[2,2]",
                      ", lhs_contracting_dims={1}, rhs_contracting_dims={1}")
    assert_same(run(text, lhs, rhs), np.array([[6, 12], [15, 30]], np.float32))


def test_page_dot_general_batch_dimensions():
    lhs = np.array([[[1, 2], [3, 4]], [[5, 6], [7, 8]]], np.float32)
    rhs = np.array([[[1, 0], [0, 1]], [[1, 0], [0, 1]]], np.float32)
    text = dot_module("f32", "[2,2,2]", "f32", "[2,2,2]", "f32[2,2,2]",
                      ", lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, "
                      "rhs_contracting_dims={1}")
    assert_same(run(text, lhs, rhs), lhs)


@pytest.mark.parametrize("batch", [(3,), (2, 3)])
def test_page_batch_matmul_table(batch):
    # [b0, m, k] dot [b0, k, n] -> [b0, m, n]; [b0, b1, m, k] dot [b0, b1, k, n] -> [b0, b1, m, n]
    rng = np.random.default_rng(0)
    a = rng.integers(-5, 5, batch + (2, 4)).astype(np.float32)
    b = rng.integers(-5, 5, batch + (4, 3)).astype(np.float32)
    nb = len(batch)
    bd = ",".join(map(str, range(nb)))
    dims = lambda s: "[" + ",".join(map(str, s)) + "]"
    text = dot_module("f32", dims(a.shape), "f32", dims(b.shape), "f32" + dims(batch + (2, 3)),
                      f", lhs_batch_dims={{{bd}}}, lhs_contracting_dims={{{nb + 1}}}, "
                      f"rhs_batch_dims={{{bd}}}, rhs_contracting_dims={{{nb}}}")
    assert_same(run(text, a, b), a @ b)


def test_result_dimension_order_batch_lhs_free_rhs_free():
    # 'bij,bkj->bki' style: contracting dims not last; result [batch, lhs free, rhs free]
    rng = np.random.default_rng(1)
    a = rng.integers(-3, 3, (4, 2, 5)).astype(np.float64)  # [j, b, i]
    b = rng.integers(-3, 3, (2, 3, 4)).astype(np.float64)  # [b, k, j]
    text = dot_module("f64", "[4,2,5]", "f64", "[2,3,4]", "f64[2,5,3]",
                      ", lhs_batch_dims={1}, lhs_contracting_dims={0}, rhs_batch_dims={0}, "
                      "rhs_contracting_dims={2}")
    assert_same(run(text, a, b), np.einsum("jbi,bkj->bik", a, b))


def test_builder_dot_general():
    b = XlaBuilder("m")
    x = ops.Parameter(b, 0, Shape.array(PrimitiveType.F32, (2, 3)), "x")
    y = ops.Parameter(b, 1, Shape.array(PrimitiveType.F32, (2, 3)), "y")
    ops.DotGeneral(x, y, DotDimensionNumbers(lhs_contracting_dimensions=(1,),
                                             rhs_contracting_dimensions=(1,)))
    got = evaluate(b.build(), np.array([[1, 2, 3], [4, 5, 6]], np.float32),
                   np.array([[1, 1, 1], [2, 2, 2]], np.float32))
    assert_same(got, np.array([[6, 12], [15, 30]], np.float32))


# -- element types and the preferred element type -----------------------------------------------


def test_s8_products_accumulate_in_s32():
    # dot_int8 fixture: s8 x s8 -> s32; 127 * 127 * 3 does not fit s8 or s16
    a = np.array([[127, 127, 127], [-128, -128, 1]], np.int8)
    b = np.array([[127], [127], [127]], np.int8)
    text = dot_module("s8", "[2,3]", "s8", "[3,1]", "s32[2,1]", MATMUL)
    assert_same(run(text, a, b), np.array([[48387], [-32385]], np.int32))


@pytest.mark.parametrize("t,a,b,want", [
    ("s8", [100, 100], [1, 2], 44),        # 300 wraps to 44
    ("u8", [200, 100], [2, 1], 244),       # 500 wraps to 244
    ("s32", [2**30, 2**30], [2, 2], 0),    # 2^32 wraps to 0
    ("s64", [2**62, 2**62], [2, 2], 0),
    ("u64", [2**63, 1], [2, 5], 5),
])
def test_integer_dot_wraps(t, a, b, want):
    dt = np_dtype(t)
    text = dot_module(t, "[2]", t, "[2]", f"{t}[]", ", lhs_contracting_dims={0}, rhs_contracting_dims={0}")
    assert_same(run(text, np.array(a).astype(dt), np.array(b).astype(dt)), np.array(want).astype(dt))


def test_pred_dot_is_or_of_ands():
    a = np.array([[True, False, True], [False, False, True]])
    b = np.array([[False], [True], [False]])
    text = dot_module("pred", "[2,3]", "pred", "[3,1]", "pred[2,1]", MATMUL)
    assert_same(run(text, a, b), np.array([[False], [False]]))
    b = np.array([[True], [True], [False]])
    assert_same(run(text, a, b), np.array([[True], [False]]))


def test_bf16_operands_f32_result():
    a = np.array([[1.00390625, 3]], np.float32).astype(ml_dtypes.bfloat16)  # 1 + 2^-8 -> 1.0
    b = np.array([[1], [0.5]], ml_dtypes.bfloat16)
    text = dot_module("bf16", "[1,2]", "bf16", "[2,1]", "f32[1,1]", MATMUL)
    assert_same(run(text, a, b), np.array([[2.5]], np.float32))


def test_f32_operands_bf16_result_rounds_once():
    # lax.dot(a, b, preferred_element_type=bf16) on XLA:CPU (jax 0.10.2): the sum
    # 3 x 1.00390625 = 3.01171875 is formed in f32 and rounded once to 3.015625 (rounding
    # the operands to bf16 first would give 3.0).
    a = np.full((1, 3), 1.00390625, np.float32)
    b = np.ones((3, 1), np.float32)
    text = dot_module("f32", "[1,3]", "f32", "[3,1]", "bf16[1,1]", MATMUL)
    assert_same(run(text, a, b), np.array([[3.015625]], ml_dtypes.bfloat16))


def test_bf16_result_is_rounded_from_f32_accumulation():
    a = np.array([[256, 1, 1]], ml_dtypes.bfloat16)
    b = np.ones((3, 1), ml_dtypes.bfloat16)
    text = dot_module("bf16", "[1,3]", "bf16", "[3,1]", "bf16[1,1]", MATMUL)
    assert_same(run(text, a, b), np.array([[258]], ml_dtypes.bfloat16))


DOT_TYPES = [t for t in ALL_TYPES if t not in ("s1", "u1")]


@pytest.mark.parametrize("t", DOT_TYPES)
def test_every_element_type(t):
    a = sample(t, (2, 3))
    b = sample(t, (3, 2), offset=5)
    text = dot_module(t, "[2,3]", t, "[3,2]", f"{t}[2,2]", MATMUL)
    dt = np_dtype(t)
    if t == "pred":
        want = (a.astype(np.int64) @ b.astype(np.int64)) != 0
    elif dt.kind == "c":
        want = (a.astype(np.complex128) @ b.astype(np.complex128)).astype(dt)
    elif np.issubdtype(dt, np.integer) or t in ("s2", "s4", "u2", "u4"):
        want = (a.astype(np.int64) @ b.astype(np.int64)).astype(dt)  # wraps to the type
    else:  # exact small products, rounded once (through f32) to the type
        want = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32).astype(dt)
    got = run(text, a, b)
    assert got.dtype == dt
    assert_same(got, want)


def test_complex():
    a = np.array([[1 + 2j, 3 - 1j]], np.complex64)
    b = np.array([[2j], [1 + 1j]], np.complex64)
    text = dot_module("c64", "[1,2]", "c64", "[2,1]", "c64[1,1]", MATMUL)
    assert_same(run(text, a, b), np.array([[(1 + 2j) * 2j + (3 - 1j) * (1 + 1j)]], np.complex64))


def test_empty_contraction_gives_zeros():
    text = dot_module("f32", "[2,0]", "f32", "[0,3]", "f32[2,3]", MATMUL)
    assert_same(run(text, np.zeros((2, 0), np.float32), np.zeros((0, 3), np.float32)),
                np.zeros((2, 3), np.float32))


def test_nan_and_inf_propagate():
    a = np.array([[np.inf, 1], [np.nan, 0]], np.float32)
    b = np.array([[0], [1]], np.float32)
    text = dot_module("f32", "[2,2]", "f32", "[2,1]", "f32[2,1]", MATMUL)
    assert_same(run(text, a, b), np.array([[np.nan], [np.nan]], np.float32))


# -- ragged-dot ---------------------------------------------------------------------------------


GS = "\n  g = s32[{}] parameter(2)"


def test_ragged_non_contracting():
    # lax.ragged_dot: rows [0, 2) use rhs[0], none rhs[1], [2, 5) rhs[2]; rows 5 and 6 are
    # past the groups and give 0 (jax's lax.ragged_dot gives the same values)
    rng = np.random.default_rng(2)
    a = rng.integers(-3, 4, (7, 4)).astype(np.float32)
    b = rng.integers(-3, 4, (3, 4, 2)).astype(np.float32)
    g = np.array([2, 0, 3], np.int32)
    text = dot_module("f32", "[7,4]", "f32", "[3,4,2]", "f32[7,2]",
                      ", lhs_contracting_dims={1}, rhs_contracting_dims={1}, lhs_ragged_dims={0}, "
                      "rhs_group_dims={0}", op="ragged-dot", extra_params=GS.format(3))
    want = np.zeros((7, 2), np.float32)
    want[0:2] = a[0:2] @ b[0]
    want[2:5] = a[2:5] @ b[2]
    assert_same(run(text, a, b, g), want)


def test_ragged_non_contracting_with_batch_group_sizes():
    # group sizes per batch: [b, groups]
    rng = np.random.default_rng(3)
    a = rng.integers(-3, 4, (2, 5, 3)).astype(np.float32)
    b = rng.integers(-3, 4, (2, 2, 3, 4)).astype(np.float32)  # [group, batch, k, n]
    g = np.array([[2, 3], [1, 1]], np.int32)
    text = dot_module("f32", "[2,5,3]", "f32", "[2,2,3,4]", "f32[2,5,4]",
                      ", lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={1}, "
                      "rhs_contracting_dims={2}, lhs_ragged_dims={1}, rhs_group_dims={0}",
                      op="ragged-dot", extra_params="\n  g = s32[2,2] parameter(2)")
    want = np.zeros((2, 5, 4), np.float32)
    want[0, 0:2] = a[0, 0:2] @ b[0, 0]
    want[0, 2:5] = a[0, 2:5] @ b[1, 0]
    want[1, 0:1] = a[1, 0:1] @ b[0, 1]
    want[1, 1:2] = a[1, 1:2] @ b[1, 1]
    assert_same(run(text, a, b, g), want)


def test_ragged_non_contracting_rank1_group_sizes_apply_to_every_batch():
    rng = np.random.default_rng(6)
    a = rng.integers(-3, 4, (2, 5, 3)).astype(np.float32)
    b = rng.integers(-3, 4, (2, 2, 3, 4)).astype(np.float32)  # [group, batch, k, n]
    g = np.array([2, 2], np.int32)
    text = dot_module("f32", "[2,5,3]", "f32", "[2,2,3,4]", "f32[2,5,4]",
                      ", lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={1}, "
                      "rhs_contracting_dims={2}, lhs_ragged_dims={1}, rhs_group_dims={0}",
                      op="ragged-dot", extra_params=GS.format(2))
    want = np.zeros((2, 5, 4), np.float32)
    for batch in range(2):
        want[batch, 0:2] = a[batch, 0:2] @ b[0, batch]
        want[batch, 2:4] = a[batch, 2:4] @ b[1, batch]  # row 4 is past the groups
    assert_same(run(text, a, b, g), want)


def test_ragged_contracting():
    # one result per group over its slice of the contracting dimension
    rng = np.random.default_rng(4)
    a = rng.integers(-3, 4, (3, 6)).astype(np.float32)
    b = rng.integers(-3, 4, (6, 2)).astype(np.float32)
    g = np.array([1, 3, 1], np.int32)
    text = dot_module("f32", "[3,6]", "f32", "[6,2]", "f32[3,3,2]",
                      ", lhs_contracting_dims={1}, rhs_contracting_dims={0}, lhs_ragged_dims={1}",
                      op="ragged-dot", extra_params=GS.format(3))
    want = np.stack([a[:, 0:1] @ b[0:1], a[:, 1:4] @ b[1:4], a[:, 4:5] @ b[4:5]])
    assert_same(run(text, a, b, g), want)


def test_ragged_batch():
    # XLA's evaluator: batches past the sum of the group sizes give 0, the others a dot
    rng = np.random.default_rng(5)
    a = rng.integers(-3, 4, (4, 2, 3)).astype(np.float32)
    b = rng.integers(-3, 4, (4, 3, 2)).astype(np.float32)
    g = np.array([1, 2], np.int32)
    text = dot_module("f32", "[4,2,3]", "f32", "[4,3,2]", "f32[4,2,2]",
                      ", lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, "
                      "rhs_contracting_dims={1}, lhs_ragged_dims={0}",
                      op="ragged-dot", extra_params=GS.format(2))
    want = a @ b
    want[3] = 0
    assert_same(run(text, a, b, g), want)


# -- scaled-dot ---------------------------------------------------------------------------------


def test_scaled_dot_block_scales():
    # lhs [2,4] with scale [2,2] (blocks of 2 along k), rhs [4,3] with scale [2,1]
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    b = np.ones((4, 3), np.float32)
    sa = np.array([[1, 2], [4, 0.5]], np.float32)
    sb = np.array([[2], [3]], np.float32)
    text = f"""
HloModule m
ENTRY e {{
  a = f32[2,4] parameter(0)
  b = f32[4,3] parameter(1)
  sa = f32[2,2] parameter(2)
  sb = f32[2,1] parameter(3)
  ROOT r = f32[2,3] scaled-dot(a, b, sa, sb){MATMUL}
}}
"""
    want = (a * np.repeat(sa, 2, axis=1)) @ (b * np.repeat(sb, 2, axis=0).repeat(3, axis=1))
    assert_same(run(text, a, b, sa, sb), want)


def test_scaled_dot_e8m0_scales_of_f8_operands():
    a = np.array([[1, 2, 3, 4]], ml_dtypes.float8_e4m3fn)
    b = np.array([[1], [1], [1], [1]], ml_dtypes.float8_e4m3fn)
    sa = np.array([[0.5, 4]], ml_dtypes.float8_e8m0fnu)  # blocks of 2 along k
    sb = np.array([[2], [2]], ml_dtypes.float8_e8m0fnu)
    text = f"""
HloModule m
ENTRY e {{
  a = f8e4m3fn[1,4] parameter(0)
  b = f8e4m3fn[4,1] parameter(1)
  sa = f8e8m0fnu[1,2] parameter(2)
  sb = f8e8m0fnu[2,1] parameter(3)
  ROOT r = f32[1,1] scaled-dot(a, b, sa, sb){MATMUL}
}}
"""
    # (1 + 2) * 0.5 * 2 + (3 + 4) * 4 * 2 = 59
    assert_same(run(text, a, b, sa, sb), np.array([[59]], np.float32))

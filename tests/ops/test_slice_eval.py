"""Interpreter kernels of slice, dynamic-slice and dynamic-update-slice: the operation-semantics
page's examples (spec 002: Slice, DynamicSlice, DynamicUpdateSlice), XLA's clamping of start
indices (start = clamp(start, 0, dim - size), observed on XLA:CPU and in HloEvaluator), and
every element type."""

import numpy as np
import pytest
from movement_eval_helpers import ALL_TYPES, assert_bits, assert_same, run, sample

from xlapy import ops
from xlapy.interpreter import EvaluationError, evaluate
from xlapy.ops.builder import XlaBuilder
from xlapy.shape import parse_shape

A = np.array([0.0, 1.0, 2.0, 3.0, 4.0], np.float32)
B = np.array([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0], [6.0, 7.0, 8.0], [9.0, 10.0, 11.0]], np.float32)


def build(shape_texts, fn):
    b = XlaBuilder("t")
    params = [ops.Parameter(b, i, parse_shape(s), f"p{i}") for i, s in enumerate(shape_texts)]
    return b.build(fn(b, *params))


# -- Slice ----------------------------------------------------------------------------------


def test_slice_spec_1d():
    # Slice(a, {2}, {4}) produces {2.0, 3.0}.
    comp = build(["f32[5]"], lambda b, a: ops.Slice(a, [2], [4], [1]))
    assert_same(evaluate(comp, A), np.array([2.0, 3.0], np.float32))


def test_slice_spec_2d():
    # Slice(b, {2, 1}, {4, 3}) produces {{7, 8}, {10, 11}}.
    comp = build(["f32[4,3]"], lambda b, m: ops.Slice(m, [2, 1], [4, 3], [1, 1]))
    assert_same(evaluate(comp, B), np.array([[7.0, 8.0], [10.0, 11.0]], np.float32))


def test_slice_strides():
    # Every strides[d]-th element from start, below limit: [1:4:2] x [0:3:2].
    comp = build(["f32[4,3]"], lambda b, m: ops.Slice(m, [1, 0], [4, 3], [2, 2]))
    assert_same(evaluate(comp, B), np.array([[3.0, 5.0], [9.0, 11.0]], np.float32))
    comp = build(["f32[5]"], lambda b, a: ops.Slice(a, [0], [5], [3]))
    assert_same(evaluate(comp, A), np.array([0.0, 3.0], np.float32))


def test_slice_empty_and_scalar():
    comp = build(["f32[5]"], lambda b, a: ops.Slice(a, [3], [3], [1]))
    assert_same(evaluate(comp, A), np.zeros(0, np.float32))
    text = """HloModule m
ENTRY e {
  x = s32[] parameter(0)
  ROOT s = s32[] slice(x), slice={}
}"""
    assert_same(run(text, np.int32(7)), np.array(7, np.int32))


@pytest.mark.parametrize("t", ALL_TYPES)
def test_slice_every_type(t):
    text = f"""HloModule m
ENTRY e {{
  x = {t}[6] parameter(0)
  ROOT s = {t}[2] slice(x), slice={{[1:5:2]}}
}}"""
    x = sample(t, (6,))
    assert_bits(run(text, x), x[1:5:2].copy())


def test_slice_of_dynamic_dimension_keeps_the_valid_elements():
    text = """HloModule m
ENTRY e {
  x = f32[10] parameter(0)
  n = s32[] parameter(1)
  d = f32[<=10] set-dimension-size(x, n), dimensions={0}
  ROOT s = f32[<=8] slice(d), slice={[2:10]}
}"""
    x = np.arange(10, dtype=np.float32)
    assert_same(run(text, x, np.int32(6)), x[2:6])


# -- DynamicSlice ---------------------------------------------------------------------------


def test_dynamic_slice_spec_1d():
    # DynamicSlice(a, {2}, {2}) produces {2.0, 3.0}.
    comp = build(["f32[5]", "s32[]"], lambda b, a, s: ops.DynamicSlice(a, [s], [2]))
    assert_same(evaluate(comp, A, np.int32(2)), np.array([2.0, 3.0], np.float32))


def test_dynamic_slice_spec_2d():
    # DynamicSlice(b, {2, 1}, {2, 2}) produces {{7, 8}, {10, 11}}.
    comp = build(["f32[4,3]", "s32[]", "s32[]"],
                 lambda b, m, i, j: ops.DynamicSlice(m, [i, j], [2, 2]))
    assert_same(evaluate(comp, B, np.int32(2), np.int32(1)),
                np.array([[7.0, 8.0], [10.0, 11.0]], np.float32))


@pytest.mark.parametrize("i, j, want_start", [
    (2, 1, (2, 1)),     # in bounds: unchanged
    (3, 5, (2, 1)),     # past the end: clamped to dim - size
    (-4, -1, (0, 0)),   # negative: clamped to 0
    (100, -7, (2, 0)),
])
def test_dynamic_slice_clamps_start_indices(i, j, want_start):
    # start = clamp(start, 0, operand.dimension_size - size_indices) (spec; XLA:CPU).
    comp = build(["f32[4,3]", "s32[]", "s32[]"],
                 lambda b, m, p, q: ops.DynamicSlice(m, [p, q], [2, 2]))
    r, c = want_start
    assert_same(evaluate(comp, B, np.int32(i), np.int32(j)), B[r:r + 2, c:c + 2])


def test_dynamic_slice_xla_cpu_fixture_case():
    # lax.dynamic_slice [2,3] out of [5,6] at (4,-2): XLA:CPU clamps to (3,0).
    text = """HloModule m
ENTRY e {
  x = f32[5,6] parameter(0)
  i = s32[] parameter(1)
  j = s32[] parameter(2)
  ROOT s = f32[2,3] dynamic-slice(x, i, j), dynamic_slice_sizes={2,3}
}"""
    x = np.arange(30, dtype=np.float32).reshape(5, 6)
    assert_same(run(text, x, np.int32(4), np.int32(-2)), x[3:5, 0:3])


@pytest.mark.parametrize("index_type, value, start", [
    ("u8", 255, 2), ("s8", -128, 0), ("s64", 2**40, 2), ("u64", 2**64 - 1, 2), ("u32", 1, 1),
    ("s16", 1, 1), ("u64", 2**63, 2), ("u32", 2**32 - 1, 2),
])
def test_dynamic_slice_index_types(index_type, value, start):
    # Indices are read by value: a u64 above 2^63 is that large and clamps to the largest
    # start, as XLA:CPU does (tests/fixtures/xla_hlo), not to 0 as a signed reading would.
    text = f"""HloModule m
ENTRY e {{
  x = f32[5] parameter(0)
  i = {index_type}[] parameter(1)
  ROOT s = f32[3] dynamic-slice(x, i), dynamic_slice_sizes={{3}}
}}"""
    from movement_eval_helpers import np_dtype
    idx = np.array(value).astype(np_dtype(index_type))
    assert_same(run(text, A, idx), A[start:start + 3])


def test_dynamic_slice_legacy_rank1_index_operand():
    text = """HloModule m
ENTRY e {
  x = f32[4,3] parameter(0)
  s = s32[2] parameter(1)
  ROOT d = f32[2,2] dynamic-slice(x, s), dynamic_slice_sizes={2,2}
}"""
    assert_same(run(text, B, np.array([1, 9], np.int32)), B[1:3, 1:3])


@pytest.mark.parametrize("t", ALL_TYPES)
def test_dynamic_slice_every_type(t):
    text = f"""HloModule m
ENTRY e {{
  x = {t}[3,4] parameter(0)
  i = s32[] parameter(1)
  j = s32[] parameter(2)
  ROOT s = {t}[2,2] dynamic-slice(x, i, j), dynamic_slice_sizes={{2,2}}
}}"""
    x = sample(t, (3, 4))
    assert_bits(run(text, x, np.int32(1), np.int32(7)), x[1:3, 2:4].copy())


def test_dynamic_slice_of_a_too_short_dynamic_operand_is_an_error():
    text = """HloModule m
ENTRY e {
  x = f32[10] parameter(0)
  n = s32[] parameter(1)
  i = s32[] parameter(2)
  d = f32[<=10] set-dimension-size(x, n), dimensions={0}
  ROOT s = f32[4] dynamic-slice(d, i), dynamic_slice_sizes={4}
}"""
    x = np.arange(10, dtype=np.float32)
    assert_same(run(text, x, np.int32(6), np.int32(5)), x[2:6])
    with pytest.raises(EvaluationError, match=r"dynamic-slice: the slice size 4 of dimension 0 "
                                              r"exceeds the operand's runtime size 3"):
        run(text, x, np.int32(3), np.int32(0))


# -- DynamicUpdateSlice ---------------------------------------------------------------------


def test_dynamic_update_slice_spec_1d():
    # DynamicUpdateSlice(a, {5, 6}, {2}) produces {0, 1, 5, 6, 4}.
    comp = build(["f32[5]", "f32[2]", "s32[]"],
                 lambda b, a, u, s: ops.DynamicUpdateSlice(a, u, [s]))
    got = evaluate(comp, A, np.array([5.0, 6.0], np.float32), np.int32(2))
    assert_same(got, np.array([0.0, 1.0, 5.0, 6.0, 4.0], np.float32))


def test_dynamic_update_slice_spec_2d():
    u = np.array([[12.0, 13.0], [14.0, 15.0], [16.0, 17.0]], np.float32)
    comp = build(["f32[4,3]", "f32[3,2]", "s32[]", "s32[]"],
                 lambda b, m, up, i, j: ops.DynamicUpdateSlice(m, up, [i, j]))
    want = np.array([[0.0, 1.0, 2.0], [3.0, 12.0, 13.0], [6.0, 14.0, 15.0],
                     [9.0, 16.0, 17.0]], np.float32)
    assert_same(evaluate(comp, B, u, np.int32(1), np.int32(1)), want)
    # The operand is not modified (values are immutable).
    assert B[1, 1] == 4.0


@pytest.mark.parametrize("i, j, r, c", [(9, 9, 1, 1), (-3, 0, 0, 0), (0, 5, 0, 1)])
def test_dynamic_update_slice_clamps(i, j, r, c):
    u = np.array([[12.0, 13.0], [14.0, 15.0], [16.0, 17.0]], np.float32)
    comp = build(["f32[4,3]", "f32[3,2]", "s32[]", "s32[]"],
                 lambda b, m, up, p, q: ops.DynamicUpdateSlice(m, up, [p, q]))
    want = B.copy()
    want[r:r + 3, c:c + 2] = u
    assert_same(evaluate(comp, B, u, np.int32(i), np.int32(j)), want)


@pytest.mark.parametrize("t", ALL_TYPES)
def test_dynamic_update_slice_every_type(t):
    text = f"""HloModule m
ENTRY e {{
  x = {t}[3,4] parameter(0)
  u = {t}[2,2] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  ROOT s = {t}[3,4] dynamic-update-slice(x, u, i, j)
}}"""
    x = sample(t, (3, 4))
    u = sample(t, (2, 2), offset=5)
    want = x.copy()
    want[1:3, 0:2] = u
    assert_bits(run(text, x, u, np.int32(4), np.int32(-1)), want)


def test_dynamic_update_slice_empty_update():
    text = """HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  u = f32[0] parameter(1)
  i = s32[] parameter(2)
  ROOT s = f32[4] dynamic-update-slice(x, u, i)
}"""
    x = np.arange(4, dtype=np.float32)
    assert_same(run(text, x, np.zeros(0, np.float32), np.int32(9)), x)

"""Interpreter kernel of topk: the k largest (or smallest) values along the last dimension and
their S32 indices, under the total order -NaN < -inf < ... < -0 < +0 < ... < inf < +NaN, ties
to the lower index (XLA:CPU's TopK runtime, expected values pasted from XLA:CPU via jax
0.10.2; largest=false follows XLA's TopkDecomposer comparator LtTotalOrder)."""

import numpy as np
import pytest
from movement_eval_helpers import ALL_TYPES, assert_bits, assert_same, run, sample

from xlapy import ops
from xlapy.interpreter import evaluate
from xlapy.ops.builder import XlaBuilder
from xlapy.shape import parse_shape


def topk_text(t, shape, k, largest=None):
    dims = ",".join(str(s) for s in shape)
    out = ",".join(str(s) for s in shape[:-1] + [k])
    flag = "" if largest is None else f", largest={'true' if largest else 'false'}"
    return f"""HloModule m
ENTRY e {{
  x = {t}[{dims}] parameter(0)
  ROOT t = ({t}[{out}], s32[{out}]) topk(x), k={k}{flag}
}}"""


NAN = np.float32("nan")
X = np.array([1.0, -NAN, 0.0, -0.0, NAN, 3.0, 3.0, -np.inf, np.inf, -0.0, 0.0, 2.0], np.float32)


def test_topk_total_order_nan_signed_zero_ties():
    # XLA:CPU (lax.top_k(x, 12)): +NaN largest, -NaN smallest, +0 above -0, ties by index.
    values, indices = run(topk_text("f32", [12], 12, largest=True), X)
    assert_same(indices, np.array([4, 8, 5, 6, 11, 0, 2, 10, 3, 9, 7, 1], np.int32))
    assert_bits(values, X[[4, 8, 5, 6, 11, 0, 2, 10, 3, 9, 7, 1]])
    assert list(np.signbit(values)) == [False] * 8 + [True] * 4


def test_topk_largest_is_the_default():
    _, indices = run(topk_text("f32", [12], 3), X)
    assert_same(indices, np.array([4, 8, 5], np.int32))


def test_topk_smallest():
    # largest=false: ascending total order, ties to the lower index.
    values, indices = run(topk_text("f32", [12], 5, largest=False), X)
    assert_same(indices, np.array([1, 7, 3, 9, 2], np.int32))
    assert_bits(values, X[[1, 7, 3, 9, 2]])


def test_topk_integers_with_ties():
    # XLA:CPU: lax.top_k([5, 1, 5, -3, 7, 7, 0], 7).
    x = np.array([5, 1, 5, -3, 7, 7, 0], np.int32)
    values, indices = run(topk_text("s32", [7], 7), x)
    assert_same(values, np.array([7, 7, 5, 5, 1, 0, -3], np.int32))
    assert_same(indices, np.array([4, 5, 0, 2, 1, 6, 3], np.int32))


def test_topk_rows_and_builder():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 4, (4, 10)).astype(np.float32)
    b = XlaBuilder("t")
    p = ops.Parameter(b, 0, parse_shape("f32[4,10]"), "x")
    values, indices = evaluate(b.build(ops.TopK(p, 3)), x)
    order = np.argsort(-x, axis=1, kind="stable")[:, :3]
    assert_same(indices, order.astype(np.int32))
    assert_same(values, np.take_along_axis(x, order, axis=1))


def test_topk_k_zero_and_full():
    x = np.array([[2, 1], [0, 3]], np.float32)
    values, indices = run(topk_text("f32", [2, 2], 0), x)
    assert values.shape == (2, 0) and indices.shape == (2, 0) and indices.dtype == np.int32
    values, indices = run(topk_text("f32", [2, 2], 2), x)
    assert_same(values, np.array([[2, 1], [3, 0]], np.float32))
    assert_same(indices, np.array([[0, 1], [1, 0]], np.int32))


def test_topk_extreme_integers():
    x = np.array([np.iinfo(np.int64).min, 0, np.iinfo(np.int64).max, -1], np.int64)
    values, indices = run(topk_text("s64", [4], 4), x)
    assert_same(indices, np.array([2, 1, 3, 0], np.int32))
    assert_same(values, x[[2, 1, 3, 0]])
    x = np.array([2**64 - 1, 0, 2**63, 1], np.uint64)
    values, indices = run(topk_text("u64", [4], 4), x)
    assert_same(indices, np.array([0, 2, 3, 1], np.int32))
    assert_same(values, x[[0, 2, 3, 1]])


@pytest.mark.parametrize("t", [t for t in ALL_TYPES if t not in ("c64", "c128")])
def test_topk_every_type(t):
    x = sample(t, (2, 7), offset=2)
    values, indices = run(topk_text(t, [2, 7], 3), x)
    wide = x.astype(np.float64) if t != "pred" else x.astype(np.int64)
    order = np.argsort(-wide, axis=1, kind="stable")[:, :3]
    assert_same(indices, order.astype(np.int32))
    assert_bits(values, np.take_along_axis(x, order, axis=1))


@pytest.mark.parametrize("t, raw, xla", [
    # Bit patterns and XLA:CPU's lax.top_k(x, 8) indices (jax 0.10.2). fnuz: the NaN (0x80)
    # is the smallest and negative magnitudes close the -0 gap; e8m0fnu has no sign and its
    # NaN (0xff) is the largest; bf16/f8e4m3fn: -NaN smallest, -0 below +0.
    ("f8e4m3fnuz", [0x80, 0x81, 0x01, 0x00, 0x7F, 0xFF, 0x40, 0xC0], [4, 6, 2, 3, 1, 7, 5, 0]),
    ("f8e8m0fnu", [0x80, 0x81, 0x01, 0x00, 0x7F, 0xFF, 0x40, 0xC0], [5, 7, 1, 0, 4, 6, 2, 3]),
    ("f8e4m3fn", [0x80, 0x81, 0x01, 0x00, 0x7F, 0xFF, 0x40, 0xC0], [4, 6, 2, 3, 0, 1, 7, 5]),
    ("bf16", [0x8000, 0x8001, 0x1, 0x0, 0x7FC0, 0xFFC0, 0x4000, 0xC000],
     [4, 6, 2, 3, 0, 1, 7, 5]),
])
def test_topk_total_order_of_narrow_floats(t, raw, xla):
    from movement_eval_helpers import np_dtype
    dtype = np_dtype(t)
    x = np.array(raw, np.uint8 if dtype.itemsize == 1 else np.uint16).view(dtype)
    values, indices = run(topk_text(t, [8], 8), x)
    assert_same(indices, np.array(xla, np.int32))
    assert_bits(values, x[xla])

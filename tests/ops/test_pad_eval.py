"""Interpreter kernels of pad and concatenate: the operation-semantics page's examples (spec
002: Pad with negative edge and interior padding, ConcatInDim), XLA:CPU's results for the
golden fixture's configurations, and every element type."""

import numpy as np
import pytest
from movement_eval_helpers import ALL_TYPES, assert_bits, assert_same, np_dtype, run, sample

from xlapy import ops
from xlapy.hlo.attrs.padding import PaddingConfig
from xlapy.interpreter import evaluate
from xlapy.ops.builder import XlaBuilder
from xlapy.shape import parse_shape


def build(shape_texts, fn):
    b = XlaBuilder("t")
    params = [ops.Parameter(b, i, parse_shape(s), f"p{i}") for i, s in enumerate(shape_texts)]
    return b.build(fn(b, *params))


def reference_pad(x, value, config):
    """Pad by definition: interior padding first, then edges (negative ones crop)."""
    out = np.asarray(x)
    for d, (lo, hi, interior) in enumerate(config):
        n = out.shape[d]
        size = n + max(n - 1, 0) * interior
        shape = list(out.shape)
        shape[d] = size
        spread = np.full(shape, value, out.dtype)
        idx = [slice(None)] * out.ndim
        idx[d] = slice(0, size, interior + 1)
        spread[tuple(idx)] = out
        if lo < 0:
            idx[d] = slice(-lo, None)
            spread = spread[tuple(idx)]
        else:
            shape[d] = lo
            spread = np.concatenate([np.full(shape, value, out.dtype), spread], axis=d)
        if hi < 0:
            idx[d] = slice(0, spread.shape[d] + hi)
            spread = spread[tuple(idx)]
        else:
            shape = list(spread.shape)
            shape[d] = hi
            spread = np.concatenate([spread, np.full(shape, value, out.dtype)], axis=d)
        out = spread
    return out


def test_pad_edge_and_interior():
    # The page's figure: edge padding (low, high) and interior padding on a 2-D array.
    x = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
    config = PaddingConfig.of([(1, 2, 1), (0, 1, 2)])
    comp = build(["f32[2,3]", "f32[]"], lambda b, p, v: ops.Pad(p, v, config))
    want = np.array([
        [0, 0, 0, 0, 0, 0, 0, 0],
        [1, 0, 0, 2, 0, 0, 3, 0],
        [0, 0, 0, 0, 0, 0, 0, 0],
        [4, 0, 0, 5, 0, 0, 6, 0],
        [0, 0, 0, 0, 0, 0, 0, 0],
        [0, 0, 0, 0, 0, 0, 0, 0],
    ], np.float32)
    assert_same(evaluate(comp, x, np.float32(0)), want)


def test_pad_negative_edges_remove_elements():
    # "The absolute value of negative padding indicates the number of elements to remove."
    x = np.arange(1, 6, dtype=np.int32)
    comp = build(["s32[5]", "s32[]"],
                 lambda b, p, v: ops.Pad(p, v, PaddingConfig.of([(-2, -1)])))
    assert_same(evaluate(comp, x, np.int32(0)), np.array([3, 4], np.int32))


def test_pad_negative_edge_crops_the_interior_padded_operand():
    # Interior padding happens first: [1 _ 2 _ 3] with low -1 drops the 1, high -2 drops _ 3.
    x = np.array([1, 2, 3], np.float32)
    comp = build(["f32[3]", "f32[]"],
                 lambda b, p, v: ops.Pad(p, v, PaddingConfig.of([(-1, -2, 1)])))
    assert_same(evaluate(comp, x, np.float32(-9)), np.array([-9, 2], np.float32))


def test_pad_xla_cpu_fixture_configs():
    # lax.pad configurations of the golden fixture; results checked against XLA:CPU there.
    x = np.arange(12, dtype=np.float32).reshape(3, 4) + 1
    config = [(-1, 2, 1), (2, -3, 0)]
    text = """HloModule m
ENTRY e {
  x = f32[3,4] parameter(0)
  v = f32[] parameter(1)
  ROOT p = f32[6,3] pad(x, v), padding=-1_2_1x2_-3_0
}"""
    got = run(text, x, np.float32(-1))
    assert_same(got, reference_pad(x, np.float32(-1), config))
    want = np.full((6, 3), -1, np.float32)
    want[1, 2], want[3, 2] = 5, 9  # x[1, 0] and x[2, 0]; x[0] is cropped, then interior
    assert_same(got, want)


def test_pad_everything_cropped_gives_padding_only():
    text = """HloModule m
ENTRY e {
  x = f32[3] parameter(0)
  v = f32[] parameter(1)
  ROOT p = f32[2] pad(x, v), padding=5_-6
}"""
    assert_same(run(text, np.ones(3, np.float32), np.float32(7)), np.full(2, 7, np.float32))


def test_pad_no_op_and_zero_size_operand():
    comp = build(["f32[2,2]", "f32[]"],
                 lambda b, p, v: ops.Pad(p, v, PaddingConfig.of([(0, 0), (0, 0)])))
    x = np.arange(4, dtype=np.float32).reshape(2, 2)
    assert_same(evaluate(comp, x, np.float32(9)), x)
    text = """HloModule m
ENTRY e {
  x = f32[0] parameter(0)
  v = f32[] parameter(1)
  ROOT p = f32[3] pad(x, v), padding=1_2_4
}"""
    assert_same(run(text, np.zeros(0, np.float32), np.float32(5)), np.full(3, 5, np.float32))


@pytest.mark.parametrize("config", [
    [(0, 0, 0), (0, 0, 0)], [(1, 1, 1), (0, 2, 3)], [(-1, 0, 2), (3, -2, 1)],
    [(-2, -2, 4), (-1, -1, 0)], [(2, -4, 0), (0, 0, 5)],
])
def test_pad_matches_definition(config):
    x = np.arange(1, 13, dtype=np.int32).reshape(3, 4)
    want = reference_pad(x, np.int32(0), config)
    text_config = "x".join("_".join(str(v) for v in c) for c in config)
    text = f"""HloModule m
ENTRY e {{
  x = s32[3,4] parameter(0)
  v = s32[] parameter(1)
  ROOT p = s32[{want.shape[0]},{want.shape[1]}] pad(x, v), padding={text_config}
}}"""
    assert_same(run(text, x, np.int32(0)), want)


@pytest.mark.parametrize("t", ALL_TYPES)
def test_pad_every_type(t):
    text = f"""HloModule m
ENTRY e {{
  x = {t}[3] parameter(0)
  v = {t}[] parameter(1)
  ROOT p = {t}[6] pad(x, v), padding=1_0_1
}}"""
    x = sample(t, (3,), offset=1)
    v = sample(t, (1,), offset=5)[0]
    want = np.array([v, x[0], v, x[1], v, x[2]], dtype=np_dtype(t))
    assert_bits(run(text, x, v), want)


def test_pad_mixed_precision_value():
    # A bf16 padding value for an f32 operand (the element types may differ in precision):
    # the result has the higher-precision type.
    text = """HloModule m
ENTRY e {
  x = f32[2] parameter(0)
  v = bf16[] parameter(1)
  ROOT p = f32[3] pad(x, v), padding=0_1
}"""
    import ml_dtypes
    got = run(text, np.array([1.5, 2.5], np.float32), np.array(3, ml_dtypes.bfloat16))
    assert_same(got, np.array([1.5, 2.5, 3], np.float32))


# -- ConcatInDim ----------------------------------------------------------------------------


def test_concat_spec_1d():
    # Concat({{2, 3}, {4, 5}, {6, 7}}, 0) >>> {2, 3, 4, 5, 6, 7}
    comp = build(["s32[2]"] * 3, lambda b, x, y, z: ops.ConcatInDim(b, [x, y, z], 0))
    got = evaluate(comp, np.array([2, 3], np.int32), np.array([4, 5], np.int32),
                   np.array([6, 7], np.int32))
    assert_same(got, np.array([2, 3, 4, 5, 6, 7], np.int32))


def test_concat_spec_2d():
    a = np.array([[1, 2], [3, 4], [5, 6]], np.int32)
    b_ = np.array([[7, 8]], np.int32)
    comp = build(["s32[3,2]", "s32[1,2]"], lambda b, x, y: ops.ConcatInDim(b, [x, y], 0))
    assert_same(evaluate(comp, a, b_), np.array([[1, 2], [3, 4], [5, 6], [7, 8]], np.int32))


def test_concat_along_minor_dimension_with_empty_operand():
    # The golden fixture's case: widths 2, 0 and 3 along dimension 1.
    text = """HloModule m
ENTRY e {
  a = f32[2,2] parameter(0)
  b = f32[2,0] parameter(1)
  c = f32[2,3] parameter(2)
  ROOT r = f32[2,5] concatenate(a, b, c), dimensions={1}
}"""
    a = np.ones((2, 2), np.float32)
    c = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert_same(run(text, a, np.zeros((2, 0), np.float32), c), np.concatenate([a, c], axis=1))


@pytest.mark.parametrize("t", ALL_TYPES)
def test_concatenate_every_type(t):
    text = f"""HloModule m
ENTRY e {{
  a = {t}[2] parameter(0)
  b = {t}[3] parameter(1)
  ROOT r = {t}[5] concatenate(a, b), dimensions={{0}}
}}"""
    a, b = sample(t, (2,)), sample(t, (3,), offset=2)
    assert_bits(run(text, a, b), np.concatenate([a, b]))

"""Interpreter kernels of broadcast, reshape, dynamic-reshape, transpose, reverse, iota, tuple,
get-tuple-element, bitcast, get-dimension-size and set-dimension-size: the operation-semantics
page's examples (spec 002: Broadcast, BroadcastInDim, Collapse, Reshape, Rev, Transpose, Iota,
Tuple, GetTupleElement, GetDimensionSize/SetDimensionSize), XLA's observed behaviour
(iota wrapping and rounding), and every element type."""

import numpy as np
import pytest
from movement_eval_helpers import ALL_TYPES, assert_bits, assert_same, np_dtype, run, sample

from xlapy import ops
from xlapy.interpreter import EvaluationError, evaluate
from xlapy.ops.builder import XlaBuilder
from xlapy.shape import parse_shape

# The 4x2x3 array of the Collapse and Reshape examples.
V = np.array([[[10, 11, 12], [15, 16, 17]],
              [[20, 21, 22], [25, 26, 27]],
              [[30, 31, 32], [35, 36, 37]],
              [[40, 41, 42], [45, 46, 47]]], np.float32)


def build(shape_texts, fn):
    b = XlaBuilder("t")
    params = [ops.Parameter(b, i, parse_shape(s), f"p{i}") for i, s in enumerate(shape_texts)]
    root = fn(b, *params)
    return b.build(root)


# -- Broadcast / BroadcastInDim -------------------------------------------------------------


def test_broadcast_spec_scalar():
    # Broadcast(2.0f, {2, 3}) is an f32[2,3] of 2.0f.
    comp = build(["f32[]"], lambda b, x: ops.Broadcast(x, [2, 3]))
    assert_same(evaluate(comp, np.float32(2.0)), np.full((2, 3), 2.0, np.float32))


def test_broadcast_spec_new_major_dimensions():
    # output[i0, i1, j0] = operand[j0]: the new dimensions are added on the left.
    comp = build(["s32[3]"], lambda b, x: ops.Broadcast(x, [2, 4]))
    x = np.array([7, 8, 9], np.int32)
    assert_same(evaluate(comp, x), np.broadcast_to(x, (2, 4, 3)))


def test_broadcast_in_dim_degenerate_dimension():
    # BroadcastInDim f32[3,1] -> f32[2,3,4] with dimensions (1,2): the size-1 dimension
    # stretches (the builder emits broadcast, reshape, broadcast).
    comp = build(["f32[3,1]"], lambda b, x: ops.BroadcastInDim(x, [2, 3, 4], [1, 2]))
    x = np.array([[1], [2], [3]], np.float32)
    want = np.broadcast_to(x.reshape(1, 3, 1), (2, 3, 4))
    assert_same(evaluate(comp, x), want)


def test_broadcast_in_dim_vector_to_matrix():
    comp = build(["f32[3]"], lambda b, x: ops.BroadcastInDim(x, [2, 3], [1]))
    x = np.array([1, 2, 3], np.float32)
    assert_same(evaluate(comp, x), np.array([[1, 2, 3], [1, 2, 3]], np.float32))


def test_broadcast_hlo_unsorted_dimensions_transposes():
    # HLO broadcast maps operand dimension i to result dimension dimensions[i], in any order.
    text = """HloModule m
ENTRY e {
  x = f32[4,3] parameter(0)
  ROOT b = f32[2,3,4] broadcast(x), dimensions={2,1}
}"""
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    assert_same(run(text, x), np.broadcast_to(x.T, (2, 3, 4)))


@pytest.mark.parametrize("t", ALL_TYPES)
def test_broadcast_every_type(t):
    text = f"""HloModule m
ENTRY e {{
  x = {t}[3] parameter(0)
  ROOT b = {t}[3,2] broadcast(x), dimensions={{0}}
}}"""
    x = sample(t, (3,))
    assert_bits(run(text, x), np.repeat(x[:, None], 2, axis=1))


# -- Collapse / Reshape ---------------------------------------------------------------------


@pytest.mark.parametrize("dims, want", [
    ([0, 1, 2], V.reshape(24)),
    ([0, 1], V.reshape(8, 3)),
    ([1, 2], V.reshape(4, 6)),
])
def test_collapse_spec(dims, want):
    # The page's v012 (f32[24]), v01 and v12. (The page's captions of v01 and v12 are
    # swapped: collapsing {0,1} of 4x2x3 gives 8x3, collapsing {1,2} gives 4x6.)
    comp = build(["f32[4,2,3]"], lambda b, x: ops.Collapse(x, dims))
    assert_same(evaluate(comp, V), want)


def test_collapse_spec_literal_values():
    comp = build(["f32[4,2,3]"], lambda b, x: ops.Collapse(x, [1, 2]))
    want = np.array([[10, 11, 12, 15, 16, 17], [20, 21, 22, 25, 26, 27],
                     [30, 31, 32, 35, 36, 37], [40, 41, 42, 45, 46, 47]], np.float32)
    assert_same(evaluate(comp, V), want)


def test_reshape_spec_in_order():
    comp = build(["f32[4,2,3]"], lambda b, x: ops.Reshape(x, [0, 1, 2], [24]))
    assert_same(evaluate(comp, V), np.array(
        [10, 11, 12, 15, 16, 17, 20, 21, 22, 25, 26, 27,
         30, 31, 32, 35, 36, 37, 40, 41, 42, 45, 46, 47], np.float32))
    comp = build(["f32[4,2,3]"], lambda b, x: ops.Reshape(x, [0, 1, 2], [8, 3]))
    assert_same(evaluate(comp, V), np.array(
        [[10, 11, 12], [15, 16, 17], [20, 21, 22], [25, 26, 27],
         [30, 31, 32], [35, 36, 37], [40, 41, 42], [45, 46, 47]], np.float32))


def test_reshape_spec_out_of_order():
    # Reshape(v, {1,2,0}, ...): the operand read with dimension 0 fastest.
    comp = build(["f32[4,2,3]"], lambda b, x: ops.Reshape(x, [1, 2, 0], [24]))
    assert_same(evaluate(comp, V), np.array(
        [10, 20, 30, 40, 11, 21, 31, 41, 12, 22, 32, 42,
         15, 25, 35, 45, 16, 26, 36, 46, 17, 27, 37, 47], np.float32))
    comp = build(["f32[4,2,3]"], lambda b, x: ops.Reshape(x, [1, 2, 0], [8, 3]))
    assert_same(evaluate(comp, V), np.array(
        [[10, 20, 30], [40, 11, 21], [31, 41, 12], [22, 32, 42],
         [15, 25, 35], [45, 16, 26], [36, 46, 17], [27, 37, 47]], np.float32))
    comp = build(["f32[4,2,3]"], lambda b, x: ops.Reshape(x, [1, 2, 0], [2, 6, 2]))
    assert_same(evaluate(comp, V), np.array(
        [[[10, 20], [30, 40], [11, 21], [31, 41], [12, 22], [32, 42]],
         [[15, 25], [35, 45], [16, 26], [36, 46], [17, 27], [37, 47]]], np.float32))


def test_reshape_spec_scalar_forms():
    # Reshape(f32[1x1] {{5}}, {0,1}, {}) == 5 and Reshape(5, {}, {1,1}) == f32[1x1] {{5}}.
    comp = build(["f32[1,1]"], lambda b, x: ops.Reshape(x, [0, 1], []))
    assert_same(evaluate(comp, np.array([[5]], np.float32)), np.array(5, np.float32))
    comp = build(["f32[]"], lambda b, x: ops.Reshape(x, [], [1, 1]))
    assert_same(evaluate(comp, np.float32(5)), np.array([[5]], np.float32))


@pytest.mark.parametrize("t", ALL_TYPES)
def test_reshape_every_type(t):
    text = f"""HloModule m
ENTRY e {{
  x = {t}[2,3] parameter(0)
  ROOT r = {t}[3,2] reshape(x)
}}"""
    x = sample(t, (2, 3))
    assert_bits(run(text, x), x.reshape(3, 2))


def test_reshape_zero_elements():
    text = """HloModule m
ENTRY e {
  x = f32[0,3] parameter(0)
  ROOT r = f32[3,0,2] reshape(x)
}"""
    assert_same(run(text, np.zeros((0, 3), np.float32)), np.zeros((3, 0, 2), np.float32))


def test_dynamic_reshape():
    text = """HloModule m
ENTRY e {
  x = f32[<=12] parameter(0)
  n = s32[] parameter(1)
  three = s32[] parameter(2)
  ROOT r = f32[<=4,3] dynamic-reshape(x, n, three)
}"""
    x = np.arange(6, dtype=np.float32)
    assert_same(run(text, x, np.int32(2), np.int32(3)), x.reshape(2, 3))
    with pytest.raises(EvaluationError, match=r"dynamic-reshape: the operand has 6 elements"):
        run(text, x, np.int32(3), np.int32(3))
    with pytest.raises(EvaluationError, match=r"size 5 of result dimension 0 is outside \[0, 4\]"):
        run(text, np.arange(15, dtype=np.float32)[:12], np.int32(5), np.int32(3))


def test_reshape_of_dynamic_dimension():
    # f32[<=4,3] with runtime size 2 reshaped to f32[<=12]: the 6 valid elements.
    text = """HloModule m
ENTRY e {
  x = f32[4,3] parameter(0)
  n = s32[] parameter(1)
  d = f32[<=4,3] set-dimension-size(x, n), dimensions={0}
  ROOT r = f32[<=12] reshape(d)
}"""
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    assert_same(run(text, x, np.int32(2)), np.arange(6, dtype=np.float32))


# -- Transpose / Rev ------------------------------------------------------------------------


def test_transpose_spec_identity_with_reshape():
    # Transpose(x, p) is Reshape(x, p, Permute(p, x.dimensions)).
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    perm = [2, 0, 1]
    t = evaluate(build(["f32[2,3,4]"], lambda b, p: ops.Transpose(p, perm)), x)
    r = evaluate(build(["f32[2,3,4]"], lambda b, p: ops.Reshape(p, perm, [4, 2, 3])), x)
    assert_same(t, r)
    assert_same(t, np.transpose(x, perm))
    # input_dimensions[permutation[i]] = output_dimensions[i]
    assert t.shape == tuple(x.shape[p] for p in perm)


@pytest.mark.parametrize("t", ALL_TYPES)
def test_transpose_every_type(t):
    text = f"""HloModule m
ENTRY e {{
  x = {t}[2,3] parameter(0)
  ROOT r = {t}[3,2] transpose(x), dimensions={{1,0}}
}}"""
    x = sample(t, (2, 3))
    assert_bits(run(text, x), x.T.copy())


def test_rev_spec():
    # Index i of a reversed dimension of size N goes to N - 1 - i.
    x = np.arange(24, dtype=np.int32).reshape(3, 2, 4)
    comp = build(["s32[3,2,4]"], lambda b, p: ops.Rev(p, [0, 2]))
    got = evaluate(comp, x)
    for i in range(3):
        for j in range(2):
            for k in range(4):
                assert got[2 - i, j, 3 - k] == x[i, j, k]
    comp = build(["s32[3,2,4]"], lambda b, p: ops.Rev(p, []))
    assert_same(evaluate(comp, x), x)


@pytest.mark.parametrize("t", ALL_TYPES)
def test_reverse_every_type(t):
    text = f"""HloModule m
ENTRY e {{
  x = {t}[5] parameter(0)
  ROOT r = {t}[5] reverse(x), dimensions={{0}}
}}"""
    x = sample(t, (5,))
    assert_bits(run(text, x), x[::-1].copy())


# -- Iota -----------------------------------------------------------------------------------


def test_iota_spec():
    b = XlaBuilder("t")
    comp = b.build(ops.Iota(b, parse_shape("s32[4,8]"), 0))
    assert_same(evaluate(comp), np.repeat(np.arange(4, dtype=np.int32)[:, None], 8, axis=1))
    b = XlaBuilder("t")
    comp = b.build(ops.Iota(b, parse_shape("s32[4,8]"), 1))
    assert_same(evaluate(comp), np.repeat(np.arange(8, dtype=np.int32)[None, :], 4, axis=0))


def iota_text(t, n):
    return f"""HloModule m
ENTRY e {{
  ROOT i = {t}[{n}] iota(), iota_dimension=0
}}"""


def test_iota_wraps_small_integers():
    # Observed on XLA:CPU (jax 0.10.2): u8 iota wraps 255, 0, 1, ...; s8 wraps to -128.
    got = run(iota_text("u8", 300))
    assert list(got[254:259]) == [254, 255, 0, 1, 2]
    got = run(iota_text("s8", 130))
    assert list(got[126:130]) == [126, 127, -128, -127]
    got = run(iota_text("s4", 10))
    assert list(got.astype(int)) == [0, 1, 2, 3, 4, 5, 6, 7, -8, -7]


def test_iota_bf16_rounds_to_nearest_even():
    # Observed on XLA:CPU: bf16 iota 257 -> 256, 259 -> 260.
    got = run(iota_text("bf16", 262))
    assert list(got[255:262].astype(np.float32)) == [255, 256, 256, 258, 260, 260, 260]


def test_iota_narrow_floats_match_xla():
    # XLA:CPU (jax 0.10.2) iota values: f8e4m3fn 0..600 overflows to NaN past 464; f4e2m1fn
    # saturates at 6; f8e8m0fnu has no zero (NaN) and rounds to powers of two.
    got = run(iota_text("f8e4m3fn", 600)).astype(np.float32)
    assert got[448] == 448 and got[464] == 448 and np.isnan(got[480]) and np.isnan(got[599])
    got = run(iota_text("f4e2m1fn", 10)).astype(np.float32)
    assert list(got) == [0, 1, 2, 3, 4, 4, 6, 6, 6, 6]
    got = run(iota_text("f8e8m0fnu", 6)).astype(np.float32)
    assert np.isnan(got[0]) and list(got[1:]) == [1, 2, 4, 4, 4]


def test_iota_complex_and_2d():
    text = """HloModule m
ENTRY e {
  ROOT i = c64[2,3] iota(), iota_dimension=1
}"""
    assert_same(run(text), np.array([[0, 1, 2], [0, 1, 2]], np.complex64))


@pytest.mark.parametrize("t", [t for t in ALL_TYPES if t != "pred"])
def test_iota_every_type(t):
    got = run(iota_text(t, 5))
    dtype = np_dtype(t)
    assert got.dtype == dtype and got.shape == (5,)
    # Integers wrap modulo their width, floats are the converted counts.
    if t in ("s1", "u1"):
        assert list(got.astype(int)) == ([0, -1, 0, -1, 0] if t == "s1" else [0, 1, 0, 1, 0])
    elif t in ("s2",):
        assert list(got.astype(int)) == [0, 1, -2, -1, 0]
    elif t in ("u2",):
        assert list(got.astype(int)) == [0, 1, 2, 3, 0]
    elif t == "f8e8m0fnu":
        assert np.isnan(got[0].astype(np.float32))
    else:
        real = got.real if t.startswith("c") else got
        assert list(real.astype(np.float64)) == [0, 1, 2, 3, 4]


# -- Tuple / GetTupleElement ----------------------------------------------------------------


def test_tuple_and_get_tuple_element_spec():
    # let t: (f32[10], s32) = tuple(v, s); gettupleelement(t, 1) is s.
    def fn(b, v, s):
        t = ops.Tuple(b, [v, s])
        return ops.Tuple(b, [ops.GetTupleElement(t, 1), ops.GetTupleElement(t, 0), t])

    comp = build(["f32[10]", "s32[]"], fn)
    v = np.arange(10, dtype=np.float32)
    s1, v1, (v2, s2) = evaluate(comp, v, np.int32(5))
    assert_same(s1, np.array(5, np.int32))
    assert_same(v1, v)
    assert_same(v2, v)
    assert_same(s2, np.array(5, np.int32))


def test_nested_tuple_and_empty_tuple():
    text = """HloModule m
ENTRY e {
  x = f32[2] parameter(0)
  empty = () tuple()
  inner = ((), f32[2]) tuple(empty, x)
  ROOT g = f32[2] get-tuple-element(inner), index=1
}"""
    x = np.array([1, 2], np.float32)
    assert_same(run(text, x), x)


# -- Bitcast --------------------------------------------------------------------------------


def test_bitcast_layout_change_is_physical():
    # f32[4,3]{1,0} bytes read as s32[4,3]{0,1}: element (i, j) of the result sits at
    # linear position j*4 + i, so it holds the bits of the operand's (j*4+i)-th element.
    text = """HloModule m
ENTRY e {
  x = f32[4,3]{1,0} parameter(0)
  ROOT b = s32[4,3]{0,1} bitcast(x)
}"""
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    flat = x.reshape(-1).view(np.int32)
    want = np.array([[flat[j * 4 + i] for j in range(3)] for i in range(4)], np.int32)
    assert_same(run(text, x), want)


def test_bitcast_transpose_is_a_layout_change():
    # f32[2,3]{1,0} -> f32[3,2]{0,1}: the same bytes, the transposed logical array.
    text = """HloModule m
ENTRY e {
  x = f32[2,3]{1,0} parameter(0)
  ROOT b = f32[3,2]{0,1} bitcast(x)
}"""
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert_same(run(text, x), x.T.copy())


def test_bitcast_scalar_element_type():
    # Post-optimisation comparators bitcast f32[] to s32[] (XLA's float total-order trick).
    text = """HloModule m
ENTRY e {
  x = f32[] parameter(0)
  ROOT b = s32[] bitcast(x)
}"""
    assert_same(run(text, np.float32(-0.0)), np.array(-2**31, np.int32))
    assert_same(run(text, np.float32(1.0)), np.array(0x3F800000, np.int32))


def test_bitcast_reshape_with_tiled_layout():
    # A {1,0:T(2,2)} tiled layout: the bytes are tile by tile.
    text = """HloModule m
ENTRY e {
  x = s32[2,4]{1,0:T(2,2)} parameter(0)
  ROOT b = s32[8]{0} bitcast(x)
}"""
    x = np.arange(8, dtype=np.int32).reshape(2, 4)
    assert_same(run(text, x), np.array([0, 1, 4, 5, 2, 3, 6, 7], np.int32))


@pytest.mark.parametrize("t", ["s4", "u4", "f4e2m1fn", "s2"])
def test_bitcast_sub_byte(t):
    text = f"""HloModule m
ENTRY e {{
  x = {t}[2,3]{{1,0}} parameter(0)
  ROOT b = {t}[3,2]{{0,1}} bitcast(x)
}}"""
    x = sample(t, (2, 3))
    assert_same(run(text, x), x.T.copy())


# -- GetDimensionSize / SetDimensionSize ----------------------------------------------------


def test_get_dimension_size_static_and_dynamic():
    text = """HloModule m
ENTRY e {
  x = f32[10,3] parameter(0)
  n = s32[] parameter(1)
  d = f32[<=10,3] set-dimension-size(x, n), dimensions={0}
  a = s32[] get-dimension-size(d), dimensions={0}
  b = s32[] get-dimension-size(d), dimensions={1}
  c = s32[] get-dimension-size(x), dimensions={0}
  ROOT t = (s32[], s32[], s32[], f32[<=10,3]) tuple(a, b, c, d)
}"""
    x = np.arange(30, dtype=np.float32).reshape(10, 3)
    a, b, c, d = run(text, x, np.int32(5))
    assert_same(a, np.array(5, np.int32))
    assert_same(b, np.array(3, np.int32))
    assert_same(c, np.array(10, np.int32))
    assert_same(d, x[:5])


def test_set_dimension_size_errors():
    text = """HloModule m
ENTRY e {
  x = f32[10] parameter(0)
  n = s32[] parameter(1)
  ROOT d = f32[<=10] set-dimension-size(x, n), dimensions={0}
}"""
    x = np.arange(10, dtype=np.float32)
    with pytest.raises(EvaluationError, match=r"set-dimension-size: size 11 for dimension 0 is "
                                              r"outside \[0, 10\]"):
        run(text, x, np.int32(11))
    with pytest.raises(EvaluationError, match=r"size -1 for dimension 0 is outside"):
        run(text, x, np.int32(-1))
    assert_same(run(text, x, np.int32(10)), x)
    assert_same(run(text, x, np.int32(0)), x[:0])


def test_set_dimension_size_larger_than_runtime_is_an_error():
    text = """HloModule m
ENTRY e {
  x = f32[10] parameter(0)
  n = s32[] parameter(1)
  m = s32[] parameter(2)
  d = f32[<=10] set-dimension-size(x, n), dimensions={0}
  ROOT e = f32[<=10] set-dimension-size(d, m), dimensions={0}
}"""
    x = np.arange(10, dtype=np.float32)
    assert_same(run(text, x, np.int32(6), np.int32(4)), x[:4])
    with pytest.raises(EvaluationError, match=r"exceeds the operand's runtime size 6"):
        run(text, x, np.int32(6), np.int32(8))


def test_set_dimension_size_spec_padding_ignored_by_reduce():
    # The page's example: v = {1..10}; set_dimension_size(v, 5) keeps the bound f32[10], and
    # reduce_sum / reduce_product see 1..5 only; with 6 the sum is 1 + ... + 6.
    text = """HloModule m

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}

mul {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] multiply(a, b)
}

ENTRY e {
  v = f32[10] parameter(0)
  five = s32[] parameter(1)
  six = s32[] parameter(2)
  zero = f32[] parameter(3)
  one = f32[] parameter(4)
  padded_v_five = f32[<=10] set-dimension-size(v, five), dimensions={0}
  padded_v_six = f32[<=10] set-dimension-size(v, six), dimensions={0}
  sum5 = f32[] reduce(padded_v_five, zero), dimensions={0}, to_apply=add
  product5 = f32[] reduce(padded_v_five, one), dimensions={0}, to_apply=mul
  sum6 = f32[] reduce(padded_v_six, zero), dimensions={0}, to_apply=add
  n = s32[] get-dimension-size(padded_v_six), dimensions={0}
  ROOT t = (f32[], f32[], f32[], s32[]) tuple(sum5, product5, sum6, n)
}"""
    v = np.arange(1, 11, dtype=np.float32)
    s5, p5, s6, n = run(text, v, np.int32(5), np.int32(6), np.float32(0), np.float32(1))
    assert_same(s5, np.array(15, np.float32))
    assert_same(p5, np.array(120, np.float32))
    assert_same(s6, np.array(21, np.float32))
    assert_same(n, np.array(6, np.int32))


def test_set_dimension_size_builder():
    def fn(b, v, n):
        return ops.GetDimensionSize(ops.SetDimensionSize(v, n, 0), 0)

    comp = build(["f32[10]", "s32[]"], fn)
    assert_same(evaluate(comp, np.zeros(10, np.float32), np.int32(7)), np.array(7, np.int32))


def test_dynamic_dimensions_flow_through_shape_ops():
    # Broadcast, transpose, concatenate, reverse and pad of a dynamic operand use its runtime
    # size, not the bound.
    text = """HloModule m
ENTRY e {
  x = f32[6] parameter(0)
  n = s32[] parameter(1)
  v = f32[] parameter(2)
  d = f32[<=6] set-dimension-size(x, n), dimensions={0}
  b = f32[2,<=6] broadcast(d), dimensions={1}
  t = f32[<=6,2] transpose(b), dimensions={1,0}
  c = f32[<=12] concatenate(d, d), dimensions={0}
  r = f32[<=6] reverse(d), dimensions={0}
  p = f32[<=13] pad(d, v), padding=1_1_1
  ROOT o = (f32[<=6,2], f32[<=12], f32[<=6], f32[<=13]) tuple(t, c, r, p)
}"""
    x = np.arange(6, dtype=np.float32)
    t, c, r, p = run(text, x, np.int32(3), np.float32(-1))
    assert_same(t, np.repeat(x[:3, None], 2, axis=1))
    assert_same(c, np.concatenate([x[:3], x[:3]]))
    assert_same(r, x[2::-1].copy())
    assert_same(p, np.array([-1, 0, -1, 1, -1, 2, -1], np.float32))

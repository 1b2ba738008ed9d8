"""Index arithmetic: every worked example of the Shapes-and-layout and Tiled-layout pages."""

from math import prod

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xlapy.errors import InvalidArgumentError
from xlapy.shape import (
    Layout,
    PaddingValue,
    PrimitiveType as P,
    Shape,
    Tile,
    byte_size,
    linear_index,
    linear_indices,
    multi_index,
    parse_shape,
    physical_plan,
    physical_size,
)
from xlapy.shape.layout import COMBINE_DIMENSION


def memory_order(shape, names):
    """The element names in buffer order, padding shown as '0'."""
    out = ["0"] * physical_size(shape)
    for idx in np.ndindex(*shape.dimensions):
        out[linear_index(shape, idx)] = names[idx]
    return " ".join(out)


ABC = np.array([["a", "b", "c"], ["d", "e", "f"]])


def test_page_2x3_minor_to_major_0_1():
    # "a b c / d e f" with minor_to_major [0, 1] is laid out "a d b e c f".
    assert memory_order(parse_shape("f32[2,3]{0,1}"), ABC) == "a d b e c f"


def test_page_2x3_minor_to_major_1_0():
    assert memory_order(parse_shape("f32[2,3]{1,0}"), ABC) == "a b c d e f"


def test_page_padded_dimensions():
    # Older page: [2 x 3] with padded_dimensions [3, 5], column major, zero padding.
    shape = Shape.array(P.F32, (2, 3), layout=Layout((0, 1), padded_dimensions=(3, 5),
                                                        padding_value=PaddingValue.ZERO_PAD))
    assert memory_order(shape, ABC) == "a d 0 b e 0 c f 0 0 0 0 0 0 0"
    assert physical_size(shape) == 15
    # ... equivalent to this 3x5 array with the same minor-to-major order:
    #   a b c 0 0 / d e f 0 0 / 0 0 0 0 0
    assert multi_index(shape, 3) == (0, 1)
    with pytest.raises(InvalidArgumentError, match="linear index 2 of f32\\[2,3\\]\\{0,1\\} is a padding"):
        multi_index(shape, 2)


def test_figure1_f32_3x5_tiled_2x2():
    shape = parse_shape("f32[3,5]{1,0:T(2,2)}")  # the page writes F32[3,5]{1,0:T(2,2)}
    # Element (2,3): tile index (1,1), index in tile (0,1) -> linear_index((1,1,0,1),(2,3,2,2)).
    assert linear_index(shape, (2, 3)) == (1 * 3 + 1) * 4 + (0 * 2 + 1) == 17
    assert multi_index(shape, 17) == (2, 3)
    assert physical_size(shape) == 24 and byte_size(shape) == 96
    expected = np.array([[0, 1, 4, 5, 8], [2, 3, 6, 7, 10], [12, 13, 16, 17, 20]])
    np.testing.assert_array_equal(linear_indices(shape), expected)


def test_figure2_4x8_tiled_2x4_then_2x1():
    shape = parse_shape("f32[4,8]{1,0:T(2,4)(2,1)}")
    expected = np.array([
        [0, 2, 4, 6, 8, 10, 12, 14],
        [1, 3, 5, 7, 9, 11, 13, 15],
        [16, 18, 20, 22, 24, 26, 28, 30],
        [17, 19, 21, 23, 25, 27, 29, 31],
    ])
    np.testing.assert_array_equal(linear_indices(shape), expected)
    assert physical_size(shape) == 32


def test_combined_dimensions_example():
    # F32[2,7,8,11,10]{4,3,2,1,0} combined to F32[112,110]{1,0}, then tiled (2,3).
    combined = parse_shape("f32[2,7,8,11,10]{4,3,2,1,0:T(*,*,2,*,3)}")
    flat = parse_shape("f32[112,110]{1,0:T(2,3)}")
    assert physical_size(combined) == physical_size(flat) == 56 * 37 * 6
    rng = np.random.default_rng(0)
    for _ in range(200):
        idx = tuple(int(rng.integers(0, d)) for d in combined.dimensions)
        row = (idx[0] * 7 + idx[1]) * 8 + idx[2]
        col = idx[3] * 10 + idx[4]
        assert linear_index(combined, idx) == linear_index(flat, (row, col))
    np.testing.assert_array_equal(
        linear_indices(combined).reshape(112, 110), linear_indices(flat))


def test_tpu_bf16_tiling_takes_16x():
    # f32[1,129] with T(8,128): 8x256 elements for 129 values.
    shape = parse_shape("f32[1,129]{1,0:T(8,128)}")
    assert physical_size(shape) == 2048 and byte_size(shape) == 8192
    assert linear_index(shape, (0, 128)) == 1024


def test_tile_with_more_dims_than_shape_pads_leading_ones():
    shape = parse_shape("f32[300]{0:T(8,128)}")
    assert physical_size(shape) == 3 * 1024
    assert linear_index(shape, (130,)) == 1024 + 2
    assert physical_size(parse_shape("f32[]{:T(2,2)}")) == 4


def test_tiles_follow_minor_to_major():
    # Tiles apply to physical dimensions (major to minor), not logical ones.
    shape = parse_shape("f32[5,3]{0,1:T(2,2)}")
    t = parse_shape("f32[3,5]{1,0:T(2,2)}")
    for i in range(5):
        for j in range(3):
            assert linear_index(shape, (i, j)) == linear_index(t, (j, i))


def test_tail_padding_and_element_size():
    shape = parse_shape("s4[5]{0:L(4)E(4)}")
    assert physical_size(shape) == 8 and byte_size(shape) == 4
    assert byte_size(parse_shape("s4[5]{0:E(4)}")) == 3  # ceil(20 bits / 8)
    assert byte_size(parse_shape("s4[5]")) == 5  # unpacked: one byte each
    assert byte_size(parse_shape("pred[7]")) == 7
    assert byte_size(parse_shape("c128[2]")) == 32
    assert byte_size(parse_shape("f32[0,7]{1,0:T(8,128)}")) == 0
    assert byte_size(parse_shape("(f32[], s32[], token[])")) == 24
    assert byte_size(parse_shape("token[]")) == 0
    assert byte_size(parse_shape("f32[<=10]")) == 40  # a bounded dimension counts its bound


def test_repeated_tiles_padding_of_later_levels():
    # The second tile (3,1) does not divide the first (2,4): each 2x4 tile is padded to
    # 3x4, so the buffer holds 2*2*3*4 elements. XLA's ArraySize looks only at the first
    # tile and would say 32; xlapy counts the real buffer (see docs/architecture.md).
    shape = parse_shape("f32[4,8]{1,0:T(2,4)(3,1)}")
    assert physical_size(shape) == 48
    assert sorted(linear_indices(shape).ravel().tolist()) == sorted(
        set(linear_indices(shape).ravel().tolist()))


def test_index_errors():
    shape = parse_shape("f32[3,5]{1,0:T(2,2)}")
    with pytest.raises(InvalidArgumentError,
                       match=r"linear_index: index \(3, 0\) is out of bounds for f32\[3,5\]\{1,0:T\(2,2\)\}: "
                             r"dimension 0 must be in \[0, 3\), got 3"):
        linear_index(shape, (3, 0))
    with pytest.raises(InvalidArgumentError, match=r"index \(1,\) has 1 entries but .* has rank 2"):
        linear_index(shape, (1,))
    with pytest.raises(InvalidArgumentError, match=r"linear index 24 is out of range .* holds 24 elements"):
        multi_index(shape, 24)
    with pytest.raises(InvalidArgumentError, match=r"linear index 9 of .* is a padding position"):
        multi_index(shape, 9)
    with pytest.raises(InvalidArgumentError, match="unbounded dynamic dimension"):
        physical_size(parse_shape("f32[?]"))
    with pytest.raises(InvalidArgumentError, match=r"expected an array shape, got \(\)"):
        physical_size(parse_shape("()"))
    with pytest.raises(InvalidArgumentError, match="expected a sequence of integers"):
        linear_index(shape, 3)


# -- properties -------------------------------------------------------------------------


@st.composite
def tiled_shapes(draw):
    rank = draw(st.integers(0, 4))
    dims = [draw(st.integers(1, 7)) for _ in range(rank)]
    m2m = draw(st.permutations(list(range(rank))))
    tiles = []
    for _ in range(draw(st.integers(0, 3))):
        n = draw(st.integers(1, rank + 1))
        tile = [draw(st.integers(1, 5)) for _ in range(n)]
        if 1 < n <= rank and draw(st.booleans()):
            tile[draw(st.integers(0, n - 2))] = COMBINE_DIMENSION
        tiles.append(Tile(tuple(tile)))
    align = draw(st.sampled_from([1, 1, 3, 8]))
    return Shape.array(P.F32, dims, layout=Layout(tuple(m2m), tiles=tuple(tiles),
                                                 tail_padding_alignment_in_elements=align))


@settings(max_examples=300, deadline=None)
@given(tiled_shapes())
def test_linear_and_multi_index_are_inverse_bijections(shape):
    n = physical_size(shape)
    lin = linear_indices(shape).ravel()
    assert len(set(lin.tolist())) == lin.size == prod(shape.dimensions)  # injective
    assert lin.size == 0 or (lin.min() >= 0 and lin.max() < n)
    element_positions = set(lin.tolist())
    for idx in np.ndindex(*shape.dimensions):
        pos = linear_index(shape, idx)
        assert multi_index(shape, pos) == tuple(idx)
    for pos in range(n):  # every other position is padding
        if pos not in element_positions:
            with pytest.raises(InvalidArgumentError, match="padding position"):
                multi_index(shape, pos)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 6), min_size=1, max_size=4).flatmap(
    lambda dims: st.tuples(st.just(dims), st.permutations(list(range(len(dims)))))))
def test_untiled_layout_is_a_permuted_row_major_order(args):
    dims, m2m = args
    shape = Shape.array(P.F32, dims, layout=Layout(tuple(m2m)))
    order = list(reversed(m2m))
    expected = np.arange(prod(dims)).reshape([dims[d] for d in order])
    np.testing.assert_array_equal(linear_indices(shape), np.transpose(expected, np.argsort(order)))


def test_unravel_marks_tail_padding_as_padding():
    plan = physical_plan(parse_shape("f32[3,5]{1,0:T(2,2)L(7)}"))
    _, valid = plan.unravel(np.arange(plan.elements))
    assert plan.elements == 28 and valid.sum() == 15 and not valid[24:].any()
    assert not bool(physical_plan(parse_shape("f32[2,3]{1,0:L(4)}")).unravel(6)[1])

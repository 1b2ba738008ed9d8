"""The Broadcasting page (spec 003): every example, through the builder's binary ops, with
the HLO XLA's builder emits (an in-dim ``broadcast`` for the lower-rank operand, then
``reshape`` + ``broadcast`` for degenerate size-1 dimensions, then the elementwise op)."""

import pytest

from xlapy import ops
from xlapy.opdefs import ShapeError
from xlapy.ops.builder import XlaBuilder
from xlapy.shape import parse_shape


def add(lhs: str, rhs: str, broadcast_dimensions=()):
    """Build Add(lhs, rhs, broadcast_dimensions); return (result shape text, emitted HLO)."""
    b = XlaBuilder("bcast")
    x = ops.Parameter(b, 0, parse_shape(lhs), "x")
    y = ops.Parameter(b, 1, parse_shape(rhs), "y")
    comp = b.build(ops.Add(x, y, broadcast_dimensions))
    hlo = []
    for i in comp.computation.instructions:
        if i.opcode == "parameter":
            continue
        ins = ",".join(o.name for o in i.operands)
        extra = f" dims={list(i.attrs['dimensions'])}" if i.opcode == "broadcast" else ""
        hlo.append(f"{i.opcode}({ins}) {i.shape}{extra}")
    return str(comp.program_shape().result), hlo


def test_matrix_plus_vector_along_dimension_1():
    # |1 2 3| + |7 8 9|: the (3) vector copied across the rows of the (2,3) matrix.
    # |4 5 6|
    shape, hlo = add("s32[2,3]", "s32[3]", (1,))
    assert shape == "s32[2,3]{1,0}"
    assert hlo == ["broadcast(y) s32[2,3]{1,0} dims=[1]",
                   "add(x,broadcast) s32[2,3]{1,0}"]


def test_scalar_needs_no_broadcast_dimensions():
    # |1 2 3| + 7: the scalar goes to every element.
    shape, hlo = add("s32[2,3]", "s32[]")
    assert shape == "s32[2,3]{1,0}"
    assert hlo == ["broadcast(y) s32[2,3]{1,0} dims=[]", "add(x,broadcast) s32[2,3]{1,0}"]
    shape, hlo = add("s32[]", "s32[2,3]")
    assert hlo[0] == "broadcast(x) s32[2,3]{1,0} dims=[]"
    assert hlo[1] == "add(broadcast,y) s32[2,3]{1,0}"


@pytest.mark.parametrize("dims", [(0,), (1,)])
def test_3x3_plus_vector_either_way(dims):
    # (1): each vector element is a column, repeated for every row; (0): each is a row.
    shape, hlo = add("f32[3,3]", "f32[3]", dims)
    assert shape == "f32[3,3]{1,0}"
    assert hlo[0] == f"broadcast(y) f32[3,3]{{1,0}} dims={list(dims)}"


def test_cube_plus_matrix_with_dimensions_1_2():
    # A 2x3x4 cube and a 3x4 matrix with broadcast dimensions (1,2).
    shape, hlo = add("f32[2,3,4]", "f32[3,4]", (1, 2))
    assert shape == "f32[2,3,4]{2,1,0}"
    assert hlo == ["broadcast(y) f32[2,3,4]{2,1,0} dims=[1, 2]",
                   "add(x,broadcast) f32[2,3,4]{2,1,0}"]


@pytest.mark.parametrize("dim, size", [(0, 2), (1, 3), (2, 4), (3, 5)])
def test_vector_matched_to_any_dimension_of_mxnxpxq(dim, size):
    # The formal definition: a T vector matches dim 0, 1, 2 or 3 of MxNxPxQ when T equals it.
    shape, hlo = add("f32[2,3,4,5]", f"f32[{size}]", (dim,))
    assert shape == "f32[2,3,4,5]{3,2,1,0}"
    assert hlo[0].endswith(f"dims=[{dim}]")


@pytest.mark.parametrize("dims", [(2, 3), (1, 2), (0, 3)])
def test_matrix_matched_to_pairs_of_mxnxpxq(dims):
    # "dim 2,3: T V", "dim 1,2: T V", "dim 0,3: T V" for MxNxPxQ = 2x3x4x5.
    full = (2, 3, 4, 5)
    t, v = full[dims[0]], full[dims[1]]
    shape, hlo = add("f32[2,3,4,5]", f"f32[{t},{v}]", dims)
    assert shape == "f32[2,3,4,5]{3,2,1,0}"
    assert hlo[0].endswith(f"dims={list(dims)}")


def test_broadcast_dimensions_must_strictly_increase():
    # Matching V to N and T to P is illegal; so is matching both to one dimension.
    with pytest.raises(ShapeError, match="add: Broadcast dimensions order is wrong: 1 comes after 2."):
        add("f32[2,3,3,5]", "f32[3,3]", (2, 1))
    with pytest.raises(ShapeError, match="Broadcast dimensions order is wrong: 1 comes after 1."):
        add("f32[2,3,3,5]", "f32[3,3]", (1, 1))


@pytest.mark.parametrize("lhs, rhs, out", [
    ("f32[2,1]", "f32[2,3]", "f32[2,3]{1,0}"),      # example 1
    ("f32[1,2,5]", "f32[7,2,5]", "f32[7,2,5]{2,1,0}"),  # example 2
    ("f32[7,2,5]", "f32[7,1,5]", "f32[7,2,5]{2,1,0}"),  # example 3
    ("f32[2,1]", "f32[1,3]", "f32[2,3]{1,0}"),      # the outer-product special case
])
def test_degenerate_dimensions(lhs, rhs, out):
    shape, _ = add(lhs, rhs)
    assert shape == out


def test_degenerate_dimensions_are_reshaped_away_then_broadcast():
    _shape, hlo = add("f32[2,1]", "f32[1,3]")
    assert hlo == [
        "reshape(x) f32[2]{0}",
        "broadcast(reshape) f32[2,3]{1,0} dims=[0]",
        "reshape(y) f32[3]{0}",
        "broadcast(reshape.1) f32[2,3]{1,0} dims=[1]",
        "add(broadcast,broadcast.1) f32[2,3]{1,0}",
    ]


def test_incompatible_degenerate_shapes():
    # Example 4: (7,2,5) and (7,2,6) cannot be broadcast.
    with pytest.raises(ShapeError, match=r"add: Binary op with incompatible shapes: f32\[7,2,5\]\{2,1,0\} "
                                         r"and f32\[7,2,6\]\{2,1,0\}."):
        add("f32[7,2,5]", "f32[7,2,6]")


def test_composition_vector_4_plus_1x2_matrix():
    # |1 2 3 4| + [5 6] with broadcast dimensions (0): the vector becomes 4x2 (its dim 0 is
    # the matrix's dim 0), then the 1x2 matrix's degenerate dim 0 stretches to 4.
    shape, hlo = add("s32[4]", "s32[1,2]", (0,))
    assert shape == "s32[4,2]{1,0}"
    assert hlo == [
        "broadcast(x) s32[4,2]{1,0} dims=[0]",
        "reshape(y) s32[2]{0}",
        "broadcast(reshape) s32[4,2]{1,0} dims=[1]",
        "add(broadcast,broadcast.1) s32[4,2]{1,0}",
    ]


def test_composition_1x2_into_4x3x1():
    # A 1x2 matrix and a 4x3x1 array with broadcast dimensions (1,2): the intermediate is
    # 4x1x2, then degenerate broadcasting gives 4x3x2.
    shape, hlo = add("f32[1,2]", "f32[4,3,1]", (1, 2))
    assert shape == "f32[4,3,2]{2,1,0}"
    assert hlo == [
        "broadcast(x) f32[4,1,2]{2,1,0} dims=[1, 2]",
        "reshape(broadcast) f32[4,2]{1,0}",
        "broadcast(reshape) f32[4,3,2]{2,1,0} dims=[0, 2]",
        "reshape(y) f32[4,3]{1,0}",
        "broadcast(reshape.1) f32[4,3,2]{2,1,0} dims=[0, 1]",
        "add(broadcast.1,broadcast.2) f32[4,3,2]{2,1,0}",
    ]


def test_different_ranks_need_broadcast_dimensions():
    # XLA is explicit: without broadcast_dimensions only equal ranks or a scalar combine.
    with pytest.raises(ShapeError, match=r"add: Shapes must be equal rank, but are f32\[3\]\{0\} "
                                         r"and f32\[2,3\]\{1,0\}"):
        add("f32[2,3]", "f32[3]")


def test_wrong_broadcast_dimensions():
    with pytest.raises(ShapeError, match=r"Broadcast dimension 0 mismatch: 3 != 2"):
        add("f32[2,3]", "f32[3]", (0,))
    with pytest.raises(ShapeError, match="Size of broadcast_dimensions has to match lower-rank "
                                         "operand's rank"):
        add("f32[2,3]", "f32[3]", (0, 1))
    with pytest.raises(ShapeError, match=r"Broadcast dimension number \(2\) too large; "
                                         r"higher-rank operand has rank 2."):
        add("f32[2,3]", "f32[3]", (2,))
    with pytest.raises(ShapeError, match="Broadcast dimensions field must either be not set or "
                                         "be the identity"):
        add("f32[2,3]", "f32[2,3]", (1, 0))

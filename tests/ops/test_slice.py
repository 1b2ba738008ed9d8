"""slice, dynamic-slice, dynamic-update-slice: shape rules and the builder's Slice,
SliceInDim, DynamicSlice, DynamicUpdateSlice (spec 002 "Slice", "DynamicSlice",
"DynamicUpdateSlice"; shape_inference_test.cc; hlo_parser_test.cc)."""

import pytest

from xlapy import ops
from xlapy.errors import InvalidArgumentError
from xlapy.hlo.attrs.slicing import SliceRanges
from xlapy.opdefs import ShapeError, get_opdef
from xlapy.ops.builder import XlaBuilder
from xlapy.shape import parse_shape


def infer(opcode, *shapes, result=None, **attrs):
    d = get_opdef(opcode)
    return d.infer_shape([parse_shape(s) for s in shapes], d.check_attrs(attrs),
                         None if result is None else parse_shape(result))


def params(*texts):
    b = XlaBuilder("s")
    return b, [ops.Parameter(b, i, parse_shape(t), f"p{i}") for i, t in enumerate(texts)]


# -- slice ----------------------------------------------------------------------------------


def test_slice_spec_examples():
    # Slice(a, {2}, {4}) of a 5-vector is 2 elements; Slice(b, {2,1}, {4,3}) of 4x3 is 2x2.
    _b, (a, m) = params("f32[5]", "f32[4,3]")
    s1 = ops.Slice(a, [2], [4], [1])
    s2 = ops.Slice(m, [2, 1], [4, 3], [1, 1])
    assert str(s1.shape) == "f32[2]{0}"
    assert str(s2.shape) == "f32[2,2]{1,0}"
    assert s2.instruction.attrs["slice"] == SliceRanges((2, 1), (4, 3), (1, 1))
    assert s2.instruction.attrs["slice"].to_text() == "{[2:4], [1:3]}"


@pytest.mark.parametrize("operand, ranges, expected", [
    ("f32[128,64]", [(32, 64), (0, 64)], "f32[32,64]{1,0}"),            # InferSliceShapeRank2
    ("f32[<=128,<=64]", [(32, 33), (0, 64)], "f32[1,<=64]{1,0}"),       # ...WithDynamicDimensions
    ("f32[128,64]", [(32, 64, 2), (0, 64, 4)], "f32[16,16]{1,0}"),      # ...WithStrides
    ("f32[128,64]", [(15, 20, 2), (0, 13, 4)], "f32[3,4]{1,0}"),        # ...StridesNotIntegral
    ("f32[17]", [(2, 4)], "f32[2]{0}"),                                 # InferSliceShapeRank1
    ("f32[1,<=3,?]", [(0, 1), (1, 3), (2, 5)], "f32[1,<=2,3]{2,1,0}"),  # UnboundedSlice
    ("s32[]", [], "s32[]"),                                             # hlo_parser_test
    ("f32[3,3,4,4]", [(0, 3), (0, 3), (0, 4, 2), (0, 4)], "f32[3,3,2,4]{3,2,1,0}"),
])
def test_slice_rule(operand, ranges, expected):
    assert str(infer("slice", operand, slice=ranges)) == expected


def test_slice_errors():
    with pytest.raises(ShapeError, match=r"slice: limit index \(5\) must be less than or equal to "
                                         r"dimension size \(4\) in slice operation; argument shape: "
                                         r"f32\[4\]\{0\}; starts: \{0\}; limits: \{5\}; strides: \{1\}."):
        infer("slice", "f32[4]", slice=[(0, 5)])  # BadSlice
    with pytest.raises(ShapeError, match=r"limit index \(129\) must be less than or equal"):
        infer("slice", "f32[128,64]", slice=[(127, 129), (0, 2)])  # InferOobSliceShapeRank2
    with pytest.raises(ShapeError, match=r"Stride \(0\) must be positive."):
        infer("slice", "f32[128,64]", slice=[(127, 128, 0), (0, 2, 1)])  # InferInvalidStride
    with pytest.raises(ShapeError, match=r"limit index \(1\) must be greater or equal to start "
                                         r"index \(2\) in slice with positive stride"):
        infer("slice", "f32[4]", slice=[(2, 1)])
    with pytest.raises(ShapeError, match="Negative start index to slice: -1."):
        infer("slice", "f32[4]", slice=[(-1, 1)])
    with pytest.raises(ShapeError, match="Slice index count does not match argument rank: 1 vs 2."):
        infer("slice", "f32[4,4]", slice=[(0, 1)])
    with pytest.raises(ShapeError, match=r"Expected array argument for operand of slice, but got \(f32\[4\]\{0\}\)."):
        infer("slice", "(f32[4])", slice=[(0, 1)])


def test_slice_builder_length_mismatch():
    _b, (a,) = params("f32[5]")
    with pytest.raises(ShapeError, match=r"slice start and limit sizes differ: 1 vs 2 in slice "
                                         r"operation"):
        ops.Slice(a, [0], [1, 2], [1])
    with pytest.raises(ShapeError, match="slice start and strides sizes differ: 1 vs 0"):
        ops.Slice(a, [0], [1], [])


def test_slice_in_dim():
    # xla_builder.h: SliceInDim(x f32[7,8,9], 2, 4, 1, dimno=1) is array[:, 2:4:1, :].
    _b, (x,) = params("f32[7,8,9]")
    s = ops.SliceInDim(x, 2, 4, 1, 1)
    assert str(s.shape) == "f32[7,2,9]{2,1,0}"
    assert s.instruction.opcode == "slice"
    assert s.instruction.attrs["slice"].to_text() == "{[0:7], [2:4], [0:9]}"
    s2 = ops.SliceInDim(x, 0, 8, 3, 1)
    assert s2.instruction.attrs["slice"].to_text() == "{[0:7:1], [0:8:3], [0:9:1]}"
    assert str(s2.shape) == "f32[7,3,9]{2,1,0}"
    with pytest.raises(InvalidArgumentError, match=r"SliceInDim: dimno 3 is out of bounds"):
        ops.SliceInDim(x, 0, 1, 1, 3)


# -- dynamic-slice --------------------------------------------------------------------------


def test_dynamic_slice_spec_examples():
    # DynamicSlice(a, s, {2}) of a 5-vector; DynamicSlice(b, s, {2,2}) of a 4x3 matrix.
    _b, (a, m, i, j) = params("f32[5]", "f32[4,3]", "s32[]", "s32[]")
    d1 = ops.DynamicSlice(a, [i], [2])
    d2 = ops.DynamicSlice(m, [i, j], [2, 2])
    assert str(d1.shape) == "f32[2]{0}"
    assert str(d2.shape) == "f32[2,2]{1,0}"
    assert [o.name for o in d2.instruction.operands] == ["p1", "p2", "p3"]
    assert d2.instruction.attrs["dynamic_slice_sizes"] == (2, 2)


def test_dynamic_slice_legacy_rank1_start_indices():
    # The page's `let s = {2, 1}` form: one rank-1 index array (XLA still accepts it).
    _b, (m, s) = params("f32[4,3]", "s32[2]")
    assert str(ops.DynamicSlice(m, s, [2, 2]).shape) == "f32[2,2]{1,0}"
    # hlo_parser_test: s32[3] start indices for a rank-3 operand.
    assert str(infer("dynamic-slice", "s32[2,2,258]", "s32[3]", dynamic_slice_sizes=[2, 2, 258])) == \
        "s32[2,2,258]{2,1,0}"
    with pytest.raises(ShapeError, match=r"Dynamic slice start number of dimensions 3 \(s32\[3\]\{0\}\) "
                                         r"must match rank 2 of slice input"):
        infer("dynamic-slice", "f32[4,3]", "s32[3]", dynamic_slice_sizes=[2, 2])
    with pytest.raises(ShapeError, match="Dynamic slice should have exactly 1 index operand, has 2."):
        infer("dynamic-slice", "f32[4,3]", "s32[2]", "s32[]", dynamic_slice_sizes=[2, 2])
    with pytest.raises(ShapeError, match="Dynamic slice start indices must be of integral type."):
        infer("dynamic-slice", "f32[4,3]", "f32[2]", dynamic_slice_sizes=[2, 2])


@pytest.mark.parametrize("operand, indices, sizes, expected", [
    ("f32[?,10]", ["s32[]", "s32[]"], [2, 2], "f32[2,2]{1,0}"),        # UnboundedDynamicSlice
    ("s32[2]", ["u32[]"], [1], "s32[1]{0}"),                           # hlo_parser_test
    ("f32[<=4,<=3]", ["s32[]", "s32[]"], [4, 2], "f32[<=4,2]{1,0}"),   # full dynamic dim stays
    ("f32[<=4]", ["s64[]"], [1], "f32[1]{0}"),
])
def test_dynamic_slice_rule(operand, indices, sizes, expected):
    assert str(infer("dynamic-slice", operand, *indices, dynamic_slice_sizes=sizes)) == expected


def test_dynamic_slice_errors():
    with pytest.raises(ShapeError, match=r"dynamic-slice: Dynamic slice start number of dimensions 1 "
                                         r"must match rank 2 of slice input \(f32\[4,3\]\{1,0\}\)."):
        infer("dynamic-slice", "f32[4,3]", "s32[]", dynamic_slice_sizes=[2, 2])
    with pytest.raises(ShapeError, match="Dynamic slice start indices must be of integral type."):
        infer("dynamic-slice", "f32[4]", "f32[]", dynamic_slice_sizes=[2])
    with pytest.raises(ShapeError, match=r"Dynamic slice start indices must all have the same shape, "
                                         r"got mismatching indices with shapes s32\[\] and s64\[\]."):
        infer("dynamic-slice", "f32[4,3]", "s32[]", "s64[]", dynamic_slice_sizes=[2, 2])
    with pytest.raises(ShapeError, match="Dynamic slice index count does not match argument rank: 1 vs 2."):
        infer("dynamic-slice", "f32[4,3]", "s32[]", "s32[]", dynamic_slice_sizes=[2])
    with pytest.raises(ShapeError, match="Slice dim size 5 greater than dynamic slice dimension: 4."):
        infer("dynamic-slice", "f32[4]", "s32[]", dynamic_slice_sizes=[5])
    with pytest.raises(ShapeError, match="Negative size index to dynamic slice: -1."):
        infer("dynamic-slice", "f32[4]", "s32[]", dynamic_slice_sizes=[-1])
    with pytest.raises(ShapeError, match="Expected array argument for operand of dynamic slice"):
        infer("dynamic-slice", "(f32[4])", "s32[]", dynamic_slice_sizes=[1])


# -- dynamic-update-slice -------------------------------------------------------------------


def test_dynamic_update_slice_spec_examples():
    # DynamicUpdateSlice(a, u, s): 5-vector with a 2-vector update; 4x3 with a 3x2 update.
    _b, (a, u, m, um, i, j) = params("f32[5]", "f32[2]", "f32[4,3]", "f32[3,2]", "s32[]", "s32[]")
    d1 = ops.DynamicUpdateSlice(a, u, [i])
    d2 = ops.DynamicUpdateSlice(m, um, [i, j])
    assert str(d1.shape) == "f32[5]{0}"
    assert str(d2.shape) == "f32[4,3]{1,0}"
    assert [o.name for o in d2.instruction.operands] == ["p2", "p3", "p4", "p5"]


@pytest.mark.parametrize("operand, update, indices, expected", [
    ("f32[?,10]", "f32[?,5]", ["s32[]", "s32[]"], "f32[?,10]{1,0}"),          # Unbounded...
    ("s32[1,1,25,1]", "s32[1,1,2,1]", ["s32[4]"], "s32[1,1,25,1]{3,2,1,0}"),  # hlo_parser_test
    ("s32[1024]", "s32[256]", ["s32[]"], "s32[1024]{0}"),
    ("f32[4,<=3]", "f32[2,3]", ["s32[]", "s32[]"], "f32[4,<=3]{1,0}"),
    ("f32[4,3]", "f32[2,<=3]", ["s32[]", "s32[]"], "f32[4,<=3]{1,0}"),        # full update
    ("f32[4,3]", "f32[<=2,3]", ["s32[]", "s32[]"], "f32[4,3]{1,0}"),
    ("f32[4,3]{0,1}", "bf16[2,3]", ["s32[]", "s32[]"], "f32[4,3]{0,1}"),      # fp precision ok
])
def test_dynamic_update_slice_rule(operand, update, indices, expected):
    assert str(infer("dynamic-update-slice", operand, update, *indices)) == expected


def test_dynamic_update_slice_errors():
    with pytest.raises(ShapeError, match=r"dynamic-update-slice: Update dim size 5 greater than "
                                         r"dynamic slice dimension: 4."):
        infer("dynamic-update-slice", "f32[4]", "f32[5]", "s32[]")
    with pytest.raises(ShapeError, match="Dynamic update slice update rank does not match argument "
                                         "rank: 1 vs 2."):
        infer("dynamic-update-slice", "f32[4,3]", "f32[2]", "s32[]", "s32[]")
    with pytest.raises(ShapeError, match="Dynamic update slice update element type does not match "
                                         "argument. operand.element_type: F32 vs "
                                         "update.element_type: S32."):
        infer("dynamic-update-slice", "f32[4]", "s32[2]", "s32[]")
    with pytest.raises(ShapeError, match="Dynamic update slice start number of dimensions 1 must "
                                         "match rank 2"):
        infer("dynamic-update-slice", "f32[4,3]", "f32[2,2]", "s32[]")
    with pytest.raises(ShapeError, match=r"Dynamic update slice indices must be scalar, not s32\[1,1\]"):
        infer("dynamic-update-slice", "f32[4]", "f32[2]", "s32[1,1]")
    with pytest.raises(ShapeError, match="Dynamic update slice should have exactly 1 index operand"):
        infer("dynamic-update-slice", "f32[4]", "f32[2]", "s32[1]", "s32[]")
    with pytest.raises(ShapeError, match="Expected array or buffer argument for operand of dynamic "
                                         "update slice"):
        infer("dynamic-update-slice", "(f32[4])", "f32[2]", "s32[]")
    with pytest.raises(ShapeError, match="Expected array argument for update of dynamic update slice"):
        infer("dynamic-update-slice", "f32[4]", "(f32[2])", "s32[]")
    with pytest.raises(ShapeError, match="expects at least 2 operands, got 1"):
        infer("dynamic-update-slice", "f32[4]")

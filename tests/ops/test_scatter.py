"""scatter: the shape rule (cases of xla/service/shape_inference_test.cc's
ScatterShapeInferenceTest, run for one operand (f32) and two (f32, bf16) as XLA does), the
update-computation checks, the Scatter builder function (single and variadic) and the HLO
text of the attributes."""

import pytest

from program_shapes import comp, infer
from xlapy import ops
from xlapy.ops.builder import XlaBuilder
from xlapy.errors import InvalidArgumentError
from xlapy.parser import parse_hlo_module
from xlapy.hlo.printer import HloPrintOptions, attribute_texts
from xlapy.opdefs import ShapeError
from xlapy.ops import ScatterDimensionNumbers as SDN
from xlapy.shape import Shape, parse_shape

TYPES = [["f32"], ["f32", "bf16"]]


def to_apply(types):
    """XLA's to_apply(types): N accumulators and N updates -> a tuple of N scalars."""
    scalars = [f"{t}[]" for t in types]
    return comp(scalars + scalars, "(" + ", ".join(scalars) + ")", "update")


def scatter(types, operand_dims, indices, update_dims, uwd, iwd, sdod, ivd, batching=((), ()),
            update=None):
    dn = SDN(uwd, iwd, sdod, ivd, *batching)
    dims = ",".join(map(str, operand_dims))
    udims = ",".join(map(str, update_dims))
    shapes = [f"{t}[{dims}]" for t in types] + [indices] + [f"{t}[{udims}]" for t in types]
    return infer("scatter", *shapes, scatter_dimension_numbers=dn,
                 to_apply=update or to_apply(types))


def collate(types, dims):
    shapes = [parse_shape(f"{t}[{','.join(map(str, dims))}]") for t in types]
    return shapes[0] if len(shapes) == 1 else Shape.tuple(shapes)


F5 = [50, 49, 48, 47, 46]
GOOD = [
    ("TfScatterWithFullUpdates", [64, 48], "s64[32]", [64, 32], [0], [1], [1], 1),
    ("TfScatterWithFullUpdatesV2", [64, 48], "s64[32]", [32, 48], [1], [0], [0], 1),
    ("TfScatterWithPartialUpdates", [64, 48], "s64[32]", [10, 32], [0], [1], [1], 1),
    ("TfScatterWithPartialUpdatesV2", [64, 48], "s64[32]", [32, 8], [1], [0], [0], 1),
    ("TfScatterNdWithFullUpdates", [64, 48], "s64[10,9,8,7,1]", [10, 9, 8, 7, 48], [4], [0],
     [0], 4),
    ("TfScatterNdWithFullUpdatesV2", [64, 48], "s64[10,9,8,7,1]", [10, 9, 8, 7, 64], [4], [1],
     [0], 4),
    ("TfScatterNdWithPartialUpdates", [64, 48], "s64[10,9,8,7,1]", [10, 9, 8, 7, 10], [4], [0],
     [0], 4),
    ("TfScatterNdWithPartialUpdatesV2", [64, 48], "s64[10,9,8,7,1]", [10, 9, 8, 7, 12], [4],
     [1], [0], 4),
    ("TfBatchDynamicUpdateSlice", F5, "s64[10,9,8,7,5]", [10, 9, 8, 7, 30, 29, 28, 27, 26],
     [4, 5, 6, 7, 8], [], [0, 1, 2, 3, 4], 4),
    ("NonDefaultScatterIndicesLeafDim", F5, "s64[10,9,5,7,6]", [10, 9, 7, 6, 30, 29, 28, 27, 26],
     [4, 5, 6, 7, 8], [], [0, 1, 2, 3, 4], 2),
    ("NonDefaultScatterIndicesLeafDimV2", F5, "s64[5,10,9,7,6]",
     [10, 9, 7, 6, 30, 29, 28, 27, 26], [4, 5, 6, 7, 8], [], [0, 1, 2, 3, 4], 0),
    ("NoUpdateScatterDims", F5, "s64[5]", [30, 29, 28, 27, 26], [0, 1, 2, 3, 4], [],
     [0, 1, 2, 3, 4], 0),
    ("ScalarScatterIndices", F5, "s64[]", [30, 29, 28, 27], [0, 1, 2, 3], [0], [0], 0),
]


@pytest.mark.parametrize("types", TYPES, ids=["f32", "f32_bf16"])
@pytest.mark.parametrize("case", GOOD, ids=[c[0] for c in GOOD])
def test_scatter_shapes(case, types):
    _, operand, indices, updates, uwd, iwd, sdod, ivd = case
    got = scatter(types, operand, indices, updates, uwd, iwd, sdod, ivd)
    assert got == collate(types, operand)


BAD = [
    ("TfScatterWithUpdatesBiggerThanInput", [64, 48], "s64[32]", [65, 32], [0], [1], [1], 1,
     (), "Bounds of the window dimensions of updates must not exceed the bounds of the "
         "corresponding dimensions of operand. For dimension 0, updates bound is 65, operand "
         "bound is 64."),
    ("TfScatterWithUpdatesBiggerThanInputV2", [64, 48], "s64[32]", [32, 49], [1], [0], [1], 1,
     (), "Bounds of the window dimensions of updates must not exceed"),
    ("TfScatterBatchingDimsWithUpdatesBiggerThanInput", [100, 64, 48], "s64[100,32]",
     [100, 65, 32], [1], [2], [1], 2, ([0], [0]),
     "Bounds of the window dimensions of updates must not exceed"),
    ("TfScatterWithUpdatesNotMatchingIndices", [64, 48], "s64[32]", [64, 31], [0], [1], [1], 1,
     (), "Bounds of the scatter dimensions of updates must be same as the bounds of the "
         "corresponding dimensions of scatter indices. For scatter dimension 1, updates bound "
         "is 31, scatter_indices bound is 32."),
    ("TfScatterWithUpdatesNotMatchingIndicesV2", [64, 48], "s64[32]", [31, 48], [1], [0], [1],
     1, (), "Bounds of the scatter dimensions of updates must be same"),
    ("TfScatterNdWithUpdatesBiggerThanInput", [64, 48], "s64[10,9,8,7,1]", [10, 9, 8, 7, 65],
     [4], [1], [0], 4, (), "Bounds of the window dimensions of updates must not exceed"),
    ("TfScatterNdWithUpdatesNotMatchingIndices", [64, 48], "s64[10,9,8,7,1]", [9, 9, 8, 7, 64],
     [4], [1], [0], 4, (), "Bounds of the scatter dimensions of updates must be same"),
    ("OutOfBoundsScatterIndicesLeafDim", F5, "s64[10,9,8,7,5]", [10, 9, 8, 7, 30, 29, 28],
     [4, 5, 6], [1, 2], [0, 1, 2, 3, 4], 10, (),
     r"Scatter index leaf dimension must be within \[0, rank\(scatter_indices\) \+ 1\). "
     r"rank\(scatter_indices\) is 5 and scatter index leaf dimension is 10."),
    ("InvalidUpdates", F5, "s64[10,9,8,7,5]", [10, 9, 8, 7, 30, 29, 28, 50], [4, 5, 6], [1, 2],
     [0, 1, 2, 3, 4], 4, (), "Updates tensor must be of rank 7; got 8."),
    ("NonAscendingUpdateWindowDims", F5, "s64[10,9,8,7,5]", [10, 9, 8, 7, 30, 29, 28, 27, 26],
     [4, 5, 6, 8, 7], [], [0, 1, 2, 3, 4], 4, (),
     "update_window_dims in scatter op must be sorted; got: 4, 5, 6, 8, 7."),
    ("RepeatedUpdateWindowDims", F5, "s64[10,9,8,7,5]", [10, 9, 8, 7, 30, 29, 28, 27, 26],
     [4, 5, 6, 7, 7], [], [0, 1, 2, 3, 4], 4, (),
     "update_window_dims in scatter op must not repeat"),
    ("OutOfBoundsUpdateWindowDims", F5, "s64[10,9,8,7,5]", [10, 9, 8, 7, 30, 29, 28, 27, 26],
     [4, 5, 6, 7, 9], [], [0, 1, 2, 3, 4], 4, (),
     r"Invalid update_window_dims set in scatter op; valid range is \[0, 9\). got: 9."),
    ("NonAscendingInsertedWindowDims", F5, "s64[10,9,8,7,5]", [10, 9, 8, 7, 30, 29, 28],
     [4, 5, 6], [2, 1], [0, 1, 2, 3, 4], 4, (),
     "inserted_window_dims in scatter op must be sorted"),
    ("RepeatedInsertedWindowDims", F5, "s64[10,9,8,7,5]", [10, 9, 8, 7, 30, 29, 28], [4, 5, 6],
     [1, 1], [0, 1, 2, 3, 4], 4, (), "inserted_window_dims in scatter op must not repeat"),
    ("OutOfBoundsInsertedWindowDims", F5, "s64[10,9,8,7,5]", [10, 9, 8, 7, 30, 29, 28],
     [4, 5, 6], [1, 5], [0, 1, 2, 3, 4], 4, (),
     r"Invalid inserted_window_dims set in scatter op; valid range is \[0, 5\)"),
    ("MismatchingScatterDimsToOperandDims", F5, "s64[10,9,8,7,5]", [10, 9, 8, 7, 30, 29, 28],
     [4, 5, 6], [1, 2], [0, 1, 2, 3], 4, (),
     "Scatter op has 4 elements in scatter_dims_to_operand_dims and the bound of dimension "
     "index_vector_dim=4 of scatter_indices is 5. These two numbers must be equal"),
    ("OutOfBoundsScatterDimsToOperandDims", F5, "s64[10,9,8,7,5]", [10, 9, 8, 7, 30, 29, 28],
     [4, 5, 6], [1, 2], [0, 1, 2, 3, 10], 4, (),
     r"Invalid scatter_dims_to_operand_dims mapping; domain is \[0, 5\), got: 4->10"),
    ("RepeatedValuesInScatterDimsToOperandDims", F5, "s64[10,9,8,7,5]",
     [10, 9, 8, 7, 30, 29, 28], [4, 5, 6], [1, 2], [0, 1, 2, 2, 3], 4, (),
     "Repeated dimensions not allowed in scatter_dims_to_operand_dims"),
    ("InsufficientWindowDims", F5, "s64[]", [30, 29, 28, 27], [0, 1, 2, 3], [], [0], 0, (),
     "Scatter op has window of size 4; doesn't match operand of rank 5."),
    ("BatchingDimsOfDifferentSizes", [100, 64, 48], "s64[100,32]", [100, 64, 32], [1], [2], [1],
     2, ([0], []), "input_batching_dims and scatter_indices_batching_dims in scatter op must "
                   "be of the same size; got: 1 and 0."),
]


@pytest.mark.parametrize("types", TYPES, ids=["f32", "f32_bf16"])
@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_scatter_errors(case, types):
    _, operand, indices, updates, uwd, iwd, sdod, ivd, batching, message = case
    with pytest.raises(ShapeError, match="^scatter: " + message):
        scatter(types, operand, indices, updates, uwd, iwd, sdod, ivd, batching or ((), ()))


@pytest.mark.parametrize("types", TYPES, ids=["f32", "f32_bf16"])
def test_invalid_update_computation(types):
    with pytest.raises(ShapeError, match=f"Reduction function must take {2 * len(types)} "
                                         f"parameters, but takes 1 parameter"):
        scatter(types, F5, "s64[10,9,8,7,5]", [10, 9, 8, 7, 30, 29, 28], [4, 5, 6], [1, 2],
                [0, 1, 2, 3, 4], 4, update=comp(["f32[]"], "f32[]"))


@pytest.mark.parametrize("name, operand, indices, updates", [
    ("ScatterWithTupleShapedTensorInput", "(s64[10,9,8,7,1], s64[10,9,8,7,1])", "s64[32]",
     "s64[32]"),
    ("ScatterWithTupleShapedScatterIndicesInput", "s64[32]",
     "(s64[10,9,8,7,1], s64[10,9,8,7,1])", "s64[32]"),
    ("ScatterWithTupleShapedUpdatesInput", "s64[32]", "s64[32]",
     "(s64[10,9,8,7,1], s64[10,9,8,7,1])"),
    ("FloatingPointScatterIndicesInput", "s64[32]", "f32[32]", "s64[32]"),
])
def test_scatter_operand_kinds(name, operand, indices, updates):
    message = {"ScatterWithTupleShapedTensorInput": "Expected array argument for operand 0 of "
                                                    "scatter op",
               "ScatterWithTupleShapedScatterIndicesInput": "Expected array argument for scatter "
                                                            "indices",
               "ScatterWithTupleShapedUpdatesInput": "Expected array argument for updates 0",
               "FloatingPointScatterIndicesInput": "Scatter indices parameter must be an "
                                                   "integral tensor"}[name]
    with pytest.raises(ShapeError, match=message):
        infer("scatter", operand, indices, updates,
              scatter_dimension_numbers=SDN([0], [1], [1], 0), to_apply=to_apply(["s64"]))


def test_reducer_checks():
    args = (["f32"], [64, 48], "s64[32]", [64, 32], [0], [1], [1], 1)
    with pytest.raises(ShapeError, match=r"Reduction function must return a scalar or tuple of "
                                         r"scalars but returns shape: f32\[2\]"):
        scatter(*args, update=comp(["f32[]", "f32[]"], "f32[2]"))
    with pytest.raises(ShapeError, match=r"Reduction function's accumulator shape at index 0 "
                                         r"differs from the init_value shape: s32\[\] vs f32\[\]"):
        scatter(*args, update=comp(["s32[]", "f32[]"], "s32[]"))
    with pytest.raises(ShapeError, match="Reduction function must produce a tuple with 2 "
                                         "elements, but produces a scalar"):
        scatter(["f32", "bf16"], [64, 48], "s64[32]", [64, 32], [0], [1], [1], 1,
                update=comp(["f32[]", "bf16[]", "f32[]", "bf16[]"], "f32[]"))
    # Floating point precision may differ between accumulator and updates (bf16 vs f32).
    assert scatter(["bf16"], [64, 48], "s64[32]", [64, 32], [0], [1], [1], 1,
                   update=comp(["bf16[]", "f32[]"], "bf16[]")) == parse_shape("bf16[64,48]")


def test_argument_count_and_unbounded():
    with pytest.raises(ShapeError, match="Invalid argument count of scatter op: Expected 5, "
                                         "saw 4"):
        infer("scatter", "f32[4]", "s32[1]", "f32[1]", "f32[1]",
              scatter_dimension_numbers=SDN([], [0], [0], 1), to_apply=to_apply(["f32"]))
    # UnboundedScatter.
    got = infer("scatter", "f32[?,?,?]", "s32[?,?,?]", "f32[?,?,?,?]",
                scatter_dimension_numbers=SDN([2, 3], [0], [1, 0], 2),
                to_apply=comp(["f32[]", "f32[]"], "f32[]"))
    assert got == parse_shape("f32[?,?,?]")


def _adder(b, name, types):
    sub = b.create_sub_builder(name)
    params = [ops.Parameter(sub, i, parse_shape(f"{t}[]"), f"p{i}")
              for i, t in enumerate(types + types)]
    n = len(types)
    sums = [ops.Add(params[i], params[n + i]) for i in range(n)]
    return sub.build(sums[0] if n == 1 else ops.Tuple(sub, sums))


def test_scatter_builder():
    b = XlaBuilder("s")
    x = ops.Parameter(b, 0, parse_shape("f32[64,48]"), "x")
    y = ops.Parameter(b, 1, parse_shape("s32[64,48]"), "y")
    idx = ops.Parameter(b, 2, parse_shape("s32[32]"), "idx")
    upd = ops.Parameter(b, 3, parse_shape("f32[32,48]"), "upd")
    upd_s = ops.Parameter(b, 4, parse_shape("s32[32,48]"), "upd_s")
    dn = SDN(update_window_dims=(1,), inserted_window_dims=(0,),
             scatter_dims_to_operand_dims=(0,), index_vector_dim=1)
    one = ops.Scatter(x, idx, upd, _adder(b, "add", ["f32"]), dn, unique_indices=True)
    assert one.shape == parse_shape("f32[64,48]")
    both = ops.Scatter([x, y], idx, [upd, upd_s], _adder(b, "add2", ["f32", "s32"]), dn)
    assert both.shape == parse_shape("(f32[64,48], s32[64,48])")
    with pytest.raises(InvalidArgumentError, match="Scatter should have same number of inputs "
                                                   "and updates: 2 vs 1."):
        ops.Scatter([x, y], idx, [upd], _adder(b, "add3", ["f32", "s32"]), dn)
    with pytest.raises(InvalidArgumentError, match="Scatter inputs cannot be empty."):
        ops.Scatter([], idx, [], _adder(b, "add4", ["f32"]), dn)
    with pytest.raises(ShapeError, match="scatter: Reduction function's 1-th parameter shape "
                                         "differs from the input type element type"):
        ops.Scatter(x, idx, upd_s, _adder(b, "add5", ["f32"]), dn)
    with pytest.raises(ShapeError, match=r"scatter: Reduction function's accumulator shape at "
                                         r"index 0 differs from the init_value shape: f32\[\] vs "
                                         r"s32\[\]"):
        ops.Scatter(y, idx, upd_s, _adder(b, "add6", ["f32"]), dn)
    comp_ = b.build(both)
    root = comp_.computation.root
    assert [o.name for o in root.operands] == ["x", "y", "idx", "upd", "upd_s"]
    assert root.attrs["to_apply"].name == "s.add2"
    assert ", ".join(attribute_texts(one.instruction, HloPrintOptions.default())) == (
        "update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, "
        "index_vector_dim=1, unique_indices=true, to_apply=%s.add")


HLO = """HloModule module

add_F32.v3 {
  lhs = f32[] parameter(0)
  rhs = f32[] parameter(1)
  ROOT add = f32[] add(lhs, rhs)
}

ENTRY Scatter {
  input_tensor = f32[50,49,48,47,46,512]{5,4,3,2,1,0} parameter(0)
  scatter_indices = s64[10,9,8,7,5,512]{5,4,3,2,1,0} parameter(1)
  updates = f32[10,9,8,7,30,29,28,27,26,512]{9,8,7,6,5,4,3,2,1,0} parameter(2)
  ROOT scatter = f32[50,49,48,47,46,512]{5,4,3,2,1,0} scatter(input_tensor, scatter_indices, updates), {attrs}
}
"""


@pytest.mark.parametrize("attrs", [
    # hlo_parser_test.cc "BatchScatter", then with the two flags.
    "update_window_dims={4,5,6,7,8}, inserted_window_dims={}, scatter_dims_to_operand_dims="
    "{0,1,2,3,4}, input_batching_dims={5}, scatter_indices_batching_dims={5}, "
    "index_vector_dim=4, to_apply=%add_F32.v3",
    "update_window_dims={4,5,6,7,8}, inserted_window_dims={}, scatter_dims_to_operand_dims="
    "{0,1,2,3,4}, input_batching_dims={5}, scatter_indices_batching_dims={5}, "
    "index_vector_dim=4, indices_are_sorted=true, unique_indices=true, to_apply=%add_F32.v3",
])
def test_scatter_hlo_text(attrs):
    module = parse_hlo_module(HLO.replace("{attrs}", attrs))
    assert ", ".join(attribute_texts(module.entry.root, HloPrintOptions.default())) == attrs

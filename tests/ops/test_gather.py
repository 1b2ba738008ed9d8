"""gather: the shape rule (cases of xla/service/shape_inference_test.cc's
GatherShapeInferenceTest and the spec page's worked examples), XLA's error messages, the
Gather builder function, and the HLO text of the attributes."""

import pytest

from program_shapes import infer
from xlapy import ops
from xlapy.ops.builder import XlaBuilder
from xlapy.parser import parse_hlo_module
from xlapy.hlo.printer import HloPrintOptions, attribute_texts
from xlapy.opdefs import ShapeError
from xlapy.ops import GatherDimensionNumbers as GDN
from xlapy.shape import parse_shape


def gather(operand, indices, offset_dims, collapsed, start_index_map, ivd, slice_sizes,
           operand_batching=(), indices_batching=()):
    dn = GDN(offset_dims, collapsed, start_index_map, ivd, operand_batching, indices_batching)
    return infer("gather", operand, indices, gather_dimension_numbers=dn,
                 slice_sizes=slice_sizes)


F5 = "f32[50,49,48,47,46]"
S_10_9_8_7_5 = "s64[10,9,8,7,5]"

GOOD = [
    # name, operand, indices, offset, collapsed, start_index_map, ivd, slices, batching, result
    ("TensorFlowGather", "f32[64,48]", "s64[32]", [0], [1], [1], 1, [64, 1], (), "f32[64,32]"),
    ("TensorFlowGatherV2", "f32[64,48]", "s64[32]", [1], [0], [0], 1, [1, 48], (), "f32[32,48]"),
    ("TensorFlowGatherBatchingDims", "f32[100,64,5,48]", "s64[5,100,32]", [3], [1], [1], 3,
     [1, 1, 1, 8], ([0, 2], [1, 0]), "f32[5,100,32,8]"),
    ("TensorFlowGatherNd", "f32[64,48]", "s64[10,9,8,7,1]", [4], [0], [0], 4, [1, 48], (),
     "f32[10,9,8,7,48]"),
    ("TensorFlowBatchDynamicSlice", F5, S_10_9_8_7_5, [4, 5, 6, 7, 8], [], [0, 1, 2, 3, 4], 4,
     [30, 29, 28, 27, 26], (), "f32[10,9,8,7,30,29,28,27,26]"),
    ("DynamicGatherEntireDimension", "f32[3,<=2,1]", "s64[]", [0, 1], [0], [0], 0, [1, 2, 1],
     (), "f32[<=2,1]"),
    ("DynamicGatherCollapsedDimension", "f32[<=3,2,1]", "s64[]", [0, 1], [0], [0], 0,
     [1, 2, 1], (), "f32[2,1]"),
    ("DynamicIndices", "f32[3,2,2]", "s64[3,<=4,2]", [2, 3], [0], [0, 1], 2, [1, 2, 2], (),
     "f32[3,<=4,2,2]"),
    ("NonDefaultGatherIndicesLeafDim_A", F5, "s64[10,9,5,7,6]", [4, 5, 6, 7, 8], [],
     [0, 1, 2, 3, 4], 2, [30, 29, 28, 27, 26], (), "f32[10,9,7,6,30,29,28,27,26]"),
    ("NonDefaultGatherIndicesLeafDim_B", F5, "s64[5,10,9,7,6]", [4, 5, 6, 7, 8], [],
     [0, 1, 2, 3, 4], 0, [30, 29, 28, 27, 26], (), "f32[10,9,7,6,30,29,28,27,26]"),
    ("NoOutputGatherDims", F5, "s64[5]", [0, 1, 2, 3, 4], [], [0, 1, 2, 3, 4], 0,
     [30, 29, 28, 27, 26], (), "f32[30,29,28,27,26]"),
    ("ScalarGatherIndices", F5, "s64[]", [0, 1, 2, 3], [0], [0], 0, [1, 30, 29, 28, 27], (),
     "f32[30,29,28,27]"),
    ("UnboundedGather", "f32[3,4,2]", "s32[?,?,?]", [2, 3], [0], [1, 0], 2, [1, 2, 2], (),
     "f32[?,?,2,2]"),
    # The spec page: 5 slices of [8,6] out of [16,11] with S64[5,2] start indices...
    ("spec: batched dynamic slice", "f32[16,11]", "s64[5,2]", [1, 2], [], [0, 1], 1, [8, 6],
     (), "f32[5,8,6]"),
    # ... the same with [4,5,2] indices (two batch dimensions G0, G1) ...
    ("spec: two batch dims", "f32[16,11]", "s64[4,5,2]", [2, 3], [], [0, 1], 2, [8, 6], (),
     "f32[4,5,8,6]"),
    # ... and tf.gather_nd: each index (X) picks a whole row, slice_sizes [1,11].
    ("spec: gather_nd rows", "f32[16,11]", "s64[4,5,1]", [2], [0], [0], 2, [1, 11], (),
     "f32[4,5,11]"),
]


@pytest.mark.parametrize("case", GOOD, ids=[c[0] for c in GOOD])
def test_gather_shapes(case):
    _, operand, indices, offset, collapsed, sim, ivd, slices, batching, result = case
    got = gather(operand, indices, offset, collapsed, sim, ivd, slices, *batching)
    assert got == parse_shape(result)


BAD = [
    ("TupleShapedTensorInput", "(s64[10,9,8,7,1], s64[10,9,8,7,1])", "s64[32]", [0], [1], [1],
     1, [64, 1], r"Expected array argument for input tensor operand of gather op, but got "
                 r"\(s64\[10,9,8,7,1\]\{4,3,2,1,0\}, "),
    ("TupleShapedGatherIndicesInput", "s64[32]", "(s64[10,9,8,7,1], s64[10,9,8,7,1])", [0],
     [1], [1], 0, [64, 1], "Expected array argument for gather indices"),
    ("FloatingPointGatherIndicesInput", "s64[32]", "f32[32]", [0], [1], [1], 0, [64, 1],
     r"Gather indices parameter must be an integral tensor; got f32\[32\]\{0\}."),
    ("PredGatherIndices", "s64[32]", "pred[32]", [0], [1], [1], 0, [64, 1],
     "Gather indices parameter must be an integral tensor"),
    ("NonAscendingWindowIndices", F5, S_10_9_8_7_5, [4, 5, 6, 8, 7], [], [0, 1, 2, 3, 4], 4,
     [30, 29, 28, 27, 26], "Output window dimensions in gather op must be ascending; "
                           "got: 4, 5, 6, 8, 7."),
    ("RepeatedWindowIndices", F5, S_10_9_8_7_5, [4, 5, 6, 7, 7], [], [0, 1, 2, 3, 4], 4,
     [30, 29, 28, 27, 26], "Output window dimensions in gather op must not repeat"),
    ("WindowIndexOutOfBounds", F5, S_10_9_8_7_5, [4, 5, 99, 100, 101], [], [0, 1, 2, 3, 4], 4,
     [30, 29, 28, 27, 26], r"Offset dimension 2 in gather op is out of bounds; got 99, but "
                           r"should have been in \[0,9\)."),
    ("WindowIndexBarelyOutOfBounds", F5, S_10_9_8_7_5, [4, 5, 6, 7, 9], [], [0, 1, 2, 3, 4], 4,
     [30, 29, 28, 27, 26], "Offset dimension 4 in gather op is out of bounds"),
    ("MismatchingElidedWindowDims", F5, S_10_9_8_7_5, [4, 5, 6, 7, 8], [4], [0, 1, 2, 3, 4], 4,
     [30, 29, 28, 27, 26], "All components of the offset index in a gather op must either "
                           "be a offset dimension or explicitly collapsed"),
    ("OutOfBoundsWindowToInputMapping", F5, S_10_9_8_7_5, [4, 5, 6, 7, 8], [0, 1, 2, 3, 19],
     [0, 1, 2, 3, 4], 4, [30, 29, 28, 27, 26],
     r"Invalid collapsed_slice_dims set in gather op; valid range is \[0, 5\), got: 19"),
    ("RepeatedWindowToInputMapping", F5, S_10_9_8_7_5, [4, 5, 6, 7, 8], [0, 1, 2, 3, 3],
     [0, 1, 2, 3, 4], 4, [30, 29, 28, 27, 26],
     "Repeated dimensions not allowed in collapsed_slice_dims in gather op"),
    ("MismatchingGatherToInputMapping", F5, S_10_9_8_7_5, [4, 5, 6, 7, 8], [], [0, 1, 2, 3], 4,
     [30, 29, 28, 27, 26], "Gather op has 4 elements in start_index_map and the bound of "
                           "dimension index_vector_dim=4 of start_indices is 5. These two "
                           "numbers must be equal."),
    ("OutOfBoundsGatherToInputMapping", F5, S_10_9_8_7_5, [4, 5, 6, 7, 8], [], [0, 1, 2, 3, 7],
     4, [30, 29, 28, 27, 26], r"Invalid start_index_map; domain is \[0, 5\), got: 4->7"),
    ("RepeatedGatherToInputMapping", F5, S_10_9_8_7_5, [4, 5, 6, 7, 8], [], [0, 1, 2, 3, 3], 4,
     [30, 29, 28, 27, 26], "Repeated dimensions are not allowed in start_index_map"),
    ("NonAscendingElidedWindowDims", F5, S_10_9_8_7_5, [4, 5, 6, 7, 8], [2, 1], [0, 1, 2, 3, 4],
     4, [1, 1, 28, 27, 26], "collapsed_slice_dims in gather op must be sorted"),
    ("WindowBoundsTooLarge", F5, S_10_9_8_7_5, [4, 5, 6, 7], [2], [0, 1, 2, 3, 4], 4,
     [30, 29, 1, 300, 26], r"Slice size at index 3 in gather op is out of range, must be "
                           r"within \[0, 48\), got 300."),
    ("MismatchingNumberOfWindowBounds", F5, S_10_9_8_7_5, [4, 5, 6, 7, 8], [], [0, 1, 2, 3, 4],
     4, [30, 29, 28, 26], "Gather op must have one slice size for every input dimension"),
    ("WindowBoundsNot1ForElidedDim", F5, S_10_9_8_7_5, [4, 5, 6, 7], [1], [0, 1, 2, 3, 4], 4,
     [30, 29, 28, 26, 20], "Gather op can only collapse slice dims with bound 1 or 0, but "
                           "bound is 29 for index 1 at position 0."),
    ("OutOfBoundsGatherIndicesLeafDim", F5, "s64[10,9,5,7,6]", [4, 5, 6, 7, 8], [],
     [0, 1, 2, 3, 4], 32, [30, 29, 28, 27, 26],
     r"Gather index leaf dimension must be within \[0, rank\(start_indices\) \+ 1\). "
     r"rank\(start_indices\) is 5 and gather index leaf dimension is 32."),
]


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_gather_errors(case):
    _, operand, indices, offset, collapsed, sim, ivd, slices, message = case
    with pytest.raises(ShapeError, match="^gather: " + message if message[0] != "^" else message):
        gather(operand, indices, offset, collapsed, sim, ivd, slices)


def test_gather_batching_errors():
    base = ("f32[100,64,5,48]", "s64[5,100,32]", [3], [1], [1], 3)
    with pytest.raises(ShapeError, match="operand_batching_dims and start_indices_batching_dims "
                                         "in gather op must be of the same size; got: 2 and 1"):
        gather(*base, [1, 1, 1, 8], [0, 2], [1])
    with pytest.raises(ShapeError, match="operand_batching_dims in gather op must be sorted"):
        gather(*base, [1, 1, 1, 8], [2, 0], [1, 0])
    with pytest.raises(ShapeError, match=r"Invalid start_indices_batching_dims; domain is "
                                         r"\[0, 4\), got: 1->7"):
        gather(*base, [1, 1, 1, 8], [0, 2], [1, 7])
    with pytest.raises(ShapeError, match="Gather op can only have operand_batching_dims with "
                                         "bound 1 or 0, but bound is 64"):
        gather("f32[100,64,5,48]", "s64[5,100,32]", [3], [2], [2], 3, [1, 64, 1, 8], [0, 1],
               [1, 0])


def test_gather_builder():
    b = XlaBuilder("g")
    x = ops.Parameter(b, 0, parse_shape("f32[64,48]"), "x")
    idx = ops.Parameter(b, 1, parse_shape("s32[32]"), "idx")
    dn = GDN(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,),
             index_vector_dim=1)
    rows = ops.Gather(x, idx, dn, [1, 48], indices_are_sorted=True)
    with pytest.raises(ShapeError, match="gather: Slice size at index 1 in gather op is out "
                                         "of range"):
        ops.Gather(x, idx, dn, [1, 49])
    # A dict with the proto's field names works too.
    g = ops.Gather(x, idx, {"offset_dims": [0], "collapsed_slice_dims": [1],
                            "start_index_map": [1], "index_vector_dim": 1}, [64, 1])
    assert g.shape == parse_shape("f32[64,32]")
    comp = b.build(rows)
    assert str(comp.program_shape()) == "(x: f32[64,48], idx: s32[32]) -> f32[32,48]"
    instr = comp.computation.root
    assert instr.opcode == "gather"
    assert instr.attrs["gather_dimension_numbers"] == dn
    assert instr.attrs["slice_sizes"] == (1, 48)
    assert ", ".join(attribute_texts(instr, HloPrintOptions.default())) == (
        "offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, "
        "slice_sizes={1,48}, indices_are_sorted=true")


HLO = """HloModule module

ENTRY Gather {
  input_tensor = f32[50,49,48,47,46,512]{5,4,3,2,1,0} parameter(0)
  start_indices = s64[10,9,8,7,5,512]{5,4,3,2,1,0} parameter(1)
  ROOT gather = f32[10,9,8,7,30,29,28,27,26,512]{9,8,7,6,5,4,3,2,1,0} gather(input_tensor, start_indices), {attrs}
}
"""

HLO_ATTRS = [
    # hlo_parser_test.cc "BatchGather", and the sorted-indices variant of "gather".
    "offset_dims={4,5,6,7,8}, collapsed_slice_dims={}, start_index_map={0,1,2,3,4}, "
    "operand_batching_dims={5}, start_indices_batching_dims={5}, index_vector_dim=4, "
    "slice_sizes={30,29,28,27,26,1}",
    "offset_dims={4,5,6,7,8}, collapsed_slice_dims={}, start_index_map={0,1,2,3,4}, "
    "operand_batching_dims={5}, start_indices_batching_dims={5}, index_vector_dim=4, "
    "slice_sizes={30,29,28,27,26,1}, indices_are_sorted=true",
]


@pytest.mark.parametrize("attrs", HLO_ATTRS)
def test_gather_hlo_text(attrs):
    module = parse_hlo_module(HLO.replace("{attrs}", attrs))
    root = module.entry.root
    assert ", ".join(attribute_texts(root, HloPrintOptions.default())) == attrs


def test_gather_hlo_text_errors():
    text = HLO.replace("{attrs}", "offset_dims={4,5,6,7,8}, collapsed_slice_dims={}, "
                                  "index_vector_dim=4, slice_sizes={30,29,28,27,26,1}")
    with pytest.raises(Exception, match="missing required attribute start_index_map"):
        parse_hlo_module(text)

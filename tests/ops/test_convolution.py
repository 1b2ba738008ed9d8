"""convolution: InferConvolveShape (shape_inference_test.cc's Convolve* cases incl. window
and base dilation, feature and batch groups, dgrad/wgrad kinds, sparsity, unbounded
dimensions, preferred element types) and the builder's Conv family."""

import pytest

from xlapy import ops
from xlapy.errors import InvalidArgumentError
from xlapy.hlo.attrs.window import (
    ConvolutionDimensionNumbers as CDN,
)
from xlapy.hlo.attrs.window import (
    ConvolutionKind,
    SparsityConfig,
    TensorSparsityConfig,
    Window,
)
from xlapy.hlo.printer import HloPrintOptions, module_to_string
from xlapy.opdefs import ShapeError, get_opdef
from xlapy.ops.builder import XlaBuilder
from xlapy.parser import parse_hlo_module
from xlapy.shape import parse_shape


def conv(lhs, rhs, labels, window="", result=None, *extra, **attrs):
    d = get_opdef("convolution")
    attrs["dim_labels"] = CDN.parse(labels) if isinstance(labels, str) else labels
    attrs["window"] = Window.parse(window) if isinstance(window, str) else window
    shapes = [parse_shape(s) for s in (lhs, rhs, *extra)]
    return str(d.infer_shape(shapes, d.check_attrs(attrs),
                             None if result is None else parse_shape(result)))


# shape_inference_test's Convolve dimension numbers: lhs bf01, rhs (x1, out, in, x0), out bf01.
TEST_DNUMS = CDN(0, 1, (2, 3), 2, 1, (3, 0), 0, 1, (2, 3))


def test_test_dnums_as_dim_labels():
    assert TEST_DNUMS.to_text() == "bf01_1oi0->bf01"


@pytest.mark.parametrize("lhs,rhs,window,expected", [
    ("f32[10,11,3,4]", "f32[2,12,11,3]", "size=3x2 stride=2x1 pad=1_1x0_0", "f32[10,12,2,3]"),
    # ConvolveWithWindowDilation
    ("f32[10,11,103,4]", "f32[2,12,11,3]", "size=3x2 stride=3x1 pad=0_0x2_1 rhs_dilate=6x2",
     "f32[10,12,31,5]"),
    # ConvolveWithBaseDilation
    ("f32[10,11,3,4]", "f32[2,12,11,4]", "size=4x2 stride=3x1 pad=0_0x2_1 lhs_dilate=6x2",
     "f32[10,12,4,9]"),
])
def test_convolve(lhs, rhs, window, expected):
    assert conv(lhs, rhs, TEST_DNUMS, window) == expected + "{3,2,1,0}"


@pytest.mark.parametrize("lhs_type,rhs_type,preferred,expected", [
    ("bf16", "f16", None, "bf16"),       # ConvolveWithBF16_F16
    ("f16", "bf16", None, "bf16"),       # ConvolveWithF16_BF16
    ("s32", "u32", None, "s32"),         # ConvolveWithS32_U32
    ("u32", "s32", None, "s32"),         # ConvolveWithU32_S32
    ("s8", "s16", "s16", "s16"),         # ConvolveWithPreferredElementType
    ("s8", "s16", "s32", "s32"),         # ...SameAsInferredType
    ("f32", "f32", "bf16", "bf16"),      # FloatingPointConvolveWithNarrowerPreferredElementType
    ("bf16", "bf16", "s32", "s32"),      # ...WithIntegralPreferredElementType
    ("s8", "s16", "f32", "f32"),         # IntegralConvolveWithFloatingPointPreferredElementType
    ("s8", "s16", "u32", "u32"),         # ...WithDifferentSignedness
    ("s8", "s16", "s8", "s8"),           # ConvolveWithNarrowerPreferredElementType
])
def test_convolve_element_types(lhs_type, rhs_type, preferred, expected):
    result = None if preferred is None else f"{preferred}[10,12,2,3]"
    assert conv(f"{lhs_type}[10,11,3,4]", f"{rhs_type}[2,12,11,3]", TEST_DNUMS,
                "size=3x2 stride=2x1 pad=1_1x0_0", result) == f"{expected}[10,12,2,3]{{3,2,1,0}}"


def test_convolve_dgrad_and_wgrad():
    labels = "b012f_io012->b012f"
    window = "size=3x3x3 pad=1_1x1_1x1_1 lhs_dilate=2x2x2"
    assert conv("f32[2,2,2,3,2]", "f32[3,2,3,3,3]", labels, window,
                convolution_kind=ConvolutionKind.DGRAD) == "f32[2,3,3,5,3]{4,3,2,1,0}"
    assert conv("f32[2,4,4,4,3]", "f32[2,2,2,2,5]", labels, "size=3x3x3",
                convolution_kind="wgrad") == "f32[3,5,3,3,3]{4,3,2,1,0}"
    with pytest.raises(ShapeError, match=r"Expected LHS batch dimension \(value 2\) to match RHS "
                                         r"batch dimension \(value 4\) for WGRAD"):
        conv("f32[2,4,4,4,3]", "f32[4,2,2,2,5]", labels, "size=3x3x3", convolution_kind="wgrad")
    with pytest.raises(ShapeError, match="RHS output feature dimension"):
        conv("f32[2,2,2,3,2]", "f32[3,5,3,3,3]", labels, window, convolution_kind="dgrad")


def test_convolve_with_sparsity():
    # ConvWithSparsity: a 1:4 sparse rhs of 64 rows stands for 256 input features; the
    # metadata is operand 2.
    sparse = SparsityConfig(rhs=TensorSparsityConfig(1, 4, 0, 1, idx=2))
    assert conv("f32[256,256]", "f32[64,256]", "bf_io->bf", "", None, "u16[16,256]",
                sparsity_config=sparse) == "f32[256,256]{1,0}"
    # ConvWithSparsityFail
    bad = SparsityConfig(rhs=TensorSparsityConfig(0, 4, 0, 1, idx=2))
    with pytest.raises(ShapeError, match="Only 1:N sparsity is currently supported."):
        conv("f32[256,256]", "f32[64,256]", "bf_io->bf", "", None, "u16[16,256]",
             sparsity_config=bad)
    with pytest.raises(ShapeError, match="Sparsity idx 3 out of bounds for rhs"):
        conv("f32[256,256]", "f32[64,256]", "bf_io->bf", "", None, "u16[16,256]",
             sparsity_config=SparsityConfig(rhs=TensorSparsityConfig(1, 4, 0, 1, idx=3)))
    with pytest.raises(ShapeError, match="LHS and RHS sparsity idx cannot be the same"):
        conv("f32[256,256]", "f32[64,256]", "bf_io->bf", "", None, "u16[16,256]",
             sparsity_config=SparsityConfig(TensorSparsityConfig(1, 2, 1, 1, 2),
                                            TensorSparsityConfig(1, 4, 0, 1, 2)))
    with pytest.raises(ShapeError, match="operand 2 is neither lhs, rhs nor a sparsity metadata"):
        conv("f32[256,256]", "f32[256,256]", "bf_io->bf", "", None, "u16[16,256]")


def test_unbounded_convolution():
    assert conv("f32[?,2,?,128]", "f32[2,2,<=128,8]", "b01f_01io->b01f", "size=2x2") == "f32[?,1,?,8]{3,2,1,0}"
    assert conv("f32[<=5,3,8]", "f32[4,3,3]", "bf0_oi0->bf0", "size=3") == "f32[<=5,4,6]{2,1,0}"
    with pytest.raises(ShapeError, match="Dynamic output feature dim on convolution kernel is not "
                                         "supported"):
        conv("f32[5,3,8]", "f32[<=4,3,3]", "bf0_oi0->bf0", "size=3")


def test_feature_and_batch_groups():
    # Depthwise: 8 input features, one kernel input feature per group.
    assert conv("f32[1,8,5,5]", "f32[8,1,3,3]", "bf01_oi01->bf01", "size=3x3",
                feature_group_count=8) == "f32[1,8,3,3]{3,2,1,0}"
    assert conv("f32[1,9,5,5]", "f32[9,3,3,3]", "bf01_oi01->bf01", "size=3x3",
                feature_group_count=3) == "f32[1,9,3,3]{3,2,1,0}"
    # Batch groups: the output batch is the input batch / batch_group_count.
    assert conv("f32[8,4,5,5]", "f32[6,4,3,3]", "bf01_oi01->bf01", "size=3x3",
                batch_group_count=2) == "f32[4,6,3,3]{3,2,1,0}"


@pytest.mark.parametrize("lhs,rhs,attrs,message", [
    ("f32[1,9,5,5]", "f32[9,3,3,3]", {"feature_group_count": 2},
     (r"Expected output feature dimension \(value 9\) to be divisible by feature_group_count "
     r"\(value 2\); got <conv>\(f32\[1,9,5,5\]\{3,2,1,0\}, f32\[9,3,3,3\]\{3,2,1,0\}\)\n"
     r"Dimension numbers: \{kernel_input_feature_dimension: 1 ")),
    ("f32[1,8,5,5]", "f32[9,3,3,3]", {"feature_group_count": 3},
     (r"Expected LHS feature dimension \(value 8\) to be a multiple of feature_group_count "
     r"\(value 3\), and LHS feature dimension / feature_group_count = RHS feature dimension "
     r"\(value 3\)")),
    ("f32[8,4,5,5]", "f32[6,4,3,3]", {"batch_group_count": 3},
     r"Expected input batch dimension \(value 8\) to be divisible by batch_group_count \(value 3\)"),
    ("f32[8,4,5,5]", "f32[6,2,3,3]", {"batch_group_count": 2, "feature_group_count": 2},
     "both batch_group_count 2 and feature_group_count 2 cannot be greater than 1"),
    ("f32[8,4,5,5]", "f32[6,4,3,3]", {"feature_group_count": 0},
     "feature_group_count must be a positive number, got 0"),
    ("f32[8,4,5,5]", "f32[6,4,3,3]", {"batch_group_count": -1},
     "batch_group_count must be a positive number, got -1"),
    ("f32[8,4,5,5]", "f32[6,4,3,3]", {"batch_group_count": 4},
     r"Expected output feature dimension size \(value 6\) to be a multiple of batch group count 4"),
    ("f32[8,4,5]", "f32[6,4,3,3]", {},
     r"The LHS argument to a convolution should have rank 4; lhs: f32\[8,4,5\]\{2,1,0\}."),
    ("f32[8,4,5,5]", "f32[6,4,3]", {},
     "The RHS argument to a convolution should have rank 4"),
    ("f32[8,4,5,5]", "f32[6,4,2,3]", {},
     (r"Window dimensions do not match RHS shape:\n\tRHS shape: f32\[6,4,2,3\]\{3,2,1,0\}\n\t"
     r"Window: \{size=3x3\}\n\tDimension numbers: \{bf01_oi01->bf01\}.")),
    ("(f32[8,4,5,5])", "f32[6,4,3,3]", {}, "Expected array argument for lhs of convolution"),
])
def test_convolution_errors(lhs, rhs, attrs, message):
    with pytest.raises(ShapeError, match="convolution: " + message):
        conv(lhs, rhs, "bf01_oi01->bf01", "size=3x3", **attrs)


def test_dimension_number_errors():
    # ConvolveDimensionNumbersOverlapError: kernel input feature 0 is also kernel x0.
    overlap = CDN(3, 2, (0, 1), 0, 3, (0, 1), 3, 2, (0, 1))
    with pytest.raises(ShapeError, match="each dimension exactly once"):
        conv("f32[10,11,3,4]", "f32[12,11,3,2]", overlap, "size=2x3 stride=1x2 pad=0_0x1_1")
    with pytest.raises(ShapeError, match="A dimension number is out of range in convolution"):
        conv("f32[10,11,3,4]", "f32[12,11,3,2]", CDN(0, 1, (2, 7), 1, 0, (2, 3), 0, 1, (2, 3)),
             "size=3x2")
    with pytest.raises(ShapeError, match="Window must have same number of dimensions as dimension "
                                         "numbers."):
        conv("f32[10,11,3,4]", "f32[12,11,3,2]", "bf01_oi01->bf01", "size=3")
    with pytest.raises(ShapeError, match="Both arguments to convolution must have same number of "
                                         "dimensions."):
        conv("f32[10,11,3,4]", "f32[12,11,3,2]", CDN(0, 1, (2, 3), 1, 0, (2,), 0, 1, (2, 3)), "size=3x2")


def test_parsed_convolutions_from_hlo_parser_test():
    module = parse_hlo_module("""HloModule Convolve1D1Window_0_module

ENTRY %Convolve1D1Window_0.v3 (input: f32[1,2,1], filter: f32[1,1,1]) -> f32[1,2,1] {
  %input = f32[1,2,1]{2,1,0} parameter(0)
  %copy = f32[1,2,1]{2,0,1} copy(f32[1,2,1]{2,1,0} %input)
  %filter = f32[1,1,1]{2,1,0} parameter(1)
  ROOT %convolution = f32[1,2,1]{2,0,1} convolution(f32[1,2,1]{2,0,1} %copy, f32[1,1,1]{2,1,0} %filter), window={size=1}, dim_labels=b0f_0io->b0f, operand_precision={high,default}
}
""")
    root = module.entry.root
    assert str(root.shape) == "f32[1,2,1]{2,0,1}"
    assert root.attrs["dim_labels"] == CDN.parse("b0f_0io->b0f")
    assert root.attrs["precision_config"].to_text() == "operand_precision={high,default}"


# -- builder --------------------------------------------------------------------------------


def params(b, *texts):
    return [ops.Parameter(b, i, parse_shape(t), f"p{i}") for i, t in enumerate(texts)]


def test_builder_conv_same_and_valid():
    b = XlaBuilder("conv")
    x, k = params(b, "f32[8,3,32,32]", "f32[16,3,5,5]")
    same = ops.Conv(x, k, [1, 1], ops.Padding.SAME)
    assert str(same.shape) == "f32[8,16,32,32]{3,2,1,0}"
    assert same.instruction.attrs["window"].to_text() == "size=5x5 pad=2_2x2_2"
    valid = ops.Conv(x, k, [2, 2], ops.Padding.VALID)
    assert str(valid.shape) == "f32[8,16,14,14]{3,2,1,0}"
    strided_same = ops.Conv(x, k, [2, 2], "SAME")
    assert str(strided_same.shape) == "f32[8,16,16,16]{3,2,1,0}"
    text = module_to_string(b.build(valid).module, HloPrintOptions.short_parsable())
    assert "convolution(p0, p1), window={size=5x5 stride=2x2}, dim_labels=bf01_oi01->bf01" in text
    assert str(parse_hlo_module(text).entry.root.shape) == "f32[8,16,14,14]{3,2,1,0}"


def test_builder_conv_general_forms():
    b = XlaBuilder("conv")
    x, k, nhwc, hwio = params(b, "f32[2,4,9,9]", "f32[6,2,3,3]", "f32[2,9,9,4]", "f32[3,3,4,6]")
    grouped = ops.ConvWithGeneralPadding(x, k, [1, 1], [(1, 1), (0, 0)], feature_group_count=2)
    assert str(grouped.shape) == "f32[2,6,9,7]{3,2,1,0}"
    assert grouped.instruction.attrs["feature_group_count"] == 2
    dn = ops.ConvolutionDimensionNumbers.parse("b01f_01io->b01f")
    assert str(ops.ConvWithGeneralDimensions(nhwc, hwio, [1, 1], "VALID", dn).shape) == "f32[2,7,7,6]{3,2,1,0}"
    assert str(ops.ConvGeneral(nhwc, hwio, [2, 2], [(1, 1), (1, 1)], dn).shape) == "f32[2,5,5,6]{3,2,1,0}"
    # Transposed convolution: lhs dilation 2, padding k-1, reversed kernel.
    up = ops.ConvGeneralDilated(nhwc, hwio, [1, 1], [(2, 2), (2, 2)], [2, 2], [1, 1], dn,
                                window_reversal=[True, True])
    assert str(up.shape) == "f32[2,19,19,6]{3,2,1,0}"
    assert up.instruction.attrs["window"].to_text() == "size=3x3 pad=2_2x2_2 lhs_dilate=2x2 rhs_reversal=1x1"
    atrous = ops.ConvGeneralDilated(nhwc, hwio, [1, 1], [], [], [2, 2], "b01f_01io->b01f",
                                    precision_config=ops.PrecisionConfig(["highest", "highest"]),
                                    preferred_element_type="bf16")
    assert str(atrous.shape) == "bf16[2,5,5,6]{3,2,1,0}"
    text = module_to_string(b.build(atrous).module, HloPrintOptions.short_parsable())
    assert ("bf16[2,5,5,6]{3,2,1,0} convolution(p2, p3), window={size=3x3 rhs_dilate=2x2}, "
            "dim_labels=b01f_01io->b01f, operand_precision={highest,highest}") in text
    assert ops.CreateDefaultConvDimensionNumbers(3).to_text() == "bf012_oi012->bf012"


def test_builder_conv_errors():
    b = XlaBuilder("conv")
    x, k, k3 = params(b, "f32[2,4,9,9]", "f32[6,4,3,3]", "f32[6,4,3]")
    with pytest.raises(ShapeError, match=r"convolution: Convolution arguments must have same "
                                         r"number of dimensions. Got: f32\[2,4,9,9\]\{3,2,1,0\} "
                                         r"and f32\[6,4,3\]\{2,1,0\}"):
        ops.Conv(x, k3, [1, 1], "VALID")
    with pytest.raises(ShapeError, match="Expected 2 elements for input_spatial_dimensions, but got 1."):
        ops.Conv(x, k, [1], "VALID")
    with pytest.raises(ShapeError, match=r"Convolution input_spatial_dimensions\[1\] is out of bounds: 7"):
        ops.ConvGeneral(x, k, [1, 1], [], ops.ConvolutionDimensionNumbers(0, 1, (2, 7), 1, 0, (2, 3), 0, 1, (2, 3)))
    with pytest.raises(ShapeError, match="Window has different number of window dimensions than "
                                         "of padding entries"):
        ops.ConvGeneral(x, k, [1, 1], [(0, 0)], ops.CreateDefaultConvDimensionNumbers(2))
    with pytest.raises(ShapeError, match="Expected LHS feature dimension"):
        ops.Conv(x, k, [1, 1], "VALID", feature_group_count=2)
    with pytest.raises(InvalidArgumentError, match="padding must be Padding.SAME or Padding.VALID"):
        ops.Conv(x, k, [1, 1], [(0, 0), (0, 0)])

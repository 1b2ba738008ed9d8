"""Text round trips of the window, dim_labels, sparsity, dot dimension numbers and precision
attribute kinds (texts XLA prints, from hlo_parser_test.cc), their malformed forms, and whole
modules using them through the parser and printer."""

import pytest

from xlapy.errors import InvalidArgumentError, ParseError
from xlapy.hlo.attrs.dot import (
    DOT_DIMENSION_NUMBERS,
    PRECISION_CONFIG,
    RAGGED_DOT_DIMENSION_NUMBERS,
    Algorithm,
    DotDimensionNumbers,
    Precision,
    PrecisionConfig,
    RaggedDotDimensionNumbers,
)
from xlapy.hlo.attrs.window import (
    DIM_LABELS,
    SPARSITY_CONFIG,
    WINDOW,
    ConvolutionDimensionNumbers,
    Padding,
    SparsityConfig,
    TensorSparsityConfig,
    Window,
    WindowDimension,
    make_padding,
)
from xlapy.hlo.printer import HloPrintOptions, module_to_string
from xlapy.parser import parse_hlo_module
from xlapy.shape.text import Scanner


def read(kind, text):
    sc = Scanner(text, "attr")
    value = kind.read(sc, None)
    assert sc.at_end(), f"unread text after {text!r}"
    return value


# -- window ---------------------------------------------------------------------------------


WINDOW_TEXTS = [
    "{size=1x1x7x1 stride=1x4x1x1 pad=0_0x0_0x3_3x0_0}",
    "{size=1}",
    "{size=3x3 pad=1_2x1_2 lhs_dilate=2x2 rhs_reversal=1x1}",
    "{size=2x3x1x1 stride=2x2x1x1}",
    "{size=2x2}",
    "{size=3 stride=2 pad=-1_0 lhs_dilate=3 rhs_dilate=2}",
    "{size=2x2 rhs_reversal=0x1}",
    "{}",
]


@pytest.mark.parametrize("text", WINDOW_TEXTS)
def test_window_round_trip(text):
    window = read(WINDOW, text)
    assert WINDOW.to_text(window) == text
    assert WINDOW.check(window, "w") is window


def test_window_reads_fields_in_any_order_and_prints_xla_order():
    window = read(WINDOW, "{pad=1_1 size=1}")
    assert window == Window((WindowDimension(1, padding_low=1, padding_high=1),))
    assert WINDOW.to_text(window) == "{size=1 pad=1_1}"


def test_window_prints_a_field_when_any_dimension_differs_from_default():
    w = Window((WindowDimension(2, stride=1), WindowDimension(3, stride=2, padding_high=1)))
    assert w.to_text() == "size=2x3 stride=1x2 pad=0_0x0_1"
    assert Window.parse(w.to_text()) == w
    assert w.dimensions[1].to_text() == "(size=3,stride=2,padding_high=1)"
    assert Window.make([2, 2], [2, 1]).to_text() == "size=2x2 stride=2x1"


@pytest.mark.parametrize("text,message", [
    ("{size=1_1}", "expects sub-attribute 'size='"),
    ("{pad=1_1_0 size=1}", "expects padding_low and padding_high separated by '_'"),
    ("{size=1x1 rhs_reversal=1}", "expects 'rhs_reversal=' has the same size as 'size='"),
    ("{size=1x1 stride=1}", "expects 'stride=' has the same size as 'size='"),
    ("{stride=2}", "expects 'stride=' has the same size as 'size='"),
    ("{size=2 size=2}", "sub-attribute 'size=' already exists"),
    ("{size=2 dilate=2}", "unexpected attribute name: dilate"),
    ("{size=2, stride=1}", "expects sub-attributes in window"),
    ("{size=2", "expected '}' to end window attribute"),
    ("size=2", "expected '{' to start window attribute"),
    ("{pad=1x2 size=2}", "expects window pad pattern"),
])
def test_window_malformed(text, message):
    with pytest.raises(ParseError, match=message.replace("(", r"\(")):
        read(WINDOW, text)


def test_window_from_dimensions_is_infer_window_from_dimensions():
    w = Window.from_dimensions([3, 3], [2, 1], [(1, 1), (0, 2)], [], [2, 2])
    assert w.to_text() == "size=3x3 stride=2x1 pad=1_1x0_2 rhs_dilate=2x2"
    with pytest.raises(InvalidArgumentError,
                       match="Window has different number of window dimensions than of window "
                             "strides\nNumber of window dimensions: 2\nNumber of window strides: 1"):
        Window.from_dimensions([3, 3], [2])
    with pytest.raises(InvalidArgumentError, match="than of padding entries"):
        Window.from_dimensions([3], [1], [(0, 0), (0, 0)])


def test_make_padding_follows_xla():
    # The semantics page: input of 5, window 3, stride 2: SAME pads one element each side.
    assert make_padding([5], [3], [2], Padding.SAME) == [(1, 1)]
    assert make_padding([5], [3], [2], Padding.VALID) == [(0, 0)]
    # padding.cc's worked example: base 10, kernel 5, stride 3 -> 00----------00.
    assert make_padding([10], [5], [3], "SAME") == [(2, 2)]
    # Even windows pad one more on the high side (option A of padding.cc).
    assert make_padding([6, 6], [2, 4], [1, 1], Padding.kSame) == [(0, 1), (1, 2)]
    assert make_padding([4], [8], [1], Padding.SAME) == [(3, 4)]
    with pytest.raises(InvalidArgumentError, match="Window dimension 0 has non-positive stride 0"):
        make_padding([4], [2], [0], Padding.SAME)
    with pytest.raises(InvalidArgumentError, match="Want input dimensions size 2 = window "
                                                   "dimensions size 1 = window strides size 1"):
        make_padding([4, 4], [2], [1], Padding.VALID)
    with pytest.raises(InvalidArgumentError, match="padding must be Padding.SAME or Padding.VALID"):
        make_padding([4], [2], [1], "FULL")


# -- dim_labels -----------------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    "b01f_01io->b01f", "b0f_0io->b0f", "bf_io->bf", "b01f_01oi->b01f", "bf01_oi01->bf01",
    "?b01f_0?1io->b01?f", "b012f_012io->b012f", "0bf_0io->0bf", "f01b_i10o->01bf",
])
def test_dim_labels_round_trip(text):
    dnums = read(DIM_LABELS, text)
    assert DIM_LABELS.to_text(dnums) == text
    assert ConvolutionDimensionNumbers.parse(text) == dnums


def test_dim_labels_fields():
    d = ConvolutionDimensionNumbers.parse("b01f_01io->b01f")
    assert (d.input_batch_dimension, d.input_feature_dimension, d.input_spatial_dimensions) == (0, 3, (1, 2))
    assert (d.kernel_input_feature_dimension, d.kernel_output_feature_dimension,
            d.kernel_spatial_dimensions) == (2, 3, (0, 1))
    assert ConvolutionDimensionNumbers.default(2) == ConvolutionDimensionNumbers.parse("bf01_oi01->bf01")
    assert ConvolutionDimensionNumbers.default(1).to_text() == "bf0_oi0->bf0"
    assert ConvolutionDimensionNumbers(0, 1, [2], 1, 0, [2], 0, 1, [2]).input_spatial_dimensions == (2,)
    assert "input_batch_dimension: 0" in d.debug_string()


@pytest.mark.parametrize("text,message", [
    ("00_01->10", "expects unique lhs dimension numbers, but sees 00"),
    ("b0f_0ii->b0f", "expects unique rhs dimension numbers, but sees 0ii"),
    ("012_0123->210", ("input, kernel, and output must have same number of spatial dimensions, "
                      "but got 3, 4, 3, respectively.")),
    ("013_0123->210", r"expects \[0-2bf\?\] in lhs dimension numbers"),
    ("9?????????_io->bf", r"expects \[0-0bf\?\] in lhs dimension numbers"),
    ("b0f_1io->b0f", r"expects \[0-0io\?\] in rhs dimension numbers"),
    ("bf01", "expects dim labels pattern, e.g., 'bf0_0io->0bf'"),
])
def test_dim_labels_malformed(text, message):
    with pytest.raises(ParseError, match=message):
        read(DIM_LABELS, text)


def test_dim_labels_kind_accepts_text():
    assert DIM_LABELS.check("bf_io->bf", "d") == ConvolutionDimensionNumbers.parse("bf_io->bf")
    with pytest.raises(InvalidArgumentError, match="must be ConvolutionDimensionNumbers"):
        DIM_LABELS.check(3, "convolution: attribute 'dim_labels'")


# -- sparsity -------------------------------------------------------------------------------


def test_sparsity_config_round_trip():
    text = "{lhs={sparsity=2x4 dimension=1 stride=1 idx=2} rhs={sparsity=1x4 dimension=0 stride=1 idx=3}}"
    cfg = read(SPARSITY_CONFIG, text)
    assert cfg == SparsityConfig(TensorSparsityConfig(2, 4, 1, 1, 2), TensorSparsityConfig(1, 4, 0, 1, 3))
    assert SPARSITY_CONFIG.to_text(cfg) == text
    # hlo_parser_test's text leaves idx out; XLA prints it back as idx=0.
    cfg = read(SPARSITY_CONFIG, "{rhs={sparsity=3x4 dimension=0 stride=1}}")
    assert SPARSITY_CONFIG.to_text(cfg) == "{rhs={sparsity=3x4 dimension=0 stride=1 idx=0}}"
    with pytest.raises(ParseError, match="expects 'num_non_zero:block_size'"):
        read(SPARSITY_CONFIG, "{rhs={sparsity=1x2x4}}")
    with pytest.raises(ParseError, match="unknown attribute 'size'"):
        read(SPARSITY_CONFIG, "{rhs={size=1}}")


# -- dot dimension numbers and precision ----------------------------------------------------


def assemble(kind, pairs):
    parts = {k: kind.read_key(k, Scanner(v, "attr"), None) for k, v in pairs}
    return kind.assemble("x", parts, "x")


@pytest.mark.parametrize("pairs", [
    [("lhs_batch_dims", "{0}"), ("lhs_contracting_dims", "{1}"), ("rhs_batch_dims", "{1}"),
     ("rhs_contracting_dims", "{0}")],
    [("lhs_contracting_dims", "{1}"), ("rhs_contracting_dims", "{0}")],
    [("lhs_contracting_dims", "{}"), ("rhs_contracting_dims", "{}")],
    [("lhs_batch_dims", "{3,1}"), ("lhs_contracting_dims", "{2}"), ("rhs_batch_dims", "{1,3}"),
     ("rhs_contracting_dims", "{2}")],
])
def test_dot_dimension_numbers_round_trip(pairs):
    dnums = assemble(DOT_DIMENSION_NUMBERS, pairs)
    assert DOT_DIMENSION_NUMBERS.items("dot_dimension_numbers", dnums) == pairs


def test_dot_dimension_numbers_values():
    d = assemble(DOT_DIMENSION_NUMBERS, [("rhs_contracting_dims", "{2}"), ("lhs_batch_dims", "{3,1}")])
    assert d == DotDimensionNumbers(rhs_contracting_dimensions=(2,), lhs_batch_dimensions=(3, 1))
    # contracting keys are printed even when empty, batch keys only when present
    assert DotDimensionNumbers().to_text() == "lhs_contracting_dims={}, rhs_contracting_dims={}"
    assert DOT_DIMENSION_NUMBERS.always_printed
    with pytest.raises(ParseError, match="an integer"):
        DOT_DIMENSION_NUMBERS.read_key("lhs_batch_dims", Scanner("{a}", "attr"), None)
    with pytest.raises(InvalidArgumentError, match="must be a list of integers"):
        DotDimensionNumbers(lhs_contracting_dimensions=[1.5])


def test_ragged_dot_dimension_numbers_round_trip():
    pairs = [("lhs_batch_dims", "{0}"), ("lhs_contracting_dims", "{2}"), ("rhs_batch_dims", "{1}"),
             ("rhs_contracting_dims", "{2}"), ("lhs_ragged_dims", "{1}"), ("rhs_group_dims", "{0}")]
    r = assemble(RAGGED_DOT_DIMENSION_NUMBERS, pairs)
    assert r == RaggedDotDimensionNumbers(DotDimensionNumbers([2], [2], [0], [1]), [1], [0])
    assert RAGGED_DOT_DIMENSION_NUMBERS.items("r", r) == pairs


def test_precision_config_text():
    pc = assemble(PRECISION_CONFIG, [("operand_precision", "{high,default}")])
    assert pc == PrecisionConfig([Precision.HIGH, Precision.DEFAULT])
    assert PRECISION_CONFIG.items("p", pc) == [("operand_precision", "{high,default}")]
    pc = assemble(PRECISION_CONFIG, [("operand_precision", "{DEFAULT,HIGHEST}"),
                                     ("algorithm", "dot_bf16_bf16_f32")])
    assert pc.to_text() == "operand_precision={default,highest}, algorithm=dot_bf16_bf16_f32"
    assert pc.algorithm is Algorithm.ALG_DOT_BF16_BF16_F32 is PrecisionConfig.Algorithm.ALG_DOT_BF16_BF16_F32
    # All-DEFAULT precisions print nothing and compare equal to no precisions at all.
    default = assemble(PRECISION_CONFIG, [("operand_precision", "{default,default}")])
    assert default == PrecisionConfig() and PRECISION_CONFIG.items("p", default) == []
    assert PRECISION_CONFIG.check(["highest", "high"], "p").to_text() == "operand_precision={highest,high}"
    with pytest.raises(ParseError, match="expects precision .* but sees 'fast'"):
        PRECISION_CONFIG.read_key("operand_precision", Scanner("{fast}", "attr"), None)
    with pytest.raises(ParseError, match="expects algorithm .* but sees 'dot_f99'"):
        PRECISION_CONFIG.read_key("algorithm", Scanner("dot_f99", "attr"), None)
    with pytest.raises(InvalidArgumentError, match="unknown dot algorithm"):
        PrecisionConfig(algorithm="tf64")


# -- whole modules (hlo_parser_test.cc) -----------------------------------------------------

WITH_OPERAND_SHAPES = HloPrintOptions(print_operand_shape=True, print_large_constants=True)

MODULES = [
    """HloModule Convolve1D1Window_0_module, entry_computation_layout={(f32[1,2,1]{2,1,0}, f32[1,1,1]{2,1,0})->f32[1,2,1]{2,0,1}}

ENTRY %Convolve1D1Window_0.v3 (input: f32[1,2,1], filter: f32[1,1,1]) -> f32[1,2,1] {
  %input = f32[1,2,1]{2,1,0} parameter(0)
  %copy = f32[1,2,1]{2,0,1} copy(f32[1,2,1]{2,1,0} %input)
  %filter = f32[1,1,1]{2,1,0} parameter(1)
  ROOT %convolution = f32[1,2,1]{2,0,1} convolution(f32[1,2,1]{2,0,1} %copy, f32[1,1,1]{2,1,0} %filter), window={size=1}, dim_labels=b0f_0io->b0f, operand_precision={high,default}
}

""",
    """HloModule ConvolveR2_module, entry_computation_layout={(f32[1,2]{1,0}, f32[2,2]{1,0})->f32[1,2]{0,1}}

ENTRY %ConvolveR2.v3 (input: f32[1,2], filter: f32[2,2]) -> f32[1,2] {
  %input = f32[1,2]{1,0} parameter(0)
  %filter = f32[2,2]{1,0} parameter(1)
  ROOT %convolution = f32[1,2]{0,1} convolution(f32[1,2]{1,0} %input, f32[2,2]{1,0} %filter), dim_labels=bf_io->bf
}

""",
    """HloModule ConvolveBackward_module, entry_computation_layout={(f32[128,7,7,512]{0,3,2,1}, f32[3,3,512,512]{3,2,1,0})->f32[128,14,14,512]{0,3,2,1}}

ENTRY %ConvolveBackward (input: f32[128,7,7,512], filter: f32[3,3,512,512]) -> f32[128,14,14,512] {
  %input = f32[128,7,7,512]{0,3,2,1} parameter(0)
  %filter = f32[3,3,512,512]{3,2,1,0} parameter(1)
  ROOT %convolution-base-dilated = f32[128,14,14,512]{0,3,2,1} convolution(f32[128,7,7,512]{0,3,2,1} %input, f32[3,3,512,512]{3,2,1,0} %filter), window={size=3x3 pad=1_2x1_2 lhs_dilate=2x2 rhs_reversal=1x1}, dim_labels=b01f_01oi->b01f
}

""",
    """HloModule dot, entry_computation_layout={(f32[2,10]{1,0}, f32[10,2]{1,0})->f32[2]{0}}

ENTRY %dot (a: f32[2,10], b: f32[10,2]) -> f32[2] {
  %a = f32[2,10]{1,0} parameter(0)
  %b = f32[10,2]{1,0} parameter(1)
  ROOT %dot = f32[2]{0} dot(f32[2,10]{1,0} %a, f32[10,2]{1,0} %b), lhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_batch_dims={1}, rhs_contracting_dims={0}, algorithm=dot_tf32_tf32_f32
}

""",
    """HloModule m, entry_computation_layout={(f32[1,2,1]{2,1,0}, f32[1,1,1]{2,1,0})->f32[1,2,1]{2,1,0}}

ENTRY %e (input: f32[1,2,1], filter: f32[1,1,1]) -> f32[1,2,1] {
  %input = f32[1,2,1]{2,1,0} parameter(0)
  %filter = f32[1,1,1]{2,1,0} parameter(1)
  ROOT %convolution = f32[1,2,1]{2,1,0} convolution(f32[1,2,1]{2,1,0} %input, f32[1,1,1]{2,1,0} %filter), window={size=1}, dim_labels=b0f_0io->b0f, convolution_kind=fprop, operand_precision={highest,default}, algorithm=dot_bf16_bf16_f32
}

""",
]


@pytest.mark.parametrize("text", MODULES)
def test_modules_print_back_byte_for_byte(text):
    assert module_to_string(parse_hlo_module(text), WITH_OPERAND_SHAPES) == text


def test_dot_without_dimension_numbers_prints_empty_contracting_dims():
    module = parse_hlo_module("""HloModule m
ENTRY e {
  a = f32[] parameter(0)
  b = f32[3] parameter(1)
  ROOT d = f32[3] dot(a, b)
}""")
    assert ("d = f32[3]{0} dot(a, b), lhs_contracting_dims={}, rhs_contracting_dims={}"
            in module_to_string(module, HloPrintOptions.short_parsable()))


def test_module_with_malformed_window_reports_position():
    text = """HloModule m
ENTRY e {
  input = f32[1,2,2,1] parameter(0)
  filter = f32[1,1,1,1] parameter(1)
  ROOT conv = f32[1,2,2,1] convolution(input, filter), window={size=1x1 rhs_reversal=1}, dim_labels=b01f_01io->b01f
}"""
    with pytest.raises(ParseError, match="rhs_reversal") as e:
        parse_hlo_module(text)
    assert e.value.line == 5

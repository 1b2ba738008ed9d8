"""fft: InferFftShape (shape_inference_test.cc's InferFftShapeTest* and unbounded cases,
with their messages), hlo_parser_test texts and the builder's Fft."""

import pytest

from xlapy import ops
from xlapy.errors import InvalidArgumentError
from xlapy.hlo.printer import HloPrintOptions, module_to_string
from xlapy.opdefs import ShapeError, get_opdef
from xlapy.ops.builder import XlaBuilder
from xlapy.parser import parse_hlo_module
from xlapy.shape import parse_shape

UNSUPPORTED_RANK = "only supports ranks 1-3"
INVALID_RANK = "requires input of at least same rank"
REQUIRES_COMPLEX = "requires complex input type"
REQUIRES_F32 = "requires F32 or F64 input type"
DIMENSIONS_MATCH = "innermost dimensions match fft_length"
INNERMOST_MATCHES = "innermost dimension matches fft_length/2\\+1"


def fft(shape, fft_type, length):
    d = get_opdef("fft")
    return str(d.infer_shape([parse_shape(shape)],
                             d.check_attrs({"fft_type": fft_type, "fft_length": length})))


def fails(shape, fft_type, length, message):
    with pytest.raises(ShapeError, match="fft: .*" + message):
        fft(shape, fft_type, length)


@pytest.mark.parametrize("fft_type", ["FFT", "IFFT"])
@pytest.mark.parametrize("shape", ["c64[16,8]", "c64[16,<=8]"])
def test_complex_ranks(fft_type, shape):
    expected = str(parse_shape(shape))
    fails(shape, fft_type, [], UNSUPPORTED_RANK)
    assert fft(shape, fft_type, [8]) == expected
    assert fft(shape, fft_type, [16, 8]) == expected
    fails(shape, fft_type, [32, 16, 8], INVALID_RANK)
    fails(shape, fft_type, [64, 32, 16, 8], UNSUPPORTED_RANK)


@pytest.mark.parametrize("fft_type", ["FFT", "IFFT"])
def test_complex_types(fft_type):
    with pytest.raises(ShapeError, match=f"fft: {fft_type} requires complex input type, found F32."):
        fft("f32[16,8]", fft_type, [16, 8])
    assert fft("c128[16,8]", fft_type, [16, 8]) == "c128[16,8]{1,0}"


def test_rfft():
    for length in ([8], [16, 8]):
        assert fft("f32[16,8]", "RFFT", length) == "c64[16,5]{1,0}"
    fails("f32[16,8]", "RFFT", [], UNSUPPORTED_RANK)
    fails("f32[16,8]", "RFFT", [32, 16, 8], INVALID_RANK)
    fails("f32[16,8]", "RFFT", [64, 32, 16, 8], UNSUPPORTED_RANK)
    for length in ([4], [16, 4], [8, 8], [8, 16]):
        fails("f32[16,8]", "RFFT", length, DIMENSIONS_MATCH)
    with pytest.raises(ShapeError, match="RFFT requires innermost dimensions match fft_length but "
                                         "dimension 1 is 8 and should be 4."):
        fft("f32[16,8]", "RFFT", [4])
    # Zero-sized dimensions keep their size; even and odd lengths give n/2+1.
    assert fft("f32[16,0]", "RFFT", [0]) == "c64[16,0]{1,0}"
    assert fft("f32[16,0]", "RFFT", [16, 0]) == "c64[16,0]{1,0}"
    assert fft("f32[16,9]", "RFFT", [16, 9]) == "c64[16,5]{1,0}"
    assert fft("f32[16,<=8]", "RFFT", [16, 8]) == "c64[16,<=5]{1,0}"
    assert fft("f64[4]", "RFFT", [4]) == "c128[3]{0}"
    fails("c64[16,8]", "RFFT", [16, 8], REQUIRES_F32)
    fails("c128[16,8]", "RFFT", [16, 8], REQUIRES_F32)
    fails("bf16[16,8]", "RFFT", [16, 8], REQUIRES_F32)


def test_irfft():
    for length in ([8], [16, 8]):
        assert fft("c64[16,5]", "IRFFT", length) == "f32[16,8]{1,0}"
    fails("c64[16,5]", "IRFFT", [], UNSUPPORTED_RANK)
    fails("c64[16,5]", "IRFFT", [32, 16, 8], INVALID_RANK)
    fails("c64[16,5]", "IRFFT", [5], INNERMOST_MATCHES)
    fails("c64[16,5]", "IRFFT", [16, 5], INNERMOST_MATCHES)
    fails("c64[16,5]", "IRFFT", [8, 8], DIMENSIONS_MATCH)
    fails("c64[16,5]", "IRFFT", [8, 9], DIMENSIONS_MATCH)
    with pytest.raises(ShapeError, match=r"IRFFT requires innermost dimension matches "
                                         r"fft_length/2\+1, but dimension 1 is 5 and should be 3."):
        fft("c64[16,5]", "IRFFT", [5])
    assert fft("c64[16,0]", "IRFFT", [0]) == "f32[16,0]{1,0}"
    assert fft("c64[16,0]", "IRFFT", [16, 0]) == "f32[16,0]{1,0}"
    assert fft("c64[16,5]", "IRFFT", [16, 8]) == "f32[16,8]{1,0}"
    assert fft("c64[16,5]", "IRFFT", [16, 9]) == "f32[16,9]{1,0}"
    assert fft("c64[16,<=5]", "IRFFT", [16, 9]) == "f32[16,<=9]{1,0}"
    fails("f32[16,8]", "IRFFT", [16, 8], REQUIRES_COMPLEX)
    assert fft("c128[16,5]", "IRFFT", [16, 8]) == "f64[16,8]{1,0}"


def test_unbounded_fft():
    assert fft("c64[2,<=5,?]", "FFT", [5, 10]) == "c64[2,<=5,?]{2,1,0}"
    assert fft("c64[2,<=5,?]", "IFFT", [5, 10]) == "c64[2,<=5,?]{2,1,0}"
    assert fft("f64[2,<=5,?]", "RFFT", [5, 10]) == "c128[2,<=5,6]{2,1,0}"
    assert fft("c128[2,<=5,?]", "IRFFT", [5, 10]) == "f64[2,<=5,10]{2,1,0}"


def test_semantics_page_rfft_lengths():
    # RFFT(fft_length=[16]) and RFFT(fft_length=[17]) have the same output shape, which is
    # why IRFFT needs fft_length to size the innermost axis.
    assert fft("f32[16]", "RFFT", [16]) == fft("f32[17]", "RFFT", [17]) == "c64[9]{0}"
    assert fft("c64[9]", "IRFFT", [16]) == "f32[16]{0}"
    assert fft("c64[9]", "IRFFT", [17]) == "f32[17]{0}"


def test_attribute_errors():
    d = get_opdef("fft")
    with pytest.raises(InvalidArgumentError, match="fft_type' must be one of FFT, IFFT, RFFT, IRFFT"):
        d.check_attrs({"fft_type": "DCT", "fft_length": [4]})
    with pytest.raises(InvalidArgumentError, match="missing required attribute 'fft_length'"):
        d.check_attrs({"fft_type": "FFT"})


@pytest.mark.parametrize("operand,result,attrs", [
    ("c64[8,32]{1,0}", "c64[8,32]{1,0}", "fft_type=FFT, fft_length={32}"),
    ("c64[5,8,32]{2,1,0}", "c64[5,8,32]{2,1,0}", "fft_type=IFFT, fft_length={8,32}"),
    ("f32[5,64,32]{2,1,0}", "c64[5,64,17]{2,1,0}", "fft_type=RFFT, fft_length={64,32}"),
    ("c64[5,64,128,33]{3,2,1,0}", "f32[5,64,128,64]{3,2,1,0}",
     "fft_type=IRFFT, fft_length={64,128,64}"),
])
def test_hlo_parser_test_texts_print_back(operand, result, attrs):
    def bare(s):
        return s.split("{")[0]

    text = (f"HloModule m, entry_computation_layout={{({operand})->{result}}}\n\n"
            f"ENTRY %e (input: {bare(operand)}) -> {bare(result)} {{\n"
            f"  %input = {operand} parameter(0)\n"
            f"  ROOT %fft = {result} fft({operand} %input), {attrs}\n}}\n\n")
    options = HloPrintOptions(print_operand_shape=True)
    assert module_to_string(parse_hlo_module(text), options) == text


def test_builder():
    b = XlaBuilder("fft")
    x = ops.Parameter(b, 0, parse_shape("f32[5,64,32]"), "x")
    y = ops.Fft(x, ops.FftType.RFFT, [64, 32])
    assert str(y.shape) == "c64[5,64,17]{2,1,0}"
    z = ops.Fft(y, "IRFFT", [64, 32])
    assert str(z.shape) == "f32[5,64,32]{2,1,0}"
    with pytest.raises(ShapeError, match="fft: FFT requires complex input type, found F32."):
        ops.Fft(x, "FFT", [32])
    assert "fft(fft), fft_type=IRFFT, fft_length={64,32}" in module_to_string(
        b.build(z).module, HloPrintOptions.short_parsable())

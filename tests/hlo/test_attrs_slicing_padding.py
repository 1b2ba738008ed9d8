"""The slice-ranges and padding-config attribute kinds: XLA-printed texts read and print back
byte for byte (texts from xla/hlo/parser/hlo_parser_test.cc), malformed texts raise
ParseError with a caret, and Python values normalise."""

import numpy as np
import pytest

from xlapy.errors import InvalidArgumentError, ParseError
from xlapy.hlo.attrs.padding import PADDING_CONFIG, PaddingConfig, PaddingDimension
from xlapy.hlo.attrs.slicing import SLICE_RANGES, SliceRanges
from xlapy.shape.text import Scanner


def read(kind, text):
    sc = Scanner(text, "attr")
    value = kind.read(sc, None)
    assert sc.at_end(), f"left over: {text[sc.pos:]!r}"
    return value


# -- slice ----------------------------------------------------------------------------------

SLICE_TEXTS = [
    "{[0:3:1], [0:3:1], [0:4:2], [0:4:1]}",  # hlo_parser_test: strides shown (one is 2)
    "{[0:1], [0:3], [0:3]}",                  # all strides 1: omitted
    "{}",                                     # scalar slice
    "{[2:4]}",
    "{[0:2:3]}",
]


@pytest.mark.parametrize("text", SLICE_TEXTS)
def test_slice_round_trip(text):
    value = read(SLICE_RANGES, text)
    assert SLICE_RANGES.to_text(value) == text


def test_slice_values_and_mixed_forms():
    r = read(SLICE_RANGES, "{[0:3], [0:3], [0:4:2], [0:4]}")  # hlo_parser_test line 4065
    assert r == SliceRanges((0, 0, 0, 0), (3, 3, 4, 4), (1, 1, 2, 1))
    # XLA prints every stride once one is not 1.
    assert r.to_text() == "{[0:3:1], [0:3:1], [0:4:2], [0:4:1]}"
    assert read(SLICE_RANGES, "{ [ 1 : 2 ] ,[3:4] }").to_text() == "{[1:2], [3:4]}"
    assert SliceRanges.of([1, 2], [3, 4]).strides == (1, 1)
    assert SLICE_RANGES.check([(0, 2), (1, 3, 2)], "slice") == SliceRanges((0, 1), (2, 3), (1, 2))
    assert hash(SliceRanges.of([1], [2])) == hash(SliceRanges.of([1], [2], [1]))


@pytest.mark.parametrize("text, message", [
    ("{[0:1:2:3]}", r"expects \[start:limit:step\] or \[start:limit\], but sees 4 elements"),
    ("{[0]}", "but sees 1 elements"),
    ("{[]}", "but sees 0 elements"),
    ("[0:1]", "expected '{' to start slice ranges"),
    ("{[0:1], }", r"expected '\[' to start a slice range"),
    ("{[0:1]", "expected '}' to end slice ranges"),
    ("{[0;1]}", r"expected ':' or '\]' in a slice range"),
    ("{[a:1]}", "expects integer in a slice range"),
])
def test_slice_malformed(text, message):
    with pytest.raises(ParseError, match=message) as e:
        read(SLICE_RANGES, text)
    assert "^" in str(e.value)


def test_slice_check_rejects_bad_values():
    ranges = r"slice: attribute 'slice' must be a list of \(start, limit\) or \(start, limit, " \
             r"stride\) ranges, got "
    with pytest.raises(InvalidArgumentError, match=ranges + r"\(1,\) at index 0"):
        SLICE_RANGES.check([(1,)], "slice: attribute 'slice'")
    with pytest.raises(InvalidArgumentError, match="one entry per dimension"):
        SliceRanges((1, 2), (3,), (1, 1))
    with pytest.raises(InvalidArgumentError, match=ranges + "3"):
        SLICE_RANGES.check(3, "slice: attribute 'slice'")
    with pytest.raises(InvalidArgumentError, match=r"'slice'\[0\] must be a list of integers, "
                                                   r"got \(0, 2.5\)"):
        SLICE_RANGES.check([(0, 2.5)], "slice: attribute 'slice'")


@pytest.mark.parametrize("starts,limits,strides,message", [
    ((0.7,), (2,), (1,), r"SliceRanges: starts must be a list of integers, got \(0.7,\)"),
    (("1",), (2,), (1,), r"SliceRanges: starts must be a list of integers, got \('1',\)"),
    ((0,), (2**70,), (1,), rf"SliceRanges: limits\[0\] must fit in 64 bits \(int64\), got {2**70}"),
    ((0,), (2,), (True,), r"SliceRanges: strides must be a list of integers, got \(True,\)"),
    ((0,), (2,), 1, r"SliceRanges: strides must be a list of integers, got 1"),
])
def test_slice_ranges_take_integers_only(starts, limits, strides, message):
    """A float, a string, a bool or more than 64 bits is refused, never truncated."""
    with pytest.raises(InvalidArgumentError, match=message):
        SliceRanges(starts, limits, strides)
    assert SliceRanges((np.int64(0),), (2,), (1,)).to_text() == "{[0:2]}"


# -- padding --------------------------------------------------------------------------------

PADDING_TEXTS = [
    "3_1",                                         # hlo_parser_test: 1-d edge padding
    "0_0_0x0_0_0x2_2_1x2_2_0",                     # interior padding in one dimension
    "0_0_0x0_-10_0x0_-1_0x-2_-2_0x-1_-1_3",        # negative edge padding
    "0_0x1_2",
    "-1_-1",
]


@pytest.mark.parametrize("text", PADDING_TEXTS)
def test_padding_round_trip(text):
    value = read(PADDING_CONFIG, text)
    assert PADDING_CONFIG.to_text(value) == text


def test_padding_values():
    p = read(PADDING_CONFIG, "0_0_0x0_-10_0x0_-1_0x-2_-2_0x-1_-1_3")
    assert p.dimensions[1] == PaddingDimension(0, -10, 0)
    assert p.dimensions[4] == PaddingDimension(-1, -1, 3)
    # PaddingConfigToString drops the interior numbers when all are zero.
    assert read(PADDING_CONFIG, "1_2_0x3_4_0").to_text() == "1_2x3_4"
    assert PaddingConfig.of([(0, 0), (1, 2, 1)]).to_text() == "0_0_0x1_2_1"
    assert PaddingConfig.no_padding(3).to_text() == "0_0x0_0x0_0"
    assert PADDING_CONFIG.check([(1, 2)], "pad") == PaddingConfig((PaddingDimension(1, 2, 0),))


def test_padding_empty_config_of_a_scalar_reads_back():
    # XLA prints nothing after padding= for a scalar operand.
    assert PaddingConfig().to_text() == ""
    sc = Scanner(", metadata={}", "attr")
    assert PADDING_CONFIG.read(sc, None) == PaddingConfig()
    assert sc.peek() == ","


@pytest.mark.parametrize("text, message", [
    ("1_2_3_4", ("expects padding config pattern like 'low_high_interior' or 'low_high', "
                "found '1_2_3_4'")),
    ("1", "expects padding config pattern"),
    ("1_2x", "expects padding config pattern"),
    ("1_2_-1", "interior padding must be >= 0 in padding config '1_2_-1'"),
    ("{1_2}", "expects padding config, e.g., '0_0_0x3_3_1'"),
])
def test_padding_malformed(text, message):
    with pytest.raises(ParseError, match=message) as e:
        read(PADDING_CONFIG, text)
    assert "^" in str(e.value)


def test_padding_check_rejects_bad_values():
    with pytest.raises(InvalidArgumentError, match=r"must be a PaddingConfig or a list of \(low, high"):
        PADDING_CONFIG.check([(1, 2, 3, 4)], "pad: attribute 'padding'")
    with pytest.raises(InvalidArgumentError, match="must be an integer"):
        PaddingDimension(1.5, 0, 0)

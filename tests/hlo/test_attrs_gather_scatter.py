"""Gather and scatter dimension numbers: XLA-printed key groups (from
xla/hlo/parser/hlo_parser_test.cc) read and print back byte for byte, optional batching keys
are omitted when empty, missing keys and malformed values are rejected, and Python values
normalise."""

import re

import pytest

from xlapy.errors import InvalidArgumentError, ParseError
from xlapy.hlo.attrs.gather_scatter import (
    GATHER_DIMENSION_NUMBERS,
    SCATTER_DIMENSION_NUMBERS,
    GatherDimensionNumbers,
    ScatterDimensionNumbers,
)
from xlapy.shape.text import Scanner

_KEY = re.compile(r"[a-z_]+")


def read_group(kind, text):
    """Read ``key=value, key=value...`` as the parser does: each key through read_key,
    then assemble."""
    sc = Scanner(text, "attrs")
    parts = {}
    while not sc.at_end():
        if parts:
            sc.expect(",")
        m = sc.peek_re(_KEY)
        assert m, text[sc.pos:]
        sc.pos = m.end()
        sc.expect("=")
        parts[m.group(0)] = kind.read_key(m.group(0), sc, None)
    return kind.assemble("dimension_numbers", parts, "test")


def print_group(kind, value):
    return ", ".join(f"{k}={v}" for k, v in kind.items("dimension_numbers", value))


GATHER_TEXTS = [
    "offset_dims={4,5,6,7,8}, collapsed_slice_dims={}, start_index_map={0,1,2,3,4}, "
    "index_vector_dim=4",
    "offset_dims={4,5,6,7,8}, collapsed_slice_dims={}, start_index_map={0,1,2,3,4}, "
    "operand_batching_dims={5}, start_indices_batching_dims={5}, index_vector_dim=4",
    "offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1",
]

SCATTER_TEXTS = [
    "update_window_dims={4,5,6,7,8}, inserted_window_dims={}, "
    "scatter_dims_to_operand_dims={0,1,2,3,4}, index_vector_dim=4",
    "update_window_dims={4,5,6,7,8}, inserted_window_dims={}, "
    "scatter_dims_to_operand_dims={0,1,2,3,4}, input_batching_dims={5}, "
    "scatter_indices_batching_dims={5}, index_vector_dim=4",
]


@pytest.mark.parametrize("text", GATHER_TEXTS)
def test_gather_round_trip(text):
    value = read_group(GATHER_DIMENSION_NUMBERS, text)
    assert isinstance(value, GatherDimensionNumbers)
    assert print_group(GATHER_DIMENSION_NUMBERS, value) == text


@pytest.mark.parametrize("text", SCATTER_TEXTS)
def test_scatter_round_trip(text):
    value = read_group(SCATTER_DIMENSION_NUMBERS, text)
    assert isinstance(value, ScatterDimensionNumbers)
    assert print_group(SCATTER_DIMENSION_NUMBERS, value) == text


def test_values_and_key_order():
    v = read_group(GATHER_DIMENSION_NUMBERS,
                   "index_vector_dim=1, start_index_map={1}, collapsed_slice_dims={1}, "
                   "offset_dims={0}")
    assert v == GatherDimensionNumbers(offset_dims=(0,), collapsed_slice_dims=(1,),
                                       start_index_map=(1,), index_vector_dim=1)
    # XLA's order whatever order the text had.
    assert print_group(GATHER_DIMENSION_NUMBERS, v) == (
        "offset_dims={0}, collapsed_slice_dims={1}, start_index_map={1}, index_vector_dim=1")
    assert GATHER_DIMENSION_NUMBERS.keys == (
        "offset_dims", "collapsed_slice_dims", "start_index_map", "operand_batching_dims",
        "start_indices_batching_dims", "index_vector_dim")
    assert SCATTER_DIMENSION_NUMBERS.keys[-1] == "index_vector_dim"
    # Only one batching list given: it is printed, the empty one is not.
    s = ScatterDimensionNumbers(update_window_dims=[1], input_batching_dims=[0],
                                index_vector_dim=2)
    assert print_group(SCATTER_DIMENSION_NUMBERS, s) == (
        "update_window_dims={1}, inserted_window_dims={}, scatter_dims_to_operand_dims={}, "
        "input_batching_dims={0}, index_vector_dim=2")


def test_python_values_normalise():
    v = GATHER_DIMENSION_NUMBERS.check(
        {"offset_dims": [1], "collapsed_slice_dims": [0], "start_index_map": [0],
         "index_vector_dim": 1}, "gather: attribute 'gather_dimension_numbers'")
    assert v.offset_dims == (1,) and v.operand_batching_dims == ()
    assert hash(v) == hash(GatherDimensionNumbers((1,), (0,), (0,), 1))
    with pytest.raises(InvalidArgumentError, match=r"unknown GatherDimensionNumbers field\(s\) "
                                                   r"\['offset'\]"):
        GATHER_DIMENSION_NUMBERS.check({"offset": [1]}, "gather")
    with pytest.raises(InvalidArgumentError, match="must be a GatherDimensionNumbers"):
        GATHER_DIMENSION_NUMBERS.check((1, 2), "gather")
    with pytest.raises(InvalidArgumentError, match="index_vector_dim must be an integer"):
        ScatterDimensionNumbers(index_vector_dim="1")
    with pytest.raises(InvalidArgumentError, match="update_window_dims"):
        ScatterDimensionNumbers(update_window_dims=[1.5])


@pytest.mark.parametrize("kind, text, message", [
    (GATHER_DIMENSION_NUMBERS, "offset_dims={1}, collapsed_slice_dims={}, index_vector_dim=1",
     "missing required attribute start_index_map"),
    (GATHER_DIMENSION_NUMBERS, "offset_dims={1}",
     "missing required attributes collapsed_slice_dims, start_index_map, index_vector_dim"),
    (SCATTER_DIMENSION_NUMBERS, "update_window_dims={1}, inserted_window_dims={}, "
     "index_vector_dim=0", "missing required attribute scatter_dims_to_operand_dims"),
])
def test_missing_keys(kind, text, message):
    with pytest.raises(InvalidArgumentError, match=message):
        read_group(kind, text)


@pytest.mark.parametrize("text, message", [
    ("offset_dims={1,", "expects integer"),
    ("offset_dims=1", "expected '{' to start a list of integers"),
    ("offset_dims={1 2}", "expected ',' or '}' in a list of integers"),
    ("index_vector_dim=x", r"expects integer \(index_vector_dim\)"),
])
def test_malformed(text, message):
    with pytest.raises(ParseError, match=message) as e:
        read_group(GATHER_DIMENSION_NUMBERS, text)
    assert e.value.line == 1 and "^" in str(e.value)

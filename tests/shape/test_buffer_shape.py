"""Buffer shapes ``b(<array>)`` as XLA parses and prints them (ParseShape's ``'b(' shape ')'``,
PrintBufferShape): an array shape holding mutable memory that the Pin, Unpin and
CreateBuffer custom calls hand around. A buffer is an array (its element type, dimensions
and layout are the array's) and equals only another buffer of an equal array."""

from __future__ import annotations

import pytest

from xlapy.errors import InvalidArgumentError, ParseError
from xlapy.shape import Shape, parse_shape


@pytest.mark.parametrize("text, printed", [
    ("b(s32[])", "b(s32[])"),  # XLA's ParseBufferScalar
    ("b(f32[8,16]{1,0})", "b(f32[8,16]{1,0})"),  # ParseBufferArray
    ("b(f32[8,16])", "b(f32[8,16]{1,0})"),  # a missing layout filled, as for arrays
    ("b(f32[2,4]{0,1})", "b(f32[2,4]{0,1})"),
    ("b /* a comment */ (f32[2])", "b(f32[2]{0})"),  # XLA's lexer: the tokens 'b' and '('
    ("(b(f32[2]), s32[], (b(u8[3,1])))", "(b(f32[2]{0}), s32[], (b(u8[3,1]{1,0})))"),
    ("b(f32[<=4])", "b(f32[<=4]{0})"),
])
def test_buffer_shapes_read_and_print_as_xla(text, printed):
    shape = parse_shape(text)
    assert shape.to_string() == printed
    assert parse_shape(printed) == shape


def test_a_buffer_is_an_array_but_equals_only_buffers():
    buf, arr = parse_shape("b(f32[8,16])"), parse_shape("f32[8,16]")
    assert buf.is_buffer() and buf.is_array() and not arr.is_buffer()
    assert (buf.element_type, buf.dimensions, buf.layout) == (arr.element_type, arr.dimensions,
                                                               arr.layout)
    assert buf.buffer_shape() == arr and Shape.buffer_of(arr) == buf
    assert buf != arr and not buf.compatible(arr) and hash(buf) != hash(arr)
    assert buf.equal(arr, ignore_buffer=True)
    assert buf.to_string(print_layout=False) == "b(f32[8,16])"  # XLA's HumanString
    assert buf.without_layout().is_buffer() and buf.with_default_layout() == buf


@pytest.mark.parametrize("text, message", [
    ("b()", r"shape:1:3: expected primitive type"),  # XLA's ParseBufferEmptyElement
    ("b(s32[], f32[])", r"shape:1:8: expects '\)' at the end of buffer shape"),  # ...MoreThanOne
    ("b((f32[2]))", r"shape:1:3: element_shape must be an array shape to create a buffer"),
    ("b(b(f32[2]))", r"shape:1:3: element_shape must be an array shape to create a buffer"),
    ("b(token[])", r"shape:1:3: element_shape must be an array shape to create a buffer shape, "
                   r"got token\[\]"),
    ("b(f32[2]", r"shape:1:9: expects '\)' at the end of buffer shape, found end of input"),
])
def test_malformed_buffer_shapes(text, message):
    with pytest.raises(ParseError, match=message):
        parse_shape(text)


def test_buffer_of_takes_an_array_that_is_not_a_buffer():
    for bad in (Shape.tuple([]), Shape.token(), parse_shape("b(f32[2])")):
        with pytest.raises(InvalidArgumentError, match="element_shape must be an array shape"):
            Shape.buffer_of(bad)


def test_a_buffer_and_its_array_count_two_levels_of_max_recursion_depth():
    from xlapy.shape.text import Scanner, read_shape

    text = "(" * 3 + "b(f32[2])" + ")" * 3
    assert read_shape(Scanner(text), max_depth=5).to_string() == "(((b(f32[2]{0}))))"
    with pytest.raises(ParseError, match="maximum recursion depth exceeded"):
        read_shape(Scanner(text), max_depth=4)

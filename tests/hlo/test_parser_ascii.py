"""XLA's lexer is ASCII outside strings and comments: digits are 0-9, whitespace is space, tab,
\\n and \\r. Python's str.isdigit/isspace/int() and the regex classes \\d and \\s accept any
Unicode digit or space; every scanner (shapes, layouts, HLO, literals, attributes) must not."""

import pytest

from xlapy.errors import ParseError
from xlapy.parser import parse_hlo_module
from xlapy.shape.literal import parse_literal
from xlapy.shape.text import parse_layout, parse_shape

ARABIC_4 = "\u0664"  # ARABIC-INDIC DIGIT FOUR: str.isdigit() and int() accept it
FULLWIDTH_2 = "\uff12"
NBSP = "\u00a0"
IDEOGRAPHIC_SPACE = "\u3000"

ADD = """HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}
"""


REDUCE_WINDOW = ("x = f32[4] parameter(0)\nz = f32[] constant(0)\n"
                 "ROOT r = f32[2] reduce-window(x, z), ")


def module(body: str) -> str:
    return ADD + "ENTRY e {\n" + body + "\n}\n"


@pytest.mark.parametrize("text,message", [
    (f"f32[{ARABIC_4},{FULLWIDTH_2}]", "expected a dimension size, '<=' bound or '?', found '٤'"),
    (f"f32[2,{FULLWIDTH_2}]", "expected a dimension size, '<=' bound or '?', found '２'"),
    (f"f32[2,{NBSP}3]", r"expected a dimension size, '<=' bound or '?', found '\xa0'"),
    (f"f32[2]{IDEOGRAPHIC_SPACE}", r"extra content after shape: '\u3000'"),
    (f"f32[2]{{{ARABIC_4}}}", r"extra content after shape: '{'"),
    ("f32[2,3]\x0c", r"extra content after shape: '\x0c'"),  # \f is not XLA whitespace
])
def test_shape_text_is_ascii(text, message):
    with pytest.raises(ParseError) as info:
        parse_shape(text)
    assert info.value.message == message


def test_layout_digits_are_ascii():
    with pytest.raises(ParseError, match="expected a dimension number, found '٤'"):
        parse_layout(f"{{1,{ARABIC_4}}}")


@pytest.mark.parametrize("body,message", [
    (f"ROOT x = f32[{ARABIC_4}] parameter(0)",
     "expected a dimension size, '<=' bound or '?', found '٤'"),
    (f"ROOT x ={IDEOGRAPHIC_SPACE}f32[4] parameter(0)", r"found '\u3000'"),
    ("ROOT x = f32[4] parameter(\u0660)", "expected an integer, found '٠'"),
    ("ROOT x = f32[2] constant({\u0661, 2})", "expected a f32 value, found '١'"),
    ("ROOT x = f32[2] constant({1.\u0665, 2})",
     "expected ',' or '}' between literal elements, found '٥'"),
    ("x = f32[2,3] parameter(0)\nROOT t = f32[3,2] transpose(x), dimensions={\u0661,0}",
     "expected an integer, found '١'"),
    ("x = f32[2] parameter(0)\nz = f32[] constant(0)\n"
     + "ROOT t = f32[3] pad(x, z), padding=\u0661_0", "expects padding config"),
    (REDUCE_WINDOW + "window={size=\u0662 stride=2}, to_apply=add",
     "expects sub-attribute 'size=' to be an integer or NxM..., found '٢'"),
    (REDUCE_WINDOW + f"window={{size=2x{ARABIC_4} stride=2}}, to_apply=add", "expects"),
])
def test_module_text_is_ascii(body, message):
    with pytest.raises(ParseError) as info:
        parse_hlo_module(module(body))
    assert message in info.value.message


def test_literal_digits_are_ascii():
    with pytest.raises(ParseError, match="expected a s32 value, found '١'"):
        parse_literal("{\u0661, 2}", "s32[2]")


def test_unicode_in_strings_and_comments_is_kept():
    text = module('// commentaire: déjà vu\nROOT x = f32[2] parameter(0), '
                  'metadata={op_name="café/ü" source_file="/tmp/π.py"} /* ∑ */')
    printed = parse_hlo_module(text).to_string()
    assert 'op_name="café/ü"' in printed
    assert 'source_file="/tmp/π.py"' in printed

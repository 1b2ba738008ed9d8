"""Malformed HLO text: every error is a ParseError with line, column, caret and a message
that says what was expected (pinned here)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xlapy.errors import ParseError
from xlapy.parser import parse_hlo_module

GOOD = """HloModule m

ENTRY main {
  x = f32[3] parameter(0)
  y = f32[3] parameter(1)
  a = f32[3] add(x, y)
  ROOT n = f32[3] negate(a)
}
"""


def parse_error(text):
    with pytest.raises(ParseError) as info:
        parse_hlo_module(text)
    return info.value


CASES = [
    # (replace this, with that, message regex, line)
    ("negate(a)", "negat(a)", r"unknown opcode 'negat'", 7),
    ("add(x, y)", "add(x, z)", r"instruction does not exist: z", 6),
    ("add(x, y)", "add(x)", r"add: expects 2 operands, got 1", 6),
    ("add(x, y)", "add(x, y), foo=1", r"unknown attribute 'foo' for add \(allowed: sharding, "
                                      r"frontend_attributes, control-predecessors", 6),
    ("a = f32[3] add(x, y)", "a = f32[4] add(x, y)",
     r"add: the given shape f32\[4\]\{0\} is not compatible with the inferred shape f32\[3\]\{0\}", 6),
    ("a = f32[3] add(x, y)", "a = s32[3] add(x, y)", r"not compatible with the inferred shape", 6),
    ("y = f32[3] parameter(1)", "y = s32[3] parameter(1)",
     r"add: Binary op add with different element types: f32\[3\]\{0\} and s32\[3\]\{0\}", 6),
    ("x = f32[3] parameter(0)", "x = f32[3 parameter(0)", r"expected ',' or '\]' in dimension list", 4),
    ("ROOT n = f32[3] negate(a)", "ROOT n = f32[3] negate(a), metadata={op_nam=\"x\"}",
     r"unknown attribute 'op_nam' in metadata \(allowed: op_type, op_name", 7),
    ("ROOT n = f32[3] negate(a)", "ROOT n = f32[3] negate(a), metadata={op_name=\"x\"}, metadata={}",
     r"duplicate attribute 'metadata' for negate", 7),
    ("a = f32[3] add(x, y)", "x = f32[3] add(x, y)", r"instruction 'x' is defined twice", 6),
    ("x = f32[3] parameter(0)", "inf = f32[3] parameter(0)",
     r"expected an instruction name, found the keyword or type name 'inf'", 4),
    ("x = f32[3] parameter(0)", "s1 = f32[3] parameter(0)",
     r"expected an instruction name, found the keyword or type name 's1'", 4),
    ("HloModule m", "HloModule m, replica_count=x", r"expected an integer for replica_count", 1),
    ("HloModule m", "HloModule m, bogus=1", r"unknown module attribute 'bogus'", 1),
    ("  ROOT n = f32[3] negate(a)\n}", "  ROOT n = f32[3] negate(a)\n", r"expected '\}' to end computation 'main', found end of input", 9),
    ("ROOT n = f32[3] negate(a)", "ROOT n = f32[3] negate(a)\n  ROOT m = f32[3] negate(a)",
     r"computation 'main' has more than one ROOT \('n' and 'm'\)", 8),
    ("y = f32[3] parameter(1)", "y = f32[3] parameter()", r"expected an integer, found '\)'", 5),
    ("y = f32[3] parameter(1)", "y = f32[3] parameter(-1)", r"parameter: attribute 'parameter_number' must be >= 0, got -1", 5),
]


@pytest.mark.parametrize("old,new,message,line", CASES)
def test_malformed(old, new, message, line):
    assert old in GOOD
    err = parse_error(GOOD.replace(old, new, 1))
    assert err.line == line, str(err)
    text = str(err)
    assert text.splitlines()[-1].strip() == "^"
    import re

    assert re.search(message, text), text


def test_good_text_parses():
    m = parse_hlo_module(GOOD)
    assert m.entry.root.opcode == "negate"


def test_empty_and_headerless():
    err = parse_error("HloModule m\n")
    assert "expected a computation" in str(err)
    m = parse_hlo_module("ENTRY e {\n  ROOT p = f32[] parameter(0)\n}\n")
    assert m.name == "module_e"


def test_two_entries():
    text = "HloModule m\nENTRY a {\n ROOT p = f32[] parameter(0)\n}\nENTRY b {\n ROOT p = f32[] parameter(0)\n}\n"
    assert "more than one ENTRY computation ('a' and 'b')" in str(parse_error(text))


def test_non_string_input():
    from xlapy.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match="expected HLO text"):
        parse_hlo_module(b"HloModule m")


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_fuzz_only_parse_errors_escape(data):
    """Mutated module text: the parser either succeeds or raises its own ParseError."""
    text = GOOD
    for _ in range(data.draw(st.integers(1, 4))):
        kind = data.draw(st.sampled_from(["delete", "insert", "replace", "duplicate"]))
        i = data.draw(st.integers(0, len(text)))
        j = min(len(text), i + data.draw(st.integers(0, 12)))
        junk = data.draw(st.text(alphabet="{}[]()<>=,:%#*.-_\"' \n0123456789abcfsuTSLE?", max_size=6))
        if kind == "delete":
            text = text[:i] + text[j:]
        elif kind == "insert":
            text = text[:i] + junk + text[i:]
        elif kind == "replace":
            text = text[:i] + junk + text[j:]
        else:
            text = text[:i] + text[i:j] + text[i:]
    try:
        parse_hlo_module(text)
    except ParseError:
        pass

"""The printer's HloPrintOptions (XLA's names), one option at a time, and the text forms the
printer normalises as XLA does: inferred result shapes, compare's type=, result_accuracy=,
tuple shardings, origin=. Expected texts are XLA's (checked against XLA's printer)."""

from __future__ import annotations

import pytest

from xlapy.errors import InvalidArgumentError, ParseError
from xlapy.hlo.printer import HloPrintOptions, module_to_string
from xlapy.parser import parse_hlo_module

TEXT = """HloModule options, entry_computation_layout={(f32[2]{0}, f32[2]{0})->(f32[2]{0}, f32[11]{0}, f32[10]{0}, f32[2]{0}, f32[2]{0}, /*index=5*/f32[2]{0}, f32[2]{0})}

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  x = f32[2]{0} parameter(0)
  y = f32[2]{0} parameter(1)
  sum = f32[2]{0} add(x, y), metadata={op_type="Add" op_name="jit(f)/add" source_file="f.py" source_line=3}
  big = f32[11]{0} constant({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
  ten = f32[10]{0} constant({0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
  zero = f32[] constant(0)
  r = f32[] reduce(sum, zero), dimensions={0}, to_apply=add
  bc = f32[2]{0} broadcast(r), dimensions={}
  ROOT t = (f32[2]{0}, f32[11]{0}, f32[10]{0}, f32[2]{0}, f32[2]{0}, /*index=5*/f32[2]{0}, f32[2]{0}) tuple(sum, big, ten, x, y, /*index=5*/bc, sum)
}

"""


@pytest.fixture
def module():
    return parse_hlo_module(TEXT)


def lines(text: str, name: str) -> str:
    """The line that defines instruction ``name`` (without indentation and ROOT)."""
    (line,) = [ln.strip().removeprefix("ROOT ") for ln in text.splitlines()
               if ln.strip().removeprefix("ROOT ").startswith((f"%{name} =", f"{name} ="))]
    return line


def test_default_form(module):
    text = module.to_string()
    assert text.startswith("HloModule options, entry_computation_layout=")
    assert "\n%add (a: f32[], b: f32[]) -> f32[] {\n" in text
    assert "\nENTRY %main (x: f32[2], y: f32[2]) -> (f32[2], f32[11], f32[10], f32[2], f32[2], " \
           "/*index=5*/f32[2], f32[2]) {\n" in text
    assert lines(text, "sum") == ('%sum = f32[2]{0} add(%x, %y), metadata={op_type="Add" '
                                  'op_name="jit(f)/add" source_file="f.py" source_line=3}')
    assert lines(text, "r") == "%r = f32[] reduce(%sum, %zero), dimensions={0}, to_apply=%add"


def test_print_operand_shape_is_the_long_form(module):
    text = module.to_string(print_operand_shape=True)
    assert lines(text, "sum").startswith("%sum = f32[2]{0} add(f32[2]{0} %x, f32[2]{0} %y)")
    assert lines(text, "r") == ("%r = f32[] reduce(f32[2]{0} %sum, f32[] %zero), dimensions={0}, "
                                "to_apply=%add")
    assert lines(text, "bc") == "%bc = f32[2]{0} broadcast(f32[] %r), dimensions={}"
    # The long form parses back to the same module.
    assert parse_hlo_module(text).to_string(print_operand_shape=True) == text


def test_large_constants_are_elided_unless_asked(module):
    default = module.to_string()
    assert lines(default, "big") == "%big = f32[11]{0} constant({...})"  # more than 10 elements
    assert lines(default, "ten") == "%ten = f32[10]{0} constant({0, 1, 2, 3, 4, 5, 6, 7, 8, 9})"
    full = module.to_string(print_large_constants=True)
    assert lines(full, "big") == "%big = f32[11]{0} constant({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10})"
    # {...} parses (as XLA's parser does), so the elided text is still a module.
    elided = parse_hlo_module(default)
    assert lines(elided.to_string(), "big") == "%big = f32[11]{0} constant({...})"


def test_tuple_constants_are_elided_unless_asked():
    text = """HloModule m

ENTRY e {
  ROOT c = (f32[], s32[2]) constant((1, {2, 3}))
}
"""
    m = parse_hlo_module(text)
    assert lines(module_to_string(m), "c") == "%c = (f32[], s32[2]{0}) constant({...})"
    assert lines(module_to_string(m, print_large_constants=True), "c") == (
        "%c = (f32[], s32[2]{0}) constant(( 1, {2, 3} ))")


def test_print_metadata_false(module):
    text = module.to_string(print_metadata=False)
    assert "metadata=" not in text
    assert lines(text, "sum") == "%sum = f32[2]{0} add(%x, %y)"


def test_print_metadata_only_op_name(module):
    text = module.to_string(print_metadata_only_op_name=True)
    assert lines(text, "sum") == '%sum = f32[2]{0} add(%x, %y), metadata={op_name="jit(f)/add"}'


def test_print_percent_false(module):
    text = module.to_string(print_percent=False)
    assert "%" not in text
    assert "\nadd (a: f32[], b: f32[]) -> f32[] {\n" in text
    assert lines(text, "r") == "r = f32[] reduce(sum, zero), dimensions={0}, to_apply=add"


def test_operand_index_annotations(module):
    default = module.to_string()
    assert lines(default, "t").endswith("tuple(%sum, %big, %ten, %x, %y, /*index=5*/%bc, %sum)")
    short = module_to_string(module, HloPrintOptions.short_parsable())
    assert lines(short, "t").endswith("tuple(sum, big, ten, x, y, bc, sum)")
    every_two = module.to_string(print_operand_index_annotation_interval=2)
    assert lines(every_two, "t").endswith(
        "tuple(%sum, %big, /*index=2*/%ten, %x, /*index=4*/%y, %bc, /*index=6*/%sum)")


def test_short_parsable(module):
    text = module_to_string(module, HloPrintOptions.short_parsable())
    assert "\nENTRY main {\n" in text and "\nadd {\n" in text  # no program shapes
    assert "metadata=" not in text and "%" not in text
    assert lines(text, "big") == "big = f32[11]{0} constant({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10})"


def test_result_shape_and_layout_options(module):
    assert lines(module.to_string(print_result_shape=False), "r") == (
        "%r = reduce(%sum, %zero), dimensions={0}, to_apply=%add")
    no_layout = module.to_string(include_layout_in_shapes=False, print_operand_shape=True)
    assert lines(no_layout, "bc") == "%bc = f32[2] broadcast(f32[] %r), dimensions={}"


def test_unknown_option_is_rejected(module):
    with pytest.raises(InvalidArgumentError, match=r"unknown print option\(s\) \['print_colour'\]"):
        module.to_string(print_colour=True)


def test_compact_gte():
    text = """HloModule m

ENTRY e {
  p = (f32[2], (s32[], f32[3])) parameter(0)
  a = f32[3] get-tuple-element(p), index=1
  ROOT n = f32[3] negate(p#1#1)
}
"""
    with pytest.raises(ParseError, match=r"instruction 'a' is defined twice|get-tuple-element"):
        parse_hlo_module(text.replace("index=1", "index=7"))
    m = parse_hlo_module(text.replace("  a = f32[3] get-tuple-element(p), index=1\n", ""))
    compact = module_to_string(m, compact_gte=True, print_operand_shape=True)
    assert "get-tuple-element" not in compact
    assert "ROOT %n = f32[3]{0} negate(f32[3]{0} %p#1#1)" in compact
    plain = module_to_string(m)
    assert "%p_1 = (s32[], f32[3]{0}) get-tuple-element(%p), index=1" in plain
    assert "%p_1_1 = f32[3]{0} get-tuple-element(%p_1), index=1" in plain


# -- omitted result shapes --------------------------------------------------------------------

INFERRED = """HloModule inferred

ENTRY e {
  x = f32[2,3] parameter(0)
  y = f32[2,3] parameter(1)
  a = add(x, y)
  c = compare(a, y), direction=LT
  d = dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={1}
  ROOT t = tuple(a, c, d)
}
"""


def test_omitted_result_shapes_are_inferred():
    text = module_to_string(parse_hlo_module(INFERRED), HloPrintOptions.short_parsable())
    assert lines(text, "a") == "a = f32[2,3]{1,0} add(x, y)"
    assert lines(text, "c") == "c = pred[2,3]{1,0} compare(a, y), direction=LT"
    assert lines(text, "d") == ("d = f32[2,2]{1,0} dot(x, y), lhs_contracting_dims={1}, "
                                "rhs_contracting_dims={1}")
    assert lines(text, "t") == ("t = (f32[2,3]{1,0}, pred[2,3]{1,0}, f32[2,2]{1,0}) "
                                "tuple(a, c, d)")


@pytest.mark.parametrize("given,message", [
    ("a = f32[3,2] add(x, y)", (r"hlo:6:3: add: the given shape f32\[3,2\]\{1,0\} is not compatible "
                               r"with the inferred shape f32\[2,3\]\{1,0\}")),
    ("a = s32[2,3] add(x, y)", r"hlo:6:3: add: the given shape s32\[2,3\]\{1,0\} is not compatible"),
    ("a = (f32[2,3]) add(x, y)", (r"hlo:6:3: add: the given shape \(f32\[2,3\]\{1,0\}\) is not "
                                 r"compatible")),
])
def test_given_incompatible_shape_is_rejected(given, message):
    with pytest.raises(ParseError, match=message):
        parse_hlo_module(INFERRED.replace("a = add(x, y)", given))


def test_given_shape_keeps_its_layout():
    text = module_to_string(parse_hlo_module(INFERRED.replace("a = add(x, y)",
                                                              "a = f32[2,3]{0,1} add(x, y)")))
    assert lines(text, "a") == "%a = f32[2,3]{0,1} add(%x, %y)"


# -- forms the printer normalises as XLA ------------------------------------------------------


def _entry_line(body: str, name: str = "r") -> str:
    text = f"HloModule m\n\nENTRY e {{\n  p = f32[4] parameter(0)\n  q = s32[4] parameter(1)\n{body}\n}}\n"
    return lines(module_to_string(parse_hlo_module(text), HloPrintOptions.short_parsable()), name)


@pytest.mark.parametrize("given,printed", [
    ("compare(p, p), direction=LT, type=FLOAT", "compare(p, p), direction=LT"),
    ("compare(p, p), direction=LT, type=TOTALORDER", "compare(p, p), direction=LT, type=TOTALORDER"),
    ("compare(q, q), direction=GE, type=SIGNED", "compare(q, q), direction=GE"),
])
def test_compare_type_printed_only_when_not_the_default(given, printed):
    assert _entry_line(f"  ROOT r = pred[4] {given}").endswith(printed)


@pytest.mark.parametrize("given,printed", [
    ("{mode=default}", ""),
    ("{mode=HIGHEST}", ", result_accuracy={mode=highest}"),
    ("{tolerance={rtol=0.5, atol=1.0, ulps=2}}", ", result_accuracy={tolerance={atol=1,rtol=0.5,ulps=2}}"),
    ("{tolerance={atol=1e-7}}", ", result_accuracy={tolerance={atol=1e-07,rtol=0,ulps=0}}"),
])
def test_result_accuracy_printed_as_xla(given, printed):
    line = _entry_line(f"  ROOT r = f32[4] exponential(p), result_accuracy={given}")
    assert line == f"r = f32[4]{{0}} exponential(p){printed}"


def test_single_sharding_on_a_tuple_becomes_a_tuple_sharding():
    body = "  ROOT r = (f32[4], s32[4], f32[4], f32[4], f32[4], f32[4]) tuple(p, q, p, p, p, p), sharding={replicated}"
    assert _entry_line(body).endswith(
        "sharding={{replicated}, {replicated}, {replicated}, {replicated}, {replicated}, "
        "/*index=5*/{replicated}}")
    kept = "  ROOT r = (f32[4], s32[4]) tuple(p, q), sharding={{maximal device=0}, {replicated}}"
    assert _entry_line(kept).endswith("sharding={{maximal device=0}, {replicated}}")


def test_origin_printed_after_the_attributes():
    """XLA's OriginalValueWithoutShape and EmptyLeafInOriginalValue."""
    text = """HloModule test

ENTRY %test {
  %a = f32[2,10]{1,0} parameter(0), origin={{"a"}}
  ROOT %v = abs(%a), origin={{"v"}}
}
"""
    short = module_to_string(parse_hlo_module(text), HloPrintOptions.short_parsable())
    assert 'a = f32[2,10]{1,0} parameter(0), origin={{"a"}}' in short
    assert 'ROOT v = f32[2,10]{1,0} abs(a), origin={{"v"}}' in short
    leaf = """HloModule test

ENTRY %test {
  ROOT op = ((f32[], f32[3]{0}), f32[2,3]) parameter(0),  origin={(({}, {"v2"}), {"v3"})}
}
"""
    assert 'origin={(({}, {"v2"}), {"v3"})}' in module_to_string(parse_hlo_module(leaf))

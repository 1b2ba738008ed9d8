"""Depth and size: deep tuple shapes, deep tuple literals, long call chains and long
instruction chains go through the parser, printer, verifier, clone and the IR's graph
operations on Python's default recursion limit (everything walks with stacks of its own),
and XLA's parser limit (HloParserOptions max_recursion_depth, default 500) holds."""

import sys

import pytest

from xlapy import ops
from xlapy.errors import InvalidArgumentError, ParseError
from xlapy.hlo.ir import Computation, callees_first
from xlapy.opdefs import make_instruction
from xlapy.ops.builder import XlaBuilder
from xlapy.parser import parse_hlo_module
from xlapy.shape import parse_shape
from xlapy.shape.literal import Literal, parse_literal, parse_literal_with_shape
from xlapy.shape.text import MAX_RECURSION_DEPTH
from xlapy.verifier import verify_module

DEPTH = 1000


@pytest.fixture(autouse=True)
def _default_recursion_limit():
    assert sys.getrecursionlimit() <= 1000  # nothing here may lean on a raised limit


def nested(depth: int, leaf: str = "f32[2]") -> str:
    return "(" * depth + leaf + ")" * depth


def tuple_chain_module(depth: int):
    """x -> tuple(x) -> tuple(tuple(x)) ... ``depth`` deep, then get-tuple-element back down:
    (the deepest tuple, negate(x))."""
    b = XlaBuilder("tuples")
    x = ops.Parameter(b, 0, parse_shape("f32[2]"), "x")
    t = x
    for _ in range(depth):
        t = ops.Tuple(b, [t])
    g = t
    for _ in range(depth):
        g = ops.GetTupleElement(g, 0)
    return b.build(ops.Tuple(b, [t, ops.Neg(g)])).module


def call_chain_text(depth: int) -> str:
    out = ["HloModule calls", "fn0 {\n  p = f32[4] parameter(0)\n  ROOT r = f32[4] add(p, p)\n}"]
    for i in range(1, depth + 1):
        out.append(f"fn{i} {{\n  p = f32[4] parameter(0)\n"
                   f"  ROOT r = f32[4] call(p), to_apply=fn{i - 1}\n}}")
    out.append(f"ENTRY e {{\n  p = f32[4] parameter(0)\n"
               f"  ROOT r = f32[4] call(p), to_apply=fn{depth}\n}}")
    return "\n\n".join(out) + "\n"


# -- shapes --------------------------------------------------------------------------------------


def test_max_recursion_depth_counts_every_shape_as_xla_does():
    assert MAX_RECURSION_DEPTH == 500  # HloParserOptions::kDefaultMaxRecursionDepth
    parse_shape(nested(499, "f32[]"))  # 499 tuple levels and the array: 500 ParseShape calls
    with pytest.raises(ParseError, match=r"shape:1:501: maximum recursion depth exceeded"):
        parse_shape(nested(500, "f32[]"))
    text = f"HloModule m\nENTRY e {{\n  ROOT p = {nested(600)} parameter(0)\n}}\n"
    with pytest.raises(ParseError, match="maximum recursion depth exceeded"):
        parse_hlo_module(text)
    assert parse_hlo_module(text, max_recursion_depth=601).entry.root.shape == \
        parse_hlo_module(text, max_recursion_depth=10_000).entry.root.shape


def test_max_recursion_depth_bounds_a_custom_call_literal():
    """XLA's DeeplyNestedUntypedTupleLiteralExceedsRecursionLimit: the parser's option bounds
    the tuples of a custom-call's literal= too."""
    text = ('HloModule test\nENTRY entry {\n  %constant = f32[1]{0} constant({0})\n'
            '  ROOT %custom-call = f32[1]{0} custom-call(f32[1]{0} %constant), '
            'custom_call_target="foo", literal=' + "(" * 11 + "s32[] 0" + ")" * 11 + "\n}")
    with pytest.raises(ParseError, match="maximum recursion depth exceeded"):
        parse_hlo_module(text, verify=False, max_recursion_depth=10)
    literal = parse_hlo_module(text, verify=False).entry.root.attrs["literal"]
    assert str(literal.shape) == "(" * 11 + "s32[]" + ")" * 11


@pytest.mark.parametrize("bad", [0, -1, True, 2.5, "500"])
def test_max_recursion_depth_must_be_a_positive_integer(bad):
    with pytest.raises(InvalidArgumentError, match="max_recursion_depth must be a positive"):
        parse_hlo_module("HloModule m\nENTRY e {\n  ROOT c = f32[] constant(1)\n}",
                         max_recursion_depth=bad)


def test_deep_tuple_shape_reads_prints_compares_and_hashes():
    text = nested(DEPTH, "f32[2]{0}, s32[]")
    module = parse_hlo_module(f"HloModule m\nENTRY e {{\n  ROOT p = {text} parameter(0)\n}}\n",
                              max_recursion_depth=DEPTH + 2)
    shape = module.entry.root.shape
    assert shape.to_string() == text
    again = parse_hlo_module(module.to_string(), max_recursion_depth=DEPTH + 2).entry.root.shape
    assert again is not shape and again == shape and hash(again) == hash(shape)
    assert len(shape.leaves()) == 2 and shape.leaves()[0][0] == (0,) * DEPTH
    assert shape.without_layout().with_default_layout() == shape
    assert not shape.is_dynamic() and shape.has_layout()
    other = parse_hlo_module(module.to_string().replace("s32[]", "s64[]"),
                             max_recursion_depth=DEPTH + 2).entry.root.shape
    assert other != shape and not other.compatible(shape) and hash(other) != hash(shape)


def test_equal_shapes_read_in_one_module_are_one_object():
    module = parse_hlo_module(f"""HloModule m
ENTRY e {{
  a = {nested(3)} parameter(0)
  b = {nested(3)} parameter(1)
  ROOT t = ({nested(3)}, {nested(3)}) tuple(a, b)
}}""")
    a, b = module.entry.parameters
    assert a.shape is b.shape
    assert module.entry.root.shape.tuple_shapes[0] is a.shape


# -- modules --------------------------------------------------------------------------------------


def test_tuple_nesting_of_depth_1000_prints_parses_and_verifies():
    module = tuple_chain_module(DEPTH)
    verify_module(module)
    text = module.to_string()
    with pytest.raises(ParseError, match="maximum recursion depth exceeded"):
        parse_hlo_module(text)  # XLA's default limit (500)
    back = parse_hlo_module(text, max_recursion_depth=DEPTH + 2)
    verify_module(back)
    assert back.to_string() == text
    assert back.clone(suffix="").to_string() == text


def test_call_chain_of_depth_2000_prints_parses_clones_and_verifies():
    depth = 2000
    text = call_chain_text(depth)
    module = parse_hlo_module(text)
    verify_module(module)
    assert module.to_string(print_large_constants=True).count("call(") == depth + 1
    order = module.post_order_computations()
    assert [c.name for c in order[:3]] == ["fn0", "fn1", "fn2"] and order[-1] is module.entry
    assert parse_hlo_module(module.to_string()).to_string() == module.to_string()
    assert module.clone(suffix="").to_string() == module.to_string()
    assert [c.name for c in callees_first([module.entry])] == [c.name for c in order]


def test_builder_build_copies_a_deep_call_chain():
    depth = 2000
    scalar = parse_shape("f32[]")
    callee = None
    for i in range(depth + 1):  # fn0 adds; fn<i> calls fn<i-1> (computations of no module)
        comp = Computation(f"fn{i}")
        p = comp.add_instruction(make_instruction("parameter", [], {"parameter_number": 0},
                                                  shape=scalar, name="p"))
        root = make_instruction("add", [p, p]) if callee is None else \
            make_instruction("call", [p], {"to_apply": callee})
        comp.set_root(comp.add_instruction(root))
        callee = comp
    b = XlaBuilder("top")
    x = ops.Parameter(b, 0, scalar, "x")
    built = b.build(ops.Call(b, callee, [x])).module
    assert [c.name for c in built.computations[:2]] == ["fn0", "fn1"]
    assert len(built.computations) == depth + 2 and built.entry.name == "top"
    assert all(c.module is built for c in built.computations)
    verify_module(built)


# -- nested operands and inline computations -------------------------------------------------------


def nested_operands_text(levels: int) -> str:
    """An instruction whose operand nests ``levels`` deep as the limit counts it: levels - 1
    nested operands, each in the one before, and the innermost one's shape."""
    expr = "p"
    for _ in range(levels):
        expr = f"f32[] negate({expr})"
    return f"HloModule m\nENTRY e {{\n  p = f32[] parameter(0)\n  ROOT r = {expr}\n}}\n"


def inline_computations_text(levels: int) -> str:
    """A map whose to_apply={...} nests ``levels`` deep as the limit counts it: levels - 1
    inline computations, each in the one before, and the innermost root's shape."""
    body = "a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b)"
    for _ in range(levels - 2):
        body = ("a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] map(a, b), "
                "dimensions={}, to_apply={" + body + "}")
    return ("HloModule m\nENTRY e {\n x = f32[] parameter(0)\n y = f32[] parameter(1)\n"
            " ROOT r = f32[] map(x, y), dimensions={}, to_apply={" + body + "}\n}\n")


@pytest.mark.parametrize("text_of", [nested_operands_text, inline_computations_text])
def test_nesting_is_bounded_by_max_recursion_depth_not_by_pythons_stack(text_of):
    """The parser keeps the nested readers on a list of its own, not on Python's stack: the
    limit is max_recursion_depth's, exactly."""
    for levels in (MAX_RECURSION_DEPTH - 1, MAX_RECURSION_DEPTH):
        module = parse_hlo_module(text_of(levels))
        verify_module(module)
    with pytest.raises(ParseError, match="maximum recursion depth exceeded"):
        parse_hlo_module(text_of(MAX_RECURSION_DEPTH + 1))
    assert sys.getrecursionlimit() <= 1000  # put back


@pytest.mark.parametrize("text_of", [nested_operands_text, inline_computations_text])
def test_a_raised_max_recursion_depth_holds_at_several_thousand(text_of):
    levels = 5000
    text = text_of(levels)
    module = parse_hlo_module(text, max_recursion_depth=levels)
    if text_of is nested_operands_text:  # one instruction per nested operand
        assert len(module.entry.instructions) == levels + 1
    else:  # one computation per inline one (levels - 1)
        assert len(module.computations) == levels  # and the entry
    with pytest.raises(ParseError, match="maximum recursion depth exceeded"):
        parse_hlo_module(text, max_recursion_depth=levels - 1)
    assert sys.getrecursionlimit() <= 1000


def test_inline_computation_bodies_pair_braces_as_the_lexer_reads():
    """An inline body is read after its instruction's attributes: its closing brace is found
    past braces in strings and comments; a body that does not close gives the error inside."""
    text = """HloModule m
ENTRY e {
  x = f32[] parameter(0)
  ROOT r = f32[] call(x), to_apply={ /* { */ // {
    a = f32[] parameter(0), frontend_attributes={k="}{"}
    ROOT c = f32[] custom-call(a), custom_call_target="t", backend_config="{{{"
  }, frontend_attributes={after="}"}
}
"""
    module = parse_hlo_module(text)
    root = module.entry.root
    callee = root.called_computations()[0]
    assert callee.root.backend_config == "{{{" and root.frontend_attributes == {"after": "}"}
    assert module.computations[0] is callee
    with pytest.raises(ParseError, match="expected '}' to end computation"):
        parse_hlo_module(text.replace('"{{{"\n  }', '"{{{"\n'))


def test_deep_texts_parse_at_once_from_several_threads():
    import threading

    results, errors = [], []

    def parse(levels):
        try:
            results.append(len(parse_hlo_module(nested_operands_text(levels),
                                                max_recursion_depth=levels).entry.instructions))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=parse, args=(n,)) for n in (2000, 3000, 400, 2500)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and sorted(results) == [401, 2001, 2501, 3001]
    assert sys.getrecursionlimit() <= 1000


# -- literals -------------------------------------------------------------------------------------


def test_tuple_literal_of_depth_1000_prints_parses_compares_and_hashes():
    shape = parse_hlo_module(f"HloModule m\nENTRY e {{\n  ROOT p = {nested(DEPTH)} parameter(0)\n}}",
                             max_recursion_depth=DEPTH + 1).entry.root.shape
    lit = Literal.zeros(shape)
    assert lit.leaves()[0].array.tolist() == [0, 0]
    text = lit.to_hlo_text(print_large_constants=True)
    assert text == "( " * DEPTH + "{0, 0}" + " )" * DEPTH
    back = parse_literal(text, shape)
    assert back == lit and hash(back) == hash(lit)
    assert parse_literal_with_shape(lit.to_string(), max_recursion_depth=DEPTH + 1) == lit
    with pytest.raises(ParseError, match="maximum recursion depth exceeded"):
        parse_literal_with_shape(lit.to_string())  # 500 by default, as shapes
    changed = parse_literal(text.replace("{0, 0}", "{0, 1}"), shape)
    assert changed != lit
    module = parse_hlo_module(
        f"HloModule c\nENTRY e {{\n  ROOT c = {nested(DEPTH)} constant({text})\n}}\n",
        max_recursion_depth=DEPTH + 2)
    assert module.entry.root.attrs["literal"] == lit
    verify_module(module)


# -- the IR's graph operations -----------------------------------------------------------------


def _chain(length: int):
    comp = Computation("c")
    x = comp.add_instruction(make_instruction("parameter", [], {"parameter_number": 0},
                                              shape=parse_shape("f32[3]"), name="x"))
    prev = x
    for _ in range(length):
        prev = comp.add_instruction(make_instruction("negate", [prev]))
    return comp, x, prev


def test_dead_chain_removed_in_one_call_and_instructions_stay_in_order():
    comp, x, last = _chain(5000)
    keep = comp.add_instruction(make_instruction("abs", [x]))
    comp.set_root(keep)
    assert comp.remove_dead_instructions() == 5000
    assert [i.name for i in comp.instructions] == ["x", keep.name]
    assert x.users == [keep] and last.parent is None
    again = comp.add_instruction(make_instruction("negate", [x]))
    assert comp.instructions[-1] is again and x.users == [keep, again]


def test_replace_all_uses_with_many_users():
    comp, x, _ = _chain(0)
    users = [comp.add_instruction(make_instruction("negate", [x])) for _ in range(5000)]
    y = comp.add_instruction(make_instruction("parameter", [], {"parameter_number": 1},
                                              shape=parse_shape("f32[3]"), name="y"))
    x.replace_all_uses_with(y)
    assert x.users == [] and y.users == users
    assert all(u.operands == [y] for u in users)
    comp.remove_instruction(users[10])
    assert users[10] not in y.users and len(y.users) == 4999
    assert users[10] not in comp.instructions and len(comp.instructions) == 5001

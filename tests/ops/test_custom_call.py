"""custom-call: its attribute kinds (output_to_operand_aliasing, operand_layout_constraints,
padding_type, literal=) read and print back XLA's texts, the rule's checks (layout
constraints, aliasing, api_version), the CustomCall builder functions and HLO texts from
xla/hlo/parser/hlo_parser_test.cc."""

import numpy as np
import pytest

from program_shapes import infer
from xlapy import ops
from xlapy.ops.builder import XlaBuilder
from xlapy.errors import InvalidArgumentError, ParseError
from xlapy.hlo.attrs.custom_call import (
    OUTPUT_TO_OPERAND_ALIASING,
    PADDING_TYPE,
    SHAPE_LIST,
    PaddingType,
)
from xlapy.hlo.attrs.enums import CustomCallApiVersion, CustomCallSchedule
from xlapy.hlo.attrs.literal import SHAPED_LITERAL
from xlapy.parser import parse_hlo_module
from xlapy.hlo.printer import HloPrintOptions, attribute_texts
from xlapy.opdefs import ShapeError
from xlapy.shape import parse_shape
from xlapy.shape.literal import Literal
from xlapy.shape.text import Scanner


def read(kind, text):
    sc = Scanner(text, "attr")
    value = kind.read(sc, None)
    assert sc.at_end(), text[sc.pos:]
    return value


def attr_text(instr):
    return ", ".join(attribute_texts(instr, HloPrintOptions.default()))


# -- kinds ----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind, text", [
    (OUTPUT_TO_OPERAND_ALIASING, "{{0}: (1, {}), {1}: (0, {0})}"),
    (OUTPUT_TO_OPERAND_ALIASING, "{{0,0,1,0}: (0, {1,0}), {1}: (0, {1,0})}"),
    (OUTPUT_TO_OPERAND_ALIASING, "{}"),
    (SHAPE_LIST, "{f32[42,2,3]{0,1,2}, f32[123,4]{1,0}}"),
    (SHAPE_LIST, "{(f32[2,2]{1,0}, f32[42,2,3]{2,0,1}), f32[123,4]{1,0}}"),
    (SHAPE_LIST, "{}"),
    (PADDING_TYPE, "PADDING_SAME"),
    (SHAPED_LITERAL, "s32[2]{0} {1, 2}"),
    (SHAPED_LITERAL, "( s32[4]{0} {4, 128, 128, 3}, pred[4]{0} {1, 0, 0, 0} )"),
    (SHAPED_LITERAL, "f32[] 0.1"),
])
def test_kind_round_trip(kind, text):
    assert kind.to_text(read(kind, text)) == text


def test_kind_values():
    value = read(OUTPUT_TO_OPERAND_ALIASING, "{ {0} : (1, { }) , {1}: (0, {0}) }")
    assert value == (((0,), (1, ())), ((1,), (0, (0,))))
    assert OUTPUT_TO_OPERAND_ALIASING.check([([0], [1, []])], "x") == (((0,), (1, ())),)
    with pytest.raises(InvalidArgumentError, match="each entry must be"):
        OUTPUT_TO_OPERAND_ALIASING.check([(0, 1)], "x")
    with pytest.raises(InvalidArgumentError, match="x: operand number must be >= 0, got -1"):
        OUTPUT_TO_OPERAND_ALIASING.check([((0,), (-1, ()))], "x")
    with pytest.raises(InvalidArgumentError, match="x: operand number must be an integer, got 1.0"):
        OUTPUT_TO_OPERAND_ALIASING.check([((0,), (1.0, ()))], "x")
    with pytest.raises(InvalidArgumentError, match=r"x: operand index \(a shape index\)\[0\] "
                                                   r"must be >= 0, got -1"):
        OUTPUT_TO_OPERAND_ALIASING.check([((0,), (1, (-1,)))], "x")
    with pytest.raises(InvalidArgumentError, match=r"x: output index \(a shape index\) must be "
                                                   r"a list of integers, got \['0'\]"):
        OUTPUT_TO_OPERAND_ALIASING.check([(["0"], (1, ()))], "x")
    assert read(PADDING_TYPE, "PADDING_VALID") is PaddingType.PADDING_VALID
    assert SHAPED_LITERAL.check(np.int32(3), "x") == Literal.from_array(np.int32(3))


@pytest.mark.parametrize("kind, text, message", [
    (OUTPUT_TO_OPERAND_ALIASING, "{{0} (1, {})}", r"expected <output_shape_index>: "
                                                   r"\(<operand_index>, <operand_shape_index>\)"),
    (OUTPUT_TO_OPERAND_ALIASING, "{{0}: (1 {})}", "expected <output_shape_index>"),
    (OUTPUT_TO_OPERAND_ALIASING, "{0: (1, {})}", "expected '{' at the start of a shape index"),
    (OUTPUT_TO_OPERAND_ALIASING, "{{0}: (x, {})}", r"expects integer \(an operand number\)"),
    (OUTPUT_TO_OPERAND_ALIASING, "{{0}: (1, {})", "expected '}' at the end of an "
                                                  "output_to_operand_aliasing list"),
    (SHAPE_LIST, "{f32[2], }", "expected primitive type"),
    (SHAPE_LIST, "f32[2]", "expected '{' to start a list of shapes"),
    (PADDING_TYPE, "PADDING_BOGUS", "expects padding type but sees: PADDING_BOGUS"),
    (SHAPED_LITERAL, "f32[2] {1}", r"expects 2 elements, but sees 1 \(literal shape f32\[2\]\)"),
])
def test_kind_malformed(kind, text, message):
    with pytest.raises(ParseError, match=message):
        read(kind, text)


# -- the rule -------------------------------------------------------------------------------


def test_custom_call_result_is_declared():
    assert infer("custom-call", "f32[2]", "f32[2,3]", custom_call_target="myfunc",
                 result="f32[3,3]") == parse_shape("f32[3,3]")
    with pytest.raises(ShapeError, match=r"custom-call: the result shape must be given"):
        infer("custom-call", custom_call_target="foo")
    with pytest.raises(InvalidArgumentError, match="missing required attribute "
                                                   "'custom_call_target'"):
        infer("custom-call", result="f32[]")
    with pytest.raises(ShapeError, match="Invalid API version: API_VERSION_UNSPECIFIED"):
        infer("custom-call", custom_call_target="foo", result="f32[]",
              api_version="API_VERSION_UNSPECIFIED")


def test_custom_call_layout_constraints():
    ok = infer("custom-call", "f32[42,2,3]{0,1,2}", "f32[123,4]{0,1}", custom_call_target="baz",
               operand_layout_constraints=[parse_shape("f32[42,2,3]{0,1,2}"),
                                           parse_shape("f32[123,4]{1,0}")],
               result="f32[1,2,3]{0,2,1}")
    assert str(ok) == "f32[1,2,3]{0,2,1}"
    # hlo_parser_test CustomCallWrongNumberofOperandConstraints / IncompatibleOperandConstraints
    with pytest.raises(ShapeError, match="Expected 2 operand layout constraints, 1 given"):
        infer("custom-call", "f32[42,2,3]", "f32[123,4]", custom_call_target="baz",
              operand_layout_constraints=[parse_shape("f32[42,2,3]{0,1,2}")], result="f32[]")
    with pytest.raises(ShapeError, match=r"Operand layout constraint shape f32\[555,5\]\{1,0\} "
                                         r"for operand 1 is not compatible with operand shape "
                                         r"f32\[123,4\]\{1,0\}"):
        infer("custom-call", "f32[42,2,3]", "f32[123,4]", custom_call_target="baz",
              operand_layout_constraints=[parse_shape("f32[42,2,3]{0,1,2}"),
                                          parse_shape("f32[555,5]{1,0}")], result="f32[]")
    no_layout = parse_shape("f32[2]", fill_missing_layouts=False)
    with pytest.raises(ShapeError, match=r"for operand 0 does not have a layout"):
        infer("custom-call", "f32[2]", custom_call_target="baz",
              operand_layout_constraints=[no_layout], result="f32[]")
    with pytest.raises(ShapeError, match="Layout must be set on layout-constrained custom call"):
        infer("custom-call", "f32[2]", custom_call_target="baz",
              operand_layout_constraints=[parse_shape("f32[2]")], result=no_layout)


def test_custom_call_aliasing():
    operands = ("(f32[2,2], f32[42,2,3])", "f32[123,4]")
    result = "(f32[123,4], f32[2,2], f32[1,2,3])"
    assert infer("custom-call", *operands, custom_call_target="baz", result=result,
                 output_to_operand_aliasing=[((0,), (1, ())), ((1,), (0, (0,)))]).is_tuple()
    with pytest.raises(ShapeError, match=r"custom-call: Different aliasing shapes: "
                                         r"f32\[42,2,3\]\{2,1,0\} vs f32\[2,2\]\{1,0\}"):
        infer("custom-call", *operands, custom_call_target="baz", result=result,
              output_to_operand_aliasing=[((1,), (0, (1,)))])
    with pytest.raises(ShapeError, match="Invalid aliasing operand index: 5"):
        infer("custom-call", *operands, custom_call_target="baz", result=result,
              output_to_operand_aliasing=[((1,), (5, ()))])


# -- builder --------------------------------------------------------------------------------


def test_custom_call_builders():
    b = XlaBuilder("cc")
    x = ops.Parameter(b, 0, parse_shape("f32[2]"), "x")
    y = ops.Parameter(b, 1, parse_shape("f32[2,3]"), "y")
    # The spec page's example: CustomCall("myfunc", {x, y}, f32[3x3]).
    out = ops.CustomCall(b, "myfunc", [x, y], parse_shape("f32[3,3]"), opaque="cfg",
                         has_side_effect=True, schedule=CustomCallSchedule.SCHEDULE_LATEST,
                         api_version=CustomCallApiVersion.API_VERSION_TYPED_FFI)
    assert out.shape == parse_shape("f32[3,3]")
    instr = out.instruction
    assert instr.backend_config == "cfg"
    assert attr_text(instr) == ('custom_call_target="myfunc", custom_call_has_side_effect=true, '
                                'schedule=SCHEDULE_LATEST, api_version=API_VERSION_TYPED_FFI')
    aliased = ops.CustomCall(b, "inplace", [x], parse_shape("f32[2]"),
                             output_operand_aliasing=[((), (0, ()))],
                             literal=Literal.from_array(np.array([1, 2], np.int32)))
    assert attr_text(aliased.instruction) == ('custom_call_target="inplace", '
                                              'literal=s32[2]{0} {1, 2}, '
                                              'output_to_operand_aliasing={{}: (0, {})}')
    laid = ops.CustomCallWithLayout(b, "baz", [y], parse_shape("f32[3,2]{0,1}"),
                                    [parse_shape("f32[2,3]{0,1}")])
    assert attr_text(laid.instruction) == ('custom_call_target="baz", '
                                           'operand_layout_constraints={f32[2,3]{0,1}}')
    sub = b.create_sub_builder("max")
    p = ops.Parameter(sub, 0, parse_shape("f32[]"), "p")
    called = ops.CustomCallWithComputation(b, "foo", [x], sub.build(ops.Neg(p)),
                                           parse_shape("f32[2]"))
    assert attr_text(called.instruction) == 'custom_call_target="foo", called_computations={%cc.max}'
    conv = ops.CustomCall(b, "__cudnn$convForward", [x], parse_shape("f32[2]"))
    assert conv.instruction.name == "cudnn-conv"


def test_custom_call_typed_window_and_labels():
    got = infer("custom-call", "f32[8]", custom_call_target="DynamicReduceWindowSamePadding",
                window="{size=3 pad=1_1}", dim_labels="b0f_0io->b0f", result="f32[8]")
    assert got == parse_shape("f32[8]")
    from xlapy.opdefs import get_opdef
    attrs = get_opdef("custom-call").check_attrs({"custom_call_target": "t",
                                                  "window": "size=2x2 stride=2x2",
                                                  "precision_config": ["high", "default"]})
    assert attrs["window"].to_text() == "size=2x2 stride=2x2"
    with pytest.raises(ParseError, match="window"):
        get_opdef("custom-call").check_attrs({"custom_call_target": "t", "window": "{size=}"})


def test_custom_call_builder_errors():
    b = XlaBuilder("cc")
    x = ops.Parameter(b, 0, parse_shape("f32[2]"), "x")
    with pytest.raises(InvalidArgumentError, match=r'Invalid custom_call_target "\$foo": Call '
                                                   r"targets that start with '\$' are reserved"):
        ops.CustomCall(b, "$foo", [x], parse_shape("f32[2]"))
    with pytest.raises(InvalidArgumentError, match="Must specify a shape with layout for each "
                                                   "operand for custom call with constrained "
                                                   "layout; given 0 shapes, expected 1"):
        ops.CustomCallWithLayout(b, "baz", [x], parse_shape("f32[2]{0}"), [])
    with pytest.raises(InvalidArgumentError, match="No layout specified for operand 0"):
        ops.CustomCallWithLayout(b, "baz", [x], parse_shape("f32[2]{0}"),
                                 [parse_shape("f32[2]", fill_missing_layouts=False)])
    with pytest.raises(InvalidArgumentError, match="Result shape must have layout"):
        ops.CustomCallWithLayout(b, "baz", [x], parse_shape("f32[2]", fill_missing_layouts=False),
                                 [parse_shape("f32[2]")])
    with pytest.raises(ShapeError, match="custom-call: Invalid aliasing output shape index"):
        ops.CustomCall(b, "f", [x], parse_shape("f32[2]"), output_operand_aliasing=[((0,), (0, ()))])


# -- HLO text -------------------------------------------------------------------------------

HLO = """HloModule m

ENTRY e {
  p0 = (f32[2,2]{0,1}, f32[42,2,3]{0,1,2}) parameter(0)
  p1 = f32[123,4]{0,1} parameter(1)
  ROOT custom-call = {shape} custom-call(p0, p1), {attrs}
}
"""


@pytest.mark.parametrize("shape, attrs", [
    ("(f32[1,2,3]{0,2,1}, f32[1,2,3]{1,2,0})", 'custom_call_target="baz", '
     'operand_layout_constraints={(f32[2,2]{1,0}, f32[42,2,3]{2,0,1}), f32[123,4]{1,0}}'),
    ("(f32[123,4]{0,1}, f32[2,2]{0,1}, f32[1,2,3]{0,1,2})", 'custom_call_target="baz", '
     'output_to_operand_aliasing={{0}: (1, {}), {1}: (0, {0})}'),
    ("f32[1,2,3]{0,2,1}", 'custom_call_target="foo\\"bar", literal=( s32[4]{0} {4, 128, 128, 3}, '
     'pred[4]{0} {1, 0, 0, 0} )'),
    ("f32[100]{0}", 'window={size=2x2}, dim_labels=b01f_01io->b01f, feature_group_count=2, '
     'custom_call_target="target"'),
    ("f32[1,2,1]{2,0,1}", 'window={size=1}, dim_labels=b0f_0io->b0f, operand_precision='
     '{high,default}, custom_call_target="DynamicConvolutionForward"'),
    ("f32[1]{0}", 'padding_type=PADDING_SAME, custom_call_target="foo", schedule=SCHEDULE_EARLIEST'),
    ("f32[1]{0}", 'custom_call_target="foo", api_version=API_VERSION_STATUS_RETURNING'),
])
def test_custom_call_hlo_text(shape, attrs):
    root = parse_hlo_module(HLO.replace("{shape}", shape).replace("{attrs}", attrs)).entry.root
    assert attr_text(root) == attrs


@pytest.mark.parametrize("attrs, message", [
    ('custom_call_target="foo", api_version=API_VERSION_THAT_DOESNT_EXIST',
     "expects custom-call API version but sees: API_VERSION_THAT_DOESNT_EXIST, "
     "error: Unknown API version: API_VERSION_THAT_DOESNT_EXIST"),
    ('custom_call_target="foo", api_version=API_VERSION_UNSPECIFIED',
     "Invalid API version: API_VERSION_UNSPECIFIED"),
    ('custom_call_target="baz", operand_layout_constraints={f32[2,2]{1,0}}',
     "Expected 2 operand layout constraints, 1 given"),
])
def test_custom_call_hlo_errors(attrs, message):
    with pytest.raises(ParseError, match=message):
        parse_hlo_module(HLO.replace("{shape}", "f32[1]{0}").replace("{attrs}", attrs))

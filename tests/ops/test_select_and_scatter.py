"""select-and-scatter: InferSelectAndScatterShape (shape_inference_test.cc's
SelectAndScatterShapeInferenceTest and the unbounded case) and the builder's
SelectAndScatter / SelectAndScatterWithGeneralPadding."""

import pytest

from xlapy import ops
from xlapy.hlo.attrs.window import Window
from xlapy.hlo.ir import Computation, Instruction
from xlapy.hlo.printer import module_to_string
from xlapy.opdefs import ShapeError, get_opdef
from xlapy.ops.builder import XlaBuilder
from xlapy.parser import parse_hlo_module
from xlapy.shape import parse_shape


def shape(s):
    return parse_shape(s) if isinstance(s, str) else s


def comp(params, result, name="c"):
    c = Computation(name)
    ps = [c.add_instruction(Instruction("parameter", shape(p), [], {"parameter_number": i}, f"p{i}"))
          for i, p in enumerate(params)]
    c.root = c.add_instruction(Instruction("custom-call", shape(result), ps, {}, "r"))
    return c


SELECT = comp(["f32[]", "f32[]"], "pred[]")
SCATTER = comp(["f32[]", "f32[]"], "f32[]")


def select_and_scatter(operand="f32[8,16]", source="f32[4,8]", init="f32[]",
                       window="size=2x2 stride=2x2", select=SELECT, scatter=SCATTER):
    d = get_opdef("select-and-scatter")
    attrs = d.check_attrs({"window": Window.parse(window), "select": select, "scatter": scatter})
    return str(d.infer_shape([shape(operand), shape(source), shape(init)], attrs))


def test_proper_shapes():
    assert select_and_scatter() == "f32[8,16]{1,0}"


@pytest.mark.parametrize("kwargs,message", [
    ({"source": "f32[4,6]"}, (r"Source shape does not match the shape of window-reduced operand: "
                              r"source\(f32\[4,6\]\{1,0\}\), window-reduced operand\(f32\[4,8\]\{1,0\}\).")),
    ({"select": comp(["f32[]"], "pred[]")},
     r"Select function must take 2 parameters, but takes 1 parameter\(s\)."),
    ({"select": comp(["f32[]", "f32[]"], "f32[]")}, "Select function must have rank-0 PRED result."),
    ({"select": comp(["s32[]", "f32[]"], "pred[]")},
     (r"Select function's first parameter shape currently must match the operand element shape, "
     r"but got s32\[\] vs f32\[\].")),
    ({"select": comp(["f32[]", "u32[]"], "pred[]")},
     "Select function's second parameter shape currently must match"),
    ({"scatter": comp(["f32[]", "f32[]", "f32[]"], "f32[]")},
     "Reduction function must take 2 parameters"),
    ({"init": "s32[]"}, (r"Reduction function's accumulator shape at index 0 differs from the init_value shape: "
                         r"f32\[\] vs s32\[\]")),
    ({"window": "size=2 stride=2"}, "Window has dimension 1 but base shape has dimension 2."),
    ({"operand": "(f32[8,16])"}, "Expected array argument for operand of select-and-scatter"),
])
def test_errors(kwargs, message):
    with pytest.raises(ShapeError, match="select-and-scatter: " + message):
        select_and_scatter(**kwargs)


def test_unbounded_and_padded_windows():
    # UnboundedSelectAndScatter: window 3 stride 2 pad 0_1 over '?' keeps '?'.
    assert select_and_scatter("f32[?,10]", "f32[?,10]", window="size=3x1 stride=2x1 pad=0_1x0_0") == "f32[?,10]{1,0}"
    # An overlapping 3x3 window with stride 2 over 8x16 padded by one.
    assert select_and_scatter("f32[8,16]", "f32[4,8]", window="size=3x3 stride=2x2 pad=1_1x1_1") == "f32[8,16]{1,0}"
    # Scalars: the empty window (hlo_parser_test's SelectAndScatterScalar).
    assert select_and_scatter("f32[]", "f32[]", window="") == "f32[]"
    # Source and operand types may differ in fp precision only.
    assert select_and_scatter("f32[8,16]", "bf16[4,8]", "bf16[]",
                              scatter=comp(["bf16[]", "bf16[]"], "bf16[]")) == "f32[8,16]{1,0}"


# -- builder --------------------------------------------------------------------------------


def computations():
    b = XlaBuilder("ge")
    lhs = ops.Parameter(b, 0, parse_shape("f32[]"), "lhs")
    rhs = ops.Parameter(b, 1, parse_shape("f32[]"), "rhs")
    ge = b.build(ops.Ge(lhs, rhs))
    b = XlaBuilder("add")
    lhs = ops.Parameter(b, 0, parse_shape("f32[]"), "a")
    rhs = ops.Parameter(b, 1, parse_shape("f32[]"), "b")
    return ge, b.build(ops.Add(lhs, rhs))


def test_builder_select_and_scatter():
    ge, add = computations()
    b = XlaBuilder("pool_grad")
    x = ops.Parameter(b, 0, parse_shape("f32[4,6]"), "x")
    g = ops.Parameter(b, 1, parse_shape("f32[2,2]"), "g")
    zero = ops.Parameter(b, 2, parse_shape("f32[]"), "zero")
    out = ops.SelectAndScatter(x, ge, [2, 3], [2, 3], ops.Padding.VALID, g, zero, add)
    assert str(out.shape) == "f32[4,6]{1,0}"
    assert [o.name for o in out.instruction.operands] == ["x", "g", "zero"]
    text = module_to_string(b.build(out).module)
    assert ("select-and-scatter(%x, %g, %zero), window={size=2x3 stride=2x3}, select=%ge, "
            "scatter=%add") in text
    assert str(parse_hlo_module(text).entry.root.shape) == "f32[4,6]{1,0}"


def test_builder_same_and_general_padding():
    ge, add = computations()
    b = XlaBuilder("pool_grad")
    x = ops.Parameter(b, 0, parse_shape("f32[5]"), "x")
    g = ops.Parameter(b, 1, parse_shape("f32[3]"), "g")
    zero = ops.Parameter(b, 2, parse_shape("f32[]"), "zero")
    same = ops.SelectAndScatter(x, ge, [3], [2], "SAME", g, zero, add)
    assert same.instruction.attrs["window"].to_text() == "size=3 stride=2 pad=1_1"
    general = ops.SelectAndScatterWithGeneralPadding(x, ge, [3], [2], [(1, 1)], g, zero, add)
    assert general.instruction.attrs["window"] == same.instruction.attrs["window"]
    with pytest.raises(ShapeError, match="Source shape does not match"):
        ops.SelectAndScatter(x, ge, [3], [2], ops.Padding.VALID, g, zero, add)
    with pytest.raises(ShapeError, match="select-and-scatter: Want input dimensions size 1"):
        ops.SelectAndScatter(x, ge, [3, 3], [2, 2], ops.Padding.VALID, g, zero, add)


def test_builder_dynamic_same_padding_builds_the_custom_call():
    ge, add = computations()
    b = XlaBuilder("dyn")
    x = ops.Parameter(b, 0, parse_shape("f32[<=5]"), "x")
    g = ops.Parameter(b, 1, parse_shape("f32[<=3]"), "g")
    zero = ops.Parameter(b, 2, parse_shape("f32[]"), "zero")
    out = ops.SelectAndScatter(x, ge, [3], [2], ops.Padding.SAME, g, zero, add)
    assert out.instruction.opcode == "custom-call"
    assert str(out.shape) == "f32[<=5]{0}"
    assert ('window={size=3 stride=2 pad=1_1}, custom_call_target="DynamicSelectAndScatterSamePadding", '
            "called_computations={%ge, %add}") in module_to_string(b.build(out).module)

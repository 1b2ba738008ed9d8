"""reduce-window: InferReduceWindowShape / InferWindowOutputShape (shape_inference_test.cc
cases, padding and dilations), the semantics page's examples, and the builder's
ReduceWindow / ReduceWindowWithGeneralPadding forms."""

import pytest

from xlapy import ops
from xlapy.errors import InvalidArgumentError
from xlapy.hlo.attrs.window import Window, WindowDimension
from xlapy.hlo.ir import Computation, Instruction
from xlapy.hlo.printer import module_to_string
from xlapy.opdefs import ShapeError, get_opdef
from xlapy.ops.builder import XlaBuilder
from xlapy.parser import parse_hlo_module
from xlapy.shape import parse_shape


def shape(s):
    return parse_shape(s) if isinstance(s, str) else s


def comp(params, result, name="reducer"):
    c = Computation(name)
    ps = [c.add_instruction(Instruction("parameter", shape(p), [], {"parameter_number": i}, f"p{i}"))
          for i, p in enumerate(params)]
    c.root = c.add_instruction(Instruction("custom-call", shape(result), ps, {}, "r"))
    return c


F32_ADD = comp(["f32[]", "f32[]"], "f32[]")


def reduce_window(*shapes, window, to_apply=F32_ADD):
    d = get_opdef("reduce-window")
    if isinstance(window, str):
        window = Window.parse(window)
    return str(d.infer_shape([shape(s) for s in shapes],
                             d.check_attrs({"window": window, "to_apply": to_apply})))


def test_reduce_window_in_half():
    assert reduce_window("f32[8,8]", "f32[]", window="size=2x2 stride=2x2") == "f32[4,4]{1,0}"


def test_semantics_page_examples():
    # A [4x6] input with 2x3 windows and 2x3 strides, VALID: [2x2].
    assert reduce_window("f32[4,6]", "f32[]", window="size=2x3 stride=2x3") == "f32[2,2]{1,0}"
    # [10000, 1000, 100, 10, 1], window 3, stride 2: VALID gives [100, 1], SAME pads one
    # element on each side and gives [1000, 10, 1].
    assert reduce_window("f32[5]", "f32[]", window="size=3 stride=2") == "f32[2]{0}"
    assert reduce_window("f32[5]", "f32[]", window="size=3 stride=2 pad=1_1") == "f32[3]{0}"


@pytest.mark.parametrize("operand,window,expected", [
    ("f32[13,12,8,15]", "size=1x1x7x1 stride=1x4x1x1 pad=0_0x0_0x3_3x0_0", "f32[13,3,8,15]{3,2,1,0}"),
    ("f32[4]", "size=3 lhs_dilate=2", "f32[5]{0}"),              # 4 -> 7 with holes
    ("f32[4]", "size=2 rhs_dilate=3", "f32[1]{0}"),              # dilated window of 4 fits once
    ("f32[10]", "size=2 rhs_dilate=3", "f32[7]{0}"),
    ("f32[10]", "size=3 stride=3 pad=-1_0", "f32[3]{0}"),        # negative padding trims
    ("f32[0,4]", "size=1x2", "f32[0,3]{1,0}"),
    ("f32[3]", "size=4", "f32[0]{0}"),                           # the window never fits
    ("f32[<=6,4]", "size=2x2 stride=2x2", "f32[<=3,2]{1,0}"),    # dynamic dims stay dynamic
    ("f32[?,4,8]", "size=1x2x4", "f32[?,3,5]{2,1,0}"),           # UnboundedReduceWindow
    ("f32[]", "", "f32[]"),                                      # rank 0: empty window
])
def test_window_output_shapes(operand, window, expected):
    assert reduce_window(operand, "f32[]", window=window) == expected


def test_variadic_reduce_window():
    # ReduceWindowMultiOutput
    to_apply = comp(["f32[]", "s32[]", "f32[]", "s32[]"], "(f32[], s32[])")
    assert (reduce_window("f32[5,3,1]", "s32[5,3,1]", "f32[]", "s32[]", window="size=1x2x4",
                          to_apply=to_apply) == "(f32[5,2,0]{2,1,0}, s32[5,2,0]{2,1,0})")
    # ErrorBadReduceWindowInput: the reducer's parameters do not match the inputs.
    bad = comp(["f32[]"] * 4, "(f32[], s32[])")
    with pytest.raises(ShapeError, match=r"f32\[\] vs s32\[\]"):
        reduce_window("f32[5,3,1]", "s32[5,3,1]", "f32[]", "s32[]", window="size=1x2x4",
                      to_apply=bad)
    # A scalar reduce-window with two inputs (hlo_parser_test's ReduceWindowVariadic).
    pair = comp(["f32[]"] * 4, "(f32[], f32[])")
    assert reduce_window("f32[]", "f32[]", "f32[]", "f32[]", window="", to_apply=pair) == "(f32[], f32[])"
    with pytest.raises(ShapeError, match="All reduced tensors must have the same dimension. "
                                         r"Tensor 0 has shape f32\[5,3\]\{1,0\}, Tensor 1 has "
                                         r"shape s32\[3,5\]\{1,0\}"):
        reduce_window("f32[5,3]", "s32[3,5]", "f32[]", "s32[]", window="size=1x1",
                      to_apply=comp(["f32[]", "s32[]"] * 2, "(f32[], s32[])"))


def test_result_element_type_is_the_init_values():
    to_apply = comp(["f32[]", "f32[]"], "f32[]")
    assert reduce_window("bf16[4]", "f32[]", window="size=2", to_apply=to_apply) == "f32[3]{0}"


@pytest.mark.parametrize("operand,window,message", [
    ("f32[4,4]", Window((WindowDimension(2),)),
     "Window has dimension 1 but base shape has dimension 2."),
    ("f32[4]", Window((WindowDimension(0),)),
     r"Window \{\(size=0\)\} has a non-positive dimension."),
    ("f32[4]", Window((WindowDimension(2, stride=0),)), "has a non-positive stride."),
    ("f32[4]", Window((WindowDimension(2, base_dilation=0),)),
     "has a non-positive base area dilation factor."),
    ("f32[4]", Window((WindowDimension(2, window_dilation=0),)),
     "has a non-positive window dilation factor."),
    ("f32[4]", Window((WindowDimension(2, padding_low=-3, padding_high=-3),)),
     "pads dimension 0 of f32\\[4\\]\\{0\\} to a negative size -2"),
    ("(f32[4])", Window((WindowDimension(2),)),
     r"Expected array argument for operand of reduce-window, but got \(f32\[4\]\{0\}\)."),
])
def test_window_errors(operand, window, message):
    with pytest.raises(ShapeError, match="reduce-window: .*" + message):
        reduce_window(operand, "f32[]", window=window)


def test_operand_count_errors():
    with pytest.raises(ShapeError, match="expects an even number of operands, but has 3 operands"):
        reduce_window("f32[4]", "f32[4]", "f32[]", window="size=1")
    with pytest.raises(ShapeError, match="reduce-window expects at least one input and init operand"):
        reduce_window(window="")
    with pytest.raises(ShapeError, match=r"accumulator shape at index 0 differs from the "
                                         r"init_value shape: f32\[\] vs s32\[\]"):
        reduce_window("f32[4]", "s32[]", window="size=2")


def test_parsed_reduce_windows_from_hlo_parser_test():
    module = parse_hlo_module("""HloModule R4UnitWindow_module

%add_F32.v3 (lhs: f32[], rhs: f32[]) -> f32[] {
  %lhs = f32[] parameter(0)
  %rhs = f32[] parameter(1)
  ROOT %add = f32[] add(f32[] %lhs, f32[] %rhs)
}

ENTRY %R4UnitWindow.v3 (operand: f32[13,12,8,15]) -> f32[13,3,8,15] {
  %operand = f32[13,12,8,15]{0,3,2,1} parameter(0)
  %constant = f32[] constant(0)
  %scalar = f32[] reduce-window(f32[] %constant, f32[] %constant), to_apply=%add_F32.v3
  ROOT %reduce-window = f32[13,3,8,15]{0,3,2,1} reduce-window(f32[13,12,8,15]{0,3,2,1} %operand, f32[] %scalar), window={size=1x1x7x1 stride=1x4x1x1 pad=0_0x0_0x3_3x0_0}, to_apply=%add_F32.v3
}
""")
    root = module.entry.root
    assert str(root.shape) == "f32[13,3,8,15]{0,3,2,1}"
    assert root.attrs["window"].dimensions[2] == WindowDimension(7, 1, 3, 3)
    with pytest.raises(Exception, match="is not compatible with the inferred shape"):
        parse_hlo_module("""HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}
ENTRY e {
  p = f32[8] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[5] reduce-window(p, z), window={size=2 stride=2}, to_apply=add
}""")


# -- builder --------------------------------------------------------------------------------


def max_computation():
    b = XlaBuilder("max")
    lhs = ops.Parameter(b, 0, parse_shape("f32[]"), "lhs")
    rhs = ops.Parameter(b, 1, parse_shape("f32[]"), "rhs")
    return b.build(ops.Max(lhs, rhs))


def test_builder_semantics_page_example():
    b = XlaBuilder("reduce_window_2x3")
    x = ops.Parameter(b, 0, parse_shape("f32[4,6]"), "input")
    init = ops.Parameter(b, 1, parse_shape("f32[]"), "init")
    y = ops.ReduceWindow(x, init, max_computation(), [2, 3], [2, 3], ops.Padding.VALID)
    assert str(y.shape) == "f32[2,2]{1,0}"
    assert y.instruction.attrs["window"].to_text() == "size=2x3 stride=2x3"
    same = ops.ReduceWindow(x, init, max_computation(), [2, 3], [1, 1], ops.Padding.SAME)
    assert str(same.shape) == "f32[4,6]{1,0}"
    assert same.instruction.attrs["window"].to_text() == "size=2x3 pad=0_1x1_1"
    assert str(b.build(y).program_shape()) == "(input: f32[4,6], init: f32[]) -> f32[2,2]"


def test_builder_variadic_and_general_padding():
    b = XlaBuilder("rw")
    x = ops.Parameter(b, 0, parse_shape("f32[10]"), "x")
    i = ops.Parameter(b, 1, parse_shape("s32[10]"), "i")
    fx = ops.Parameter(b, 2, parse_shape("f32[]"), "fx")
    fi = ops.Parameter(b, 3, parse_shape("s32[]"), "fi")
    pair = XlaBuilder("pair")
    a = [ops.Parameter(pair, n, parse_shape(t), f"a{n}") for n, t in enumerate(["f32[]", "s32[]"] * 2)]
    reducer = pair.build(ops.Tuple(pair, [ops.Max(a[0], a[2]), ops.Max(a[1], a[3])]))
    both = ops.ReduceWindow([x, i], [fx, fi], reducer, [3], [2], ops.Padding.VALID)
    assert str(both.shape) == "(f32[4]{0}, s32[4]{0})"
    assert len(both.instruction.operands) == 4
    dilated = ops.ReduceWindowWithGeneralPadding(x, fx, max_computation(), [3], [1], [2], [2],
                                                 [(1, 0)])
    # base 10 dilated by 2 -> 19, padded -> 20; window 3 dilated by 2 -> 5: 16 positions
    assert str(dilated.shape) == "f32[16]{0}"
    assert dilated.instruction.attrs["window"].to_text() == "size=3 pad=1_0 lhs_dilate=2 rhs_dilate=2"


def test_builder_dynamic_same_padding_builds_the_custom_call():
    b = XlaBuilder("dyn")
    x = ops.Parameter(b, 0, parse_shape("f32[<=8,4]"), "x")
    init = ops.Parameter(b, 1, parse_shape("f32[]"), "init")
    y = ops.ReduceWindow(x, init, max_computation(), [3, 1], [1, 1], ops.Padding.SAME)
    instr = y.instruction
    assert instr.opcode == "custom-call"
    assert instr.attrs["custom_call_target"] == "DynamicReduceWindowSamePadding"
    assert str(y.shape) == "f32[<=8,4]{1,0}"
    assert ("custom-call(%x, %init), window={size=3x1 pad=1_1x0_0}, "
            "custom_call_target=\"DynamicReduceWindowSamePadding\", called_computations={%max}"
            in module_to_string(b.build(y).module))

    # A trivial window over the dynamic dimension needs no custom-call.
    b = XlaBuilder("dyn2")
    x = ops.Parameter(b, 0, parse_shape("f32[<=8,4]"), "x")
    init = ops.Parameter(b, 1, parse_shape("f32[]"), "init")
    plain = ops.ReduceWindow(x, init, max_computation(), [1, 2], [1, 2], ops.Padding.SAME)
    assert plain.instruction.opcode == "reduce-window"


def test_builder_errors():
    b = XlaBuilder("bad")
    x = ops.Parameter(b, 0, parse_shape("f32[4,6]"), "x")
    init = ops.Parameter(b, 1, parse_shape("f32[]"), "init")
    with pytest.raises(ShapeError, match="reduce-window: Want input dimensions size 2 = window "
                                         "dimensions size 1 = window strides size 1"):
        ops.ReduceWindow(x, init, max_computation(), [2], [2], ops.Padding.VALID)
    with pytest.raises(ShapeError, match="Window dimension 1 has non-positive size 0"):
        ops.ReduceWindow(x, init, max_computation(), [2, 0], [1, 1], ops.Padding.VALID)
    with pytest.raises(ShapeError, match="reduce-window: Window has different number of window "
                                         "dimensions than of lhs dilation factors"):
        ops.ReduceWindowWithGeneralPadding(x, init, max_computation(), [2, 2], [1, 1], [2], [],
                                           [])
    with pytest.raises(InvalidArgumentError, match="padding must be Padding.SAME or Padding.VALID"):
        ops.ReduceWindow(x, init, max_computation(), [2, 2], [1, 1], "full")
    with pytest.raises(InvalidArgumentError, match="with one operand, init_value must be one XlaOp"):
        ops.ReduceWindow(x, [init], max_computation(), [2, 2], [1, 1], "valid")

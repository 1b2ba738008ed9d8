"""constant, after-all, add-dependency, opt-barrier, copy-start/copy-done: rules, builder
functions (ConstantLiteral / Constant / ConstantR0 / ConstantR1, AfterAll, CreateToken,
OptimizationBarrier) and HLO texts from xla/hlo/parser/hlo_parser_test.cc."""

import numpy as np
import pytest

from program_shapes import infer
from xlapy import ops
from xlapy.ops.builder import XlaBuilder
from xlapy.errors import InvalidArgumentError, ParseError
from xlapy.hlo.attrs.literal import CONSTANT_LITERAL
from xlapy.parser import parse_hlo_module
from xlapy.hlo.printer import HloPrintOptions, attribute_texts
from xlapy.opdefs import ShapeError
from xlapy.shape import PrimitiveType as P, Shape, parse_shape
from xlapy.shape.literal import Literal


# -- constant -------------------------------------------------------------------------------


def test_constant_rule_and_kind():
    lit = Literal.from_array(np.array([[1, 2], [3, 4]], np.int32))
    assert infer("constant", literal=lit) == parse_shape("s32[2,2]")
    assert infer("constant", literal=np.float32(1.5)) == parse_shape("f32[]")
    assert CONSTANT_LITERAL.to_text(lit) == "{ { 1, 2 }, { 3, 4 } }"
    big = Literal.from_array(np.arange(11, dtype=np.float32))
    assert CONSTANT_LITERAL.to_text(big) == "{...}"
    assert CONSTANT_LITERAL.to_text(big, print_large_constants=True).startswith("{0, 1, 2")
    with pytest.raises(InvalidArgumentError, match="must be a Literal"):
        infer("constant", literal="1")


@pytest.mark.parametrize("line", [
    "c = f32[] constant(42)",
    "c = s32[2,2]{1,0} constant({ { 1, 2 }, { 3, 4 } })",
    "c = pred[2]{0} constant({1, 0})",
    "c = (f32[], s32[2]{0}) constant((1, {2, 3}))",
    "c = f32[11]{0} constant({...})",
])
def test_constant_hlo_text(line):
    text = f"HloModule m\n\nENTRY e {{\n  ROOT {line}\n}}\n"
    root = parse_hlo_module(text).entry.root
    assert root.opcode == "constant"
    assert root.shape == parse_shape(line.split(" = ")[1].split(" constant")[0])
    inner = line.split("constant(", 1)[1][:-1]
    # As XLA's HloConstantInstruction: tuples and arrays past 10 elements print as {...}
    # unless print_large_constants.
    if root.shape.is_tuple():
        assert CONSTANT_LITERAL.to_text(root.attrs["literal"]) == "{...}"
        assert CONSTANT_LITERAL.to_text(root.attrs["literal"], print_large_constants=True) == (
            "( 1, {2, 3} )")
    else:
        assert CONSTANT_LITERAL.to_text(root.attrs["literal"]) == inner


def test_constant_hlo_errors():
    with pytest.raises(ParseError, match=r"expects 2 elements, but sees 3"):
        parse_hlo_module("HloModule m\nENTRY e {\n  ROOT c = f32[2] constant({1, 2, 3})\n}\n")


def test_constant_builders():
    b = XlaBuilder("k")
    c = ops.ConstantLiteral(b, Literal.from_array(np.array([1.5, 2.5], np.float32)))
    assert c.instruction.opcode == "constant" and c.shape == parse_shape("f32[2]")
    # All elements equal: a scalar constant and a broadcast, as XLA's builder does.
    ones = ops.Constant(b, np.ones((2, 3), np.float32))
    assert ones.instruction.opcode == "broadcast" and ones.shape == parse_shape("f32[2,3]")
    (scalar,) = ones.instruction.operands
    assert scalar.opcode == "constant" and scalar.shape == parse_shape("f32[]")
    assert scalar.attrs["literal"] == Literal.scalar(1.0, P.F32)
    # -0 and 0 differ bit for bit: no broadcast.
    assert ops.Constant(b, np.array([0.0, -0.0], np.float32)).instruction.opcode == "constant"
    assert ops.Constant(b, 3).shape == parse_shape("s64[]")
    assert ops.Constant(b, 2.0).shape == parse_shape("f64[]")
    assert ops.Constant(b, True).shape == parse_shape("pred[]")
    assert ops.ConstantR0(b, np.float32(1.5)).shape == parse_shape("f32[]")
    assert ops.ConstantR0(b, 7, P.S8).shape == parse_shape("s8[]")
    assert ops.ConstantR1(b, np.arange(3, dtype=np.int32)).shape == parse_shape("s32[3]")
    assert ops.ConstantR1(b, [1, 2], element_type="u8").shape == parse_shape("u8[2]")
    filled = ops.ConstantR1(b, 4, np.float32(0))  # XLA's ConstantR1(b, length, value)
    assert filled.shape == parse_shape("f32[4]") and filled.instruction.opcode == "broadcast"
    with pytest.raises(InvalidArgumentError, match=r"ConstantR0: expected a scalar, got shape "
                                                   r"\(2,\)"):
        ops.ConstantR0(b, [1, 2])
    with pytest.raises(InvalidArgumentError, match="ConstantR1: expected a rank-1 array"):
        ops.ConstantR1(b, np.zeros((2, 2)))
    with pytest.raises(InvalidArgumentError, match="ConstantLiteral: expected an XlaBuilder"):
        ops.ConstantLiteral(c, 1)
    comp = b.build(c)
    assert str(comp.program_shape()) == "() -> f32[2]"


# -- tokens ---------------------------------------------------------------------------------


def test_after_all_and_tokens():
    assert infer("after-all") == Shape.token()
    assert infer("after-all", "token[]", "token[]") == Shape.token()
    # HLO takes any operand (hlo_parser_test "AfterAllWithMultipleOperands" has an f32[]).
    assert infer("after-all", "f32[]", "token[]") == Shape.token()
    b = XlaBuilder("t")
    t0 = ops.CreateToken(b)
    assert t0.shape == Shape.token() and t0.instruction.operands == []
    t1 = ops.AfterAll(b, [t0, ops.CreateToken(b)])
    assert t1.shape == Shape.token() and t1.instruction.opcode == "after-all"
    x = ops.Parameter(b, 0, parse_shape("f32[]"), "x")
    with pytest.raises(InvalidArgumentError, match=r"All operands to AfterAll must be tokens; "
                                                   r"operand 1 has shape f32\[\]"):
        ops.AfterAll(b, [t0, x])


def test_add_dependency():
    assert infer("add-dependency", "f32[3]", "token[]") == parse_shape("f32[3]")
    with pytest.raises(ShapeError, match=r"add-dependency: Expected operand 1 to be "
                                         r"token-shaped, actual shape is f32\[\]"):
        infer("add-dependency", "f32[3]", "f32[]")
    text = """HloModule m

ENTRY e {
  p = f32[] parameter(0)
  neg = f32[] negate(p)
  token0 = token[] after-all(neg)
  p_after_token = f32[] add-dependency(p, token0)
  ROOT exp = f32[] exponential(p_after_token)
}
"""
    module = parse_hlo_module(text)
    assert module.entry.instruction("p_after_token").shape == parse_shape("f32[]")


def test_opt_barrier():
    t = "(f32[2], s32[], token[])"
    assert infer("opt-barrier", t) == parse_shape(t)
    b = XlaBuilder("o")
    x = ops.Parameter(b, 0, parse_shape("f32[2]"), "x")
    barrier = ops.OptimizationBarrier(ops.Tuple(b, [x, x]))
    assert barrier.shape == parse_shape("(f32[2], f32[2])")
    assert barrier.instruction.opcode == "opt-barrier"


# -- copy-start / copy-done -----------------------------------------------------------------


def test_copy_start_done():
    started = infer("copy-start", "f32[2,3]")
    assert started == parse_shape("(f32[2,3], f32[2,3], u32[])")
    assert infer("copy-done", started) == parse_shape("f32[2,3]")
    with pytest.raises(ShapeError, match=r"copy-done: Source and destination buffers in "
                                         r"CopyDone arguments need to be the same shape found "
                                         r"f32\[2\]\{0\} and f32\[3\]\{0\}"):
        infer("copy-done", "(f32[2], f32[3], u32[])")
    with pytest.raises(ShapeError, match="copy-done: the operand must be the"):
        infer("copy-done", "f32[2]")


def test_copy_hlo_text():
    text = """HloModule CopyStartAndCopyDone

ENTRY CopyStartAndCopyDone {
  v1 = f32[] constant(1)
  copy-start.1 = (f32[], f32[], u32[]) copy-start(f32[] v1), cross_program_prefetch_index=0
  copy-done.1 = f32[] copy-done((f32[], f32[], u32[]) copy-start.1)
  v2 = f32[2,3]{1,0:S(1)} constant({...})
  copy-start.2 = (f32[2,3]{1,0:S(2)}, f32[2,3]{1,0:S(1)}, u32[]) copy-start(f32[2,3]{1,0:S(1)} v2)
  ROOT copy-done.2 = f32[2,3]{1,0:S(2)} copy-done((f32[2,3]{1,0:S(2)}, f32[2,3]{1,0:S(1)}, u32[]) copy-start.2)
}
"""
    module = parse_hlo_module(text)
    first = module.entry.instruction("copy-start.1")
    assert attribute_texts(first, HloPrintOptions.default()) == ["cross_program_prefetch_index=0"]
    # The declared shapes keep their memory spaces.
    assert str(module.entry.root.shape) == "f32[2,3]{1,0:S(2)}"

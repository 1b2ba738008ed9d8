"""reduce: InferReduceShape and VerifyReducerShape (shape_inference_test.cc's
ReduceShapeInferenceTest and unbounded cases), the semantics page's examples (incl. the
variadic max/argmax reduction), and the builder's Reduce/ReduceAll forms."""

import pytest

from xlapy import ops
from xlapy.errors import InvalidArgumentError
from xlapy.hlo.ir import Computation, Instruction
from xlapy.hlo.printer import module_to_string
from xlapy.opdefs import ShapeError, get_opdef
from xlapy.ops.builder import XlaBuilder
from xlapy.parser import parse_hlo_module
from xlapy.shape import parse_shape


def shape(s):
    return parse_shape(s) if isinstance(s, str) else s


def comp(params, result, name="reducer"):
    """A computation with the given program shape (the rules read only that)."""
    c = Computation(name)
    ps = [c.add_instruction(Instruction("parameter", shape(p), [], {"parameter_number": i}, f"p{i}"))
          for i, p in enumerate(params)]
    c.root = c.add_instruction(Instruction("custom-call", shape(result), ps, {}, "r"))
    return c


def reduce(*shapes, dims, to_apply):
    d = get_opdef("reduce")
    return d.infer_shape([shape(s) for s in shapes],
                         d.check_attrs({"dimensions": dims, "to_apply": to_apply}))


F32_ADD = comp(["f32[]", "f32[]"], "f32[]")


@pytest.mark.parametrize("arg,dims,expected", [
    ("f32[128]", [0], "f32[]"),                  # ReduceVectorToScalar
    ("f32[2,3,4]", [0], "f32[3,4]{1,0}"),        # ReduceCubeAmongFirstDimension
    ("f32[2,3,4]", [1], "f32[2,4]{1,0}"),        # ...AmongMiddleDimension
    ("f32[2,3,4]", [0, 1], "f32[4]{0}"),         # ...AmongFirstTwoDimensions
    ("f32[2,3,4]", [1, 2], "f32[2]{0}"),         # ...AmongLastTwoDimensions
    ("f32[2,3,4]", [0, 2], "f32[3]{0}"),         # ...AmongFirstAndLastDimensions
    ("f32[2,3,4]", [2, 0], "f32[3]{0}"),         # the order of dimensions does not matter
    ("f32[2,3,4]", [0, 1, 2], "f32[]"),          # ...AmongAllDimensions
    ("f32[<=4,?,5]", [2], "f32[<=4,?]{1,0}"),    # dynamic dimensions are kept
    ("f32[3]", [], "f32[3]{0}"),
])
def test_reduce_shapes(arg, dims, expected):
    assert str(reduce(arg, "f32[]", dims=dims, to_apply=F32_ADD)) == expected


def test_semantics_page_examples():
    # A 2x3 matrix reduced over dimension 0 or 1; a 4x2x3 array over 0, 2, (0, 1), all.
    assert str(reduce("s32[2,3]", "s32[]", dims=[0], to_apply=comp(["s32[]"] * 2, "s32[]"))) == "s32[3]{0}"
    assert str(reduce("f32[2,3]", "f32[]", dims=[1], to_apply=F32_ADD)) == "f32[2]{0}"
    assert str(reduce("f32[4,2,3]", "f32[]", dims=[0], to_apply=F32_ADD)) == "f32[2,3]{1,0}"
    assert str(reduce("f32[4,2,3]", "f32[]", dims=[2], to_apply=F32_ADD)) == "f32[4,2]{1,0}"
    assert str(reduce("f32[4,2,3]", "f32[]", dims=[0, 1], to_apply=F32_ADD)) == "f32[3]{0}"
    assert str(reduce("f32[4,2,3]", "f32[]", dims=[0, 1, 2], to_apply=F32_ADD)) == "f32[]"


def test_variadic_reduce_multi_output():
    to_apply = comp(["f32[]", "s32[]", "f32[]", "s32[]"], "(f32[], s32[])")
    assert str(reduce("f32[5,3]", "s32[5,3]", "f32[]", "s32[]", dims=[0, 1],
                      to_apply=to_apply)) == "(f32[], s32[])"
    assert str(reduce("f32[5,3]", "s32[5,3]", "f32[]", "s32[]", dims=[1],
                      to_apply=to_apply)) == "(f32[5]{0}, s32[5]{0})"
    # One input with a reducer returning a 1-tuple gives a 1-tuple.
    one = comp(["f32[]", "f32[]"], "(f32[])")
    assert str(reduce("f32[5,3]", "f32[]", dims=[0], to_apply=one)) == "(f32[3]{0})"


def test_reduce_result_type_is_the_reducers():
    # VerifyReducerShape compares ignoring fp precision; the result takes the reducer's type.
    to_apply = comp(["f32[]", "f32[]"], "f32[]")
    assert str(reduce("bf16[4]", "bf16[]", dims=[0], to_apply=to_apply)) == "f32[]"


def test_unbounded_reduce():
    to_apply = comp(["f32[]"] * 6, "(f32[], f32[], f32[])")
    assert str(reduce("f32[7,5]", "f32[?,5]", "f32[7,?]", "f32[]", "f32[]", "f32[]", dims=[1],
                      to_apply=to_apply)) == "(f32[7]{0}, f32[7]{0}, f32[7]{0})"
    with pytest.raises(ShapeError, match="All reduced tensors must have compatible dimension. "
                                         r"Tensor at index 0 has shape f32\[7,5\]\{1,0\}, and "
                                         r"tensor at index 2 has shape f32\[5,\?\]\{1,0\}."):
        reduce("f32[7,5]", "f32[?,5]", "f32[5,?]", "f32[]", "f32[]", "f32[]", dims=[1],
               to_apply=to_apply)


@pytest.mark.parametrize("shapes,dims,params,result,message", [
    # ErrorMultiOutputBadReducerInput1
    (["f32[5,3]", "s32[5,3]", "f32[]", "s32[]"], [0, 1], ["f32[]", "s32[]"] * 3, "(f32[], s32[])",
     r"must take 4 parameters, but takes 6 parameter\(s\)"),
    # ErrorMultiOutputBadReducerInput2
    (["f32[5,3]", "s32[5,3]", "f32[]", "s32[]"], [0, 1], ["s32[]", "s32[]", "f32[]", "s32[]"],
     "(f32[], s32[])", (r"Reduction function's 0-th parameter shape differs from the result "
                       r"shape: s32\[\] vs f32\[\]")),
    # ErrorMultiOutputBadReducerOutput1
    (["f32[5,3]", "s32[5,3]", "f32[]", "s32[]"], [0, 1], ["f32[]", "s32[]"] * 2, "f32[]",
     "must produce a tuple with 2 elements, but produces a scalar"),
    # ErrorMultiOutputBadReducerOutput2
    (["f32[5,3]", "s32[5,3]", "f32[]", "s32[]"], [0, 1], ["f32[]", "s32[]"] * 2,
     "(f32[], s32[], s32[])", "must produce a tuple with 2 elements, but has 3 elements"),
    # ErrorMultiOutputBadReducerBoth
    (["f32[5,3]", "s32[5,3]", "f32[]", "s32[]"], [0, 1], ["s32[]"] * 4, "(s32[], s32[])",
     r"accumulator shape at index 0 differs from the init_value shape: s32\[\] vs f32\[\]"),
    # ErrorOutOfBoundsDimension
    (["f32[5,3]", "f32[]"], [3, 4], ["f32[]", "f32[]"], "f32[]",
     r"Reducing out-of-bounds dimension 3 in shape f32\[5,3\]\{1,0\}."),
    (["f32[5,3]", "f32[]"], [-1], ["f32[]", "f32[]"], "f32[]", "out-of-bounds dimension -1"),
    # ErrorToApplyArity
    (["f32[5,3]", "f32[]"], [0], ["f32[]"] * 3, "f32[]", "take 2 parameters"),
    # ErrorElementTypeVsApplyType
    (["f32[5,3]", "f32[]"], [0], ["f32[]", "f32[]"], "s32[]", "0-th parameter shape differs"),
    # ReduceWithRepeatedReduceDimension
    (["f32[5,3]", "f32[]"], [0, 0], ["f32[]", "f32[]"], "f32[]", "Duplicate reduction dimension: 0"),
    # the input element type must match the reducer's value parameter
    (["s32[5,3]", "f32[]"], [0], ["f32[]", "f32[]"], "f32[]",
     r"1-th parameter shape differs from the input type element type: f32\[\] vs s32\[\]"),
    # a reducer returning an array
    (["f32[5,3]", "f32[]"], [0], ["f32[]", "f32[]"], "f32[2]",
     r"must return a scalar or tuple of scalars but returns shape: f32\[2\]\{0\}"),
    (["f32[5,3]", "s32[5,3]", "f32[]", "s32[]"], [0], ["f32[]", "s32[]"] * 2, "(f32[], s32[2])",
     "must return a scalar or tuple of scalars"),
    (["f32[5,3]", "f32[]"], [0], ["f32[]", "f32[]"], "token[]",
     r"must produce a scalar or tuple of scalars, but has shape: token\[\]"),
    # the reduced inputs must have the same dimensions
    (["f32[5,3]", "s32[3,5]", "f32[]", "s32[]"], [0], ["f32[]", "s32[]"] * 2, "(f32[], s32[])",
     "All reduced tensors must have compatible dimension"),
    (["(f32[5])", "f32[]"], [0], ["f32[]", "f32[]"], "f32[]",
     r"Expected array argument for input 0 of reduce, but got \(f32\[5\]\{0\}\)."),
])
def test_reduce_errors(shapes, dims, params, result, message):
    with pytest.raises(ShapeError, match="reduce: .*" + message):
        reduce(*shapes, dims=dims, to_apply=comp(params, result))


def test_reduce_operand_count():
    # ErrorMultiOutputBadReducerInput3: no operands at all.
    to_apply = comp(["s32[]", "s32[]", "f32[]", "s32[]"], "(f32[], s32[])")
    with pytest.raises(ShapeError, match="Reduce must have at least 2 arguments, has 0"):
        reduce(dims=[0, 1], to_apply=to_apply)
    with pytest.raises(ShapeError, match="Reduce must have an even number of arguments, has 3"):
        reduce("f32[2]", "f32[2]", "f32[]", dims=[0], to_apply=F32_ADD)


def test_reduce_attributes_are_required():
    d = get_opdef("reduce")
    with pytest.raises(InvalidArgumentError, match="reduce: missing required attribute 'dimensions'"):
        d.check_attrs({"to_apply": F32_ADD})
    with pytest.raises(InvalidArgumentError, match="must be a computation"):
        d.check_attrs({"dimensions": [0], "to_apply": "add"})


# -- builder --------------------------------------------------------------------------------


def add_computation(t="f32"):
    b = XlaBuilder("add")
    lhs = ops.Parameter(b, 0, parse_shape(f"{t}[]"), "lhs")
    rhs = ops.Parameter(b, 1, parse_shape(f"{t}[]"), "rhs")
    return b.build(ops.Add(lhs, rhs))


def max_argmax():
    """The semantics page's f(max, argmax, value, index) reducer."""
    b = XlaBuilder("max_argmax")
    prev_max = ops.Parameter(b, 0, parse_shape("f32[]"), "prev_max")
    prev_argmax = ops.Parameter(b, 1, parse_shape("s32[]"), "prev_argmax")
    value = ops.Parameter(b, 2, parse_shape("f32[]"), "value")
    index = ops.Parameter(b, 3, parse_shape("s32[]"), "index")
    larger = ops.Ge(value, prev_max)
    return b.build(ops.Tuple(b, [ops.Select(larger, value, prev_max),
                                 ops.Select(larger, index, prev_argmax)]))


def test_builder_reduce_single_form():
    b = XlaBuilder("sum")
    x = ops.Parameter(b, 0, parse_shape("f32[4,6]"), "x")
    zero = ops.Parameter(b, 1, parse_shape("f32[]"), "zero")
    rows = ops.Reduce(x, zero, add_computation(), [1])
    assert str(rows.shape) == "f32[4]{0}"
    instr = rows.instruction
    assert instr.opcode == "reduce" and instr.attrs["dimensions"] == (1,)
    assert instr.attrs["to_apply"].program_shape().result == parse_shape("f32[]")
    # keyword arguments use XLA's parameter names
    assert str(ops.Reduce(operand=x, init_value=zero, computation=add_computation(),
                          dimensions_to_reduce=[0]).shape) == "f32[6]{0}"
    comp_ = b.build(rows)
    assert str(comp_.program_shape()) == "(x: f32[4,6], zero: f32[]) -> f32[4]"


def test_builder_variadic_argmax_reduce():
    b = XlaBuilder("argmax")
    values = ops.Parameter(b, 0, parse_shape("f32[1024]"), "values")
    init_value = ops.Parameter(b, 1, parse_shape("f32[]"), "init_value")
    init_index = ops.Parameter(b, 2, parse_shape("s32[]"), "init_index")
    indices = ops.Iota(b, parse_shape("s32[1024]"), 0)
    result = ops.Reduce(b, [values, indices], [init_value, init_index], max_argmax(), [0])
    assert str(result.shape) == "(f32[], s32[])"
    assert [o.name for o in result.instruction.operands] == ["values", indices.instruction.name,
                                                            "init_value", "init_index"]
    built = b.build(result)
    assert str(built.program_shape()) == ("(values: f32[1024], init_value: f32[], init_index: "
                                          "s32[]) -> (f32[], s32[])")
    text = module_to_string(built.module)
    assert "dimensions={0}, to_apply=%max_argmax" in text
    # The printed module parses back to the same shapes.
    again = parse_hlo_module(text)
    assert str(again.entry.root.shape) == "(f32[], s32[])"


def test_builder_reduce_all():
    b = XlaBuilder("all")
    x = ops.Parameter(b, 0, parse_shape("s32[2,3,4]"), "x")
    zero = ops.Parameter(b, 1, parse_shape("s32[]"), "zero")
    total = ops.ReduceAll(x, zero, add_computation("s32"))
    assert str(total.shape) == "s32[]"
    assert total.instruction.attrs["dimensions"] == (0, 1, 2)


def test_builder_errors_raise_at_the_call():
    b = XlaBuilder("bad")
    x = ops.Parameter(b, 0, parse_shape("f32[4,6]"), "x")
    zero = ops.Parameter(b, 1, parse_shape("s32[]"), "zero")
    with pytest.raises(ShapeError, match=r"reduce: Reduction function's accumulator shape at "
                                         r"index 0 differs from the init_value shape: f32\[\] vs s32\[\]"):
        ops.Reduce(x, zero, add_computation(), [0])
    with pytest.raises(ShapeError, match="Reducing out-of-bounds dimension 2"):
        ops.Reduce(b, [x], [x], add_computation(), [2])
    with pytest.raises(InvalidArgumentError, match="Reduce: operands must be a list of XlaOps"):
        ops.Reduce(b, x, [zero], add_computation(), [0])
    with pytest.raises(InvalidArgumentError, match="Reduce: expected an XlaComputation"):
        ops.Reduce(x, x, "add", [0])
    with pytest.raises(InvalidArgumentError, match="Reduce: .*argument"):
        ops.Reduce(x, zero, add_computation())
    other = XlaBuilder("other")
    y = ops.Parameter(other, 0, parse_shape("f32[]"), "y")
    with pytest.raises(InvalidArgumentError, match="was built by builder 'other'"):
        ops.Reduce(x, y, add_computation(), [0])


def test_parsed_tuple_reduce_from_hlo_parser_test():
    module = parse_hlo_module("""HloModule TupleReduce, entry_computation_layout={(f32[1024]{0}, s32[1024]{0})->(f32[], s32[])}

max_argmax {
  value = f32[] parameter(2)
  prev_max = f32[] parameter(0)
  is_next_larger = pred[] compare(value, prev_max), direction=GE
  max = f32[] select(is_next_larger, value, prev_max)
  index = s32[] parameter(3)
  prev_argmax = s32[] parameter(1)
  argmax = s32[] select(is_next_larger, index, prev_argmax)
  ROOT pair = (f32[], s32[]) tuple(max, argmax)
}

ENTRY reduce_entry {
  values = f32[1024]{0} parameter(0)
  indices = s32[1024]{0} parameter(1)
  init_value = f32[] constant(-inf)
  init_index = s32[] constant(-1)
  ROOT result = (f32[], s32[]) reduce(values, indices, init_value, init_index), dimensions={0}, to_apply=max_argmax
}
""")
    root = module.entry.root
    assert root.opcode == "reduce" and str(root.shape) == "(f32[], s32[])"
    assert ("ROOT %result = (f32[], s32[]) reduce(%values, %indices, %init_value, %init_index), "
            "dimensions={0}, to_apply=%max_argmax") in module_to_string(module)

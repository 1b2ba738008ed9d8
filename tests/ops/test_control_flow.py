"""map, call, while and conditional: the shape rules (cases of shape_inference_test.cc: Map,
MapThatChangesElementType, MapWithDifferentInputTypes, Call, WhileWithCorrectShapes,
WhileWithBadShapes, ConditionalPred, ConditionalIndexed, ConditionalDynamic and the
Unbounded* variants), the builder functions (Map, Call, CompositeCall, While, both
Conditional forms) and the HLO text of their attributes."""

import pytest

from program_shapes import comp, infer
from xlapy import ops
from xlapy.ops.builder import XlaBuilder
from xlapy.errors import InvalidArgumentError, ParseError
from xlapy.parser import parse_hlo_module
from xlapy.hlo.printer import HloPrintOptions, attribute_texts
from xlapy.opdefs import ShapeError
from xlapy.shape import parse_shape

F32, S32, PRED = "f32[]", "s32[]", "pred[]"
V32, V64, M32_48 = "f32[32]", "f32[64]", "f32[32,48]"


def attr_text(instr):
    return ", ".join(attribute_texts(instr, HloPrintOptions.default()))


# -- map ------------------------------------------------------------------------------------


def test_map_shapes():
    add2 = comp([F32, F32], F32)
    assert infer("map", V32, V32, dimensions=[0], to_apply=add2) == parse_shape(V32)
    assert infer("map", V32, dimensions=[0], to_apply=comp([F32], F32)) == parse_shape(V32)
    assert infer("map", "s32[64,64]", "s32[64,64]", "s32[64,64]", dimensions=[0, 1],
                 to_apply=comp([S32] * 3, S32)) == parse_shape("s32[64,64]")
    # MapThatChangesElementType / MapWithDifferentInputTypes.
    assert infer("map", "f32[20]", dimensions=[0], to_apply=comp([F32], S32)) == parse_shape(
        "s32[20]")
    assert infer("map", "f32[20]", "s32[20]", dimensions=[0],
                 to_apply=comp([F32, S32], S32)) == parse_shape("s32[20]")
    # A scalar of the same type stands in for an array.
    assert infer("map", F32, V32, dimensions=[0], to_apply=add2) == parse_shape(V32)
    # UnboundedMap.
    assert infer("map", "f32[2,?,?]", "f32[?,3,?]", dimensions=[0, 1, 2],
                 to_apply=add2) == parse_shape("f32[2,?,?]")


@pytest.mark.parametrize("args, params, result, message", [
    ([], [F32, F32], F32, "Map expects at least one argument."),
    ([V32, V64], [F32, F32], F32, r"Map operation requires all operands to have the same "
                                  r"shape; got: f32\[32\]\{0\}, f32\[64\]\{0\}."),
    ([V32, V32], [F32], F32, "Map applied function arity must match number of arguments; got: "
                             "arity: 1, arguments: 2."),
    (["f32[20]"], [F32, F32], F32, "Map applied function arity must match number of "
                                   "arguments; got: arity: 2, arguments: 1."),
    ([V32, V32], [F32, F32], V32, r"Mapped computation's result has to be a scalar; got: "
                                  r"f32\[32\]\{0\}."),
    ([V32, V32], [V32, F32], F32, r"Mapped computation's parameter has to be a scalar; got "
                                  r"parameter 0 shape: f32\[32\]\{0\}."),
    ([V32, V32], [F32, S32], F32, "Mapped computation's parameter type has to match argument "
                                  "element type; got parameter 1 shape: s32"),
    (["f32[20]"], [S32], S32, r"Mapped computation's parameter type has to match argument "
                              r"element type; got parameter 0 shape: s32\[\], argument shape: "
                              r"f32\[20\]\{0\}."),
])
def test_map_errors(args, params, result, message):
    dims = list(range(parse_shape(args[0]).rank)) if args else []
    with pytest.raises(ShapeError, match="map: " + message):
        infer("map", *args, dimensions=dims, to_apply=comp(params, result))


def test_map_dimensions():
    with pytest.raises(ShapeError, match="Map applied to a subset of dimensions currently not "
                                         "supported: arg_dimension_size: 2, "
                                         "requested_map_dimensions_size: 1."):
        infer("map", "f32[2,3]", dimensions=[0], to_apply=comp([F32], F32))
    with pytest.raises(ShapeError, match="Map requires monotonically increasing dimension "
                                         "numbers; got: 1, 0."):
        infer("map", "f32[2,3]", dimensions=[1, 0], to_apply=comp([F32], F32))


def _scalar_computation(b, name, n, op="Add", t="f32"):
    sub = b.create_sub_builder(name)
    ps = [ops.Parameter(sub, i, parse_shape(f"{t}[]"), f"p{i}") for i in range(n)]
    out = ps[0]
    for p in ps[1:]:
        out = getattr(ops, op)(out, p)
    return sub.build(out)


def test_map_builder_broadcasts_scalars():
    b = XlaBuilder("m")
    x = ops.Parameter(b, 0, parse_shape("f32[4,3]"), "x")
    s = ops.Parameter(b, 1, parse_shape("f32[]"), "s")
    m = ops.Map(b, [x, s], _scalar_computation(b, "add", 2), [0, 1])
    assert m.shape == parse_shape("f32[4,3]")
    a, c = m.instruction.operands
    assert a.name == "x" and c.opcode == "broadcast" and c.shape == parse_shape("f32[4,3]")
    assert attr_text(m.instruction).startswith("dimensions={0,1}, to_apply=%")
    with pytest.raises(InvalidArgumentError, match="static_operands is not supported in Map"):
        ops.Map(b, [x], _scalar_computation(b, "neg", 1), [0, 1], static_operands=[s])
    with pytest.raises(ShapeError, match="map: Map applied function arity must match"):
        ops.Map(b, [x], _scalar_computation(b, "add2", 2), [0, 1])
    assert str(b.build(m).program_shape()) == "(x: f32[4,3], s: f32[]) -> f32[4,3]"


# -- call -----------------------------------------------------------------------------------


def test_call_shapes():
    assert infer("call", to_apply=comp([], F32)) == parse_shape(F32)
    assert infer("call", F32, S32, PRED, V32, M32_48,
                 to_apply=comp([F32, S32, PRED, V32, M32_48], "s32[64,64]")) == parse_shape(
        "s32[64,64]")
    # UnboundedCall.
    assert infer("call", "f32[?,10]", "f32[10,?]",
                 to_apply=comp(["f32[10,?]", "f32[?,10]"], "f32[?,10]")) == parse_shape(
        "f32[?,10]")
    with pytest.raises(ShapeError, match=r"call: Call applied function arity must match number "
                                         r"of arguments; got: arity: 1, arguments: 0; "
                                         r"computation signature: \(p0: f32\[\]\) -> f32\[\]; "
                                         r"argument shapes: \[\]."):
        infer("call", to_apply=comp([F32], F32))
    with pytest.raises(ShapeError, match="arity must match"):
        infer("call", F32, to_apply=comp([], F32))
    with pytest.raises(ShapeError, match=r"Call parameter must match argument; got parameter 0 "
                                         r"shape: s32\[\], argument shape: f32\[\]."):
        infer("call", F32, to_apply=comp([S32], F32))


def test_call_and_composite_call_builders():
    b = XlaBuilder("c")
    x = ops.Parameter(b, 0, parse_shape("f32[]"), "x")
    add = _scalar_computation(b, "add", 2)
    called = ops.Call(b, add, [x, x])
    assert called.shape == parse_shape("f32[]")
    composite = ops.CompositeCall(b, add, [x, x], "foo.bar", version=1)
    instr = composite.instruction
    assert instr.frontend_attributes == {"composite.name": "foo.bar",
                                         "composite.attributes": "{}",
                                         "composite.version": "1"}
    assert attr_text(instr).endswith(", is_composite=true, frontend_attributes="
                                     "{composite.attributes={},composite.name=\"foo.bar\","
                                     "composite.version=\"1\"}")
    with pytest.raises(ShapeError, match="call: Call parameter must match argument"):
        ops.Call(b, add, [x, ops.Parameter(b, 1, parse_shape("s32[]"), "y")])
    with pytest.raises(InvalidArgumentError, match="Call: expected an XlaBuilder"):
        ops.Call(x, add, [x])


def test_call_hlo_text():
    text = """HloModule m

add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT add = f32[] add(x, y)
}

ENTRY e {
  c = f32[] constant(1)
  ROOT call = f32[] call(c, c), to_apply=%add, is_composite=true, frontend_attributes={composite.name="foo.bar",composite.version="1"}
}
"""
    root = parse_hlo_module(text).entry.root
    assert attr_text(root) == ("to_apply=%add, is_composite=true, frontend_attributes="
                               "{composite.name=\"foo.bar\",composite.version=\"1\"}")


# -- while ----------------------------------------------------------------------------------

T = "(s32[], f32[32])"


def test_while_shapes():
    assert infer("while", T, condition=comp([T], PRED), body=comp([T], T)) == parse_shape(T)
    # UnboundedWhile.
    assert infer("while", "f32[?]", condition=comp(["f32[?]"], PRED),
                 body=comp(["f32[?]"], "f32[?]")) == parse_shape("f32[?]")


@pytest.mark.parametrize("cond, body, message", [
    (comp([S32, T], PRED), comp([T], T), "Condition must take 1 arguments; got 2."),
    (comp([T], PRED), comp([S32, T], T), "Body must take 1 arguments; got 2."),
    (comp([T], S32), comp([T], T), r"Condition must return a boolean; got Condition: "
                                   r"\(p0: \(s32\[\], f32\[32\]\)\) -> s32\[\]; body: "),
    (comp([T], PRED), comp([T], V32), "The parameter of condition and body, the result of the "
                                      "body, and init must all have the same shape; got "),
])
def test_while_errors(cond, body, message):
    with pytest.raises(ShapeError, match="while: " + message):
        infer("while", T, condition=cond, body=body)


def test_while_builder_spec_example():
    """The spec page's loop: T = (s32 counter, f32[10] accumulator), adding a constant
    vector until the counter reaches 1000."""
    b = XlaBuilder("loop")
    t = parse_shape("(s32[], f32[10])")
    cb = b.create_sub_builder("cond")
    state = ops.Parameter(cb, 0, t, "state")
    cond = cb.build(ops.Lt(ops.GetTupleElement(state, 0), ops.ConstantR0(cb, 1000, "s32")))
    bb = b.create_sub_builder("body")
    state = ops.Parameter(bb, 0, t, "state")
    i = ops.Add(ops.GetTupleElement(state, 0), ops.ConstantR0(bb, 1, "s32"))
    v = ops.Add(ops.GetTupleElement(state, 1), ops.ConstantR1(bb, [1.0] * 10, element_type="f32"))
    body = bb.build(ops.Tuple(bb, [i, v]))
    init = ops.Tuple(b, [ops.ConstantR0(b, 0, "s32"), ops.ConstantR1(b, 10, 0.0,
                                                                      element_type="f32")])
    result = ops.While(cond, body, init)
    assert result.shape == t
    comp_ = b.build(result)
    assert str(comp_.program_shape()) == "() -> (s32[], f32[10])"
    root = comp_.computation.root
    assert attr_text(root) == "condition=%loop.cond, body=%loop.body"
    assert sorted(c.name for c in comp_.module.computations) == ["loop", "loop.body",
                                                                  "loop.cond"]
    with pytest.raises(ShapeError, match="while: The parameter of condition and body"):
        b2 = XlaBuilder("bad")
        ops.While(cond, body, ops.ConstantR0(b2, 0, "s32"))


# -- conditional ----------------------------------------------------------------------------


def cond(index, branches, operands):
    """conditional with the attribute form the index type calls for."""
    comps = [comp([p], r, f"b{i}") for i, (p, r) in enumerate(branches)]
    if index == PRED and len(comps) == 2:
        attrs = {"true_computation": comps[0], "false_computation": comps[1]}
    else:
        attrs = {"branch_computations": comps}
    return infer("conditional", index, *operands, **attrs)


def test_conditional_shapes():
    assert cond(PRED, [(V32, F32), (V64, F32)], [V32, V64]) == parse_shape(F32)
    assert cond(PRED, [(M32_48, V64), (V32, V64)], [M32_48, V32]) == parse_shape(V64)
    tup = "(f32[], f32[32])"
    assert cond(PRED, [(M32_48, V32), (tup, V32)], [M32_48, tup]) == parse_shape(V32)
    assert cond(S32, [(V32, F32), (V64, F32), (V64, F32)], [V32, V64, V64]) == parse_shape(F32)
    assert cond(S32, [(tup, V32)], [tup]) == parse_shape(V32)
    # ConditionalDynamic: dynamic in any branch makes the result dynamic.
    assert cond(S32, [(V32, "s32[4]"), (V64, "s32[<=4]"), (V64, "s32[<=4]")],
                [V32, V64, V64]) == parse_shape("s32[<=4]")
    assert cond(S32, [(V32, "s32[<=4]"), (V64, "s32[4]"), (V64, "s32[<=4]")],
                [V32, V64, V64]) == parse_shape("s32[<=4]")


@pytest.mark.parametrize("index, branches, operands, message", [
    (PRED, [(V64, F32), (V64, F32)], [V32, V64],
     r"branch operand 0 must match the shape of the only parameter of branch computation 0: "
     r"got operand: f32\[32\]\{0\}; computation: \(p0: f32\[64\]\) -> f32\[\]."),
    (PRED, [(V32, F32), (V32, F32)], [V32, V64],
     "branch operand 1 must match the shape of the only parameter of branch computation 1"),
    (PRED, [(V32, F32), (V64, V32)], [V32, V64],
     r"the result of branch 0 computation and branch 1 computation must have the same shape: "
     r"got branch 0 computation result: f32\[\]; branch 1 computation result: f32\[32\]\{0\}."),
    (S32, [(S32, F32), (V32, F32), (V32, F32)], [S32, V32, V64],
     "branch operand 2 must match the shape of the only parameter of branch computation 2"),
    (S32, [(V32, F32), (V32, F32), (V32, F32), (V64, V32)], [V32, V32, V32, V64],
     "the result of branch 0 computation and branch 3 computation must have the same shape"),
    (S32, [], [], r"Check failed: !branch_computations.empty\(\)"),
    (F32, [(V32, F32), (V64, F32)], [V32, V64], r"The first operand of indexed conditional "
                                                r"must be a scalar of S32. Got type F32."),
    ("s32[2]", [(V32, F32)], [V32], r"The first operand of conditional must be a scalar. Got "
                                    r"s32\[2\]\{0\}"),
])
def test_conditional_errors(index, branches, operands, message):
    with pytest.raises(ShapeError, match="conditional: " + message):
        cond(index, branches, operands)


def test_conditional_branch_arity_errors():
    two = [comp([F32, V32], V32, "b0"), comp([M32_48], V32, "b1")]
    with pytest.raises(ShapeError, match="branch computation 0 must take 1 argument; got 2."):
        infer("conditional", PRED, "(f32[], f32[32])", M32_48, true_computation=two[0],
              false_computation=two[1])
    with pytest.raises(ShapeError, match="branch computation 1 must take 1 argument"):
        infer("conditional", S32, M32_48, "(f32[], f32[32])",
              branch_computations=[two[1], two[0]])
    with pytest.raises(ShapeError, match="a conditional with a pred branch index takes "
                                         "true_computation and false_computation"):
        infer("conditional", PRED, V32, V32, branch_computations=[comp([V32], F32)] * 2)
    with pytest.raises(ShapeError, match="a conditional with an s32 branch index takes "
                                         "branch_computations"):
        infer("conditional", S32, V32, V32, true_computation=comp([V32], F32),
              false_computation=comp([V32], F32))
    with pytest.raises(ShapeError, match="conditional requires at least one operand"):
        infer("conditional", branch_computations=[comp([V32], F32)])


def _branch(b, name, op, t="f32[]"):
    sub = b.create_sub_builder(name)
    v = ops.Parameter(sub, 0, parse_shape(t), "v")
    return sub.build(getattr(ops, op)(v) if op else v)


def test_conditional_builders():
    b = XlaBuilder("c")
    p = ops.Parameter(b, 0, parse_shape("pred[]"), "p")
    i = ops.Parameter(b, 1, parse_shape("s32[]"), "i")
    x = ops.Parameter(b, 2, parse_shape("f32[]"), "x")
    neg, ident, floor = (_branch(b, "neg", "Neg"), _branch(b, "id", None),
                         _branch(b, "floor", "Floor"))
    two = ops.Conditional(p, x, neg, x, ident)
    assert two.shape == parse_shape("f32[]")
    assert attr_text(two.instruction) == "true_computation=%c.neg, false_computation=%c.id"
    many = ops.Conditional(i, [neg, ident, floor], [x, x, x])
    assert attr_text(many.instruction) == "branch_computations={%c.neg, %c.id, %c.floor}"
    # The indexed overload with a pred index and two branches is the predicated form.
    assert "true_computation" in attr_text(ops.Conditional(p, [neg, ident], [x, x]).instruction)
    with pytest.raises(InvalidArgumentError, match=r"Argument to predicated-Conditional is not "
                                                   r"a scalar of PRED type \(s32\[\]\)."):
        ops.Conditional(i, x, neg, x, ident)
    with pytest.raises(ShapeError, match=r"conditional: Check failed: 2 == "
                                         r"branch_computations.size\(\)"):
        ops.Conditional(p, [neg, ident, floor], [x, x, x])
    with pytest.raises(ShapeError, match=r"conditional: branch_index must be bool or int32_t; "
                                         r"got f32\[\]."):
        ops.Conditional(x, [neg], [x])
    with pytest.raises(InvalidArgumentError, match="Conditional: expected"):
        ops.Conditional(p, x)
    comp_ = b.build(many)
    assert str(comp_.program_shape()) == "(p: pred[], i: s32[], x: f32[]) -> f32[]"


CONDITIONAL_HLO = """HloModule m

Negate {
  x = f32[] parameter(0)
  ROOT negate = f32[] negate(x)
}

Identity {
  y = f32[] parameter(0)
  ROOT copy = f32[] copy(y)
}

ENTRY Parameters1.v4 {
  constant = {index} constant({value})
  constant.1 = f32[] constant(56)
  constant.2 = f32[] constant(12)
  ROOT conditional = f32[] conditional(constant, constant.1, constant.2), {attrs}
}
"""


@pytest.mark.parametrize("index, value, attrs", [
    ("pred[]", "true", "true_computation=%Negate, false_computation=%Identity"),
    ("s32[]", "1", "branch_computations={%Negate, %Identity}"),
])
def test_conditional_hlo_text(index, value, attrs):
    text = CONDITIONAL_HLO.replace("{index}", index).replace("{value}", value)
    root = parse_hlo_module(text.replace("{attrs}", attrs)).entry.root
    assert attr_text(root) == attrs


def test_conditional_hlo_form_must_match_index():
    text = CONDITIONAL_HLO.replace("{index}", "pred[]").replace("{value}", "true")
    with pytest.raises(ParseError, match="a conditional with a pred branch index takes "
                                         "true_computation and false_computation"):
        parse_hlo_module(text.replace("{attrs}", "branch_computations={%Negate, %Identity}"))

"""Interpreter kernels of call, while, conditional, fusion, scan, the async wrappers
(async-start/update/done), copy-start/copy-done, opt-barrier, after-all and add-dependency:
the operation-semantics page's examples (spec 002: While, Conditional (both forms), Call,
AfterAll, OptimizationBarrier), XLA's out-of-range branch index (behaviour doc: "An indexed
conditional with branch index < 0 or >= N runs branch N-1"), and every element type flowing
through the control flow unchanged."""

import numpy as np
import pytest
from movement_eval_helpers import ALL_TYPES, assert_same, run, sample

from xlapy import ops
from xlapy.interpreter import TOKEN, EvaluationError, evaluate
from xlapy.ops.builder import XlaBuilder
from xlapy.parser import parse_hlo_module
from xlapy.shape import parse_shape

F32 = parse_shape("f32[]")


def scalar_comp(name, fn, shapes=("f32[]", "f32[]")):
    b = XlaBuilder(name)
    params = [ops.Parameter(b, i, parse_shape(s), f"p{i}") for i, s in enumerate(shapes)]
    return b.build(fn(b, *params))


# -- While -----------------------------------------------------------------------------------

SPEC_WHILE = """
HloModule while_spec

cond {
  t = (s32[], f32[10]) parameter(0)
  i = s32[] get-tuple-element(t), index=0
  limit = s32[] constant(1000)
  ROOT lt = pred[] compare(i, limit), direction=LT
}

body {
  t = (s32[], f32[10]) parameter(0)
  i = s32[] get-tuple-element(t), index=0
  v = f32[10] get-tuple-element(t), index=1
  one = s32[] constant(1)
  next = s32[] add(i, one)
  c = f32[10] constant({1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
  w = f32[10] add(v, c)
  ROOT r = (s32[], f32[10]) tuple(next, w)
}

ENTRY e {
  zero = s32[] constant(0)
  z = f32[] constant(0)
  zv = f32[10] broadcast(z), dimensions={}
  init = (s32[], f32[10]) tuple(zero, zv)
  ROOT w = (s32[], f32[10]) while(init), condition=cond, body=body
}
"""


def test_while_spec_example():
    # The page's pseudocode: 1000 iterations adding constant_vector[10] to the accumulator.
    i, acc = run(SPEC_WHILE)
    assert_same(i, np.int32(1000))
    assert_same(acc, (1000 * np.arange(1, 11)).astype(np.float32))


def test_while_condition_false_at_once_returns_init():
    text = SPEC_WHILE.replace("constant(1000)", "constant(-5)")
    i, acc = run(text)
    assert_same(i, np.int32(0))
    assert_same(acc, np.zeros(10, np.float32))


def test_while_builder_data_dependent_trip_count():
    # Halve x until it is below 1: the trip count depends on the data.
    cond = scalar_comp("cond", lambda b, x: ops.Gt(x, ops.ConstantR0(b, np.float32(1))),
                       ["f32[]"])
    body = scalar_comp("body", lambda b, x: ops.Mul(x, ops.ConstantR0(b, np.float32(0.5))),
                       ["f32[]"])
    b = XlaBuilder("w")
    x = ops.Parameter(b, 0, F32, "x")
    comp = b.build(ops.While(cond, body, x))
    assert_same(evaluate(comp, np.float32(100)), np.float32(0.78125))


@pytest.mark.parametrize("type_name", ALL_TYPES)
def test_while_carries_every_type(type_name):
    # Three iterations of a counter next to a value of each type that the body rotates
    # (reverse): the carried value comes back reversed three times.
    text = f"""
HloModule m
cond {{
  t = (s32[], {type_name}[4]) parameter(0)
  i = s32[] get-tuple-element(t), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}}
body {{
  t = (s32[], {type_name}[4]) parameter(0)
  i = s32[] get-tuple-element(t), index=0
  v = {type_name}[4] get-tuple-element(t), index=1
  one = s32[] constant(1)
  next = s32[] add(i, one)
  r = {type_name}[4] reverse(v), dimensions={{0}}
  ROOT out = (s32[], {type_name}[4]) tuple(next, r)
}}
ENTRY e {{
  v = {type_name}[4] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], {type_name}[4]) tuple(zero, v)
  ROOT w = (s32[], {type_name}[4]) while(init), condition=cond, body=body
}}
"""
    v = sample(type_name, (4,))
    i, out = run(text, v)
    assert_same(i, np.int32(3))
    assert_same(out, v[::-1])


# -- Conditional -----------------------------------------------------------------------------

PRED_COND = """
HloModule m
on_true {
  x = f32[] parameter(0)
  ROOT n = f32[] negate(x)
}
on_false {
  y = (f32[], f32[]) parameter(0)
  a = f32[] get-tuple-element(y), index=0
  b = f32[] get-tuple-element(y), index=1
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  p = pred[] parameter(0)
  x = f32[] parameter(1)
  y = (f32[], f32[]) parameter(2)
  ROOT c = f32[] conditional(p, x, y), true_computation=on_true, false_computation=on_false
}
"""


def test_conditional_pred_form():
    # pred true runs true_computation on true_operand, false runs false_computation on
    # false_operand (the operands may have different types T0, T1).
    y = (np.float32(2), np.float32(5))
    assert_same(run(PRED_COND, True, np.float32(3), y), np.float32(-3))
    assert_same(run(PRED_COND, False, np.float32(3), y), np.float32(7))


def indexed(n_branches: int) -> str:
    branches = "\n".join(f"""
b{j} {{
  x = s32[] parameter(0)
  k = s32[] constant({10 * (j + 1)})
  ROOT r = s32[] add(x, k)
}}""" for j in range(n_branches))
    operands = ", ".join("x" for _ in range(n_branches))
    names = ", ".join(f"b{j}" for j in range(n_branches))
    return f"""
HloModule m
{branches}
ENTRY e {{
  i = s32[] parameter(0)
  x = s32[] parameter(1)
  ROOT c = s32[] conditional(i, {operands}), branch_computations={{{names}}}
}}
"""


@pytest.mark.parametrize("index, want", [(0, 10), (1, 20), (2, 30)])
def test_conditional_indexed_form(index, want):
    assert_same(run(indexed(3), np.int32(index), np.int32(0)), np.int32(want))


@pytest.mark.parametrize("index", [-1, 3, 7, -2**31, 2**31 - 1])
def test_conditional_index_out_of_range_runs_last_branch(index):
    # Spec: "If branch_index is an S32 which is < 0 or >= N, then branch_computations[N-1]
    # is executed as the default branch" (XLA:CPU agrees, behaviour doc).
    assert_same(run(indexed(3), np.int32(index), np.int32(1)), np.int32(31))


def test_conditional_single_branch():
    assert_same(run(indexed(1), np.int32(5), np.int32(1)), np.int32(11))


def test_conditional_runs_only_the_chosen_branch():
    # The untaken branch would fail (an infeed with nothing to read): only one branch runs.
    text = """
HloModule m
reads {
  x = f32[] parameter(0)
  t = token[] after-all()
  in = (f32[], token[]) infeed(t)
  ROOT v = f32[] get-tuple-element(in), index=0
}
keeps {
  ROOT x = f32[] parameter(0)
}
ENTRY e {
  p = pred[] parameter(0)
  x = f32[] parameter(1)
  ROOT c = f32[] conditional(p, x, x), true_computation=reads, false_computation=keeps
}
"""
    assert_same(run(text, False, np.float32(4)), np.float32(4))
    with pytest.raises(EvaluationError, match="infeed"):
        evaluate(parse_hlo_module(text), True, np.float32(4), timeout=0.01)


def test_conditional_builder_both_forms():
    neg = scalar_comp("neg", lambda b, x: ops.Neg(x), ["f32[]"])
    ident = scalar_comp("ident", lambda b, x: x, ["f32[]"])
    b = XlaBuilder("c")
    p = ops.Parameter(b, 0, parse_shape("pred[]"), "p")
    x = ops.Parameter(b, 1, F32, "x")
    comp = b.build(ops.Conditional(p, x, neg, x, ident))
    assert_same(evaluate(comp, True, np.float32(2)), np.float32(-2))
    assert_same(evaluate(comp, False, np.float32(2)), np.float32(2))
    b = XlaBuilder("c2")
    i = ops.Parameter(b, 0, parse_shape("s32[]"), "i")
    x = ops.Parameter(b, 1, F32, "x")
    comp = b.build(ops.Conditional(i, [neg, ident], [x, x]))
    assert_same(evaluate(comp, np.int32(0), np.float32(2)), np.float32(-2))
    assert_same(evaluate(comp, np.int32(9), np.float32(2)), np.float32(2))


@pytest.mark.parametrize("type_name", ALL_TYPES)
def test_conditional_selects_values_of_every_type(type_name):
    text = f"""
HloModule m
first {{
  t = ({type_name}[3], {type_name}[3]) parameter(0)
  ROOT a = {type_name}[3] get-tuple-element(t), index=0
}}
second {{
  t = ({type_name}[3], {type_name}[3]) parameter(0)
  ROOT b = {type_name}[3] get-tuple-element(t), index=1
}}
ENTRY e {{
  i = s32[] parameter(0)
  a = {type_name}[3] parameter(1)
  b = {type_name}[3] parameter(2)
  t = ({type_name}[3], {type_name}[3]) tuple(a, b)
  ROOT c = {type_name}[3] conditional(i, t, t), branch_computations={{first, second}}
}}
"""
    a, b = sample(type_name, (3,)), sample(type_name, (3,), offset=5)
    assert_same(run(text, np.int32(0), a, b), a)
    assert_same(run(text, np.int32(1), a, b), b)


# -- Call, fusion ------------------------------------------------------------------------------


def test_call_spec():
    # Call(computation, args...): the computation applied to the arguments.
    text = """
HloModule m
mad {
  a = f32[2] parameter(0)
  b = f32[2] parameter(1)
  c = f32[] parameter(2)
  m = f32[2] multiply(a, b)
  cc = f32[2] broadcast(c), dimensions={}
  ROOT r = f32[2] add(m, cc)
}
ENTRY e {
  a = f32[2] parameter(0)
  b = f32[2] parameter(1)
  c = f32[] parameter(2)
  ROOT r = f32[2] call(a, b, c), to_apply=mad
}
"""
    got = run(text, np.array([1, 2], np.float32), np.array([3, 4], np.float32), np.float32(0.5))
    assert_same(got, np.array([3.5, 8.5], np.float32))


def test_call_builder_nested_and_tuple_result():
    inner = scalar_comp("inner", lambda b, x, y: ops.Tuple(b, [ops.Add(x, y), ops.Sub(x, y)]))
    b = XlaBuilder("outer_body")
    x = ops.Parameter(b, 0, F32, "x")
    y = ops.Parameter(b, 1, F32, "y")
    first = ops.Call(b, inner, [x, y])
    outer = b.build(ops.Call(b, inner, [ops.GetTupleElement(first, 0),
                                        ops.GetTupleElement(first, 1)]))
    s, d = evaluate(outer, np.float32(5), np.float32(3))
    assert_same(s, np.float32(10))  # (5+3) + (5-3)
    assert_same(d, np.float32(6))   # (5+3) - (5-3)


def test_fusion_evaluates_the_fused_computation():
    text = """
HloModule m
fused {
  p0 = f32[3] parameter(0)
  p1 = f32[3] parameter(1)
  m = f32[3] multiply(p0, p1)
  ROOT s = f32[3] subtract(m, p0)
}
ENTRY e {
  a = f32[3] parameter(0)
  b = f32[3] parameter(1)
  ROOT f = f32[3] fusion(a, b), kind=kLoop, calls=fused
}
"""
    a = np.array([0, 1, 2], np.float32)
    assert_same(run(text, a, np.full(3, 0.5, np.float32)), np.array([0, -0.5, -1], np.float32))


# -- scan ---------------------------------------------------------------------------------------

SCAN = """
HloModule m
step {
  x = f32[2] parameter(0)
  c = f32[2] parameter(1)
  s = f32[2] add(x, c)
  ROOT t = (f32[2], f32[2]) tuple(s, s)
}
ENTRY e {
  xs = f32[3,2] parameter(0)
  init = f32[2] parameter(1)
  ROOT r = (f32[3,2], f32[2]) scan(xs, init), dimensions={0}, num_carries=1, REVERSE to_apply=step
}
"""


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_cumulative_sum(reverse):
    text = SCAN.replace("REVERSE", "is_reverse=true," if reverse else "")
    xs = np.arange(6, dtype=np.float32).reshape(3, 2)
    outs, carry = run(text, xs, np.array([100, 200], np.float32))
    sums = np.cumsum(xs[::-1] if reverse else xs, axis=0) + [100, 200]
    assert_same(outs, (sums[::-1] if reverse else sums).astype(np.float32))
    assert_same(carry, (xs.sum(0) + [100, 200]).astype(np.float32))


# -- async wrappers, copies, barriers, tokens ---------------------------------------------------


def test_async_start_update_done():
    # The async value is ((operands...), result, context...); done returns the result.
    text = """
HloModule m
wrapped {
  a = f32[3] parameter(0)
  b = f32[3] parameter(1)
  ROOT s = f32[3] add(a, b)
}
ENTRY e {
  a = f32[3] parameter(0)
  b = f32[3] parameter(1)
  start = ((f32[3], f32[3]), f32[3], u32[]) async-start(a, b), calls=wrapped
  update = ((f32[3], f32[3]), f32[3], u32[]) async-update(start), calls=wrapped
  ROOT done = f32[3] async-done(update), calls=wrapped
}
"""
    a, b = np.array([1, 2, 3], np.float32), np.array([10, 20, 30], np.float32)
    assert_same(run(text, a, b), a + b)


def test_async_value_is_the_async_tuple():
    text = """
HloModule m
wrapped {
  a = s32[2] parameter(0)
  ROOT n = s32[2] negate(a)
}
ENTRY e {
  a = s32[2] parameter(0)
  ROOT start = ((s32[2]), s32[2], u32[]) async-start(a), calls=wrapped
}
"""
    (operands, result, context) = run(text, np.array([4, -5], np.int32))
    assert_same(operands[0], np.array([4, -5], np.int32))
    assert_same(result, np.array([-4, 5], np.int32))
    assert_same(context, np.uint32(0))


def test_copy_start_copy_done():
    text = """
HloModule m
ENTRY e {
  a = f32[2,2] parameter(0)
  cs = (f32[2,2], f32[2,2], u32[]) copy-start(a)
  ROOT cd = f32[2,2] copy-done(cs)
}
"""
    a = np.array([[1, 2], [3, 4]], np.float32)
    assert_same(run(text, a), a)


def test_opt_barrier_spec_is_identity_on_tuples():
    # OptimizationBarrier only orders evaluation; its value is its operand.
    text = """
HloModule m
ENTRY e {
  a = f32[2] parameter(0)
  b = s32[] parameter(1)
  t = (f32[2], s32[]) tuple(a, b)
  ROOT o = (f32[2], s32[]) opt-barrier(t)
}
"""
    a, i = run(text, np.array([1.5, -2], np.float32), np.int32(7))
    assert_same(a, np.array([1.5, -2], np.float32))
    assert_same(i, np.int32(7))


def test_after_all_spec_joins_tokens():
    # AfterAll takes a variadic number of tokens and produces a single token.
    text = """
HloModule m
ENTRY e {
  t0 = token[] after-all()
  t1 = token[] after-all()
  ROOT t = token[] after-all(t0, t1)
}
"""
    assert run(text) is TOKEN
    b = XlaBuilder("tokens")
    t = ops.AfterAll(b, [ops.CreateToken(b), ops.CreateToken(b)])
    assert evaluate(b.build(t)) is TOKEN


def test_add_dependency_is_its_value():
    text = """
HloModule m
ENTRY e {
  a = f32[2] parameter(0)
  t = token[] after-all()
  ROOT d = f32[2] add-dependency(a, t)
}
"""
    assert_same(run(text, np.array([3, 4], np.float32)), np.array([3, 4], np.float32))

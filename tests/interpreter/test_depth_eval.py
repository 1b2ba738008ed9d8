"""The interpreter on deep programs, on Python's default recursion limit: long call chains,
nested while loops and conditionals (EvalContext runs called computations on a stack of
frames), values nested 1,000 tuples deep in and out, a reducer that is a deep call chain,
and a long elementwise chain, each checked against a direct computation."""

import sys

import numpy as np
import pytest

from xlapy.errors import InvalidArgumentError
from xlapy.interpreter import EvaluationError, evaluate
from xlapy.interpreter.evaluator import EvalContext, EvalOptions
from xlapy.interpreter.values import flatten, to_value, value_to_literal
from xlapy.parser import parse_hlo_module
from xlapy.shape.literal import Literal


@pytest.fixture(autouse=True)
def _default_recursion_limit():
    assert sys.getrecursionlimit() <= 1000  # nothing here may lean on a raised limit


def nested(depth: int, leaf: str = "f32[2]") -> str:
    return "(" * depth + leaf + ")" * depth


def call_chain(depth: int) -> str:
    out = ["HloModule calls", "fn0 {\n  p = f32[4] parameter(0)\n  ROOT r = f32[4] add(p, p)\n}"]
    for i in range(1, depth + 1):
        out.append(f"fn{i} {{\n  p = f32[4] parameter(0)\n"
                   f"  ROOT r = f32[4] call(p), to_apply=fn{i - 1}\n}}")
    out.append(f"ENTRY e {{\n  p = f32[4] parameter(0)\n"
               f"  ROOT r = f32[4] call(p), to_apply=fn{depth}\n}}")
    return "\n".join(out)


def nested_whiles(depth: int, innermost: str = "x1 = f32[4] add(x, x)") -> str:
    """``depth`` while loops, each body running the next one once; the innermost computes
    ``x1`` from ``x`` by the ``innermost`` lines (default: doubles)."""
    state = "(s32[], f32[4])"
    out = ["HloModule whiles",
           (f"cond {{\n  p = {state} parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n"
           f"  n = s32[] constant(1)\n  ROOT lt = pred[] compare(i, n), direction=LT\n}}"),
           (f"b0 {{\n  p = {state} parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n"
           f"  x = f32[4] get-tuple-element(p), index=1\n  one = s32[] constant(1)\n"
           f"  i1 = s32[] add(i, one)\n  {innermost}\n"
           f"  ROOT t = {state} tuple(i1, x1)\n}}")]
    for k in range(1, depth + 1):
        out.append(
            f"b{k} {{\n  p = {state} parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n"
            f"  x = f32[4] get-tuple-element(p), index=1\n  z = s32[] constant(0)\n"
            f"  init = {state} tuple(z, x)\n"
            f"  w = {state} while(init), condition=cond, body=b{k - 1}\n"
            f"  x2 = f32[4] get-tuple-element(w), index=1\n  one = s32[] constant(1)\n"
            f"  i1 = s32[] add(i, one)\n  ROOT t = {state} tuple(i1, x2)\n}}")
    out.append(f"ENTRY e {{\n  p = f32[4] parameter(0)\n  z = s32[] constant(0)\n"
               f"  init = {state} tuple(z, p)\n"
               f"  w = {state} while(init), condition=cond, body=b{depth}\n"
               f"  ROOT r = f32[4] get-tuple-element(w), index=1\n}}")
    return "\n".join(out)


def nested_conditionals(depth: int) -> str:
    """Level k: branch 0 runs level k-1, branch 1 negates (an s32 index, out of range:
    the last branch)."""
    out = ["HloModule conds",
           ("l0 {\n  p = (s32[], f32[4]) parameter(0)\n  x = f32[4] get-tuple-element(p), index=1\n"
           "  ROOT r = f32[4] add(x, x)\n}"),
           ("neg {\n  p = (s32[], f32[4]) parameter(0)\n  x = f32[4] get-tuple-element(p), index=1\n"
           "  ROOT r = f32[4] negate(x)\n}")]
    for k in range(1, depth + 1):
        out.append(f"l{k} {{\n  p = (s32[], f32[4]) parameter(0)\n"
                   f"  i = s32[] get-tuple-element(p), index=0\n"
                   f"  ROOT r = f32[4] conditional(i, p, p), branch_computations={{l{k - 1}, neg}}\n}}")
    out.append(f"ENTRY e {{\n  i = s32[] parameter(0)\n  x = f32[4] parameter(1)\n"
               f"  p = (s32[], f32[4]) tuple(i, x)\n"
               f"  ROOT r = f32[4] conditional(i, p, p), branch_computations={{l{depth}, neg}}\n}}")
    return "\n".join(out)


X = np.array([1, -2, 3.5, 0], np.float32)


def test_call_chain_of_depth_2000():
    np.testing.assert_array_equal(evaluate(parse_hlo_module(call_chain(2000)), X), X + X)


def test_nested_while_loops_200_deep():
    np.testing.assert_array_equal(evaluate(parse_hlo_module(nested_whiles(200)), X), X + X)


def test_nested_conditionals_2000_deep():
    module = parse_hlo_module(nested_conditionals(2000))
    for index, want in [(0, X + X), (1, -X), (7, -X)]:
        np.testing.assert_array_equal(evaluate(module, np.int32(index), X), want)


def test_a_kernel_error_deep_in_a_call_chain_names_the_instruction():
    text = call_chain(1500).replace("ROOT r = f32[4] add(p, p)",
                                    "ROOT r = f32[4] custom-call(p), custom_call_target=\"nope\"")
    with pytest.raises(EvaluationError, match="nope"):
        evaluate(parse_hlo_module(text), X)


def test_tuple_values_nested_1000_deep_in_and_out():
    depth = 1000
    lines = ["HloModule t", "ENTRY e {", f"  p = {nested(depth)} parameter(0)"]
    prev, shape = "p", nested(depth)
    for k in range(depth):
        shape = shape[1:-1]
        lines.append(f"  g{k} = {shape} get-tuple-element({prev}), index=0")
        prev = f"g{k}"
    lines += [f"  n = f32[2] negate({prev})", f"  c = {nested(depth)} copy(p)",
              f"  ROOT r = ({nested(depth)}, f32[2]) tuple(c, n)", "}"]
    module = parse_hlo_module("\n".join(lines), max_recursion_depth=depth + 2)
    value = np.float32([1, 2])
    for _ in range(depth):
        value = (value,)
    copied, neg = evaluate(module, value)
    np.testing.assert_array_equal(neg, [-1, -2])
    leaves = flatten(copied)
    assert len(leaves) == 1 and leaves[0].tolist() == [1, 2]
    inner = copied
    for _ in range(depth):
        inner = inner[0]
    assert inner is leaves[0] and inner is not flatten(value)[0]  # copy made new arrays
    # a Literal argument, and a mismatch deep down named by its path
    lit = value_to_literal(value, module.entry.parameters[0].shape)
    assert flatten(evaluate(module, lit)[0])[0].tolist() == [1, 2]
    bad = np.float32([1, 2, 3])
    for _ in range(depth):
        bad = (bad,)
    with pytest.raises(InvalidArgumentError) as err:
        evaluate(module, bad)
    assert str(err.value).startswith("evaluate: argument 0 (%p)" + "[0]" * depth +
                                     ": expected f32[2]{0}, got f32[3]: the dimensions differ")
    [leaf] = flatten(to_value(lit, module.entry.parameters[0].shape, "v"))
    assert leaf.tolist() == [1, 2]
    assert Literal.zeros(module.entry.parameters[0].shape).leaves()[0].array.tolist() == [0, 0]


def test_reducer_calling_a_deep_chain():
    depth = 1500
    out = ["HloModule r", ("sum0 {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
           "  ROOT s = f32[] add(a, b)\n}")]
    for k in range(1, depth + 1):
        out.append(f"sum{k} {{\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
                   f"  ROOT s = f32[] call(a, b), to_apply=sum{k - 1}\n}}")
    out.append(f"ENTRY e {{\n  x = f32[4,3] parameter(0)\n  z = f32[] constant(0)\n"
               f"  ROOT r = f32[4] reduce(x, z), dimensions={{1}}, to_apply=sum{depth}\n}}")
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    np.testing.assert_array_equal(evaluate(parse_hlo_module("\n".join(out)), x), x.sum(axis=1))


def test_elementwise_chain_of_2000():
    n = 2000
    lines = ["HloModule chain", "ENTRY e {", "  x0 = f32[8] parameter(0)",
             "  c = f32[] constant(1.5)", "  cb = f32[8] broadcast(c), dimensions={}"]
    ops = ["add", "multiply", "subtract", "maximum"]
    for i in range(1, n + 1):
        lines.append(f"  {'ROOT ' if i == n else ''}x{i} = f32[8] {ops[i % 4]}(x{i - 1}, cb)")
    module = parse_hlo_module("\n".join(lines + ["}"]))
    x = np.linspace(-1, 1, 8, dtype=np.float32)
    want = x.copy()
    c = np.float32(1.5)
    for i in range(1, n + 1):
        want = [want + c, want * c, want - c, np.maximum(want, c)][i % 4]
    np.testing.assert_array_equal(evaluate(module, x), want)


def test_run_instruction_evaluates_a_call_on_its_own():
    module = parse_hlo_module(call_chain(50))
    ctx = EvalContext(module, EvalOptions())
    np.testing.assert_array_equal(ctx.run_instruction(module.entry.root, [X]), X + X)

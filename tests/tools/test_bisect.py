"""xlapy.tools.compare: XLA's run_hlo_module tolerances, the recording evaluator, one
instruction alone, and the bisection naming exactly the instruction a faulty backend
(registered here only: the interpreter with one opcode perturbed) gets wrong."""

import io

import ml_dtypes
import numpy as np
import pytest

from xlapy import parse_hlo_module
from xlapy.backends.base import BACKENDS, register_backend
from xlapy.backends.interpreter import InterpreterBackend, InterpreterProgram
from xlapy.errors import InvalidArgumentError
from xlapy.interpreter import evaluate
from xlapy.interpreter.evaluator import EvalContext
from xlapy.tools.compare import (
    Progress,
    Tolerance,
    bisect,
    check_backend,
    compare_arrays,
    compare_values,
    evaluate_recording,
    run_on_backend,
    single_instruction_module,
    summarize_value,
)


def faulty_backend(opcode: str, delta: float):
    """A backend factory: the interpreter, but every ``opcode`` result gets ``+ delta``."""

    class Ctx(EvalContext):
        def run_instruction(self, instr, args):
            out = super().run_instruction(instr, args)
            if instr.opcode == opcode:
                out = (out + np.asarray(delta, out.dtype)).astype(out.dtype)
            return out

    class Program(InterpreterProgram):
        def run(self, args, options):
            return Ctx(self.module, options).call(self.module.entry, list(args))

    class Backend(InterpreterBackend):
        name = f"faulty-{opcode}"

        def compile(self, module):
            super().compile(module)
            return Program(module)

    return Backend


@pytest.fixture
def faulty():
    """Register ``faulty-<opcode>`` backends for one test; removed afterwards."""
    added = []

    def make(opcode: str, delta: float = 0.5) -> str:
        name = f"faulty-{opcode}-{delta}"
        register_backend(name, faulty_backend(opcode, delta))
        added.append(name)
        return name

    yield make
    for name in added:
        BACKENDS.pop(name, None)


CHAIN = """HloModule chain
add_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  sum = f32[4] add(x, y)
  prod = f32[4] multiply(sum, x)
  neg = f32[4] negate(prod)
  ex = f32[4] exponential(neg)
  zero = f32[] constant(0)
  red = f32[] reduce(ex, zero), dimensions={0}, to_apply=add_f32
  ROOT out = (f32[4], f32[]) tuple(neg, red)
}
"""

INPUTS = [np.float32([0.5, 1, 2, -1]), np.float32([1, 1, 1, 1])]


# -- tolerances ------------------------------------------------------------------------------


def test_values_within_the_absolute_bound_pass_and_beyond_fail():
    tol = Tolerance(1e-3, 0.0)
    b = np.float32([0, 1, 100])
    ok = compare_arrays(b + np.float32(0.0009), b, tol)
    assert ok.ok and ok.mismatches == 0 and ok.max_abs_error == pytest.approx(9e-4, rel=1e-2)
    bad = compare_arrays(np.float32([0.0011, 1, 100]), b, tol)
    assert not bad.ok and bad.mismatches == 1
    assert bad.first_mismatch[0] == (0,)


def test_relative_bound_is_an_alternative_to_the_absolute_one():
    tol = Tolerance(1e-3, 1e-3)
    b = np.float64([1000.0, 1.0])
    # 0.9 off on 1000: beyond abs 1e-3, within rel 1e-3 -> passes
    assert compare_arrays(np.float64([1000.9, 1.0]), b, tol).ok
    # 1.1 off on 1000: beyond both -> fails
    res = compare_arrays(np.float64([1001.1, 1.0]), b, tol)
    assert res.mismatches == 1
    assert res.max_rel_error == pytest.approx(1.1e-3)
    assert res.max_abs_error == pytest.approx(1.1)


def test_default_tolerance_is_1e_minus_3_each():
    assert Tolerance() == Tolerance(1e-3, 1e-3)
    with pytest.raises(InvalidArgumentError, match="abs_error must be >= 0"):
        Tolerance(-1, 0)


def test_nan_equals_nan_and_infinities_compare_by_sign():
    tol = Tolerance()
    b = np.float32([np.nan, np.inf, -np.inf, 1])
    assert compare_arrays(b.copy(), b, tol).ok
    res = compare_arrays(np.float32([1, np.inf, np.inf, np.nan]), b, tol)
    assert res.mismatches == 3 and res.max_abs_error == np.inf


def test_integers_and_pred_compare_exactly():
    tol = Tolerance(10, 10)
    assert compare_arrays(np.int32([1, 2]), np.int32([1, 2]), tol).ok
    assert compare_arrays(np.int32([1, 3]), np.int32([1, 2]), tol).mismatches == 1
    assert compare_arrays(np.bool_([True, False]), np.bool_([True, True]), tol).mismatches == 1
    assert compare_arrays(np.uint8([255]), np.uint8([254]), tol).mismatches == 1


def test_bf16_and_complex_leaves():
    tol = Tolerance()
    b = np.array([1, 2], ml_dtypes.bfloat16)
    assert compare_arrays(b.copy(), b, tol).ok
    assert compare_arrays(np.array([1, 2.5], ml_dtypes.bfloat16), b, tol).mismatches == 1
    c = np.complex64([1 + 1j])
    assert compare_arrays(c + np.complex64(1e-4j), c, tol).ok
    assert not compare_arrays(c + np.complex64(1j), c, tol).ok


def test_shape_and_type_differences_are_reported_not_compared():
    res = compare_arrays(np.float32([1, 2]), np.float32([1, 2, 3]), Tolerance())
    assert not res.ok and "dimensions [2] differ" in res.problem
    res = compare_arrays(np.float64([1]), np.float32([1]), Tolerance())
    assert not res.ok and "element type" in res.problem


def test_compare_values_walks_tuple_leaves():
    module = parse_hlo_module(CHAIN)
    good = evaluate(module, *INPUTS)
    bad = (good[0], np.float32(good[1] + 1))
    leaves = compare_values(bad, good, module.entry.root.shape, Tolerance())
    assert [leaf.ok for leaf in leaves] == [True, False]
    assert leaves[1].text().startswith("out1 f32[]: max abs error 1")


# -- backends and running ----------------------------------------------------------------------


def test_unknown_backend_lists_the_registered_ones():
    with pytest.raises(InvalidArgumentError, match="unknown backend 'tpu'; registered backends: "
                       ".*interpreter"):
        check_backend("tpu")


def test_run_on_backend_times_every_iteration():
    module = parse_hlo_module(CHAIN)
    seen = []
    res = run_on_backend(module, INPUTS, "interpreter", iterations=3, on_iteration=seen.append)
    assert seen == [0, 1, 2] and len(res.times) == 3
    text = res.timing_text()
    assert "min" in text and "median" in text and "over 3 iterations" in text


# -- recording and one instruction alone -----------------------------------------------------


def test_recording_keeps_every_entry_value_and_the_same_result():
    module = parse_hlo_module(CHAIN)
    result, values = evaluate_recording(module, INPUTS)
    expected = evaluate(module, *INPUTS)
    np.testing.assert_array_equal(result[0], expected[0])
    entry = {i.name: i for i in module.entry.instructions}
    np.testing.assert_array_equal(values[id(entry["sum"])], INPUTS[0] + INPUTS[1])
    np.testing.assert_array_equal(values[id(entry["prod"])], (INPUTS[0] + INPUTS[1]) * INPUTS[0])
    # only the entry's instructions are recorded (not the reducer's)
    assert len(values) == len(module.entry.instructions)


def test_single_instruction_module_runs_the_instruction_on_given_operands():
    module = parse_hlo_module(CHAIN)
    red = module.entry.instruction("red")
    single, operands = single_instruction_module(red)
    assert [o.name for o in operands] == ["ex", "zero"]
    assert len(single.computations) == 2  # a copy of the reducer, and the entry
    assert single.computations[0] is not red.attrs["to_apply"]
    out = evaluate(single, np.float32([1, 2, 3, 4]), np.float32(10))
    assert float(out) == 20
    # the original module is untouched
    assert red.attrs["to_apply"].module is module


def test_single_instruction_module_shares_one_parameter_for_a_repeated_operand():
    module = parse_hlo_module("""HloModule sq
ENTRY e {
  x = f32[2] parameter(0)
  ROOT m = f32[2] multiply(x, x)
}""")
    single, operands = single_instruction_module(module.entry.root)
    assert len(operands) == 1 and single.entry.num_parameters == 1
    np.testing.assert_array_equal(evaluate(single, np.float32([3, 4])), [9, 16])


# -- bisection -------------------------------------------------------------------------------


@pytest.mark.parametrize("opcode,name", [("multiply", "prod"), ("add", "sum"),
                                         ("negate", "neg"), ("exponential", "ex")])
def test_bisection_names_exactly_the_perturbed_instruction(faulty, opcode, name):
    backend = faulty(opcode)
    module = parse_hlo_module(CHAIN)
    # the whole module differs on this backend
    whole = run_on_backend(module, INPUTS, backend).results[0]
    ref = evaluate(module, *INPUTS)
    assert not all(c.ok for c in compare_values(whole, ref, module.entry.root.shape, Tolerance()))
    found = bisect(module, INPUTS, backend, "interpreter", Tolerance())
    assert found is not None
    assert found.instruction.name == name
    assert found.text.startswith(f"%{name} = f32[4]")
    assert found.leaves[0].max_abs_error == pytest.approx(0.5, rel=1e-3)
    report = found.report()
    assert f"%{name} = " in report and "operand 0 %" in report and "min=" in report


def test_bisection_ignores_a_perturbation_within_the_tolerance(faulty):
    backend = faulty("multiply", 0.0009)
    module = parse_hlo_module(CHAIN)
    assert bisect(module, INPUTS, backend, "interpreter", Tolerance()) is None
    tight = faulty("multiply", 0.002)
    assert bisect(module, INPUTS, tight, "interpreter", Tolerance()).instruction.name == "prod"


def test_bisection_finds_an_op_inside_a_called_computation_at_its_caller(faulty):
    # the reducer's add is wrong (the entry has no add of its own here): the reduce is the
    # first entry instruction that differs
    module = parse_hlo_module(CHAIN.replace("sum = f32[4] add(x, y)",
                                            "sum = f32[4] subtract(x, y)"))
    found = bisect(module, INPUTS, faulty("add"), "interpreter", Tolerance())
    assert found.instruction.name == "red"


def test_bisection_returns_none_when_the_backends_agree():
    steps = []
    module = parse_hlo_module(CHAIN)
    assert bisect(module, INPUTS, "interpreter", "interpreter", Tolerance(),
                  on_step=lambda i, n: steps.append((i, n))) is None
    # every non-parameter instruction ran alone, then the final step
    assert steps[-1] == (7, 7) and len(steps) == 8


def test_a_backend_that_fails_on_an_instruction_is_the_divergence(faulty):
    register_backend("broken-negate", _raising_backend("negate"))
    try:
        found = bisect(parse_hlo_module(CHAIN), INPUTS, "broken-negate")
    finally:
        BACKENDS.pop("broken-negate")
    assert found.instruction.name == "neg" and "no negate today" in found.error
    assert "the tested backend failed" in found.report()


def _raising_backend(opcode):
    from xlapy.interpreter import EvaluationError

    class Ctx(EvalContext):
        def run_instruction(self, instr, args):
            if instr.opcode == opcode:
                raise EvaluationError(f"no {opcode} today")
            return super().run_instruction(instr, args)

    class Program(InterpreterProgram):
        def run(self, args, options):
            return Ctx(self.module, options).call(self.module.entry, list(args))

    class Backend(InterpreterBackend):
        def compile(self, module):
            return Program(module)

    return Backend


def test_summarize_value():
    from xlapy.shape import parse_shape

    text = summarize_value(np.arange(10, dtype=np.float32), parse_shape("f32[10]"))
    assert text == "f32[10] min=0 max=9 mean=4.5 [0, 1, 2, 3, 4, 5, ...]"
    pair = summarize_value((np.int32(3), np.bool_([True])), parse_shape("(s32[], pred[1])"))
    assert pair.startswith("(s32[] min=3 max=3") and "pred[1]" in pair


# -- progress --------------------------------------------------------------------------------


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_progress_draws_only_on_a_terminal():
    quiet = io.StringIO()
    p = Progress(3, stream=quiet)
    p.step("a")
    p.clear()
    assert quiet.getvalue() == ""
    tty = _Tty()
    p = Progress(2, stream=tty)
    p.step("one", n=2)
    p.clear()
    out = tty.getvalue()
    assert out.startswith("\r[" + "#" * 24 + "] 2/2 one")
    assert out.endswith("\r") and "\n" not in out


def test_progress_can_be_forced_on_or_off():
    assert Progress(1, stream=io.StringIO(), enabled=True).enabled
    assert not Progress(1, stream=_Tty(), enabled=False).enabled

"""Kernels of the ops that call computations: call, while, conditional, fusion and the
async wrappers async-start / async-update / async-done.

Semantics (XLA's operation semantics page and HloEvaluator):
- call / fusion: the called computation evaluated on the operands (a fusion's fused
  parameter i takes operand i).
- while: ``while condition(state): state = body(state)``, evaluated iteration by
  iteration; the result is the last state (init when the condition is false at once).
- conditional: a pred index runs true_computation (true) or false_computation; an s32
  index runs branch_computations[index], and an index < 0 or >= N runs the LAST branch
  (spec: "branch_computations[N-1] is executed as the default branch").
- async-start runs the wrapped computation on its operands at once (the interpreter has
  one thread of control); its value is the async tuple ((operands...), result,
  context...), contexts zero-filled; async-update appends its new operands to element 0;
  async-done returns element 1. A wrapped computation taking more parameters than
  async-start binds runs when the last operand arrives (async-update) or at async-done.
- scan: to_apply stepped along the scan dimension (reversed with is_reverse), carries
  threaded through, per-step outputs stacked.
The kernels are generators: each ``yield (computation, args)`` evaluates a computation
(EvalContext runs them on its own stack of frames, so nesting depth costs no Python
recursion). Imports the interpreter core and xlapy.hlo.async_chain (to find an async
chain's start).
"""

from __future__ import annotations

import numpy as np

from xlapy.hlo.async_chain import async_wrapped_computation
from xlapy.interpreter import evaluator
from xlapy.interpreter.evaluator import EvaluationError
from xlapy.interpreter.registry import kernel
from xlapy.interpreter.values import TOKEN
from xlapy.shape import Shape, dtypes
from xlapy.shape.tree import build_shaped


def zero_value(shape: Shape):
    """A value of ``shape`` filled with zeros (tuples element-wise, TOKEN for tokens);
    dynamic dimensions take their bound."""
    if shape.is_tuple():
        return build_shaped(shape, lambda s, _path: zero_value(s))
    if shape.is_token():
        return TOKEN
    dims = tuple(max(int(d), 0) for d in shape.dimensions)
    return np.zeros(dims, dtype=dtypes.to_dtype(shape.element_type))


@kernel("call")
def _call(ctx, instr, args):
    return (yield instr.attrs["to_apply"], list(args))


@kernel("fusion")
def _fusion(ctx, instr, args):
    fused = instr.attrs["calls"]
    return (yield fused, list(args[:fused.num_parameters]))


def _truth(value, instr, what: str) -> bool:
    array = np.asarray(value)
    if array.shape != () or array.dtype != np.bool_:
        raise EvaluationError(f"{instr.opcode}: the {what} must give a pred[] scalar, got an "
                              f"array of dtype {array.dtype} and shape {array.shape} "
                              f"(instruction %{instr.name})")
    return bool(array)


@kernel("while")
def _while(ctx, instr, args):
    condition, body = instr.attrs["condition"], instr.attrs["body"]
    (state,) = args
    cancel = ctx.options.cancel
    while _truth((yield condition, [state]), instr, f"condition %{condition.name}"):
        if cancel is not None:
            cancel.check_abort(f"while %{instr.name}")
        counters = evaluator.COUNTERS  # a progress display's counts (xlapy run on a tty)
        if counters is not None:
            counters.iterations += 1
        state = yield body, [state]
    return state


def branch_index(index_value, count: int) -> int:
    """The branch an s32 index selects: out of [0, count) -> the last one."""
    index = int(np.asarray(index_value))
    return index if 0 <= index < count else count - 1


@kernel("conditional")
def _conditional(ctx, instr, args):
    index, operands = args[0], args[1:]
    if np.asarray(index).dtype == np.bool_:
        branches = [instr.attrs["true_computation"], instr.attrs["false_computation"]]
        chosen = 0 if bool(np.asarray(index)) else 1
    else:
        branches = list(instr.attrs["branch_computations"])
        chosen = branch_index(index, len(branches))
    return (yield branches[chosen], [operands[chosen]])


# -- async wrappers -----------------------------------------------------------------------------


def _run_if_bound(ctx, comp, bound: tuple, result):
    """The wrapped computation's result once every parameter is bound; ``result`` (the
    placeholder or an earlier result) otherwise (a generator: ``yield from`` it)."""
    if result is not _PENDING:
        return result
    if len(bound) < comp.num_parameters:
        return _PENDING
    return (yield comp, list(bound[:comp.num_parameters]))


class _Pending:
    def __repr__(self) -> str:
        return "<async result pending>"


_PENDING = _Pending()


def _async_value(instr, bound: tuple, result, contexts) -> tuple:
    shape = instr.shape
    if result is _PENDING:
        result = zero_value(shape.tuple_shapes[1])
        return (bound, result, *contexts, _PENDING)
    return (bound, result, *contexts)


def _unpack_async(instr, value):
    if not isinstance(value, tuple) or len(value) < 2 or not isinstance(value[0], tuple):
        raise EvaluationError(f"{instr.opcode}: operand 0 must be an async tuple ((operands), "
                              f"result, context...), got {type(value).__name__} (instruction "
                              f"%{instr.name})")
    pending = value[-1] is _PENDING
    parts = value[:-1] if pending else value
    return parts[0], (_PENDING if pending else parts[1]), tuple(parts[2:])


@kernel("async-start")
def _async_start(ctx, instr, args):
    comp = instr.attrs["calls"]
    bound = tuple(args)
    result = yield from _run_if_bound(ctx, comp, bound, _PENDING)
    contexts = tuple(zero_value(s) for s in instr.shape.tuple_shapes[2:])
    return _async_value(instr, bound, result, contexts)


def _wrapped_computation(ctx, instr):
    """The computation an async-update/async-done continues: its own ``calls``, or the one
    of its chain's async-start (found through the data flow, as XLA does)."""
    comp = async_wrapped_computation(instr)
    if comp is None:
        raise EvaluationError(f"{instr.opcode}: cannot find the async-start of this chain "
                              f"(instruction %{instr.name})")
    return comp


@kernel("async-update")
def _async_update(ctx, instr, args):
    bound, result, contexts = _unpack_async(instr, args[0])
    bound = bound + tuple(args[1:])
    if result is _PENDING:
        result = yield from _run_if_bound(ctx, _wrapped_computation(ctx, instr), bound,
                                          _PENDING)
    return _async_value(instr, bound, result, contexts)


@kernel("async-done")
def _async_done(ctx, instr, args):
    bound, result, _ = _unpack_async(instr, args[0])
    if result is _PENDING:
        comp = _wrapped_computation(ctx, instr)
        if len(bound) < comp.num_parameters:
            raise EvaluationError(
                f"async-done: the wrapped computation %{comp.name} takes "
                f"{comp.num_parameters} parameters but only {len(bound)} operands were bound "
                f"(instruction %{instr.name})")
        result = yield comp, list(bound[:comp.num_parameters])
    return result


# -- scan ---------------------------------------------------------------------------------------


@kernel("scan")
def _scan(ctx, instr, args):
    """scan(inputs..., inits...): to_apply(input slices..., carries...) -> (output
    slices..., new carries...) stepped along the scan dimension (from its end with
    is_reverse=true); the result is (outputs stacked along that dimension..., final
    carries...), or the one array when there is only one."""
    comp = instr.attrs["to_apply"]
    carries = int(instr.attrs["num_carries"])
    (dim,) = instr.attrs["dimensions"]
    inputs, state = list(args[:len(args) - carries]), list(args[len(args) - carries:])
    results = list(instr.shape.tuple_shapes) if instr.shape.is_tuple() else [instr.shape]
    num_outputs = len(results) - carries
    if inputs:
        length = np.asarray(inputs[0]).shape[dim]
    else:
        length = int(results[0].dimensions[dim])
    steps = range(length - 1, -1, -1) if instr.attrs.get("is_reverse") else range(length)
    slices: list[list] = [[None] * length for _ in range(num_outputs)]
    for i in steps:
        step_args = [np.take(np.asarray(x), i, axis=dim) for x in inputs] + state
        out = yield comp, step_args
        out = list(out) if isinstance(out, tuple) else [out]
        if len(out) != num_outputs + carries:
            raise EvaluationError(f"scan: to_apply %{comp.name} returned {len(out)} values, "
                                  f"expected {num_outputs + carries} (instruction %{instr.name})")
        for k in range(num_outputs):
            slices[k][i] = out[k]
        state = out[num_outputs:]
    stacked = []
    for k, shape in enumerate(results[:num_outputs]):
        if length:
            stacked.append(np.stack([np.asarray(s) for s in slices[k]], axis=dim))
        else:
            stacked.append(zero_value(shape))
    values = stacked + state
    return tuple(values) if instr.shape.is_tuple() else values[0]

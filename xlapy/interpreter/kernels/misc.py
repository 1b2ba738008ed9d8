"""Kernels of the miscellaneous ops: custom-call (through the target registry of
xlapy.interpreter.custom_calls), tokens (after-all, add-dependency), opt-barrier and the
asynchronous copy pair copy-start / copy-done.

Semantics: after-all gives a TOKEN whatever its operands; add-dependency(value, token) is
the value; opt-barrier is the identity (it only constrains optimisation); copy-start's
value is (destination, source, u32[] context) with both buffers holding the operand, and
copy-done returns the destination (element 0). custom-call runs the registered target (an
unknown target is an UnimplementedError listing the registered ones).
Imports the interpreter core and the custom-call registry only.
"""

from __future__ import annotations

import numpy as np

from xlapy.interpreter.custom_calls import call_custom_call
from xlapy.interpreter.evaluator import EvaluationError
from xlapy.interpreter.registry import kernel
from xlapy.interpreter.values import TOKEN


@kernel("custom-call")
def _custom_call(ctx, instr, args):
    return call_custom_call(ctx, instr, list(args))


@kernel("after-all")
def _after_all(ctx, instr, args):
    return TOKEN


@kernel("add-dependency")
def _add_dependency(ctx, instr, args):
    return args[0]


@kernel("opt-barrier")
def _opt_barrier(ctx, instr, args):
    return args[0]


@kernel("copy-start")
def _copy_start(ctx, instr, args):
    (value,) = args
    return (value, value, np.zeros((), np.uint32))


@kernel("copy-done")
def _copy_done(ctx, instr, args):
    (started,) = args
    if not isinstance(started, tuple) or len(started) < 2:
        raise EvaluationError(f"copy-done: the operand must be the (destination, source, "
                              f"context) tuple of a copy-start (instruction %{instr.name})")
    return started[0]

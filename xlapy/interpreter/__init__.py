"""The reference interpreter: XLA's semantics on NumPy values. ``evaluate(module, *args)``."""

from xlapy.interpreter.evaluator import (
    EvalContext,
    EvalOptions,
    EvaluationError,
    UnimplementedError,
    evaluate,
)
from xlapy.interpreter.registry import KERNELS, get_kernel, kernel
from xlapy.interpreter.values import TOKEN

__all__ = ["EvalContext", "EvalOptions", "EvaluationError", "KERNELS", "TOKEN",
           "UnimplementedError", "evaluate", "get_kernel", "kernel"]

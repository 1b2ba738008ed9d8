"""Backend ``interpreter``: the reference evaluator (xlapy.interpreter) as a runtime backend;
nothing to compile."""

from __future__ import annotations

from xlapy.backends.base import Backend, DeviceProgram
from xlapy.hlo.ir import Module
from xlapy.interpreter.evaluator import EvalContext
from xlapy.interpreter.registry import get_kernel


class InterpreterProgram(DeviceProgram):
    def __init__(self, module: Module):
        self.module = module

    def run(self, args, options):
        return EvalContext(self.module, options).call(self.module.entry, list(args))


class InterpreterBackend(Backend):
    """The reference interpreter (xlapy.interpreter): nothing to compile."""

    name = "interpreter"

    def compile(self, module):
        # Load every kernel now: the registry loads them lazily on first lookup, which is
        # not safe to do from several device threads at once.
        get_kernel("parameter")
        return InterpreterProgram(module)


__all__ = ["InterpreterBackend", "InterpreterProgram"]

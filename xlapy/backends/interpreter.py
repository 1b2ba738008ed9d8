"""Backend ``interpreter``: the reference evaluator (xlapy.interpreter) as a runtime backend;
nothing to compile."""

from __future__ import annotations

from xlapy.backends.base import Backend, DeviceProgram
from xlapy.hlo.ir import Module
from xlapy.interpreter.evaluator import EvalContext
from xlapy.interpreter.registry import get_kernel


class InterpreterProgram(DeviceProgram):
    def __init__(self, module: Module, flush_denormals: bool = False):
        self.module = module
        self.flush_denormals = flush_denormals

    def run(self, args, options):
        if self.flush_denormals:  # XLA:CPU's FTZ/DAZ for this thread (see that module)
            from xlapy.backends.cpu.denormals import flushing

            with flushing():
                return EvalContext(self.module, options).call(self.module.entry, list(args))
        return EvalContext(self.module, options).call(self.module.entry, list(args))


#: The interpreter's own numerics: the exact HLO semantics (denormals kept).
INTERPRETER_DEFAULTS = {"flush_denormals": False}
#: What a backend made without options gets (``xlapy run --flush-denormals`` sets it).
DEFAULT_OPTIONS = dict(INTERPRETER_DEFAULTS)


class InterpreterBackend(Backend):
    """The reference interpreter (xlapy.interpreter): nothing to compile. The exact HLO
    semantics: denormals are kept unless ``flush_denormals=True`` (XLA:CPU's MXCSR FTZ/DAZ
    around the run, xlapy.backends.cpu.denormals; None: DEFAULT_OPTIONS)."""

    name = "interpreter"

    def __init__(self, *, flush_denormals: bool | None = None):
        if flush_denormals is None:
            flush_denormals = DEFAULT_OPTIONS["flush_denormals"]
        self.flush_denormals = bool(flush_denormals)

    def compile(self, module):
        # Load every kernel now: the registry loads them lazily on first lookup, which is
        # not safe to do from several device threads at once.
        get_kernel("parameter")
        return InterpreterProgram(module, self.flush_denormals)


__all__ = ["DEFAULT_OPTIONS", "INTERPRETER_DEFAULTS", "InterpreterBackend",
           "InterpreterProgram"]

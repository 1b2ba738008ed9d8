"""The runtime's backends (XLA's backends: xla/service/cpu, ...), behind the interface and
registry of xlapy/backends/base.py.

This package registers its backends: ``interpreter`` (xlapy.backends.interpreter, the
reference evaluator), ``cpu`` (xlapy.backends.cpu, LLVM through llvmlite) and ``xla`` (real
XLA:CPU through jax, a reference for comparisons; xlapy.backends.xla). The factories import
their backends lazily, so registering costs nothing until a Client asks for one.
"""

from xlapy.backends.base import register_backend


def _interpreter_factory(**options):
    from xlapy.backends.interpreter import InterpreterBackend

    return InterpreterBackend(**options)


def _cpu_factory(**options):
    from xlapy.backends.cpu.backend import CpuBackend

    return CpuBackend(**options)


def _xla_factory(**options):
    from xlapy.backends.xla import XlaCpuBackend  # imports jax; raises if it is missing

    return XlaCpuBackend(**options)


register_backend("interpreter", _interpreter_factory)
register_backend("cpu", _cpu_factory)
register_backend("xla", _xla_factory)

__all__: list[str] = []

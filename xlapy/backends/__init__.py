"""Compiled backends of the runtime (XLA's backends: xla/service/cpu, ...).

Importing this package registers every backend with ``xlapy.runtime.register_backend``:
``cpu`` (xlapy.backends.cpu, LLVM through llvmlite) and ``xla`` (real XLA:CPU through jax, a
reference for comparisons; xlapy.jax_bridge). The factories import their compilers lazily,
so registering costs nothing until a Client asks for the backend.
"""

from xlapy.runtime.client import register_backend


def _cpu_factory(**options):
    from xlapy.backends.cpu.backend import CpuBackend

    return CpuBackend(**options)


def _xla_factory():
    from xlapy.jax_bridge import XlaCpuBackend  # imports jax; raises if it is missing

    return XlaCpuBackend()


register_backend("cpu", _cpu_factory)
register_backend("xla", _xla_factory)

__all__: list[str] = []

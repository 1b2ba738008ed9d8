"""Compiled backends of the runtime (XLA's backends: xla/service/cpu, ...).

Importing this package registers every backend with ``xlapy.runtime.register_backend``:
``cpu`` (xlapy.backends.cpu, LLVM through llvmlite). The factories import their compilers
lazily, so registering costs nothing until a Client asks for the backend.
"""

from xlapy.runtime.client import register_backend


def _cpu_factory():
    from xlapy.backends.cpu.backend import CpuBackend

    return CpuBackend()


register_backend("cpu", _cpu_factory)

__all__: list[str] = []

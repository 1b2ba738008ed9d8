"""The backend interface and registry: what the runtime compiles with, by name.

A ``Backend``'s ``compile(module)`` returns a ``DeviceProgram`` whose ``run(args, options)``
evaluates one device's program with its EvalOptions (replica and partition ids,
collectives, channels, the timeout). ``Client(backend=name)`` makes its backend with
``get_backend(name)``; ``register_backend(name, factory)`` adds one. The backends of
xlapy (``interpreter``, ``cpu``, ``xla``) register in xlapy/backends/__init__.py, so they are
known as soon as anything imports this module.

Backends import this module (downward); the runtime imports it to find them.
"""

from __future__ import annotations

from collections.abc import Callable

from xlapy.errors import InvalidArgumentError
from xlapy.hlo.ir import Module
from xlapy.interpreter.evaluator import EvalOptions


class DeviceProgram:
    """One device's compiled program: ``run(args, options)`` returns the result value (a
    NumPy array, a tuple of values, or TOKEN) for argument values already checked against
    the entry parameters."""

    def run(self, args: list, options: EvalOptions):
        raise NotImplementedError


class Backend:
    """What a Client compiles with: ``compile(module) -> DeviceProgram``."""

    name = "abstract"

    def compile(self, module: Module) -> DeviceProgram:
        raise NotImplementedError


#: Backend factories by name.
BACKENDS: dict[str, Callable[[], Backend]] = {}


def register_backend(name: str, factory: Callable[[], Backend]) -> None:
    """Make ``Client(backend=name)`` use ``factory()``."""
    BACKENDS[name] = factory


def backend_names() -> list[str]:
    """The registered backends' names, sorted."""
    return sorted(BACKENDS)


def get_backend(name: str, what: str = "Client") -> Backend:
    """A new backend ``name`` (``what`` names the caller in the error for an unknown one)."""
    factory = BACKENDS.get(name)
    if factory is None:
        raise InvalidArgumentError(f"{what}: unknown backend {name!r}; available: "
                                   f"{', '.join(backend_names())}")
    return factory()


__all__ = ["BACKENDS", "Backend", "DeviceProgram", "backend_names", "get_backend",
           "register_backend"]

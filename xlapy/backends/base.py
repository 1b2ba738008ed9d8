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

import numpy as np

from xlapy.errors import InvalidArgumentError
from xlapy.hlo.ir import Module
from xlapy.interpreter.evaluator import EvalOptions

#: Alignment of the host memory of device buffers (bytes): a cache line, and the width of an
#: AVX-512 vector, as XLA:CPU aligns its buffers. A 64-byte vector load or store of a buffer
#: NumPy's allocator placed 16 bytes past a line (the usual offset of a large np.empty)
#: touches two lines; a scatter-add of 256-byte rows ran 1.5x slower so.
ALIGN = 64


def aligned_bytes(nbytes: int) -> tuple[np.ndarray, int]:
    """A new uint8 array of ``nbytes + ALIGN`` bytes and the offset in it at which ``nbytes``
    ALIGN-aligned bytes start. Views of its aligned part have the array itself as their
    ``base`` (NumPy collapses view chains), so its reference count says whether one lives."""
    raw = np.empty(nbytes + ALIGN, np.uint8)
    return raw, -raw.__array_interface__["data"][0] % ALIGN


def aligned_empty(shape, dtype) -> np.ndarray:
    """``np.empty(shape, dtype)`` whose data starts ALIGN-aligned."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw, offset = aligned_bytes(nbytes)
    return raw[offset:offset + nbytes].view(dtype).reshape(shape)


class DeviceProgram:
    """One device's compiled program: ``run(args, options)`` returns the result value (a
    NumPy array, a tuple of values, or TOKEN) for argument values already checked against
    the entry parameters.

    A program whose ``takes_donations`` is true also takes ``run(args, options, donated)``:
    ``donated`` is the set of (parameter number, parameter index) of the argument arrays the
    caller gives up (Buffers passed for ``input_output_alias`` parameters); the program may
    write the result aliased to such a parameter into that very array and return the array
    itself as that result (the runtime then has nothing to copy). Arguments not donated are
    never written.

    A program whose ``fresh_results`` is true returns, when nothing is donated, results
    that never share memory with its arguments (new arrays every call): the runtime need
    not check."""

    takes_donations = False
    fresh_results = False

    def run(self, args: list, options: EvalOptions):
        raise NotImplementedError


class Backend:
    """What a Client compiles with: ``compile(module) -> DeviceProgram``."""

    name = "abstract"

    def compile(self, module: Module) -> DeviceProgram:
        raise NotImplementedError


#: Backend factories by name.
BACKENDS: dict[str, Callable[..., Backend]] = {}


def register_backend(name: str, factory: Callable[..., Backend]) -> None:
    """Make ``Client(backend=name)`` use ``factory(**backend_options)``."""
    BACKENDS[name] = factory


def backend_names() -> list[str]:
    """The registered backends' names, sorted."""
    return sorted(BACKENDS)


def check_backend(name: str) -> None:
    """Raise InvalidArgumentError naming the registered backends when ``name`` is not one."""
    names = backend_names()
    if name not in names:
        raise InvalidArgumentError(f"unknown backend {name!r}; registered backends: "
                                   f"{', '.join(names)}")


def get_backend(name: str, what: str = "Client", options: dict | None = None) -> Backend:
    """A new backend ``name`` made with ``options`` (keyword arguments of its factory, e.g.
    the cpu backend's ``flush_denormals``); ``what`` names the caller in the errors."""
    factory = BACKENDS.get(name)
    if factory is None:
        raise InvalidArgumentError(f"{what}: unknown backend {name!r}; available: "
                                   f"{', '.join(backend_names())}")
    try:
        return factory(**(options or {}))
    except TypeError as e:
        raise InvalidArgumentError(f"{what}: backend {name!r} does not take the options "
                                   f"{sorted(options or {})}: {e}") from None


__all__ = ["BACKENDS", "Backend", "DeviceProgram", "backend_names", "check_backend",
           "get_backend", "register_backend"]

"""Kernel registration: the NumPy kernel of each opcode, in the interpreter's own table
(``KERNELS``, read through ``get_kernel``; the op definitions know nothing of kernels).

A kernel is ``fn(ctx, instr, args) -> value``: ``ctx`` is the EvalContext (sub-computation
calls, feeds, channels, RNG state, replica id, collectives), ``instr`` the Instruction
(attributes, result shape), ``args`` the operand values. Values are NumPy arrays (0-d for
scalars; ml_dtypes dtypes for bf16/f8/int4...; the array's shape is the runtime shape, which
for a bounded dynamic dimension may be smaller than the bound), tuples of values, or TOKEN.
"""

from __future__ import annotations

import threading
from typing import Callable

from xlapy.opdefs import get_opdef

Kernel = Callable[..., object]

KERNELS: dict[str, Kernel] = {}


def kernel(*opcodes: str):
    """Decorator: ``@kernel("add", "subtract")`` registers the function for those opcodes."""

    def wrap(fn: Kernel) -> Kernel:
        for opcode in opcodes:
            if opcode in KERNELS:
                raise ValueError(f"kernel: {opcode!r} has two kernels")
            get_opdef(opcode)  # an opcode xlapy defines, or an error naming it
            KERNELS[opcode] = fn
        return fn

    return wrap


def get_kernel(opcode: str) -> Kernel | None:
    _load()
    return KERNELS.get(opcode)


_loaded = False
_load_lock = threading.Lock()


def _load() -> None:
    # Replicas run as threads: the first lookups may race, so the flag is set only after
    # every family is imported, under a lock.
    global _loaded
    if not _loaded:
        with _load_lock:
            if not _loaded:
                import xlapy.interpreter.kernels  # noqa: F401

                _loaded = True

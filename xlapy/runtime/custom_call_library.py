"""Custom-call targets from a shared library, through XLA's C ABI (the spec page's
``extern "C" void target(void* out, void** in)``).

``register_custom_call_library(path, names)`` loads the library the *user* names (ctypes)
and registers each listed symbol in the interpreter's custom-call registry. An HLO module
can only name a target: it reaches a symbol only if it was registered here (or as a Python
target), so running an untrusted module never loads a library or calls a symbol by itself.

Calling convention (XLA:CPU's untyped ``API_VERSION_ORIGINAL`` custom calls):
- ``in``: an array of pointers, one per operand array in operand order (a tuple operand
  contributes its leaves, depth first, as XLA:CPU's thunk runtime passes operand buffers);
  each points to the operand's bytes laid out as the operand's shape says (its layout,
  tiling and element size: ``xlapy.to_physical``), or as ``operand_layout_constraints``
  says when the instruction has them.
- ``out``: for an array result, a pointer to a zero-filled buffer of the result shape's
  byte size (in its layout) that the function fills; for a tuple result, a pointer to an
  array of pointers, one per result leaf (depth first), each to such a buffer.
- The result is read back with ``xlapy.from_physical``. The function must not keep the
  pointers: the buffers live only during the call.

Other ABI versions (status-returning, typed FFI) are rejected with an UnimplementedError:
their status and call-frame structures belong to XLA's runtime, which is not here.
Imports the interpreter's custom-call registry and xlapy.shape only.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Iterable

import numpy as np

from xlapy.errors import InvalidArgumentError
from xlapy.hlo.attrs.enums import CustomCallApiVersion
from xlapy.interpreter.custom_calls import is_registered, register_custom_call
from xlapy.interpreter.evaluator import EvaluationError, UnimplementedError
from xlapy.shape import Shape, byte_size, from_physical, to_physical
from xlapy.shape.tree import build_shaped, map_shaped

_CALL_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p))
_LIBRARIES: dict[str, ctypes.CDLL] = {}  # keeps loaded libraries alive
_LOCK = threading.Lock()


def _leaves(value, shape: Shape) -> list[tuple[np.ndarray, Shape]]:
    out: list = []
    map_shaped(shape, value, lambda v, s, _p: None if s.is_token() else
               out.append((np.asarray(v), s)))
    return out


def _leaf_shapes(shape: Shape) -> list[Shape]:
    return [leaf for _, leaf in shape.leaves() if not leaf.is_token()]


def _rebuild(leaves: list, shape: Shape):
    from xlapy.interpreter.values import TOKEN

    rest = iter(leaves)
    return build_shaped(shape, lambda s, _p: TOKEN if s.is_token() else next(rest))


def _buffer(size: int) -> ctypes.Array:
    return (ctypes.c_uint8 * max(size, 1))()


class CFunctionTarget:
    """A C function with the ``void(void* out, void** in)`` signature, called on the
    interpreter's values (the custom-call registry's calling convention)."""

    def __init__(self, name: str, function, library: str):
        self.name = name
        self.function = function
        self.library = library

    def __call__(self, *operands, instr=None):
        if instr is None:
            raise EvaluationError(f"custom-call {self.name!r}: a C target needs the instruction "
                                  f"(its operand and result shapes)")
        version = instr.attrs.get("api_version", CustomCallApiVersion.API_VERSION_ORIGINAL)
        if version != CustomCallApiVersion.API_VERSION_ORIGINAL:
            raise UnimplementedError(
                f"custom-call {self.name!r} (instruction %{instr.name}): api_version="
                f"{version.value} is not supported for C targets from {self.library}; only "
                f"API_VERSION_ORIGINAL: void {self.name}(void* out, void** in)")
        constraints = instr.attrs.get("operand_layout_constraints")
        shapes = list(constraints) if constraints else [o.shape for o in instr.operands]
        keep = []  # the input buffers must outlive the call
        leaves = []
        for value, shape in zip(operands, shapes):
            leaves.extend(_leaves(value, shape))
        for array, shape in leaves:
            if array.shape != tuple(shape.dimensions):
                raise EvaluationError(
                    f"custom-call {self.name!r} (instruction %{instr.name}): an operand of "
                    f"runtime dimensions {list(array.shape)} does not fill {shape}; C "
                    f"targets take static shapes")
            data = to_physical(array, shape)
            buf = _buffer(len(data))
            ctypes.memmove(buf, data, len(data))
            keep.append(buf)
        inputs = (ctypes.c_void_p * max(len(keep), 1))(
            *[ctypes.cast(b, ctypes.c_void_p) for b in keep])
        result_shapes = _leaf_shapes(instr.shape)
        outputs = [_buffer(byte_size(s)) for s in result_shapes]
        if instr.shape.is_tuple():
            table = (ctypes.c_void_p * max(len(outputs), 1))(
                *[ctypes.cast(b, ctypes.c_void_p) for b in outputs])
            out_ptr = ctypes.cast(table, ctypes.c_void_p)
        else:
            out_ptr = ctypes.cast(outputs[0], ctypes.c_void_p)
        self.function(out_ptr, inputs)
        results = [from_physical(bytes(buf)[:byte_size(s)], s)
                   for buf, s in zip(outputs, result_shapes)]
        return _rebuild(results, instr.shape)


def register_custom_call_library(path, names: Iterable[str] | str, *,
                                 replace: bool = False) -> list[str]:
    """Load the shared library at ``path`` and register each symbol in ``names`` as a
    custom-call target of the same name (``void name(void* out, void** in)``). Returns the
    registered names. Only the listed symbols become reachable from HLO.

    >>> register_custom_call_library("./libmyfuncs.so", ["myfunc"])
    ['myfunc']
    """
    if isinstance(names, str):
        names = [names]
    names = list(names)
    if not names:
        raise InvalidArgumentError("register_custom_call_library: name at least one symbol to "
                                   "register")
    path = os.fspath(path)
    if not os.path.exists(path):
        raise InvalidArgumentError(f"register_custom_call_library: no file at {path}")
    full = os.path.abspath(path)
    with _LOCK:
        lib = _LIBRARIES.get(full)
        if lib is None:
            try:
                lib = ctypes.CDLL(full)
            except OSError as e:
                raise InvalidArgumentError(f"register_custom_call_library: cannot load {path}: "
                                           f"{e}") from None
            _LIBRARIES[full] = lib
    targets = []
    for name in names:
        if not isinstance(name, str) or not name:
            raise InvalidArgumentError(f"register_custom_call_library: symbol names must be "
                                       f"non-empty strings, got {name!r}")
        try:
            address = ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
        except AttributeError:
            raise InvalidArgumentError(f"register_custom_call_library: {path} has no symbol "
                                       f"{name!r}") from None
        targets.append(CFunctionTarget(name, _CALL_TYPE(address), full))
    taken = [t.name for t in targets if is_registered(t.name)]
    if taken and not replace:  # register all or nothing
        raise InvalidArgumentError(f"register_custom_call_library: {', '.join(map(repr, taken))} "
                                   f"already registered; pass replace=True to replace")
    for target in targets:
        register_custom_call(target.name, target, replace=replace, kind="c", source=full)
    return names


__all__ = ["CFunctionTarget", "register_custom_call_library"]

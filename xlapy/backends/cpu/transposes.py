"""Transposing copies of host arrays with the backend's compiled block transpose.

``swap_last2(a)``: a C-contiguous copy of ``a`` ([..., rows, cols]) with its last two
dimensions swapped, ``np.ascontiguousarray(np.swapaxes(a, -1, -2))``. The library's LAPACK
calls need them on every call (LAPACK reads column-major matrices, the backend keeps
row-major ones: each matrix goes in and comes out transposed), and NumPy's strided copy
moves a 256 x 256 f32 matrix at about 5 GB/s (53 us). Here the copy is the loop emitter's
kernel for a transpose instruction of that shape (``loop_emitter._block_transpose``:
lanes x lanes blocks through registers), compiled once per (element size, shape) and kept;
large copies run over the worker pool. Shapes the block kernel does not take (an odd
dimension, elements wider than 64 bits) and small matrices (under ``MIN_ELEMENTS`` each)
use NumPy.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np

from xlapy.backends.cpu import threads

#: Matrices smaller than this (elements) are copied by NumPy (fast while they fit L1).
MIN_ELEMENTS = 64 * 64
#: Work (elements) from which a copy runs over the worker pool.
PARALLEL_ELEMENTS = 1 << 18

_KERNELS: dict = {}  # (bits, count, rows, cols) -> (compiled module, function, domain) or None
_LOCK = threading.Lock()
_PROTO = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
_INT = {8: "u8", 16: "u16", 32: "u32", 64: "u64"}


def _kernel(bits: int, count: int, rows: int, cols: int):
    key = (bits, count, rows, cols)
    with _LOCK:
        if key in _KERNELS:
            return _KERNELS[key]
    from llvmlite import ir

    from xlapy.backends.cpu import loop_emitter
    from xlapy.backends.cpu.jit import get_jit
    from xlapy.parser import parse_hlo_module

    t = _INT[bits]
    text = (f"HloModule swap\nENTRY e {{\n  x = {t}[{count},{rows},{cols}] parameter(0)\n"
            f"  ROOT y = {t}[{count},{cols},{rows}] transpose(x), dimensions={{0,2,1}}\n}}\n")
    root = parse_hlo_module(text).entry.root
    made = None
    if loop_emitter._block_transpose([root], [root], [root.operands[0]],
                                     (count, cols, rows)) is not None:
        mod = ir.Module("swap")
        spec = loop_emitter.emit_loop(mod, "swap", [root], [root.operands[0]], {})
        compiled = get_jit().compile(mod)
        made = (compiled, _PROTO(compiled.function_address("swap")), spec.domain)
    with _LOCK:
        return _KERNELS.setdefault(key, made)


def swap_last2(a: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of ``a`` with its last two dimensions swapped (module
    docstring)."""
    a = np.asarray(a)
    rows, cols = a.shape[-2], a.shape[-1]
    bits = 8 * a.dtype.itemsize
    count = a.size // max(rows * cols, 1)
    made = None
    if rows * cols >= MIN_ELEMENTS and bits in _INT and a.size:
        made = _kernel(bits, count, rows, cols)
    if made is None:
        return np.ascontiguousarray(np.swapaxes(a, -1, -2))
    src = np.ascontiguousarray(a)
    out = np.empty(a.shape[:-2] + (cols, rows), a.dtype)
    _, fn, domain = made
    bufs = (ctypes.c_void_p * 2)(src.ctypes.data, out.ctypes.data)
    threads.run_parallel(fn, ctypes.addressof(bufs), domain, a.size,
                         min_work=PARALLEL_ELEMENTS)
    return out


__all__ = ["swap_last2"]

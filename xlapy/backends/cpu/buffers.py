"""Buffers for kernel outputs, and the second core.

``POOL.empty(shape, dtype)`` hands out arrays carved from large blocks it keeps. A block is
reused once nothing outside the pool refers to it any more (its reference count drops back:
no array, view or memoryview of it is alive), so a result a caller still holds is never
overwritten, while an intermediate dropped after its last use, or a result the caller let
go, is recycled by the next call. Blocks start on a cache line (``backends.base.ALIGN``).
Recycled memory is already mapped: a kernel writing a 64 MiB result pays no page faults (a
fresh mapping costs several times the kernel itself on this kind of VM). Small arrays come
from ``np.empty`` directly (malloc recycles those).

``run_parallel(fn, bufs, domain, work)`` runs a kernel (``kernel_abi``) over its work items,
on the backend's one worker pool (``threads``) when there is enough work: the domain is cut
into a few pieces per thread, handed out in turn; ctypes releases the GIL during the native
call, so the pieces run at once.
"""

from __future__ import annotations

import ctypes
import sys
import threading

import numpy as np

from xlapy.backends.base import aligned_bytes
from xlapy.backends.cpu import threads

#: Arrays smaller than this come from np.empty.
POOL_MIN_BYTES = 1 << 16
#: Blocks kept per size.
POOL_PER_SIZE = 8
#: Work (items x cost) below which a kernel runs on the calling thread alone.
PARALLEL_MIN_WORK = 1 << 16


class BufferPool:
    """Reusable output blocks, keyed by byte size (see the module docstring). A block is a
    raw array and the offset of its ALIGN-aligned bytes (backends.base.aligned_bytes);
    whatever is handed out is a view of the raw array, which therefore holds the count."""

    def __init__(self):
        self._blocks: dict[int, list[tuple[np.ndarray, int]]] = {}
        self._lock = threading.Lock()
        self._free_refs = None

    def _refs_when_free(self) -> int:
        if self._free_refs is None:
            probe = [aligned_bytes(1)]
            for blk, _ in probe:
                self._free_refs = sys.getrefcount(blk)
        return self._free_refs

    def empty(self, shape, dtype) -> np.ndarray:
        dtype = np.dtype(dtype)
        count = 1
        for d in shape:
            count *= int(d)
        nbytes = count * dtype.itemsize
        if nbytes < POOL_MIN_BYTES:
            return np.empty(shape, dtype)
        free = self._refs_when_free()
        with self._lock:
            blocks = self._blocks.setdefault(nbytes, [])
            for blk, offset in blocks:
                if sys.getrefcount(blk) == free:
                    return blk[offset:offset + nbytes].view(dtype).reshape(shape)
            try:
                blk, offset = aligned_bytes(nbytes)
            except (MemoryError, ValueError):  # ValueError: beyond NumPy's addressable size
                if not blocks:
                    del self._blocks[nbytes]
                raise _out_of_memory(shape, dtype, nbytes) from None
            if len(blocks) < POOL_PER_SIZE:
                blocks.append((blk, offset))
            return blk[offset:offset + nbytes].view(dtype).reshape(shape)

    def clear(self) -> None:
        with self._lock:
            self._blocks.clear()


POOL = BufferPool()


def workspace(nbytes: int) -> tuple[np.ndarray, int]:
    """Memory for a native function's workspace (its slots are laid out from an aligned
    start): the array to keep alive while it runs and its ALIGN-aligned address. Large ones
    come from the pool (aligned already), small ones from np.empty with room to align."""
    if nbytes >= POOL_MIN_BYTES:
        ws = POOL.empty((nbytes,), np.uint8)
        return ws, ctypes.addressof(ctypes.c_char.from_buffer(ws))
    raw, offset = aligned_bytes(max(nbytes, 1))
    return raw, raw.ctypes.data + offset


def _out_of_memory(shape, dtype: np.dtype, nbytes: int):
    """XLA's RESOURCE_EXHAUSTED for an output buffer: its shape in HLO syntax and bytes (the
    step running names the instruction, see steps.Plan.execute)."""
    from xlapy.errors import ResourceExhaustedError, human_bytes
    from xlapy.shape import dtypes

    try:
        name = dtypes.type_name(dtypes.from_dtype(dtype))
    except (KeyError, ValueError, TypeError):
        name = str(dtype)
    dims = ",".join(str(int(d)) for d in shape)
    return ResourceExhaustedError(f"out of memory allocating {nbytes} bytes "
                                  f"({human_bytes(nbytes)}) for {name}[{dims}]", nbytes)


#: Threads a kernel may run on (the backend's one worker pool: xlapy.backends.cpu.threads).
THREADS = threads.WORKERS


def run_parallel(fn, bufs, domain: int, work: int, parallel: bool = True) -> None:
    """Call ``fn(bufs, lo, hi)`` over [0, domain), on the worker pool when ``work`` is large
    (``threads.run_parallel``: pieces handed out in turn)."""
    if not parallel or THREADS < 2 or domain < 2 or work < PARALLEL_MIN_WORK:
        fn(bufs, 0, domain)
        return
    threads.run_parallel(fn, bufs, domain, work, True, PARALLEL_MIN_WORK)


__all__ = ["POOL", "BufferPool", "run_parallel"]

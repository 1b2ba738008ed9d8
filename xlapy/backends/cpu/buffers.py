"""Buffers for kernel outputs, and the second core.

``POOL.empty(shape, dtype)`` hands out arrays carved from large blocks it keeps. A block is
reused once nothing outside the pool refers to it any more (its reference count drops back:
no array, view or memoryview of it is alive), so a result a caller still holds is never
overwritten, while an intermediate dropped after its last use, or a result the caller let
go, is recycled by the next call. Recycled memory is already mapped: a kernel writing a
64 MiB result pays no page faults (a fresh mapping costs several times the kernel itself on
this kind of VM). Small arrays come from ``np.empty`` directly (malloc recycles those).

``run_parallel(fn, bufs, domain, work)`` runs a kernel (``kernel_abi``) over its work items,
split between the calling thread and one helper thread when there is enough work; ctypes
releases the GIL during the native call, so both halves run at once.
"""

from __future__ import annotations

import os
import queue
import sys
import threading

import numpy as np

#: Arrays smaller than this come from np.empty.
POOL_MIN_BYTES = 1 << 16
#: Blocks kept per size.
POOL_PER_SIZE = 8
#: Work (items x cost) below which a kernel runs on the calling thread alone.
PARALLEL_MIN_WORK = 1 << 16


class BufferPool:
    """Reusable output blocks, keyed by byte size (see the module docstring)."""

    def __init__(self):
        self._blocks: dict[int, list[np.ndarray]] = {}
        self._lock = threading.Lock()
        self._free_refs = None

    def _refs_when_free(self) -> int:
        if self._free_refs is None:
            probe = [np.empty(1, np.uint8)]
            for blk in probe:
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
            for blk in blocks:
                if sys.getrefcount(blk) == free:
                    return blk.view(dtype).reshape(shape)
            try:
                blk = np.empty(nbytes, np.uint8)
            except (MemoryError, ValueError):  # ValueError: beyond NumPy's addressable size
                if not blocks:
                    del self._blocks[nbytes]
                raise _out_of_memory(shape, dtype, nbytes) from None
            if len(blocks) < POOL_PER_SIZE:
                blocks.append(blk)
            return blk.view(dtype).reshape(shape)

    def clear(self) -> None:
        with self._lock:
            self._blocks.clear()


POOL = BufferPool()


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


class _Helper:
    """One daemon thread running submitted calls (the second core's share of a kernel)."""

    def __init__(self):
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._loop, name="xlapy-cpu-helper", daemon=True)
        self._thread.start()

    def _loop(self):
        while True:
            fn, args, done, errors = self._jobs.get()
            try:
                fn(*args)
            except BaseException as e:  # handed to the submitter
                errors.append(e)
            done.set()

    def submit(self, fn, *args):
        done, errors = threading.Event(), []
        self._jobs.put((fn, args, done, errors))
        return done, errors


_HELPER: _Helper | None = None
_HELPER_LOCK = threading.Lock()
THREADS = max(1, min(2, os.cpu_count() or 1))


def _helper() -> _Helper:
    global _HELPER
    with _HELPER_LOCK:
        if _HELPER is None:
            _HELPER = _Helper()
        return _HELPER


def run_parallel(fn, bufs, domain: int, work: int, parallel: bool = True) -> None:
    """Call ``fn(bufs, lo, hi)`` over [0, domain), on two threads when ``work`` is large."""
    if not parallel or THREADS < 2 or domain < 2 or work < PARALLEL_MIN_WORK:
        fn(bufs, 0, domain)
        return
    mid = domain // 2
    done, errors = _helper().submit(fn, bufs, mid, domain)
    fn(bufs, 0, mid)
    done.wait()
    if errors:
        raise errors[0]


__all__ = ["POOL", "BufferPool", "run_parallel"]

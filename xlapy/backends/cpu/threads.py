"""The CPU backend's one worker pool, shared by its kernels and its BLAS calls.

``WORKERS`` threads do the backend's parallel work: the calling thread plus ``WORKERS - 1``
daemon threads started once (``WORKERS`` = the cores this process may run on), parked in
native code (the pool itself is LLVM code: workers.py, ``pool()``). Kernels (``run_parallel``,
and native code calling the pool directly), GEMMs (workers.py's GEMM driver: panels and
batches) and library routines written in Python (``parallel``: convolution chunks, LAPACK
batches) hand their work items out one at a time from a shared counter, so a
thread the machine slows down (another process on its core) simply takes fewer items: a busy
machine slows a call in proportion to the cores it lost, it never waits on a descheduled
thread holding a fixed share (the 10x stalls of a statically split BLAS call spinning on a
core it does not have).

BLAS runs inside this pool, single-threaded per call: every BLAS call the backend makes is
bounded to one thread (``blas_calls``: OpenBLAS's bound, ``openblas_set_num_threads_local``,
which SciPy's builds apply to the whole process: set while any backend thread calls BLAS,
restored when the last one is done, so the user's own SciPy calls afterwards keep OpenBLAS's
default), and the backend splits large GEMMs into panels over the pool itself.
The two thread counts therefore never multiply (pool threads x BLAS threads = ``WORKERS``).
When the user set ``OPENBLAS_NUM_THREADS``, ``GOTO_NUM_THREADS`` or ``OMP_NUM_THREADS``, the
backend leaves BLAS's thread count exactly as the user asked (``USER_BLAS_THREADS``): no bound
is applied, and a single large GEMM goes to BLAS whole (BLAS's threads, the user's number).

Imports numpy (through blas, lazily) and the standard library only.
"""

from __future__ import annotations

import ctypes
import os
import threading

#: Environment variables through which a user sets BLAS's thread count (OpenBLAS reads the
#: first of them that is set).
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")


def _cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


#: Threads of the pool, the calling thread included.
WORKERS = _cores()


def user_blas_threads() -> str | None:
    """The user's BLAS thread setting (``NAME=value``), None when BLAS is left to the
    backend."""
    for name in BLAS_THREAD_VARIABLES:
        value = os.environ.get(name)
        if value not in (None, ""):
            return f"{name}={value}"
    return None


#: The user's explicit BLAS thread setting at import time (None: the backend bounds BLAS).
USER_BLAS_THREADS = user_blas_threads()

_local = threading.local()  # .worker: True on the pool's threads; .blas_bounded


def mark_worker() -> None:
    """Called by each of the pool's threads when it starts (``workers.Pool``)."""
    _local.worker = True


def in_worker() -> bool:
    """True on one of the pool's threads (work started there runs on that thread alone: the
    pool never waits on itself)."""
    return getattr(_local, "worker", False)


def pool():
    """The native worker pool (``workers.Pool``), compiled and started on first use."""
    from xlapy.backends.cpu import workers

    return workers.pool(WORKERS)


class using:
    """``with threads.using(n):`` the pool runs jobs on ``n`` threads (the caller included)
    inside the block, starting workers as needed (results do not depend on the count: tests
    compare counts, a benchmark measures them)."""

    def __init__(self, count: int):
        self.count = count

    def __enter__(self):
        self.previous = pool().set_threads(self.count)
        return self

    def __exit__(self, *exc):
        pool().set_threads(self.previous)
        return False


def threads_in_use() -> int:
    """The threads the pool runs a job on (the caller included)."""
    return pool().threads


class _Run:
    """The shared state of one ``parallel`` call."""

    __slots__ = ("body", "errors", "exhausted", "lock", "pending")

    def __init__(self, items, body):
        self.lock = threading.Lock()
        self.pending = iter(items)
        self.exhausted = False
        self.errors: list[BaseException] = []
        self.body = body

    def next_item(self):
        with self.lock:
            if self.errors or self.exhausted:
                return None
            item = next(self.pending, _END)
            if item is _END:
                self.exhausted = True
                return None
            return item

    def participate(self, local: bool) -> None:
        with self.lock:
            if self.exhausted or self.errors:
                return  # started after the work was handed out: nothing to do
        try:
            with blas_calls():
                self.body(self.next_item, local)
        except BaseException as e:  # noqa: BLE001 - re-raised in the calling thread
            with self.lock:
                self.errors.append(e)
                self.exhausted = True


_END = object()
_RUNS: dict[int, _Run] = {}  # key (the job's bufs word) -> the run
_RUNS_LOCK = threading.Lock()
_next_key = [1]


def _python_piece(key, lo, hi):
    """A piece of a Python job (the pool's kernel for ``parallel``): one participation."""
    run = _RUNS.get(key)
    if run is not None:
        run.participate(True)


_PIECE_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
_PIECE = _PIECE_TYPE(_python_piece)
_PIECE_ADDRESS = ctypes.cast(_PIECE, ctypes.c_void_p).value


def parallel(items, body, threads: int | None = None) -> None:
    """Run ``body(next_item, local)`` on up to ``threads`` threads of the pool (default all;
    the caller is one of them). ``next_item()`` hands out the next of ``items`` (None when
    none is left); ``local`` is True when several threads may run. Returns when every item
    handed out is done; the first exception is raised in the caller. BLAS calls inside
    ``body`` are single-threaded (``blas_calls``)."""
    items = list(items)
    if len(items) <= 1 or in_worker():
        threads = 1
    else:
        available = pool().threads
        threads = min(available if threads is None else threads, available, len(items))
    run = _Run(items, body)
    if threads <= 1 or in_worker():
        run.participate(False)
    else:
        with _RUNS_LOCK:
            key = _next_key[0]
            _next_key[0] += 1
            _RUNS[key] = run
        try:
            pool().parallel_for(_PIECE_ADDRESS, key, threads, 1)
        finally:
            with _RUNS_LOCK:
                del _RUNS[key]
    if run.errors:
        raise run.errors[0]


#: Pieces per thread a large kernel's domain is cut into (dynamic load balance).
PIECES_PER_THREAD = 4


def pieces_per_thread(work: int, min_work: int) -> int:
    """Pieces per thread of a kernel doing ``work``: one for small kernels (each piece is a
    claim and a native call), ``PIECES_PER_THREAD`` from ``16 * min_work`` on."""
    return PIECES_PER_THREAD if work >= 16 * min_work else 1


def function_address(fn) -> int:
    """The address of a compiled function given as a ctypes function (or an address)."""
    return fn if isinstance(fn, int) else ctypes.cast(fn, ctypes.c_void_p).value


_CFUNC = type(_PIECE).__mro__[1]  # ctypes' function pointer base class


def run_parallel(fn, bufs, domain: int, work: int, parallel_ok: bool = True,
                 min_work: int = 1 << 16) -> None:
    """Call the kernel ``fn(bufs, lo, hi)`` over [0, domain): on the pool when ``work`` is
    large, as ``pieces_per_thread`` ranges per thread handed out in turn (the native pool:
    ctypes releases the GIL for the whole call)."""
    if not parallel_ok or WORKERS < 2 or domain < 2 or work < min_work or in_worker():
        fn(bufs, 0, domain)
        return
    per = pieces_per_thread(work, min_work)
    if not isinstance(fn, (int, _CFUNC)):  # a Python callable: called back with bufs as is
        errors: list[BaseException] = []

        def call(_, lo, hi):
            if errors:
                return
            try:
                fn(bufs, lo, hi)
            except BaseException as e:  # noqa: BLE001 - re-raised in the calling thread
                errors.append(e)

        piece = _PIECE_TYPE(call)
        pool().parallel_for(function_address(piece), None, domain, per)
        if errors:
            raise errors[0]
        return
    if not isinstance(bufs, int):
        bufs = ctypes.cast(bufs, ctypes.c_void_p).value
    pool().parallel_for(function_address(fn), bufs, domain, per)


#: The process-wide bound of ``blas_calls``: OpenBLAS's "per-thread" bound
#: (``openblas_set_num_threads_local``) is one setting for the whole process in the builds
#: SciPy ships (a bound set on one thread is what every thread reads), so the threads inside
#: ``blas_calls`` blocks share it: the first to enter sets 1 and keeps the value found, the
#: last to leave restores it. Saving and restoring per thread left the process's BLAS at one
#: thread whenever two blocks overlapped (a pool worker restoring the 1 the caller had set).
_BOUND_LOCK = threading.Lock()
_bound = {"holders": 0, "previous": None}


class blas_calls:
    """Inside the block, BLAS calls of the calling thread are single-threaded (nested blocks
    and the user's explicit setting leave the bound alone). While any thread is inside such a
    block, BLAS is bounded for the whole process (see ``_bound``); the value found by the
    first thread to enter is restored when the last one leaves."""

    __slots__ = ("entered",)

    def __enter__(self):
        self.entered = False
        if USER_BLAS_THREADS is not None or getattr(_local, "blas_bounded", False):
            return self
        from xlapy.backends.cpu import blas

        with _BOUND_LOCK:
            if _bound["holders"] == 0:
                previous = blas.set_local_threads(1)
                if previous is None:  # this BLAS cannot be bounded: nothing to undo
                    return self
                _bound["previous"] = previous
            _bound["holders"] += 1
        _local.blas_bounded = True
        self.entered = True
        return self

    def __exit__(self, *exc):
        if not self.entered:
            return False
        _local.blas_bounded = False
        with _BOUND_LOCK:
            _bound["holders"] -= 1
            if _bound["holders"] == 0:
                from xlapy.backends.cpu import blas

                blas.set_local_threads(_bound["previous"])
        return False


__all__ = ["BLAS_THREAD_VARIABLES", "USER_BLAS_THREADS", "WORKERS", "blas_calls", "in_worker",
           "mark_worker", "parallel", "pieces_per_thread", "pool", "run_parallel",
           "threads_in_use", "user_blas_threads", "using"]

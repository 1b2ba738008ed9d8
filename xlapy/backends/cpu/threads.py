"""The CPU backend's one worker pool, shared by its kernels and its BLAS calls.

``WORKERS`` threads do the backend's parallel work: the calling thread plus ``WORKERS - 1``
daemon threads started once (``WORKERS`` = the cores this process may run on). Kernels
(``run_parallel``) and library routines (``parallel``: GEMM panels and batches, convolution
chunks, LAPACK batches) hand their work items out one at a time from a shared counter, so a
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

import os
import queue
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


class _Pool:
    """``WORKERS - 1`` daemon threads taking (fn, args) jobs from one queue."""

    def __init__(self, count: int):
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._threads = []
        for i in range(count):
            t = threading.Thread(target=self._loop, name=f"xlapy-cpu-worker-{i}", daemon=True)
            t.start()
            self._threads.append(t)

    def _loop(self):
        _local.worker = True
        while True:
            fn, args = self._jobs.get()
            fn(*args)  # fn catches its own exceptions (see parallel)

    def submit(self, fn, *args) -> None:
        self._jobs.put((fn, args))


_POOL: _Pool | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> _Pool:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = _Pool(WORKERS - 1)
        return _POOL


def in_worker() -> bool:
    """True on one of the pool's threads (work started there runs on that thread alone: the
    pool never waits on itself)."""
    return getattr(_local, "worker", False)


class _Run:
    """The shared state of one ``parallel`` call."""

    def __init__(self, items):
        self.cond = threading.Condition()
        self.pending = iter(items)
        self.exhausted = False
        self.active = 0
        self.errors: list[BaseException] = []

    def next_item(self):
        with self.cond:
            if self.errors or self.exhausted:
                return None
            item = next(self.pending, _END)
            if item is _END:
                self.exhausted = True
                return None
            return item

    def participate(self, body, local: bool) -> None:
        with self.cond:
            if self.exhausted or self.errors:
                return  # started after the work was handed out: nothing to do
            self.active += 1
        try:
            with blas_calls():
                body(self.next_item, local)
        except BaseException as e:  # noqa: BLE001 - re-raised in the calling thread
            with self.cond:
                self.errors.append(e)
                self.exhausted = True
        finally:
            with self.cond:
                self.active -= 1
                self.cond.notify_all()


_END = object()


def parallel(items, body, threads: int | None = None) -> None:
    """Run ``body(next_item, local)`` on up to ``threads`` threads of the pool (default all;
    the caller is one of them). ``next_item()`` hands out the next of ``items`` (None when
    none is left); ``local`` is True when several threads run. Returns when every item
    handed out is done; the first exception is raised in the caller. BLAS calls inside
    ``body`` are single-threaded (``blas_calls``)."""
    items = list(items)
    threads = WORKERS if threads is None else threads
    threads = min(threads, WORKERS, len(items))
    run = _Run(items)
    if threads <= 1 or in_worker():
        run.participate(body, False)
    else:
        pool = _pool()
        for _ in range(threads - 1):
            pool.submit(run.participate, body, True)
        run.participate(body, True)
        with run.cond:
            while run.active:
                run.cond.wait()
    if run.errors:
        raise run.errors[0]


#: Pieces per thread a large kernel's domain is cut into (dynamic load balance).
PIECES_PER_THREAD = 4


def run_parallel(fn, bufs, domain: int, work: int, parallel_ok: bool = True,
                 min_work: int = 1 << 16) -> None:
    """Call the kernel ``fn(bufs, lo, hi)`` over [0, domain): on the pool when ``work`` is
    large, as ``PIECES_PER_THREAD`` ranges per thread handed out in turn."""
    if not parallel_ok or WORKERS < 2 or domain < 2 or work < min_work or in_worker():
        fn(bufs, 0, domain)
        return
    # small kernels: one piece per thread (each handout costs a lock and a native call)
    per_thread = PIECES_PER_THREAD if work >= 16 * min_work else 1
    pieces = min(domain, WORKERS * per_thread)
    bounds = [domain * i // pieces for i in range(pieces + 1)]

    def body(next_item, local):
        while (i := next_item()) is not None:
            fn(bufs, bounds[i], bounds[i + 1])

    parallel(range(pieces), body)


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
           "parallel", "run_parallel", "user_blas_threads"]

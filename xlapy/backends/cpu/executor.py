"""Native code calling out: how a native function (a program's entry computation, see
native; a compiled while, see control_flow; a collective, see collectives) reaches what is
not LLVM code - library routines, steps that must stay in Python, the worker pool, the
runtime's cancellation - without returning to Python.

**The context.** Every compiled function gets a *context* buffer (``Context``: four i64
words) among its buffers: word 0 the *status* (0: running; set to 1 by native code when a
call out failed, so every enclosing function returns at once), word 1 the address of the
process's *function table*, word 2 a cancellation poll counter's period, word 3 the run
table of the program running on this thread (its collectives and device ids: see
collectives.bound; 0 outside such a run). Native code loads what it calls from the
table, so no address is baked into the IR: the object code is the same in every process
and the disk cache holds across processes.

**The function table** (``TABLE``, filled at import): slot ``HOST`` the host callback
``i32 host(i8* ctx, i64 id, i8** ptrs)``, slot ``POLL`` the cancel poll ``i32 poll(i8*
ctx, i64 id)`` (``id``: the host table's ``Polling`` entry naming the loop), slots
``SGEMM``/``DGEMM`` the raw BLAS routines of SciPy's OpenBLAS (Fortran convention, from
``scipy.linalg.cython_blas``'s capsules), slots ``PARALLEL`` and ``GEMM`` the worker pool's
``xlapy_parallel_for`` and GEMM driver (workers.py).

**Host calls.** A step that native code cannot run itself (a library call: GEMM in a form
the native path does not take, sort, FFT; an interpreted instruction; a Python while
loop) becomes an entry of its program's *host
table* (``HostTable``, one per Planner, its index ``id`` baked into the IR). Native code
calls ``host(ctx, id, ptrs)`` with the addresses of the step's operand leaves then its
result leaves; the callback finds the table of the run in progress on its thread (the runs
are a per-thread stack: ``running``), wraps the addresses as NumPy arrays, runs the step
with the run's ``plan_ctx`` and writes the result into the result leaves. A callback costs
about a microsecond (ctypes), nothing next to what such a step does.

**Threads.** A kernel too big for one thread is split over the worker pool by native code
itself: a call of the table's ``PARALLEL`` (workers.py's ``xlapy_parallel_for``); a dot BLAS
reads in place is one call of the table's ``GEMM`` (the pool's GEMM driver). Neither goes
through Python.

**Errors and cancellation.** A host call that raises stores the exception on the run and
returns 1; native code sets the status word and returns, each enclosing function checks
the status after a nested call and returns too, and the Python side re-raises
(``Run.reraise``). Native loops call ``poll`` every ``POLL_PERIOD`` iterations: it runs the
runtime's ``cancel.check_abort`` (EvalOptions.cancel) as the interpreted while does every
iteration.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np

from xlapy.shape import dtypes

#: The largest dimension SciPy's BLAS takes (32-bit integers).
INT_MAX = 2 ** 31 - 1
#: Iterations of a native loop between two cancellation polls.
POLL_PERIOD = 256

HOST, POLL, SGEMM, DGEMM, PARALLEL, GEMM = range(6)
_HOST_PROTO = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_int64,
                               ctypes.c_void_p)
_POLL_PROTO = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_int64)
_VOID_P = ctypes.c_void_p
_U64 = ctypes.c_uint64


class Run:
    """One native call in progress on this thread: the host table its ids index, the
    ``plan_ctx`` host steps run with, the first error a callback raised."""

    __slots__ = ("error", "plan_ctx", "table", "what")

    def __init__(self, table, plan_ctx, what: str):
        self.table, self.plan_ctx, self.error, self.what = table, plan_ctx, None, what

    def reraise(self) -> None:
        if self.error is not None:
            error, self.error = self.error, None
            raise error


_TLS = threading.local()


class running:
    """``with running(table, plan_ctx, what) as run:`` around a native call."""

    __slots__ = ("run",)

    def __init__(self, table, plan_ctx, what: str):
        self.run = Run(table, plan_ctx, what)

    def __enter__(self) -> Run:
        stack = getattr(_TLS, "runs", None)
        if stack is None:
            stack = _TLS.runs = []
        stack.append(self.run)
        return self.run

    def __exit__(self, *exc):
        _TLS.runs.pop()
        return False


def _host(ctx, ident, ptrs):
    run = _TLS.runs[-1]
    try:
        run.table.calls[ident](ptrs, run.plan_ctx)
        return 0
    except BaseException as e:  # noqa: BLE001 - re-raised by the Python side of the call
        run.error = e
        return 1


def _poll(ctx, ident):
    run = _TLS.runs[-1]
    cancel = getattr(getattr(run.plan_ctx, "options", None), "cancel", None)
    if cancel is None:
        return 0
    try:
        cancel.check_abort(run.table.calls[ident].what if ident >= 0 else run.what)
        return 0
    except BaseException as e:  # noqa: BLE001
        run.error = e
        return 1


_HOST_FN = _HOST_PROTO(_host)
_POLL_FN = _POLL_PROTO(_poll)
TABLE = (ctypes.c_void_p * 6)()
TABLE[HOST] = ctypes.cast(_HOST_FN, ctypes.c_void_p).value
TABLE[POLL] = ctypes.cast(_POLL_FN, ctypes.c_void_p).value
_BLAS_FILLED: list = []


def table_address() -> int:
    """The function table's address (its BLAS slots filled on first use)."""
    if not _BLAS_FILLED:
        from xlapy.backends.cpu import threads
        from xlapy.backends.cpu.blas import blas_function_pointer

        TABLE[SGEMM] = blas_function_pointer("sgemm")
        TABLE[DGEMM] = blas_function_pointer("dgemm")
        pool = threads.pool()
        TABLE[PARALLEL] = pool.parallel_for_address
        TABLE[GEMM] = pool.gemm_address
        _BLAS_FILLED.append(True)
    return ctypes.addressof(TABLE)


class Context:
    """A native call's context buffer (see the module docstring)."""

    __slots__ = ("address", "words")

    def __init__(self):
        self.words = (ctypes.c_int64 * 4)(0, table_address(), POLL_PERIOD, 0)
        self.address = ctypes.addressof(self.words)

    def reset(self) -> None:
        self.words[0] = 0


def context() -> Context:
    """This thread's context buffer: a native call runs on its thread start to end, and
    a nested native call (from a host callback) leaves the status as it found it (0)."""
    ctx = getattr(_TLS, "ctx", None)
    if ctx is None:
        ctx = _TLS.ctx = Context()
    return ctx


# -- host calls ----------------------------------------------------------------------------------


class Polling:
    """A host table entry naming a native loop for its cancel poll (``poll(ctx, id)``)."""

    __slots__ = ("what",)

    def __init__(self, what: str):
        self.what = what


class HostTable:
    """A program's host calls, by id (see the module docstring)."""

    def __init__(self):
        self.calls: list = []

    def add(self, call) -> int:
        self.calls.append(call)
        return len(self.calls) - 1


class LeafType:
    """An array leaf's dtype, dimensions and byte size, and NumPy views of it at an address
    (host calls and collectives read and write native buffers through them)."""

    __slots__ = ("dims", "dtype", "nbytes")

    def __init__(self, shape):
        self.dtype = np.dtype(dtypes.to_dtype(shape.element_type))
        self.dims = tuple(int(d) for d in shape.dimensions)
        self.nbytes = self.dtype.itemsize * int(np.prod(self.dims, dtype=np.int64))

    def view(self, address: int) -> np.ndarray:
        """The leaf's array over the memory at ``address`` (no copy)."""
        if self.nbytes == 0:
            return np.empty(self.dims, self.dtype)
        raw = (ctypes.c_char * self.nbytes).from_address(address)
        return np.frombuffer(raw, self.dtype).reshape(self.dims)


#: Instructions that meet other devices (collectives, channels), read the device's
#: identity, or keep state between calls. A host call runs them on the device's own thread
#: with the run's context (its replica and partition, its collectives, its rng state), as
#: the Python plan does, and hands them copies of their operands (``StepCall.owned``): a
#: collective's peers read what a device contributed after that device went on (each member
#: combines the contributions itself), a sent value waits in a mailbox, an outfeed value in
#: a queue - while native code reuses the memory of a value at once after its last use.
#: A step marked ``device_safe`` (collectives.py's steps) copies what it hands on itself
#: (only where that is needed: an in-process collectives backend) and gets views.
DEVICE_BOUND = frozenset({
    "all-reduce", "all-gather", "all-to-all", "collective-permute", "reduce-scatter",
    "collective-broadcast", "all-reduce-start", "all-reduce-done", "all-gather-start",
    "all-gather-done", "collective-permute-start", "collective-permute-done", "send", "recv",
    "send-done", "recv-done", "infeed", "outfeed", "replica-id", "partition-id", "rng",
    "custom-call", "async-start", "async-update", "async-done"})


class StepCall:
    """A plan step run from native code: its operands' leaves in, its result's leaves out.

    ``operands``: the instructions the step reads (their values are rebuilt, tuples
    included, from the leaves: views of native memory, or copies for ``owned`` steps -
    those of DEVICE_BOUND instructions and side effects, which may keep their operands
    beyond the call, unless the step is ``device_safe`` - of the leaves in memory native
    code reuses (``copies``: the emitter's choice per leaf; the caller's arguments and
    constants are not copied)); the step's ``run(env, plan_ctx)`` computes its value,
    whose leaves are copied into the result leaves - or, for a library call with an array
    result, written there directly (``out=``). An out-of-memory error names the step's
    instruction, as the Python plan's do."""

    def __init__(self, step, operands: list):
        from xlapy.shape.tree import build_shaped

        self.step = step
        self.instr = step.instr
        self.operands = operands
        self._build = build_shaped
        self._in = [[LeafType(s) for _, s in o.shape.leaves()] for o in operands]
        self._out = [LeafType(s) for _, s in self.instr.shape.leaves()]
        self.n_ptrs = sum(len(x) for x in self._in) + len(self._out)
        self._library_out = False
        self.owned = (step.instr.opcode in DEVICE_BOUND or step.instr.has_side_effect) and \
            not getattr(step, "device_safe", False)
        self.copies = None  # per operand leaf: whether it is copied (set by the emitter)
        from xlapy.backends.cpu.steps import LibraryStep

        if isinstance(step, LibraryStep) and self.instr.shape.is_array():
            self._library_out = True

    def _values(self, addrs):
        k = 0
        values = []
        copies = self.copies
        for o, types in zip(self.operands, self._in):
            leaves = []
            for t in types:
                view = t.view(addrs[k])
                leaves.append(view.copy() if copies is not None and copies[k] else view)
                k += 1
            if o.shape.is_tuple():
                it = iter(leaves)
                values.append(self._build(o.shape, lambda _s, _p, it=it: next(it)))
            else:
                values.append(leaves[0])
        return values, k

    def __call__(self, ptrs, plan_ctx) -> None:
        from xlapy.backends.cpu import steps
        from xlapy.errors import ResourceExhaustedError

        try:
            self._call(ptrs, plan_ctx)
        except ResourceExhaustedError as e:
            raise steps._named(e, self.step)
        except MemoryError as e:  # NumPy could not allocate: XLA's RESOURCE_EXHAUSTED
            raise steps._out_of_memory(e, self.step) from None

    def _call(self, ptrs, plan_ctx) -> None:
        addrs = (_U64 * self.n_ptrs).from_address(ptrs)
        values, k = self._values(addrs)
        outs = [t.view(addrs[k + j]) for j, t in enumerate(self._out)]
        instr = self.instr
        if self._library_out:
            from xlapy.backends.cpu import library

            dot = getattr(self.step, "dot", None) or instr
            by_id = {id(o): v for o, v in zip(self.operands, values)}
            got = library.run(dot, [by_id[id(o)] for o in dot.operands], out=outs[0])
            if got is not outs[0]:
                np.copyto(outs[0], np.asarray(got).reshape(outs[0].shape), casting="unsafe")
            return
        env = {id(o): v for o, v in zip(self.operands, values)}
        self.step.run(env, plan_ctx)
        from xlapy.shape.tree import flatten_tuples

        result = flatten_tuples(env[id(instr)])
        for dst, src, t in zip(outs, result, self._out):
            src = np.asarray(src)
            if t.nbytes:
                np.copyto(dst, src.reshape(t.dims).view(t.dtype) if src.dtype.itemsize ==
                          t.dtype.itemsize and src.dtype != t.dtype else src.reshape(t.dims),
                          casting="unsafe")


__all__ = [
    "DEVICE_BOUND",
    "POLL_PERIOD",
    "TABLE",
    "Context",
    "HostTable",
    "StepCall",
    "context",
    "running",
    "table_address",
]

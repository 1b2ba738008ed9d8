"""Collectives on the CPU backend: all-reduce, all-gather, reduce-scatter, all-to-all,
collective-broadcast, collective-permute (and the -start/-done forms), replica-id and
partition-id as steps of a plan, compiled with the rest of the program.

``plan_step(planner, instr)`` makes the step. Every collective gets a ``CollectiveStep``;
the common forms also get a *native function* emitted into the program's LLVM module (the
kernel signature, ``bufs`` = the operand leaves, the result leaves, then the executor's
context; a failure sets the context's status word, as a native function's call out does),
so the native entry and compiled whiles call it directly (native.Emitter._emit_native_call)
and the Python plan calls it through ctypes (the GIL released).

**Where it runs.** The native function first looks at the run's *table* (context word 3, set
by ``bound`` around ``CpuProgram.run``): entry 0 and 1 the device's replica and partition
id, entry 2 + k the *handle* of collective k of the program on this device in this run,
made on first use by a call out to Python (``_setup``). A handle of 1, or no table, sends
the collective to the *generic path*: the runtime's CollectivesBackend methods in Python
with NumPy arrays (``CollectiveStep.compute``; reductions folded in group order by the
step's compiled fold kernels, ``_FoldingContext``, else by the interpreter) - MPI, a
single device, and the forms without native
code (ragged-all-to-all, a dynamic broadcast root, collective-permute with slices, the
tuple-shaped -start forms, groups that do not fit the shapes, which then raise the
interpreter's error).

**In-process devices meet in shared memory.** With the threaded runtime (a backend whose
``in_process`` is true) the members of a group share a *block* (``_Block``, one per
instruction and group per execution, from ``ThreadedCollectives.shared``): a line of
words per member (arrival and departure counters) and a table of every member's operand and
result addresses. A call: publish the addresses, store the arrival (sequentially
consistent), wait until every member arrived, do this member's part reading the others'
operands in place, store the departure, wait until every member departed (no member writes
its operands again, or reads its results, before the others are done with them). A
waiting member spins on pause instructions (``PAUSE_NS``), then sleeps on the block's epoch
(a futex every member's store bumps; a sleeping thread keeps its claim on the scheduler, so
under load it is running again soon after its peer arrives); a peer later than ``SPIN_NS``
sends the waiter to Python (``_wait``: ``ExecutionState.wait``, so timeouts, a peer that
finished or failed, deadlocks and aborts are reported exactly as the interpreter's
collectives report them), and an arriving member that sees a waiter there wakes it through
a call out.

This member's part:
- all-reduce: every member folds the members' operands in group order, ``((v0 op v1) op
  v2) ...`` per element with the reduction computation inlined (element generators:
  ``scalar_computation``), into its own result; operands of at least ``SPLIT_BYTES`` are
  split instead: member r folds the r-th of n equal ranges (64-byte aligned) and writes it
  into every member's result (reduce-scatter and all-gather in one step: each element read
  once from every operand, written once to every result). Chunks of ``CHUNK_BYTES`` keep
  the fold in cache. The bits are the interpreter's (the same fold, the same element
  semantics).
- reduce-scatter: member r folds block r of every operand into its result.
- all-gather, all-to-all, collective-broadcast, collective-permute: copies from the others'
  operands into this member's results (a device outside the group, or without a permute
  source, gets zeros).

Operand values handed to the generic path from native code are views of a native
function's workspace (the entry's or a compiled loop's): with an in-process backend they
are copied first (the backend reads a contribution after its owner's call returned). So a
step without a native function is called out from native code as it is (``device_safe``:
``executor.StepCall`` copies nothing more for it).
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading

import numpy as np
from llvmlite import ir

from xlapy.backends.cpu import buffers, executor
from xlapy.backends.cpu import elemental as el
from xlapy.backends.cpu import scalar_computation as sc
from xlapy.backends.cpu.kernel_abi import KERNEL_TYPE, KernelSpec, for_range
from xlapy.interpreter.collectives_backend import backend_of, collective_group, permutation
from xlapy.interpreter.evaluator import EvaluationError
from xlapy.shape import dtypes

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
I8P = I8.as_pointer()
I64P = I64.as_pointer()
VOID = ir.VoidType()
_HOST_TYPE = ir.FunctionType(I32, [I8P, I64, I8P.as_pointer()])

#: The opcodes that get a CollectiveStep (dynamic shapes stay with the interpreter).
OPCODES = frozenset({
    "all-reduce", "all-reduce-start", "all-reduce-done", "all-gather", "all-gather-start",
    "all-gather-done", "reduce-scatter", "all-to-all", "ragged-all-to-all",
    "collective-broadcast", "collective-permute", "collective-permute-start",
    "collective-permute-done", "replica-id", "partition-id"})

#: Operands of at least this many bytes are all-reduced split between the members.
SPLIT_BYTES = 1 << 18
#: Collectives whose operands (per member, 64-byte aligned) take at most this many bytes
#: are staged: each member copies them into the block (two rounds' areas, used in turn), so
#: nobody reads another member's own buffers and one rendezvous per call is enough.
STAGE_BYTES = 1 << 16
#: Bytes of an operand folded at a time (stays in the first-level caches).
CHUNK_BYTES = 1 << 14
#: Nanoseconds a waiting member spins on pause instructions before it sleeps on a futex
#: (none when the execution has more devices than the process has cores: the peer being
#: waited for needs the core).
PAUSE_NS = 5_000
#: Nanoseconds after which it stops waiting natively and waits in Python
#: (ExecutionState.wait: blocking, with the runtime's timeout and error reports); at most a
#: tenth of the execution's timeout.
SPIN_NS = 50_000_000

# The handle's words (int64), one per device, instruction and run.
(H_BLOCK, H_RANK, H_SIZE, H_ROUND, H_SOURCE, H_SPLIT, H_PAUSE_NS, H_SPIN_NS, H_SYSCALL_FN,
 H_CLOCK_FN, H_STAGE) = range(11)
_HANDLE_WORDS = 11
# A block's first line: the abort flag, members waiting in Python, the epoch (a 32-bit
# futex word), members sleeping on it.
B_ABORT, B_WAITERS, B_EPOCH, B_SLEEPERS = range(4)
#: How long one futex sleep lasts at most (the sleeper then looks at the abort flag and the
#: clock again).
FUTEX_SLICE_NS = 1_000_000
#: The run table's first entries: the device's ids; handles follow.
T_REPLICA, T_PARTITION, T_HANDLES = 0, 1, 2
#: Words per member line of a block (a cache line: no false sharing).
LINE = 8
#: A handle that sends the collective to the generic path.
GENERIC = 1


# -- planning ------------------------------------------------------------------------------------


def _leaf_ok(shape) -> bool:
    return shape.is_array() and shape.element_type in el.TYPES and not shape.is_dynamic()


def _elements(shape) -> int:
    n = 1
    for d in shape.dimensions:
        n *= int(d)
    return n


def _itemsize(shape) -> int:
    return np.dtype(dtypes.to_dtype(shape.element_type)).itemsize


def _native_form(instr) -> str | None:
    """Which native code ``instr`` gets, or None (the generic path only)."""
    op = instr.opcode
    operands = instr.operands
    if not operands and op not in ("replica-id", "partition-id"):
        return None
    if any(not _leaf_ok(o.shape) for o in operands):
        return None
    leaves = [s for _, s in instr.shape.leaves()]
    if any(not _leaf_ok(s) for s in leaves):
        return None
    if op in ("replica-id", "partition-id"):
        return op
    if op in ("all-reduce", "all-reduce-start", "reduce-scatter"):
        reducer = instr.attrs["to_apply"]
        if reducer.num_parameters != 2 or not sc.supports_computation(reducer):
            return None
        if any(o.shape.element_type != s.element_type for o, s in zip(operands, leaves)):
            return None
        for o in operands:
            t = o.shape.element_type
            params = reducer.parameters
            if any(p.shape.element_type != t for p in params) or \
                    reducer.root.shape.element_type != t:
                return None
        return "reduce-scatter" if op == "reduce-scatter" else "all-reduce"
    if op == "all-gather":
        return "all-gather"
    if op == "all-to-all":
        if instr.attrs.get("dimensions") is None:
            shapes = {(o.shape.element_type, tuple(o.shape.dimensions)) for o in operands}
            return "all-to-all-tuple" if len(shapes) == 1 else None
        return "all-to-all" if len(operands) == 1 else None
    if op == "collective-broadcast":
        return None if instr.attrs.get("has_dynamic_root") else "broadcast"
    if op == "collective-permute":
        return None if instr.attrs.get("slice_sizes") else "permute"
    return None


def _no_native_reason(instr) -> str:
    op = instr.opcode
    if any(not _leaf_ok(o.shape) for o in instr.operands) or \
            any(not _leaf_ok(s) for _, s in instr.shape.leaves()):
        return (f"collectives: {op} of an element type or shape without native code: the "
                f"runtime's collectives in Python")
    if op in ("all-reduce", "all-reduce-start", "reduce-scatter"):
        return (f"collectives: {op} with a reduction computation the element generators "
                f"cannot inline: the runtime's collectives fold it with the interpreter")
    return f"collectives: no native code for this form of {op}: the runtime's collectives in " \
        f"Python"


def plan_step(planner, instr):
    """The step of a collective (or replica-id / partition-id) ``instr`` (see the module
    docstring); its native function, when it has one, goes into ``planner.irmod`` and the
    step into ``planner.kernels`` (so ``Planner.compile`` binds it)."""
    op = instr.opcode
    if op in ("all-reduce-done", "all-gather-done", "collective-permute-done"):
        return DoneStep(instr)
    form = _native_form(instr)
    index = None
    if form is not None and form not in ("replica-id", "partition-id"):
        index = len(planner.collective_steps)
    step = CollectiveStep(instr, form, index)
    step.host_table = planner.host_table
    if form is not None:
        emitter = _NativeEmitter(planner, step)
        emitter.emit()
        planner.kernels.append(step)
    if index is not None:
        planner.collective_steps.append(step)
    return step


# -- the steps -----------------------------------------------------------------------------------


class DoneStep:
    """all-reduce-done (its operand), all-gather-done and collective-permute-done (element 1
    of the -start's tuple): no data moves."""

    device_safe = True  # a pure function of its operand: called out without copies

    def __init__(self, instr):
        self.instr = instr
        self.reads = list(instr.operands)

    def run(self, env, plan_ctx):
        value = env[id(self.instr.operands[0])]
        if self.instr.opcode != "all-reduce-done":
            if not isinstance(value, tuple) or len(value) < 2:
                raise EvaluationError(f"{self.instr.opcode}: the operand must be the tuple of "
                                      f"its -start (instruction %{self.instr.name})")
            value = value[1]
        env[id(self.instr)] = value


class CollectiveStep:
    """A collective of a plan (see the module docstring). ``form``: its native code (None:
    the generic path only); ``index``: its entry in the run table."""

    #: Called out from native code (executor.StepCall) without copies: the generic path
    #: copies the views it hands to an in-process backend itself.
    device_safe = True

    def __init__(self, instr, form: str | None, index: int | None):
        self.instr = instr
        self.form = form
        self.index = index
        #: Why it has no native code (CpuProgram.interpreted() lists it), or None.
        self.interpreted_reason = None if form else _no_native_reason(instr)
        self.reads = list(instr.operands)
        self.native_call = None  # the native function's name (native code calls it)
        self.stage_bytes = 0  # per member and round, when the operands are staged
        self.spec = None  # its KernelSpec (Planner.compile binds ``fn``)
        self.fn = None
        self.then_fn = None
        self.host_table = None  # the program's host calls (the native function's ids)
        self._in = [executor.LeafType(o.shape) for o in instr.operands] if form else []
        self._out = [executor.LeafType(s) for _, s in instr.shape.leaves()] if form else []
        self._bufs_type = ctypes.c_void_p * (len(self._in) + len(self._out) + 1)
        self.folders: dict = {}  # operand dtype -> (fold, accumulate) kernels
        self._groups: dict = {}
        self._view_cache: dict = {}
        self._folding: dict = {}  # id(EvalContext) -> (it, its _FoldingContext)
        self._tuple = instr.shape.is_tuple()

    # -- running from Python ---------------------------------------------------------------

    def run(self, env, plan_ctx):
        instr = self.instr
        values = [env[id(o)] for o in self.reads]
        if self.index is None or self.fn is None or not _in_process(plan_ctx):
            env[id(instr)] = self.compute(values, plan_ctx)
            return
        arrays = [v if type(v) is np.ndarray and v.flags.c_contiguous else
                  np.ascontiguousarray(v) for v in values]
        outs = [buffers.POOL.empty(t.dims, t.dtype) for t in self._out]
        ctx = executor.context()
        bufs = self._bufs_type(*[_address(a) for a in arrays], *[_address(a) for a in outs],
                               ctx.address)
        with executor.running(self.host_table, plan_ctx, f"{instr.opcode} %{instr.name}") \
                as run:
            self.fn(bufs, 0, 1)
        if ctx.words[0]:
            ctx.reset()
            run.reraise()
        env[id(instr)] = tuple(outs) if self._tuple else outs[0]

    # -- the generic path --------------------------------------------------------------------

    def _group(self, ctx, allow_outside=False):
        o = ctx.options
        key = (o.replica_id, o.partition_id, o.replica_count, o.num_partitions, id(ctx.module))
        got = self._groups.get(key)
        if got is None:
            got = self._groups[key] = (collective_group(ctx, self.instr, allow_outside),)
        return got[0]

    def compute(self, values: list, plan_ctx):
        """The result through the runtime's collectives backend in Python. An in-process
        backend gets copies of the values (they may be views of memory the caller reuses
        once the call returns: a compiled loop's workspace; the backend reads them later)."""
        instr = self.instr
        op = instr.opcode
        ctx = plan_ctx.eval_context()
        if self.folders:
            got = self._folding.get(id(ctx))
            if got is None or got[0] is not ctx:
                if len(self._folding) >= 64:
                    self._folding.clear()
                got = self._folding[id(ctx)] = (ctx, _FoldingContext(ctx, self))
            ctx = got[1]
        if op == "replica-id":
            return np.array(ctx.options.replica_id, np.uint32)
        if op == "partition-id":
            return np.array(ctx.options.partition_id, np.uint32)
        backend = backend_of(ctx)
        if getattr(backend, "in_process", False):
            values = [_copy_value(v) for v in values]
        if op == "all-reduce" or op == "all-reduce-start":
            got = backend.all_reduce(ctx, instr, list(values), self._group(ctx),
                                     instr.attrs["to_apply"])
        elif op == "all-gather":
            got = backend.all_gather(ctx, instr, list(values), self._group(ctx),
                                     int(instr.attrs["dimensions"]))
        elif op == "reduce-scatter":
            got = backend.reduce_scatter(ctx, instr, list(values), self._group(ctx),
                                         int(instr.attrs["dimensions"]),
                                         instr.attrs["to_apply"])
        elif op == "all-to-all":
            split = instr.attrs.get("dimensions")
            got = backend.all_to_all(ctx, instr, list(values), self._group(ctx),
                                     None if split is None else int(split))
        elif op == "collective-permute" and not instr.attrs.get("slice_sizes"):
            got = backend.collective_permute(ctx, instr, list(values), permutation(ctx, instr))
            if got is None:
                got = [np.zeros_like(np.asarray(v)) for v in values]
        else:  # the remaining forms: the interpreter's kernel (it calls the same backend)
            return ctx.run_instruction(instr, list(values))
        if got is None or len(got) != len(values):
            count = "None" if got is None else f"{len(got)} values"
            raise EvaluationError(f"{op}: the collectives backend returned {count}, expected "
                                  f"{len(values)} (instruction %{instr.name})")
        return tuple(got) if self._tuple else got[0]

    # -- calls out from native code ----------------------------------------------------------

    def _views(self, addrs) -> list:
        """Arrays over the leaves at ``addrs`` (operands, then results): made once per
        address and kept (a compiled loop passes the same workspace addresses every
        iteration; a view owns nothing, so one of a reused address is as good as new)."""
        key = tuple(addrs)
        got = self._view_cache.get(key)
        if got is None:
            got = [t.view(a) for a, t in zip(key, self._in + self._out)]
            if len(self._view_cache) >= 8:
                self._view_cache.clear()
            self._view_cache[key] = got
        return got

    def host_generic(self, ptrs, plan_ctx) -> None:
        """The generic path called from native code: operand views in, results copied to
        the result leaves."""
        n_in = len(self._in)
        views = self._views((ctypes.c_uint64 * (n_in + len(self._out))).from_address(ptrs))
        result = self.compute(views[:n_in], plan_ctx)
        leaves = list(result) if self._tuple else [result]
        for t, dst, value in zip(self._out, views[n_in:], leaves):
            if t.nbytes:
                np.copyto(dst, np.asarray(value).reshape(t.dims), casting="unsafe")

    def host_setup(self, ptrs, plan_ctx) -> None:
        _setup(self, plan_ctx)

    def host_wait_arrival(self, ptrs, plan_ctx) -> None:
        _wait(self, plan_ctx, 0)

    def host_wait_departure(self, ptrs, plan_ctx) -> None:
        _wait(self, plan_ctx, 1)

    def host_notify(self, ptrs, plan_ctx) -> None:
        handle = plan_ctx.collectives.handles[self.index]
        with handle.state.cond:
            handle.state.cond.notify_all()


class _FoldKernel:
    """A fold kernel of the program (bound by Planner.compile like any kernel)."""

    __slots__ = ("fn", "spec", "then_fn")

    def __init__(self, spec):
        self.spec, self.fn, self.then_fn = spec, None, None


class _FoldingContext:
    """The interpreter's context for a collectives backend, with ``fold_values``: the
    group-order fold of the step's reduction by its compiled kernels (reduce_values in
    xlapy/runtime/threaded_collectives.py uses it when given)."""

    __slots__ = ("_ctx", "_step")

    def __init__(self, ctx, step):
        self._ctx, self._step = ctx, step

    def __getattr__(self, name):
        return getattr(self._ctx, name)

    def fold_values(self, reducer, arrays, what: str):
        """``((a0 op a1) op a2) ...`` into a new array, or None (not this step's reducer, or
        arrays it has no kernel for: the caller folds with the interpreter)."""
        step = self._step
        if reducer is not step.instr.attrs.get("to_apply") or len(arrays) < 2:
            return None
        first = np.asarray(arrays[0])
        kernels = step.folders.get(first.dtype)
        if kernels is None:
            return None
        arrays = [np.ascontiguousarray(a) for a in arrays]
        if any(a.dtype != first.dtype or a.shape != first.shape for a in arrays):
            return None
        fold, acc = kernels
        out = buffers.POOL.empty(first.shape, first.dtype)
        count = first.size
        if count:
            fold.fn((ctypes.c_void_p * 3)(_address(arrays[0]), _address(arrays[1]),
                                          _address(out)), 0, count)
            for a in arrays[2:]:
                acc.fn((ctypes.c_void_p * 2)(_address(out), _address(a)), 0, count)
        return out


class _HostCall:
    """A host-table entry calling a method of a step."""

    __slots__ = ("method",)

    def __init__(self, method):
        self.method = method

    def __call__(self, ptrs, plan_ctx):
        self.method(ptrs, plan_ctx)


def _copy_value(v):
    return tuple(_copy_value(x) for x in v) if isinstance(v, tuple) else np.array(v, copy=True)


_ADDRESSOF = ctypes.addressof
_FROM_BUFFER = ctypes.c_char.from_buffer


def _address(a: np.ndarray) -> int:
    if a.flags.writeable and a.size and a.dtype.isbuiltin == 1:
        return _ADDRESSOF(_FROM_BUFFER(a))
    return a.ctypes.data


def _in_process(plan_ctx) -> bool:
    return bool(getattr(plan_ctx.options.collectives, "in_process", False))


# -- the run table ---------------------------------------------------------------------------------


class _Run:
    """The collectives of one run of a program on one device: the run table (see the module
    docstring) and the Python side of each handle."""

    __slots__ = ("address", "handles", "table")

    def __init__(self, count: int, options):
        self.table = np.zeros(T_HANDLES + count, np.int64)
        self.table[T_REPLICA] = options.replica_id
        self.table[T_PARTITION] = options.partition_id
        self.handles: list = [None] * count
        self.address = self.table.ctypes.data


class bound:
    """``with bound(program, plan_ctx):`` around a run of ``program``: its run table in the
    thread's context (word 3) for the run, and as ``plan_ctx.collectives``; nothing for a
    program without collectives or device ids."""

    __slots__ = ("count", "plan_ctx", "saved")

    def __init__(self, program, plan_ctx):
        self.count = getattr(program, "run_table_size", 0)
        self.plan_ctx = plan_ctx
        self.saved = None

    def __enter__(self):
        if not self.count:
            return self
        run = _Run(self.count - T_HANDLES, self.plan_ctx.options)
        self.plan_ctx.collectives = run
        ctx = executor.context()
        self.saved = ctx.words[3]
        ctx.words[3] = run.address
        return self

    def __exit__(self, *exc):
        if self.count:
            executor.context().words[3] = self.saved
        return False


# -- shared blocks and handles ----------------------------------------------------------------------


class _Block:
    """The memory a group's members meet in (see the module docstring): line 0 holds the
    abort flag, the number of members waiting in Python, the epoch and the number of
    members sleeping on it (``B_*``); line 1 + j member j's arrival (word 0) and departure
    (word 1) counts; then ``n x P`` addresses; then (``stage`` > 0) two rounds' staging
    areas of ``stage`` bytes per member (64-byte aligned)."""

    def __init__(self, n: int, pointers: int, stage: int = 0):
        self.n = n
        header = -(-8 * (LINE * (n + 1) + n * pointers) // 64) * 64
        self.raw = np.zeros(header + 2 * n * stage + 64, np.uint8)
        offset = -self.raw.ctypes.data % 64
        self.address = self.raw.ctypes.data + offset
        self.view = self.raw[offset:offset + header].view(np.int64)
        self.stage_address = self.address + header

    def abort(self) -> None:
        self.view[B_ABORT] = 1


class _Handle:
    __slots__ = ("block", "devices", "me", "state", "timeout", "what", "words")

    def __init__(self, words, block, devices, me, state, what, timeout):
        self.words, self.block, self.devices, self.me = words, block, devices, me
        self.state, self.what, self.timeout = state, what, timeout


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


_LIBC: list = []


def _libc_addresses() -> tuple[int, int] | None:
    """The addresses of libc's syscall and clock_gettime (the wait loop calls them; its
    futex is Linux's), or None where there are none (then the generic path runs)."""
    if not _LIBC:
        try:
            libc = ctypes.CDLL(None)
            found = tuple(ctypes.cast(getattr(libc, name), ctypes.c_void_p).value
                          for name in ("syscall", "clock_gettime"))
        except (OSError, AttributeError):
            found = None
        _LIBC.append(found if sys.platform.startswith("linux") and found and all(found)
                     else None)
    return _LIBC[0]


def _members(step, ctx):
    """(devices of the group in order, this device's rank, source/root rank) for the native
    path, or None when the generic path must run it (it raises the interpreter's errors)."""
    instr = step.instr
    form = step.form
    if form == "permute":
        perm = permutation(ctx, instr)
        ids = sorted({i for pair in perm.pairs for i in pair})
        if perm.me not in ids:
            return (), -1, -1
        devices = tuple(perm.device_of(i) for i in ids)
        source = perm.source
        return devices, ids.index(perm.me), -1 if source is None else ids.index(source)
    group = step._group(ctx, allow_outside=form == "broadcast")
    if group is None:
        return (), -1, -1
    n = group.size
    if form in ("all-gather", "reduce-scatter", "all-to-all"):
        d = int(instr.attrs["dimensions"])
        for operand, (_, result) in zip(instr.operands, instr.shape.leaves()):
            dims = [int(x) for x in operand.shape.dimensions]
            out = [int(x) for x in result.dimensions]
            if form == "all-gather" and out[d] != dims[d] * n:
                return None
            if form == "reduce-scatter" and dims[d] != out[d] * n:
                return None
            if form == "all-to-all" and dims[d] % n:
                return None
    if form == "all-to-all-tuple" and len(instr.operands) != n:
        return None
    return group.devices, group.rank, 0


def _setup(step, plan_ctx) -> None:
    """Make this device's handle of ``step`` for the run (or mark it generic)."""
    run = plan_ctx.collectives
    k = step.index
    ctx = plan_ctx.eval_context()
    backend = backend_of(ctx)
    libc = _libc_addresses()
    if not getattr(backend, "in_process", False) or libc is None:
        run.table[T_HANDLES + k] = GENERIC
        return
    members = _members(step, ctx)
    if members is None:
        run.table[T_HANDLES + k] = GENERIC
        return
    devices, rank, source = members
    instr = step.instr
    what = f"{instr.opcode} %{instr.name}"
    words = np.zeros(_HANDLE_WORDS, np.int64)
    state = backend.state
    block = None
    if devices:
        pointers = len(step._in) + len(step._out)

        def make():
            made = _Block(len(devices), pointers, step.stage_bytes)
            state.on_abort(made.abort)
            return made

        block = backend.shared(("xlapy.cpu.collectives", instr.opcode,
                                instr.attrs.get("channel_id"), instr.name, devices), make, what)
        words[H_BLOCK] = block.address
        words[H_STAGE] = block.stage_address
    oversubscribed = len(state.devices) > _cores()
    words[H_RANK] = rank
    words[H_SIZE] = len(devices)
    words[H_PAUSE_NS] = 0 if oversubscribed else PAUSE_NS
    timeout = getattr(ctx.options, "timeout", None)
    # the native wait is part of the timeout: at most a tenth of it before Python's
    words[H_SPIN_NS] = SPIN_NS if timeout is None else min(SPIN_NS, int(timeout * 1e8))
    words[H_SYSCALL_FN], words[H_CLOCK_FN] = libc
    words[H_SOURCE] = source
    words[H_SPLIT] = SPLIT_BYTES
    run.handles[k] = _Handle(words, block, devices, devices[rank] if devices else None, state,
                             what, timeout)
    run.table[T_HANDLES + k] = words.ctypes.data


def _wait(step, plan_ctx, field: int) -> None:
    """Wait in Python until every member of the group arrived (field 0) or departed (1)."""
    handle = plan_ctx.collectives.handles[step.index]
    block = handle.block
    n = block.n
    done = int(handle.words[H_ROUND])
    view = block.view
    slots = [LINE * (1 + j) + field for j in range(n)]

    def ready():
        return all(view[s] >= done for s in slots)

    def missing():
        return [d for d, s in zip(handle.devices, slots) if view[s] < done]

    state = handle.state
    what = handle.what if field == 0 else f"{handle.what} (departure)"
    atomic_add(block.address + 8 * B_WAITERS, 1)
    try:
        with state.cond:
            state.check_abort(handle.what)
            state.wait(handle.me, what, ready, missing, handle.timeout)
    finally:
        atomic_add(block.address + 8 * B_WAITERS, -1)


_ATOMIC: list = []
_ATOMIC_LOCK = threading.Lock()


def atomic_add(address: int, value: int) -> int:
    """``*address += value`` on an int64, sequentially consistent (a native function compiled
    once); returns the old value."""
    if not _ATOMIC:
        with _ATOMIC_LOCK:
            if not _ATOMIC:
                import llvmlite.binding as llvm

                from xlapy.backends.cpu.jit import get_jit

                get_jit()
                mod = ir.Module("xlapy_atomic")
                fn = ir.Function(mod, ir.FunctionType(I64, [I64, I64]), "xlapy_atomic_add")
                b = ir.IRBuilder(fn.append_basic_block("entry"))
                ptr = b.inttoptr(fn.args[0], I64P)
                b.ret(b.atomic_rmw("add", ptr, fn.args[1], "seq_cst"))
                parsed = llvm.parse_assembly(str(mod))
                parsed.verify()
                machine = llvm.Target.from_default_triple().create_target_machine()
                engine = llvm.create_mcjit_compiler(parsed, machine)
                engine.finalize_object()
                proto = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)
                _ATOMIC.append((engine, proto(engine.get_function_address("xlapy_atomic_add"))))
    return _ATOMIC[0][1](address, value)


# -- native code --------------------------------------------------------------------------------------


def _memcpy(mod):
    name = "llvm.memcpy.p0.p0.i64"
    fn = mod.globals.get(name)
    if fn is None:
        fn = ir.Function(mod, ir.FunctionType(VOID, [I8P, I8P, I64, I1]), name)
    return fn


def _memset(mod):
    name = "llvm.memset.p0.i64"
    fn = mod.globals.get(name)
    if fn is None:
        fn = ir.Function(mod, ir.FunctionType(VOID, [I8P, I8, I64, I1]), name)
    return fn


def _pause(mod):
    name = "llvm.x86.sse2.pause"
    fn = mod.globals.get(name)
    if fn is None:
        fn = ir.Function(mod, ir.FunctionType(VOID, []), name)
    return fn


def _c(v: int) -> ir.Constant:
    return ir.Constant(I64, int(v))


#: Linux's futex system call (x86-64 number) and its private wait/wake operations.
SYS_FUTEX, FUTEX_WAIT_PRIVATE, FUTEX_WAKE_PRIVATE = 202, 128, 129
_SYSCALL_TYPE = ir.FunctionType(I64, [I64], var_arg=True)


def _wait_function(mod):
    """``i1 xlapy.coll.wait(i64* block, i64 n, i64 field, i64 round, i64* handle)``: wait
    until word ``field`` of every member line is at least ``round``: pause instructions for
    the handle's ``H_PAUSE_NS`` nanoseconds, then sleep on the block's epoch (a futex every
    member's store bumps; slices of ``FUTEX_SLICE_NS``) until ``H_SPIN_NS`` passed
    (CLOCK_MONOTONIC through the handle's clock_gettime); 0 when that ran out or the
    block's abort flag is set (the caller then waits in Python)."""
    name = "xlapy.coll.wait"
    fn = mod.globals.get(name)
    if fn is not None:
        return fn
    fn = ir.Function(mod, ir.FunctionType(I1, [I64P, I64, I64, I64, I64P]), name)
    fn.linkage = "internal"
    words, n, field, rnd, h = fn.args
    entry = fn.append_basic_block("entry")
    head = fn.append_basic_block("head")
    check = fn.append_basic_block("check")
    spin = fn.append_basic_block("spin")
    clock = fn.append_basic_block("clock")
    relax = fn.append_basic_block("relax")
    do_pause = fn.append_basic_block("pause")
    do_sleep = fn.append_basic_block("sleep")
    ok = fn.append_basic_block("ok")
    b = ir.IRBuilder(entry)
    j_slot = b.alloca(I64, name="j")
    s_slot = b.alloca(I64, name="spins")
    sleep_slot = b.alloca(I1, name="sleeping")
    ts = b.alloca(ir.ArrayType(I64, 2), name="ts")
    ts_ptr = b.bitcast(ts, I8P)
    sec_p = b.gep(ts, [ir.Constant(I32, 0), ir.Constant(I32, 0)])
    nsec_p = b.gep(ts, [ir.Constant(I32, 0), ir.Constant(I32, 1)])
    clock_fn = b.inttoptr(b.load(b.gep(h, [_c(H_CLOCK_FN)])),
                          ir.FunctionType(I32, [I32, I8P]).as_pointer())
    syscall = b.inttoptr(b.load(b.gep(h, [_c(H_SYSCALL_FN)])), _SYSCALL_TYPE.as_pointer())
    pause_ns = b.load(b.gep(h, [_c(H_PAUSE_NS)]), name="pause_ns")
    spin_ns = b.load(b.gep(h, [_c(H_SPIN_NS)]), name="spin_ns")
    epoch = b.bitcast(b.gep(words, [_c(B_EPOCH)]), I32.as_pointer(), name="epoch")
    sleepers = b.gep(words, [_c(B_SLEEPERS)], name="native_sleepers")

    def now():
        b.call(clock_fn, [ir.Constant(I32, 1), ts_ptr])  # CLOCK_MONOTONIC
        return b.add(b.mul(b.load(sec_p), _c(1_000_000_000)), b.load(nsec_p))

    b.store(_c(0), j_slot)
    b.store(_c(0), s_slot)
    b.store(b.icmp_signed("<=", pause_ns, _c(0)), sleep_slot)
    t0 = now()
    b.branch(head)
    b.position_at_end(head)
    seen = b.load_atomic(epoch, "acquire", 4, name="seen")  # before the counts: no lost wake
    j = b.load(j_slot, name="j")
    b.cbranch(b.icmp_signed(">=", j, n), ok, check)
    b.position_at_end(check)
    at = b.add(b.mul(b.add(j, _c(1)), _c(LINE)), field)
    v = b.load_atomic(b.gep(words, [at]), "acquire", 8, name="count")
    arrived = b.icmp_signed(">=", v, rnd)
    with b.if_then(arrived):
        b.store(b.add(j, _c(1)), j_slot)
    b.cbranch(arrived, head, spin)
    b.position_at_end(spin)
    aborted = b.load_atomic(words, "monotonic", 8, name="abort")
    with b.if_then(b.icmp_signed("!=", aborted, _c(0)), likely=False):
        b.ret(ir.Constant(I1, 0))
    spins = b.add(b.load(s_slot), _c(1), name="spins")
    b.store(spins, s_slot)
    sleeping = b.load(sleep_slot)
    due = b.or_(sleeping, b.icmp_signed("==", b.and_(spins, _c(63)), _c(0)))
    b.cbranch(due, clock, relax)
    b.position_at_end(clock)
    elapsed = b.sub(now(), t0, name="elapsed")
    with b.if_then(b.icmp_signed(">", elapsed, spin_ns), likely=False):
        b.ret(ir.Constant(I1, 0))
    b.store(b.icmp_signed(">", elapsed, pause_ns), sleep_slot)
    b.branch(relax)
    b.position_at_end(relax)
    b.cbranch(b.load(sleep_slot), do_sleep, do_pause)
    b.position_at_end(do_pause)
    b.call(_pause(mod), [])
    b.branch(head)
    b.position_at_end(do_sleep)
    # announce the sleep, then look again: a member storing its count after our look sees
    # the sleeper and bumps the epoch, so the futex wait returns at once
    b.atomic_rmw("add", sleepers, _c(1), "seq_cst")
    again = b.load_atomic(b.gep(words, [at]), "seq_cst", 8, name="again")
    with b.if_then(b.icmp_signed("<", again, rnd)):
        b.store(_c(0), sec_p)
        b.store(_c(FUTEX_SLICE_NS), nsec_p)
        b.call(syscall, [_c(SYS_FUTEX), b.ptrtoint(epoch, I64), _c(FUTEX_WAIT_PRIVATE),
                         b.zext(seen, I64), b.ptrtoint(ts_ptr, I64), _c(0), _c(0)])
    b.atomic_rmw("sub", sleepers, _c(1), "seq_cst")
    b.branch(head)
    b.position_at_end(ok)
    b.ret(ir.Constant(I1, 1))
    return fn


def _wake_function(mod):
    """``void xlapy.coll.wake(i64* block, i64* handle)``: after a member stored a count,
    bump the block's epoch and wake the members sleeping on it (if any)."""
    name = "xlapy.coll.wake"
    fn = mod.globals.get(name)
    if fn is not None:
        return fn
    fn = ir.Function(mod, ir.FunctionType(VOID, [I64P, I64P]), name)
    fn.linkage = "internal"
    words, h = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    epoch = b.bitcast(b.gep(words, [_c(B_EPOCH)]), I32.as_pointer(), name="epoch")
    b.atomic_rmw("add", epoch, ir.Constant(I32, 1), "seq_cst")
    count = b.load_atomic(b.gep(words, [_c(B_SLEEPERS)]), "seq_cst", 8, name="sleepers")
    with b.if_then(b.icmp_signed("!=", count, _c(0)), likely=False):
        syscall = b.inttoptr(b.load(b.gep(h, [_c(H_SYSCALL_FN)])), _SYSCALL_TYPE.as_pointer())
        b.call(syscall, [_c(SYS_FUTEX), b.ptrtoint(epoch, I64), _c(FUTEX_WAKE_PRIVATE),
                         _c(2 ** 31 - 1)])
    b.ret_void()
    return fn


class _NativeEmitter:
    """Emits a CollectiveStep's native function (see the module docstring)."""

    def __init__(self, planner, step):
        self.planner = planner
        self.mod = planner.irmod
        self.step = step
        self.instr = step.instr
        self.n_in = len(step._in)
        self.n_out = len(step._out)
        self.P = self.n_in + self.n_out
        self.offsets = []  # each operand's offset in a member's staging area
        size = 0
        for t in step._in:
            self.offsets.append(size)
            size += -(-t.nbytes // 64) * 64
        self.staged = step.form not in ("replica-id", "partition-id") and size <= STAGE_BYTES
        if self.staged:
            step.stage_bytes = max(size, 64)
        self._folds = planner.__dict__.setdefault("_collective_folds", {})
        self._fold_kernel_of = planner.__dict__.setdefault("_collective_fold_kernels", {})

    # -- helpers ------------------------------------------------------------------------------

    def _host(self, method) -> int:
        return self.planner.host_table.add(_HostCall(method))

    def _call_host(self, ident: int):
        """Call out (executor's HOST slot) with this function's bufs; returns the rc."""
        b = self.b
        words = b.bitcast(self.ctx, I64P)
        table = b.inttoptr(b.load(b.gep(words, [_c(1)])), I8P.as_pointer())
        raw = b.load(b.gep(table, [_c(executor.HOST)]))
        host = b.bitcast(raw, _HOST_TYPE.as_pointer())
        return b.call(host, [self.ctx, _c(ident), self.bufs])

    def _fail_if(self, rc) -> None:
        b = self.b
        with b.if_then(b.icmp_signed("!=", rc, ir.Constant(I32, 0)), likely=False):
            b.store(_c(1), b.bitcast(self.ctx, I64P))
            b.ret_void()

    def _buf(self, k: int):
        return self.b.load(self.b.gep(self.bufs, [_c(k)]), name=f"buf{k}")

    def _word(self, base, k):
        return self.b.gep(base, [k if isinstance(k, ir.Value) else _c(k)])

    def _copy(self, dst, src, nbytes):
        self.b.call(_memcpy(self.mod), [dst, src, nbytes if isinstance(nbytes, ir.Value)
                                        else _c(nbytes), ir.Constant(I1, 0)])

    def _zero(self, dst, nbytes: int):
        if nbytes:
            self.b.call(_memset(self.mod), [dst, ir.Constant(I8, 0), _c(nbytes),
                                            ir.Constant(I1, 0)])

    def _offset(self, ptr, nbytes):
        return self.b.gep(ptr, [nbytes if isinstance(nbytes, ir.Value) else _c(nbytes)])

    def _member_ptr(self, j, p):
        """Member ``j``'s pointer ``p`` (its operands, then its results): from the block's
        table, or for a staged operand its copy in this round's staging area."""
        b = self.b
        j = j if isinstance(j, ir.Value) else _c(j)
        if self.staged and p < self.n_in:
            return self._offset(self._stage_of(j), _c(self.offsets[p]))
        at = b.add(b.mul(j, _c(self.P)), _c(p))
        return b.inttoptr(b.load(b.gep(self.table, [at])), I8P)

    def _stage_of(self, j):
        """Member ``j``'s staging area of this round."""
        b = self.b
        slot = b.add(b.mul(self.parity, self.n), j)
        return self._offset(self.stage, b.mul(slot, _c(self.step.stage_bytes)))

    # -- the function ---------------------------------------------------------------------------

    def emit(self) -> None:
        step = self.step
        name = self.mod.get_unique_name(f"coll.{self.instr.name}")
        fn = ir.Function(self.mod, KERNEL_TYPE, name=name)
        self.fn = fn
        self.bufs = fn.args[0]
        self.b = b = ir.IRBuilder(fn.append_basic_block("entry"))
        self.ctx = self._buf(self.P)
        step.native_call = name
        step.spec = KernelSpec(name=name, n_inputs=self.n_in, outputs=[], domain=1,
                               parallel=False)
        generic = self._host(step.host_generic)
        ctx_words = b.bitcast(self.ctx, I64P)
        table = b.inttoptr(b.load(b.gep(ctx_words, [_c(3)]), name="run"), I64P)
        no_table = b.icmp_unsigned("==", b.ptrtoint(table, I64), _c(0))
        if step.form in ("replica-id", "partition-id"):
            with b.if_else(no_table, likely=False) as (then, otherwise):
                with then:
                    self._fail_if(self._call_host(generic))
                with otherwise:
                    at = T_REPLICA if step.form == "replica-id" else T_PARTITION
                    value = b.trunc(b.load(b.gep(table, [_c(at)])), I32)
                    b.store(value, b.bitcast(self._buf(0), I32.as_pointer()))
            b.ret_void()
            return
        with b.if_then(no_table, likely=False):
            self._fail_if(self._call_host(generic))
            b.ret_void()
        slot = b.gep(table, [_c(T_HANDLES + step.index)])
        handle = b.load(slot, name="handle")
        with b.if_then(b.icmp_unsigned("==", handle, _c(0)), likely=False):
            self._fail_if(self._call_host(self._host(step.host_setup)))
        handle = b.load(slot, name="handle")
        with b.if_then(b.icmp_unsigned("==", handle, _c(GENERIC)), likely=False):
            self._fail_if(self._call_host(generic))
            b.ret_void()
        h = b.inttoptr(handle, I64P, name="h")
        self.h = h
        n = b.load(self._word(h, H_SIZE), name="n")
        self.n = n
        with b.if_then(b.icmp_signed("==", n, _c(0)), likely=False):
            for k, t in enumerate(step._out):  # outside every group: zeros
                self._zero(self._buf(self.n_in + k), t.nbytes)
            b.ret_void()
        words = b.inttoptr(b.load(self._word(h, H_BLOCK)), I64P, name="block")
        self.words = words
        aborted = b.load_atomic(words, "monotonic", 8, name="aborted")
        with b.if_then(b.icmp_signed("!=", aborted, _c(0)), likely=False):  # raises
            self._fail_if(self._call_host(self._host(step.host_wait_arrival)))
        self.rank = b.load(self._word(h, H_RANK), name="rank")
        rnd = b.add(b.load(self._word(h, H_ROUND)), _c(1), name="round")
        b.store(rnd, self._word(h, H_ROUND))
        self.table = b.gep(words, [b.mul(b.add(n, _c(1)), _c(LINE))], name="ptrs")
        if self.staged:  # copies of the operands in this round's area: one rendezvous
            self.parity = b.and_(rnd, _c(1), name="parity")
            self.stage = b.inttoptr(b.load(self._word(h, H_STAGE)), I8P, name="stage")
            mine = self._stage_of(self.rank)
            for k, t in enumerate(step._in):
                if t.nbytes:
                    self._copy(self._offset(mine, _c(self.offsets[k])), self._buf(k), t.nbytes)
            self._meet(0, rnd, step.host_wait_arrival)
            self._work()
        else:  # the operands read in place: a departure barrier before anyone goes on
            mine = b.mul(self.rank, _c(self.P))
            for p in range(self.P):
                b.store(b.ptrtoint(self._buf(p), I64), b.gep(self.table, [b.add(mine, _c(p))]))
            self._meet(0, rnd, step.host_wait_arrival)
            self._work()
            self._meet(1, rnd, step.host_wait_departure)
        b.ret_void()

    def _meet(self, field: int, rnd, wait_method) -> None:
        """Store this member's count ``field``, wake members waiting in Python, wait for
        every member's."""
        b = self.b
        mine = b.gep(self.words, [b.add(b.mul(b.add(self.rank, _c(1)), _c(LINE)), _c(field))])
        b.store_atomic(rnd, mine, "seq_cst", 8)
        b.call(_wake_function(self.mod), [self.words, self.h])
        sleepers = b.load_atomic(b.gep(self.words, [_c(B_WAITERS)]), "seq_cst", 8,
                                 name="waiters")
        with b.if_then(b.icmp_signed("!=", sleepers, _c(0)), likely=False):
            self._fail_if(self._call_host(self._host(self.step.host_notify)))
        ok = b.call(_wait_function(self.mod), [self.words, self.n, _c(field), rnd, self.h])
        with b.if_then(b.not_(ok), likely=False):
            self._fail_if(self._call_host(self._host(wait_method)))

    # -- each member's part ----------------------------------------------------------------------

    def _work(self) -> None:
        form = self.step.form
        if form in ("all-reduce", "reduce-scatter"):
            reducer = self.instr.attrs["to_apply"]
            for k in range(self.n_in):
                shape = self.instr.operands[k].shape
                if form == "all-reduce":
                    self._all_reduce(k, shape, reducer)
                else:
                    self._reduce_scatter(k, shape, reducer)
                key = (id(reducer), shape.element_type)
                if key in self._fold_kernel_of:
                    dt = np.dtype(dtypes.to_dtype(shape.element_type))
                    self.step.folders[dt] = self._fold_kernel_of[key]
        elif form == "all-gather":
            for k in range(self.n_in):
                self._all_gather(k, self.instr.operands[k].shape)
        elif form == "all-to-all":
            self._all_to_all(self.instr.operands[0].shape)
        elif form == "all-to-all-tuple":
            nbytes = self.step._in[0].nbytes
            for j in range(self.n_in):
                self._copy(self._buf(self.n_in + j), self._member_ptr_at_rank(j), nbytes)
        elif form in ("broadcast", "permute"):
            b = self.b
            source = b.load(self._word(self.h, H_SOURCE), name="source")
            has = b.icmp_signed(">=", source, _c(0))
            with b.if_else(has) as (then, otherwise):
                with then:
                    for k, t in enumerate(self.step._in):
                        if t.nbytes:
                            self._copy(self._buf(self.n_in + k), self._member_ptr(source, k),
                                       t.nbytes)
                with otherwise:
                    for k, t in enumerate(self.step._out):
                        self._zero(self._buf(self.n_in + k), t.nbytes)

    def _member_ptr_at_rank(self, j: int):
        """Member ``j``'s operand number <this member's rank> (all-to-all's tuple form: the
        operands have one shape, so their staged offsets are multiples of one size)."""
        b = self.b
        if self.staged:
            stride = self.offsets[1] - self.offsets[0] if self.n_in > 1 else 0
            return self._offset(self._stage_of(_c(j)), b.mul(self.rank, _c(stride)))
        at = b.add(_c(j * self.P), self.rank)
        return b.inttoptr(b.load(b.gep(self.table, [at])), I8P)

    def _fold_functions(self, reducer, et):
        """(fold, accumulate): ``void fold(i8* a, i8* b, i8* out, i64 count)`` out[i] =
        op(a[i], b[i]) and ``void acc(i8* out, i8* b, i64 count)`` out[i] = op(out[i],
        b[i]), the reducer inlined."""
        key = (id(reducer), et)
        got = self._folds.get(key)
        if got is not None:
            return got
        mem = el.memory_type(et).as_pointer()
        made = []
        for kind in ("fold", "acc"):
            args = [I8P, I8P, I8P, I64] if kind == "fold" else [I8P, I8P, I64]
            fn = ir.Function(self.mod, ir.FunctionType(VOID, args),
                             self.mod.get_unique_name(f"coll.{kind}.{reducer.name}"))
            fn.linkage = "internal"
            for a in fn.args[:-1]:
                a.add_attribute("noalias")
            b = ir.IRBuilder(fn.append_basic_block("entry"))
            count = fn.args[-1]
            if kind == "fold":
                pa, pb, po = (b.bitcast(a, mem) for a in fn.args[:3])
            else:
                po, pb = (b.bitcast(a, mem) for a in fn.args[:2])
                pa = po
            with for_range(b, 0, count, "i") as i:
                va = el.load_value(b, b.gep(pa, [i]), et, "a")
                vb = el.load_value(b, b.gep(pb, [i]), et, "b")
                (r,) = sc.inline_computation(b, reducer, [va, vb])[:1]
                el.store_value(b, r, b.gep(po, [i]), et, "r")
            b.ret_void()
            made.append(fn)
        self._folds[key] = tuple(made)
        self._fold_kernels(reducer, et, made)
        return self._folds[key]

    def _fold_kernels(self, reducer, et, functions) -> None:
        """Kernels (the kernel signature: bufs = a, b, out / out, b; [lo, hi) elements) over
        ``functions``, so the generic path folds with them too (``CollectiveStep.folders``)."""
        isz = np.dtype(dtypes.to_dtype(et)).itemsize
        made = []
        for fn, n_bufs in zip(functions, (3, 2)):
            name = self.mod.get_unique_name(f"{fn.name}.kernel")
            kernel = ir.Function(self.mod, KERNEL_TYPE, name=name)
            b = ir.IRBuilder(kernel.append_basic_block("entry"))
            bufs, lo, hi = kernel.args
            start = b.mul(lo, _c(isz))
            ptrs = [b.gep(b.load(b.gep(bufs, [_c(k)])), [start]) for k in range(n_bufs)]
            b.call(fn, ptrs + [b.sub(hi, lo)])
            b.ret_void()
            holder = _FoldKernel(KernelSpec(name=name, n_inputs=n_bufs, outputs=[], domain=0))
            self.planner.kernels.append(holder)
            made.append(holder)
        self._fold_kernel_of[(id(reducer), et)] = tuple(made)

    def _fold_range(self, k: int, et, isz: int, reducer, in_off, out, count) -> None:
        """``out[0:count]`` = the members' operand ``k`` from byte ``in_off`` on, folded in
        group order, ``CHUNK_BYTES`` at a time."""
        b = self.b
        fold, acc = self._fold_functions(reducer, et)
        n = self.n
        chunk = max(1, CHUNK_BYTES // isz)
        with b.if_else(b.icmp_signed("==", n, _c(1))) as (one, many):
            with one:
                self._copy(out, self._offset(self._member_ptr(_c(0), k), in_off),
                           b.mul(count, _c(isz)))
            with many:
                steps = b.udiv(b.add(count, _c(chunk - 1)), _c(chunk))
                with for_range(b, 0, steps, "c") as c:
                    start = b.mul(c, _c(chunk))
                    cnt = b.sub(count, start)
                    cnt = b.select(b.icmp_signed("<", cnt, _c(chunk)), cnt, _c(chunk))
                    byte = b.mul(start, _c(isz))
                    dst = self._offset(out, byte)
                    src = b.add(in_off, byte)
                    b.call(fold, [self._offset(self._member_ptr(_c(0), k), src),
                                  self._offset(self._member_ptr(_c(1), k), src), dst, cnt])
                    with for_range(b, 2, n, "j") as j:
                        b.call(acc, [dst, self._offset(self._member_ptr(j, k), src), cnt])

    def _all_reduce(self, k: int, shape, reducer) -> None:
        b = self.b
        et = shape.element_type
        isz = _itemsize(shape)
        count = _elements(shape)
        if not count:
            return
        n, rank = self.n, self.rank
        out_me = self._buf(self.n_in + k)
        if self.staged:  # small: every member folds the staged copies into its own result
            self._fold_range(k, et, isz, reducer, _c(0), out_me, _c(count))
            return
        split = b.icmp_signed(">=", _c(count * isz), b.load(self._word(self.h, H_SPLIT)))
        split = b.and_(split, b.icmp_signed(">", n, _c(1)))
        with b.if_else(split) as (big, small):
            with small:
                self._fold_range(k, et, isz, reducer, _c(0), out_me, _c(count))
            with big:
                align = max(1, 64 // isz)
                per = b.udiv(b.add(_c(count), b.sub(n, _c(1))), n)
                per = b.mul(b.udiv(b.add(per, _c(align - 1)), _c(align)), _c(align))
                lo = b.mul(rank, per)
                lo = b.select(b.icmp_signed("<", lo, _c(count)), lo, _c(count))
                hi = b.add(lo, per)
                hi = b.select(b.icmp_signed("<", hi, _c(count)), hi, _c(count))
                todo = b.sub(hi, lo)
                with b.if_then(b.icmp_signed(">", todo, _c(0))):
                    byte = b.mul(lo, _c(isz))
                    chunk = max(1, (4 * CHUNK_BYTES) // isz)
                    steps = b.udiv(b.add(todo, _c(chunk - 1)), _c(chunk))
                    with for_range(b, 0, steps, "piece") as c:
                        start = b.mul(c, _c(chunk))
                        cnt = b.sub(todo, start)
                        cnt = b.select(b.icmp_signed("<", cnt, _c(chunk)), cnt, _c(chunk))
                        at = b.add(byte, b.mul(start, _c(isz)))
                        dst = self._offset(out_me, at)
                        self._fold_range(k, et, isz, reducer, at, dst, cnt)
                        with for_range(b, 0, n, "to") as j, \
                                b.if_then(b.icmp_signed("!=", j, rank)):
                            peer = self._member_ptr(j, self.n_in + k)
                            self._copy(self._offset(peer, at), dst, b.mul(cnt, _c(isz)))

    def _rows(self, shape, d: int) -> tuple[int, int]:
        dims = [int(x) for x in shape.dimensions]
        rows = 1
        for x in dims[:d]:
            rows *= x
        rest = 1
        for x in dims[d + 1:]:
            rest *= x
        return rows, rest

    def _reduce_scatter(self, k: int, shape, reducer) -> None:
        b = self.b
        d = int(self.instr.attrs["dimensions"])
        et = shape.element_type
        isz = _itemsize(shape)
        rows, rest = self._rows(shape, d)
        out_shape = self.instr.shape.leaves()[k][1]
        block = int(out_shape.dimensions[d]) * rest  # elements of one block of one row
        if not block or not rows:
            return
        out_me = self._buf(self.n_in + k)
        with for_range(b, 0, rows, "row") as r:
            first = b.add(b.mul(r, self.n), self.rank)
            in_off = b.mul(first, _c(block * isz))
            out = self._offset(out_me, b.mul(r, _c(block * isz)))
            self._fold_range(k, et, isz, reducer, in_off, out, _c(block))

    def _all_gather(self, k: int, shape) -> None:
        b = self.b
        d = int(self.instr.attrs["dimensions"])
        isz = _itemsize(shape)
        rows, rest = self._rows(shape, d)
        inner = int(shape.dimensions[d]) * rest * isz
        if not inner or not rows:
            return
        out_me = self._buf(self.n_in + k)
        with for_range(b, 0, self.n, "from") as j:
            src = self._member_ptr(j, k)
            if rows == 1:
                self._copy(self._offset(out_me, b.mul(j, _c(inner))), src, inner)
            else:
                with for_range(b, 0, rows, "row") as r:
                    at = b.mul(b.add(b.mul(r, self.n), j), _c(inner))
                    self._copy(self._offset(out_me, at), self._offset(src, b.mul(r, _c(inner))),
                               inner)

    def _all_to_all(self, shape) -> None:
        b = self.b
        d = int(self.instr.attrs["dimensions"])
        isz = _itemsize(shape)
        rows, rest = self._rows(shape, d)
        size = int(shape.dimensions[d])
        if not size or not rows or not rest:
            return
        inner = b.mul(b.udiv(_c(size), self.n), _c(rest * isz))  # bytes of one block row
        out_me = self._buf(self.n_in)
        with for_range(b, 0, self.n, "from") as j:
            src = self._member_ptr(j, 0)
            with for_range(b, 0, rows, "row") as r:
                base = b.mul(r, self.n)
                dst = self._offset(out_me, b.mul(b.add(base, j), inner))
                self._copy(dst, self._offset(src, b.mul(b.add(base, self.rank), inner)), inner)


__all__ = ["OPCODES", "CollectiveStep", "DoneStep", "atomic_add", "bound", "plan_step"]

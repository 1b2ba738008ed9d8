"""The computation emitter: a plan (``steps.Plan``) emitted as ONE native function, with its
buffers assigned at compile time. The entry computation of every program the backend can run
natively is such a function (``compile_entry``); so is every compiled while loop
(``control_flow``, which adds the loop around the same emitter).

**The function.** It follows the kernel signature (``void f(i8** bufs, i64 lo, i64 hi)``,
``lo`` and ``hi`` ignored, so ``Planner.compile`` binds it like a kernel)::

    bufs = [parameter leaves (n)] + [result leaves (m)] + [workspace] + [context] +
           [constants]

The *leaves* of a value are its arrays (a tuple flattened depth first). The *result leaves*
are the caller's buffers: the function writes its results there (the instruction computing a
result writes it directly when it can, see below). The *workspace* is one byte buffer
holding every intermediate value at a static offset; the *context* is the executor's
(``executor.Context``: the status word, the function table, the cancel poll period); the
*constants* are the arrays of constant instructions and kernels' bound arrays.

**Buffer assignment.** Liveness is computed per leaf over the plan's schedule: a tuple value
holds each of its leaves only until the last step that reads that leaf (a
get-tuple-element reads one element's leaves), so a leaf taken out of a tuple dies with its
own last use. Each kernel output, library result or host call result gets a workspace slot
released when its last holder drops it; the offsets are assigned once every slot's live
range is known (``_Arena``: the smaller of best fit in emission order and XLA's
decreasing-size best fit, ``ALIGN``-aligned). tuple, get-tuple-element, opt-barrier and
reshape/bitcast of a row-major array are aliases resolved at emission time: they cost no
code.

**In place.** A kernel with ``spec.in_place`` (dynamic-update-slice, scatter) writes its
output over its input when the input's slot dies at that step and no other input reads it;
otherwise the output starts as a copy of the input. Parameters are never written, except
through the result buffer the caller passed for a donated parameter (below). A while loop is
in place too: its result leaf may take the slot of its dying initial leaf.

**Results written directly.** At the entry, the instruction computing a result leaf (found
through tuple, get-tuple-element and reshape aliases) writes into the caller's buffer for
it: a kernel, a library call, a host call, a nested while (its final state), a conditional.
A result that is a parameter, a constant, or a leaf another result took already is copied
there at the end.

**Donation** (``input_output_alias``). The caller may pass a donated parameter's own buffer
as the aliased result's buffer. The code is right both ways: an instruction writes an
aliased result directly only when the parameter is dead by then (or dies at that step and
the instruction updates it in place: then the copy of the parameter into the result is
skipped at run time when the two are the same memory), and the copies at the end read
parameters before anything overwrites them (a parameter moving to another parameter's
result goes through a temporary).

**Collectives.** A collective with a native function of its own (``step.native_call``,
collectives.py) is a call to it, from the entry as from a loop: it finds the device's run
table in the context (word 3, set around the program's run) and meets the other devices
from native code.

**Host calls.** A step native code cannot run itself (an interpreted instruction, a library
call in a form the native GEMM call does not take, a while loop that stays in Python) is a
call out through the executor (``executor.StepCall``); a kernel big enough to be split over
threads is a call of the worker pool (workers.py) from native code; a failed call out sets the context's status and
every enclosing function returns, the Python side re-raises.

``compile_entry(planner, plan)`` returns a ``NativeEntry`` (its ``run`` is the whole
per-call work: one bufs array, the result buffers and the workspace from the pool, one
native call), or None when the program keeps the Python plan executor (``steps.Plan``):
a value of the entry or of a computation it runs is not an array of a kernel element type
(tokens, opaque values, dynamic shapes), or a step can be neither emitted nor called out
(see ``step_supported``).
"""

from __future__ import annotations

import ctypes

import numpy as np
from llvmlite import ir

from xlapy.backends import base
from xlapy.backends.cpu import buffers, executor, threads, workers
from xlapy.backends.cpu import elemental as el
from xlapy.backends.cpu import library as _library
from xlapy.backends.cpu.kernel_abi import I64, KERNEL_TYPE, KernelSpec
from xlapy.backends.cpu.steps import (
    CallStep,
    ConditionalStep,
    ConstantStep,
    KernelStep,
    KeyedSortStep,
    LibraryStep,
    ValueStep,
    WhileStep,
    _address,
    _named,
)
from xlapy.backends.cpu.workers import GEMM_DRIVER_TYPE, PARALLEL_TYPE
from xlapy.errors import InvalidArgumentError, ResourceExhaustedError
from xlapy.shape import dtypes
from xlapy.shape.tree import build_shaped, flatten_tuples

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I32 = ir.IntType(32)
I8P = I8.as_pointer()
#: i32 host(i8* ctx, i64 id, i8** ptrs) and i32 poll(i8* ctx, i64 id): see executor
HOST_TYPE = ir.FunctionType(I32, [I8P, I64, I8P.as_pointer()])
POLL_TYPE = ir.FunctionType(I32, [I8P, I64])

#: Alignment of workspace slots (bytes): the workspace itself starts so aligned.
ALIGN = base.ALIGN


# -- what can run natively ----------------------------------------------------------------------


def leaf_shapes(shape) -> list | None:
    """The array leaves of ``shape``, depth first; None when a leaf is not an array of a
    kernel element type with static dimensions."""
    out = [leaf for _, leaf in shape.leaves()]
    for s in out:
        if not s.is_array() or s.element_type not in el.TYPES or s.is_dynamic():
            return None
    return out


def nbytes(shape) -> int:
    n = np.dtype(dtypes.to_dtype(shape.element_type)).itemsize
    for d in shape.dimensions:
        n *= int(d)
    return n


def split(s) -> bool:
    """Whether kernel ``s`` (a spec or its ``then``) is split over the worker pool: its
    work (items x cost) is large enough (buffers.PARALLEL_MIN_WORK)."""
    return s.parallel and s.domain >= 2 and s.domain * s.cost >= buffers.PARALLEL_MIN_WORK


#: How deeply calls and conditionals nest inside one function (each level is a call of
#: the emitter): a deeper one is a host call (its plans run in Python), so that the checks
#: and the emitter recurse at most this deep. Real programs nest a few levels.
MAX_NATIVE_DEPTH = 16


def plan_supported(plan, seen: dict, entry: bool = False, depth: int = 0) -> bool:
    """Whether ``plan`` can be emitted natively (``seen``: id(plan) -> the answer, for
    every plan checked; ``entry``: the entry computation, whose Python while loops are host
    calls; ``depth``: how deeply it nests in the function)."""
    if id(plan) in seen:  # a plan reached twice (a shared computation) was checked once
        return seen[id(plan)]
    if depth > MAX_NATIVE_DEPTH:
        return False
    seen[id(plan)] = True
    ok = all(leaf_shapes(p.shape) is not None for p in plan.params) and \
        all(step_supported(step, seen, entry, depth) for step in plan.steps)
    seen[id(plan)] = ok
    return ok


def step_supported(step, seen: dict, entry: bool = False, depth: int = 0) -> bool:
    if leaf_shapes(step.instr.shape) is None:
        return False
    if isinstance(step, (ConstantStep, ValueStep, KernelStep)) or \
            getattr(step, "native_loop", False) or \
            getattr(step, "native_call", None) is not None:
        return True
    if isinstance(step, CallStep) and plan_supported(step.body, seen, depth=depth + 1):
        return True
    if isinstance(step, ConditionalStep):
        selector = step.instr.operands[0].shape
        if selector.element_type in (el.PT.PRED, el.PT.S32) and not selector.dimensions and \
                all(plan_supported(p, seen, depth=depth + 1) for p in step.branches):
            return True
    return host_callable(step, entry)


def host_callable(step, entry: bool = False) -> bool:
    """A step native code runs through a host call (executor.StepCall): its operands and
    result are arrays (or tuples of them) of kernel element types. A while loop that could
    not be compiled is one at the entry (the loops around it in a compiled loop stay in
    Python: test_cpu_depth's nesting limit)."""
    if isinstance(step, WhileStep) and not entry:
        return False
    reads = getattr(step, "reads", None) or step.instr.operands
    return all(leaf_shapes(o.shape) is not None for o in reads)


# -- buffer assignment ------------------------------------------------------------------------


class _Offset(ir.Constant):
    """An i64 constant whose value is set once buffer assignment is done (before the module
    is printed): the workspace offset of a slot, known only when every live range is."""

    def __init__(self):
        super().__init__(I64, 0)

    def set(self, value: int) -> None:
        self.constant = int(value)
        self._clear_string_cache()
        self.__dict__.pop("_StringReferenceCaching__cached_refstr", None)


def _aligned(n_bytes: int) -> int:
    return max(ALIGN, -(-n_bytes // ALIGN) * ALIGN)


class _Arena:
    """Buffer assignment of one function's workspace. During emission it records each
    slot's live range (``alloc`` ... ``free``, in emission order: the order the function
    runs its steps; a slot never freed lives to the end); ``finish`` then gives every slot
    its offset, ALIGN-aligned, two slots sharing bytes only when their ranges are disjoint.

    Two assignments are made and the smaller kept: best fit in emission order (each slot
    takes the smallest freed range that holds it when it is allocated: what an allocator
    at run time would do; it fragments when a small value takes part of a large dead one
    that a larger later value then cannot use), and XLA's global decreasing-size best fit
    (largest slots first, each at the smallest gap left by the slots it is live with).
    ``size`` is the workspace's byte size (finishing the assignment on first use)."""

    def __init__(self):
        self._sizes: list[int] = []  # per slot: aligned bytes
        self._ranges: list[list[int]] = []  # per slot: [first event, last event]
        self._offsets: list[_Offset] = []
        self._online: list[int] = []  # per slot: its offset in emission-order best fit
        self._online_size = 0
        self._free: list[list[int]] = []  # online: [start, end) ranges, sorted, coalesced
        self._clock = 0
        self._size = None
        self.live = 0  # bytes of the slots allocated and not freed
        self.max_live = 0  # the most bytes live at once: no assignment can use fewer

    def alloc(self, n_bytes: int) -> tuple[int, _Offset]:
        """A new slot of ``n_bytes``: (its handle, the offset constant set by finish)."""
        if self._size is not None:
            raise RuntimeError("workspace slot allocated after buffer assignment")
        n = _aligned(n_bytes)
        k = len(self._sizes)
        self._sizes.append(n)
        self._ranges.append([self._clock, -1])
        self._clock += 1
        self._online.append(self._online_alloc(n))
        off = _Offset()
        self._offsets.append(off)
        self.live += n
        self.max_live = max(self.max_live, self.live)
        return k, off

    def free(self, handle: int) -> None:
        self._ranges[handle][1] = self._clock
        self._clock += 1
        n = self._sizes[handle]
        self.live -= n
        self._online_free(self._online[handle], n)

    @property
    def size(self) -> int:
        if self._size is None:
            self.finish()
        return self._size

    def finish(self) -> int:
        """Assign the offsets (once); returns the workspace's size."""
        if self._size is not None:
            return self._size
        offsets, size = self._online, self._online_size
        if len(self._sizes) > 1:
            packed, packed_size = self._decreasing_size()
            if packed_size < size:
                offsets, size = packed, packed_size
        for const, off in zip(self._offsets, offsets):
            const.set(off)
        self._size = size
        return size

    def _decreasing_size(self) -> tuple[list[int], int]:
        n = len(self._sizes)
        sizes = np.array(self._sizes, np.int64)
        lo = np.array([r[0] for r in self._ranges], np.int64)
        hi = np.array([self._clock if r[1] < 0 else r[1] for r in self._ranges], np.int64)
        order = sorted(range(n), key=lambda k: (-self._sizes[k], self._ranges[k][0]))
        placed = np.zeros(n, bool)
        start = np.zeros(n, np.int64)
        total = 0
        for k in order:
            want = self._sizes[k]
            live = np.flatnonzero(placed & (lo < hi[k]) & (lo[k] < hi))
            best, best_gap, top = None, None, 0
            if live.size:
                by_start = live[np.argsort(start[live], kind="stable")]
                for j in by_start.tolist():  # gaps between the live slots, lowest first
                    gap = int(start[j]) - top
                    if gap >= want and (best_gap is None or gap < best_gap):
                        best, best_gap = top, gap
                    top = max(top, int(start[j] + sizes[j]))
            off = top if best is None else best
            start[k] = off
            placed[k] = True
            total = max(total, off + want)
        return start.tolist(), total

    # emission-order best fit
    def _online_alloc(self, n: int) -> int:
        best = None
        for k, (start, end) in enumerate(self._free):
            if end - start >= n and (best is None or end - start < best[1]):
                best = (k, end - start)
        if best is not None:
            k, size = best
            start = self._free[k][0]
            if size == n:
                del self._free[k]
            else:
                self._free[k][0] = start + n
            return start
        if self._free and self._free[-1][1] == self._online_size:  # grow the last free range
            start = self._free.pop()[0]
        else:
            start = self._online_size
        self._online_size = start + n
        return start

    def _online_free(self, offset: int, n: int) -> None:
        self._free.append([offset, offset + n])
        self._free.sort()
        merged: list[list[int]] = []
        for r in self._free:
            if merged and merged[-1][1] == r[0]:
                merged[-1][1] = r[1]
            else:
                merged.append(r)
        self._free = merged


class Slot:
    """Memory holding one array value: a workspace range (``offset``: its handle in the
    emitter's _Arena), or, ``external``, a buffer of the caller (a parameter or result
    leaf). ``pinned`` slots are never freed."""

    __slots__ = ("external", "nbytes", "offset", "pinned", "ptr")

    def __init__(self, offset, n_bytes, ptr, pinned=False, external=False):
        self.offset, self.nbytes, self.ptr = offset, n_bytes, ptr
        self.pinned, self.external = pinned, external


class Leaf:
    """An array value at emission time: its shape, its address (an i8* computed in the
    entry block) and the slot it lives in (None: a constant)."""

    __slots__ = ("ptr", "shape", "slot")

    def __init__(self, shape, ptr, slot):
        self.shape, self.ptr, self.slot = shape, ptr, slot


def leaves_of(ref) -> list:
    return flatten_tuples(ref)


def build(shape, leaves):
    return build_shaped(shape, lambda _s, _path: next(leaves))


def _leaf_count(shape) -> int:
    return len(shape.leaves())


def _element_ranges(shape) -> list:
    """[lo, hi) of each tuple element's leaves among ``shape``'s flattened leaves."""
    out, k = [], 0
    for s in shape.tuple_shapes:
        n = _leaf_count(s)
        out.append((k, k + n))
        k += n
    return out


def leaf_drops(plan) -> list:
    """Per step of ``plan``: the (id(instr), leaf index) whose last use is that step (a
    get-tuple-element uses its operand's element only; anything else every leaf it
    reads). The root's leaves are never dropped (the caller takes them)."""
    cached = plan.__dict__.get("_leaf_drops")
    if cached is not None:
        return cached
    last: dict = {}
    counts: dict = {}
    for k, step in enumerate(plan.steps):
        instr = step.instr
        for o in getattr(step, "reads", instr.operands):
            n = counts.get(id(o))
            if n is None:
                n = counts[id(o)] = _leaf_count(o.shape)
            if isinstance(step, ValueStep) and instr.opcode == "get-tuple-element":
                lo, hi = _element_ranges(o.shape)[instr.attrs["index"]]
            else:
                lo, hi = 0, n
            for j in range(lo, hi):
                last[(id(o), j)] = k
        for j in range(_leaf_count(instr.shape)):
            last.setdefault((id(instr), j), k)
    root = id(plan.comp.root)
    drops: list[list] = [[] for _ in plan.steps]
    for (key, j), k in last.items():
        if key != root:
            drops[k].append((key, j))
    plan.__dict__["_leaf_drops"] = drops
    return drops


class _Env(dict):
    """id(instr) -> the value (a Leaf or nested tuples of them); ``held``: id(instr) -> its
    leaves, each None once the value stopped holding it."""

    def __init__(self):
        super().__init__()
        self.held: dict = {}


# -- the emitter ------------------------------------------------------------------------------


class Emitter:
    """Emits one function (see the module docstring) with ``n_params`` parameter leaves
    and ``n_results`` result leaves; ``emit_plan`` emits a plan's steps at the builder."""

    def __init__(self, planner, name: str, n_params: int, n_results: int):
        self.planner = planner
        self.n, self.m = n_params, n_results
        self.fn = ir.Function(planner.irmod, KERNEL_TYPE, name=name)
        self.fn.args[0].name = "bufs"
        entry = self.fn.append_basic_block("entry")
        self.pre = ir.IRBuilder(entry)  # pointers, bufs arrays: loop-invariant, emitted once
        self.b = ir.IRBuilder(self.fn.append_basic_block("start"))
        self.bufs = self.fn.args[0]
        self.ws = self._arg(n_params + n_results, "ws")
        self.ctx = self._arg(n_params + n_results + 1, "ctx")
        self.host_table = planner.host_table
        self._abort = None  # the block returning after a failed call out
        self._dying: set = set()  # id(slot) of the slots whose last holder drops at this step
        self._alias_state = False  # whether a kernel may write a dying pinned slot in place
        self.max_gemm = 0  # m*n*k of the largest GEMM called natively (nested loops included)
        self.arena = _Arena()
        self.consts: list[np.ndarray] = []
        self._const_leaf: dict[int, Leaf] = {}
        self._refs: dict[int, int] = {}  # id(slot) -> holders
        self._slots: dict[int, Slot] = {}
        self.memcpy = self._memcpy_fn()
        self._placement: dict[int, dict] = {}  # id(instr) -> {leaf index: Leaf to write}
        self._donor: dict[int, Slot] = {}  # id(result slot) -> the parameter slot it aliases
        self.native_plans: set = set()  # id(plan) of the plans emitted inline
        self.host_steps = 0  # host calls of steps (not kernels split over threads)
        self._current = None  # the instruction being emitted
        self.largest = (0, None)  # the largest workspace slot: (bytes, its instruction)

    # -- helpers -------------------------------------------------------------------------

    def _memcpy_fn(self):
        mod = self.planner.irmod
        name = "llvm.memcpy.p0.p0.i64"
        try:
            return mod.get_global(name)
        except KeyError:
            return ir.Function(mod, ir.FunctionType(ir.VoidType(), [I8P, I8P, I64, I1]), name)

    def _arg(self, k: int, name: str):
        slot = self.pre.gep(self.bufs, [ir.Constant(I64, k)], inbounds=True, name=f"{name}.slot")
        return self.pre.load(slot, name=name)

    def copy(self, dst, src, n_bytes: int) -> None:
        if n_bytes > 0:
            self.b.call(self.memcpy, [dst, src, ir.Constant(I64, n_bytes), ir.Constant(I1, 0)])

    def copy_unless_same(self, dst: Leaf, src: Leaf, n_bytes: int) -> None:
        """Copy ``src`` to ``dst`` unless they are the same memory at run time: two
        buffers of the caller may be (a donated parameter passed as its aliased result's
        buffer, a loop's initial state passed as its result)."""
        if n_bytes <= 0 or dst.ptr is src.ptr:
            return
        if dst.slot is None or src.slot is None or not (dst.slot.external and
                                                        src.slot.external):
            self.copy(dst.ptr, src.ptr, n_bytes)
            return
        dst, src = dst.ptr, src.ptr
        b = self.b
        differ = b.icmp_unsigned("!=", b.ptrtoint(dst, I64), b.ptrtoint(src, I64))
        with b.if_then(differ):
            self.copy(dst, src, n_bytes)

    def slot(self, shape, pinned=False) -> Slot:
        return self.bytes_slot(nbytes(shape), pinned)

    def bytes_slot(self, n_bytes: int, pinned=False) -> Slot:
        if n_bytes > self.largest[0]:
            self.largest = (n_bytes, self._current)
        handle, offset = self.arena.alloc(n_bytes)
        slot = Slot(handle, n_bytes, self._ptr(offset), pinned)
        self._slots[id(slot)] = slot
        self._refs[id(slot)] = 0
        return slot

    def external_leaf(self, shape, k: int, name: str) -> Leaf:
        """Leaf of the caller's buffer ``bufs[k]`` (a parameter or result leaf)."""
        slot = Slot(None, nbytes(shape), self._arg(k, name), pinned=True, external=True)
        self._slots[id(slot)] = slot
        self._refs[id(slot)] = 0
        return Leaf(shape, slot.ptr, slot)

    def _ptr(self, offset: _Offset):
        """A slot's workspace address (an i8* computed once, in the entry block; ``offset``
        is set when buffer assignment is done, see _Arena)."""
        return self.pre.gep(self.ws, [offset], inbounds=True, name="ws")

    def release_slot(self, slot: Slot) -> None:
        if not slot.pinned:
            self.arena.free(slot.offset)
            del self._refs[id(slot)]
            del self._slots[id(slot)]

    def new_leaf(self, shape, pinned=False) -> Leaf:
        slot = self.slot(shape, pinned)
        return Leaf(shape, slot.ptr, slot)

    def const(self, array, shape=None) -> Leaf:
        """A leaf reading a constant array (kept by the step, passed in bufs); ``shape``
        converts a ConstantStep's value to its leaf's dtype and dimensions."""
        key = id(array)
        leaf = self._const_leaf.get(key)
        if leaf is not None:
            return leaf
        if shape is not None:
            dt = np.dtype(dtypes.to_dtype(shape.element_type))
            arr = np.ascontiguousarray(np.asarray(array, dt).reshape(
                tuple(int(d) for d in shape.dimensions)))
        else:
            arr = np.ascontiguousarray(array)
        self.consts.append(arr)
        ptr = self._arg(self.n + self.m + 1 + len(self.consts), f"const{len(self.consts) - 1}")
        leaf = Leaf(shape, ptr, None)
        self._const_leaf[key] = leaf
        return leaf

    def bufs_array(self, ptrs: list):
        """An i8*[] of ``ptrs`` filled in the entry block (a pointer computed after it - a
        double-buffered loop state's, chosen per iteration - where the builder is);
        returns it as i8**."""
        arr = self.pre.alloca(ir.ArrayType(I8P, max(1, len(ptrs))), name="args")
        entry = self.pre.block
        for k, p in enumerate(ptrs):
            at = self.b if isinstance(p, ir.Instruction) and p.parent is not entry else self.pre
            dst = at.gep(arr, [ir.Constant(I32, 0), ir.Constant(I32, k)], inbounds=True)
            at.store(p, dst)
        return self.pre.gep(arr, [ir.Constant(I32, 0), ir.Constant(I32, 0)], inbounds=True)

    # holders: every env entry holds each of its leaves' slots (once per leaf) until it
    # drops that leaf; a caller holds a plan's root the same way
    def hold(self, ref) -> None:
        for leaf in leaves_of(ref):
            if leaf.slot is not None:
                self._refs[id(leaf.slot)] += 1

    def _unhold(self, leaf) -> None:
        if leaf.slot is not None:
            slot_id = id(leaf.slot)
            self._refs[slot_id] -= 1
            if self._refs[slot_id] == 0:
                self.release_slot(self._slots[slot_id])

    def drop(self, ref) -> None:
        for leaf in leaves_of(ref):
            self._unhold(leaf)

    def set(self, env, instr, ref) -> None:
        env[id(instr)] = ref
        leaves = leaves_of(ref)
        env.held[id(instr)] = leaves
        for leaf in leaves:
            if leaf.slot is not None:
                self._refs[id(leaf.slot)] += 1

    def _release(self, env, key, j) -> None:
        held = env.held.get(key)
        if held is None:
            return
        leaf = held[j]
        if leaf is not None:
            held[j] = None
            self._unhold(leaf)

    def _dead_after(self, env, drops) -> set:
        """id(slot) of the workspace slots no value holds once ``drops`` are dropped."""
        count: dict[int, int] = {}
        for key, j in drops:
            held = env.held.get(key)
            if held is None:  # the step's own value, used by nobody
                continue
            leaf = held[j]
            if leaf is not None and leaf.slot is not None:
                count[id(leaf.slot)] = count.get(id(leaf.slot), 0) + 1
        return {k for k, n in count.items() if self._refs.get(k) == n}

    # -- plans -----------------------------------------------------------------------------

    def emit_plan(self, plan, args: list):
        """Emit ``plan``'s steps at the builder; returns its root's value, held once for
        the caller (who drops it)."""
        env = _Env()
        for p in plan.params:
            self.set(env, p, args[p.parameter_number])
        for step, drops in zip(plan.steps, leaf_drops(plan)):
            self._dying = self._dead_after(env, drops)
            self._emit_step(step, env)
            self._dying = set()
            for key, j in drops:
                self._release(env, key, j)
        root = env[id(plan.comp.root)]
        self.hold(root)
        for held in env.held.values():
            for leaf in held:
                if leaf is not None:
                    self._unhold(leaf)
        return root

    def _emit_step(self, step, env) -> None:
        instr = step.instr
        self._current = instr
        if isinstance(step, ConstantStep):
            shapes = leaf_shapes(instr.shape)
            values = flatten_tuples(step.value)
            self.set(env, instr, build(instr.shape, iter(
                [self.const(v, s) for v, s in zip(values, shapes)])))
        elif isinstance(step, ValueStep):
            op = instr.opcode
            if op == "tuple":
                ref = tuple(env[id(o)] for o in instr.operands)
            elif op in ("get-tuple-element",):
                ref = env[id(instr.operands[0])][instr.attrs["index"]]
            elif op == "opt-barrier":
                ref = env[id(instr.operands[0])]
            else:  # reshape / bitcast of a row-major array: the same bytes
                src = env[id(instr.operands[0])]
                ref = Leaf(instr.shape, src.ptr, src.slot)
            self.set(env, instr, ref)
        elif isinstance(step, KeyedSortStep) and self.keyed_sorts_host:
            self._emit_host(step, env)  # NumPy's key sort when it applies (long rows)
        elif isinstance(step, KernelStep):
            self._emit_kernel(step, env)
        elif getattr(step, "native_loop", False):
            self._emit_nested_while(step, env)
        elif getattr(step, "native_call", None) is not None:
            self._emit_native_call(step, env)  # a native function of its own (collectives)
        elif isinstance(step, CallStep) and id(step.body) in self.native_plans:
            root = self.emit_plan(step.body, [env[id(o)] for o in instr.operands])
            self.set(env, instr, root)
            self.drop(root)
        elif isinstance(step, ConditionalStep) and all(
                id(p) in self.native_plans for p in step.branches):
            self._emit_conditional(step, env)
        elif isinstance(step, LibraryStep) and self._emit_gemm(step, env):
            pass  # an f32/f64 dot BLAS reads in place: the pool's GEMM driver
        else:  # anything else: a call out to Python (plan_supported checked it can)
            self._emit_host(step, env)

    keyed_sorts_host = False  # the entry calls KeyedSortStep out (its library path)
    #: Whether LLVM may inline the kernels called: in loops (per-iteration calls of small
    #: kernels, state kept in registers); not in the entry, where each kernel runs once per
    #: call and inlining would only make LLVM optimise its loops a second time.
    inline_kernels = True

    # -- where a result goes -----------------------------------------------------------------

    def _placed(self, instr, j: int, inputs=(), start=None):
        """The leaf the caller asked leaf ``j`` of ``instr``'s value to be written to, or
        None. A result buffer aliasing a parameter (donation) is taken only when the
        parameter is dead by now, or dies at this step and ``inputs[start]`` - the input
        the result starts as (an in-place update) - is the only input reading it."""
        placed = self._placement.get(id(instr))
        leaf = placed.get(j) if placed else None
        if leaf is None:
            return None
        donor = self._donor.get(id(leaf.slot))
        if donor is None or self._refs.get(id(donor), 0) == 0:
            return leaf
        if id(donor) not in self._dying or start is None:
            return None
        readers = [k for k, x in enumerate(inputs) if x.slot is donor]
        return leaf if readers == [start] else None

    def _in_place_ok(self, leaf, ins, k_in: int, out_bytes: int) -> bool:
        """Whether an output may be written over input leaf ``ins[k_in]``: its slot dies
        at this step, no other input reads it, it is the workspace's (or, in a loop body,
        the loop state's) and of the output's size."""
        if leaf.slot is None or id(leaf.slot) not in self._dying:
            return False
        if leaf.slot.external and not leaf.slot.pinned:
            return False
        if any(j != k_in and other.slot is leaf.slot for j, other in enumerate(ins)):
            return False
        if leaf.slot.pinned and not self._alias_state:
            return False  # a parameter, a result, or the loop state outside the body
        return nbytes(leaf.shape) == out_bytes

    def _in_place_output(self, step, k_out: int, k_in: int, ins) -> Leaf | None:
        """Output ``k_out`` of a kernel written over its input ``ins[k_in]`` (the input
        it starts as), or None (see ``_in_place_ok``; a bound constant never is)."""
        if k_in >= len(step.inputs):
            return None
        shape = step.spec.outputs[k_out]
        if not self._in_place_ok(ins[k_in], ins, k_in, nbytes(shape)):
            return None
        return Leaf(shape, ins[k_in].ptr, ins[k_in].slot)

    # -- calls out and their failures ---------------------------------------------------------

    def _abort_block(self):
        """The block that marks the context failed and returns (created once)."""
        if self._abort is None:
            self._abort = self.fn.append_basic_block("abort")
            b = ir.IRBuilder(self._abort)
            b.store(ir.Constant(I64, 1), b.bitcast(self.ctx, I64.as_pointer()))
            b.ret_void()
        return self._abort

    def return_if(self, failed) -> None:
        ok = self.fn.append_basic_block("ok")
        self.b.cbranch(failed, self._abort_block(), ok)
        self.b.position_at_end(ok)

    def table_fn(self, slot: int, fnty, name: str):
        b = self.b
        words = b.bitcast(self.ctx, I64.as_pointer())
        table = b.inttoptr(b.load(b.gep(words, [ir.Constant(I64, 1)])), I8P.as_pointer())
        raw = b.load(b.gep(table, [ir.Constant(I64, slot)]), name=name)
        return b.bitcast(raw, fnty.as_pointer())

    def _call_host(self, call, ptrs: list, what: str) -> None:
        """Call host call ``call`` (an executor entry) with the bufs array of ``ptrs``;
        return at once when it fails."""
        ident = self.host_table.add(call)
        bufs = self.bufs_array(ptrs)
        host = self.table_fn(executor.HOST, HOST_TYPE, f"host.{what}")
        rc = self.b.call(host, [self.ctx, ir.Constant(I64, ident), bufs], name=f"rc.{what}")
        self.return_if(self.b.icmp_signed("!=", rc, ir.Constant(I32, 0)))

    def parallel_for(self, kernel, bufs, domain: int, per_thread: int) -> None:
        """Call ``kernel`` over [0, domain) on the worker pool (the function table's
        ``PARALLEL``: workers.py's ``xlapy_parallel_for``)."""
        fn = self.table_fn(executor.PARALLEL, PARALLEL_TYPE, f"parallel.{kernel.name}")
        self.b.call(fn, [self.b.bitcast(kernel, I8P), bufs, ir.Constant(I64, domain),
                         ir.Constant(I64, per_thread)])

    def _check_status(self) -> None:
        """After a nested native call: return when it failed."""
        status = self.b.load(self.b.bitcast(self.ctx, I64.as_pointer()), name="status")
        self.return_if(self.b.icmp_signed("!=", status, ir.Constant(I64, 0)))

    def _emit_host(self, step, env) -> None:
        """A step native code cannot run itself: a call out (executor.StepCall)."""
        instr = step.instr
        reads = getattr(step, "reads", None) or list(instr.operands)
        ins = [leaf for o in reads for leaf in leaves_of(env[id(o)])]
        outs = []
        for j, s in enumerate(leaf_shapes(instr.shape)):
            placed = self._placed(instr, j)
            outs.append(placed if placed is not None else self.new_leaf(s))
        call = executor.StepCall(step, reads)
        if call.owned:  # values in memory reused later are handed over as copies
            call.copies = [leaf.slot is not None and not leaf.slot.external for leaf in ins]
        self.host_steps += 1
        self._call_host(call, [leaf.ptr for leaf in ins] + [leaf.ptr for leaf in outs],
                        instr.name)
        self.set(env, instr, build(instr.shape, iter(outs)))

    def _emit_gemm(self, step, env) -> bool:
        """An f32/f64 dot whose operands BLAS reads in place (``library.native_gemm``: any
        batch, strided or transposed operands) as one call of the GEMM driver
        (workers.py's ``xlapy_gemm``, the function table's ``GEMM``): single-threaded BLAS
        calls over the worker pool, cut as ``library.gemm_split`` says, no Python. The
        descriptor's constant words are stored once in the entry block; the xGEMM address
        (the table's SGEMM/DGEMM) and the buffers' addresses at the call. False when the dot
        has another form (a host call runs it through the library)."""
        dot = step.instr
        form = _library.native_gemm(dot)
        if form is None:
            return False
        lhs, rhs = dot.operands
        a, b_ = env[id(lhs)], env[id(rhs)]
        placed = self._placed(step.instr, 0)
        out = placed if placed is not None else self.new_leaf(step.instr.shape)
        b = self.b
        if form.bsz * form.m * form.n == 0:
            pass
        elif form.k == 0:
            b.call(self._memset_fn(), [out.ptr, ir.Constant(I8, 0),
                                       ir.Constant(I64, nbytes(step.instr.shape)),
                                       ir.Constant(I1, 0)])
        else:
            words = form.descriptor()
            desc = self.pre.alloca(ir.ArrayType(I64, len(words)), name="gemm.desc")
            desc = self.pre.bitcast(desc, I64.as_pointer())
            for k, v in enumerate(words):
                if k not in (workers.G_FN, workers.G_A, workers.G_B, workers.G_C):
                    self.pre.store(ir.Constant(I64, int(v)),
                                   self.pre.gep(desc, [ir.Constant(I64, k)]))
            slot = executor.SGEMM if form.dtype.itemsize == 4 else executor.DGEMM
            fn = self.table_fn(slot, I8, f"gemm.{step.instr.name}")
            for k, v in ((workers.G_FN, fn), (workers.G_A, b_.ptr), (workers.G_B, a.ptr),
                         (workers.G_C, out.ptr)):  # BLAS's A is our B (C^T = B^T A^T)
                b.store(b.ptrtoint(v, I64), b.gep(desc, [ir.Constant(I64, k)]))
            self.max_gemm = max(self.max_gemm, form.bsz * form.m * form.n * form.k)
            driver = self.table_fn(executor.GEMM, GEMM_DRIVER_TYPE, f"gemm.{dot.name}")
            b.call(driver, [desc])
        self.set(env, step.instr, out)
        return True

    def _memset_fn(self):
        mod = self.planner.irmod
        name = "llvm.memset.p0.i64"
        try:
            return mod.get_global(name)
        except KeyError:
            return ir.Function(mod, ir.FunctionType(ir.VoidType(), [I8P, I8, I64, I1]), name)

    def _emit_kernel(self, step, env) -> None:
        spec = step.spec
        ins = [env[id(i)] for i in step.inputs]
        ins += [self.const(a) for a in step.bound]
        starts = dict(spec.in_place)  # output -> the input it starts as
        outs = [self._placed(step.instr, o, ins, starts.get(o))
                for o in range(len(spec.outputs))]
        for o, i in spec.in_place:  # the output starts as its input: alias a dying input
            if outs[o] is None:
                outs[o] = self._in_place_output(step, o, i, ins)
        outs = [leaf if leaf is not None else self.new_leaf(s)
                for leaf, s in zip(outs, spec.outputs)]
        for o, i in spec.in_place:  # otherwise the output starts as a copy of its input
            self.copy_unless_same(outs[o], ins[i], nbytes(spec.outputs[o]))
        scratch = [self.bytes_slot(int(n) * np.dtype(dt).itemsize) for dt, n in spec.scratch]
        ptrs = [leaf.ptr for leaf in ins] + [leaf.ptr for leaf in outs] + \
            [s.ptr for s in scratch]
        if spec.domain:
            bufs = self.bufs_array(ptrs)
            mod = self.planner.irmod
            for s in (spec, spec.then):
                if s is None or not s.domain:
                    continue
                kernel = mod.get_global(s.name)
                if split(s):  # over the worker pool (workers.py), from native code
                    self.planner.standalone.add(s.name)
                    self.parallel_for(kernel, bufs, s.domain, threads.pieces_per_thread(
                        s.domain * s.cost, buffers.PARALLEL_MIN_WORK))
                    continue
                if not self.inline_kernels:
                    kernel.attributes.add("noinline")
                    self.planner.standalone.add(s.name)
                else:
                    self.planner.inlined.add(s.name)
                self.b.call(kernel, [bufs, ir.Constant(I64, 0), ir.Constant(I64, s.domain)])
        for s in scratch:
            self.release_slot(s)
        self.set(env, step.instr, tuple(outs) if step.tuple_result else outs[0])

    def _emit_nested_while(self, step, env) -> None:
        """A compiled while: a call to its function, its state leaves in, its result leaves
        out (written where the caller placed them, or over a dying initial leaf: the loop
        copies its initial state before anything writes a result)."""
        instr = step.instr
        init = leaves_of(env[id(instr.operands[0])])
        outs = []
        for j, s in enumerate(step.leaves):
            leaf = self._placed(instr, j, init, j)
            if leaf is None and self._in_place_ok(init[j], init, j, nbytes(s)):
                leaf = Leaf(s, init[j].ptr, init[j].slot)
            outs.append(leaf if leaf is not None else self.new_leaf(s))
        ws = self.bytes_slot(step.ws_bytes)
        consts = [self.const(a) for a in step.consts]
        ptrs = [leaf.ptr for leaf in init] + [leaf.ptr for leaf in outs] + \
            [ws.ptr, self.ctx] + [leaf.ptr for leaf in consts]
        bufs = self.bufs_array(ptrs)
        self.b.call(step.function, [bufs, ir.Constant(I64, 0), ir.Constant(I64, 1)])
        self._check_status()
        self.max_gemm = max(self.max_gemm, step.max_gemm)
        self.release_slot(ws)
        self.set(env, instr, build(instr.shape, iter(outs)))

    def _emit_native_call(self, step, env) -> None:
        """A step that is one native function of the program (``step.native_call``, the
        kernel signature: a collective's, see collectives.py) over the leaves of its operands
        (``step.reads``), then of its result, then the context; it reports a failure in the
        context's status word. Its result leaves go where the caller placed them (a result
        buffer of the entry, a loop's double-buffered state leaf)."""
        instr = step.instr
        ins = [leaf for o in step.reads for leaf in leaves_of(env[id(o)])]
        outs = []
        for j, s in enumerate(leaf_shapes(instr.shape)):
            placed = self._placed(instr, j)
            outs.append(placed if placed is not None else self.new_leaf(s))
        bufs = self.bufs_array([leaf.ptr for leaf in ins] + [leaf.ptr for leaf in outs] +
                               [self.ctx])
        fn = self.planner.irmod.get_global(step.native_call)
        if not self.inline_kernels:
            fn.attributes.add("noinline")
        self.b.call(fn, [bufs, ir.Constant(I64, 0), ir.Constant(I64, 1)])
        self._check_status()
        self.set(env, instr, build(instr.shape, iter(outs)))

    def _emit_conditional(self, step, env) -> None:
        instr = step.instr
        b = self.b
        outs = []
        for j, s in enumerate(leaf_shapes(instr.shape)):
            placed = self._placed(instr, j)
            outs.append(placed if placed is not None else self.new_leaf(s))
        selector = env[id(instr.operands[0])]
        blocks = [self.fn.append_basic_block(f"{instr.name}.branch{k}")
                  for k in range(len(step.branches))]
        merge = self.fn.append_basic_block(f"{instr.name}.merge")
        if instr.operands[0].shape.element_type == el.PT.PRED:
            value = b.load(b.bitcast(selector.ptr, I8P), name=f"{instr.name}.sel")
            sw = b.switch(value, blocks[0])  # any non-zero byte: true_computation
            sw.add_case(ir.Constant(I8, 0), blocks[1])
        else:  # s32 index; out of range: the last branch
            value = b.load(b.bitcast(selector.ptr, I32.as_pointer()), name=f"{instr.name}.sel")
            sw = b.switch(value, blocks[-1])
            for k in range(len(step.branches) - 1):
                sw.add_case(ir.Constant(I32, k), blocks[k])
        dying = self._dying
        for k, (plan, block) in enumerate(zip(step.branches, blocks)):
            b.position_at_end(block)
            self._dying = set()  # a branch writes nothing of the conditional's operands
            root = self.emit_plan(plan, [env[id(instr.operands[k + 1])]])
            for dst, src in zip(outs, leaves_of(root)):
                self.copy(dst.ptr, src.ptr, nbytes(dst.shape))
            self.drop(root)
            self.b.branch(merge)
        self._dying = dying
        b.position_at_end(merge)
        self.set(env, instr, build(instr.shape, iter(outs)))


# -- the entry --------------------------------------------------------------------------------


def _resolve(values: dict, instr, j: int):
    """(instruction, leaf index) of the step computing leaf ``j`` of ``instr``'s value,
    through tuple, get-tuple-element, opt-barrier and reshape/bitcast aliases (``values``:
    id(instr) -> step)."""
    while True:
        step = values.get(id(instr))
        if not isinstance(step, ValueStep):
            return instr, j
        op = instr.opcode
        if op == "tuple":
            for e, (lo, hi) in enumerate(_element_ranges(instr.shape)):
                if lo <= j < hi:
                    instr, j = instr.operands[e], j - lo
                    break
        elif op == "get-tuple-element":
            lo, _ = _element_ranges(instr.operands[0].shape)[instr.attrs["index"]]
            instr, j = instr.operands[0], j + lo
        else:  # opt-barrier, reshape, bitcast: the operand's leaf
            instr = instr.operands[0]


def _updated(values: dict, step, j: int):
    """(instruction, leaf index) of the value that leaf ``j`` of ``step``'s result updates
    in place (an in-place kernel's input, a while loop's initial state) when nothing else
    reads it (every alias between holds it for this step alone), else None: that value
    may then be computed where the result goes."""
    if isinstance(step, KernelStep):
        starts = dict(step.spec.in_place)
        if j not in starts or starts[j] >= len(step.inputs):
            return None
        operand, k = step.inputs[starts[j]], 0
        if sum(x is operand for x in step.inputs) != 1:
            return None
    elif getattr(step, "native_loop", False):
        operand, k = step.instr.operands[0], j
    else:
        return None
    if len(operand.users) != 1 or operand.users[0] is not step.instr:
        return None
    source = _resolve(values, operand, k)
    node = source[0]
    while node is not operand:
        if len(node.users) != 1 or not isinstance(values.get(id(node.users[0])), ValueStep):
            return None
        node = node.users[0]
    return source


def _result_sources(plan) -> list:
    """Per leaf of ``plan``'s root: (instruction, leaf index) of the step that computes it,
    found through tuple, get-tuple-element, opt-barrier and reshape/bitcast aliases."""
    values = {id(s.instr): s for s in plan.steps}
    root = plan.comp.root
    return [_resolve(values, root, j) for j in range(_leaf_count(root.shape))]


def _placeable(step) -> bool:
    """Whether ``step`` writes its result leaves where the emitter places them."""
    return step is not None and not isinstance(step, (ConstantStep, ValueStep, CallStep))


class NativeEntry:
    """A program's entry computation as one native function (see the module docstring).
    ``run(args, plan_ctx, donated)``: the root's value."""

    native_loop = False

    def __init__(self, instr_shape, name, params, results, aliases):
        self.spec = KernelSpec(name=name, n_inputs=len(params), outputs=[], domain=1,
                               parallel=False)
        self.fn = None  # bound by Planner.compile
        self.then_fn = None
        self.function = None
        self.shape = instr_shape  # the root's shape
        self.params = params  # per entry parameter: its leaf Shapes
        self.results = results  # the root's leaf Shapes
        self.aliases = aliases  # result leaf -> (parameter number, parameter index, leaf)
        self.consts: list = []
        self.ws_bytes = 0
        self.ws_live = 0  # the most workspace bytes live at once (ws_bytes' lower bound)
        self.host_table = None
        self.max_gemm = 0
        self.bound = ()
        self.needs_run = False  # host calls or cancel polls: the executor's Run is needed
        self.make_context = None  # options -> the host calls' plan context (the backend's)
        self.result_instrs = [None] * len(results)  # the instruction computing each result
        self.ws_instr = None  # the instruction of the workspace's largest value

    def finish(self, tuple_params: list) -> None:
        """Per-call data, once the emitter is done."""
        self._tuple_params = tuple_params
        self._param_types = [[(np.dtype(dtypes.to_dtype(s.element_type)),
                               tuple(int(d) for d in s.dimensions)) for s in p]
                             for p in self.params]
        self._flat_params = not any(tuple_params)
        self._result_types = []
        for s in self.results:
            dt = np.dtype(dtypes.to_dtype(s.element_type))
            dims = tuple(int(d) for d in s.dimensions)
            small = nbytes(s) < buffers.POOL_MIN_BYTES
            self._result_types.append((dt, dims, small))
        self._n = sum(len(p) for p in self.params)
        self._m = len(self.results)
        self._bufs_type = ctypes.c_void_p * (self._n + self._m + 2 + len(self.consts))
        self._const_ptrs = [a.ctypes.data for a in self.consts]
        self._small_ws = self.ws_bytes < buffers.POOL_MIN_BYTES
        self._tuple_root = self.shape.is_tuple()
        # a tuple of arrays: its results are the tuple (no tree to rebuild)
        self._flat_root = self._tuple_root and all(s.is_array()
                                                   for s in self.shape.tuple_shapes)
        self._leaf_base = []
        k = 0
        for p in self.params:
            self._leaf_base.append(k)
            k += len(p)

    @staticmethod
    def _allocate(dims, dt, instr):
        """A buffer from the pool; out of memory: XLA's RESOURCE_EXHAUSTED naming
        ``instr`` (the instruction computing a result, or the workspace's largest value)."""
        try:
            return buffers.POOL.empty(dims, dt)
        except ResourceExhaustedError as e:
            if instr is None:
                raise
            raise _named(e, _Named(instr)) from None

    def run(self, args, options, donated=None, plan_ctx=None):
        """The root's value for ``args`` (see CpuProgram.run); ``options``: the run's
        EvalOptions (host calls run with ``plan_ctx``, by default ``make_context(options)``;
        a program with collectives passes the one its run table is bound to)."""
        n, m = self._n, self._m
        bufs = self._bufs_type()
        if self._flat_params:
            values = args
        else:
            values = []
            for a, t in zip(args, self._tuple_params):
                values.extend(flatten_tuples(a) if t else (a,))
        if len(values) != n:
            raise InvalidArgumentError(f"the entry computation takes {n} arrays, got "
                                       f"{len(values)}")
        k = 0
        keep = None
        for p in self._param_types:
            for dt, dims in p:
                v = values[k]
                if type(v) is not np.ndarray or v.dtype != dt or v.shape != dims or \
                        not v.flags.c_contiguous:
                    v = np.ascontiguousarray(np.asarray(v, dt).reshape(dims))
                    if keep is None:
                        keep = []
                    keep.append(v)
                    values = list(values)
                    values[k] = v
                bufs[k] = _address(v)
                k += 1
        outs = []
        for j, (dt, dims, small) in enumerate(self._result_types):
            o = None
            if donated and j in self.aliases:
                pnum, path, leaf = self.aliases[j]
                if (pnum, path) in donated:
                    o = values[self._leaf_base[pnum] + leaf]
            if o is None:
                o = np.empty(dims, dt) if small else self._allocate(dims, dt,
                                                                    self.result_instrs[j])
            outs.append(o)
            bufs[n + j] = _address(o)
        if self.ws_bytes:
            if self._small_ws:
                ws, bufs[n + m] = buffers.workspace(self.ws_bytes)
            else:
                ws = self._allocate((self.ws_bytes,), np.uint8, self.ws_instr)
                bufs[n + m] = _address(ws)
        ctx = executor.context()
        bufs[n + m + 1] = ctx.address
        if self._const_ptrs:
            bufs[n + m + 2:] = self._const_ptrs
        if self.needs_run:
            if plan_ctx is None:
                plan_ctx = self.make_context(options)
            with executor.running(self.host_table, plan_ctx, "the entry computation") as run:
                if self.max_gemm:  # its GEMMs: single-threaded BLAS over the pool
                    with threads.blas_calls():
                        self.fn(bufs, 0, 1)
                else:
                    self.fn(bufs, 0, 1)
            if ctx.words[0]:
                ctx.reset()
                run.reraise()
        elif self.max_gemm:
            with threads.blas_calls():
                self.fn(bufs, 0, 1)
        else:
            self.fn(bufs, 0, 1)
        if not self._tuple_root:
            return outs[0]
        if self._flat_root:
            return tuple(outs)
        return build(self.shape, iter(outs))


class _Named:
    """Stands for a step in ``steps._named`` (the instruction an error names)."""

    __slots__ = ("instr",)

    def __init__(self, instr):
        self.instr = instr


def compile_entry(planner, plan) -> NativeEntry | None:
    """The entry ``plan`` as one native function (added to ``planner.irmod``, bound by
    ``Planner.compile`` through ``planner.kernels``), or None when the program keeps the
    Python plan executor (see the module docstring)."""
    comp = plan.comp
    params = sorted(comp.parameters, key=lambda p: p.parameter_number)
    param_leaves = [leaf_shapes(p.shape) for p in params]
    results = leaf_shapes(comp.root.shape)
    if results is None or any(p is None for p in param_leaves):
        return None
    seen: dict = {}
    if not plan_supported(plan, seen, entry=True):
        return None
    aliases = {}
    config = planner.module.config.get("input_output_alias") or ()
    result_index = {path: j for j, (path, _) in enumerate(comp.root.shape.leaves())}
    for alias in config:
        j = result_index.get(tuple(alias.output_index))
        pnum = alias.parameter_number
        if j is None or not 0 <= pnum < len(params):
            continue
        pindex = {path: k for k, (path, _) in enumerate(params[pnum].shape.leaves())}
        k = pindex.get(tuple(alias.parameter_index))
        if k is None:
            continue
        ps, rs = param_leaves[pnum][k], results[j]
        if ps.element_type == rs.element_type and \
                tuple(ps.dimensions) == tuple(rs.dimensions):
            aliases[j] = (pnum, tuple(alias.parameter_index), k)
    name = planner.irmod.get_unique_name("entry")
    n = sum(len(p) for p in param_leaves)
    em = Emitter(planner, name, n, len(results))
    em.native_plans = {k for k, ok in seen.items() if ok}
    em.keyed_sorts_host = True
    em.inline_kernels = False
    args, k = [], 0
    param_slots = []
    for p, shapes in zip(params, param_leaves):
        leaves = [em.external_leaf(s, k + j, f"param{k + j}") for j, s in enumerate(shapes)]
        param_slots.append([leaf.slot for leaf in leaves])
        k += len(shapes)
        args.append(build(p.shape, iter(leaves)))
    outs = [em.external_leaf(s, n + j, f"out{j}") for j, s in enumerate(results)]
    for j, (pnum, _, leaf) in aliases.items():
        em._donor[id(outs[j].slot)] = param_slots[pnum][leaf]
    steps = {id(s.instr): s for s in plan.steps}
    claimed = set()
    sources = _result_sources(plan)
    for j, source in enumerate(sources):
        while source is not None:  # the result, then the value it updates in place, ...
            instr, idx = source
            if (id(instr), idx) in claimed or not _placeable(steps.get(id(instr))):
                break
            claimed.add((id(instr), idx))
            shape = leaf_shapes(instr.shape)[idx]
            em._placement.setdefault(id(instr), {})[idx] = Leaf(shape, outs[j].ptr,
                                                                  outs[j].slot)
            source = _updated(steps, steps.get(id(instr)), idx)
    root = em.emit_plan(plan, args)
    _finish_results(em, outs, leaves_of(root), aliases, param_slots)
    em.drop(root)
    em.b.ret_void()
    em.pre.branch(em.fn.blocks[1])
    entry = NativeEntry(comp.root.shape, name, param_leaves, results, aliases)
    entry.consts = em.consts
    entry.ws_bytes = em.arena.size
    entry.ws_live = em.arena.max_live
    entry.host_table = planner.host_table
    entry.max_gemm = em.max_gemm
    entry.result_instrs = [instr for instr, _ in sources]
    entry.ws_instr = em.largest[1]
    entry.needs_run = bool(planner.host_table.calls) or any(
        getattr(k, "native_loop", False) for k in planner.kernels)
    entry.finish([p.shape.is_tuple() for p in params])
    planner.kernels.append(entry)
    return entry


def _finish_results(em, outs, got, aliases, param_slots) -> None:
    """Copy into the result buffers the leaves not written there already: parameters
    first (a result buffer may be a donated parameter, overwritten by the later copies; a
    parameter going to another parameter's result passes through a temporary), then the
    rest."""
    params = {id(s) for slots in param_slots for s in slots}
    staged, direct, rest = [], [], []
    for j, (out, leaf) in enumerate(zip(outs, got)):
        if leaf.ptr is out.ptr:
            continue  # written in place by its instruction
        if leaf.slot is not None and id(leaf.slot) in params:
            donor = em._donor.get(id(out.slot))
            if donor is leaf.slot:
                direct.append((out, leaf, True))  # its own aliased parameter
            elif j in aliases:
                staged.append((out, leaf))
            else:
                direct.append((out, leaf, False))
        else:
            rest.append((out, leaf))
    temps = []
    for out, leaf in staged:
        tmp = em.new_leaf(leaf.shape)
        em.copy(tmp.ptr, leaf.ptr, nbytes(leaf.shape))
        temps.append((out, tmp))
    for out, leaf, same in direct:
        if same:
            em.copy_unless_same(out, leaf, nbytes(leaf.shape))
        else:
            em.copy(out.ptr, leaf.ptr, nbytes(leaf.shape))
    for out, tmp in temps:
        em.copy(out.ptr, tmp.ptr, nbytes(tmp.shape))
    for out, leaf in rest:
        em.copy(out.ptr, leaf.ptr, nbytes(leaf.shape))


__all__ = ["Emitter", "NativeEntry", "compile_entry", "leaf_shapes",
           "plan_supported", "step_supported"]

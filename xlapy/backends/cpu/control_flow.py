"""Compiled control flow: a ``while`` whose condition and body run in native code, with no
return to Python per iteration.

``compile_while(planner, step)`` looks at a ``WhileStep``'s condition and body plans. When
every step of both (recursively) can run natively -

- ``KernelStep`` (loop and reduction kernels) whose work is small enough that the runtime
  would run it on one thread anyway (``buffers.run_parallel``'s rule: a loop over big
  kernels keeps the Python loop and both cores),
- ``ConstantStep``, ``ValueStep`` (tuple / get-tuple-element / reshape: no code),
- a nested while that itself compiled (``CompiledWhileStep``),
- ``CallStep`` and ``ConditionalStep`` whose plans are made of such steps,

and every value is an array of an element type the kernels know (or a tuple of them), it
emits ONE LLVM function for the whole loop into ``planner.irmod`` (compiled with the
kernels) and returns a ``CompiledWhileStep``; otherwise ``None`` and the Python
``WhileStep`` stays.

The function follows the kernel signature (``void f(i8** bufs, i64 lo, i64 hi)``, ``lo``
and ``hi`` ignored, so ``Planner.compile`` binds it like a kernel) with its own buffers::

    bufs = [init leaves (n)] + [result block] + [workspace] + [constants (m)]

The *leaves* are the loop state's arrays (the state flattened depth first). The
*workspace* is one byte buffer holding the state (its first ``state_bytes``) and every
intermediate value of the condition and the body at static offsets (buffer assignment: a
slot per kernel output or scratch buffer, recycled after the value's last use, first fit);
tuples, get-tuple-element and reshapes resolve at emission time to slot pointers, so they
cost nothing. The *result block* receives the final state (leaf k at ``offsets[k]``). The
*constants* are the loop's constant arrays (``ConstantStep`` values, kernels' bound
arrays), owned by the step.

Code: copy the init leaves into the state slots; loop: run the condition's steps (kernels
are called directly, whole domain, single-threaded: LLVM inlines small ones), load its
pred, exit or run the body, then move the body's results into the state slots - a result
that already is its own state slot (an element passed through unchanged) costs nothing,
one that is another state slot (a permutation) goes through a temporary first, anything
else is copied; after the loop copy the state to the result block. The state lives in the
workspace rather than in caller buffers so every address the loop touches is one base
pointer plus a constant offset: LLVM sees that they do not alias and keeps scalar state in
registers.

Double buffering: a state leaf of at least ``SWAP_MIN_BYTES`` that the body computes with a
kernel of its own (the root tuple's operand) gets two slots, and the loop is emitted twice,
iterations alternating between the copies: in one, the state is read from the first slots
and those kernels write the second ones, in the other the reverse - so nothing is copied
back, and every address stays a constant offset (no pointer swapping at run time). The
loop exits from either copy, each copying its own slots to the result block.

In place: a kernel with ``spec.in_place`` (dynamic-update-slice, scatter) whose input slot
nothing reads after the step (every env entry holding it dies there) writes that slot
itself - no copy of the input, its output is the same slot; such kernels are never
double-buffered. A loop of row updates into a big state thus costs the rows.

A nested compiled while is a call to its own function (the same ABI: its state and
workspace are slots of the enclosing workspace, its constants are appended to the
enclosing ones). A conditional is a ``switch`` over its branches; each branch's result is
copied into the conditional's result slots.

The Python side (``CompiledWhileStep.run``) is one native call per while execution: the
result block and the workspace come from ``buffers.POOL``; the results are views of the
result block.
"""

from __future__ import annotations

import ctypes

import numpy as np
from llvmlite import ir

from xlapy.backends.cpu import buffers, executor
from xlapy.backends.cpu import elemental as el
from xlapy.backends.cpu.kernel_abi import I64, KERNEL_TYPE, KernelSpec
from xlapy.backends.cpu.steps import (
    CallStep,
    ConditionalStep,
    ConstantStep,
    KernelStep,
    LibraryStep,
    SwappedDotStep,
    ValueStep,
    WhileStep,
)
from xlapy.errors import InvalidArgumentError
from xlapy.shape import dtypes
from xlapy.shape.tree import build_shaped, flatten_tuples

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I32 = ir.IntType(32)
I8P = I8.as_pointer()
#: i32 host(i8* ctx, i64 id, i8** ptrs) and i32 poll(i8* ctx): see executor
_HOST_TYPE = ir.FunctionType(I32, [I8P, I64, I8P.as_pointer()])
_POLL_TYPE = ir.FunctionType(I32, [I8P])

#: Alignment of workspace slots (bytes).
ALIGN = 64
#: How deeply one compiled while may nest calls, conditionals and compiled whiles (each
#: level is a call or a branch of the emitter, and a nested while's constants are passed
#: down through every level): a deeper loop stays a Python WhileStep (as do those around
#: it). Real programs nest a few levels.
MAX_NATIVE_DEPTH = 16
#: State leaves of at least this size computed by a kernel of the body are double-buffered
#: (the kernel writes the next iteration's buffer) instead of copied back every iteration.
SWAP_MIN_BYTES = 256


# -- what can be compiled ---------------------------------------------------------------------


def _leaf_shapes(shape) -> list | None:
    """The array leaves of ``shape``, depth first; None when a leaf is not an array of a
    kernel element type with static dimensions."""
    out = [leaf for _, leaf in shape.leaves()]
    for s in out:
        if not s.is_array() or s.element_type not in el.TYPES or s.is_dynamic():
            return None
    return out


def _nbytes(shape) -> int:
    n = np.dtype(dtypes.to_dtype(shape.element_type)).itemsize
    for d in shape.dimensions:
        n *= int(d)
    return n


def _single_threaded(spec) -> bool:
    """True when ``run_parallel`` would run ``spec`` (and its ``then``) on one thread."""
    for s in (spec, spec.then):
        if s is None:
            continue
        if buffers.THREADS >= 2 and s.parallel and s.domain >= 2 and \
                s.domain * s.cost >= buffers.PARALLEL_MIN_WORK:
            return False
    return True


def _plan_supported(plan, seen: dict) -> bool:
    """Whether ``plan`` can be emitted natively (``seen``: id(plan) -> the answer, for
    every plan checked)."""
    if id(plan) in seen:  # a plan reached twice (a shared computation) was checked once
        return seen[id(plan)]
    seen[id(plan)] = True
    ok = all(_leaf_shapes(p.shape) is not None for p in plan.params) and \
        all(_step_supported(step, seen) for step in plan.steps)
    seen[id(plan)] = ok
    return ok


def _step_supported(step, seen: set) -> bool:
    if _leaf_shapes(step.instr.shape) is None:
        return False
    if isinstance(step, (ConstantStep, ValueStep, CompiledWhileStep, KernelStep)):
        return True  # a kernel too big for one thread is a host call (run_parallel)
    if isinstance(step, CallStep) and _plan_supported(step.body, seen):
        return True
    if isinstance(step, ConditionalStep):
        selector = step.instr.operands[0].shape
        if selector.element_type in (el.PT.PRED, el.PT.S32) and not selector.dimensions and \
                all(_plan_supported(p, seen) for p in step.branches):
            return True
    return _host_callable(step)


#: Instructions a host call cannot run from inside native code: they meet other devices
#: (collectives, channels), read the device's identity, or keep state between calls.
_DEVICE_BOUND = frozenset({
    "all-reduce", "all-gather", "all-to-all", "collective-permute", "reduce-scatter",
    "collective-broadcast", "all-reduce-start", "all-reduce-done", "all-gather-start",
    "all-gather-done", "collective-permute-start", "collective-permute-done", "send", "recv",
    "send-done", "recv-done", "infeed", "outfeed", "replica-id", "partition-id", "rng",
    "custom-call", "async-start", "async-update", "async-done"})


def _host_callable(step) -> bool:
    """A step native code runs through a host call (executor.StepCall): its operands and
    result are arrays (or tuples of them) of kernel element types."""
    if isinstance(step, WhileStep):  # a loop that could not be compiled (too deep, or
        return False  # a state of tokens): the loops around it stay in Python too
    if (step.instr.opcode in _DEVICE_BOUND or step.instr.has_side_effect) and \
            not getattr(step, "device_safe", False):
        return False  # talks to other devices or the host, or depends on which device runs
    # (a step marked ``device_safe`` - collectives.py's - is correct when called out: it
    # runs on the device's own thread with the device's run, and copies what it hands on)
    reads = getattr(step, "reads", None) or step.instr.operands
    return all(_leaf_shapes(o.shape) is not None for o in reads)


def _nesting_depth(plans) -> int:
    """How deeply ``plans`` nest calls, conditionals (one level each) and compiled whiles
    (their own depth); computed children first with a stack, each plan once."""
    depth: dict[int, int] = {}

    def children(plan):
        for st in plan.steps:
            if isinstance(st, CallStep):
                yield st.body
            elif isinstance(st, ConditionalStep):
                yield from st.branches

    for top in plans:
        stack = [(top, iter(children(top)))]
        active = {id(top)}  # on the stack (a plan reached again through itself: skipped)
        while stack:
            plan, kids = stack[-1]
            for kid in kids:
                if id(kid) not in depth and id(kid) not in active:
                    active.add(id(kid))
                    stack.append((kid, iter(children(kid))))
                    break
            else:
                stack.pop()
                active.discard(id(plan))
                d = 0
                for st in plan.steps:
                    if isinstance(st, CompiledWhileStep):
                        d = max(d, st.depth)
                    elif isinstance(st, (CallStep, ConditionalStep)):
                        subs = [st.body] if isinstance(st, CallStep) else st.branches
                        d = max([d] + [1 + depth.get(id(x), 0) for x in subs])
                depth[id(plan)] = d
    return max((depth[id(p)] for p in plans), default=0)


def compile_while(planner, step):
    """A ``CompiledWhileStep`` for the ``WhileStep`` ``step`` (its function added to
    ``planner.irmod``, the step registered in ``planner.kernels`` so ``Planner.compile``
    binds it), or None when the loop must stay in Python."""
    instr = step.instr
    leaves = _leaf_shapes(instr.shape)
    if leaves is None or not leaves:
        return None
    depth = 1 + _nesting_depth([step.cond, step.body])
    if depth > MAX_NATIVE_DEPTH:
        return None
    seen: dict = {}
    if not (_plan_supported(step.cond, seen) and _plan_supported(step.body, seen)):
        return None
    cond_root = step.cond.comp.root.shape
    if not (cond_root.is_array() and cond_root.element_type == el.PT.PRED and
            not cond_root.dimensions):
        return None
    name = planner.irmod.get_unique_name(f"while.{instr.name}")
    emitter = _Emitter(planner, name, leaves)
    emitter._native_plans = {k for k, ok in seen.items() if ok}
    emitter.emit_while(step.cond, step.body)
    spec = KernelSpec(name=name, n_inputs=len(leaves), outputs=[], domain=1, parallel=False)
    compiled = CompiledWhileStep(instr, step.cond, step.body, spec, emitter.fn, leaves,
                                 emitter.offsets, emitter.state_bytes, emitter.consts,
                                 emitter.arena.size)
    compiled.swapped = emitter.swapped
    compiled.host_table = planner.host_table
    compiled.max_gemm = emitter.max_gemm
    compiled.depth = depth
    planner.kernels.append(compiled)
    return compiled


# -- the step ---------------------------------------------------------------------------------


class CompiledWhileStep:
    """A while loop run by one native call (see the module docstring)."""

    def __init__(self, instr, cond, body, spec, function, leaves, offsets, state_bytes,
                 consts, ws_bytes):
        self.instr = instr
        self.cond, self.body = cond, body  # the plans it was compiled from
        self.spec = spec
        self.function = function  # the LLVM function (nested loops call it)
        self.leaves = leaves  # Shapes of the state leaves
        self.offsets = offsets  # each leaf's offset in the result block
        self.state_bytes = state_bytes  # the result block's size
        self.consts = consts  # the arrays bufs[n + 2:] point at
        self.ws_bytes = ws_bytes
        self.swapped: list[int] = []  # the double-buffered leaves
        self.depth = 1  # how deeply it nests (see _nesting_depth)
        self.fn = None  # bound by Planner.compile (spec.name)
        self.then_fn = None
        self._dtypes = [np.dtype(dtypes.to_dtype(s.element_type)) for s in leaves]
        self._dims = [tuple(int(d) for d in s.dimensions) for s in leaves]
        self._flat = instr.shape.is_tuple() and all(s.is_array() for s in
                                                    instr.shape.tuple_shapes)
        self._bufs_type = ctypes.c_void_p * (len(leaves) + 3 + len(consts))
        self.host_table = None  # the program's host calls (set by compile_while)
        self.max_gemm = 0  # m*n*k of the largest GEMM its native code calls
        self._const_ptrs = [a.ctypes.data for a in consts]
        self._one_block = state_bytes + ws_bytes < buffers.POOL_MIN_BYTES

    def run(self, env, plan_ctx):
        instr = self.instr
        init = env[id(instr.operands[0])]
        if self._flat and isinstance(init, tuple):
            values = init
        else:
            values = _flatten(init)
        n = len(self.leaves)
        if len(values) != n:
            raise InvalidArgumentError(
                f"while %{instr.name}: the initial state has {len(values)} arrays, its shape "
                f"{instr.shape} has {n}")
        bufs = self._bufs_type()
        keep = []
        for k, (v, dt, dims) in enumerate(zip(values, self._dtypes, self._dims)):
            if type(v) is not np.ndarray or v.dtype != dt or v.shape != dims or \
                    not v.flags.c_contiguous:
                v = np.ascontiguousarray(np.asarray(v, dt).reshape(dims))
                keep.append(v)
            bufs[k] = _address(v)
        if self._one_block:  # small: the result block and the workspace in one allocation
            out = np.empty(self.state_bytes + self.ws_bytes, np.uint8)
            base = _address(out)
            bufs[n] = base
            bufs[n + 1] = base + self.state_bytes
        else:
            out = buffers.POOL.empty((max(self.state_bytes, 1),), np.uint8)
            ws = buffers.POOL.empty((max(self.ws_bytes, 1),), np.uint8)
            bufs[n] = _address(out)
            bufs[n + 1] = _address(ws)
        ctx = executor.context()
        bufs[n + 2] = ctx.address
        if self._const_ptrs:
            bufs[n + 3:] = self._const_ptrs
        with executor.running(self.host_table, plan_ctx, f"while %{instr.name}") as run:
            if 0 < self.max_gemm < executor.BIG_GEMM:  # small GEMMs: one BLAS thread
                with executor.blas_threads(1):  # each (library's rule for one GEMM)
                    self.fn(bufs, 0, 1)
            else:
                self.fn(bufs, 0, 1)
        if ctx.words[0]:
            ctx.reset()
            run.reraise()
        results = [np.ndarray(dims, dt, out, off)
                   for dims, dt, off in zip(self._dims, self._dtypes, self.offsets)]
        env[id(instr)] = tuple(results) if self._flat else _unflatten(instr.shape,
                                                                     iter(results))


_ADDRESSOF = ctypes.addressof
_FROM_BUFFER = ctypes.c_char.from_buffer


def _address(a: np.ndarray) -> int:
    """The data address of a C-contiguous array (ctypes.addressof is several times faster
    than ``a.ctypes.data``; it needs a writable buffer)."""
    if a.flags.writeable and a.size and a.dtype.isbuiltin == 1:  # ml_dtypes (2): no buffer format
        return _ADDRESSOF(_FROM_BUFFER(a))
    return a.ctypes.data


def _flatten(value) -> list:
    return flatten_tuples(value)


def _unflatten(shape, leaves):
    return build_shaped(shape, lambda _s, _path: next(leaves))


# -- buffer assignment ------------------------------------------------------------------------


class _Arena:
    """Static offsets in the workspace: first-fit over freed ranges, ALIGN-aligned."""

    def __init__(self):
        self.size = 0
        self._free: list[list[int]] = []  # [start, end) ranges, sorted, coalesced

    def alloc(self, nbytes: int) -> int:
        n = max(ALIGN, -(-nbytes // ALIGN) * ALIGN)
        for k, (start, end) in enumerate(self._free):
            if end - start >= n:
                if end - start == n:
                    del self._free[k]
                else:
                    self._free[k][0] = start + n
                return start
        if self._free and self._free[-1][1] == self.size:  # grow the last free range
            start = self._free.pop()[0]
        else:
            start = self.size
        self.size = start + n
        return start

    def free(self, offset: int, nbytes: int) -> None:
        n = max(ALIGN, -(-nbytes // ALIGN) * ALIGN)
        rng = [offset, offset + n]
        self._free.append(rng)
        self._free.sort()
        merged: list[list[int]] = []
        for r in self._free:
            if merged and merged[-1][1] == r[0]:
                merged[-1][1] = r[1]
            else:
                merged.append(r)
        self._free = merged


class _Slot:
    """A workspace range holding one array value; ``pinned`` slots are never freed."""

    __slots__ = ("nbytes", "offset", "pinned", "ptr")

    def __init__(self, offset, nbytes, ptr, pinned=False):
        self.offset, self.nbytes, self.ptr, self.pinned = offset, nbytes, ptr, pinned


class _Leaf:
    """An array value at emission time: its shape, its address (an i8* computed in the
    entry block) and the workspace slot it lives in (None: a constant)."""

    __slots__ = ("ptr", "shape", "slot")

    def __init__(self, shape, ptr, slot):
        self.shape, self.ptr, self.slot = shape, ptr, slot


def _leaves(ref) -> list:
    """The leaves of a value at emission time (a part already released is None)."""
    return [leaf for leaf in flatten_tuples(ref) if leaf is not None]


def _last_part_reads(plan) -> dict:
    """Step k -> (id(tuple), index) when step k is the last get-tuple-element reading that
    element of a tuple value whose every user is a get-tuple-element (a loop body's state
    parameter, typically): from then on the tuple need not keep the element alive. Without
    this, the state parameter held every leaf until its last element was read, and no update
    of the state could happen in place."""
    last: dict[tuple[int, int], int] = {}
    for k, step in enumerate(plan.steps):
        instr = step.instr
        if instr.opcode != "get-tuple-element" or not isinstance(step, ValueStep):
            continue
        t = instr.operands[0]
        if t is plan.comp.root or any(u.opcode != "get-tuple-element" for u in t.users):
            continue
        last[(id(t), int(instr.attrs["index"]))] = k
    return {k: key for key, k in last.items()}


def _build(shape, leaves):
    return build_shaped(shape, lambda _s, _path: next(leaves))


# -- the emitter ------------------------------------------------------------------------------


class _Emitter:
    """Emits one compiled while function (see the module docstring)."""

    def __init__(self, planner, name: str, leaves: list):
        self.planner = planner
        self.n = len(leaves)
        self.fn = ir.Function(planner.irmod, KERNEL_TYPE, name=name)
        self.fn.args[0].name = "bufs"
        entry = self.fn.append_basic_block("entry")
        self.pre = ir.IRBuilder(entry)  # pointers, bufs arrays: loop-invariant, emitted once
        self.b = ir.IRBuilder(self.fn.append_basic_block("start"))
        self.bufs = self.fn.args[0]
        self.ws = self._arg(self.n + 1, "ws")
        self.ctx = self._arg(self.n + 2, "ctx")
        self.host_table = planner.host_table
        self._abort = None  # the block returning after a failed call out
        self._dying: set = set()  # id(slot) of the values whose last use is the current step
        self._alias_state = False  # whether a kernel may write a dying state slot in place
        self._counter = None  # the iteration counter of the cancel poll (an alloca)
        self.max_gemm = 0  # m*n*k of the largest GEMM called natively (nested loops included)
        self.arena = _Arena()
        self.consts: list[np.ndarray] = []
        self._const_leaf: dict[int, _Leaf] = {}
        self._ptr_at: dict[int, ir.Value] = {}
        self._refs: dict[int, int] = {}  # id(slot) -> env entries holding it
        self._slots: dict[int, _Slot] = {}
        self.memcpy = self._memcpy_fn()
        self.leaf_shapes = leaves
        self._placement: dict[int, _Leaf] = {}  # id(instr) -> where its kernel writes

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

    def _copy(self, dst, src, nbytes: int) -> None:
        if nbytes > 0:
            self.b.call(self.memcpy, [dst, src, ir.Constant(I64, nbytes), ir.Constant(I1, 0)])

    def _slot(self, shape, pinned=False) -> _Slot:
        nbytes = _nbytes(shape)
        return self._bytes_slot(nbytes, pinned)

    def _bytes_slot(self, nbytes: int, pinned=False) -> _Slot:
        offset = self.arena.alloc(nbytes)
        slot = _Slot(offset, nbytes, self._ptr(offset), pinned)
        self._slots[id(slot)] = slot
        self._refs[id(slot)] = 0
        return slot

    def _ptr(self, offset: int):
        """The workspace address ``offset`` (an i8* computed once, in the entry block)."""
        ptr = self._ptr_at.get(offset)
        if ptr is None:
            ptr = self.pre.gep(self.ws, [ir.Constant(I64, offset)], inbounds=True,
                               name=f"ws.{offset}")
            self._ptr_at[offset] = ptr
        return ptr

    def _release_slot(self, slot: _Slot) -> None:
        if not slot.pinned:
            self.arena.free(slot.offset, slot.nbytes)
            del self._refs[id(slot)]
            del self._slots[id(slot)]

    def _new_leaf(self, shape, pinned=False) -> _Leaf:
        slot = self._slot(shape, pinned)
        return _Leaf(shape, slot.ptr, slot)

    def _const(self, array, shape=None) -> _Leaf:
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
        ptr = self._arg(self.n + 2 + len(self.consts), f"const{len(self.consts) - 1}")
        leaf = _Leaf(shape, ptr, None)
        self._const_leaf[key] = leaf
        return leaf

    def _bufs_array(self, ptrs: list):
        """An i8*[] of ``ptrs`` filled in the entry block; returns it as i8**."""
        arr = self.pre.alloca(ir.ArrayType(I8P, max(1, len(ptrs))), name="args")
        for k, p in enumerate(ptrs):
            dst = self.pre.gep(arr, [ir.Constant(I32, 0), ir.Constant(I32, k)], inbounds=True)
            self.pre.store(p, dst)
        return self.pre.gep(arr, [ir.Constant(I32, 0), ir.Constant(I32, 0)], inbounds=True)

    # reference counts: every env entry holds its value's slots
    def _hold(self, ref) -> None:
        for slot_id in {id(leaf.slot) for leaf in _leaves(ref) if leaf.slot is not None}:
            self._refs[slot_id] += 1

    def _drop(self, ref) -> None:
        for slot_id in {id(leaf.slot) for leaf in _leaves(ref) if leaf.slot is not None}:
            self._refs[slot_id] -= 1
            if self._refs[slot_id] == 0:
                self._release_slot(self._slots[slot_id])

    def _set(self, env, instr, ref) -> None:
        env[id(instr)] = ref
        self._hold(ref)

    def _release_part(self, env, key: int, index: int) -> None:
        """The tuple value ``env[key]`` stops holding its element ``index`` (read for the
        last time: see ``_last_part_reads``), so a kernel may write that element's slots in
        place while the rest of the tuple is still needed."""
        ref = env.get(key)
        if ref is None or ref[index] is None:
            return
        rest = {id(leaf.slot) for j, x in enumerate(ref) if j != index
                for leaf in _leaves(x) if leaf.slot is not None}
        for slot_id in {id(leaf.slot) for leaf in _leaves(ref[index])
                        if leaf.slot is not None} - rest:
            self._refs[slot_id] -= 1
            if self._refs[slot_id] == 0:
                self._release_slot(self._slots[slot_id])
        env[key] = tuple(None if j == index else x for j, x in enumerate(ref))

    # -- plans -----------------------------------------------------------------------------

    def emit_plan(self, plan, args: list):
        """Emit ``plan``'s steps at the builder; returns its root's value, held once for
        the caller (who drops it)."""
        env: dict = {}
        for p in plan.params:
            self._set(env, p, args[p.parameter_number])
        parts = _last_part_reads(plan)
        for k, (step, drops) in enumerate(zip(plan.steps, plan.drops)):
            self._dying = self._dead_after(env, drops)
            self._emit_step(step, env)
            self._dying = set()
            part = parts.get(k)
            if part is not None:
                self._release_part(env, *part)
            for key in drops:
                self._drop(env.pop(key))
        root = env[id(plan.comp.root)]
        self._hold(root)
        for ref in env.values():
            self._drop(ref)
        return root

    def _emit_step(self, step, env) -> None:
        instr = step.instr
        if isinstance(step, ConstantStep):
            shapes = _leaf_shapes(instr.shape)
            values = _flatten(step.value)
            self._set(env, instr, _build(instr.shape, iter(
                [self._const(v, s) for v, s in zip(values, shapes)])))
        elif isinstance(step, ValueStep):
            op = instr.opcode
            if op == "tuple":
                ref = tuple(env[id(o)] for o in instr.operands)
            elif op == "get-tuple-element":
                ref = env[id(instr.operands[0])][instr.attrs["index"]]
            else:  # reshape / bitcast of a row-major array: the same bytes
                src = env[id(instr.operands[0])]
                ref = _Leaf(instr.shape, src.ptr, src.slot)
            self._set(env, instr, ref)
        elif isinstance(step, KernelStep):
            self._emit_kernel(step, env)
        elif isinstance(step, CompiledWhileStep):
            self._emit_nested_while(step, env)
        elif isinstance(step, CallStep) and id(step.body) in self._native_plans:
            root = self.emit_plan(step.body, [env[id(o)] for o in instr.operands])
            self._set(env, instr, root)
            self._drop(root)
        elif isinstance(step, ConditionalStep) and all(
                id(p) in self._native_plans for p in step.branches):
            self._emit_conditional(step, env)
        elif isinstance(step, (LibraryStep, SwappedDotStep)) and self._emit_gemm(step, env):
            pass  # a 2-D f32/f64 dot: xGEMM called through the function table
        elif getattr(step, "native_call", None) is not None:
            self._emit_native_call(step, env)  # a native function of its own (collectives)
        else:  # anything else: a call out to Python (compile_while checked it can)
            self._emit_host(step, env)

    def _emit_native_call(self, step, env) -> None:
        """A step that is one native function of the program (``step.native_call``, the
        kernel signature) over the leaves of its operands (``step.reads``), then of its
        result, then the context; it reports a failure in the context's status word."""
        instr = step.instr
        ins = [leaf for o in step.reads for leaf in _leaves(env[id(o)])]
        placed = self._placement.get(id(instr))  # a double-buffered state leaf
        outs = [placed] if placed is not None else \
            [self._new_leaf(s) for s in _leaf_shapes(instr.shape)]
        bufs = self._bufs_array([leaf.ptr for leaf in ins] + [leaf.ptr for leaf in outs] +
                                [self.ctx])
        self.b.call(self.planner.irmod.get_global(step.native_call),
                    [bufs, ir.Constant(I64, 0), ir.Constant(I64, 1)])
        self._check_status()
        self._set(env, instr, _build(instr.shape, iter(outs)))

    # -- calls out and their failures ---------------------------------------------------------

    def _dead_after(self, env, drops) -> set:
        """id(slot) of the workspace slots no value holds once ``drops`` are dropped."""
        count: dict[int, int] = {}
        for key in drops:
            if key not in env:  # the step's own value, used by nobody
                continue
            for slot_id in {id(leaf.slot) for leaf in _leaves(env[key])
                            if leaf.slot is not None}:
                count[slot_id] = count.get(slot_id, 0) + 1
        return {k for k, n in count.items() if self._refs.get(k) == n}

    def _abort_block(self):
        """The block that marks the context failed and returns (created once)."""
        if self._abort is None:
            self._abort = self.fn.append_basic_block("abort")
            b = ir.IRBuilder(self._abort)
            b.store(ir.Constant(I64, 1), b.bitcast(self.ctx, I64.as_pointer()))
            b.ret_void()
        return self._abort

    def _return_if(self, failed) -> None:
        ok = self.fn.append_basic_block("ok")
        self.b.cbranch(failed, self._abort_block(), ok)
        self.b.position_at_end(ok)

    def _table_fn(self, slot: int, fnty, name: str):
        b = self.b
        words = b.bitcast(self.ctx, I64.as_pointer())
        table = b.inttoptr(b.load(b.gep(words, [ir.Constant(I64, 1)])), I8P.as_pointer())
        raw = b.load(b.gep(table, [ir.Constant(I64, slot)]), name=name)
        return b.bitcast(raw, fnty.as_pointer())

    def _call_host(self, call, ptrs: list, what: str) -> None:
        """Call host call ``call`` (an executor entry) with the bufs array of ``ptrs``;
        return at once when it fails."""
        ident = self.host_table.add(call)
        bufs = self._bufs_array(ptrs)
        host = self._table_fn(executor.HOST, _HOST_TYPE, f"host.{what}")
        rc = self.b.call(host, [self.ctx, ir.Constant(I64, ident), bufs], name=f"rc.{what}")
        self._return_if(self.b.icmp_signed("!=", rc, ir.Constant(I32, 0)))

    def _check_status(self) -> None:
        """After a nested native call: return when it failed."""
        status = self.b.load(self.b.bitcast(self.ctx, I64.as_pointer()), name="status")
        self._return_if(self.b.icmp_signed("!=", status, ir.Constant(I64, 0)))

    def _emit_host(self, step, env) -> None:
        """A step native code cannot run itself: a call out (executor.StepCall)."""
        instr = step.instr
        reads = getattr(step, "reads", None) or list(instr.operands)
        ins = [leaf for o in reads for leaf in _leaves(env[id(o)])]
        placed = self._placement.get(id(instr))
        outs = [placed] if placed is not None else \
            [self._new_leaf(s) for s in _leaf_shapes(instr.shape)]
        call = executor.StepCall(step, reads)
        self._call_host(call, [leaf.ptr for leaf in ins] + [leaf.ptr for leaf in outs],
                        instr.name)
        self._set(env, instr, _build(instr.shape, iter(outs)))

    def _emit_gemm(self, step, env) -> bool:
        """A dot of two row-major matrices of f32 or f64 (no batch dimensions, one
        contracting dimension each, the result's type) as one xGEMM call from native code
        (the BLAS routine's address from the function table). Row-major C[M,N] = A B is
        column-major C^T = B^T A^T: B is passed first, each operand with the transpose flag
        its contracting dimension asks for. False when the dot has another form."""
        dot = getattr(step, "dot", None) or step.instr
        if dot.opcode != "dot" or len(dot.operands) != 2:
            return False
        lhs, rhs = dot.operands
        t = dot.shape.element_type
        if t not in (el.PT.F32, el.PT.F64) or any(
                o.shape.element_type != t or len(o.shape.dimensions) != 2 for o in (lhs, rhs)):
            return False
        dn = dot.attrs["dot_dimension_numbers"]
        if dn.lhs_batch_dimensions or dn.rhs_batch_dimensions or \
                len(dn.lhs_contracting_dimensions) != 1 or \
                len(dn.rhs_contracting_dimensions) != 1:
            return False
        cl, cr = int(dn.lhs_contracting_dimensions[0]), int(dn.rhs_contracting_dimensions[0])
        ld, rd = [int(d) for d in lhs.shape.dimensions], [int(d) for d in rhs.shape.dimensions]
        m, k, n = ld[1 - cl], ld[cl], rd[1 - cr]
        if min(m, n, k) < 1 or max(m, n, k, ld[1], rd[1]) > executor.INT_MAX or \
                tuple(int(d) for d in dot.shape.dimensions) != (m, n):
            return False
        a, b_ = env[id(lhs)], env[id(rhs)]
        placed = self._placement.get(id(step.instr))
        out = placed if placed is not None else self._new_leaf(step.instr.shape)
        real = ir.FloatType() if t == el.PT.F32 else ir.DoubleType()
        pre = self.pre

        def const(ty, value, name):
            slot = pre.alloca(ty, name=name)
            pre.store(ir.Constant(ty, value), slot)
            return slot

        def as_i8(ptr):
            return pre.bitcast(ptr, I8P) if ptr.type != I8P else ptr

        ta = const(I8, ord("N") if cr == 0 else ord("T"), "gemm.ta")
        tb = const(I8, ord("N") if cl == 1 else ord("T"), "gemm.tb")
        ints = [const(I32, v, name) for v, name in
                ((n, "gemm.m"), (m, "gemm.n"), (k, "gemm.k"), (rd[1], "gemm.lda"),
                 (ld[1], "gemm.ldb"), (n, "gemm.ldc"))]
        one, zero = const(real, 1.0, "gemm.alpha"), const(real, 0.0, "gemm.beta")
        fnty = ir.FunctionType(ir.VoidType(), [I8P, I8P, I32.as_pointer(), I32.as_pointer(),
                                               I32.as_pointer(), real.as_pointer(), I8P,
                                               I32.as_pointer(), I8P, I32.as_pointer(),
                                               real.as_pointer(), I8P, I32.as_pointer()])
        self.max_gemm = max(self.max_gemm, m * n * k)
        slot = executor.SGEMM if t == el.PT.F32 else executor.DGEMM
        gemm = self._table_fn(slot, fnty, f"gemm.{step.instr.name}")
        self.b.call(gemm, [ta, tb, ints[0], ints[1], ints[2], one, as_i8(b_.ptr), ints[3],
                           as_i8(a.ptr), ints[4], zero, as_i8(out.ptr), ints[5]])
        self._set(env, step.instr, out)
        return True

    def _in_place_output(self, step, k_out: int, k_in: int, ins) -> _Leaf | None:
        """The input leaf ``k_in`` itself when the kernel may write its output there: the
        input's slot dies with this step and no other input reads it."""
        if k_in >= len(step.inputs):
            return None  # a bound constant
        leaf = ins[k_in]
        if leaf.slot is None or id(leaf.slot) not in self._dying:
            return None
        if any(j != k_in and other.slot is leaf.slot for j, other in enumerate(ins)):
            return None
        if leaf.slot.pinned and not self._alias_state:
            return None  # the loop state, read by the condition: only the body may write it
        if _nbytes(leaf.shape) != _nbytes(step.spec.outputs[k_out]):
            return None
        return leaf

    def _emit_kernel(self, step, env) -> None:
        spec = step.spec
        ins = [env[id(i)] for i in step.inputs]
        ins += [self._const(a) for a in step.bound]
        placed = self._placement.get(id(step.instr))
        outs = [placed] if placed is not None else [None] * len(spec.outputs)
        for o, i in spec.in_place:  # the output starts as its input: alias a dying input
            if outs[o] is None:
                leaf = self._in_place_output(step, o, i, ins)
                if leaf is not None:
                    outs[o] = _Leaf(spec.outputs[o], leaf.ptr, leaf.slot)
        outs = [leaf if leaf is not None else self._new_leaf(s)
                for leaf, s in zip(outs, spec.outputs)]
        for o, i in spec.in_place:  # otherwise the output starts as a copy of its input
            if outs[o].ptr is not ins[i].ptr:
                self._copy(outs[o].ptr, ins[i].ptr, _nbytes(spec.outputs[o]))
        scratch = [self._bytes_slot(int(n) * np.dtype(dt).itemsize) for dt, n in spec.scratch]
        ptrs = [leaf.ptr for leaf in ins] + [leaf.ptr for leaf in outs] + \
            [s.ptr for s in scratch]
        if spec.domain and not _single_threaded(spec):  # split over threads: a call out
            self._call_host(executor.KernelCall(step), ptrs, step.instr.name)
        elif spec.domain:
            bufs = self._bufs_array(ptrs)
            mod = self.planner.irmod
            self.b.call(mod.get_global(spec.name),
                        [bufs, ir.Constant(I64, 0), ir.Constant(I64, spec.domain)])
            then = spec.then
            if then is not None and then.domain:
                self.b.call(mod.get_global(then.name),
                            [bufs, ir.Constant(I64, 0), ir.Constant(I64, then.domain)])
        for s in scratch:
            self._release_slot(s)
        self._set(env, step.instr, tuple(outs) if step.tuple_result else outs[0])

    def _emit_nested_while(self, step, env) -> None:
        init = _leaves(env[id(step.instr.operands[0])])
        block = self._bytes_slot(step.state_bytes)
        outs = [_Leaf(s, self._ptr(block.offset + off), block)
                for s, off in zip(step.leaves, step.offsets)]
        ws = self._bytes_slot(step.ws_bytes)
        consts = [self._const(a) for a in step.consts]
        ptrs = [leaf.ptr for leaf in init] + [block.ptr, ws.ptr, self.ctx] + \
            [leaf.ptr for leaf in consts]
        bufs = self._bufs_array(ptrs)
        self.b.call(step.function, [bufs, ir.Constant(I64, 0), ir.Constant(I64, 1)])
        self._check_status()
        self.max_gemm = max(self.max_gemm, step.max_gemm)
        self._release_slot(ws)
        self._set(env, step.instr, _build(step.instr.shape, iter(outs)))

    def _emit_conditional(self, step, env) -> None:
        instr = step.instr
        b = self.b
        outs = [self._new_leaf(s) for s in _leaf_shapes(instr.shape)]
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
        for k, (plan, block) in enumerate(zip(step.branches, blocks)):
            b.position_at_end(block)
            root = self.emit_plan(plan, [env[id(instr.operands[k + 1])]])
            for dst, src in zip(outs, _leaves(root)):
                self._copy(dst.ptr, src.ptr, _nbytes(dst.shape))
            self._drop(root)
            self.b.branch(merge)
        b.position_at_end(merge)
        self._set(env, instr, _build(instr.shape, iter(outs)))

    # -- the loop --------------------------------------------------------------------------

    def _swappable(self, body) -> dict:
        """Leaf k -> id(instruction) for the state leaves the body computes with a kernel of
        its own (the root tuple's operand k, used once there, a kernel's only output) and
        that are big enough for a copy to matter: those are double-buffered."""
        root = body.comp.root
        if len(self.leaf_shapes) == 1 and not root.shape.is_tuple():
            operands = [root]
        elif root.opcode == "tuple" and len(root.operands) == len(self.leaf_shapes) and \
                all(o.shape.is_array() for o in root.operands):
            operands = list(root.operands)
        else:
            return {}
        kernels = {id(st.instr) for st in body.steps
                   if (isinstance(st, KernelStep) and not st.tuple_result and
                       not st.spec.in_place) or  # in place: writes the dying state slot
                   (isinstance(st, (LibraryStep, SwappedDotStep)) and
                    st.instr.shape.is_array()) or
                   (getattr(st, "native_call", None) is not None and
                    st.instr.shape.is_array())}
        out = {}
        for k, o in enumerate(operands):
            if id(o) in kernels and sum(x is o for x in operands) == 1 and \
                    _nbytes(o.shape) >= SWAP_MIN_BYTES:
                out[k] = id(o)
        return out

    def _poll(self) -> None:
        """Every ``ctx[2]`` iterations (executor.POLL_PERIOD) call the cancel poll; return
        when it says the run was given up."""
        if self._counter is None:
            self._counter = self.pre.alloca(I64, name="polls")
            self.pre.store(ir.Constant(I64, 0), self._counter)
        b = self.b
        words = b.bitcast(self.ctx, I64.as_pointer())
        period = b.load(b.gep(words, [ir.Constant(I64, 2)]), name="period")
        count = b.add(b.load(self._counter), ir.Constant(I64, 1), name="count")
        due = b.icmp_signed(">=", count, period, name="due")
        b.store(b.select(due, ir.Constant(I64, 0), count), self._counter)
        with b.if_then(due, likely=False):
            poll = self._table_fn(executor.POLL, _POLL_TYPE, "poll")
            rc = b.call(poll, [self.ctx], name="rc.poll")
            self._return_if(b.icmp_signed("!=", rc, ir.Constant(I32, 0)))

    def emit_while(self, cond, body) -> None:
        n = self.n
        state0 = [self._new_leaf(s, pinned=True) for s in self.leaf_shapes]
        self.offsets = [leaf.slot.offset for leaf in state0]
        self.state_bytes = self.arena.size
        for k, leaf in enumerate(state0):
            self._copy(leaf.ptr, self._arg(k, f"init{k}"), _nbytes(leaf.shape))
        swap = self._swappable(body)
        self.swapped = sorted(swap)
        halves = [state0]
        if swap:  # two copies of the loop: the swapped leaves alternate between two slots
            halves.append([self._new_leaf(leaf.shape, pinned=True) if k in swap else leaf
                           for k, leaf in enumerate(state0)])
        b = self.b
        blocks = [(self.fn.append_basic_block(f"cond{h}"), self.fn.append_basic_block(f"body{h}"),
                   self.fn.append_basic_block(f"done{h}")) for h in range(len(halves))]
        b.branch(blocks[0][0])
        for h, state in enumerate(halves):
            header, loop, done = blocks[h]
            nxt = halves[(h + 1) % len(halves)]
            ref = _build(cond.params[0].shape, iter(state))
            b.position_at_end(header)
            self._poll()
            pred = self.emit_plan(cond, [ref])
            go = b.load(pred.ptr, name="pred")
            self._drop(pred)
            b.cbranch(b.icmp_unsigned("!=", go, ir.Constant(I8, 0), name="go"), loop, done)

            b.position_at_end(loop)
            self._placement = {swap[k]: nxt[k] for k in swap}
            self._alias_state = True
            root = self.emit_plan(body, [ref])
            self._alias_state = False
            self._placement = {}
            self._move_results(state, nxt, _leaves(root), swap)
            self._drop(root)
            b.branch(blocks[(h + 1) % len(halves)][0])

            b.position_at_end(done)
            if h == 0:  # the state slots are the workspace's first bytes: copy them whole
                self._copy(self._arg(n, "out"), self.ws, self.state_bytes)
            else:
                out = self._arg(n, "out")
                for leaf, off in zip(state, self.offsets):
                    dst = b.gep(out, [ir.Constant(I64, off)], inbounds=True)
                    self._copy(dst, leaf.ptr, _nbytes(leaf.shape))
            b.ret_void()
        self.pre.branch(self.fn.blocks[1])

    def _move_results(self, state, nxt, new, swap) -> None:
        """Make ``nxt`` (the next iteration's state) hold the body's results ``new``: the
        swapped leaves are already there (their kernels wrote them); every other leaf that
        is not passed through unchanged is copied, and a result that is another leaf's
        slot (elements permuted) is read, through a temporary, before any slot is
        written."""
        for k in swap:
            if new[k].slot is not nxt[k].slot:  # pragma: no cover - _swappable's contract
                raise AssertionError(f"compiled while: leaf {k} was not computed in place")
        fixed = {id(leaf.slot): k for k, leaf in enumerate(nxt) if k not in swap}
        staged = {}
        for k, src in enumerate(new):
            j = fixed.get(id(src.slot))
            if k not in swap and j is not None and j != k:
                tmp = self._slot(src.shape)
                self._copy(tmp.ptr, src.ptr, tmp.nbytes)
                staged[k] = tmp
        for k, src in enumerate(new):
            if k in swap:
                continue
            if k in staged:
                src_ptr = staged[k].ptr
            elif fixed.get(id(src.slot)) == k:
                continue  # passed through unchanged
            else:
                src_ptr = src.ptr
            self._copy(nxt[k].ptr, src_ptr, _nbytes(nxt[k].shape))
        for tmp in staged.values():
            self._release_slot(tmp)


__all__ = ["CompiledWhileStep", "compile_while"]

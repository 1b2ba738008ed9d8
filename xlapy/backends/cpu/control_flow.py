"""Compiled control flow: a ``while`` whose condition and body run in native code, with no
return to Python per iteration.

``compile_while(planner, step)`` looks at a ``WhileStep``'s condition and body plans. When
every step of both (recursively) can run natively (``native.plan_supported``: kernels,
constants, aliases, nested compiled whiles, calls and conditionals made of such steps, and
host calls for the rest) and every value is an array of an element type the kernels know
(or a tuple of them), it emits ONE LLVM function for the whole loop into
``planner.irmod`` with the computation emitter (``native.Emitter``, which also emits the
entry computation) and returns a ``CompiledWhileStep``; otherwise ``None`` and the Python
``WhileStep`` stays.

The function is a computation function of the emitter: its parameter leaves are the
initial state's leaves (the state flattened depth first), its result leaves the final
state's::

    bufs = [init leaves (n)] + [result leaves (n)] + [workspace] + [context] + [constants]

The state: a leaf of at least ``RESIDENT_MIN_BYTES`` that is not double-buffered lives in
its result buffer the whole loop (the initial leaf is copied there, unless the caller
passed the same memory for both: a loop updating a dying or donated array in place copies
nothing); every other leaf lives in a workspace slot, so that the addresses of small state
are one base pointer plus a constant offset (LLVM sees that they do not alias and keeps
scalar state in registers), and is copied to its result buffer when the loop ends.

Code: copy the initial state in; loop: run the condition's steps (kernels are called
directly, whole domain, single-threaded: LLVM inlines small ones), load its pred, exit or
run the body, then move the body's results into the state - a result that already is its
own state slot (an element passed through unchanged, or updated in place) costs nothing,
one that is another state slot (a permutation) goes through a temporary first, anything
else is copied.

Double buffering: a state leaf of at least ``SWAP_MIN_BYTES`` that the body computes with a
kernel of its own (the root tuple's operand) gets two slots: an iteration reads the state
from one and those kernels write the other, and the two swap roles for the next iteration
(two phis of the loop header per leaf), so nothing is copied back. The loop is emitted
once (emitting it twice, each copy with constant addresses, doubled the LLVM time of the
loops: random_gamma's LLVM time was 30% its loops' second copies); a kernel called with a
swapped pointer gets it through its bufs array, stored where it is called. On exit the
current slots are copied to the result buffers.

In place: a kernel with ``spec.in_place`` (dynamic-update-slice, scatter) whose input slot
nothing reads after the step writes that slot itself (in the body only: never the state
the condition reads); such kernels are never double-buffered. A loop of row updates into a
big state thus costs the rows.

A collective with a native function (collectives.py) is a call to it; its array result
may be a double-buffered state leaf like a kernel's. A nested compiled while is a call to
its own function (the same ABI: its workspace is a slot of the enclosing workspace, its
constants are appended to the enclosing ones). A conditional is a ``switch`` over its
branches; each branch's result is copied into the conditional's result slots. Native
loops call the executor's cancel poll every ``executor.POLL_PERIOD`` iterations.

The Python side (``CompiledWhileStep.run``, for loops the Python plan runs) is one native
call per while execution: the result leaves and the workspace come from ``buffers.POOL``.
"""

from __future__ import annotations

import ctypes

import numpy as np
from llvmlite import ir

from xlapy.backends.cpu import buffers, executor, threads
from xlapy.backends.cpu import elemental as el
from xlapy.backends.cpu.kernel_abi import KernelSpec
from xlapy.backends.cpu.native import (
    I8,
    I32,
    MAX_NATIVE_DEPTH,
    POLL_TYPE,
    Emitter,
    Leaf,
    build,
    leaf_shapes,
    leaves_of,
    nbytes,
    plan_supported,
)
from xlapy.backends.cpu.steps import (
    CallStep,
    ConditionalStep,
    KernelStep,
    LibraryStep,
    _address,
)
from xlapy.errors import InvalidArgumentError
from xlapy.shape import dtypes
from xlapy.shape.tree import flatten_tuples

I64 = ir.IntType(64)

#: How deeply one compiled while may nest calls, conditionals and compiled whiles
#: (``native.MAX_NATIVE_DEPTH``: each level is a call or a branch of the emitter, and a
#: nested while's constants are passed down through every level): a deeper loop stays a
#: Python WhileStep (as do those around it).
#: State leaves of at least this size computed by a kernel of the body are double-buffered
#: (the kernel writes the next iteration's buffer) instead of copied back every iteration.
SWAP_MIN_BYTES = 256
#: State leaves of at least this size that are not double-buffered live in their result
#: buffer (no copy in or out when the caller passes the initial leaf's own memory).
RESIDENT_MIN_BYTES = 1 << 12


# -- what can be compiled ---------------------------------------------------------------------


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
    leaves = leaf_shapes(instr.shape)
    if leaves is None or not leaves:
        return None
    depth = 1 + _nesting_depth([step.cond, step.body])
    if depth > MAX_NATIVE_DEPTH:
        return None
    seen: dict = {}
    if not (plan_supported(step.cond, seen) and plan_supported(step.body, seen)):
        return None
    cond_root = step.cond.comp.root.shape
    if not (cond_root.is_array() and cond_root.element_type == el.PT.PRED and
            not cond_root.dimensions):
        return None
    name = planner.irmod.get_unique_name(f"while.{instr.name}")
    emitter = WhileEmitter(planner, name, leaves, f"while %{instr.name}")
    emitter.native_plans = {k for k, ok in seen.items() if ok}
    emitter.emit_while(step.cond, step.body)
    spec = KernelSpec(name=name, n_inputs=len(leaves), outputs=[], domain=1, parallel=False)
    compiled = CompiledWhileStep(instr, step.cond, step.body, spec, emitter.fn, leaves,
                                 emitter.consts, emitter.arena.size)
    compiled.swapped = emitter.swapped
    compiled.resident = emitter.resident
    compiled.host_table = planner.host_table
    compiled.max_gemm = emitter.max_gemm
    compiled.depth = depth
    planner.kernels.append(compiled)
    return compiled


# -- the step ---------------------------------------------------------------------------------


class CompiledWhileStep:
    """A while loop run by one native call (see the module docstring)."""

    native_loop = True  # the emitter calls its function (native.Emitter._emit_nested_while)

    def __init__(self, instr, cond, body, spec, function, leaves, consts, ws_bytes):
        self.instr = instr
        self.cond, self.body = cond, body  # the plans it was compiled from
        self.spec = spec
        self.function = function  # the LLVM function (enclosing functions call it)
        self.leaves = leaves  # Shapes of the state leaves
        self.consts = consts  # the arrays bufs[2n + 2:] point at
        self.ws_bytes = ws_bytes
        self.swapped: list[int] = []  # the double-buffered leaves
        self.resident: list[int] = []  # the leaves living in their result buffers
        self.depth = 1  # how deeply it nests (see _nesting_depth)
        self.fn = None  # bound by Planner.compile (spec.name)
        self.then_fn = None
        self._dtypes = [np.dtype(dtypes.to_dtype(s.element_type)) for s in leaves]
        self._dims = [tuple(int(d) for d in s.dimensions) for s in leaves]
        self._small = [nbytes(s) < buffers.POOL_MIN_BYTES for s in leaves]
        self._flat = instr.shape.is_tuple() and all(s.is_array() for s in
                                                    instr.shape.tuple_shapes)
        n = len(leaves)
        self._bufs_type = ctypes.c_void_p * (2 * n + 2 + len(consts))
        self.host_table = None  # the program's host calls (set by compile_while)
        self.max_gemm = 0  # m*n*k of the largest GEMM its native code calls
        self._const_ptrs = [a.ctypes.data for a in consts]

    def run(self, env, plan_ctx):
        instr = self.instr
        init = env[id(instr.operands[0])]
        values = init if self._flat and isinstance(init, tuple) else flatten_tuples(init)
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
        results = [np.empty(dims, dt) if small else buffers.POOL.empty(dims, dt)
                   for dims, dt, small in zip(self._dims, self._dtypes, self._small)]
        for k, r in enumerate(results):
            bufs[n + k] = _address(r)
        _ws, bufs[2 * n] = buffers.workspace(self.ws_bytes)  # held until the call returns
        ctx = executor.context()
        bufs[2 * n + 1] = ctx.address
        if self._const_ptrs:
            bufs[2 * n + 2:] = self._const_ptrs
        with executor.running(self.host_table, plan_ctx, f"while %{instr.name}") as run:
            if self.max_gemm:  # its GEMMs: single-threaded BLAS over the pool
                with threads.blas_calls():
                    self.fn(bufs, 0, 1)
            else:
                self.fn(bufs, 0, 1)
        if ctx.words[0]:
            ctx.reset()
            run.reraise()
        env[id(instr)] = tuple(results) if self._flat else build(instr.shape, iter(results))


# -- the loop ---------------------------------------------------------------------------------


class WhileEmitter(Emitter):
    """Emits one compiled while function (see the module docstring)."""

    def __init__(self, planner, name: str, leaves: list, what: str):
        super().__init__(planner, name, len(leaves), len(leaves))
        self.leaf_shapes = leaves
        self._counter = None  # the iteration counter of the cancel poll (an alloca)
        self._poll_id = planner.host_table.add(executor.Polling(what))
        self.swapped: list[int] = []
        self.resident: list[int] = []

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
                   (isinstance(st, LibraryStep) and
                    st.instr.shape.is_array()) or
                   (getattr(st, "native_call", None) is not None and  # a collective's
                    st.instr.shape.is_array())}
        out = {}
        for k, o in enumerate(operands):
            if id(o) in kernels and sum(x is o for x in operands) == 1 and \
                    nbytes(o.shape) >= SWAP_MIN_BYTES:
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
            poll = self.table_fn(executor.POLL, POLL_TYPE, "poll")
            rc = b.call(poll, [self.ctx, ir.Constant(I64, self._poll_id)], name="rc.poll")
            self.return_if(b.icmp_signed("!=", rc, ir.Constant(I32, 0)))

    def emit_while(self, cond, body) -> None:
        n = self.n
        inits = [self.external_leaf(s, k, f"init{k}") for k, s in enumerate(self.leaf_shapes)]
        results = [self.external_leaf(s, n + k, f"out{k}")
                   for k, s in enumerate(self.leaf_shapes)]
        swap = self._swappable(body)
        self.swapped = sorted(swap)
        state0 = []
        for k, s in enumerate(self.leaf_shapes):
            if k not in swap and nbytes(s) >= RESIDENT_MIN_BYTES:
                self.resident.append(k)
                state0.append(results[k])
                self.copy_unless_same(results[k], inits[k], nbytes(s))
            else:
                leaf = self.new_leaf(s, pinned=True)
                state0.append(leaf)
                self.copy(leaf.ptr, inits[k].ptr, nbytes(s))
        # The double-buffered leaves: the current state's and the next one's, two slots
        # whose roles swap every iteration (the pointers are phis of the loop header).
        state, nxt = list(state0), list(state0)
        for k in swap:
            nxt[k] = self.new_leaf(state0[k].shape, pinned=True)
        b = self.b
        header, loop, done = (self.fn.append_basic_block(f"{w}0")
                              for w in ("cond", "body", "done"))
        before = b.block
        b.branch(header)
        b.position_at_end(header)
        phis = []
        for k in sorted(swap):
            cur = b.phi(state0[k].ptr.type, name=f"state{k}")
            other = b.phi(state0[k].ptr.type, name=f"next{k}")
            cur.add_incoming(state0[k].ptr, before)
            other.add_incoming(nxt[k].ptr, before)
            state[k] = Leaf(state0[k].shape, cur, state0[k].slot)
            nxt[k] = Leaf(nxt[k].shape, other, nxt[k].slot)
            phis.append((cur, other))
        ref = build(cond.params[0].shape, iter(state))
        self._poll()
        pred = self.emit_plan(cond, [ref])
        go = b.load(pred.ptr, name="pred")
        self.drop(pred)
        b.cbranch(b.icmp_unsigned("!=", go, ir.Constant(I8, 0), name="go"), loop, done)

        b.position_at_end(loop)
        self._placement = {swap[k]: {0: nxt[k]} for k in swap}
        self._alias_state = True
        root = self.emit_plan(body, [ref])
        self._alias_state = False
        self._placement = {}
        self._move_results(nxt, leaves_of(root), swap)
        self.drop(root)
        for cur, other in phis:  # the next iteration reads what this one wrote
            cur.add_incoming(other, b.block)
            other.add_incoming(cur, b.block)
        b.branch(header)

        b.position_at_end(done)
        for k, leaf in enumerate(state):
            if leaf is not results[k]:
                self.copy(results[k].ptr, leaf.ptr, nbytes(leaf.shape))
        b.ret_void()
        self.pre.branch(self.fn.blocks[1])

    def _move_results(self, nxt, new, swap) -> None:
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
                tmp = self.slot(src.shape)
                self.copy(tmp.ptr, src.ptr, tmp.nbytes)
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
            self.copy(nxt[k].ptr, src_ptr, nbytes(nxt[k].shape))
        for tmp in staged.values():
            self.release_slot(tmp)


__all__ = ["CompiledWhileStep", "compile_while"]

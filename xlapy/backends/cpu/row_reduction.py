"""The kernel of a row fusion (backends/cpu/row_fusion.py): row reductions and the
elementwise work around them, every row read from memory once (XLA's reduction emitter
running a multi-output fusion).

Schedule. With the fusion's split (full dimensions S, rows S[:p], cols S[p:]), every member
has a *stage*: a row reduction's is 1 + its operand's, anything else's the largest of its
operands' (0: none). For each row (the first ``p`` dimensions, linearised) the kernel runs
loops 1..L over the row's columns; loop l computes at each column, with one element emitter
(``elemental.ElementalEmitter``: shared subexpressions computed once), the members of stage
l - 1 it needs:

- the full outputs (written at the element's position),
- the operands of the row reductions (accumulated with the reducer's reassociating update,
  so LLVM vectorises them as the reduction emitter's row reductions; sibling reductions
  share the loop),
- the operands of the column and scalar reductions (below),

each row reduction's result going to a stack slot. After loop l (and before loop 1) the unit
reductions of stage l go to slots; after the last loop the row outputs are written at the
row's position. Row values are generated from the slots where they are read (loop-invariant:
LLVM hoists them out of the column loops).

A full value computed by a loop and needed again by a later one is read back rather than
computed again when it is an f32/f64 output (from its output, in the cache) or costly to
generate (``cost``: transcendentals, divisions, long chains; at least CACHE_COST): it is
stored where an output of its type written by a later loop will be (softmax's
exponentials in the result's row: that loop reads them before writing), or else in a stack
row of ``cols`` elements (CACHE_BYTES of them at most).

Pipelining: loop 1 of the next row runs inside the cheapest later loop of the current one
(when there are two loops or more, that loop computes little - PIPELINE_COST - and no stack
row written by loop 1 or unit reduction of stage 0 would be overwritten), so the next row
comes from memory while this one is computed; the rest of a row is read from the cache (the
pass bounds its length).

Column and scalar reductions: a work item is then a block of rows (at most MAX_BLOCKS, fixed
at compile time, so the result does not depend on how the runtime splits the work). Each
block keeps its partial results in scratch - a row of column accumulators, one accumulator
per scalar reduction, fed row by row - from the reducer's identity; the ``then`` kernel
combines them per output element, the init value first, the blocks in order. Float results
thus differ from the interpreter only by reassociation, as the reduction emitter's do.

Buffers (``kernel_abi``): the fusion's inputs (its parameters, then its large constants),
its outputs (the root tuple's elements), the scratch of the partial results. Work items:
rows, or blocks of rows with column or scalar reductions.
"""

from __future__ import annotations

import numpy as np

from xlapy.backends.cpu import elemental as el
from xlapy.backends.cpu.indexing import Index
from xlapy.backends.cpu.kernel_abi import KernelSpec, for_range
from xlapy.backends.cpu.reduction import Reducer, _c, _Fn, _load, _split, _store
from xlapy.backends.cpu.row_fusion import LATE, Split
from xlapy.shape import dtypes

#: Bytes of the stack rows of costly values kept between loops, at most.
CACHE_BYTES = 1 << 16
#: A value whose generation costs at least this much (``cost``) is kept, not recomputed.
CACHE_COST = 8
#: Whether loop 1 of the next row runs inside a later loop (module docstring), and the
#: most that loop may compute per column (``cost``): in a costly loop the next row's reads
#: are too far apart for the hardware to keep enough of them in flight.
PIPELINE = True
PIPELINE_COST = 12
#: Blocks of rows when there are column or scalar reductions, at most; and the bytes of
#: their partial results.
MAX_BLOCKS = 32
PARTIAL_BYTES = 1 << 22
_COSTLY = frozenset({
    "exponential", "exponential-minus-one", "log", "log-plus-one", "tanh", "logistic",
    "power", "sine", "cosine", "tan", "atan2", "erf", "cbrt", "erf-inv"})
_DIVIDING = frozenset({"divide", "remainder", "sqrt", "rsqrt"})
_STORABLE = frozenset({"F32", "F64", "BF16", "F16"})  # kept in their own encoding


def _dims(instr) -> tuple:
    return tuple(int(d) for d in instr.shape.dimensions)


def _prod(xs) -> int:
    out = 1
    for x in xs:
        out *= int(x)
    return out


def split_of(comp) -> tuple:
    """(S, p) of a fused computation: the operand with the most elements among its reduces
    over trailing dimensions p.. (p >= 1), and the smallest such p."""
    best = None
    for r in comp.instructions:
        if r.opcode != "reduce":
            continue
        od = _dims(r.operands[0])
        dims = sorted(r.attrs["dimensions"])
        if not dims or dims[0] < 1 or dims != list(range(dims[0], len(od))):
            continue
        key = (_prod(od), len(od))
        if best is None or key > best[0] or (key == best[0] and dims[0] < best[2]):
            best = (key, od, dims[0])
    return best[1], best[2]


def cost(instr) -> int:
    """The cost of generating one element of ``instr`` alone (its operands not counted)."""
    if instr.opcode in _COSTLY:
        return 20
    if instr.opcode in _DIVIDING:
        return 5
    if instr.opcode in ("parameter", "constant", "broadcast", "reshape", "bitcast", "iota"):
        return 0
    return 1


class Schedule:
    """Which loop computes what (module docstring)."""

    def __init__(self, root):
        comp = root.parent
        self.comp = comp
        self.outs = list(root.operands) if root.opcode == "tuple" else [root]
        self.full, self.p = split_of(comp)
        split = Split(self.full, self.p)
        self.rows = _prod(self.full[:self.p])
        self.cols = _prod(self.full[self.p:])
        self.order = comp.post_order()
        self._by_id = {id(i): i for i in self.order}
        self.kind = {id(i): split.kind(i) if i.opcode == "reduce" else None
                     for i in self.order}
        stage: dict[int, int] = {}
        for i in self.order:
            k = self.kind[id(i)]
            base = max((stage[id(o)] for o in i.operands), default=0)
            stage[id(i)] = base + 1 if k == "row_reduce" else base
        self.stage = stage
        # full values (computed in loops) and row values (from the slots)
        self.full_values = {id(i) for i in self.order
                            if i.opcode not in ("parameter", "constant", "reduce") and
                            _dims(i) == self.full}
        self.row_reduces = [i for i in self.order if self.kind[id(i)] == "row_reduce"]
        self.unit_reduces = [i for i in self.order if self.kind[id(i)] == "unit_reduce"]
        self.late = [i for i in self.order if self.kind[id(i)] in LATE]
        self.column = [r for r in self.late if self.kind[id(r)] == "column_reduce"]
        self.scalar = [r for r in self.late if self.kind[id(r)] == "scalar_reduce"]
        out_ids = {id(o): k for k, o in enumerate(self.outs)}
        self.out_index = out_ids
        # loop l (1-based) computes the full values of stage l - 1
        loops: dict[int, list] = {}
        for k, o in enumerate(self.outs):
            if id(o) in self.full_values:
                loops.setdefault(stage[id(o)] + 1, []).append(o)
        for r in self.row_reduces + self.late:
            loops.setdefault(stage[id(r.operands[0])] + 1, [])
        self.n_loops = max(loops, default=0)
        self.full_outs = {ell: loops.get(ell, []) for ell in range(1, self.n_loops + 1)}
        self._caching()
        # loop 1 of the next row runs inside the cheapest later loop of this one, unless
        # that one is costly, or a stack row written by loop 1 or a unit reduction read by
        # it would be overwritten
        costs = {ell: self.loop_cost(ell) for ell in range(2, self.n_loops + 1)}
        self.pipe_loop = min(costs, key=lambda ell: (costs[ell], ell), default=None)
        self.pipelined = PIPELINE and self.pipe_loop is not None and \
            costs[self.pipe_loop] <= PIPELINE_COST and \
            not any(self.first[k] == 1 for k, how in self.kept.items() if how == "stack") and \
            not any(self.stage[id(u)] == 0 for u in self.unit_reduces)

    def loop_of(self, instr) -> int:
        return self.stage[id(instr)] + 1

    def roots(self, ell: int) -> list:
        """The full values loop ``ell`` needs: its outputs and its reductions' operands."""
        out = list(self.full_outs[ell])
        for r in self.row_reduces + self.late:
            if self.loop_of(r.operands[0]) == ell:
                out.append(r.operands[0])
        return out

    def loop_cost(self, ell: int) -> int:
        """What loop ``ell`` computes per column (``cost`` of the full values it
        generates; row values are loop-invariant, kept values read back)."""
        total, seen = 0, set()
        work = self.roots(ell) + [self._by_id[k] for k in self.kept
                                  if self.kept[k] in ("stack", "host") and self.first[k] == ell]
        while work:
            v = work.pop()
            if id(v) in seen or id(v) not in self.full_values:
                continue
            seen.add(id(v))
            if id(v) in self.kept and self.first[id(v)] < ell:
                continue
            total += cost(v)
            work.extend(v.operands)
        return total

    def _caching(self) -> None:
        """self.kept: id(full value) -> "out" (read back from its output), "host" (in the
        buffer of output self.host[id]) or "stack" (a stack row), for the values needed by a
        later loop than the one computing them (loops self.first[id]..self.last[id])."""
        needs: dict[int, set] = {}
        for ell in range(1, self.n_loops + 1):
            for v in self.roots(ell):
                needs.setdefault(id(v), set()).add(ell)
        total: dict[int, int] = {}
        for i in self.order:
            if id(i) in self.full_values:
                total[id(i)] = cost(i) + sum(total.get(id(o), 0) for o in i.operands)
        self.kept: dict[int, str] = {}
        self.first: dict[int, int] = {}
        self.last: dict[int, int] = {}
        self.host: dict[int, int] = {}  # id(value) -> the output whose buffer holds it
        budget = CACHE_BYTES
        for v in reversed(self.order):
            if id(v) not in self.full_values:
                continue
            mine = needs.get(id(v), set())
            for u in v.users:
                if id(u) not in self.full_values:
                    continue
                if id(u) in self.kept:
                    mine.add(self.first[id(u)])
                else:
                    mine |= needs.get(id(u), set())
            needs[id(v)] = mine
            if len(mine) < 2:
                continue
            self.first[id(v)], self.last[id(v)] = min(mine), max(mine)
            et = v.shape.element_type
            if et.name not in _STORABLE:
                continue
            if id(v) in self.out_index:
                self.kept[id(v)] = "out"
            elif total[id(v)] >= CACHE_COST:
                host = self._host_for(v)
                size = self.cols * np.dtype(dtypes.to_dtype(et)).itemsize
                if host is not None:
                    self.kept[id(v)] = "host"
                    self.host[id(v)] = host
                elif size <= budget:
                    budget -= size
                    self.kept[id(v)] = "stack"

    def _host_for(self, v) -> int | None:
        """A full output of v's type written by a loop after the last one reading v and
        holding nothing else: its buffer keeps v until then."""
        for k, o in enumerate(self.outs):
            if id(o) in self.full_values and o.shape.element_type == v.shape.element_type \
                    and self.loop_of(o) >= self.last[id(v)] and k not in self.host.values() \
                    and self.loop_of(o) > self.first[id(v)] and o is not v:
                return k
        return None

    def blocks(self) -> tuple[int, int]:
        """(rows per work item, work items)."""
        if not self.late:
            return 1, self.rows
        per_block = sum(self.cols * np.dtype(dtypes.to_dtype(r.shape.element_type)).itemsize
                        for r in self.column) + 8 * len(self.scalar)
        n = min(self.rows, MAX_BLOCKS, max(1, PARTIAL_BYTES // max(1, per_block)))
        size = -(-self.rows // n)
        return size, -(-self.rows // size)


def emit(module, name: str, root, inputs: list) -> KernelSpec:
    """The kernel computing the fused computation whose root is ``root``."""
    s = Schedule(root)
    size, n_items = s.blocks()
    rows, cols, p = s.rows, s.cols, s.p
    full = s.full
    scratch_types = [r.shape.element_type for r in s.column + s.scalar]
    fn = _Fn(module, name, root, inputs, scratch_types)
    b = fn.b

    def ty(r):
        return el.TYPES[r.shape.element_type][1]

    accumulated = s.row_reduces + s.scalar  # per-row accumulators
    slots = {id(r): fn.alloca(ty(r), 1, f"{r.name}.acc") for r in accumulated + s.unit_reduces}
    # the next row's accumulators of loop 1, computed during a later loop (pipelined)
    first_loop = [r for r in accumulated if s.loop_of(r.operands[0]) == 1]
    nxt = {id(r): fn.alloca(ty(r), 1, f"{r.name}.next") for r in first_loop} \
        if s.pipelined else {}
    block_acc = {id(r): fn.alloca(ty(r), 1, f"{r.name}.block") for r in s.scalar}
    stack = {id(i): fn.alloca(el.memory_type(i.shape.element_type), cols, f"{i.name}.row")
             for i in s.order if s.kept.get(id(i)) == "stack"}
    stacked = [i for i in s.order if id(i) in stack]
    hosted = [i for i in s.order if id(i) in s.host]
    reducers = {id(r): Reducer(r.attrs["to_apply"], [r.shape.element_type])
                for r in s.row_reduces + s.unit_reduces + s.late}
    col_part = {id(r): fn.scratch[k] for k, r in enumerate(s.column)}
    scalar_part = {id(r): fn.scratch[len(s.column) + k] for k, r in enumerate(s.scalar)}
    row_values = {id(i) for i in s.order
                  if i.opcode not in ("parameter", "constant", "reduce") and
                  id(i) not in s.full_values}
    state = {}  # the current row's position being generated: "pos" (linear), "col"

    def loader(instr, index):
        slot = slots.get(id(instr))
        if slot is not None and instr.opcode == "reduce":
            return b.load(slot, name=f"{instr.name}.row")
        how = s.kept.get(id(instr))
        if how == "out":
            k = s.out_index[id(instr)]
            return _load(b, fn.outs[k], state["pos"], instr.shape.element_type, instr.name)
        if how == "stack":
            return _load(b, stack[id(instr)], state["col"], instr.shape.element_type,
                         instr.name)
        if how == "host":
            return _load(b, fn.outs[s.host[id(instr)]], state["pos"], instr.shape.element_type,
                         instr.name)
        return fn._load(instr, index)

    def emitter(ell: int):
        """An element emitter for loop ``ell`` (0: the row phase): full values kept by an
        earlier loop are read back."""
        generated = set(row_values)
        for k in s.full_values:
            if s.kept.get(k) is None or s.first[k] >= ell:
                generated.add(k)
        return el.ElementalEmitter(b, loader, generated)

    class Row:
        def __init__(self, row):
            self.row = row
            self.multi = _split(b, row, list(full[:p]), "r")
            self.base = b.mul(row, _c(cols), name="row.base")

        def index(self, instr):
            d = _dims(instr)
            return Index(b, d, linear=self.row, multi=self.multi + [_c(0)] * (len(d) - p))

    def by_loop(group, ell):
        return [r for r in group if s.loop_of(r.operands[0]) == ell]

    def start(ell, targets):
        for r in by_loop(s.row_reduces, ell):
            b.store(emitter(0).value_at(r.operands[1], Index.scalar(b)), targets[id(r)])
        for r in by_loop(s.scalar, ell):
            b.store(reducers[id(r)].identity(), targets[id(r)])

    def work(ell, row, col, col_multi, item, targets, current=True):
        """Loop ``ell``'s work at column ``col`` of ``row``, accumulating into
        ``targets``; ``current``: the row whose kept values the loader reads."""
        pos = b.add(row.base, col, name="pos")
        if current:
            state["pos"], state["col"] = pos, col
        idx = Index(b, full, linear=pos, multi=row.multi + col_multi)
        em = emitter(ell)
        for v in hosted:  # read before this loop's outputs overwrite their hosts
            if s.first[id(v)] < ell <= s.last[id(v)]:
                em.value_at(v, idx)
        for v in stacked:
            if s.first[id(v)] == ell:
                _store(b, stack[id(v)], col, em.value_at(v, idx), v.shape.element_type, v.name)
        for v in hosted:
            if s.first[id(v)] == ell:
                _store(b, fn.outs[s.host[id(v)]], pos, em.value_at(v, idx),
                       v.shape.element_type, v.name)
        for o in s.full_outs[ell]:
            k = s.out_index[id(o)]
            _store(b, fn.outs[k], pos, em.value_at(o, idx), o.shape.element_type, f"out{k}")
        for r in by_loop(s.row_reduces, ell) + by_loop(s.scalar, ell):
            x = em.value_at(r.operands[0], idx)
            slot = targets[id(r)]
            b.store(reducers[id(r)].fast(b, b.load(slot), x), slot)
        for r in by_loop(s.column, ell):
            x = em.value_at(r.operands[0], idx)
            at = b.add(b.mul(item, _c(cols)), col, name="part")
            et = r.shape.element_type
            old = _load(b, col_part[id(r)], at, et, f"{r.name}.part")
            _store(b, col_part[id(r)], at, reducers[id(r)].fast(b, old, x), et,
                   f"{r.name}.part")

    def loop(ell, row, item, also=None):
        """Loop ``ell`` over the columns of ``row``; ``also``: the next row, whose loop 1
        runs in the same loop."""
        start(ell, slots)
        if also is not None:
            start(1, nxt)
        with for_range(b, 0, cols, f"l{ell}.col") as col:
            col_multi = _split(b, col, list(full[p:]), "c")
            work(ell, row, col, col_multi, item, slots)
            if also is not None:
                work(1, also, col, col_multi, item, nxt, current=False)

    def after(ell, row):
        """What follows loop ``ell`` of ``row``: its scalar partials join the block's,
        the unit reductions now known."""
        for r in by_loop(s.scalar, ell):
            acc = block_acc[id(r)]
            b.store(reducers[id(r)].fast(b, b.load(acc), b.load(slots[id(r)])), acc)
        for u in s.unit_reduces:
            if s.stage[id(u)] == ell:
                em = emitter(0)
                x = em.value_at(u.operands[0], row.index(u.operands[0]))
                init = em.value_at(u.operands[1], Index.scalar(b))
                b.store(reducers[id(u)].exact(b, [init], [x])[0], slots[id(u)])

    def finish(row):
        em = emitter(0)
        for k, o in enumerate(s.outs):
            if id(o) in s.full_values or s.kind[id(o)] in LATE:
                continue
            _store(b, fn.outs[k], row.row, em.value_at(o, row.index(o)), o.shape.element_type,
                   f"out{k}")

    def rows_of(r0, r1, item):
        """Every row of [r0, r1): its loops in order (module docstring)."""
        if not s.pipelined:
            with for_range(b, r0, r1, "row") as i:
                row = Row(i)
                for ell in range(s.n_loops + 1):
                    if ell:
                        loop(ell, row, item)
                    after(ell, row)
                finish(row)
            return
        with b.if_then(b.icmp_signed("<", r0, r1)):
            loop(1, Row(r0), item)  # the first row's loop 1
        with for_range(b, r0, r1, "row") as i:
            row = Row(i)
            after(1, row)
            for ell in range(2, s.n_loops + 1):
                if ell == s.pipe_loop:
                    nxt_i = b.add(i, _c(1), name="row.next")
                    with b.if_else(b.icmp_signed("<", nxt_i, r1)) as (then, otherwise):
                        with then:
                            loop(ell, row, item, also=Row(nxt_i))
                        with otherwise:
                            loop(ell, row, item)
                else:
                    loop(ell, row, item)
                after(ell, row)
            finish(row)
            for r in first_loop:  # the next row's loop 1 becomes the current one
                b.store(b.load(nxt[id(r)]), slots[id(r)])

    if s.late:
        with for_range(b, fn.lo, fn.hi, "item") as item:
            _start_block(b, s, item, cols, col_part, block_acc, reducers)
            r0 = b.mul(item, _c(size), name="first") if size > 1 else item
            r1 = b.add(r0, _c(size), name="last")
            r1 = b.select(b.icmp_signed(">", r1, _c(rows)), _c(rows), r1, name="last.rows")
            rows_of(r0, r1, item)
            for r in s.scalar:
                _store(b, scalar_part[id(r)], item, b.load(block_acc[id(r)]),
                       r.shape.element_type, f"{r.name}.part")
    else:
        rows_of(fn.lo, fn.hi, None)
    b.ret_void()
    then = _emit_combine(module, f"{name}_combine", root, inputs, s, n_items, scratch_types,
                         reducers) if s.late else None
    scratch = [(np.dtype(dtypes.to_dtype(r.shape.element_type)),
                n_items * (cols if r in s.column else 1)) for r in s.column + s.scalar]
    return KernelSpec(name=name, n_inputs=len(inputs), outputs=[o.shape for o in s.outs],
                      domain=n_items, cost=max(1, size * cols * max(1, s.n_loops)),
                      scratch=scratch, then=then)


def _start_block(b, s, item, cols, col_part, block_acc, reducers) -> None:
    """A block's partial results start from their reducer's identity."""
    for r in s.column:
        et = r.shape.element_type
        with for_range(b, 0, cols, f"{r.name}.init") as col:
            at = b.add(b.mul(item, _c(cols)), col)
            _store(b, col_part[id(r)], at, reducers[id(r)].identity(), et, f"{r.name}.part")
    for r in s.scalar:
        b.store(reducers[id(r)].identity(), block_acc[id(r)])


def _emit_combine(module, name, root, inputs, s, n_items, scratch_types, reducers):
    """The ``then`` kernel: each column or scalar output is its init value combined with
    the blocks' partial results in order; work item c: column c of every column reduction
    (and, for c = 0, the scalar reductions)."""
    fn = _Fn(module, name, root, inputs, scratch_types)
    b = fn.b
    cols = s.cols
    domain = cols if s.column else 1
    acc_slots = {id(r): fn.alloca(el.TYPES[r.shape.element_type][1], 1, f"{r.name}.sum")
                 for r in s.late}

    def combine(r, part, col, stride):
        et = r.shape.element_type
        em = el.ElementalEmitter(b, fn._load, set())
        acc = acc_slots[id(r)]
        b.store(em.value_at(r.operands[1], Index.scalar(b)), acc)
        with for_range(b, 0, n_items, f"{r.name}.blk") as blk:
            at = b.add(b.mul(blk, _c(stride)), col) if stride != 1 else blk
            x = _load(b, part, at, et, f"{r.name}.part")
            b.store(reducers[id(r)].exact(b, [b.load(acc)], [x])[0], acc)
        return b.load(acc)

    with for_range(b, fn.lo, fn.hi, "c") as col:
        for k, r in enumerate(s.column):
            v = combine(r, fn.scratch[k], col, cols)
            _store(b, fn.outs[s.out_index[id(r)]], col, v, r.shape.element_type, r.name)
        if s.scalar:
            with b.if_then(b.icmp_signed("==", col, _c(0))):
                for k, r in enumerate(s.scalar):
                    v = combine(r, fn.scratch[len(s.column) + k], _c(0), 1)
                    _store(b, fn.outs[s.out_index[id(r)]], _c(0), v, r.shape.element_type,
                           r.name)
    b.ret_void()
    return KernelSpec(name=name, n_inputs=len(inputs), outputs=[o.shape for o in s.outs],
                      domain=domain, cost=n_items, parallel=domain * n_items >= (1 << 16))


__all__ = ["CACHE_BYTES", "CACHE_COST", "MAX_BLOCKS", "PIPELINE", "PIPELINE_COST", "Schedule", "cost",
           "emit", "split_of"]

"""Row fusion, the CPU backend's own pass (as XLA's CPU fusion passes live in its backend: it
fuses what this backend's emitters generate): row reductions and the elementwise work around
them in one multi-output fusion (XLA's multi-output fusion of reductions with their
producers, consumers and siblings), run by ``row_reduction`` as one kernel per row, so the
rows are read from memory once: softmax's max, sum of exponentials and division; layer
norm's mean, variance and normalisation; and their gradients as jax writes them.

A group has a *split*: dimensions S = [rows..., cols...] cut after the first ``p``, taken from
the row reduction it starts from. Its members are:
- *full* members, of dimensions S: elementwise ops, converts, iotas, broadcasts (of a row
  member with its row dimensions in place, or of anything else, read as an input);
- *row* members, of dimensions S[:p] (or S[:p] followed by 1s): elementwise ops, converts,
  reshapes between those forms, broadcasts of scalars or of row values in place;
- reductions with a recognised associative reducer (``reduction.recognised_op``) of f32/f64:
  *row* reductions of a full operand over exactly the column dimensions, *unit* reductions
  of a row value over dimensions of size 1, *column* reductions of a full operand over
  exactly the row dimensions and reductions of a full operand to a scalar (these two are
  only ever outputs: their value is known once every row is done);
- scalar constants (copied, as the fusion pass copies them).
Everything else is an input.

Growing: from a row reduction, breadth first, through the operands and the users of members
(not the users of copies of inputs: a shared constant would lead anywhere) and the users of
the group's full-shaped inputs (siblings reading the same rows), an instruction that may be a
member joins (at most MAX_GROUP) unless it would read, outside the group, a value that may
depend on the group (a short search, SEARCH; a user met again once that value joined is
looked at again) or it comes far after the group (WINDOW: a backward pass reading the
forward's values would have its outputs computed long before their use). Then, until
nothing changes,
members are dropped with everything depending on them inside the group when they would
read a value that is not ready when they are computed: a broadcast reading a member at
another row, a user of a column or scalar reduction, a member reached from outside through
a path leaving the group (a fusion must not depend on itself). Members depending on no
reduction and used only outside are dropped last (a loop fusion does them as well). A group
whose only output is its only reduction is left to input fusion.

Groups are made one after the other in a computation; between two, post-order positions
are kept topological without walking the graph again (the fusion takes its last member's
place, what depended on it there moves after it), so the pass costs little more than one
walk on programs with hundreds of groups.

Outputs: members used outside the group or the computation's root. A broadcast of a row
member used outside is copied outside instead (its row value becomes the output: rows, not
a full array, are written); broadcasts, reshapes and constants of inputs stay outside too.
One output: the fusion has its shape; several: a tuple, read through get-tuple-element.

The fusion is a ``fusion`` with kind=kCustom (opaque to the loop/input fusion pass that runs
next) whose name starts with ``ROW_FUSION``; a row must fit the L2 cache (MAX_COLS).

Exact up to the reassociation the reduction emitter already allows (recognised float
reducers): the fused computation evaluates the same instructions.
"""

from __future__ import annotations

from collections import deque

from xlapy.backends.cpu.reduction import _generated, recognised_op
from xlapy.hlo.attrs.enums import FusionKind
from xlapy.hlo.ir import Computation, Instruction, Module
from xlapy.opdefs.registry import get_opdef
from xlapy.passes.fusion import InstructionFusion
from xlapy.passes.pass_manager import HloPass
from xlapy.shape.shape import Shape

#: Column elements per row at most (a row of f32 stays in a 256 KiB L2 cache).
MAX_COLS = 1 << 16
#: Group size bound (compile time: every loop of the kernel holds what it computes).
MAX_GROUP = 128
#: Instructions a search for a dependence on the group looks at, at most (beyond: assumed).
SEARCH = 64
#: How far past the group's last member (in post order) a new member may be: further, it
#: would be computed long before it is used (a backward pass reading the forward's
#: values), its output held meanwhile.
WINDOW = 4 * MAX_GROUP
#: Fusion names carry this prefix (what the cpu backend's planner looks for).
ROW_FUSION = "row_fusion"
_FLOAT = frozenset({"F32", "F64"})
#: Member kinds of reductions, and of those known only once every row is done.
REDUCTIONS = frozenset({"row_reduce", "unit_reduce", "column_reduce", "scalar_reduce"})
LATE = frozenset({"column_reduce", "scalar_reduce"})


def _elementwise(instr) -> bool:
    return "elementwise" in get_opdef(instr.opcode).traits and not instr.called_computations()


def _plain(instr) -> bool:
    return (not instr.has_side_effect and not instr.control_predecessors
            and not instr.control_successors and instr.shape.is_array()
            and not instr.shape.is_dynamic())


def _dims(instr) -> tuple:
    return tuple(int(d) for d in instr.shape.dimensions)


def seed_split(instr) -> tuple | None:
    """(S, p) when ``instr`` is a row reduction a group can start from: a recognised f32/f64
    reduce of an operand S (no dimension of size 0, at most MAX_COLS columns) over its
    dimensions p.. (p >= 1)."""
    if instr.opcode != "reduce" or len(instr.operands) != 2 or not _plain(instr):
        return None
    full = _dims(instr.operands[0])
    dims = sorted(instr.attrs["dimensions"])
    if not dims or dims != list(range(dims[0], len(full))) or dims[0] < 1 or 0 in full:
        return None
    cols = 1
    for d in full[dims[0]:]:
        cols *= d
    if cols > MAX_COLS or instr.shape.element_type.name not in _FLOAT or \
            instr.operands[1].shape.dimensions:
        return None
    if recognised_op(instr.attrs["to_apply"]) is None:
        return None
    return full, dims[0]


class Split:
    """The split of a group: full dimensions S cut after ``p``; the kind of member each
    instruction may be (ignoring its users)."""

    def __init__(self, full: tuple, p: int):
        self.full, self.p = tuple(full), p
        self.row = self.full[:p]
        self._kinds: dict[int, str | None] = {}

    def is_row(self, dims: tuple) -> bool:
        return len(dims) >= self.p and dims[:self.p] == self.row and \
            all(d == 1 for d in dims[self.p:])

    def kind(self, instr) -> str | None:
        """"full", "row", "const", a reduction kind (REDUCTIONS) or None (an input)."""
        k = self._kinds.get(id(instr), False)
        if k is False:
            k = self._kinds[id(instr)] = self._kind(instr)
        return k

    def _kind(self, instr) -> str | None:
        if not _plain(instr) or instr.opcode == "parameter":
            return None
        op = instr.opcode
        dims = _dims(instr)
        if op == "constant":
            return "const" if not dims and _generated(instr) else None
        if op == "reduce":
            return self._reduce_kind(instr)
        if not _generated(instr) or instr.shape.element_type.name in ("C64", "C128"):
            return None
        src = instr.operands[0] if instr.operands else None
        if dims == self.full:
            if _elementwise(instr) or op in ("convert", "iota", "broadcast"):
                return "full"
            if op in ("reshape", "bitcast") and (  # a no-op, or rows of one column
                    _dims(src) == dims or (self.is_row(dims) and self.is_row(_dims(src)))):
                return "full"
            return None
        if self.is_row(dims):
            if _elementwise(instr) or op == "convert":
                return "row"
            if op in ("reshape", "bitcast") and self.is_row(_dims(src)):
                return "row"
            if op == "broadcast" and (not src.shape.dimensions or
                                      (self.is_row(_dims(src)) and self.same_row(instr))):
                return "row"
        return None

    def _reduce_kind(self, instr) -> str | None:
        if len(instr.operands) != 2 or instr.operands[1].shape.dimensions:
            return None
        if instr.shape.element_type.name not in _FLOAT or \
                recognised_op(instr.attrs["to_apply"]) is None:
            return None
        od = _dims(instr.operands[0])
        dims = sorted(instr.attrs["dimensions"])
        n = len(od)
        if od == self.full:
            if dims == list(range(self.p, n)):
                return "row_reduce"
            if dims == list(range(self.p)):
                return "column_reduce"
            if dims == list(range(n)):
                return "scalar_reduce"
            return None
        if self.is_row(od) and self.is_row(_dims(instr)) and \
                all(d >= self.p and od[d] == 1 for d in dims):
            return "unit_reduce"
        return None

    def copies_inputs(self, instr) -> bool:
        """A constant, an iota, or a broadcast or reshape of an input or a constant: as a
        member, copied for the users outside rather than given out."""
        return instr.opcode in ("constant", "iota") or (
            instr.opcode in ("broadcast", "reshape", "bitcast") and
            self.kind(instr.operands[0]) in (None, "const"))

    def same_row(self, bcast) -> bool:
        """Whether broadcast ``bcast`` reads a row value at the same row (its non-unit
        dimensions stay in place among the row dimensions), or a full value at the same
        element."""
        src = _dims(bcast.operands[0])
        dims = tuple(bcast.attrs["dimensions"])
        if src == self.full:
            return dims == tuple(range(len(src)))
        return all(src[j] == 1 or (d == j and j < self.p) for j, d in enumerate(dims))


def _outside_copy(m, group: dict) -> bool:
    """A member recomputed outside for the users outside (its operands are inputs or
    constants)."""
    return m.opcode in ("constant", "iota", "broadcast", "reshape", "bitcast") and \
        not any(id(o) in group and o.opcode != "constant" for o in m.operands)


def _row_broadcast(m, group: dict, split: Split) -> bool:
    """A full broadcast of a row member: copied outside for the users outside."""
    return m.opcode == "broadcast" and _dims(m) == split.full and \
        id(m.operands[0]) in group and split.kind(m.operands[0]) in ("row", "row_reduce",
                                                                     "unit_reduce")


class RowFusion(HloPass):
    """Groups row reductions with the elementwise work around them (module docstring)."""

    name = "row-fusion"

    def run(self, module: Module) -> bool:
        changed = False
        for comp in InstructionFusion._computations(module):
            if getattr(comp, "is_fusion_computation", False):
                continue
            changed |= self._fuse(module, comp)
        if changed:
            module.remove_unused_computations()
        return changed

    def _fuse(self, module, comp) -> bool:
        changed = False
        order = comp.post_order()
        position = {id(i): k for k, i in enumerate(order)}
        seeds = [i for i in order if i.opcode == "reduce" and seed_split(i) is not None]
        tried: set[int] = set()  # seeds of a group that was not worth fusing
        for seed in seeds:
            if seed.parent is not comp or id(seed) in tried:
                continue  # fused already, or would grow the same group again
            split = Split(*seed_split(seed))
            grown = _grow(seed, split, comp, position)
            settled = _settle(dict(grown), split, position, comp)
            if settled is None:
                tried.update(k for k, m in grown.items() if seed_split(m) == seed_split(seed))
                continue
            group, downstream = settled
            last = max(position[k] for k in group)
            made = _materialize(module, comp, group, split, position)
            changed = True
            # positions in a topological order again, without walking the graph: the fusion
            # where the group's last member was, then what it made, then what depends on it
            # before that place (found by _settle); usually nothing does, and what it made
            # fits between two positions
            if not downstream and isinstance(last, int):
                for k, i in enumerate(made):
                    position[id(i)] = last + k / len(made) if k else last
                continue
            new = {id(i) for i in made}
            order = sorted((i for i in comp.instructions if id(i) not in new),
                           key=lambda i: position[id(i)])
            head = [i for i in order if position[id(i)] <= last and id(i) not in downstream]
            tail = [i for i in order if id(i) in downstream]
            rest = [i for i in order if position[id(i)] > last and id(i) not in downstream]
            order = head + made + tail + rest
            position = {id(i): k for k, i in enumerate(order)}
        return changed


def _grow(seed, split: Split, comp, position: dict) -> dict:
    group: dict[int, Instruction] = {id(seed): seed}
    work = deque([seed])
    kind = split.kind
    lowest = [position[id(seed)]]
    highest = [position[id(seed)]]

    def independent(o) -> bool:
        """Whether ``o`` (not a member) cannot depend on the group (then reading it makes
        no cycle): it has no operands, comes before every member, or a short search of what
        it depends on finds no member. A long search says no."""
        if not o.operands or position[id(o)] < lowest[0]:
            return True
        seen, stack = set(), [o]
        while stack:
            x = stack.pop()
            if id(x) in group and not split.copies_inputs(x):
                return False
            if id(x) in seen or position[id(x)] < lowest[0]:
                continue
            seen.add(id(x))
            if len(seen) > SEARCH:
                return False
            stack.extend(x.operands)
        return True

    while work and len(group) < MAX_GROUP:
        m = work.popleft()
        km = kind(m)
        found = []
        for o in dict.fromkeys(m.operands):
            ko = kind(o)
            if ko is None:
                if _dims(o) == split.full:  # siblings: other readers of the same rows
                    found.extend(u for u in o.users if kind(u) is not None)
                continue
            if ko in LATE:
                continue  # known only after every row: never an operand inside
            if m.opcode == "broadcast" and not split.same_row(m):
                continue  # read as an input, at another row
            found.append(o)
        # users: not of what only copies inputs (a shared constant or broadcast of a
        # parameter leads anywhere), nor of what is known only after every row
        if km not in LATE and not split.copies_inputs(m):
            found.extend(u for u in m.users if kind(u) is not None)
        for c in found:
            if id(c) in group or c.parent is not comp or len(group) >= MAX_GROUP:
                continue
            if position[id(c)] > highest[0] + WINDOW:
                continue  # far later (a backward pass): would hold its output meanwhile
            if not all(id(o) in group or independent(o) for o in c.operands):
                continue  # it would read a value computed from the group outside it (if
                #           that value joins later, c is looked at again as its user)
            group[id(c)] = c
            lowest[0] = min(lowest[0], position[id(c)])
            highest[0] = max(highest[0], position[id(c)])
            work.append(c)
    return group


def _settle(group: dict, split: Split, position: dict, comp) -> tuple | None:
    """Drop members until the group is sound (module docstring): (the group, the ids of the
    instructions outside depending on it up to its last member), or None when what is left
    is not worth a fusion."""
    kind = split.kind
    while True:
        bad = []
        for m in group.values():
            if m.opcode == "broadcast" and id(m.operands[0]) in group and not split.same_row(m):
                bad.append(m)
            if kind(m) in LATE:
                bad.extend(u for u in m.users if id(u) in group)
        # a path from the group through the outside back into it: forward from the users
        # outside, within the post-order positions up to the group's last member
        limit = max(position[k] for k in group)
        seen = _downstream(group, position, limit)
        bad.extend(m for k, m in group.items() if k in seen)
        if not bad:
            break
        stack = bad
        while stack:  # the bad members and what depends on them inside
            x = stack.pop()
            if group.pop(id(x), None) is not None:
                stack.extend(u for u in x.users if id(u) in group)
        if not group:
            return None
    # members depending on no reduction and used only outside: left to loop fusion
    depends: dict[int, bool] = {}
    for m in sorted(group.values(), key=lambda i: position[id(i)]):
        depends[id(m)] = kind(m) in REDUCTIONS or any(depends.get(id(o), False)
                                                      for o in m.operands)
    # (and copies of inputs or row broadcasts used only outside: they are copied there)
    pruned = False
    for m in sorted(group.values(), key=lambda i: -position[id(i)]):
        if m is comp.root or any(id(u) in group for u in m.users):
            continue
        if not depends[id(m)] or _outside_copy(m, group) or _row_broadcast(m, group, split):
            del group[id(m)]
            pruned = True
    kinds = [kind(m) for m in group.values()]
    if "row_reduce" not in kinds:
        return None
    outs = _outputs(group, split, comp)
    if not outs:
        return None
    if sum(k in REDUCTIONS for k in kinds) < 2 and all(kind(o) in REDUCTIONS for o in outs):
        return None  # one reduction and its producers: input fusion does that
    if pruned:  # what depends on the group changed with it
        limit = max(position[k] for k in group)
        seen = _downstream(group, position, limit)
    return group, seen


def _downstream(group: dict, position: dict, limit: int) -> set:
    """The instructions reachable from the users outside ``group`` (but those of copies of
    inputs) up to post-order position ``limit``."""
    stack = [u for m in group.values() if not _outside_copy(m, group)
             for u in m.users if id(u) not in group]
    seen: set[int] = set()
    while stack:
        x = stack.pop()
        if id(x) in seen or position.get(id(x), limit + 1) > limit:
            continue
        seen.add(id(x))
        stack.extend(x.users)
    return seen


def _outputs(group: dict, split: Split, comp) -> list:
    """The members the fusion gives out, in the group's order (row members read by the
    copies of row broadcasts included)."""
    out: dict[int, Instruction] = {}
    for m in group.values():
        if _outside_copy(m, group):
            continue
        outside = m is comp.root or any(id(u) not in group for u in m.users)
        if not outside:
            continue
        if _row_broadcast(m, group, split) and m is not comp.root:
            src = m.operands[0]
            out[id(src)] = src
        else:
            out[id(m)] = m
    return list(out.values())


def _materialize(module, comp, group: dict, split: Split, position: dict) -> list:
    """Replace ``group`` by its fusion; returns the instructions made, operands first."""
    from xlapy.opdefs import make_instruction

    ordered = sorted(group.values(), key=lambda i: position[id(i)])
    # row broadcasts used outside: a copy outside reads the row value (an output)
    copies = []
    for m in ordered:
        if _row_broadcast(m, group, split) and m is not comp.root and \
                any(id(u) not in group for u in m.users):
            copy = comp.add_instruction(m.clone([m.operands[0]]))
            copies.append(copy)
            for u in [u for u in m.users if id(u) not in group]:
                u.replace_operand_with(m, copy)
    outs = sorted(_outputs(group, split, comp), key=lambda i: position[id(i)])
    fused = Computation("fused_computation")
    fused.is_fusion_computation = True
    module.add_computation(fused)
    operands: list[Instruction] = []
    mapping: dict[int, Instruction] = {}
    for instr in ordered:
        ops = []
        for o in instr.operands:
            if id(o) not in mapping:
                k = len(operands)
                operands.append(o)
                mapping[id(o)] = fused.add_instruction(make_instruction(
                    "parameter", [], {"parameter_number": k}, shape=o.shape,
                    name=f"param_{k}"))
            ops.append(mapping[id(o)])
        mapping[id(instr)] = fused.add_instruction(instr.clone(ops))
    if len(outs) == 1:
        fused.root = mapping[id(outs[0])]
        shape = outs[0].shape
    else:
        fused.root = fused.add_instruction(make_instruction(
            "tuple", [mapping[id(o)] for o in outs], {}, name="tuple"))
        shape = Shape.tuple([o.shape for o in outs])
    fusion = make_instruction("fusion", operands, {"kind": FusionKind.CUSTOM, "calls": fused},
                              shape=shape, name=ROW_FUSION)
    fusion.metadata = outs[0].metadata
    comp.add_instruction(fusion)
    made = [fusion]
    for k, o in enumerate(outs):
        value = fusion
        if len(outs) > 1:
            value = comp.add_instruction(make_instruction(
                "get-tuple-element", [fusion], {"index": k}, shape=o.shape,
                name=f"{fusion.name}.{k}"))
            made.append(value)
        for u in [u for u in o.users if id(u) not in group]:
            u.replace_operand_with(o, value)
        if o is comp.root:
            comp.set_root(value)
    for instr in reversed(ordered):
        if not instr.user_count and instr is not comp.root and instr.parent is comp:
            comp.remove_instruction(instr)
    return made + copies


def is_row_fusion(instr) -> bool:
    return (instr.opcode == "fusion" and instr.attrs["kind"] == FusionKind.CUSTOM
            and instr.name.startswith(ROW_FUSION))


__all__ = ["LATE", "MAX_COLS", "MAX_GROUP", "REDUCTIONS", "ROW_FUSION", "RowFusion", "Split",
           "is_row_fusion", "seed_split"]

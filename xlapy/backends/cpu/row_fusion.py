"""Row fusion, the CPU backend's own pass (as XLA's CPU fusion passes live in its backend: it
fuses what this backend's emitters generate): a row reduction and the elementwise work consuming it in one fusion (XLA's
multi-output fusion of a reduction with its consumers, as its row-reduction emitter runs
them: softmax's max, sum of exponentials and division; layer norm's mean, variance and
normalisation).

A group is rooted at an elementwise instruction C of dimensions S = [rows..., cols...] (split
after the first ``p`` dimensions) and holds producers whose every user is in the group:
- *full* members, of dimensions S: elementwise ops, broadcasts (of a row member, keeping the
  row dimensions in place, or of anything else), converts;
- *row* members, of dimensions S[:p] (or S[:p] followed by 1s): elementwise ops, reshapes
  between those forms, broadcasts of scalars, and the row reductions themselves - reduce of
  a full operand over exactly the column dimensions, one operand, a recognised associative
  reducer (reduction.recognised_op);
- scalar constants (duplicated as the fusion pass duplicates them).
Everything else is an input. A group with at least one row reduction becomes a ``fusion``
with kind=kCustom (opaque to the loop/input fusion pass that runs next) and the
frontend-free marker ``ROW_FUSION`` in its name; the cpu backend runs it as one kernel per
row that computes the reductions in order and then writes the row of C, so the row is read
from memory once and re-read from cache (the cols must fit the L2 cache: MAX_COLS).

Exact up to the reassociation the reduction emitter already allows (recognised float
reducers): the fused computation evaluates the same instructions.
"""

from __future__ import annotations

from xlapy.backends.cpu.reduction import _generated, recognised_op
from xlapy.hlo.attrs import Attrs
from xlapy.hlo.attrs.enums import FusionKind
from xlapy.hlo.ir import Instruction, Module
from xlapy.opdefs.registry import get_opdef
from xlapy.passes.fusion import InstructionFusion
from xlapy.passes.pass_manager import HloPass

#: Column elements per row at most (a row of f32 stays in a 256 KiB L2 cache).
MAX_COLS = 1 << 16
#: Group size bound (as the fusion pass's MAX_FUSION_SIZE: compile time).
MAX_GROUP = 128
#: Fusion names carry this prefix (what the cpu backend's planner looks for).
ROW_FUSION = "row_fusion"
_FLOAT = frozenset({"F32", "F64"})


def _elementwise(instr) -> bool:
    return "elementwise" in get_opdef(instr.opcode).traits and not instr.called_computations()


def _plain(instr) -> bool:
    return (not instr.has_side_effect and not instr.control_predecessors
            and not instr.control_successors and instr.shape.is_array()
            and not instr.shape.is_dynamic())


def _dims(instr) -> tuple:
    return tuple(int(d) for d in instr.shape.dimensions)


def _row_reduce(instr, full: tuple, p: int) -> bool:
    if instr.opcode != "reduce" or len(instr.operands) != 2 or not _plain(instr):
        return False
    if _dims(instr.operands[0]) != full or tuple(sorted(instr.attrs["dimensions"])) != \
            tuple(range(p, len(full))):
        return False
    if instr.operands[1].shape.dimensions:
        return False
    if instr.shape.element_type.name not in _FLOAT:
        return False
    return recognised_op(instr.attrs["to_apply"]) is not None


def _split(root) -> int | None:
    """The row/column split of ``root``'s group: from the first row reduction found among
    its producers whose operand has root's dimensions."""
    full = _dims(root)
    seen, work = {id(root)}, [root]
    while work and len(seen) < 4 * MAX_GROUP:
        x = work.pop()
        for o in x.operands:
            if id(o) in seen:
                continue
            seen.add(id(o))
            if o.opcode == "reduce" and _dims(o.operands[0]) == full:
                dims = sorted(o.attrs["dimensions"])
                if dims and dims == list(range(dims[0], len(full))) and dims[0] >= 1:
                    return dims[0]
            if o.shape.is_array():
                work.append(o)
    return None


class _Shape:
    def __init__(self, full: tuple, p: int):
        self.full, self.p = full, p
        self.row = full[:p]
        self.cols = 1
        for d in full[p:]:
            self.cols *= d

    def is_row(self, dims: tuple) -> bool:
        return dims[:self.p] == self.row and all(d == 1 for d in dims[self.p:])

    def member(self, instr) -> bool:
        """May ``instr`` join (ignoring its users)? Only instructions the cpu backend
        generates element by element (or row reductions) do."""
        if not _plain(instr) or instr.opcode == "parameter":
            return False
        if instr.opcode != "reduce" and not _generated(instr):
            return False
        dims = _dims(instr)
        op = instr.opcode
        if op == "constant":
            return not dims
        if dims == self.full:
            if _elementwise(instr) or op == "convert":
                return True
            return op == "broadcast"  # its operand joins only through row_broadcast_ok
        if self.is_row(dims):
            if op == "reduce":
                return _row_reduce(instr, self.full, self.p)
            if _elementwise(instr) or op == "convert":
                return True
            if op in ("reshape", "bitcast"):
                return self.is_row(_dims(instr.operands[0]))
            if op == "broadcast":
                return not instr.operands[0].shape.dimensions
        return False

    def row_broadcast_ok(self, instr) -> bool:
        """A broadcast to the full dimensions: of a row value, its non-unit dimensions
        must stay the row dimensions in place (so element (row, col) reads the row's
        value); any other operand is read as an input (any mapping)."""
        src = instr.operands[0]
        sdims = _dims(src)
        if not self.is_row(sdims):
            return True
        for j, d in enumerate(instr.attrs["dimensions"]):
            if sdims[j] != 1 and (d != j or j >= self.p):
                return False
        return True


class RowFusion(HloPass):
    """Groups row reductions with the elementwise work consuming them (module docstring)."""

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
        taken: set[int] = set()
        order = comp.post_order()
        position = {id(i): k for k, i in enumerate(order)}
        for root in reversed(order):
            if id(root) in taken or root.parent is not comp or not _plain(root):
                continue
            if not (_elementwise(root) or root.opcode == "convert") or not root.shape.dimensions:
                continue
            if root.shape.element_type.name not in _FLOAT:
                continue
            p = _split(root)
            if p is None:
                continue
            shape = _Shape(_dims(root), p)
            if shape.cols > MAX_COLS:
                continue
            group = self._grow(root, shape, taken)
            if not any(m.opcode == "reduce" for m in group):
                continue
            for m in group:
                if m.opcode != "constant":
                    taken.add(id(m))
            ordered = sorted(group, key=lambda m: position[id(m)])
            fusion = InstructionFusion._materialize(module, comp, root, ordered)
            fusion.attrs = Attrs({**fusion.attrs.values, "kind": FusionKind.CUSTOM})
            fusion.name = comp._unique_name(ROW_FUSION)
            changed = True
        return changed

    @staticmethod
    def _grow(root, shape: _Shape, taken: set) -> list:
        group: dict[int, Instruction] = {id(root): root}
        inside: dict[int, int] = {}
        work = [root]
        while work and len(group) < MAX_GROUP:
            m = work.pop()
            if m.opcode == "broadcast" and _dims(m) == shape.full and \
                    not shape.row_broadcast_ok(m):
                continue  # its operand is read as an input, at the broadcast's index
            for o in dict.fromkeys(m.operands):
                if id(o) in group or id(o) in taken or o.parent is not root.parent:
                    continue
                if o is o.parent.root or not shape.member(o):
                    continue
                count = inside[id(o)] = inside.get(id(o), 0) + 1
                if o.opcode == "constant" or count == len(o.users):
                    group[id(o)] = o
                    work.append(o)
        # a member whose users were not all reached stays out: drop it and what only it
        # reached (recomputed: members must be closed under "every user inside")
        changed = True
        while changed:
            changed = False
            for key, m in list(group.items()):
                if m is root or m.opcode == "constant":
                    continue
                if any(id(u) not in group for u in m.users):
                    del group[key]
                    changed = True
        # a row value read through a broadcast that moves its row dimensions would be read
        # at another row: no group then
        for m in group.values():
            if m.opcode == "broadcast" and _dims(m) == shape.full and \
                    id(m.operands[0]) in group and not shape.row_broadcast_ok(m):
                return []
        return list(group.values())


def is_row_fusion(instr) -> bool:
    return (instr.opcode == "fusion" and instr.attrs["kind"] == FusionKind.CUSTOM
            and instr.name.startswith(ROW_FUSION))


__all__ = ["MAX_COLS", "ROW_FUSION", "RowFusion", "is_row_fusion"]

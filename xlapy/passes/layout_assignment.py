"""Layout assignment (the part of XLA's LayoutAssignment a layout-agnostic backend needs).

1. Every array shape without a layout (in any computation, inside tuples too) gets XLA's
   default layout (minor-to-major = rank-1 ... 0); layouts already present are kept.
2. The entry computation's parameters and result take the layouts of the module's
   ``entry_computation_layout`` when it has one: an array parameter whose layout differs is
   given the wanted layout and a ``copy`` back to its old shape feeds its users; an array
   root whose layout differs gets a ``copy`` to the wanted layout as the new root.
   Tuple-shaped parameters/results whose layouts differ are left as they are (a copy of
   a tuple is not an array op).

Values never change (a copy is the identity on values), so results keep their bits.
"""

from __future__ import annotations

from xlapy.hlo.ir import Computation, Instruction, Module
from xlapy.passes.pass_manager import HloPass
from xlapy.shape import Shape


def with_missing_layouts(shape: Shape) -> Shape:
    """``shape`` with the default layout on every array shape that has none."""
    if shape.is_tuple():
        if shape.has_layout():
            return shape
        return shape.map_leaves(with_missing_layouts)
    if shape.is_array() and shape.layout is None:
        return shape.with_default_layout()
    return shape


class LayoutAssignment(HloPass):
    """Default layouts where missing; entry parameter/result layouts as the module says."""

    name = "layout-assignment"

    def run(self, module: Module) -> bool:
        changed = False
        for comp in module.computations:
            for instr in comp.instructions:
                new = with_missing_layouts(instr.shape)
                if new is not instr.shape:
                    instr.shape = new
                    changed = True
        layout = module.config.get("entry_computation_layout")
        if layout is not None and module.entry is not None:
            changed |= self._match_entry(module.entry, layout)
        return changed

    @staticmethod
    def _match_entry(entry: Computation, layout) -> bool:
        from xlapy.opdefs import make_instruction

        changed = False
        params = entry.parameters
        if len(params) != len(layout.parameters):
            return False
        for p, want in zip(params, layout.parameters):
            want = with_missing_layouts(want)
            if (p.shape == want or not p.shape.is_array() or not want.is_array()
                    or not want.compatible(p.shape)):
                continue
            old = p.shape
            users = list(p.users)
            p.shape = want
            copy = entry.add_instruction(make_instruction("copy", [p], {}, shape=old,
                                                          name="copy"))
            for u in users:
                u.replace_operand_with(p, copy)
            if entry.root is p:
                entry.root = copy
            changed = True
        root: Instruction = entry.root
        want = with_missing_layouts(layout.result)
        if (root.shape != want and root.shape.is_array() and want.is_array()
                and want.compatible(root.shape)):
            copy = entry.add_instruction(make_instruction("copy", [root], {}, shape=want,
                                                          name="copy"))
            entry.root = copy
            changed = True
        return changed


__all__ = ["LayoutAssignment", "with_missing_layouts"]

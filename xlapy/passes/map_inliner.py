"""Map inlining: a ``map`` whose computation is elementwise is replaced by that computation's
instructions applied to the whole arrays (XLA's MapInliner, for any elementwise body rather
than one instruction): each scalar instruction becomes the same op on the map's shape, a
parameter the map's operand, a scalar constant a broadcast of it. The fusion passes then
fuse the result as any elementwise code.

Exact: an elementwise op on arrays computes, element by element, what it computes on the
scalars. Left alone: maps whose computation has anything else (a call, a reduce, a
side effect, a non-scalar value), operands whose dimensions differ from the map's (a
scalar standing in for an array), dynamic shapes, and parameters whose element type is not
their operand's.
"""

from __future__ import annotations

from xlapy.hlo.ir import Computation, Instruction, Module
from xlapy.opdefs import get_opdef, make_instruction
from xlapy.opdefs.registry import ELEMENTWISE
from xlapy.passes.pass_manager import HloPass


def _inlinable(map_instr: Instruction) -> bool:
    shape = map_instr.shape
    if not shape.is_array() or shape.is_dynamic() or not map_instr.operands:
        return False
    dims = tuple(shape.dimensions)
    comp: Computation = map_instr.attrs["to_apply"]
    params = {p.parameter_number: p for p in comp.instructions if p.opcode == "parameter"}
    if len(params) != len(map_instr.operands):
        return False
    for i, o in enumerate(map_instr.operands):
        if not o.shape.is_array() or o.shape.is_dynamic() or tuple(o.shape.dimensions) != dims:
            return False
        if o.shape.element_type != params[i].shape.element_type:
            return False
    for instr in comp.instructions:
        if not instr.shape.is_array() or instr.shape.dimensions:
            return False  # scalars only
        if instr.opcode in ("parameter", "constant", "copy"):
            continue
        if not get_opdef(instr.opcode).has(ELEMENTWISE) or instr.called_computations():
            return False
    return True


def inline_map(map_instr: Instruction) -> Instruction:
    """Replace one inlinable ``map`` by its computation on whole arrays; returns the
    instruction now standing for the map's result."""
    comp: Computation = map_instr.parent
    callee: Computation = map_instr.attrs["to_apply"]
    mapping: dict[int, Instruction] = {}
    for instr in callee.post_order():
        if instr.opcode == "parameter":
            mapping[id(instr)] = map_instr.operands[instr.parameter_number]
            continue
        if instr.opcode == "constant":
            scalar = comp.add_instruction(instr.clone([]))
            shape = map_instr.shape.with_element_type(instr.shape.element_type)
            mapping[id(instr)] = comp.add_instruction(make_instruction(
                "broadcast", [scalar], {"dimensions": []}, shape=shape, name="broadcast"))
            continue
        operands = [mapping[id(o)] for o in instr.operands]
        shape = map_instr.shape.with_element_type(instr.shape.element_type)
        mapping[id(instr)] = comp.add_instruction(instr.clone(operands, shape=shape))
    result = mapping[id(callee.root)]
    if result.shape != map_instr.shape:
        # another layout (the root is an operand): keep the map's with a copy
        result = comp.add_instruction(make_instruction("copy", [result], {},
                                                       shape=map_instr.shape, name="copy"))
    comp.replace_instruction(map_instr, result)
    return result


class MapInliner(HloPass):
    """Inlines every ``map`` whose computation is elementwise on scalars."""

    name = "map-inline"

    def run(self, module: Module) -> bool:
        changed = False
        for comp in list(module.computations):
            for instr in list(comp.instructions):
                if instr.parent is comp and instr.opcode == "map" and _inlinable(instr):
                    inline_map(instr)
                    changed = True
        if changed:
            module.remove_unused_computations()
        return changed


__all__ = ["MapInliner", "inline_map"]

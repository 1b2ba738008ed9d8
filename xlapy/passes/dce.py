"""Dead code elimination: instructions nobody uses and computations nobody calls.

An instruction is dead when it has no users, is not its computation's root, is not a
parameter, has no control edges, and has no side effect, neither its own (outfeed, send,
custom-call, rng, collectives... as xlapy.hlo.opcodes lists them) nor one inside the
computations it calls (a dead ``while`` whose body does an outfeed stays). Then every
computation the entry no longer reaches is removed.
"""

from __future__ import annotations

from xlapy.hlo.ir import Module
from xlapy.passes.pass_manager import HloPass, SideEffects


class DeadCodeElimination(HloPass):
    """Removes dead instructions (in every computation) and unreachable computations."""

    name = "dce"

    def run(self, module: Module) -> bool:
        effects = SideEffects()
        removed = 0
        for comp in module.computations:
            removed += comp.remove_dead_instructions(keep=effects.has_side_effect)
        removed += module.remove_unused_computations()
        return removed > 0

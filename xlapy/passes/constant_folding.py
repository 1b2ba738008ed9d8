"""Constant folding: an instruction whose operands are all constants is evaluated once, by
the reference interpreter (xlapy.interpreter), and replaced by a constant of exactly its
result shape (layout included). The value is the interpreter's, so folding changes no bit.

Not folded: instructions without operands (iota, replica-id, partition-id, rng-... stay:
an iota is cheaper than its value, the ids differ per device), constants and parameters,
``tuple`` (the pieces stay shareable) and ``broadcast`` (a broadcast of a constant is the
cheap form of its value), ``while`` loops (folding could run forever), anything with a side
effect (own or in a called computation: rng, outfeed, custom-call, collectives...),
operands that are elided ``{...}`` constants (unknown values), dynamic or token results,
results of more than ``max_elements`` elements (default 1M), and instructions the
interpreter cannot evaluate (left for run time).
"""

from __future__ import annotations

from xlapy.errors import XlaError
from xlapy.hlo.ir import Instruction, Module
from xlapy.passes.pass_manager import HloPass, SideEffects

#: Opcodes never folded (besides side-effecting ones), with the reason in the docstring.
NOT_FOLDED = frozenset({"constant", "parameter", "tuple", "broadcast", "while", "iota"})


def _leaves(shape):
    return [leaf for _, leaf in shape.leaves()]


class ConstantFolding(HloPass):
    """Replaces instructions computable from constants by constants."""

    name = "constant-folding"

    def __init__(self, max_elements: int = 1 << 20):
        self.max_elements = max_elements
        self.folded = 0

    def _foldable(self, instr: Instruction, effects: SideEffects) -> bool:
        if instr.opcode in NOT_FOLDED or not instr.operands or effects.has_side_effect(instr):
            return False
        if instr.control_predecessors or instr.control_successors:
            return False
        for op in instr.operands:
            if op.opcode != "constant" or op.attrs["literal"].elided:
                return False
        leaves = _leaves(instr.shape)
        if any(not s.is_array() or any(s.dynamic_dimensions) for s in leaves):
            return False
        return sum(s.element_count() for s in leaves) <= self.max_elements

    def run(self, module: Module) -> bool:
        from xlapy.interpreter.evaluator import EvalContext, EvalOptions
        from xlapy.interpreter.values import literal_to_value, value_to_literal
        from xlapy.opdefs import make_instruction

        effects = SideEffects()
        ctx = EvalContext(module, EvalOptions())
        changed = False
        for comp in module.computations:
            for instr in comp.post_order():
                if not self._foldable(instr, effects):
                    continue
                try:
                    args = [literal_to_value(o.attrs["literal"]) for o in instr.operands]
                    value = ctx.run_instruction(instr, args)
                    literal = value_to_literal(value, instr.shape)
                except XlaError:
                    continue  # the interpreter cannot do it: leave it for run time
                new = make_instruction("constant", [], {"literal": literal}, shape=instr.shape,
                                       name="constant", metadata=instr.metadata)
                comp.replace_instruction(instr, new)
                self.folded += 1
                changed = True
        return changed

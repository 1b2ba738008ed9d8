"""Call inlining: every ``call`` instruction is replaced by a copy of the instructions of
the computation it calls, its parameters replaced by the call's operands (XLA's
CallInliner). Nested calls are inlined too (the copies are visited again). Composite calls
(``is_composite=true``) stay: their frontend attributes name the composite op, which
inlining would lose. Computations no longer called are removed.
"""

from __future__ import annotations

from xlapy.hlo.ir import Computation, Instruction, Module
from xlapy.passes.pass_manager import HloPass


def inline_call(call: Instruction) -> Instruction:
    """Inline one ``call`` into its computation; returns the instruction now standing for
    the call's result (the copy of the callee's root, or a call operand)."""
    comp: Computation = call.parent
    callee: Computation = call.attrs["to_apply"]
    mapping: dict[int, Instruction] = {}
    for instr in callee.post_order():
        if instr.opcode == "parameter":
            mapping[id(instr)] = call.operands[instr.parameter_number]
            continue
        copy = instr.clone([mapping[id(o)] for o in instr.operands])
        comp.add_instruction(copy)
        mapping[id(instr)] = copy
    for instr in callee.instructions:
        for p in instr.control_predecessors:
            if p.opcode != "parameter" and instr.opcode != "parameter":
                mapping[id(p)].add_control_dependency_to(mapping[id(instr)])
    result = mapping[id(callee.root)]
    if result.shape != call.shape:
        # The callee's root has another layout than the call: keep the call's with a copy.
        from xlapy.opdefs import make_instruction

        result = comp.add_instruction(make_instruction("copy", [result], {}, shape=call.shape,
                                                       name="copy"))
    # Control edges of the call attach to the inlined root (as XLA's inliner does).
    comp.replace_instruction(call, result)
    return result


class CallInliner(HloPass):
    """Inlines every non-composite ``call`` in the module."""

    name = "inline"

    def run(self, module: Module) -> bool:
        changed = False
        progress = True
        while progress:
            progress = False
            for comp in list(module.computations):
                for instr in list(comp.instructions):
                    if (instr.parent is comp and instr.opcode == "call"
                            and not instr.attrs.get("is_composite", False)):
                        inline_call(instr)
                        progress = changed = True
        if changed:
            module.remove_unused_computations()
        return changed

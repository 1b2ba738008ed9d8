"""Common subexpression elimination: of two instructions computing the same thing in one
computation, the later one is replaced by the earlier.

"The same thing": same opcode, the same operands (the same instruction objects, after
earlier replacements), equal attributes (``Attrs`` equality: a constant's literal compares
bit for bit, so -0 and +0 or NaNs with other payloads stay apart), the same result shape
including its layout, and the same sharding / frontend attributes / backend config
(metadata is ignored). Called computations must be the same computation or structurally
identical ones (same instructions in the same post order, recursively).

``Cse(commutative=True)`` (the CPU backend's, as XLA's CSE, which compares instructions with
IdenticalIgnoringCommutativeOperandOrder) also merges ``op(x, y)`` with ``op(y, x)`` for XLA's
binary commutative opcodes (add, and, multiply, maximum, minimum, or, xor). That is exact
but for one corner - when both operands are NaN, x86 arithmetic returns the first one's sign
and payload - which is why the registry's ``cse`` (``xlapy opt``) does not: the backend
takes it to compute what XLA:CPU computes (its fused multiply-adds depend on how many uses
a product has, so ``x*y`` and ``y*x`` must be one product as they are in XLA).

Never merged: instructions with a side effect (their own or in a called computation),
parameters, instructions with control edges, and elided ``{...}`` constants (their values
are unknown, so two of them need not be equal).
"""

from __future__ import annotations

from typing import Any

from xlapy.hlo.ir import Computation, Instruction, Module, callees_first
from xlapy.passes.pass_manager import HloPass, SideEffects

#: XLA's HloOpcodeIsBinaryCommutative: two of these whose operands are the same two
#: instructions in either order compute the same thing (XLA's CSE merges them).
COMMUTATIVE = frozenset({"add", "and", "multiply", "maximum", "minimum", "or", "xor"})


def _extras_key(instr: Instruction) -> tuple:
    return (repr(instr.sharding), tuple(sorted(instr.frontend_attributes.items())),
            repr(instr.backend_config))


class _Fingerprints:
    """A structural number per computation: equal numbers mean identical computations. A
    computation's key names its callees by their numbers (hash-consing), so keys stay flat
    however deep computations call each other, and callees are numbered first, walking the
    call graph with a stack (``callees_first``)."""

    def __init__(self):
        self._numbers: dict[int, int] = {}  # id(computation) -> its number
        self._canonical: dict[Any, int] = {}  # structural key -> number
        self._walked: set[int] = set()

    def computation(self, comp: Computation) -> Any:
        number = self._numbers.get(id(comp))
        if number is None:
            for c in callees_first([comp], self._walked):
                try:
                    number = self._canonical.setdefault(self._key(c), len(self._canonical))
                except TypeError:  # an unhashable attribute value: equal to nothing else
                    number = ("unique", id(c))
                self._numbers[id(c)] = number
            number = self._numbers[id(comp)]
        return number

    def _key(self, comp: Computation) -> Any:
        order = comp.post_order()
        index = {id(i): n for n, i in enumerate(order)}
        rows = []
        for instr in order:
            rows.append((instr.opcode, instr.shape, self.attrs(instr),
                         tuple(index[id(o)] for o in instr.operands), _extras_key(instr),
                         tuple(index.get(id(p), -1) for p in instr.control_predecessors)))
        return (tuple(rows), index[id(comp.root)] if comp.root is not None else -1,
                comp.is_fusion_computation, comp.execution_thread)

    def attrs(self, instr: Instruction) -> tuple:
        items = []
        for name, value in instr.attrs.items():
            if isinstance(value, Computation):
                value = ("computation", self.computation(value))
            elif isinstance(value, tuple) and value and all(isinstance(v, Computation) for v in value):
                value = ("computations", tuple(self.computation(v) for v in value))
            items.append((name, value))
        return tuple(items)


class Cse(HloPass):
    """Merges identical instructions within each computation (first one in post order wins).
    ``commutative``: also a binary commutative op whose operands are the other's in the
    other order (module docstring)."""

    name = "cse"

    def __init__(self, commutative: bool = False):
        self.commutative = bool(commutative)

    def run(self, module: Module) -> bool:
        effects = SideEffects()
        prints = _Fingerprints()
        changed = False
        for comp in module.computations:
            changed |= self._run_computation(comp, effects, prints)
        return changed

    def _run_computation(self, comp: Computation, effects: SideEffects, prints: _Fingerprints) -> bool:
        seen: dict[Any, Instruction] = {}
        changed = False
        for instr in comp.post_order():
            if (instr.opcode == "parameter" or instr.control_predecessors
                    or instr.control_successors or effects.has_side_effect(instr)):
                continue
            if instr.opcode == "constant" and instr.attrs["literal"].elided:
                continue
            try:
                operands = tuple(id(o) for o in instr.operands)
                if self.commutative and instr.opcode in COMMUTATIVE and len(operands) == 2:
                    operands = tuple(sorted(operands))  # add(a, b) is add(b, a)
                key = (instr.opcode, operands, instr.shape, prints.attrs(instr),
                       _extras_key(instr))
                hash(key)
            except TypeError:  # an unhashable attribute value: leave it alone
                continue
            first = seen.get(key)
            if first is None:
                seen[key] = instr
                continue
            comp.replace_instruction(instr, first)
            changed = True
        return changed

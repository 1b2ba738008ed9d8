"""Loop and input fusion (XLA's InstructionFusion, simplified and greedy).

Visiting each computation's instructions consumers first, a group grows from a consumer
(an elementwise or data-movement op, a reduce or reduce-window, or an existing kLoop/kInput
fusion) through its operands: a producer joins the group when it is fusible (elementwise
ops, broadcast, reshape, transpose, slice, concatenate, pad, reverse, iota, constant,
convert, or a kLoop fusion, which is merged in) and either every user of it is in the
group, or it is cheap to duplicate (a scalar constant, an iota, a broadcast of a scalar
constant), in which case the group gets its own copy. A group of two or more instructions becomes one
``fusion`` instruction calling a new fused computation (parameters ``param_0``, ...;
kind=kInput when rooted at a reduce/reduce-window, kLoop otherwise). Existing fusions
inside a group are inlined into the new fused computation (nested fusions merged).

A group holds at most MAX_FUSION_SIZE instructions (compile time stays linear in the
program's length; see there), and generates no producer more than ALLOWED_CODE_DUPLICATION
times per element, a pad or concatenate only once (XLA's FusionNodeIndexingEvaluation; a
broadcast is fused whatever it costs, its operand is the one counted).

Never fused: side-effecting ops, ops calling computations (except the reducer of a
reduce / reduce-window), dot and convolution (left for output fusion), tuple-shaped values
(get-tuple-element, tuple, variadic reduces), parameters, instructions with control edges.
Fusion runs in the entry computation and in the computations it reaches through while,
conditional and call; reducers and other scalar computations are left alone.
Fusion is exact: the fused computation evaluates the same instructions.
"""

from __future__ import annotations

from xlapy.hlo.attrs.enums import FusionKind
from xlapy.hlo.ir import Computation, Instruction, Module
from xlapy.opdefs.registry import get_opdef
from xlapy.passes.pass_manager import HloPass

#: Data-movement and constant-like opcodes fusible besides the elementwise ones.
_MOVEMENT = frozenset({"broadcast", "reshape", "transpose", "slice", "concatenate", "pad",
                       "iota", "constant", "convert", "reverse"})
#: Consumers that make an input fusion.
_INPUT_ROOTS = frozenset({"reduce", "reduce-window"})
#: Control-flow attributes whose computations are fused in too.
_CONTROL_FLOW = frozenset({"while", "conditional", "call"})
_NOT_FUSIBLE = frozenset({"rng", "rng-bit-generator", "rng-get-and-update-state", "map"})


#: The most instructions one fusion takes (an xlapy rule, not XLA's: XLA:CPU fuses a chain
#: of any length). A fusion becomes one loop kernel, and LLVM's loop vectoriser takes time
#: quadratic in the size of the loop body (a chain of 4,000 elementwise ops: 20 s of its
#: 22 s of optimisation), so a longer group is cut into kernels of this size: compile time
#: grows linearly, at the cost of one intermediate buffer per cut.
MAX_FUSION_SIZE = 256

#: The most times one producer's element may be generated per element of its fusion
#: (XLA's FusionNodeIndexingEvaluation::kAllowedCodeDuplication). A fused producer is
#: generated once per distinct index it is read at: elementwise users of its shape (and
#: transposes) read it at their own index, a slice, pad, broadcast, concatenate, reverse or
#: reshape reads it at an index of its own. Two strided slices of one value, each feeding the
#: next level (what ``lax.associative_scan`` lowers to), double the count per level: without
#: the bound, twelve levels in one fusion were 2^12 copies of the first level's code and the
#: kernel never finished compiling.
ALLOWED_CODE_DUPLICATION = 15
#: Producers fused only where generated once and used once (XLA's
#: ElementalIrEmitter::OpInvalidatesCache, the fusible ones): a pad or concatenate element
#: chooses among its operands, so what it reads is not shared with other reads.
_ONCE = frozenset({"pad", "concatenate"})


def _is_elementwise(instr: Instruction) -> bool:
    return "elementwise" in get_opdef(instr.opcode).traits


def _plain(instr: Instruction) -> bool:
    """No side effect, no control edges, array result."""
    return (not instr.has_side_effect and not instr.control_predecessors
            and not instr.control_successors and instr.shape.is_array()
            and instr.opcode not in _NOT_FUSIBLE)


def _fusion_kind(instr: Instruction) -> FusionKind | None:
    return instr.attrs["kind"] if instr.opcode == "fusion" else None


def is_fusible_producer(instr: Instruction) -> bool:
    """Can ``instr`` be fused into a consumer (as an operand)?"""
    if not _plain(instr):
        return False
    if instr.opcode == "fusion":
        return _fusion_kind(instr) == FusionKind.LOOP
    if instr.called_computations():
        return False
    return instr.opcode in _MOVEMENT or _is_elementwise(instr)


def is_fusible_consumer(instr: Instruction) -> bool:
    """Can ``instr`` be the root of a fusion group?"""
    if not _plain(instr):
        return False
    if instr.opcode == "fusion":
        return _fusion_kind(instr) in (FusionKind.LOOP, FusionKind.INPUT)
    if instr.opcode in _INPUT_ROOTS:
        return len(instr.operands) == 2  # one input, one init value: array result
    if instr.called_computations():
        return False
    return instr.opcode in _MOVEMENT or _is_elementwise(instr)


def is_cheap(instr: Instruction) -> bool:
    """Cheap enough to duplicate into every consumer group."""
    if instr.opcode == "iota":
        return True
    if instr.opcode == "constant":
        return instr.shape.is_array() and instr.shape.rank == 0
    if instr.opcode == "broadcast":
        op = instr.operands[0]
        return op.opcode == "constant" and op.shape.rank == 0
    return False


def _group_kind(root: Instruction) -> FusionKind:
    if root.opcode in _INPUT_ROOTS:
        return FusionKind.INPUT
    if root.opcode == "fusion":
        return _fusion_kind(root)
    return FusionKind.LOOP


class InstructionFusion(HloPass):
    """Greedy loop fusion (kLoop) and input fusion of reduces (kInput). A group stops
    growing at ``max_fusion_size`` instructions (see MAX_FUSION_SIZE)."""

    name = "fusion"

    def __init__(self, max_fusion_size: int | None = None):
        self.max_fusion_size = MAX_FUSION_SIZE if max_fusion_size is None else max_fusion_size

    def run(self, module: Module) -> bool:
        changed = False
        for comp in self._computations(module):
            changed |= self._fuse_computation(module, comp)
        if changed:
            module.remove_unused_computations()
        return changed

    @staticmethod
    def _computations(module: Module) -> list[Computation]:
        """The entry and the computations reached from it through control flow."""
        if module.entry is None:
            return []
        out, seen, stack = [], set(), [module.entry]
        while stack:
            comp = stack.pop()
            if id(comp) in seen:
                continue
            seen.add(id(comp))
            out.append(comp)
            for instr in comp.instructions:
                if instr.opcode in _CONTROL_FLOW:
                    stack.extend(instr.called_computations())
        return out

    # -- grouping --------------------------------------------------------------------------

    def _fuse_computation(self, module: Module, comp: Computation) -> bool:
        order = comp.post_order()
        taken: set[int] = set()  # instructions fused (not duplicated) into some group
        groups: list[tuple[Instruction, list[Instruction]]] = []
        for root in reversed(order):
            if id(root) in taken or not is_fusible_consumer(root):
                continue
            members = self._grow(root, taken, self.max_fusion_size)
            if len(members) < 2:
                continue
            for m in members:
                if not is_cheap(m) or m is root:
                    taken.add(id(m))
            groups.append((root, members))
        if not groups:
            return False
        changed = False
        # Members keep their places in this post order (computed once: a post order per
        # group would make fusing a long program quadratic). Groups share no instruction but
        # cheap duplicated ones, so materialising one leaves the others' order intact.
        position = {id(i): k for k, i in enumerate(order)}
        for root, members in groups:
            # A cheap root duplicated into every group using it may be gone already.
            if root.parent is comp:
                ordered = sorted(members, key=lambda m: position[id(m)])
                self._materialize(module, comp, root, ordered)
                changed = True
        return changed

    @staticmethod
    def _grow(root: Instruction, taken: set[int], limit: int) -> list[Instruction]:
        """The group of ``root``: the producers reachable through fusible operands that are
        cheap or whose every user is in the group (the least such set; a worklist, each
        member's operands looked at once, with a count of the users inside per producer),
        at most ``limit`` of them, none generated more than ALLOWED_CODE_DUPLICATION times
        per element (see ``_emissions``); producers left out start groups of their own."""
        group: dict[int, Instruction] = {id(root): root}
        users_inside: dict[int, int] = {}
        # Per member: the members that index it (see _emissions) and its emission count.
        indexers: dict[int, frozenset[int]] = {id(root): frozenset((0,))}
        count: dict[int, int] = {0: 1, id(root): 1}  # 0: the fusion's own output index
        work = [root]
        while work and len(group) < limit:
            member = work.pop()
            for p in dict.fromkeys(member.operands):  # each distinct operand once
                if id(p) in group or id(p) in taken or p.parent is not root.parent:
                    continue
                if not is_fusible_producer(p):
                    continue
                inside = users_inside[id(p)] = users_inside.get(id(p), 0) + 1
                if is_cheap(p) or inside == len(p.users):
                    if p is p.parent.root or len(group) >= limit:
                        continue
                    users = p.users if inside == len(p.users) else [member]
                    own, n = InstructionFusion._emissions(p, users, indexers, count)
                    if p.opcode != "broadcast" and (n > ALLOWED_CODE_DUPLICATION or (
                            p.opcode in _ONCE and (n > 1 or len(p.users) > 1))):
                        continue
                    indexers[id(p)], count[id(p)] = own, n
                    group[id(p)] = p
                    work.append(p)
        return list(group.values())

    @staticmethod
    def _emissions(p: Instruction, users, indexers: dict, count: dict):
        """How often fused ``p`` would be generated per element of the fusion, as XLA's
        FusionNodeIndexingEvaluation counts it: a user that reads ``p`` at its own index (an
        elementwise op of ``p``'s shape, element type aside, or a transpose, whose index is
        permuted) passes on the members that index it; any other user indexes ``p`` itself.
        ``p`` is generated once per distinct indexing member, that member's count times.
        A cheap producer (copied into each group) counts only the user that pulled it in."""
        own: set[int] = set()
        for u in users:
            if u.opcode == "transpose" or (
                    u.shape.dimensions == p.shape.dimensions and u.shape.is_array()
                    and p.shape.is_array()):
                own |= indexers[id(u)]
            else:
                own.add(id(u))
        return frozenset(own), sum(count[i] for i in own)

    # -- building --------------------------------------------------------------------------

    @staticmethod
    def _materialize(module: Module, comp: Computation, root: Instruction,
                     ordered: list[Instruction]) -> Instruction:
        """``ordered``: the group's members, operands before users."""
        from xlapy.opdefs import make_instruction

        fused = Computation("fused_computation")
        fused.is_fusion_computation = True
        module.add_computation(fused)
        operands: list[Instruction] = []
        param_of: dict[int, Instruction] = {}

        def param(outside: Instruction) -> Instruction:
            if id(outside) not in param_of:
                k = len(operands)
                operands.append(outside)
                p = make_instruction("parameter", [], {"parameter_number": k},
                                     shape=outside.shape, name=f"param_{k}")
                param_of[id(outside)] = fused.add_instruction(p)
            return param_of[id(outside)]

        mapping: dict[int, Instruction] = {}

        def clone(instr: Instruction, ops: list[Instruction]) -> Instruction:
            return fused.add_instruction(instr.clone(ops))

        for instr in ordered:
            ops = [mapping[id(o)] if id(o) in mapping else param(o) for o in instr.operands]
            if instr.opcode == "fusion":  # merge the nested fusion's instructions
                inner: Computation = instr.attrs["calls"]
                inner_map: dict[int, Instruction] = {}
                for x in inner.post_order():
                    if x.opcode == "parameter":
                        inner_map[id(x)] = ops[x.parameter_number]
                    else:
                        inner_map[id(x)] = clone(x, [inner_map[id(o)] for o in x.operands])
                mapping[id(instr)] = inner_map[id(inner.root)]
            else:
                mapping[id(instr)] = clone(instr, ops)
        fused.root = mapping[id(root)]
        fusion = make_instruction("fusion", operands,
                                  {"kind": _group_kind(root), "calls": fused},
                                  shape=root.shape, name="fusion")
        fusion.metadata = root.metadata
        comp.add_instruction(fusion)
        comp.replace_instruction(root, fusion)
        for instr in reversed(ordered):
            if instr is not root and not instr.users and instr.parent is comp:
                comp.remove_instruction(instr)
        return fusion


__all__ = ["InstructionFusion", "is_cheap", "is_fusible_consumer", "is_fusible_producer"]

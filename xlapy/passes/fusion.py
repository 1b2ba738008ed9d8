"""Loop and input fusion (XLA's InstructionFusion, simplified and greedy).

Visiting each computation's instructions consumers first, a group grows from a consumer
(an elementwise or data-movement op, a reduce or reduce-window, or an existing kLoop/kInput
fusion) through its operands: a producer joins the group when it is fusible (elementwise
ops, broadcast, reshape, transpose, slice, concatenate, pad, reverse, iota, constant,
convert, dynamic-slice, a gather of single elements - not one copying rows:
``_row_gather`` - or a kLoop fusion, which is merged in) and either every user of it is in the
group, or it is cheap (a scalar constant, an iota, a broadcast of a scalar constant), or
XLA:CPU would duplicate it (``may_duplicate``: not expensive, and reading no more than it
writes or fusible into all its users) and the group generates it once per element; then
the group gets its own copy, and the original stays for its other users until they too
are fused (threefry's rounds: a chain of adds and xors feeding two outputs is two
fusions, not one kernel per shared value). A group of two or more instructions becomes one
``fusion`` instruction calling a new fused computation (parameters ``param_0``, ...;
kind=kInput when rooted at a reduce/reduce-window, kLoop otherwise). Existing fusions
inside a group are inlined into the new fused computation (nested fusions merged).

An expensive producer (``is_expensive``) does not join a group that reads each of its
elements more than once - through a broadcast to more elements, a gather or a reduce-window,
directly or through the members between (XLA's ReusesOperandElements rule): the rsqrt of a
layer norm's variance is computed once per row, not once per element it scales.

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

import heapq
import math

from xlapy.hlo.attrs.enums import FusionKind
from xlapy.hlo.ir import Computation, Instruction, Module
from xlapy.opdefs.registry import get_opdef
from xlapy.passes.pass_manager import HloPass
from xlapy.shape import dtypes

#: Data-movement and constant-like opcodes fusible besides the elementwise ones.
_MOVEMENT = frozenset({"broadcast", "reshape", "transpose", "slice", "concatenate", "pad",
                       "iota", "constant", "convert", "reverse", "gather", "dynamic-slice"})
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


def _row_gather(instr: Instruction) -> bool:
    """A gather whose output rows are runs of its operand (the last output dimension is a
    window dimension longer than 1: embedding lookups): left to the backend's gather kernel,
    which copies each row from one start index; a gather of single elements (take_along,
    searchsorted's probes) fuses with its indices' producers and its consumers."""
    if instr.opcode != "gather" or not instr.shape.is_array() or not instr.shape.dimensions:
        return False
    last = len(instr.shape.dimensions) - 1
    dn = instr.attrs["gather_dimension_numbers"]
    return last in dn.offset_dims and int(instr.shape.dimensions[last]) > 1


def is_fusible_producer(instr: Instruction) -> bool:
    """Can ``instr`` be fused into a consumer (as an operand)?"""
    if not _plain(instr) or _row_gather(instr):
        return False
    if instr.opcode == "fusion":
        return _fusion_kind(instr) == FusionKind.LOOP
    if instr.called_computations():
        return False
    return instr.opcode in _MOVEMENT or _is_elementwise(instr)


def is_fusible_consumer(instr: Instruction) -> bool:
    """Can ``instr`` be the root of a fusion group?"""
    if not _plain(instr) or _row_gather(instr):
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


#: Elementwise ops too expensive to compute more than once (XLA's
#: InstructionFusion::IsExpensive): a producer of these joins a group only where the group
#: takes all of its users.
_EXPENSIVE = frozenset({
    "acos", "acosh", "asin", "asinh", "atan2", "atanh", "cbrt", "cosh", "erf", "exponential",
    "exponential-minus-one", "log", "log-plus-one", "logistic", "power", "rsqrt", "sqrt",
    "tanh"})
#: Cheap for real numbers, expensive for complex ones (XLA's IsExpensive).
_COMPLEX_EXPENSIVE = frozenset({"abs", "cosine", "sign", "sine", "sinh", "tan"})


def _scalar_constant(instr: Instruction) -> bool:
    if instr.opcode == "broadcast":
        instr = instr.operands[0]
    return instr.opcode == "constant" and instr.shape.is_array() and \
        math.prod(instr.shape.dimensions) == 1


def is_expensive(instr: Instruction) -> bool:
    """XLA's InstructionFusion::IsExpensive for the fusible instructions: transcendental
    ops, float division and remainder (integer ones by a constant are cheap), the complex
    forms of abs, sign and the trigonometric ops, and existing fusions."""
    op = instr.opcode
    if op == "fusion" or op in _EXPENSIVE:
        return True
    if op in _COMPLEX_EXPENSIVE:
        return dtypes.is_complex(instr.shape.element_type)
    if op in ("divide", "remainder"):
        return not dtypes.is_integral(instr.shape.element_type) or \
            not _scalar_constant(instr.operands[1])
    return False


def _elements(instr: Instruction) -> int:
    return math.prod(instr.shape.dimensions) if instr.shape.is_array() else 0


def _effectively_unary(instr: Instruction) -> bool:
    """At most one operand as large as the result in rank (broadcasts, iotas and scalar
    constants aside): XLA's InstructionFusion::EffectivelyAtMostUnary."""
    def true_rank(x):
        return sum(1 for d in x.shape.dimensions if d != 1) if x.shape.is_array() else 0

    rank = true_rank(instr)
    return sum(1 for o in instr.operands
               if o.opcode not in ("broadcast", "iota") and not _scalar_constant(o)
               and true_rank(o) >= rank) <= 1


def may_duplicate(instr: Instruction) -> bool:
    """Whether fusible ``instr`` may be computed again in a group that does not take all of
    its users (XLA:CPU's InstructionFusion with may_duplicate): not expensive, and either
    it reads no more than it writes (effectively unary, or its operands no larger than
    its result) or all of its users are fusible, so every copy of it ends up fused and it
    is never materialised besides (XLA's ComputeGloballyUnfusible)."""
    if is_expensive(instr):
        return False
    if _effectively_unary(instr) or \
            sum(_elements(o) for o in dict.fromkeys(instr.operands)) <= _elements(instr):
        return True
    return all(is_fusible_consumer(u) for u in instr.users)


def _reuses(user: Instruction, operand: Instruction) -> bool:
    """Whether ``user`` reads some element of ``operand`` more than once (XLA's
    ReusesOperandElements): a broadcast to more elements, a gather, a reduce-window."""
    if user.opcode == "broadcast":
        return _elements(user) > _elements(operand)
    return user.opcode in ("gather", "reduce-window")


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
        position = {id(i): k for k, i in enumerate(order)}
        taken: set[int] = set()  # instructions fused (not copied) into some group
        gone: set[int] = set()  # instructions no longer read once the groups are made
        groups_of: dict[int, list[frozenset[int]]] = {}  # the groups each member is in
        groups: list[tuple[Instruction, list[Instruction]]] = []
        for root in reversed(order):  # users before their operands
            if id(root) in taken:
                gone.add(id(root))
                continue
            if not is_fusible_consumer(root):
                continue
            if root is not comp.root and root.users and all(
                    id(u) in gone and id(u) in groups_of
                    and all(id(root) in g for g in groups_of[id(u)]) for u in root.users):
                # every user is fused, with its own copy of this in each of its groups
                gone.add(id(root))
                continue
            members, copies = self._grow(root, taken, self.max_fusion_size, position)
            if len(members) < 2:
                continue
            ids = frozenset(id(m) for m in members)
            for m in members:
                if id(m) not in copies:
                    taken.add(id(m))
                groups_of.setdefault(id(m), []).append(ids)
            gone.add(id(root))
            groups.append((root, members))
        if not groups:
            return False
        # Members keep their places in this post order (computed once: a post order per
        # group would make fusing a long program quadratic). Groups share no instruction but
        # copied ones (cheap or duplicated), which stay until their last user is fused, so
        # materialising one group leaves the others' members in place.
        fused: set[int] = set()
        for root, members in groups:
            # A cheap root duplicated into every group using it may be gone already.
            if root.parent is comp:
                ordered = sorted(members, key=lambda m: position[id(m)])
                self._materialize(module, comp, root, ordered)
                fused.update(id(m) for m in members)
        for instr in reversed(order):  # copies whose users all fused them: dead now
            if id(instr) in fused and instr.parent is comp and not instr.users and \
                    instr is not comp.root:
                comp.remove_instruction(instr)
        return True

    @staticmethod
    def _grow(root: Instruction, taken: set[int], limit: int,
              position: dict[int, int]) -> tuple[list[Instruction], set[int]]:
        """The group of ``root`` and the ids of its *copies*: producers reachable through
        fusible operands, decided users first (in reverse post order, so each producer's
        users inside the group are decided before it). A producer whose every user is a
        member and none a copy joins (it is fused away); one that is cheap, or that
        ``may_duplicate`` allows, joins as a copy (it stays for its other users, computed
        again); any other is an operand of the group. At most ``limit`` members, none
        generated more than ALLOWED_CODE_DUPLICATION times per element (see
        ``_emissions``), a pad or concatenate once; producers left out start groups of
        their own."""
        group: dict[int, Instruction] = {id(root): root}
        copies: set[int] = set()
        # Per member: the members that index it (see _emissions) and its emission count.
        indexers: dict[int, frozenset[int]] = {id(root): frozenset((0,))}
        count: dict[int, int] = {0: 1, id(root): 1}  # 0: the fusion's own output index
        reused: dict[int, bool] = {id(root): False}  # see _reuses
        queued = {id(root)}
        heap: list[tuple[int, int, Instruction]] = []

        def join(p, users, whole):
            """Add ``p`` (read by member ``users``) unless it would be generated too often,
            or it is expensive and the group reads each of its elements more than once."""
            own, n = InstructionFusion._emissions(p, users, indexers, count)
            if p.opcode != "broadcast" and (n > ALLOWED_CODE_DUPLICATION or (
                    p.opcode in _ONCE and (n > 1 or len(p.users) > 1))):
                return
            if not whole and n > 1 and not is_cheap(p):
                return  # a copy computed again, and more than once per element here
            reuse = any(reused[id(u)] or _reuses(u, p) for u in users)
            if reuse and is_expensive(p):
                return  # XLA: no expensive producer into a consumer reusing its elements
            indexers[id(p)], count[id(p)], reused[id(p)] = own, n, reuse
            group[id(p)] = p
            if not whole:
                copies.add(id(p))
            push_operands(p)

        def push_operands(member):
            for p in dict.fromkeys(member.operands):  # each distinct operand once
                if id(p) in queued or id(p) in taken or p.parent is not root.parent:
                    continue
                if not is_fusible_producer(p) or p is p.parent.root:
                    continue
                queued.add(id(p))
                if is_cheap(p):  # a copy whatever its other users: in at once
                    if len(group) < limit:
                        join(p, [member], False)
                else:
                    heapq.heappush(heap, (-position[id(p)], id(p), p))

        push_operands(root)
        while heap and len(group) < limit:
            p = heapq.heappop(heap)[2]
            users = [u for u in p.users if id(u) in group]
            whole = len(users) == len(p.users) and not any(id(u) in copies for u in users)
            if whole or may_duplicate(p):
                join(p, users, whole)
        return list(group.values()), copies

    @staticmethod
    def _emissions(p: Instruction, users, indexers: dict, count: dict):
        """How often fused ``p`` would be generated per element of the fusion, as XLA's
        FusionNodeIndexingEvaluation counts it: a user that reads ``p`` at its own index (an
        elementwise op of ``p``'s shape, element type aside, or a transpose, whose index is
        permuted) passes on the members that index it; any other user indexes ``p`` itself.
        ``p`` is generated once per distinct indexing member, that member's count times.
        A copied producer counts only its users inside the group."""
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

"""The HLO IR: Instruction, Computation, Module, as XLA has them.

Owns: the IR data structures and the operations users expect (post-order traversal,
replace-all-uses, clone, dead-instruction removal, unique names). Instructions carry their
opcode, result shape, operands, checked attribute values with their schema (the opcode's
AttrSpecs), and the per-instruction data XLA carries through (metadata,
frontend_attributes, sharding, backend_config, control predecessors, and any other printed
extras) as data, so nothing is lost on a round trip.

Imports only the shape layer and xlapy.hlo.{opcodes,attrs,printer}: never opdefs (the
registry is above this layer). Instructions are made through
``xlapy.opdefs.make_instruction`` (which checks attributes, runs the shape rule and records
the schema) by the builder, the parser and the passes.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator  # noqa: F401

from xlapy.errors import InvalidArgumentError
from xlapy.hlo.attrs import Attrs, AttrSpec, ComputationKind, ComputationListKind
from xlapy.hlo.opcodes import SIDE_EFFECTING_OPCODES
from xlapy.shape import Shape

_ids = itertools.count(1)


class NameUniquer:
    """XLA's NameUniquer: ``add``, ``add.1``, ``add.2``...; a name given with a numeric
    suffix (``add.7``) is kept if free and reserves that number."""

    _SUFFIX = re.compile(r"^(.*)\.([0-9]+)$")

    def __init__(self, separator: str = "."):
        self.separator = separator
        self.used: dict[str, set[int]] = {}
        self.next_id: dict[str, int] = {}

    def get_unique_name(self, name: str) -> str:
        name = sanitize_name(name or "instruction")
        m = self._SUFFIX.match(name)
        if m and (m.group(2) == "0" or not m.group(2).startswith("0")):
            root, num = m.group(1), int(m.group(2))
        else:
            root, num = name, None
        used = self.used.setdefault(root, set())
        if num is None:
            if 0 not in used:
                used.add(0)
                return root
        elif num not in used:
            used.add(num)
            return name
        n = max(self.next_id.get(root, 1), 1)
        while n in used:
            n += 1
        used.add(n)
        self.next_id[root] = n + 1
        return f"{root}{self.separator}{n}"


def sanitize_name(name: str) -> str:
    """Names may hold letters, digits, '_', '-', '.'; others become '_' (as XLA does)."""
    name = re.sub(r"[^A-Za-z0-9_.\-]", "_", name)
    if name and name[0].isdigit():
        name = "_" + name
    return name


class Instruction:
    """One HLO instruction. ``attrs`` holds the opcode's schema attributes by name."""

    def __init__(
        self,
        opcode: str,
        shape: Shape,
        operands: Iterable["Instruction"] = (),
        attrs: Attrs | dict | None = None,
        name: str | None = None,
        *,
        metadata: Any = None,
        frontend_attributes: dict[str, str] | None = None,
        sharding: Any = None,
        backend_config: str | None = None,
        extras: dict[str, Any] | None = None,
        attr_specs: tuple[AttrSpec, ...] = (),
    ):
        self.unique_id = next(_ids)
        self.opcode = opcode
        self.shape = shape
        self.operands: list[Instruction] = list(operands)
        self.attrs = attrs if isinstance(attrs, Attrs) else Attrs(dict(attrs or {}))
        # The opcode's attribute schema in order (AttrSpecs: keys, defaults, in_parens...),
        # set by the op definition that made the instruction (make_instruction): the
        # printer reads it here, so the IR needs no registry.
        self.attr_specs = attr_specs
        self.name = name or opcode
        self.metadata = metadata
        self.frontend_attributes = dict(frontend_attributes or {})
        self.sharding = sharding
        self.backend_config = backend_config
        self.extras = dict(extras or {})  # other printed data (statistics, origin, ...)
        self.control_predecessors: list[Instruction] = []
        self.control_successors: list[Instruction] = []
        # Users in order, with None where one was removed; ``_user_ids`` maps each user's
        # id to its position. Adding, finding and removing a user is O(1), so an
        # instruction with 20,000 users (a broadcast feeding a long chain) costs linear
        # time to build and to dismantle; ``users`` compacts the list when it is read.
        self._users: list[Instruction | None] = []
        self._user_ids: dict[int, int] = {}
        self._user_holes = 0
        self.parent: Computation | None = None
        for op in self.operands:
            op._add_user(self)

    # -- graph -----------------------------------------------------------------------------

    @property
    def users(self) -> list["Instruction"]:
        """The instructions using this one, in the order they started to (a list owned by
        the instruction: do not modify it)."""
        if self._user_holes:
            self._users[:] = [u for u in self._users if u is not None]
            self._user_ids = {id(u): k for k, u in enumerate(self._users)}
            self._user_holes = 0
        return self._users

    @property
    def user_count(self) -> int:
        """How many instructions use this one (XLA's user_count), without compacting."""
        return len(self._user_ids)

    def _add_user(self, user: "Instruction") -> None:
        if id(user) not in self._user_ids:
            self._user_ids[id(user)] = len(self._users)
            self._users.append(user)

    def _remove_user(self, user: "Instruction") -> None:
        if id(user) in self._user_ids and user not in user.operands:
            self._drop_user(user)

    def _drop_user(self, user: "Instruction") -> None:
        """Forget ``user`` (it no longer uses this instruction): its place becomes a hole,
        closed when ``users`` is next read."""
        k = self._user_ids.pop(id(user), None)
        if k is not None:
            self._users[k] = None
            self._user_holes += 1

    def operand(self, i: int) -> "Instruction":
        return self.operands[i]

    def replace_operand(self, i: int, new: "Instruction") -> None:
        old = self.operands[i]
        self.operands[i] = new
        old._remove_user(self)
        new._add_user(self)

    def replace_operand_with(self, old: "Instruction", new: "Instruction") -> None:
        """Replace every use of ``old`` among this instruction's operands by ``new``."""
        for i, op in enumerate(self.operands):
            if op is old:
                self.operands[i] = new
        old._remove_user(self)
        new._add_user(self)

    def replace_all_uses_with(self, new: "Instruction") -> None:
        """Every user of this instruction uses ``new`` instead (and if this is its
        computation's root, ``new`` becomes the root)."""
        if new is self:
            return
        kept = []
        for user in self.users:
            if user is new:
                kept.append(user)
                continue
            ops = user.operands
            for i, op in enumerate(ops):
                if op is self:
                    ops[i] = new
            new._add_user(user)
        self._users = kept
        self._user_ids = {id(u): k for k, u in enumerate(kept)}
        self._user_holes = 0
        if self.parent is not None and self.parent.root is self:
            self.parent.root = new

    def add_control_dependency_to(self, successor: "Instruction") -> None:
        if successor not in self.control_successors:
            self.control_successors.append(successor)
            successor.control_predecessors.append(self)

    def drop_all_control_deps(self) -> None:
        for p in self.control_predecessors:
            p.control_successors.remove(self)
        for s in self.control_successors:
            s.control_predecessors.remove(self)
        self.control_predecessors.clear()
        self.control_successors.clear()

    # -- facts -----------------------------------------------------------------------------

    @property
    def has_side_effect(self) -> bool:
        return self.opcode in SIDE_EFFECTING_OPCODES

    def called_computations(self) -> list["Computation"]:
        """Computations this instruction calls (to_apply, condition/body, branches, calls...),
        in XLA's order (a while loop's body comes before its condition)."""
        out = []
        values = self.attrs.values
        if self.opcode == "while" and "body" in values and "condition" in values:
            return [values["body"], values["condition"]]
        for value in values.values():
            if isinstance(value, Computation):
                out.append(value)
            elif isinstance(value, tuple) and value and all(isinstance(v, Computation) for v in value):
                out.extend(value)
        return out

    @property
    def parameter_number(self) -> int:
        return self.attrs["parameter_number"]

    # -- copying ---------------------------------------------------------------------------

    def clone(self, new_operands: Iterable[Instruction],
              computation_map: dict[int, Computation] | None = None,
              name: str | None = None, shape: Shape | None = None) -> Instruction:
        """A copy of this instruction on ``new_operands`` (XLA's CloneWithNewOperands): the
        same opcode, shape (``shape`` when given), attributes and their schema, metadata,
        frontend attributes, sharding, backend_config and extras; called computations
        replaced through ``computation_map`` (``id(original) -> copy``; unmapped ones are
        shared). The one place an instruction's fields are copied. The copy belongs to no
        computation and has no control edges: those join two instructions, so whoever copies
        both ends adds them. (A new shape or operands are not checked here: the op's shape
        rule is the op definitions', ``opdefs.result_shape``.)"""
        attrs = self.attrs  # read-only: shared unless a computation is replaced
        if computation_map:
            values = {}
            for k, v in attrs.items():
                if isinstance(v, Computation):
                    v = computation_map.get(id(v), v)
                elif isinstance(v, tuple) and v and all(isinstance(c, Computation) for c in v):
                    v = tuple(computation_map.get(id(c), c) for c in v)
                values[k] = v
            attrs = Attrs(values)
        return Instruction(
            self.opcode, self.shape if shape is None else shape, new_operands, attrs,
            self.name if name is None else name,
            metadata=self.metadata, frontend_attributes=self.frontend_attributes,
            sharding=self.sharding, backend_config=self.backend_config, extras=self.extras,
            attr_specs=self.attr_specs)

    def __repr__(self) -> str:
        return f"<Instruction %{self.name} = {self.shape} {self.opcode}(...)>"


@dataclass
class ProgramShape:
    """Parameter shapes (with names) and the result shape of a computation."""

    parameters: list[Shape]
    result: Shape
    parameter_names: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        names = self.parameter_names or ["(unknown)"] * len(self.parameters)
        params = ", ".join(f"{n or '(unknown)'}: {s.to_string(print_layout=False)}"
                           for n, s in zip(names, self.parameters))
        return f"({params}) -> {self.result.to_string(print_layout=False)}"


class Computation:
    """A computation: instructions in order, numbered parameters, one root."""

    def __init__(self, name: str):
        self.name = name
        self._instructions: list[Instruction] = []
        # Instructions removed but still in ``_instructions`` (by id; the objects are kept
        # so that no id is reused before the list is compacted): removing one at a time
        # would cost a list scan each, quadratic over a pass that removes many.
        self._removed: dict[int, Instruction] = {}
        self.root: Instruction | None = None
        self.module: Module | None = None
        self.is_fusion_computation = False
        self.execution_thread: str | None = None
        self._uniquer = NameUniquer()

    @property
    def instructions(self) -> list[Instruction]:
        """The instructions in order (a list owned by the computation; compacted in place
        after removals)."""
        if self._removed:
            removed = self._removed
            self._instructions[:] = [i for i in self._instructions if id(i) not in removed]
            removed.clear()
        return self._instructions

    @instructions.setter
    def instructions(self, value: list[Instruction]) -> None:
        self._instructions = list(value)
        self._removed.clear()

    # -- building --------------------------------------------------------------------------

    def add_instruction(self, instr: Instruction, *, uniquify: bool = True) -> Instruction:
        if instr.parent is not None:
            raise InvalidArgumentError(
                f"instruction %{instr.name} already belongs to computation %{instr.parent.name}"
            )
        if uniquify:
            instr.name = self._unique_name(instr.name)
        else:
            self._reserve_name(instr.name)
        if id(instr) in self._removed:  # added back: its old place goes first
            self.instructions  # noqa: B018 (compacts)
        instr.parent = self
        self._instructions.append(instr)
        return instr

    def _unique_name(self, name: str) -> str:
        if self.module is not None:
            return self.module.name_uniquer.get_unique_name(name)
        return self._uniquer.get_unique_name(name)

    def _reserve_name(self, name: str) -> None:
        uniquer = self.module.name_uniquer if self.module is not None else self._uniquer
        uniquer.get_unique_name(name)

    def set_root(self, instr: Instruction) -> None:
        if instr.parent is not self:
            raise InvalidArgumentError(
                f"root %{instr.name} is not an instruction of computation %{self.name}"
            )
        self.root = instr

    # -- queries ---------------------------------------------------------------------------

    @property
    def parameters(self) -> list[Instruction]:
        params = [i for i in self.instructions if i.opcode == "parameter"]
        return sorted(params, key=lambda i: i.parameter_number)

    def parameter(self, number: int) -> Instruction:
        for p in self.instructions:
            if p.opcode == "parameter" and p.parameter_number == number:
                return p
        raise InvalidArgumentError(f"computation %{self.name} has no parameter {number}")

    @property
    def num_parameters(self) -> int:
        return sum(1 for i in self.instructions if i.opcode == "parameter")

    def program_shape(self) -> ProgramShape:
        params = self.parameters
        if self.root is None:
            raise InvalidArgumentError(f"computation %{self.name} has no root")
        return ProgramShape([p.shape for p in params], self.root.shape, [p.name for p in params])

    def instruction(self, name: str) -> Instruction:
        for i in self.instructions:
            if i.name == name:
                return i
        raise InvalidArgumentError(f"computation %{self.name} has no instruction %{name}")

    def called_computations(self) -> list["Computation"]:
        seen: dict[int, Computation] = {}
        for instr in self.instructions:
            for c in instr.called_computations():
                seen.setdefault(id(c), c)
        return list(seen.values())

    def embedded_computations(self, _done: set[int] | None = None) -> list["Computation"]:
        """Every computation this one calls, directly or not, callees first (XLA's
        MakeEmbeddedComputationsList). An iterative DFS. ``_done`` (ids of computations
        already listed, whose callees are listed too) is skipped and updated in place."""
        visited: set[int] = set() if _done is None else _done
        order: list[Computation] = []
        stack: list[list] = []

        def push_called(instr: Instruction) -> None:
            for c in reversed(instr.called_computations()):
                if id(c) not in visited:
                    visited.add(id(c))
                    stack.append([c, 0])

        for instr in self.instructions:
            push_called(instr)
            while stack:
                top = stack[-1]
                comp, i = top
                instrs = comp.instructions
                if i == len(instrs):
                    stack.pop()
                    order.append(comp)
                else:
                    top[1] += 1
                    push_called(instrs[i])
        return order

    def post_order(self) -> list[Instruction]:
        """Every instruction after its operands and control predecessors, in exactly the
        order of XLA's MakeInstructionPostOrder (an iterative DFS from each user-less
        instruction in instruction order; operands visited first to last, control
        predecessors before them), so printing follows XLA's order."""
        visiting, visited = 1, 2
        state: dict[int, int] = {}
        order: list[Instruction] = []
        for start in self.instructions:
            if any(u.parent is self for u in start.users):
                continue
            if state.get(id(start)) == visited:
                continue
            stack = [start]
            while stack:
                cur = stack[-1]
                st = state.get(id(cur))
                if st is None:
                    state[id(cur)] = visiting
                else:
                    stack.pop()
                    if st != visited:
                        state[id(cur)] = visited
                        order.append(cur)
                    continue
                for op in reversed(cur.operands):
                    if state.get(id(op)) != visited:
                        stack.append(op)
                for p in cur.control_predecessors:
                    if state.get(id(p)) != visited:
                        stack.append(p)
        return order

    # -- editing ---------------------------------------------------------------------------

    def remove_instruction(self, instr: Instruction) -> None:
        if instr.user_count:
            raise InvalidArgumentError(
                f"cannot remove %{instr.name}: it is used by "
                + ", ".join("%" + u.name for u in instr.users)
            )
        if instr is self.root:
            raise InvalidArgumentError(f"cannot remove %{instr.name}: it is the root of %{self.name}")
        if instr.parent is not self:
            raise InvalidArgumentError(
                f"cannot remove %{instr.name}: it is not an instruction of %{self.name}")
        for op in instr.operands:
            if id(instr) in op._user_ids:
                op._drop_user(instr)
        instr.drop_all_control_deps()
        self._removed[id(instr)] = instr
        instr.parent = None

    def remove_dead_instructions(self, keep: Callable[[Instruction], bool] | None = None) -> int:
        """Remove instructions that have no users, are not the root, are not parameters and
        have no side effect (``keep`` can protect more), and those that become so. Returns
        how many were removed. One pass over the instructions and a worklist (an operand
        becomes dead when its last user goes)."""

        def dead(instr: Instruction) -> bool:
            return not (
                instr is self.root
                or instr.user_count
                or instr.opcode == "parameter"
                or instr.has_side_effect
                or instr.control_successors
                or (keep is not None and keep(instr))
            )

        removed = 0
        work = [i for i in self.instructions if dead(i)]  # popped last first
        while work:
            instr = work.pop()
            if instr.parent is not self or not dead(instr):
                continue
            operands = list(instr.operands)
            self.remove_instruction(instr)
            removed += 1
            for op in reversed(operands):
                if op.parent is self and dead(op):
                    work.append(op)
        return removed

    def replace_instruction(self, old: Instruction, new: Instruction) -> None:
        """Replace all uses of ``old`` by ``new`` (adding ``new`` if needed) and remove ``old``."""
        if new.parent is None:
            self.add_instruction(new)
        old.replace_all_uses_with(new)
        for p in list(old.control_predecessors):
            p.add_control_dependency_to(new)
        for s in list(old.control_successors):
            new.add_control_dependency_to(s)
        old.drop_all_control_deps()
        self.remove_instruction(old)

    def clone(self, suffix: str = "clone", computation_map: dict | None = None) -> "Computation":
        """A deep copy; called computations are shared unless ``computation_map`` maps them."""
        computation_map = computation_map or {}
        new = Computation(f"{self.name}.{suffix}" if suffix else self.name)
        new.is_fusion_computation = self.is_fusion_computation
        new.execution_thread = self.execution_thread
        mapping: dict[int, Instruction] = {}
        for instr in self.post_order():
            copy = instr.clone([mapping[id(o)] for o in instr.operands], computation_map)
            mapping[id(instr)] = copy
            new.add_instruction(copy, uniquify=False)
        for instr in self.instructions:
            for p in instr.control_predecessors:
                mapping[id(p)].add_control_dependency_to(mapping[id(instr)])
        # Keep the original instruction order.
        new.instructions = [mapping[id(i)] for i in self.instructions]
        if self.root is not None:
            new.root = mapping[id(self.root)]
        return new

    def __repr__(self) -> str:
        return f"<Computation %{self.name} ({len(self.instructions)} instructions)>"


class Module:
    """An HLO module: computations (callees before callers), the entry computation, and the
    module-level configuration XLA prints in the ``HloModule`` header."""

    def __init__(self, name: str):
        self.name = name
        self.computations: list[Computation] = []
        self.entry: Computation | None = None
        self.name_uniquer = NameUniquer()
        self.computation_uniquer = NameUniquer()
        # Header attributes (replica_count, num_partitions, is_scheduled,
        # entry_computation_layout, input_output_alias, buffer_donor, frontend_attributes...),
        # typed where xlapy interprets them and kept as text otherwise.
        self.config: dict[str, Any] = {}
        self.extras: dict[str, Any] = {}

    @property
    def replica_count(self) -> int:
        return int(self.config.get("replica_count", 1))

    @property
    def num_partitions(self) -> int:
        return int(self.config.get("num_partitions", 1))

    def add_computation(self, comp: Computation, *, entry: bool = False, uniquify: bool = True) -> Computation:
        if comp.module is not None and comp.module is not self:
            raise InvalidArgumentError(f"computation %{comp.name} belongs to another module")
        if uniquify:
            comp.name = self.computation_uniquer.get_unique_name(comp.name)
            for instr in comp.instructions:
                instr.name = self.name_uniquer.get_unique_name(instr.name)
        else:
            self.computation_uniquer.get_unique_name(comp.name)
            for instr in comp.instructions:
                self.name_uniquer.get_unique_name(instr.name)
        comp.module = self
        self.computations.append(comp)
        if entry:
            self.entry = comp
        return comp

    def computation(self, name: str) -> Computation:
        for c in self.computations:
            if c.name == name:
                return c
        raise InvalidArgumentError(f"module {self.name} has no computation %{name}")

    def post_order_computations(self) -> list[Computation]:
        """Callees before callers: the module's computations in their stored order (text
        order for a parsed module, creation order for a built one), each preceded by any
        computation it calls that has not come yet (its embedded computations, in XLA's
        MakeEmbeddedComputationsList order). A parsed module prints back in its own order.
        Linear: a computation listed already has its callees listed before it, so the walk
        from each computation stops there."""
        added: set[int] = set()
        order: list[Computation] = []
        for c in self.computations:
            if id(c) in added:
                continue
            order.extend(c.embedded_computations(added))
            added.add(id(c))
            order.append(c)
        return order

    def instructions(self) -> Iterator[Instruction]:
        for c in self.computations:
            yield from c.instructions

    def remove_unused_computations(self) -> int:
        reachable = set()
        if self.entry is not None:
            stack = [self.entry]
            while stack:
                c = stack.pop()
                if id(c) in reachable:
                    continue
                reachable.add(id(c))
                stack.extend(c.called_computations())
        before = len(self.computations)
        self.computations = [c for c in self.computations if id(c) in reachable]
        return before - len(self.computations)

    def clone(self, suffix: str = "clone") -> "Module":
        new = Module(f"{self.name}-{suffix}" if suffix else self.name)
        new.config = dict(self.config)
        new.extras = dict(self.extras)
        cmap: dict[int, Computation] = {}
        for comp in self.post_order_computations():
            copy = comp.clone(suffix="", computation_map=cmap)
            copy.name = comp.name
            cmap[id(comp)] = copy
        for comp in self.computations:
            if id(comp) in cmap:
                new.add_computation(cmap[id(comp)], entry=comp is self.entry, uniquify=False)
        return new

    def to_string(self, **options) -> str:
        """XLA's text for this module: ``m.to_string(print_operand_shape=True,
        print_large_constants=True)`` for the long form (XLA's HloPrintOptions names)."""
        from xlapy.hlo.printer import module_to_string

        return module_to_string(self, **options)

    def __str__(self) -> str:
        return self.to_string()

    def __repr__(self) -> str:
        return f"<Module {self.name} ({len(self.computations)} computations)>"


def callees_first(roots: Iterable[Computation], seen: set[int] | None = None) -> list[Computation]:
    """``roots`` and every computation they call, directly or not, each after the ones it
    calls: a depth-first post order (callees in the order their callers name them, as a
    recursive walk would give), walked with a stack so a call chain of any depth needs no
    recursion. A computation reached again while it is being walked (a cycle, which HLO
    forbids) is not entered twice. ``seen`` (ids, updated in place) are left out with what
    they call: a caller walking a module piece by piece passes the same set each time."""
    seen = set() if seen is None else seen
    order: list[Computation] = []
    for root in roots:
        if id(root) in seen:
            continue
        seen.add(id(root))
        stack = [(root, iter(root.called_computations()))]
        while stack:
            comp, callees = stack[-1]
            for callee in callees:
                if id(callee) not in seen:
                    seen.add(id(callee))
                    stack.append((callee, iter(callee.called_computations())))
                    break
            else:
                stack.pop()
                order.append(comp)
    return order


def is_computation_kind(kind) -> bool:
    return isinstance(kind, (ComputationKind, ComputationListKind))

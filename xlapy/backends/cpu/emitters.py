"""The CPU backend's emitters as tables: what each emitter compiles, keyed by (opcode, type
class), how it plans what it compiles, and why an instruction runs on the interpreter.

Every emitter has ONE table: ``(opcode, type class) -> Entry(check, plan)``, where the type
class is ``float`` (f32, f64 and the narrow floats, computed as the element generators do),
``signed``, ``unsigned``, ``pred`` or ``complex``, taken from the instruction's first array
operand (a compare or convert is classed by what it reads), else from its result; an entry
under ``ANY`` stands for every class (and for element types no generator computes: tokens).
"The emitter handles this opcode on this type class" is a lookup; ``check(instr)`` then
says None (it compiles) or what in this instruction it cannot emit (layout of operands, an
attribute, a comparator), at plan time; ``plan(planner, instr)`` makes the step (its kernel
goes into the planner's LLVM module). The checks are the emitters' own predicates and the
plans call the emitters' own ``emit``, so the two cannot drift apart.

``resolve(instr)`` is the one lookup the planner dispatches on (``Planner._step``: after
its structural cases - constants, aliases, control flow, fusions): the tables in
``tables()``'s order, the first whose check passes plans the instruction. ``explain(instr)``
is the same lookup's record for an instruction no table takes: the reasons of the tables
with an entry for it (a check returning ``OTHER`` says a custom call of another target is
not its emitter's), or that no emitter has an entry for its (opcode, type class).
``CpuProgram.interpreted()`` lists them per program.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from xlapy.backends.cpu import elemental as el
from xlapy.backends.cpu import indexing

CLASSES = ("float", "signed", "unsigned", "pred", "complex")
#: The class of an entry for every type class (and for element types without one).
ANY = "*"
_KIND = {"f": "float", "s": "signed", "u": "unsigned", "p": "pred", "c": "complex"}


#: What a check returns for an instruction that is not of its emitter's kind at all (a custom
#: call of another target): the table then has no entry for it.
OTHER = object()


@dataclass(frozen=True)
class Unsupported:
    """Why an emitter does not compile an instruction."""

    reason: str

    def __str__(self) -> str:
        return self.reason


@dataclass(frozen=True)
class Entry:
    """One (opcode, type class) an emitter handles. ``check(instr)``: None or True when it
    compiles ``instr``, False, a reason string or an ``Unsupported`` when not, ``OTHER``
    when ``instr`` is not its kind; ``plan(planner, instr)``: the step (only after the check
    passed)."""

    check: Callable
    plan: Callable


def type_class(instr) -> str | None:
    """The type class of ``instr`` (see the module docstring); None for element types no
    generator computes (tokens, tuples of them, s4 containers of other backends...)."""
    for o in instr.operands:
        if o.shape.is_array():
            return _class_of(o.shape.element_type)
    shape = instr.shape
    if shape.is_tuple():
        leaves = [leaf for _, leaf in shape.leaves()]
        shape = leaves[0] if leaves else shape
    return _class_of(shape.element_type) if shape.is_array() else None


def _class_of(et) -> str | None:
    entry = el.TYPES.get(et)
    return _KIND.get(entry[0]) if entry else None


class Table:
    """One emitter's table: ``entries[(opcode, type class)] = Entry``."""

    def __init__(self, name: str, entries: dict):
        self.name = name
        self.entries = entries

    def has(self, opcode: str, cls: str | None) -> bool:
        return (opcode, cls) in self.entries or (opcode, ANY) in self.entries

    def entry(self, instr) -> Entry | None:
        """The entry for ``instr``'s (opcode, type class), or None."""
        entries = self.entries
        got = entries.get((instr.opcode, type_class(instr)))
        return got if got is not None else entries.get((instr.opcode, ANY))

    def verdict(self, instr):
        """None when this emitter compiles ``instr``; ``OTHER`` when it has no entry for
        it; else the ``Unsupported`` saying why not."""
        entry = self.entry(instr)
        got = OTHER if entry is None else entry.check(instr)
        if got is OTHER:
            return OTHER
        if got is None or got is True:
            return None
        if got is False:
            return Unsupported(f"{self.name}: {instr.opcode} with these operand and result "
                               f"types ({_types(instr)}) is not generated")
        return got if isinstance(got, Unsupported) else Unsupported(f"{self.name}: {got}")

    def claims(self, instr) -> bool:
        """The table has an entry for ``instr``'s (opcode, type class) and its check does
        not say the instruction is of another kind (``OTHER``)."""
        return self.verdict(instr) is not OTHER

    def check(self, instr) -> Unsupported | None:
        """None when this emitter compiles ``instr``, else why not."""
        got = self.verdict(instr)
        if got is OTHER:
            return Unsupported(f"{self.name}: no entry for ({instr.opcode}, "
                               f"{type_class(instr)})")
        return got

    def plan(self, planner, instr):
        """The step of ``instr`` (``check`` passed)."""
        return self.entry(instr).plan(planner, instr)


def _types(instr) -> str:
    ins = ", ".join(str(o.shape) for o in instr.operands)
    return f"({ins}) -> {instr.shape}"


def _entries(opcodes, classes, check, plan) -> dict:
    entry = Entry(check, plan)
    return {(op, cls): entry for op in opcodes for cls in classes}


# -- the tables ---------------------------------------------------------------------------------


def generated(instr) -> bool:
    """Whether an element generator computes ``instr`` (a member of a loop kernel: an
    elementwise or data-movement op, an iota, a constant)."""
    if instr.opcode == "constant":
        return instr.shape.is_array() and instr.shape.element_type in el.TYPES
    return _table("elemental").entry(instr) is not None and _generator(instr)


def _generator(instr) -> bool:
    if instr.opcode in indexing.GENERATORS:
        return indexing.supports(instr)
    return el.supports(instr)


def _elemental_table() -> Table:
    def check(instr):  # one instruction as a loop kernel of its own
        shape = instr.shape
        if not shape.is_array() or shape.element_type not in el.TYPES:
            return "the result is not an array of a generated element type"
        if instr.called_computations():
            return "it calls computations"
        return _generator(instr)

    def plan(planner, instr):
        return planner.elementwise_kernel(instr)

    e = {}
    ops = {"float": el.FLOAT_UNARY | el.FLOAT_BINARY,
           "signed": el.INT_UNARY | el.INT_BINARY, "unsigned": el.INT_UNARY | el.INT_BINARY,
           "pred": el.PRED_UNARY | set(el.PRED_BINARY),
           "complex": el.COMPLEX_UNARY | el.COMPLEX_BINARY}
    for cls, opcodes in ops.items():
        e.update(_entries(opcodes, [cls], check, plan))
    shared = {"compare", "select", "clamp", "convert", "bitcast-convert", "reduce-precision",
              "complex", "stochastic-convert"}
    e.update(_entries(shared, CLASSES, check, plan))
    e.update(_entries(indexing.GENERATORS, CLASSES, check, plan))
    e.update(_entries(["iota"], CLASSES, check, plan))
    return Table("elemental", e)


def _reduction_table() -> Table:
    from xlapy.backends.cpu import reduction

    def check(instr):
        return reduction.supports(instr)

    def plan(planner, instr):
        return planner.reduction_kernel(instr)

    return Table("reduction", _entries(["reduce", "reduce-window"], CLASSES, check, plan))


def _sort_table() -> Table:
    from xlapy.backends.cpu import library, sort
    from xlapy.backends.cpu.steps import KernelStep, KeyedSortStep

    def sort_check(instr):
        return sort.sort_support(instr)

    def sort_plan(planner, instr):
        # the library's NumPy key sort where the kernel has no radix path for the comparator
        keyed = library.supports(instr) and sort.radix_keys(instr) is None
        step = KeyedSortStep if keyed else KernelStep
        return planner.instruction_kernel(instr, sort.emit_sort, step)

    def topk_check(instr):
        got = sort.topk_form(instr)
        return got if isinstance(got, str) else None

    def topk_call_check(instr):
        if instr.attrs.get("custom_call_target") != "TopK":
            return OTHER
        return topk_check(instr)

    def topk_plan(planner, instr):
        return planner.instruction_kernel(instr, sort.emit_topk)

    e = _entries(["sort"], CLASSES, sort_check, sort_plan)
    e.update(_entries(["topk"], CLASSES, topk_check, topk_plan))
    e.update(_entries(["custom-call"], CLASSES, topk_call_check, topk_plan))
    return Table("sort", e)


def _gather_scatter_table() -> Table:
    from xlapy.backends.cpu import gather_scatter

    def check(instr):
        return gather_scatter.supports(instr)

    def plan(planner, instr):
        return planner.instruction_kernel(instr, gather_scatter.emit)

    return Table("gather_scatter", _entries(gather_scatter.OPCODES, CLASSES, check, plan))


def _gemm_table() -> Table:
    from xlapy.backends.cpu import gemm_kernel

    def check(instr):
        got = gemm_kernel.form(instr)
        return None if isinstance(got, gemm_kernel.Form) else got

    def plan(planner, instr):
        return planner.instruction_kernel(instr, gemm_kernel.emit)

    return Table("gemm_kernel", _entries(["dot"], ["float", "signed", "unsigned"], check, plan))


def _library_table() -> Table:
    from xlapy.backends.cpu import lapack_calls, library
    from xlapy.backends.cpu.steps import LibraryStep

    def check(instr):
        return library.supports(instr)

    def lapack_check(instr):
        if not lapack_calls.is_lapack_target(instr):
            return OTHER
        got = lapack_calls.form(instr)
        return got if isinstance(got, str) else None

    def plan(planner, instr):
        return LibraryStep(instr)

    e = _entries(["dot", "convolution"], CLASSES, check, plan)
    e.update(_entries(["fft", "cholesky", "triangular-solve"], ["float", "complex"], check,
                      plan))
    e.update(_entries(["custom-call"], CLASSES, lapack_check, plan))
    e.update(_entries(["sort"], CLASSES, check, plan))
    return Table("library", e)


def _rng_table() -> Table:
    from xlapy.backends.cpu import rng_kernel

    def check(instr):
        return rng_kernel.supports(instr)

    def plan(planner, instr):
        return planner.instruction_kernel(instr, rng_kernel.emit)

    return Table("rng", _entries(["rng-bit-generator"], CLASSES, check, plan))


def _collectives_table() -> Table:
    from xlapy.backends.cpu import collectives

    def check(instr):  # every form: native code, or the runtime's collectives (the step
        return None  # records why it has no native code: CpuProgram.interpreted())

    def plan(planner, instr):
        return collectives.plan_step(planner, instr)

    return Table("collectives", _entries(collectives.OPCODES, [ANY], check, plan))


_TABLES: list[Table] = []


def _tables() -> list[Table]:
    if not _TABLES:
        _TABLES.extend([_collectives_table(), _gather_scatter_table(), _elemental_table(),
                        _reduction_table(), _sort_table(), _rng_table(), _gemm_table(),
                        _library_table()])
    return _TABLES


def _table(name: str) -> Table:
    for table in _tables():
        if table.name == name:
            return table
    raise KeyError(name)


def tables() -> list[Table]:
    """Every emitter's table, in the planner's order of preference."""
    return list(_tables())


#: What the planner plans itself, before the tables (``Planner._step``: constants, aliases,
#: control flow, fusions).
STRUCTURAL = frozenset({"parameter", "constant", "tuple", "get-tuple-element", "opt-barrier",
                        "while", "call", "conditional", "fusion", "reshape", "bitcast"})


@dataclass
class Resolution:
    """What the tables say about one instruction: the table that plans it (None: none
    does), and the reasons of the tables with an entry that declined it."""

    table: Table | None
    reasons: list = field(default_factory=list)

    def reason(self, instr) -> str:
        """Why no table plans ``instr`` (the interpreter runs it)."""
        if self.table is not None:
            return f"{self.table.name} compiles it, but not in this context"
        if self.reasons:
            return "; ".join(self.reasons)
        if instr.opcode == "custom-call":
            return (f"custom-call target {instr.attrs.get('custom_call_target')!r}: no "
                    f"emitter compiles it (the registered target runs)")
        return f"no emitter has an entry for ({instr.opcode}, {type_class(instr)})"


def resolve(instr) -> Resolution:
    """The first table (in ``tables()``'s order) whose entry for ``instr`` passes its
    check, with the reasons of the tables before it that declined."""
    reasons = []
    for table in _tables():
        got = table.verdict(instr)
        if got is None:
            return Resolution(table, reasons)
        if got is not OTHER:
            reasons.append(str(got))
    return Resolution(None, reasons)


def dynamic(instr) -> bool:
    """Whether ``instr`` or an operand has a dynamic shape (for a fusion: anywhere in it)."""
    if instr.shape.is_dynamic() or any(o.shape.is_dynamic() for o in instr.operands):
        return True
    if instr.opcode == "fusion":
        return any(dynamic(i) for i in instr.attrs["calls"].instructions)
    return False


DYNAMIC = "dynamic shapes: the interpreter tracks runtime sizes"


def explain(instr) -> str:
    """Why the planner leaves ``instr`` to the interpreter (``resolve``'s reasons)."""
    if dynamic(instr):
        return DYNAMIC
    return resolve(instr).reason(instr)


__all__ = ["ANY", "CLASSES", "DYNAMIC", "OTHER", "STRUCTURAL", "Entry", "Resolution", "Table",
           "Unsupported", "dynamic", "explain", "generated", "resolve", "tables", "type_class"]

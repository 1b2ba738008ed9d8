"""The CPU backend's emitters as tables: what each emitter compiles, keyed
by (opcode, type class), and why an instruction runs on the interpreter.

Every emitter has ONE table: ``(opcode, type class) -> check``, where the type class is
``float`` (f32, f64 and the narrow floats, computed as the element generators do),
``signed``, ``unsigned``, ``pred`` or ``complex``, taken from the instruction's first array
operand (a compare or convert is classed by what it reads), else from its result. "The
emitter handles this opcode on this type class" is a lookup; ``check(instr)`` then returns
None (it compiles) or an ``Unsupported`` saying what in this instruction it cannot emit
(layout of operands, an attribute, a comparator), at plan time. The tables are built from
the same sets the emitters dispatch on (``elemental.FLOAT_UNARY``..., ``indexing.GENERATORS``)
and their checks are the emitters' own predicates, so the two cannot drift apart.

``explain(instr)`` is the planner's record for an instruction it leaves to the interpreter:
the reasons of the tables with an entry for the instruction (a check returning ``OTHER``
says a custom call of another target is not its emitter's), or that no emitter has an entry
for its (opcode, type class). ``CpuProgram.interpreted()`` lists them per program.
"""

from __future__ import annotations

from dataclasses import dataclass

from xlapy.backends.cpu import elemental as el
from xlapy.backends.cpu import indexing

CLASSES = ("float", "signed", "unsigned", "pred", "complex")
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
    """One emitter's table: ``entries[(opcode, type class)] = check``."""

    def __init__(self, name: str, entries: dict):
        self.name = name
        self.entries = entries

    def has(self, opcode: str, cls: str | None) -> bool:
        return (opcode, cls) in self.entries

    def claims(self, instr) -> bool:
        """The table has an entry for ``instr``'s (opcode, type class) and its check does
        not say the instruction is of another kind (``OTHER``)."""
        fn = self.entries.get((instr.opcode, type_class(instr)))
        return fn is not None and fn(instr) is not OTHER

    def check(self, instr) -> Unsupported | None:
        """None when this emitter compiles ``instr``, else why not."""
        fn = self.entries.get((instr.opcode, type_class(instr)))
        got = OTHER if fn is None else fn(instr)
        if got is OTHER:
            return Unsupported(f"{self.name}: no entry for ({instr.opcode}, "
                               f"{type_class(instr)})")
        if got is None or got is True:
            return None
        if got is False:
            return Unsupported(f"{self.name}: {instr.opcode} with these operand and result "
                               f"types ({_types(instr)}) is not generated")
        return got if isinstance(got, Unsupported) else Unsupported(f"{self.name}: {got}")


def _types(instr) -> str:
    ins = ", ".join(str(o.shape) for o in instr.operands)
    return f"({ins}) -> {instr.shape}"


def _entries(opcodes, classes, check) -> dict:
    return {(op, cls): check for op in opcodes for cls in classes}


# -- the tables ---------------------------------------------------------------------------------


def _elemental_table() -> Table:
    def gen(instr):
        if instr.opcode in indexing.GENERATORS:
            return indexing.supports(instr)
        return el.supports(instr)

    e = {}
    e.update(_entries(el.FLOAT_UNARY | el.FLOAT_BINARY, ["float"], gen))
    e.update(_entries(el.INT_UNARY | el.INT_BINARY, ["signed", "unsigned"], gen))
    e.update(_entries(el.PRED_UNARY | set(el.PRED_BINARY), ["pred"], gen))
    e.update(_entries(el.COMPLEX_UNARY | el.COMPLEX_BINARY, ["complex"], gen))
    shared = {"compare", "select", "clamp", "convert", "bitcast-convert", "reduce-precision",
              "complex", "stochastic-convert"}
    e.update(_entries(shared, CLASSES, gen))
    e.update(_entries(indexing.GENERATORS, CLASSES, gen))
    e.update(_entries(["iota", "constant"], CLASSES, gen))
    return Table("elemental", e)


def _reduction_table() -> Table:
    from xlapy.backends.cpu import reduction

    def check(instr):
        return reduction.supports(instr)

    return Table("reduction", _entries(["reduce", "reduce-window"], CLASSES, check))


def _sort_table() -> Table:
    from xlapy.backends.cpu import sort

    def sort_check(instr):
        return sort.sort_support(instr)

    def topk_check(instr):
        got = sort.topk_form(instr)
        return got if isinstance(got, str) else None

    def topk_call_check(instr):
        if instr.attrs.get("custom_call_target") != "TopK":
            return OTHER
        return topk_check(instr)

    e = _entries(["sort"], CLASSES, sort_check)
    e.update(_entries(["topk"], CLASSES, topk_check))
    e.update(_entries(["custom-call"], CLASSES, topk_call_check))
    return Table("sort", e)


def _gather_scatter_table() -> Table:
    from xlapy.backends.cpu import gather_scatter

    def check(instr):
        return gather_scatter.supports(instr)

    return Table("gather_scatter", _entries(gather_scatter.OPCODES, CLASSES, check))


def _library_table() -> Table:
    from xlapy.backends.cpu import lapack_calls, library

    def check(instr):
        return library.supports(instr)

    def lapack_check(instr):
        if not lapack_calls.is_lapack_target(instr):
            return OTHER
        got = lapack_calls.form(instr)
        return got if isinstance(got, str) else None

    e = _entries(["dot", "convolution", "fft"], ["float", "complex"], check)
    e.update(_entries(["custom-call"], CLASSES, lapack_check))
    e.update(_entries(["dot"], ["signed", "unsigned", "pred"], check))
    e.update(_entries(["cholesky", "triangular-solve"], ["float", "complex"], check))
    e.update(_entries(["sort"], CLASSES, check))
    return Table("library", e)


def _rng_table() -> Table:
    from xlapy.backends.cpu import rng_kernel

    def check(instr):
        return rng_kernel.supports(instr)

    return Table("rng", _entries(["rng-bit-generator"], CLASSES, check))


_TABLES: list[Table] = []


def tables() -> list[Table]:
    """Every emitter's table, in the planner's order of preference."""
    if not _TABLES:
        _TABLES.extend([_elemental_table(), _reduction_table(), _gather_scatter_table(),
                        _sort_table(), _rng_table(), _library_table()])
    return _TABLES


#: What the planner runs itself (no emitter: control flow, aliases, constants).
STRUCTURAL = frozenset({"parameter", "constant", "tuple", "get-tuple-element", "while",
                        "call", "conditional", "fusion", "reshape", "bitcast"})


def explain(instr) -> str:
    """Why the planner left ``instr`` to the interpreter (the first table with an entry for
    its (opcode, type class) gives its emitter's reason)."""
    if instr.shape.is_dynamic() or any(o.shape.is_dynamic() for o in instr.operands):
        return "dynamic shapes: the interpreter tracks runtime sizes"
    cls = type_class(instr)
    reasons = []
    for table in tables():
        if table.claims(instr):
            got = table.check(instr)
            if got is None:  # the emitter takes it: the planner declined for its own reason
                return f"{table.name} compiles it, but not in this context"
            reasons.append(str(got))
    if reasons:
        return "; ".join(reasons)
    if instr.opcode == "custom-call":
        return f"custom-call target {instr.attrs.get('custom_call_target')!r}: no emitter " \
               f"compiles it (the registered target runs)"
    return f"no emitter has an entry for ({instr.opcode}, {cls})"


__all__ = ["CLASSES", "OTHER", "STRUCTURAL", "Table", "Unsupported", "explain", "tables",
           "type_class"]

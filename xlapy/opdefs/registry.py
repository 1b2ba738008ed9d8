"""The op registry: one OpDef per HLO opcode.

Owns: OpDef (text spelling, arity, attribute schema, traits, THE shape rule), the registry,
``make_instruction`` (check attributes, run the shape rule, build an Instruction carrying
its schema) used by the builder, the parser, the passes and the backends, and ShapeError.
Kernels and element generators live in the layers that run them (the interpreter's
``KERNELS``, the CPU backend's generators), keyed by opcode. Imports the shape and hlo
layers; never a kernel, a backend, the builder or the parser.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, NoReturn, Sequence

from xlapy.errors import InvalidArgumentError
from xlapy.hlo.attrs import Attrs, AttrSpec
from xlapy.hlo.ir import Instruction
from xlapy.hlo.opcodes import ARITY, OPCODE_NAMES, SIDE_EFFECTING_OPCODES
from xlapy.shape import Shape


class ShapeError(InvalidArgumentError):
    """A shape rule rejected its operands or attributes. The message starts with the
    opcode, states the violated constraint and shows the shapes in HLO syntax."""


class ParserCheckError(ShapeError):
    """A check XLA's parser itself makes (operand counts, a conditional's branch index, an
    infeed's tuple shape...), not only its verifier: raised even where the parser leaves
    shape checks to the verifier (``parse_hlo_module(text, verify=False)``)."""


# Traits (sets of opcodes, tinygrad-style, are derived from these).
ELEMENTWISE = "elementwise"
UNARY = "unary"
BINARY = "binary"
TERNARY = "ternary"
COMPARISON = "comparison"
RESULT_ACCURACY = "result_accuracy"  # takes result_accuracy= (IsUnaryOpWithResultAccuracy)
SIDE_EFFECTING = "side_effecting"
CALLS_COMPUTATIONS = "calls_computations"
COLLECTIVE = "collective"
ASYNC = "async"


@dataclass
class OpCall:
    """What a shape rule sees: the opcode, operand shapes and checked attributes."""

    opcode: str
    operands: tuple[Shape, ...]
    attrs: Attrs
    # The declared result shape, for ops whose HLO text carries information only there
    # (convert's element type, reshape's and broadcast's dimensions, iota, infeed, ...).
    result: Shape | None = None

    def fail(self, message: str, *, parser_check: bool = False) -> NoReturn:
        """Reject the op. ``parser_check``: XLA's parser makes this check too (see
        ParserCheckError), not only its verifier."""
        raise (ParserCheckError if parser_check else ShapeError)(f"{self.opcode}: {message}")

    def __getattr__(self, name: str):
        # call.dimensions is call.attrs["dimensions"]
        try:
            return self.__dict__["attrs"][name]
        except KeyError:
            raise AttributeError(name) from None


ShapeRule = Callable[[OpCall], Shape]


@dataclass
class OpDef:
    """Everything xlapy knows about one opcode."""

    opcode: str
    shape_rule: ShapeRule
    attrs: tuple[AttrSpec, ...] = ()
    traits: frozenset[str] = frozenset()
    arity: int | None = None  # from XLA's opcode table; None: variadic
    min_operands: int = 0
    doc: str = ""
    attr_by_name: dict[str, AttrSpec] = field(default_factory=dict, repr=False)
    attr_by_key: dict[str, AttrSpec] = field(default_factory=dict, repr=False)

    def __post_init__(self):
        self.attr_by_name = {a.name: a for a in self.attrs}
        self.attr_by_key = {k: a for a in self.attrs for k in a.keys}

    def has(self, trait: str) -> bool:
        return trait in self.traits

    def check_attrs(self, given: dict[str, Any]) -> Attrs:
        """Validate and normalise attribute values; fill defaults; reject unknown names."""
        values: dict[str, Any] = {}
        for name in given:
            if name not in self.attr_by_name:
                allowed = ", ".join(self.attr_by_name) or "none"
                raise InvalidArgumentError(
                    f"{self.opcode}: unknown attribute '{name}' (allowed: {allowed})"
                )
        for spec in self.attrs:
            if spec.name in given and given[spec.name] is not None:
                values[spec.name] = spec.kind.check(
                    given[spec.name], f"{self.opcode}: attribute '{spec.name}'"
                )
            elif spec.required:
                raise InvalidArgumentError(
                    f"{self.opcode}: missing required attribute '{spec.name}'"
                )
            else:
                values[spec.name] = spec.default
        return Attrs(values)

    def check_arity(self, count: int) -> None:
        # XLA's parser reads a fixed-arity op's operands with ParseOperands(..., size).
        if self.arity is not None and count != self.arity:
            raise ParserCheckError(
                f"{self.opcode}: expects {self.arity} operand{'s' if self.arity != 1 else ''}, "
                f"got {count}"
            )
        if count < self.min_operands:
            raise ParserCheckError(f"{self.opcode}: expects at least {self.min_operands} "
                                   f"operands, got {count}")

    def infer_shape(self, operands: Sequence[Shape], attrs: Attrs, result: Shape | None = None) -> Shape:
        """Run the shape rule. ``result`` is the declared shape, if any (see OpCall.result)."""
        self.check_arity(len(operands))
        for i, s in enumerate(operands):
            if not isinstance(s, Shape):
                raise InvalidArgumentError(f"{self.opcode}: operand {i} is not a Shape: {s!r}")
        return self.shape_rule(OpCall(self.opcode, tuple(operands), attrs, result))


REGISTRY: dict[str, OpDef] = {}


def register(opdef: OpDef) -> OpDef:
    if opdef.opcode not in OPCODE_NAMES:
        raise ValueError(f"register: {opdef.opcode!r} is not an XLA opcode")
    if opdef.opcode in REGISTRY:
        raise ValueError(f"register: {opdef.opcode!r} is defined twice")
    opdef.arity = ARITY[opdef.opcode]
    if opdef.opcode in SIDE_EFFECTING_OPCODES:
        opdef.traits = opdef.traits | {SIDE_EFFECTING}
    REGISTRY[opdef.opcode] = opdef
    return opdef


def op(opcode: str, *, attrs: Sequence[AttrSpec] = (), traits: Sequence[str] = (),
       min_operands: int = 0, doc: str = ""):
    """Decorator: the decorated function is the opcode's shape rule.

        @op("reverse", attrs=[AttrSpec("dimensions", IntListKind())])
        def _reverse(call): ...
    """

    def wrap(rule: ShapeRule) -> ShapeRule:
        register(OpDef(opcode, rule, tuple(attrs), frozenset(traits), min_operands=min_operands,
                       doc=doc or (rule.__doc__ or "").strip()))
        return rule

    return wrap


def get_opdef(opcode: str) -> OpDef:
    _load_families()
    try:
        return REGISTRY[opcode]
    except KeyError:
        if opcode in OPCODE_NAMES:
            raise InvalidArgumentError(f"opcode '{opcode}' has no op definition") from None
        raise InvalidArgumentError(f"unknown opcode '{opcode}'") from None


def all_opdefs() -> dict[str, OpDef]:
    _load_families()
    return dict(REGISTRY)


def make_instruction(
    opcode: str,
    operands: Sequence[Instruction],
    attrs: dict[str, Any] | None = None,
    *,
    shape: Shape | None = None,
    name: str | None = None,
    check_shape: bool = True,
    **data,
) -> Instruction:
    """Check attributes, run the shape rule, and build the instruction.

    A given ``shape`` must be compatible with the inferred one (the parser passes the text's
    shape, which may carry a layout); otherwise the inferred shape is used.
    ``check_shape=False`` (XLA's unverified parser): a given shape is kept even when the
    shape rule infers another or rejects the operands, except for the checks XLA's parser
    makes itself (ParserCheckError); verify_module reports the rest.
    """
    opdef = get_opdef(opcode)
    checked = opdef.check_attrs(attrs or {})
    shape = _result_shape(opdef, operands, checked, shape, check_shape)
    return Instruction(opcode, shape, operands, checked, name, attr_specs=opdef.attrs, **data)


def result_shape(opcode: str, operands: Sequence[Instruction], attrs: dict[str, Any],
                 shape: Shape | None = None, *, check_shape: bool = True) -> Shape:
    """The result shape make_instruction would give the op on ``operands`` (``shape``
    checked against the shape rule, as there): for an instruction copied with new operands
    or a new shape (``Instruction.clone``)."""
    opdef = get_opdef(opcode)
    return _result_shape(opdef, operands, opdef.check_attrs(attrs), shape, check_shape)


def _result_shape(opdef: OpDef, operands, checked: dict, shape: Shape | None,
                  check_shape: bool) -> Shape:
    if not check_shape and shape is not None:
        try:
            opdef.infer_shape([o.shape for o in operands], checked, shape)
        except ParserCheckError:
            raise
        except ShapeError:
            pass
        return shape
    inferred = opdef.infer_shape([o.shape for o in operands], checked, shape)
    if shape is None:
        return inferred
    if not shape.compatible(inferred) or (shape.is_tuple() != inferred.is_tuple()):
        raise ShapeError(
            f"{opdef.opcode}: the given shape {shape} is not compatible with the inferred shape "
            f"{inferred}"
        )
    return shape


_loaded = False


def _load_families() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        import xlapy.opdefs  # noqa: F401  (registers every family)

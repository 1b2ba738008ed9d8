"""Attribute kinds: how each kind of HLO attribute value is checked, printed and read.

Owns: the AttrKind protocol, AttrSpec (one entry of an opcode's attribute schema), and the
simple kinds (integers, booleans, strings, integer lists, enums, shapes, computation
references, raw text). Structured kinds live beside this file (enums.py, window.py,
dims.py, collective.py, ...), each owning its own text syntax. Imports only the shape layer.

Every value an attribute holds is immutable and hashable. A kind may cover several text
keys (dot dimension numbers print as ``lhs_batch_dims=..., lhs_contracting_dims=...``):
such a kind lists them in ``keys`` and implements ``items``/``read_key``/``assemble``.
"""

from __future__ import annotations

import contextvars
import operator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from xlapy.errors import InvalidArgumentError
from xlapy.shape import Shape
from xlapy.shape.text import Scanner, read_shape_in


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


#: Default of an attribute that must be given.
REQUIRED: Any = _Required()


class AttrKind:
    """Base class: a kind of attribute value with one text syntax.

    Single-key kinds implement ``check``, ``to_text`` and ``read``. Multi-key kinds set
    ``keys`` and override ``items``, ``read_key`` and ``assemble``.
    """

    name = "value"
    keys: tuple[str, ...] | None = None  # None: the AttrSpec's name is the only key

    def check(self, value, where: str):
        """Return the normalised (immutable) value, or raise InvalidArgumentError naming
        ``where`` (e.g. ``"slice: attribute 'slice'"``)."""
        return value

    def to_text(self, value) -> str:
        raise NotImplementedError(f"{type(self).__name__}.to_text")

    def read(self, sc: Scanner, ctx) -> Any:
        raise NotImplementedError(f"{type(self).__name__}.read")

    # -- multi-key protocol (defaults serve single-key kinds) ------------------------------

    def spec_keys(self, spec_name: str) -> tuple[str, ...]:
        return self.keys if self.keys is not None else (spec_name,)

    def items(self, spec_name: str, value) -> list[tuple[str, str]]:
        """(key, value text) pairs to print, in XLA's order."""
        return [(spec_name, self.to_text(value))]

    def read_key(self, key: str, sc: Scanner, ctx) -> Any:
        return self.read(sc, ctx)

    def assemble(self, spec_name: str, parts: dict[str, Any], where: str):
        """Build the value from the parts read per key (only keys that were present)."""
        return parts[spec_name]


@dataclass(frozen=True)
class AttrSpec:
    """One attribute of an opcode: its name (the text key for single-key kinds), kind and
    default (``REQUIRED`` when it must be given; a value that is omitted from the text
    when the attribute equals it)."""

    name: str
    kind: AttrKind
    default: Any = REQUIRED
    doc: str = ""
    in_parens: bool = False  # printed inside the operand parentheses: constant(1), parameter(0)
    # ``omit(value, instruction) -> bool``: the printer leaves the attribute out when true,
    # for defaults that depend on the instruction (compare's type for its element type).
    omit: Any = None

    @property
    def keys(self) -> tuple[str, ...]:
        return self.kind.spec_keys(self.name)

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


# -- shared argument checks -------------------------------------------------------------------
# One place for what every integer, integer-list and list argument must be, so that the
# attribute kinds, the value types (Window, dimension numbers...) and the builder functions
# reject the same values with the same words. ``where`` names the op and the argument
# ("slice: attribute 'slice'", "Transpose: permutation").

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

#: Iterables that are not lists of values: a string iterates its characters, a mapping its
#: keys and a set in no fixed order.
_NOT_A_LIST = (str, bytes, bytearray, dict, set, frozenset)


def is_int(value) -> bool:
    """Whether ``value`` is an integer (anything with ``__index__``: int, NumPy integers),
    never a bool."""
    return not isinstance(value, (bool, np.bool_)) and hasattr(value, "__index__")


def check_int(value, where: str, minimum: int | None = None) -> int:
    """``value`` as a Python int (XLA's int64), or an InvalidArgumentError naming ``where``."""
    if isinstance(value, (bool, np.bool_)):
        raise InvalidArgumentError(f"{where} must be an integer, got {value!r}")
    try:
        v = operator.index(value)
    except TypeError:
        raise InvalidArgumentError(f"{where} must be an integer, got {value!r}") from None
    if not INT64_MIN <= v <= INT64_MAX:
        raise InvalidArgumentError(f"{where} must fit in 64 bits (int64), got {v}")
    if minimum is not None and v < minimum:
        raise InvalidArgumentError(f"{where} must be >= {minimum}, got {v}")
    return v


def check_sequence(value, where: str, what: str = "a list") -> tuple:
    """The items of a list-like ``value`` (list, tuple, range, 1-D array...), or an error
    saying ``where`` must be ``what``."""
    if isinstance(value, _NOT_A_LIST) or (isinstance(value, np.ndarray) and value.ndim != 1):
        raise InvalidArgumentError(f"{where} must be {what}, got {value!r}")
    try:
        return tuple(value)
    except TypeError:
        raise InvalidArgumentError(f"{where} must be {what}, got {value!r}") from None


def check_int_list(value, where: str, minimum: int | None = None) -> tuple[int, ...]:
    """A tuple of ints (each as check_int), or an error naming ``where``."""
    items = check_sequence(value, where, "a list of integers")
    out = []
    for i, v in enumerate(items):
        if not is_int(v):
            raise InvalidArgumentError(f"{where} must be a list of integers, got {value!r}")
        out.append(check_int(v, f"{where}[{i}]", minimum))
    return tuple(out)


def check_int_tuples(value, where: str, sizes: tuple[int, ...] | None = (2,),
                     what: str = "(low, high) pairs") -> tuple[tuple[int, ...], ...]:
    """A tuple of int tuples, each of one of ``sizes`` elements (of any number when None):
    padding pairs, source-target pairs, slice ranges..., or an error naming ``where``."""
    out = []
    for i, item in enumerate(check_sequence(value, where, f"a list of {what}")):
        if isinstance(item, _NOT_A_LIST) or not hasattr(item, "__iter__"):
            ints = None
        else:
            ints = check_int_list(item, f"{where}[{i}]")
        if ints is None or (sizes is not None and len(ints) not in sizes):
            raise InvalidArgumentError(
                f"{where} must be a list of {what}, got {item!r} at index {i}")
        out.append(ints)
    return tuple(out)


# -- simple kinds ---------------------------------------------------------------------------


class IntKind(AttrKind):
    name = "integer"

    def __init__(self, minimum: int | None = None):
        self.minimum = minimum

    def check(self, value, where):
        return check_int(value, where, self.minimum)

    def to_text(self, value) -> str:
        return str(value)

    def read(self, sc, ctx):
        return sc.read_int("an integer")


class FloatKind(AttrKind):
    name = "float"

    def check(self, value, where):
        if isinstance(value, (str, bytes)):
            raise InvalidArgumentError(f"{where} must be a number, got {value!r}")
        try:
            return float(value)
        except (TypeError, ValueError, OverflowError) as e:
            raise InvalidArgumentError(f"{where} must be a number, got {value!r}") from e

    def to_text(self, value) -> str:
        from xlapy.hlo.attrs.numbers import float_text

        return float_text(value)

    def read(self, sc, ctx):
        from xlapy.hlo.attrs.numbers import read_float

        return read_float(sc)


class BoolKind(AttrKind):
    name = "bool"

    def check(self, value, where):
        if not isinstance(value, (bool,)) and value not in (0, 1):
            raise InvalidArgumentError(f"{where} must be true or false, got {value!r}")
        return bool(value)

    def to_text(self, value) -> str:
        return "true" if value else "false"

    def read(self, sc, ctx):
        word = sc.read_ident()
        if word not in ("true", "false"):
            sc.error(f"expected true or false, found {word!r}")
        return word == "true"


class StringKind(AttrKind):
    """A double-quoted string with C escapes: ``custom_call_target="foo"``."""

    name = "string"

    def check(self, value, where):
        if not isinstance(value, str):
            raise InvalidArgumentError(f"{where} must be a string, got {value!r}")
        return value

    def to_text(self, value) -> str:
        from xlapy.hlo.attrs.numbers import c_escape

        return '"' + c_escape(value) + '"'

    def read(self, sc, ctx):
        from xlapy.hlo.attrs.numbers import read_string

        return read_string(sc)


class IntListKind(AttrKind):
    """``{1,2,3}`` (XLA prints no spaces). A tuple of ints."""

    name = "integer list"

    def __init__(self, minimum: int | None = None):
        self.minimum = minimum

    def check(self, value, where):
        return check_int_list(value, where, self.minimum)

    def to_text(self, value) -> str:
        return "{" + ",".join(str(v) for v in value) + "}"

    def read(self, sc, ctx):
        return read_int_list(sc)


def read_int_list(sc: Scanner, open_: str = "{", close: str = "}") -> tuple[int, ...]:
    sc.expect(open_, "to start a list of integers")
    out = []
    if sc.eat(close):
        return ()
    while True:
        out.append(sc.read_int("an integer"))
        if sc.eat(close):
            return tuple(out)
        sc.expect(",", f"or '{close}' in a list of integers")


class BoolListKind(AttrKind):
    """``{true,false}`` (XLA prints no spaces): parameter_replication. A tuple of bools."""

    name = "boolean list"

    def check(self, value, where):
        items = check_sequence(value, where, "a list of booleans")
        for v in items:
            if not isinstance(v, bool):
                raise InvalidArgumentError(f"{where} must be a list of booleans, got {value!r}")
        return items

    def to_text(self, value) -> str:
        return "{" + ",".join("true" if v else "false" for v in value) + "}"

    def read(self, sc, ctx):
        sc.expect("{", "to start a list of booleans")
        out = []
        if sc.eat("}"):
            return ()
        while True:
            out.append(BoolKind().read(sc, ctx))
            if sc.eat("}"):
                return tuple(out)
            sc.expect(",", "or '}' in a list of booleans")


class EnumKind(AttrKind):
    """One of a fixed set of words; values are members of a Python Enum whose ``text``
    attribute (or name) is XLA's spelling."""

    def __init__(self, enum_cls, name: str | None = None, unknown: str | None = None):
        self.enum_cls = enum_cls
        self.name = name or enum_cls.__name__
        self.unknown = unknown  # XLA's error for an unknown word ("Unknown API version")
        self.by_text = {self.to_text(m): m for m in enum_cls}

    def check(self, value, where):
        if isinstance(value, self.enum_cls):
            return value
        if isinstance(value, str):
            member = self.by_text.get(value)
            if member is None:
                member = self.by_text.get(value.lower()) or self.by_text.get(value.upper())
            if member is not None:
                return member
        allowed = ", ".join(self.by_text)
        raise InvalidArgumentError(f"{where} must be one of {allowed}; got {value!r}")

    def to_text(self, value) -> str:
        return getattr(value, "text", value.name)

    def read(self, sc, ctx):
        pos = sc.pos
        sc.skip()
        pos = sc.pos
        word = sc.read_ident()
        if word is None:
            sc.error(f"expects {self.name}, found {sc.describe_next()}", pos)
        if word not in self.by_text:  # XLA's words, then the words it knows
            error = f", error: {self.unknown}: {word}" if self.unknown else ""
            sc.error(f"expects {self.name} but sees: {word}{error} (expected one of "
                     f"{', '.join(self.by_text)})", pos)
        return self.by_text[word]


class ShapeKind(AttrKind):
    name = "shape"

    def check(self, value, where):
        if not isinstance(value, Shape):
            raise InvalidArgumentError(f"{where} must be a Shape, got {value!r}")
        return value

    def to_text(self, value) -> str:
        return str(value)

    def read(self, sc, ctx):
        return read_shape_in(sc, ctx)


#: Whether computation references print with the '%' sigil; the printer sets it for the
#: duration of one print (HloPrintOptions.print_percent).
PRINT_PERCENT: contextvars.ContextVar[bool] = contextvars.ContextVar("print_percent", default=True)


def computation_ref_text(comp) -> str:
    return ("%" if PRINT_PERCENT.get() else "") + comp.name


class ComputationKind(AttrKind):
    """A reference to a computation of the module: ``to_apply=%add``."""

    name = "computation"

    def check(self, value, where):
        if not hasattr(value, "program_shape") or not hasattr(value, "instructions"):
            raise InvalidArgumentError(f"{where} must be a computation, got {value!r}")
        return value

    def to_text(self, value) -> str:
        return computation_ref_text(value)

    def read(self, sc, ctx):
        return ctx.read_computation_ref(sc)


class ComputationListKind(AttrKind):
    """``{%a, %b}``: branch_computations, called_computations."""

    name = "computation list"

    def check(self, value, where):
        items = check_sequence(value, where, "a list of computations")
        for c in items:
            ComputationKind().check(c, where)
        return items

    def to_text(self, value) -> str:
        return "{" + ", ".join(computation_ref_text(c) for c in value) + "}"

    def read(self, sc, ctx):
        sc.expect("{", "to start a list of computations")
        out = []
        if sc.eat("}"):
            return ()
        while True:
            out.append(ctx.read_computation_ref(sc))
            if sc.eat("}"):
                return tuple(out)
            sc.expect(",", "or '}' in a list of computations")


class RawTextKind(AttrKind):
    """A value kept as its exact text (balanced braces/brackets/quotes), for attributes
    xlapy carries through without interpreting."""

    name = "raw text"

    def check(self, value, where):
        if not isinstance(value, str):
            raise InvalidArgumentError(f"{where} must be text, got {value!r}")
        return value

    def to_text(self, value) -> str:
        return value

    def read(self, sc, ctx):
        from xlapy.hlo.attrs.numbers import read_balanced

        return read_balanced(sc)


@dataclass(frozen=True)
class Attrs:
    """The checked attribute values of one instruction, by AttrSpec name; read-only.

    ``attrs["dimensions"]`` or ``attrs.dimensions``.
    """

    values: dict = field(default_factory=dict)

    def __getitem__(self, key):
        return self.values[key]

    def __getattr__(self, key):
        try:
            return self.__dict__["values"][key]
        except KeyError:
            raise AttributeError(key) from None

    def get(self, key, default=None):
        return self.values.get(key, default)

    def __contains__(self, key) -> bool:
        return key in self.values

    def items(self):
        return self.values.items()

    def __iter__(self):
        return iter(self.values)

    def __len__(self) -> int:
        return len(self.values)

    def __hash__(self) -> int:
        return hash(tuple(sorted((k, id(v) if not _hashable(v) else v) for k, v in self.values.items())))


def _hashable(v) -> bool:
    try:
        hash(v)
        return True
    except TypeError:
        return False

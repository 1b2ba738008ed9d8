"""Attribute kinds of custom-call (and of the other ops that share them: fusion and
async-start/async-update carry ``output_to_operand_aliasing`` too).

Owns:
- OUTPUT_TO_OPERAND_ALIASING: ``{{0}: (1, {}), {1}: (0, {0})}``, each entry
  ``output_shape_index: (operand_number, operand_shape_index)``; the Python value is a tuple
  of XLA's pairs ``((output_index), (operand_number, (operand_index)))``.
- SHAPE_LIST: ``operand_layout_constraints={f32[2]{0}, (s32[], f32[3]{0})}``: shapes with
  their layouts, as HloCustomCallInstruction prints them.
- PaddingType (PADDING_INVALID, PADDING_VALID, PADDING_SAME) and PADDING_TYPE:
  ``padding_type=PADDING_SAME``.
- CUSTOM_CALL_WINDOW: the window kind of xlapy.hlo.attrs.window, also taking the braced
  text ``"{size=3 pad=1_1}"`` as a Python value (as ops that build custom-calls pass it).

backend_config and frontend attributes are generic instruction fields, not kinds here.
Imports only the attribute base layer and the shape layer.
"""

from __future__ import annotations

from xlapy.errors import InvalidArgumentError
from xlapy.hlo.attrs import AttrKind, EnumKind, check_int, check_int_list
from xlapy.hlo.attrs.enums import _Texted
from xlapy.hlo.attrs.window import WindowKind
from xlapy.shape import Shape
from xlapy.shape.text import read_shape_in


def shape_index_text(index) -> str:
    """ShapeIndex::ToString: ``{}``, ``{0}``, ``{1,0}``."""
    return "{" + ",".join(str(i) for i in index) + "}"


def _read_shape_index(sc) -> tuple[int, ...]:
    sc.expect("{", "at the start of a shape index")
    out = []
    while not sc.eat("}"):
        out.append(sc.read_int("an integer in a shape index"))
        if not sc.eat(","):
            sc.expect("}", "at the end of a shape index")
            break
    return tuple(out)


def _index(value, where: str, what: str) -> tuple[int, ...]:
    """A shape index: a tuple of integers >= 0."""
    return check_int_list(value, f"{where}: {what} (a shape index)", minimum=0)


class OutputOperandAliasingKind(AttrKind):
    """``{{0}: (1, {}), {1}: (0, {0})}``: output shape index -> (operand, operand index)."""

    name = "output to operand aliasing"

    def check(self, value, where):
        try:
            entries = tuple(value)
        except TypeError:
            raise InvalidArgumentError(f"{where} must be a sequence of (output_index, "
                                       f"(operand_number, operand_index)), got {value!r}") from None
        out = []
        for entry in entries:
            try:
                output_index, (operand, operand_index) = entry
            except (TypeError, ValueError):
                raise InvalidArgumentError(
                    f"{where}: each entry must be (output_index, (operand_number, "
                    f"operand_index)), got {entry!r}") from None
            operand = check_int(operand, f"{where}: operand number", minimum=0)
            out.append((_index(output_index, where, "output index"),
                        (operand, _index(operand_index, where, "operand index"))))
        return tuple(out)

    def to_text(self, value) -> str:
        return "{" + ", ".join(
            f"{shape_index_text(out)}: ({operand}, {shape_index_text(index)})"
            for out, (operand, index) in value) + "}"

    def read(self, sc, ctx):
        form = "expected <output_shape_index>: (<operand_index>, <operand_shape_index>)"
        sc.expect("{", "at the start of an output_to_operand_aliasing list")
        out = []
        while sc.peek() != "}":
            output_index = _read_shape_index(sc)
            if not sc.eat(":") or not sc.eat("("):
                sc.error(f"{form}, found {sc.describe_next()}")
            operand = sc.read_int("an operand number")
            if not sc.eat(","):
                sc.error(f"{form}, found {sc.describe_next()}")
            operand_index = _read_shape_index(sc)
            if not sc.eat(")"):
                sc.error(f"{form}, found {sc.describe_next()}")
            out.append((output_index, (operand, operand_index)))
            if not sc.eat(","):
                break
        sc.expect("}", "at the end of an output_to_operand_aliasing list")
        return tuple(out)


class ShapeListKind(AttrKind):
    """``{f32[2]{0}, s32[]}``: shapes printed with their layouts."""

    name = "shape list"

    def check(self, value, where):
        items = tuple(value)
        for s in items:
            if not isinstance(s, Shape):
                raise InvalidArgumentError(f"{where} must be a list of Shapes, got {s!r}")
        return items

    def to_text(self, value) -> str:
        return "{" + ", ".join(s.to_string(print_layout=True) for s in value) + "}"

    def read(self, sc, ctx):
        sc.expect("{", "to start a list of shapes")
        out = []
        if sc.eat("}"):
            return ()
        while True:
            out.append(read_shape_in(sc, ctx))
            if sc.eat("}"):
                return tuple(out)
            sc.expect(",", "or '}' in a list of shapes")


class PaddingType(_Texted):
    """xla.PaddingType, printed by its enum name."""

    PADDING_INVALID = "PADDING_INVALID"
    PADDING_VALID = "PADDING_VALID"
    PADDING_SAME = "PADDING_SAME"


class CustomCallWindowKind(WindowKind):
    """``window={size=2x2}``; a Python string may keep its braces."""

    def check(self, value, where):
        if isinstance(value, str) and value.strip().startswith("{") and value.strip().endswith("}"):
            value = value.strip()[1:-1]
        return super().check(value, where)


OUTPUT_TO_OPERAND_ALIASING = OutputOperandAliasingKind()
CUSTOM_CALL_WINDOW = CustomCallWindowKind()
SHAPE_LIST = ShapeListKind()
PADDING_TYPE = EnumKind(PaddingType, "padding type")

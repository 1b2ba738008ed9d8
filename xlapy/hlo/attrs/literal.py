"""Literal-valued attributes: a constant's value and custom-call's ``literal=``.

Owns two kinds over xlapy.shape.literal.Literal:
- CONSTANT_LITERAL: the operand text of ``constant(...)`` (an ``in_parens`` attribute):
  ``{1, 2}``, ``42``, ``( 1, {2} )``, ``{...}`` when elided. Its text has no shape, so
  reading it needs the instruction's declared shape: the parser's context passes it as
  ``ctx.result_shape``.
- SHAPED_LITERAL: ``literal=s32[2]{0} {1, 2}`` (Literal::PrintWithLayoutOneline), read with
  its own shape.

Values are Literals; numpy arrays and Python scalars are accepted and converted with
``Literal.from_array``. Imports only the attribute base layer and the shape layer.
"""

from __future__ import annotations

import numpy as np

from xlapy.errors import InvalidArgumentError
from xlapy.hlo.attrs import AttrKind
from xlapy.shape.literal import Literal, read_literal, read_literal_with_shape


def as_literal(value, where: str) -> Literal:
    """``value`` as a Literal: Literals pass, numpy arrays and Python scalars convert."""
    if isinstance(value, Literal):
        return value
    if isinstance(value, (np.ndarray, np.generic, bool, int, float, complex)):
        return Literal.from_array(np.asarray(value))
    raise InvalidArgumentError(f"{where} must be a Literal (or a numpy array), got {value!r}")


class ConstantLiteralKind(AttrKind):
    """The value of ``constant(...)``: printed without its shape (``{...}`` past 10
    elements unless ``print_large_constants``), read against ``ctx.result_shape``."""

    name = "literal"

    def check(self, value, where):
        return as_literal(value, where)

    def to_text(self, value, print_large_constants: bool = False) -> str:
        return value.to_hlo_text(print_large_constants=print_large_constants)

    def read(self, sc, ctx):
        shape = getattr(ctx, "result_shape", None)
        if shape is None:
            sc.error("a constant's literal can only be read with the instruction's shape "
                     "(the parser context gives none)")
        return read_literal(sc, shape)


class ShapedLiteralKind(AttrKind):
    """``s32[2]{0} {1, 2}``: a literal with its shape and layout, on one line."""

    name = "literal with shape"

    def check(self, value, where):
        return as_literal(value, where)

    def to_text(self, value) -> str:
        return value.to_string(print_shape=True, print_layout=True, oneline=True)

    def read(self, sc, ctx):
        # the parser's max_recursion_depth (HloParserOptions) bounds the tuple nesting too
        depth = getattr(ctx, "max_depth", None)
        return read_literal_with_shape(sc) if depth is None else read_literal_with_shape(sc, depth)


CONSTANT_LITERAL = ConstantLiteralKind()
SHAPED_LITERAL = ShapedLiteralKind()

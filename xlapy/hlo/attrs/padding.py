"""The ``padding`` attribute of HLO ``pad``: XLA's PaddingConfig.

Owns: PaddingDimension and PaddingConfig (frozen, hashable) and PaddingConfigKind, the one
text syntax, as XLA's PaddingConfigToString prints it and ParsePaddingConfig reads it:
per dimension ``low_high`` or ``low_high_interior``, dimensions joined by ``x``.

    padding=0_0x1_2           no dimension has interior padding: two numbers each
    padding=0_0_0x1_2_1       some dimension has interior padding: three numbers each
    padding=-1_2x0_0          edge padding may be negative (it removes elements)

Interior padding is never negative in the text (XLA's lexer has no '-' there). A scalar
operand has an empty config, which XLA prints as nothing after ``padding=``; the reader
accepts that too, so such a line reads back. Imports only the shape layer's Scanner and the
attribute base classes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from xlapy.errors import InvalidArgumentError
from xlapy.hlo.attrs import AttrKind, check_int, check_sequence
from xlapy.shape.text import Scanner

__all__ = ["PADDING_CONFIG", "PaddingConfig", "PaddingConfigKind", "PaddingDimension"]


@dataclass(frozen=True)
class PaddingDimension:
    """Padding of one dimension: elements added before index 0 (``edge_padding_low``),
    after the last index (``edge_padding_high``) and between neighbours
    (``interior_padding``). Negative edge padding removes elements."""

    edge_padding_low: int = 0
    edge_padding_high: int = 0
    interior_padding: int = 0

    def __post_init__(self):
        for name in ("edge_padding_low", "edge_padding_high", "interior_padding"):
            v = check_int(getattr(self, name), f"PaddingDimension: {name}")
            object.__setattr__(self, name, v)


@dataclass(frozen=True)
class PaddingConfig:
    """One PaddingDimension per operand dimension.

    >>> PaddingConfig.of([(0, 0), (1, 2, 1)]).to_text()
    '0_0_0x1_2_1'
    """

    dimensions: tuple[PaddingDimension, ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "dimensions", check_sequence(
            self.dimensions, "PaddingConfig: dimensions", "a list of PaddingDimensions"))
        for d in self.dimensions:
            if not isinstance(d, PaddingDimension):
                raise InvalidArgumentError(
                    f"PaddingConfig: dimensions must be PaddingDimension values, got {d!r}")

    @staticmethod
    def of(dims: Iterable[Sequence[int] | PaddingDimension]) -> PaddingConfig:
        """From ``(low, high)`` or ``(low, high, interior)`` per dimension."""
        out = []
        what = "a list of (low, high) or (low, high, interior) tuples"
        for d in check_sequence(dims, "PaddingConfig", what):
            if isinstance(d, PaddingDimension):
                out.append(d)
                continue
            d = check_sequence(d, "PaddingConfig", what)
            if len(d) not in (2, 3):
                raise InvalidArgumentError(
                    f"PaddingConfig: each dimension is (low, high) or (low, high, interior), "
                    f"got {d!r}")
            out.append(PaddingDimension(*d))
        return PaddingConfig(tuple(out))

    @staticmethod
    def no_padding(rank: int) -> PaddingConfig:
        """XLA's MakeNoPaddingConfig: ``rank`` dimensions of ``0_0_0``."""
        return PaddingConfig((PaddingDimension(),) * rank)

    @property
    def rank(self) -> int:
        return len(self.dimensions)

    def with_dimension(self, dimno: int, dim: PaddingDimension) -> PaddingConfig:
        dims = list(self.dimensions)
        dims[dimno] = dim
        return PaddingConfig(tuple(dims))

    def to_text(self) -> str:
        """XLA's PaddingConfigToString."""
        interior = any(d.interior_padding != 0 for d in self.dimensions)
        parts = []
        for d in self.dimensions:
            text = f"{d.edge_padding_low}_{d.edge_padding_high}"
            if interior:
                text += f"_{d.interior_padding}"
            parts.append(text)
        return "x".join(parts)

    def __str__(self) -> str:
        return self.to_text()


# What XLA's lexer takes as one padding token, plus anything glued to it (so a malformed
# config is reported whole rather than half-read).
_TOKEN = re.compile(r"[-0-9_x]+")
# Nothing before the end of the line or of the attribute list: the config of a scalar.
_EMPTY = re.compile(r"[ \t]*(?:[\n,})]|\Z)")
_DIM = re.compile(r"(-?[0-9]+)_(-?[0-9]+)(?:_([0-9]+))?\Z")


class PaddingConfigKind(AttrKind):
    """``low_high[_interior]`` per dimension, joined by ``x``: ``0_0x1_2_1``."""

    name = "padding config"

    def check(self, value, where):
        if isinstance(value, PaddingConfig):
            return value
        try:
            return PaddingConfig.of(value)
        except (TypeError, InvalidArgumentError) as e:
            raise InvalidArgumentError(
                f"{where} must be a PaddingConfig or a list of (low, high[, interior]) "
                f"per dimension, got {value!r}") from e

    def to_text(self, value: PaddingConfig) -> str:
        return value.to_text()

    def read(self, sc: Scanner, ctx=None) -> PaddingConfig:
        return read_padding_config(sc)


def read_padding_config(sc: Scanner) -> PaddingConfig:
    """XLA's ParsePaddingConfig (the lexer's pad pattern), plus the empty config."""
    if _EMPTY.match(sc.text, sc.pos):
        return PaddingConfig()
    m = sc.peek_re(_TOKEN)
    if m is None:
        sc.error(f"expects padding config, e.g., '0_0_0x3_3_1', found {sc.describe_next()}")
    start = sc.pos
    dims = []
    for part in m.group(0).split("x"):
        dm = _DIM.match(part)
        if dm is None:
            if re.fullmatch(r"-?[0-9]+_-?[0-9]+_-[0-9]+", part):
                sc.error(f"interior padding must be >= 0 in padding config "
                         f"'{m.group(0)}' (dimension '{part}')", start)
            sc.error(f"expects padding config pattern like 'low_high_interior' or 'low_high', "
                     f"found '{m.group(0)}'", start)
        low, high, interior = dm.groups()
        dims.append(PaddingDimension(int(low), int(high), int(interior or 0)))
    sc.pos = m.end()
    return PaddingConfig(tuple(dims))


PADDING_CONFIG = PaddingConfigKind()

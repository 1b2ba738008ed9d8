"""The ``slice`` attribute of HLO ``slice``: per dimension a start, an (exclusive) limit
and a stride.

Owns: SliceRanges (frozen, hashable) and SliceRangesKind, its one text syntax, as XLA's
HloSliceInstruction prints it and ParseSliceRanges reads it:

    slice={[0:2], [1:3]}          every stride is 1: strides are omitted
    slice={[0:4:2], [1:3:1]}      some stride is not 1: every range shows its stride
    slice={}                      a scalar operand

The reader also takes ranges that mix both forms (XLA's parser does). Imports only the
shape layer's Scanner and the attribute base classes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xlapy.errors import InvalidArgumentError
from xlapy.hlo.attrs import AttrKind, check_int_list, check_int_tuples
from xlapy.shape.text import Scanner

__all__ = ["SLICE_RANGES", "SliceRanges", "SliceRangesKind"]


@dataclass(frozen=True)
class SliceRanges:
    """``starts[i]:limits[i]:strides[i]`` for every dimension i of the sliced operand.

    >>> SliceRanges.of([0, 1], [2, 3]).to_text()
    '{[0:2], [1:3]}'
    """

    starts: tuple[int, ...] = ()
    limits: tuple[int, ...] = ()
    strides: tuple[int, ...] = ()

    def __post_init__(self):
        set_ = object.__setattr__
        for name in ("starts", "limits", "strides"):
            set_(self, name, check_int_list(getattr(self, name), f"SliceRanges: {name}"))
        if not len(self.starts) == len(self.limits) == len(self.strides):
            raise InvalidArgumentError(
                f"SliceRanges: starts, limits and strides must have one entry per dimension; "
                f"got {len(self.starts)}, {len(self.limits)} and {len(self.strides)}")

    @staticmethod
    def of(starts: Sequence[int], limits: Sequence[int],
           strides: Sequence[int] | None = None) -> SliceRanges:
        """Ranges from the three lists of XlaBuilder::Slice; strides default to 1."""
        starts, limits = tuple(starts), tuple(limits)
        return SliceRanges(starts, limits, (1,) * len(starts) if strides is None else tuple(strides))

    @property
    def rank(self) -> int:
        return len(self.starts)

    def to_text(self) -> str:
        omit_stride = all(s == 1 for s in self.strides)
        parts = []
        for start, limit, stride in zip(self.starts, self.limits, self.strides):
            parts.append(f"[{start}:{limit}]" if omit_stride else f"[{start}:{limit}:{stride}]")
        return "{" + ", ".join(parts) + "}"

    def __str__(self) -> str:
        return self.to_text()


class SliceRangesKind(AttrKind):
    """``{[start:limit], ...}`` or ``{[start:limit:stride], ...}``."""

    name = "slice ranges"

    def check(self, value, where):
        if isinstance(value, SliceRanges):
            return value
        ranges = check_int_tuples(value, where, (2, 3),
                                  "(start, limit) or (start, limit, stride) ranges")
        starts, limits, strides = [], [], []
        for r in ranges:
            starts.append(r[0])
            limits.append(r[1])
            strides.append(r[2] if len(r) == 3 else 1)
        return SliceRanges(tuple(starts), tuple(limits), tuple(strides))

    def to_text(self, value: SliceRanges) -> str:
        return value.to_text()

    def read(self, sc: Scanner, ctx=None) -> SliceRanges:
        return read_slice_ranges(sc)


def read_slice_ranges(sc: Scanner) -> SliceRanges:
    """XLA's ParseSliceRanges: ``{`` ( ``[`` int (``:`` int)* ``]`` ),* ``}``."""
    sc.expect("{", "to start slice ranges, e.g. {[0:2], [1:3]}")
    starts, limits, strides = [], [], []
    if sc.eat("}"):
        return SliceRanges()
    while True:
        sc.skip()
        range_pos = sc.pos
        sc.expect("[", "to start a slice range [start:limit] or [start:limit:stride]")
        values = []
        if not sc.eat("]"):
            while True:
                values.append(sc.read_int("an integer in a slice range"))
                if sc.eat("]"):
                    break
                sc.expect(":", "or ']' in a slice range")
        if len(values) not in (2, 3):
            sc.error(f"expects [start:limit:step] or [start:limit], but sees {len(values)} "
                     f"elements.", range_pos)
        starts.append(values[0])
        limits.append(values[1])
        strides.append(values[2] if len(values) == 3 else 1)
        if not sc.eat(","):
            break
    sc.expect("}", "to end slice ranges")
    return SliceRanges(tuple(starts), tuple(limits), tuple(strides))


SLICE_RANGES = SliceRangesKind()

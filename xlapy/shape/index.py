"""Index arithmetic: multi-index <-> linear index under any layout, and physical sizes.

Owns: the physical plan of a shape (dimensions permuted major-to-minor, legacy padding,
every tiling level with combined dimensions, tail padding) and the functions
``linear_index``, ``multi_index``, ``physical_size``, ``byte_size``. Every function works on
Python ints and, vectorised, on NumPy index arrays. Imports only the shape layer.

The mapping follows the Tiled layout page and XLA's LayoutUtil::LinearIndexForNestedTiling:
each tile applies to the most minor dimensions of the current (already tiled) shape, which is
padded with leading size-1 dimensions when the tile has more dimensions; ``*`` entries first
merge their dimension into the next more minor one.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from math import prod

import numpy as np

from xlapy.errors import InvalidArgumentError
from xlapy.shape import dtypes
from xlapy.shape.layout import COMBINE_DIMENSION, Layout
from xlapy.shape.shape import UNBOUNDED_SIZE, Shape


@dataclass(frozen=True)
class _Combine:
    pos: int  # dimension merged into pos+1
    minor_size: int  # size of dimension pos+1 before the merge


@dataclass(frozen=True)
class _Split:
    start: int  # first dimension the tile covers
    tile: tuple[int, ...]
    sizes: tuple[int, ...]  # sizes of the covered dimensions before the split


@dataclass(frozen=True)
class _PadFront:
    count: int


@dataclass(frozen=True)
class PhysicalPlan:
    """How a shape's elements sit in its buffer. ``dims`` are the logical sizes in
    major-to-minor order (padded sizes for the legacy padded_dimensions), ``final`` the
    shape after all tiling; ``elements`` includes tile and tail padding."""

    shape: Shape
    order: tuple[int, ...]  # logical dimension of each physical dimension, major to minor
    logical: tuple[int, ...]  # logical sizes, major to minor
    dims: tuple[int, ...]
    steps: tuple
    final: tuple[int, ...]
    elements: int

    # -- forward ---------------------------------------------------------------------------

    def linear(self, index):
        """Linear position(s) of logical multi-index(es): ``index[d]`` is an int or an
        integer array for logical dimension d."""
        cur = [index[d] for d in self.order]
        for step in self.steps:
            cur = _apply(step, cur)
        lin = 0
        for e, d in zip(cur, self.final):
            lin = lin * d + e
        return lin

    # -- backward --------------------------------------------------------------------------

    def unravel(self, linear):
        """Logical multi-index for linear position(s), and a mask (or bool) saying which
        positions hold an element (False: padding)."""
        linear = np.asarray(linear, dtype=np.int64)
        in_tiles = linear < prod(self.final)  # positions past the tiles are tail padding
        cur = []
        rest = linear
        for d in reversed(self.final):
            cur.append(rest % d if d else rest)
            rest = rest // d if d else rest
        cur.reverse()
        valid = in_tiles.copy()
        for step in reversed(self.steps):
            cur, valid = _unapply(step, cur, valid)
        for e, d in zip(cur, self.logical):
            valid &= e < d
        index = [None] * len(self.order)
        for pos, d in enumerate(self.order):
            index[d] = cur[pos]
        return index, valid


def _apply(step, cur):
    if isinstance(step, _PadFront):
        return [0] * step.count + cur
    if isinstance(step, _Combine):
        p = step.pos
        return cur[:p] + [cur[p] * step.minor_size + cur[p + 1]] + cur[p + 2 :]
    s = step.start
    covered = cur[s:]
    return cur[:s] + [e // t for e, t in zip(covered, step.tile)] + [
        e % t for e, t in zip(covered, step.tile)
    ]


def _unapply(step, cur, valid):
    if isinstance(step, _PadFront):
        for e in cur[: step.count]:
            valid = valid & (e == 0)
        return cur[step.count :], valid
    if isinstance(step, _Combine):
        p = step.pos
        merged = cur[p]
        return cur[:p] + [merged // step.minor_size, merged % step.minor_size] + cur[p + 1 :], valid
    s = step.start
    n = len(step.tile)
    outer, inner = cur[s : s + n], cur[s + n :]
    restored = []
    for o, i, t, size in zip(outer, inner, step.tile, step.sizes):
        e = o * t + i
        valid = valid & (e < size)
        restored.append(e)
    return cur[:s] + restored, valid


@lru_cache(maxsize=4096)
def physical_plan(shape: Shape) -> PhysicalPlan:
    """The PhysicalPlan of an array shape (cached)."""
    if not isinstance(shape, Shape):
        raise InvalidArgumentError(f"expected a Shape, got {type(shape).__name__}")
    if not shape.is_array():
        raise InvalidArgumentError(f"physical layout: expected an array shape, got {shape}")
    if any(d == UNBOUNDED_SIZE for d in shape.dimensions):
        raise InvalidArgumentError(
            f"physical layout: shape {shape} has an unbounded dynamic dimension; "
            "only static and bounded (<=n) dimensions have a physical size"
        )
    layout = shape.layout if shape.layout is not None else Layout.default(len(shape.dimensions))
    order = layout.major_to_minor
    logical = tuple(shape.dimensions[d] for d in order)
    if layout.padded_dimensions:
        dims = [layout.padded_dimensions[d] for d in order]
    else:
        dims = list(logical)
    start_dims = tuple(dims)
    steps = []
    for tile in layout.tiles:
        t = list(tile.dimensions)
        if len(t) > len(dims):
            pad = len(t) - len(dims)
            steps.append(_PadFront(pad))
            dims = [1] * pad + dims
        start = len(dims) - len(t)
        i = 0
        while i < len(t):
            if t[i] == COMBINE_DIMENSION:
                p = start + i
                steps.append(_Combine(p, dims[p + 1]))
                dims = dims[:p] + [dims[p] * dims[p + 1]] + dims[p + 2 :]
                del t[i]
            else:
                i += 1
        covered = dims[start:]
        steps.append(_Split(start, tuple(t), tuple(covered)))
        dims = dims[:start] + [-(-d // ts) for d, ts in zip(covered, t)] + t
    final = tuple(dims)
    elements = prod(final)
    align = layout.tail_padding_alignment_in_elements
    if align != 1:
        elements = -(-elements // align) * align
    return PhysicalPlan(shape, order, logical, start_dims, tuple(steps), final, elements)


def _check_index(shape: Shape, index, fn: str) -> list[int]:
    try:
        idx = [int(i) for i in index]
    except TypeError as e:
        raise InvalidArgumentError(f"{fn}: expected a sequence of integers, got {index!r}") from e
    if len(idx) != len(shape.dimensions):
        raise InvalidArgumentError(
            f"{fn}: index {tuple(idx)} has {len(idx)} entries but {shape} has rank "
            f"{len(shape.dimensions)}"
        )
    for d, (i, size) in enumerate(zip(idx, shape.dimensions)):
        if not 0 <= i < size:
            raise InvalidArgumentError(
                f"{fn}: index {tuple(idx)} is out of bounds for {shape}: dimension {d} "
                f"must be in [0, {size}), got {i}"
            )
    return idx


def linear_index(shape: Shape, index) -> int:
    """Position of element ``index`` (one int per logical dimension) in the buffer.

    >>> linear_index(parse_shape("f32[3,5]{1,0:T(2,2)}"), (2, 3))
    17
    """
    plan = physical_plan(shape)
    return int(plan.linear(_check_index(shape, index, "linear_index")))


def multi_index(shape: Shape, linear: int) -> tuple[int, ...]:
    """The logical multi-index stored at buffer position ``linear``; raises if that
    position is padding or out of range.

    >>> multi_index(parse_shape("f32[3,5]{1,0:T(2,2)}"), 17)
    (2, 3)
    """
    plan = physical_plan(shape)
    lin = int(linear)
    if not 0 <= lin < plan.elements:
        raise InvalidArgumentError(
            f"multi_index: linear index {lin} is out of range for {shape}, whose buffer "
            f"holds {plan.elements} elements"
        )
    index, valid = plan.unravel(lin)
    if not bool(valid):
        raise InvalidArgumentError(
            f"multi_index: linear index {lin} of {shape} is a padding position, not an element"
        )
    return tuple(int(i) for i in index)


def linear_indices(shape: Shape) -> np.ndarray:
    """Buffer position of every element, as an int64 array of the logical dimensions."""
    plan = physical_plan(shape)
    dims = shape.dimensions
    if prod(dims) == 0:
        return np.zeros(dims, dtype=np.int64)
    grids = np.indices(dims, dtype=np.int64, sparse=True) if dims else []
    out = plan.linear(list(grids))
    return np.broadcast_to(np.asarray(out, dtype=np.int64), dims).copy()


def physical_size(shape: Shape) -> int:
    """Elements the buffer holds, counting tile padding, legacy padding and tail alignment.

    >>> physical_size(parse_shape("f32[3,5]{1,0:T(2,2)}"))
    24
    """
    return physical_plan(shape).elements


def element_size_in_bits(shape: Shape) -> int:
    """Bits one element occupies in the buffer: ``E(n)`` if the layout says, else the
    type's byte width times 8 (XLA's ShapeUtil::ElementSizeInBits)."""
    if shape.layout is not None and shape.layout.element_size_in_bits:
        return shape.layout.element_size_in_bits
    return dtypes.byte_width(shape.element_type) * 8


def byte_size(shape: Shape, pointer_size: int = 8) -> int:
    """Bytes of the buffer (XLA's ShapeUtil::ArraySize for arrays, with sub-byte packing
    for ``E(n)``); a tuple is its index table (``pointer_size`` per element, as
    ShapeUtil::ByteSizeOf), a token 0 bytes, an opaque value one pointer.

    >>> byte_size(parse_shape("f32[1,129]{1,0:T(8,128)}"))
    8192
    """
    if shape.is_tuple():
        return pointer_size * len(shape.tuple_shapes)
    if shape.is_token():
        return 0
    if shape.is_opaque():
        return pointer_size
    bits = physical_size(shape) * element_size_in_bits(shape)
    return -(-bits // 8)

"""Layouts: minor_to_major, tiles (repeated, combined dimensions), tail padding, element
size, memory space, split configs, and the legacy padded_dimensions/padding_value.

Owns: Tile, SplitConfig, PaddingValue, Layout, their XLA text form (``{1,0:T(8,128)(2,1)S(1)}``)
and layout validation against a shape's rank. Imports only dtypes and errors.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from xlapy.errors import InvalidArgumentError
from xlapy.shape.dtypes import PrimitiveType, is_integral, type_name

#: Tile::kCombineDimension: a tile entry that merges its dimension into the next more minor
#: one. Printed and parsed as ``*``.
COMBINE_DIMENSION = -(2**63)

#: Memory spaces with a documented meaning (``S(n)``); others are device-specific.
MEMORY_SPACE_NAMES = {0: "device memory (HBM)", 1: "VMEM (on-chip)", 5: "host memory"}


@dataclass(frozen=True)
class Tile:
    """One level of tiling: sizes of the tile's dimensions, major to minor.

    ``Tile((8, 128))`` prints as ``(8,128)``; ``COMBINE_DIMENSION`` entries print as ``*``.
    """

    dimensions: tuple[int, ...]

    def __post_init__(self):
        object.__setattr__(self, "dimensions", tuple(int(d) for d in self.dimensions))

    def __str__(self) -> str:
        parts = []
        for d in self.dimensions:
            if d >= 0:
                parts.append(str(d))
            elif d == COMBINE_DIMENSION:
                parts.append("*")
            else:
                parts.append(f"Invalid value {d}")
        return "(" + ",".join(parts) + ")"


@dataclass(frozen=True)
class SplitConfig:
    """Splits physical ``dimension`` at ``split_indices``; printed ``(dim:i,j)``."""

    dimension: int
    split_indices: tuple[int, ...]

    def __post_init__(self):
        object.__setattr__(self, "split_indices", tuple(int(i) for i in self.split_indices))

    def __str__(self) -> str:
        return f"({self.dimension}:{','.join(str(i) for i in self.split_indices)})"


class PaddingValue(enum.IntEnum):
    """The legacy Layout.padding_value of the older Shapes-and-layout page."""

    INVALID_PAD = 0
    ZERO_PAD = 1
    ONE_PAD = 2
    LOWEST_PAD = 3
    HIGHEST_PAD = 4
    UNKNOWN_PAD = 5


@dataclass(frozen=True)
class Layout:
    """How an array is laid out in memory, as XLA's Layout.

    ``Layout((1, 0), tiles=(Tile((8, 128)), Tile((2, 1))), memory_space=1)`` prints
    ``{1,0:T(8,128)(2,1)S(1)}``. ``padded_dimensions``/``padding_value`` are the legacy
    fields of the older page; XLA's text format has no syntax for them, so they never print.
    """

    minor_to_major: tuple[int, ...]
    tiles: tuple[Tile, ...] = ()
    tail_padding_alignment_in_elements: int = 1
    index_primitive_type: PrimitiveType | None = None
    pointer_primitive_type: PrimitiveType | None = None
    element_size_in_bits: int = 0
    memory_space: int = 0
    split_configs: tuple[SplitConfig, ...] = ()
    dynamic_shape_metadata_prefix_bytes: int = 0
    padded_dimensions: tuple[int, ...] = ()
    padding_value: PaddingValue = PaddingValue.ZERO_PAD

    def __post_init__(self):
        set_ = object.__setattr__
        set_(self, "minor_to_major", tuple(int(d) for d in self.minor_to_major))
        set_(self, "tiles", tuple(t if isinstance(t, Tile) else Tile(t) for t in self.tiles))
        set_(self, "split_configs", tuple(self.split_configs))
        set_(self, "padded_dimensions", tuple(int(d) for d in self.padded_dimensions))

    @staticmethod
    def default(rank: int) -> "Layout":
        """The default (major-to-minor) layout ``{rank-1,...,0}``."""
        return Layout(tuple(range(rank - 1, -1, -1)))

    @property
    def major_to_minor(self) -> tuple[int, ...]:
        return tuple(reversed(self.minor_to_major))

    def minor(self, i: int) -> int:
        """The logical dimension that is the i-th most minor (XLA's LayoutUtil::Minor)."""
        return self.minor_to_major[i]

    def major(self, i: int) -> int:
        """The logical dimension that is the i-th most major (XLA's LayoutUtil::Major)."""
        return self.minor_to_major[len(self.minor_to_major) - 1 - i]

    def replace(self, **changes) -> "Layout":
        fields = {f: getattr(self, f) for f in self.__dataclass_fields__}
        fields.update(changes)
        return Layout(**fields)

    def __str__(self) -> str:
        parts = []
        if self.tiles:
            parts.append("T" + "".join(str(t) for t in self.tiles))
        if self.tail_padding_alignment_in_elements != 1:
            parts.append(f"L({self.tail_padding_alignment_in_elements})")
        if self.index_primitive_type is not None:
            parts.append(f"#({_int_type_text(self.index_primitive_type)})")
        if self.pointer_primitive_type is not None:
            parts.append(f"*({_int_type_text(self.pointer_primitive_type)})")
        if self.element_size_in_bits != 0:
            parts.append(f"E({self.element_size_in_bits})")
        if self.memory_space != 0:
            parts.append(f"S({self.memory_space})")
        if self.split_configs:
            parts.append("SC" + "".join(str(s) for s in self.split_configs))
        if self.dynamic_shape_metadata_prefix_bytes > 0:
            parts.append(f"M({self.dynamic_shape_metadata_prefix_bytes})")
        m2m = ",".join(str(d) for d in self.minor_to_major)
        return "{" + m2m + (":" + "".join(parts) if parts else "") + "}"

    def validate(self, dimensions: tuple[int, ...], shape_text: str) -> None:
        """Raise InvalidArgumentError unless this layout fits an array with ``dimensions``.

        Follows XLA's LayoutUtil::ValidateLayoutForShape; ``shape_text`` names the shape in
        the message.
        """
        rank = len(dimensions)
        m2m = self.minor_to_major
        m2m_text = "{" + ", ".join(str(d) for d in m2m) + "}"
        if len(m2m) != rank:
            raise InvalidArgumentError(
                f"layout minor_to_major field contains {len(m2m)} elements, but shape has "
                f"{rank} dimensions: {m2m_text}; shape: {shape_text}"
            )
        seen = set()
        for d in m2m:
            if d < 0 or d >= rank:
                raise InvalidArgumentError(
                    f"layout minor_to_major field has out-of-bounds value: {m2m_text}; "
                    f"shape: {shape_text}"
                )
            if d in seen:
                raise InvalidArgumentError(
                    f"layout minor_to_major field has duplicate values: {m2m_text}; "
                    f"shape: {shape_text}"
                )
            seen.add(d)
        if self.tail_padding_alignment_in_elements <= 0:
            raise InvalidArgumentError(
                "layout tail_padding_alignment_in_elements field is <= 0: "
                f"{{{self.tail_padding_alignment_in_elements}}}; shape: {shape_text}"
            )
        if self.index_primitive_type is not None:
            raise InvalidArgumentError(
                f"layout has a index_primitive_type, but is not a sparse array: {shape_text}"
            )
        if self.pointer_primitive_type is not None:
            raise InvalidArgumentError(
                f"layout has a pointer_primitive_type, but is not a sparse array: {shape_text}"
            )
        for tile in self.tiles:
            if not tile.dimensions:
                raise InvalidArgumentError(f"layout has invalid tiles: empty tile (); shape: {shape_text}")
            for d in tile.dimensions:
                if d <= 0 and d != COMBINE_DIMENSION:
                    raise InvalidArgumentError(
                        f"layout has invalid tiles: tile dimension {d} must be positive or "
                        f"'*' (combine): tile {tile} of shape {shape_text}"
                    )
            if tile.dimensions[-1] == COMBINE_DIMENSION:
                raise InvalidArgumentError(
                    f"layout has invalid tiles: the most minor entry of tile {tile} is '*', "
                    f"but there is no more minor dimension to combine it with; shape: {shape_text}"
                )
            if COMBINE_DIMENSION in tile.dimensions and len(tile.dimensions) > rank:
                raise InvalidArgumentError(
                    f"layout has invalid tiles: tile {tile} combines dimensions but has more "
                    f"dimensions ({len(tile.dimensions)}) than the shape ({rank}); shape: {shape_text}"
                )
        if self.element_size_in_bits < 0:
            raise InvalidArgumentError(
                f"layout element_size_in_bits field is negative: {self.element_size_in_bits}; "
                f"shape: {shape_text}"
            )
        if self.memory_space < 0:
            raise InvalidArgumentError(
                f"layout memory space must be >= 0, got S({self.memory_space}); shape: {shape_text}"
            )
        seen_split = set()
        for config in self.split_configs:
            pdim = config.dimension
            if pdim < 0 or pdim >= rank:
                raise InvalidArgumentError(
                    f"split config has out-of-bounds physical dimension: {pdim}; shape: {shape_text}"
                )
            if pdim in seen_split:
                raise InvalidArgumentError(
                    f"split config has duplicate physical dimension: {pdim}; shape: {shape_text}"
                )
            seen_split.add(pdim)
            size = dimensions[self.major(pdim)]
            last = 0
            for idx in config.split_indices:
                if idx <= last:
                    raise InvalidArgumentError(
                        "split config split indices must be strictly increasing and positive: "
                        f"{{{', '.join(map(str, config.split_indices))}}}; shape: {shape_text}"
                    )
                if idx >= size:
                    raise InvalidArgumentError(
                        f"split config split index is out of bounds: {idx} (dim size {size}); "
                        f"shape: {shape_text}"
                    )
                last = idx
        if self.padded_dimensions:
            if len(self.padded_dimensions) != rank:
                raise InvalidArgumentError(
                    f"layout padded_dimensions has {len(self.padded_dimensions)} elements, but "
                    f"shape has {rank} dimensions; shape: {shape_text}"
                )
            for i, (p, d) in enumerate(zip(self.padded_dimensions, dimensions)):
                if p < d:
                    raise InvalidArgumentError(
                        f"layout padded_dimensions[{i}] = {p} is smaller than the dimension "
                        f"size {d}; shape: {shape_text}"
                    )
            if self.tiles:
                raise InvalidArgumentError(
                    f"layout cannot have both padded_dimensions and tiles; shape: {shape_text}"
                )


def _int_type_text(t: PrimitiveType) -> str:
    return type_name(t) if is_integral(t) else "invalid"

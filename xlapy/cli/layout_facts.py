"""The facts ``xlapy layout`` reports about one array shape: sizes, bytes, padding, memory
space, and a step-by-step account of each tiling level (which dimensions it covers, what
``*`` combines, what padding it adds).

Owns: ``ArrayFacts``/``TileLevel`` and ``array_facts(shape)``; ``to_json_dict`` for
``--json``. Computes nothing about the layout on its own: sizes come from the shape layer
(``physical_plan``, ``byte_size``); the tile replay only names dimensions, and is checked
against the shape layer's tiled shape. Imports only the shape layer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import prod

from xlapy.shape import dtypes
from xlapy.shape.index import byte_size, element_size_in_bits, physical_plan
from xlapy.shape.layout import COMBINE_DIMENSION, MEMORY_SPACE_NAMES, Layout
from xlapy.shape.shape import Shape

_KIND_WORDS = {
    "pred": "boolean",
    "signed": "signed integer",
    "unsigned": "unsigned integer",
    "float": "floating point",
    "complex": "complex",
}


@dataclass(frozen=True)
class Combine:
    """A ``*`` entry: dimension ``major`` merged into the next more minor one."""

    major: str
    major_size: int
    minor: str
    minor_size: int
    merged: str

    @property
    def size(self) -> int:
        return self.major_size * self.minor_size


@dataclass(frozen=True)
class Split:
    """One covered dimension of a tile: ``size`` becomes ``count`` tiles of ``tile``."""

    dim: str
    size: int
    tile: int

    @property
    def count(self) -> int:
        return -(-self.size // self.tile)

    @property
    def padding(self) -> int:
        return self.count * self.tile - self.size


@dataclass(frozen=True)
class TileLevel:
    """One ``T(...)`` entry applied to the current shape ``before`` (dims named ``labels``)."""

    level: int
    text: str
    before: tuple[int, ...]
    before_labels: tuple[str, ...]
    added: tuple[str, ...]  # size-1 dims put in front because the tile has more dims
    combines: tuple[Combine, ...]
    splits: tuple[Split, ...]
    inside_previous: bool  # covers only within-tile dims of the previous level
    after: tuple[int, ...]
    after_labels: tuple[str, ...]

    @property
    def leading_ones(self) -> int:
        return len(self.added)


@dataclass(frozen=True)
class ArrayFacts:
    """Everything ``xlapy layout`` says about one array shape."""

    shape: Shape  # with the layout in effect (the default one if none was written)
    layout_written: bool
    type_name: str
    type_description: str
    type_bits: int  # the type's own width (4 for s4)
    storage_bits: int  # bits one element occupies in the buffer (E(n) or the byte width)
    dimensions: tuple[int, ...]
    dynamic: tuple[str, ...]  # notes on dynamic dimensions
    elements: int
    major_to_minor: tuple[int, ...]
    physical_dims: tuple[int, ...]  # logical sizes in major-to-minor order
    tiles: tuple[TileLevel, ...]
    tiled_dims: tuple[int, ...]  # shape after every tiling level
    tiled_elements: int
    tail_alignment: int
    physical_elements: int  # tiled_elements rounded up to the tail alignment
    byte_size: int
    data_bytes: int  # the elements alone, packed at storage_bits each
    memory_space: int
    memory_space_meaning: str
    element_size_in_bits: int  # E(n), 0 if not written
    split_configs: tuple[str, ...] = field(default=())
    metadata_prefix_bytes: int = 0

    @property
    def padding_elements(self) -> int:
        return self.physical_elements - self.elements

    @property
    def padding_overhead_percent(self) -> float | None:
        """Padding elements as a percentage of the logical elements; None if there are none."""
        if self.elements == 0:
            return None
        return 100.0 * self.padding_elements / self.elements


def memory_space_meaning(space: int) -> str:
    """What ``S(space)`` means: the documented spaces by name, others device-specific."""
    name = MEMORY_SPACE_NAMES.get(space)
    return name if name is not None else "a device-specific memory space"


def describe_type(t: dtypes.PrimitiveType) -> str:
    """``"32-bit floating point"``, ``"4-bit signed integer"``, ``"boolean"``."""
    kind = t.info.kind
    if kind == "pred":
        return "boolean"
    return f"{dtypes.bit_width(t)}-bit {_KIND_WORDS.get(kind, kind)}"


def array_facts(shape: Shape) -> ArrayFacts:
    """The facts of an array shape; a shape without a layout gets XLA's default one."""
    layout_written = shape.layout is not None
    if not layout_written:
        shape = shape.with_default_layout()
    layout: Layout = shape.layout
    plan = physical_plan(shape)  # raises InvalidArgumentError for unbounded dimensions
    t = shape.element_type
    labels = [f"d{d}" for d in plan.order]
    levels, tiled_dims = _replay_tiles(layout, list(plan.dims), labels)
    if tuple(tiled_dims) != plan.final:
        raise AssertionError(f"tile replay {tiled_dims} disagrees with physical_plan {plan.final}")
    storage_bits = element_size_in_bits(shape)
    elements = prod(shape.dimensions)
    dynamic = tuple(
        f"dimension {d} is dynamic (<={size}): the buffer is sized for the bound {size}"
        for d, (size, dyn) in enumerate(zip(shape.dimensions, shape.dynamic_dimensions,
                                            strict=True))
        if dyn
    )
    return ArrayFacts(
        shape=shape,
        layout_written=layout_written,
        type_name=dtypes.type_name(t),
        type_description=describe_type(t),
        type_bits=dtypes.bit_width(t),
        storage_bits=storage_bits,
        dimensions=tuple(shape.dimensions),
        dynamic=dynamic,
        elements=elements,
        major_to_minor=layout.major_to_minor,
        physical_dims=tuple(plan.dims),
        tiles=tuple(levels),
        tiled_dims=plan.final,
        tiled_elements=prod(plan.final),
        tail_alignment=layout.tail_padding_alignment_in_elements,
        physical_elements=plan.elements,
        byte_size=byte_size(shape),
        data_bytes=-(-elements * storage_bits // 8),
        memory_space=layout.memory_space,
        memory_space_meaning=memory_space_meaning(layout.memory_space),
        element_size_in_bits=layout.element_size_in_bits,
        split_configs=tuple(str(c) for c in layout.split_configs),
        metadata_prefix_bytes=layout.dynamic_shape_metadata_prefix_bytes,
    )


def _merge_label(major: str, minor: str, merged: set[str]) -> str:
    parts = [x[1:-1] if x in merged else x for x in (major, minor)]
    label = "(" + ",".join(parts) + ")"
    merged.add(label)
    return label


def _replay_tiles(layout: Layout, dims: list[int], labels: list[str]):
    """Apply the tiles as the shape layer does, naming every dimension on the way: ``dK``
    is logical dimension K, ``dK/t`` its tile index and ``dK%t`` the index within a tile,
    ``(dJ,dK)`` a combined dimension, ``eN`` a leading size-1 dimension a tile added."""
    origin = ["plain"] * len(dims)  # "inner:<level>", "outer:<level>", "plain", "mixed"
    merged: set[str] = set()
    levels = []
    extra = 0
    for level, tile in enumerate(layout.tiles, start=1):
        before, before_labels = tuple(dims), tuple(labels)
        t = list(tile.dimensions)
        leading = max(0, len(t) - len(dims))
        dims = [1] * leading + dims
        labels = [f"e{extra + i}" for i in range(leading)] + labels
        origin = ["plain"] * leading + origin
        extra += leading
        added = tuple(labels[:leading])
        start = len(dims) - len(t)
        combines = []
        i = 0
        while i < len(t):
            if t[i] != COMBINE_DIMENSION:
                i += 1
                continue
            p = start + i
            label = _merge_label(labels[p], labels[p + 1], merged)
            combines.append(Combine(labels[p], dims[p], labels[p + 1], dims[p + 1], label))
            dims[p : p + 2] = [dims[p] * dims[p + 1]]
            labels[p : p + 2] = [label]
            origin[p : p + 2] = ["mixed"]
            del t[i]
        covered = zip(labels[start:], dims[start:], t, strict=True)
        splits = tuple(Split(lab, size, ts) for lab, size, ts in covered)
        previous_inner = f"inner:{level - 1}"
        inside = level > 1 and not combines and all(o == previous_inner for o in origin[start:])
        dims = dims[:start] + [s.count for s in splits] + t
        labels = (labels[:start] + [f"{s.dim}/{s.tile}" for s in splits]
                  + [f"{s.dim}%{s.tile}" for s in splits])
        origin = origin[:start] + [f"outer:{level}"] * len(t) + [f"inner:{level}"] * len(t)
        levels.append(TileLevel(level, str(tile), before, before_labels, added, tuple(combines),
                                splits, inside, tuple(dims), tuple(labels)))
    return levels, dims


def to_json_dict(facts: ArrayFacts) -> dict:
    """The facts as plain JSON values (no grids)."""
    overhead = facts.padding_overhead_percent
    return {
        "shape": str(facts.shape),
        "layout_written": facts.layout_written,
        "element_type": facts.type_name,
        "element_type_description": facts.type_description,
        "element_type_bits": facts.type_bits,
        "storage_bits_per_element": facts.storage_bits,
        "dimensions": list(facts.dimensions),
        "dynamic_dimensions": list(facts.shape.dynamic_dimensions),
        "elements": facts.elements,
        "minor_to_major": list(facts.shape.layout.minor_to_major),
        "major_to_minor": list(facts.major_to_minor),
        "physical_dimensions": list(facts.physical_dims),
        "tiles": [
            {
                "tile": lvl.text,
                "shape_before": list(lvl.before),
                "covers": [s.dim for s in lvl.splits],
                "leading_ones_added": lvl.leading_ones,
                "combined": [{"major": c.major, "minor": c.minor, "into": c.merged, "size": c.size}
                             for c in lvl.combines],
                "splits": [{"dim": s.dim, "size": s.size, "tile": s.tile, "tiles": s.count,
                            "padding": s.padding} for s in lvl.splits],
                "inside_previous_tile": lvl.inside_previous,
                "shape_after": list(lvl.after),
                "dims_after": list(lvl.after_labels),
            }
            for lvl in facts.tiles
        ],
        "tiled_dimensions": list(facts.tiled_dims),
        "tiled_elements": facts.tiled_elements,
        "tail_padding_alignment_in_elements": facts.tail_alignment,
        "physical_elements": facts.physical_elements,
        "padding_elements": facts.padding_elements,
        "padding_overhead_percent": None if overhead is None else round(overhead, 6),
        "byte_size": facts.byte_size,
        "data_bytes": facts.data_bytes,
        "memory_space": facts.memory_space,
        "memory_space_meaning": facts.memory_space_meaning,
        "element_size_in_bits": facts.element_size_in_bits,
        "split_configs": list(facts.split_configs),
        "dynamic_shape_metadata_prefix_bytes": facts.metadata_prefix_bytes,
    }

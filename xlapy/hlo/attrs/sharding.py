"""XLA's sharding model (``HloSharding``, xla/hlo/ir/hlo_sharding.h) and its text form.

Owns:

- ``TileAssignment``: an array of device ids, given as a list (``devices=[2,2]0,2,1,3``) or
  as an iota reshaped and transposed (``devices=[2,2]<=[2,2]T(1,0)``); the iota form is
  canonicalised as XLA's IotaTileAssignment::Create (size-1 dimensions dropped, runs kept in
  order merged), and reshape/transpose keep it when XLA's do.
- ``HloSharding``: replicated, manual, unknown, unreduced, maximal (one device), tiled (with
  ``last_tile_dim_replicate`` or ``last_tile_dims={manual, replicated, ...}`` subgroups),
  tuples, named (V3, ``{mesh[...], ...}``, see xlapy.hlo.attrs.mesh), ``shard_as`` /
  ``shard_like`` groups and metadata. Built by XLA's factories (``replicate``, ``tile``,
  ``partial_tile``, ``subgroup``, ``tuple_``) with their normalisations (PartialTile sorts
  the devices of each replication group, folds a trivial last dimension, turns a sharding
  that tiles nothing into ``{replicated}``; Subgroup merges subgroups of one type, drops
  size-1 ones and orders them manual, unreduced, replicated), so ``to_text`` prints what
  XLA prints for the same text (HloSharding::ToString). Equality ignores metadata, as
  XLA's operator== does.
- ``read_sharding(sc)`` (the parser's entry: HloParserImpl::ParseSharding's checks and
  messages, plus HloSharding::FromProto's device count; returns the canonical text the
  instruction keeps), ``parse_sharding(text) -> HloSharding`` and
  ``validate_sharding(text, shape)`` (HloSharding::Validate, called by the verifier).
- Device facts the partitioner needs: ``tile_index``, ``tile_offset`` / ``tile_limit``
  (XLA's TileOffsetForDevice / TileLimitForDevice), ``tile_shape``, ``num_tiles``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import prod

import numpy as np

from xlapy.errors import InvalidArgumentError
from xlapy.hlo.attrs import check_int, check_int_list
from xlapy.hlo.attrs.mesh import (
    NamedSharding,
    _read_metadata,
    named_to_tiles,
    read_named_sharding,
)
from xlapy.hlo.attrs.numbers import read_balanced
from xlapy.shape import Shape
from xlapy.shape.text import Scanner

#: OpSharding types that may follow last_tile_dims= (subgroup types).
_SUBGROUP_TYPES = ("replicated", "manual", "unreduced", "maximal", "unknown", "other")
_KEYWORDS = ("maximal", "replicated", "manual", "unknown", "unreduced",
             "last_tile_dim_replicate")
#: Subgroup order after Subgroup's merge (kOrderedTypes, OpSharding::Type names).
_TYPE_ORDER = ("maximal", "tuple", "other", "manual", "unreduced", "replicated", "unknown")
_TYPE_TEXT = {"manual": "manual", "maximal": "maximal", "replicated": "replicated",
              "unreduced": "unreduced"}


# -- tile assignments ---------------------------------------------------------------------------


def canonicalize_iota_dims(dims: tuple[int, ...], perm: tuple[int, ...]):
    """XLA's CanonicalizeIotaDims (``[3,4,5]T(1,2,0)`` -> ``[3,20]T(1,0)``)."""
    from xlapy.hlo.attrs.collective import canonicalize_iota

    return canonicalize_iota(tuple(dims), tuple(perm))


def _transpose_kind(dims, perm) -> str:
    kind = "noop"
    prev = -1
    for i, d in enumerate(perm):
        if dims[d] == 1:
            if d != i and dims[i] != 1:
                kind = "reshape"
            continue
        if d <= prev:
            return "transpose"
        prev = d
    return kind


@dataclass(frozen=True, eq=False)
class TileAssignment:
    """Device ids in an array of shape ``dims``: ``devices`` row-major, or (``iota`` set)
    ``arange(prod(reshape)).reshape(reshape).transpose(perm).reshape(dims)``."""

    dims: tuple[int, ...]
    devices: tuple[int, ...] | None = None
    iota: tuple[tuple[int, ...], tuple[int, ...]] | None = None

    @staticmethod
    def make_iota(dims, reshape=None, perm=None) -> TileAssignment:
        dims = check_int_list(dims, "TileAssignment: dims", minimum=0)
        reshape = (prod(dims),) if reshape is None else check_int_list(
            reshape, "TileAssignment: reshape dims", minimum=0)
        perm = tuple(range(len(reshape))) if perm is None else check_int_list(
            perm, "TileAssignment: transpose perm")
        return TileAssignment(dims, iota=canonicalize_iota_dims(reshape, perm))

    @staticmethod
    def from_array(array) -> TileAssignment:
        array = np.asarray(array)
        devices = check_int_list(array.reshape(-1).tolist(), "TileAssignment: devices")
        return TileAssignment(tuple(array.shape), devices=devices)

    def array(self) -> np.ndarray:
        if self.devices is not None:
            return np.array(self.devices, np.int64).reshape(self.dims)
        reshape, perm = self.iota
        return np.arange(prod(reshape), dtype=np.int64).reshape(reshape).transpose(
            perm).reshape(self.dims)

    @property
    def num_elements(self) -> int:
        return prod(self.dims)

    @property
    def ndim(self) -> int:
        return len(self.dims)

    def reshape(self, dims) -> TileAssignment:
        dims = check_int_list(dims, "TileAssignment.reshape: dims", minimum=0)
        if self.iota is not None:
            return TileAssignment(dims, iota=self.iota)
        return TileAssignment(dims, devices=self.devices)

    def transpose(self, perm) -> TileAssignment:
        perm = tuple(perm)
        kind = _transpose_kind(self.dims, perm)
        if kind == "noop":
            return self
        new_dims = tuple(self.dims[p] for p in perm)
        if self.iota is not None:
            iota = self._iota_transpose(perm, kind, new_dims)
            if iota is not None:
                return TileAssignment(new_dims, iota=iota)
        return TileAssignment.from_array(self.array().transpose(perm))

    def _iota_transpose(self, perm, kind, new_dims):
        """IotaTileAssignment::Transpose: the transposed iota, or None when it has none."""
        reshape, tperm = self.iota
        if kind == "reshape":
            return canonicalize_iota_dims(reshape, tperm)
        if len(reshape) == 1:
            return canonicalize_iota_dims(self.dims, perm)
        pure = True
        non_one: list[int] = []
        one_to_non_one = [-1] * len(self.dims)
        for i, d in enumerate(self.dims):
            if d == 1:
                continue
            if len(non_one) >= len(reshape) or reshape[tperm[len(non_one)]] != d:
                pure = False
            one_to_non_one[i] = len(non_one)
            non_one.append(d)
        if pure:
            new_perm = [tperm[one_to_non_one[p]] for p in perm if self.dims[p] != 1]
            return canonicalize_iota_dims(reshape, tuple(new_perm))
        return _transpose_decanonicalized(reshape, tperm, non_one, one_to_non_one, perm,
                                          self.dims)

    def to_text(self) -> str:
        text = f"devices=[{','.join(map(str, self.dims))}]"
        if self.iota is not None:
            reshape, perm = self.iota
            text += f"<=[{','.join(map(str, reshape))}]"
            if len(reshape) > 1:
                text += f"T({','.join(map(str, perm))})"
            return text
        return text + ",".join(map(str, self.devices))

    def __eq__(self, other) -> bool:
        if not isinstance(other, TileAssignment):
            return NotImplemented
        if self.dims != other.dims:
            return False
        if self.iota is not None and other.iota is not None:
            return self.iota == other.iota
        return bool(np.array_equal(self.array(), other.array()))

    def __hash__(self) -> int:
        return hash((self.dims, self.array().tobytes()))


def _prime_factors(n: int) -> list[int]:
    out = []
    while n % 2 == 0:
        out.append(2)
        n //= 2
    f = 3
    while f * f <= n:
        while n % f == 0:
            out.append(f)
            n //= f
        f += 2
    if n > 1:
        out.append(n)
    return out


def _transpose_decanonicalized(reshape, tperm, non_one, one_to_non_one, perm, dims):
    """IotaTileAssignment::Transpose when the tile dimensions are not whole reshape
    dimensions: split the reshape dimensions into prime factors, group the factors (in
    transposed order) into the tile dimensions, and transpose the groups; None when the
    factors do not group (then XLA materialises the device list)."""
    sizes: list[int] = []
    starts = [0]
    for d in reshape:
        sizes += _prime_factors(d)
        starts.append(len(sizes))
    new_perm: list[int] = []
    perm_to_orig: list[int] = []
    orig_to_perm: list[list[int]] = [[] for _ in reshape]
    for old in tperm:
        for j in range(starts[old], starts[old + 1]):
            new_perm.append(j)
            perm_to_orig.append(old)
            orig_to_perm[old].append(len(new_perm) - 1)

    def candidate(target: int, index: int) -> int | None:
        dim = new_perm[index]
        if target % sizes[dim] == 0:
            return dim
        for later in orig_to_perm[perm_to_orig[index]]:
            if later > index and target % sizes[new_perm[later]] == 0:
                other = new_perm[later]
                sizes[dim], sizes[other] = sizes[other], sizes[dim]
                return dim
        return None

    groups: list[list[int]] = [[] for _ in non_one]
    index = 0
    for i, target in enumerate(non_one):
        if index >= len(sizes):
            break
        dim = candidate(target, index)
        while dim is not None:
            target //= sizes[dim]
            groups[i].append(dim)
            index += 1
            if index >= len(sizes):
                break
            dim = candidate(target, index)
        if target != 1:
            return None
    flat: list[int] = []
    for p in perm:
        if one_to_non_one[p] >= 0:
            flat += groups[one_to_non_one[p]]
    return canonicalize_iota_dims(tuple(sizes), tuple(flat))


# -- shardings ------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class HloSharding:
    """One sharding (see the module docstring). ``kind``: replicated, manual, unknown,
    unreduced, maximal, tiled, tuple or named."""

    kind: str
    tile: TileAssignment | None = None
    replicate_on_last_tile_dim: bool = False
    subgroup_types: tuple[str, ...] = ()
    elements: tuple[HloSharding, ...] = ()
    named: NamedSharding | None = None
    shard_group: tuple[str, int] | None = None
    metadata: tuple = field(default=(), compare=False)

    # -- factories (XLA's) --

    @staticmethod
    def replicate(metadata=()) -> HloSharding:
        return HloSharding("replicated", metadata=tuple(metadata))

    @staticmethod
    def manual(metadata=()) -> HloSharding:
        return HloSharding("manual", metadata=tuple(metadata))

    @staticmethod
    def unknown(metadata=()) -> HloSharding:
        return HloSharding("unknown", metadata=tuple(metadata))

    @staticmethod
    def unreduced(metadata=()) -> HloSharding:
        return HloSharding("unreduced", metadata=tuple(metadata))

    @staticmethod
    def maximal(device: int, metadata=()) -> HloSharding:
        device = check_int(device, "HloSharding.maximal: device")
        return HloSharding("maximal", TileAssignment((1,), devices=(device,)),
                           metadata=tuple(metadata))

    @staticmethod
    def tiled(tile: TileAssignment, metadata=()) -> HloSharding:
        return HloSharding("tiled", tile, metadata=tuple(metadata))

    @staticmethod
    def iota_tile(dims, reshape=None, perm=None, metadata=()) -> HloSharding:
        return HloSharding.tiled(TileAssignment.make_iota(dims, reshape, perm), metadata)

    @staticmethod
    def partial_tile(tile: TileAssignment, metadata=()) -> HloSharding:
        """HloSharding::PartialTile: the last tile dimension replicates."""
        metadata = tuple(metadata)
        if tile.ndim == 1 or tile.dims[-1] == tile.num_elements:
            return HloSharding.replicate(metadata)
        if tile.dims[-1] == 1:
            return HloSharding("tiled", tile.reshape(tile.dims[:-1]), metadata=metadata)
        group = tile.dims[-1]
        if tile.iota is not None:
            reshape, perm = tile.iota
            if reshape[perm[-1]] == group:
                return HloSharding("tiled", tile, True, metadata=metadata)
            grouped = _group_minor_iota_dims_sorted(reshape, perm, group)
            if grouped is not None:
                return HloSharding("tiled", TileAssignment.make_iota(tile.dims, *grouped), True,
                                   metadata=metadata)
        array = np.sort(tile.array().reshape(-1, group), axis=1).reshape(tile.dims)
        return HloSharding("tiled", TileAssignment.from_array(array), True, metadata=metadata)

    @staticmethod
    def subgroup(tile: TileAssignment, types, metadata=()) -> HloSharding:
        """HloSharding::Subgroup: the last ``len(types)`` tile dimensions are subgroups."""
        types = tuple(types)
        metadata = tuple(metadata)
        if not types:
            return HloSharding("tiled", tile, metadata=metadata)
        data = tile.ndim - len(types)
        if len(set(types)) == 1 and prod(tile.dims[:data]) == 1:
            if types[0] in ("manual", "replicated", "unreduced"):
                return HloSharding(types[0], metadata=metadata)
        perm = list(range(data))
        by_type: dict[str, list[int]] = {}
        removed = []
        needs_merging = False
        for i, t in enumerate(types):
            if tile.dims[data + i] == 1:
                removed.append(data + i)
                needs_merging = True
                continue
            if t in by_type:
                needs_merging = True
            by_type.setdefault(t, []).append(data + i)
        needs_merging |= len(by_type) > 1
        if not needs_merging:
            return _create_subgroup_sharding(tile, types, metadata)
        merged_shape = list(tile.dims[:data])
        transposed_shape = list(merged_shape)
        merged_types = []
        for t in _TYPE_ORDER:
            if t not in by_type:
                continue
            size = 1
            for d in by_type[t]:
                perm.append(d)
                size *= tile.dims[d]
                transposed_shape.append(tile.dims[d])
            merged_shape.append(size)
            merged_types.append(t)
        new_tile = tile.transpose(perm + removed).reshape(merged_shape)
        return _create_subgroup_sharding(new_tile, tuple(merged_types), metadata)

    @staticmethod
    def tuple_(elements, metadata=()) -> HloSharding:
        return HloSharding("tuple", elements=tuple(elements))

    def with_metadata(self, metadata) -> HloSharding:
        return _replace(self, metadata=tuple(metadata))

    def without_metadata(self) -> HloSharding:
        if self.kind == "tuple":
            return _replace(self, elements=tuple(e.without_metadata() for e in self.elements))
        return _replace(self, metadata=())

    # -- facts --

    def is_tuple(self) -> bool:
        return self.kind == "tuple"

    def v2(self) -> HloSharding:
        """The tile-assignment form of a named sharding (itself otherwise)."""
        if self.kind != "named":
            return self
        named = self.named
        if named.kind == "maximal":
            return HloSharding.maximal(named.mesh.maximal_device, self.metadata)
        if named.kind in ("replicated", "manual", "unreduced"):
            return HloSharding(named.kind, metadata=self.metadata)
        dims, _, types, (sizes, order) = named_to_tiles(named)
        mesh = named.mesh
        if mesh.device_ids is not None:
            tile = TileAssignment(tuple(mesh.axis_sizes), devices=mesh.device_ids)
        elif mesh.iota is not None:
            tile = TileAssignment.make_iota(mesh.axis_sizes, *mesh.iota)
        else:
            tile = TileAssignment.make_iota(mesh.axis_sizes or (1,))
        if sizes:
            tile = tile.reshape(sizes).transpose(order)
        return HloSharding.subgroup(tile.reshape(dims), types, self.metadata)

    def is_replicated(self) -> bool:
        s = self.v2()
        if s.kind == "tuple":
            return all(e.is_replicated() for e in s.elements)
        return s.kind == "replicated"

    def is_manual(self) -> bool:
        s = self.v2()
        if s.kind == "tuple":
            return bool(s.elements) and all(e.is_manual() for e in s.elements)
        return s.kind == "manual"

    def is_tile_maximal(self) -> bool:
        return self.v2().kind in ("maximal", "replicated", "manual", "unknown", "unreduced")

    def is_tiled(self) -> bool:
        return self.v2().kind == "tiled"

    def has_manual_subgroup(self) -> bool:
        return "manual" in self.v2().subgroup_types

    @property
    def tile_dims(self) -> tuple[int, ...]:
        s = self.v2()
        return s.tile.dims if s.tile is not None and s.kind == "tiled" else ()

    @property
    def devices(self) -> tuple[int, ...]:
        s = self.v2()
        if s.tile is None or s.tile.devices is None:
            return ()
        return s.tile.devices

    @property
    def iota_dims(self) -> tuple[int, ...]:
        s = self.v2()
        return s.tile.iota[0] if s.tile is not None and s.tile.iota is not None else ()

    @property
    def subgroups(self) -> int:
        """Trailing tile dimensions that are subgroups, not data dimensions."""
        s = self.v2()
        return 1 if s.replicate_on_last_tile_dim else len(s.subgroup_types)

    @property
    def tiled_data_rank(self) -> int:
        return len(self.tile_dims) - self.subgroups

    def data_tile_dims(self, rank: int | None = None) -> tuple[int, ...]:
        """Tiles along each data dimension (1s for a maximal-kind sharding of ``rank``)."""
        s = self.v2()
        if s.kind != "tiled":
            return (1,) * (rank or 0)
        return s.tile.dims[: len(s.tile.dims) - s.subgroups]

    def num_tiles(self) -> int:
        return prod(self.data_tile_dims())

    def replication_type_dims(self) -> dict[str, int]:
        """Subgroup type -> its tile dimension."""
        s = self.v2()
        if s.replicate_on_last_tile_dim:
            return {"replicated": len(s.tile.dims) - 1}
        data = len(s.tile.dims) - len(s.subgroup_types) if s.tile is not None else 0
        return {t: data + i for i, t in enumerate(s.subgroup_types)}

    def tile_index(self, device: int) -> tuple[int, ...]:
        s = self.v2()
        where = np.argwhere(s.tile.array() == device)
        if not len(where):
            raise InvalidArgumentError(f"device {device} is not in sharding {self.to_text()}")
        return tuple(int(i) for i in where[0][: s.tiled_data_rank])

    def tile_shape(self, shape: Shape) -> tuple[int, ...]:
        """Per-device dimensions: each dimension's size divided by its tiles, rounded up."""
        dims = tuple(shape.dimensions)
        if not self.is_tiled():
            return dims
        return tuple(-(-d // t) for d, t in zip(dims, self.data_tile_dims()))

    def tile_offset(self, shape: Shape, device: int) -> tuple[int, ...]:
        if not self.is_tiled():
            return (0,) * len(shape.dimensions)
        index = self.tile_index(device)
        return tuple(min(i * -(-d // t), d) for i, d, t in
                     zip(index, shape.dimensions, self.data_tile_dims()))

    def tile_limit(self, shape: Shape, device: int) -> tuple[int, ...]:
        if not self.is_tiled():
            return tuple(shape.dimensions)
        index = self.tile_index(device)
        return tuple(min((i + 1) * -(-d // t), d) for i, d, t in
                     zip(index, shape.dimensions, self.data_tile_dims()))

    def leaf(self, index: int) -> HloSharding:
        return self.elements[index] if self.kind == "tuple" else self

    # -- text --

    def to_text(self, include_metadata: bool = True) -> str:
        """HloSharding::ToString."""
        if self.kind == "tuple":
            if not self.elements:
                return "{}"
            out = "{" + self.elements[0].to_text(include_metadata)
            for i, e in enumerate(self.elements[1:], 1):
                out += f", /*index={i}*/" if i % 5 == 0 else ", "
                out += e.to_text(include_metadata)
            return out + "}"
        if self.kind == "named":
            return self.named.to_text(include_metadata)
        tail = ""
        if self.shard_group is not None:
            tail += f" {self.shard_group[0]} {self.shard_group[1]}"
        if include_metadata and self.metadata:
            if len(self.metadata) == 1:
                tail += " metadata={" + self.metadata[0].to_text() + "}"
            else:
                tail += " metadata={" + ", ".join("{" + m.to_text() + "}"
                                                 for m in self.metadata) + "}"
        if self.kind in ("replicated", "manual", "unknown", "unreduced"):
            return "{" + self.kind + tail + "}"
        if self.kind == "maximal":
            return f"{{maximal device={self.tile.devices[0]}{tail}}}"
        text = "{" + self.tile.to_text()
        if self.replicate_on_last_tile_dim:
            text += " last_tile_dim_replicate"
        if self.subgroup_types:
            text += " last_tile_dims={" + ", ".join(_TYPE_TEXT.get(t, "error_type.")
                                                    for t in self.subgroup_types) + "}"
        return text + tail + "}"

    def text(self) -> str:
        return self.to_text(include_metadata=False)

    def __str__(self) -> str:
        return self.to_text()

    def __repr__(self) -> str:
        return f"HloSharding({self.to_text()})"

    def __eq__(self, other) -> bool:
        if not isinstance(other, HloSharding):
            return NotImplemented
        return _key(self) == _key(other)

    def __hash__(self) -> int:
        return hash(_key(self))


def _key(s: HloSharding):
    if s.kind == "tuple":
        return ("tuple", tuple(_key(e) for e in s.elements))
    if s.kind == "named":
        return ("named", s.named, s.shard_group)
    return (s.kind, s.tile, s.replicate_on_last_tile_dim, s.subgroup_types, s.shard_group)


def _replace(s: HloSharding, **changes) -> HloSharding:
    values = {f: getattr(s, f) for f in ("kind", "tile", "replicate_on_last_tile_dim",
                                         "subgroup_types", "elements", "named", "shard_group",
                                         "metadata")}
    values.update(changes)
    return HloSharding(**values)


def _create_subgroup_sharding(tile: TileAssignment, types: tuple, metadata) -> HloSharding:
    if len(types) == 1 and types[0] == "replicated":
        return HloSharding.partial_tile(tile, metadata)
    if len(types) == 1 and types[0] == "manual" and tile.num_elements == tile.dims[-1]:
        return HloSharding.manual(metadata)
    if types and types[-1] == "replicated":
        partial = HloSharding.partial_tile(tile, metadata)
        return _replace(partial, replicate_on_last_tile_dim=False, subgroup_types=types)
    return HloSharding("tiled", tile, subgroup_types=types, metadata=metadata)


def _group_minor_iota_dims_sorted(dims, perm, group):
    """XLA's GroupMinorIotaDimsSorted: (reshape, perm) whose minor dimensions, sorted,
    make the replication group, or None."""
    grouped = 0
    split = None
    for i in range(len(perm) - 1, -1, -1):
        dim = perm[i]
        size = dims[dim]
        if size <= group:
            if group % size:
                return None
            group //= size
            grouped += 1
        else:
            if size % group:
                return None
            split = (dim, size // group)
            grouped += 1
            group = 1
            break
    if split is None:
        new_perm = list(perm)
        new_perm[len(new_perm) - grouped:] = sorted(new_perm[len(new_perm) - grouped:])
        return tuple(dims), tuple(new_perm)
    split_i, major = split
    new_dims = list(dims[:split_i]) + [major, dims[split_i] // major] + list(dims[split_i + 1:])
    new_perm: list[int] = []
    perm_split = 0
    for i, p in enumerate(perm):
        new_perm.append(p if p <= split_i else p + 1)
        if p == split_i:
            perm_split = i
            break
    new_perm.append(new_perm[perm_split] + 1)
    for p in perm[perm_split + 1:]:
        new_perm.append(p if p <= split_i else p + 1)
    new_perm[len(new_perm) - grouped:] = sorted(new_perm[len(new_perm) - grouped:])
    return tuple(new_dims), tuple(new_perm)


# -- reading --------------------------------------------------------------------------------------


def read_sharding(sc: Scanner) -> str:
    """Read a ``sharding=`` value at the scanner's position: check it as XLA does and return
    the text XLA prints for it."""
    sc.skip()
    start = sc.pos
    read_balanced(sc)
    end = sc.pos
    sub = Scanner(sc.text, sc.what)
    sub.pos = start
    sharding = _read(sub)
    if sub.pos != end:
        sub.error(f"unexpected {sub.describe_next()} after the sharding")
    sc.pos = end
    return sharding.to_text()


def parse_sharding(text: str) -> HloSharding:
    """The sharding a text describes (raises ParseError as XLA's parser would).

    >>> parse_sharding("{devices=[2,1,2]<=[4] last_tile_dim_replicate}").tile_dims
    (2, 1, 2)
    """
    if isinstance(text, HloSharding):
        return text
    sc = Scanner(text, "sharding")
    out = _read(sc)
    if not sc.at_end():
        sc.error(f"unexpected {sc.describe_next()} after the sharding")
    return out


def _read(sc: Scanner) -> HloSharding:
    """HloParserImpl::ParseSharding: ``{`` then a single sharding, or a tuple of them."""
    sc.expect("{", "to start sharding attribute")
    if sc.peek() not in ("{", "}"):
        return _read_single(sc, sc.pos)
    elements = []
    if sc.peek() != "}":
        while True:
            sc.skip()
            pos = sc.pos
            sc.expect("{", "to start sharding attribute")
            elements.append(_read_single(sc, pos))
            if not sc.eat(","):
                break
    sc.expect("}", "to end sharding attribute")
    return HloSharding.tuple_(elements)


def _ints(sc: Scanner, what: str) -> list[int]:
    values = [sc.read_int(what)]
    while sc.eat(","):
        values.append(sc.read_int(what))
    return values


def _read_single(sc: Scanner, loc: int) -> HloSharding:
    """HloParserImpl::ParseSingleSharding after its ``{`` (``loc``: where the sharding
    starts, where XLA points its errors)."""
    if sc.peek_ident() in ("mesh", "maximal_mesh"):
        named = read_named_sharding(sc, loc)
        return HloSharding("named", named=named, metadata=named.metadata)
    seen: set[str] = set()
    devices: list[int] = []
    tile_dims: list[int] = []
    iota_dims: list[int] = []
    perm: list[int] = []
    subgroup_types: list[str] = []
    metadata: tuple = ()
    shard_group = None
    while not sc.eat("}"):
        sc.skip()
        word_pos = sc.pos
        word = sc.read_ident()
        if word in _KEYWORDS:
            seen.add(word)
        elif word == "device" and sc.eat("="):
            devices = [sc.read_int("an integer: device= attribute must be an integer")]
        elif word == "devices" and sc.eat("="):
            sc.expect("[", "to start sharding devices shape")
            tile_dims = _ints(sc, "an integer in the sharding devices shape")
            sc.expect("]", "to end sharding devices shape")
            if sc.eat("<="):
                sc.expect("[", "to start sharding iota_reshape_dims")
                iota_dims = _ints(sc, "an integer in iota_reshape_dims")
                sc.expect("]", "to end sharding iota_reshape_dims")
                if len(iota_dims) == 1:
                    perm = [0]
                else:
                    if sc.peek_ident() != "T":
                        sc.error("expected 'T(' to start sharding devices iota_transpose_perm")
                    sc.read_ident()
                    sc.expect("(", "to start sharding devices iota_transpose_perm")
                    while True:
                        pos = sc.pos
                        d = sc.read_int("an integer in iota_transpose_perm")
                        if d >= len(iota_dims):
                            sc.error(f"Out of range iota minor_to_major value {d}, expecting "
                                     f"value in range [0, {len(iota_dims)})", pos)
                        perm.append(d)
                        if not sc.eat(","):
                            break
                    sc.expect(")", "to end sharding devices iota_transpose_perm")
            else:
                devices = _ints(sc, "a device number")
        elif word == "metadata" and sc.eat("="):
            metadata = _read_metadata(sc)
        elif word == "last_tile_dims" and sc.eat("="):
            sc.expect("{", "to start last_tile_dims")
            while True:
                pos = sc.pos
                kind = sc.read_ident()
                if kind not in _SUBGROUP_TYPES:
                    sc.error(f"expected a sharding type ({', '.join(_SUBGROUP_TYPES)}) in "
                             f"last_tile_dims, found {kind or sc.describe_next()}", pos)
                subgroup_types.append(kind)
                if not sc.eat(","):
                    break
            sc.expect("}", "to end last_tile_dims")
        elif word in ("shard_as", "shard_like"):
            shard_group = (word, sc.read_int(f"a shard group id after {word}"))
        elif word is None:
            sc.error(f"unexpected token {sc.describe_next()} in sharding")
        else:
            sc.error("unknown attribute in sharding: expected device=, devices= metadata= or "
                     "last_tile_dims=", word_pos)
    out = _build(sc, loc, seen, devices, tile_dims, iota_dims, perm, subgroup_types, metadata)
    if shard_group is not None:
        out = _replace(out, shard_group=shard_group)
    return out


def _build(sc, loc, seen, devices, tile_dims, iota_dims, perm, subgroup_types, metadata):
    for kind in ("replicated", "maximal", "manual", "unknown", "unreduced"):
        if kind not in seen:
            continue
        if kind == "maximal":
            if len(devices) != 1:
                sc.error("maximal shardings should have exactly one device assigned", loc)
            return HloSharding.maximal(devices[0], metadata)
        if devices or tile_dims:
            sc.error(f"{kind} shardings should not have any devices assigned", loc)
        return HloSharding(kind, metadata=metadata)
    if not tile_dims:
        sc.error("non-maximal shardings must have a tile assignment list including dimensions",
                 loc)
    if iota_dims:
        if len(perm) != len(iota_dims):
            sc.error(f"iota_transpose_perm should have the same rank as iota_reshape_dims : "
                     f"expected {len(iota_dims)}, saw {len(perm)}.", loc)
        if sorted(perm) != list(range(len(iota_dims))):
            sc.error(f"iota_transpose_perm T({','.join(map(str, perm))}) is not a "
                     f"permutation of 0..{len(iota_dims) - 1}", loc)
        count, listed = prod(iota_dims), f"the iota <=[{','.join(map(str, iota_dims))}]"
        xla = (f"iota tile assignment size {count} does not match the tile assignment "
               f"dimensions product {prod(tile_dims)}")
    else:
        if len(devices) <= 1:
            sc.error("non-maximal shardings must have more than one device assigned", loc)
        count, listed = len(devices), "the device list"
        xla = (f"sharding device count {count} does not match the tile assignment size "
               f"{prod(tile_dims)}")
    dims = ",".join(map(str, tile_dims))
    if any(d < 1 for d in tile_dims):
        sc.error(f"the sharding devices shape [{dims}] has a dimension below 1", loc)
    if prod(tile_dims) != count:
        # XLA's parser's words (newer XLA checks it while parsing), then xlapy's
        sc.error(f"{xla} (the tile assignment [{dims}] holds {prod(tile_dims)} devices, but "
                 f"{listed} has {count})", loc)
    if iota_dims:
        tile = TileAssignment.make_iota(tile_dims, iota_dims, perm)
    else:
        tile = TileAssignment(tuple(tile_dims), devices=tuple(devices))
    if "last_tile_dim_replicate" in seen:
        return HloSharding.partial_tile(tile, metadata)
    if subgroup_types:
        if len(subgroup_types) > len(tile_dims):
            sc.error(f"last_tile_dims names {len(subgroup_types)} subgroups, but the tile "
                     f"assignment [{dims}] has only {len(tile_dims)} dimensions", loc)
        return HloSharding.subgroup(tile, subgroup_types, metadata)
    return HloSharding.tiled(tile, metadata)


# -- validation -------------------------------------------------------------------------------------


def validate_sharding(text, shape: Shape, num_devices: int | None = None) -> None:
    """HloSharding::Validate: the sharding fits ``shape`` (tuple leaves, tile assignment
    rank, devices non-negative, unique and below ``num_devices``). Raises
    InvalidArgumentError."""
    if shape.is_token():
        return
    sharding = parse_sharding(text)
    try:
        if sharding.kind == "tuple":
            if not shape.is_tuple():
                raise InvalidArgumentError("Sharding is tuple-shaped but validation shape is "
                                           "not.")
            leaves = shape.leaves()
            empty_tuple = not leaves or (len(leaves) == 1 and leaves[0][1].is_empty_tuple())
            if not (empty_tuple and len(sharding.elements) <= 1):
                if len(leaves) != len(sharding.elements):
                    raise InvalidArgumentError(
                        f"Shape {shape.to_string(print_layout=False)} has {len(leaves)} leaf "
                        f"nodes while this sharding has {len(sharding.elements)}")
                for (index, leaf), element in zip(leaves, sharding.elements):
                    try:
                        _validate_leaf(element, leaf, num_devices)
                    except InvalidArgumentError as e:
                        raise InvalidArgumentError(
                            f"{e} Note: While validating sharding tuple element "
                            f"{{{','.join(map(str, index))}}} which is {element.text()}"
                        ) from None
        else:
            _validate_leaf(sharding, shape, num_devices)
    except InvalidArgumentError as e:
        raise InvalidArgumentError(f"{e} Note: While validating sharding {sharding.text()} "
                                   f"against shape {shape.to_string(print_layout=False)}"
                                   ) from None


def _validate_leaf(sharding: HloSharding, shape: Shape, num_devices: int | None) -> None:
    if shape.is_tuple():
        raise InvalidArgumentError("Validation shape is a tuple but sharding is not.")
    rank = len(shape.dimensions) if shape.is_array() else 0
    if sharding.kind == "named":
        named = sharding.named
        if named.kind == "dims" and len(named.dims) != rank:
            raise InvalidArgumentError(
                f"Number of dimension shardings ({len(named.dims)}) is different than the "
                f"input rank. sharding={sharding.text()}, input_shape="
                f"{shape.to_string(print_layout=False)}")
        return
    if sharding.kind in ("replicated", "manual", "unknown", "unreduced"):
        return
    devices = sharding.tile.array().reshape(-1)
    if sharding.kind == "maximal":
        _device_in_range(int(devices[0]), num_devices)
        return
    if len(sharding.tile.dims) - sharding.subgroups != rank:
        raise InvalidArgumentError(
            f"Number of tile assignment dimensions (excluding subgroups) is different than the "
            f"input rank. sharding={sharding.text()}, input_shape="
            f"{shape.to_string(print_layout=False)}")
    seen = set()
    for device in devices:
        device = int(device)
        _device_in_range(device, num_devices)
        if device in seen:
            raise InvalidArgumentError(f"device {device} is not unique in tile assignment")
        seen.add(device)


def _device_in_range(device: int, num_devices: int | None) -> None:
    if device < 0:
        raise InvalidArgumentError(f"device {device} is negative in tile assignment")
    if num_devices is not None and device >= num_devices:
        raise InvalidArgumentError(f"device {device} >= num_devices ({num_devices}) in tile "
                                   f"assignment")


__all__ = ["HloSharding", "TileAssignment", "parse_sharding", "read_sharding",
           "validate_sharding"]

"""Shardings as device maps: which tile each device holds.

A ``DeviceMap`` describes a (V2) sharding of an array of a given rank over ``n`` devices:
``tiles[i]`` tiles along dimension i, ``index[d]`` the tile device d holds, ``group[d]`` its
manual subgroup (0 without one; a fully manual value has one group per device). Devices with
the same index and group are replicas of each other. Every sharding operation the
propagation and the partitioner need (XLA's hlo_sharding_util: TransposeSharding,
ReshapeSharding, PartiallyReplicateTiledShardingOnDims, RemoveShapeDimensions, merging two
compatible shardings, grouping devices for collectives) is a small array operation on the
map, and ``to_sharding`` turns a map back into XLA's canonical HloSharding (devices of a
replication group sorted, as PartialTile sorts them; an iota form when the devices are
one).

Imports the sharding model (xlapy.hlo.attrs.sharding) and numpy only.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

import numpy as np

from xlapy.hlo.attrs.sharding import HloSharding, TileAssignment


@dataclass(eq=False)
class DeviceMap:
    tiles: tuple[int, ...]
    index: np.ndarray  # [n, rank] int64
    group: np.ndarray  # [n] int64: manual subgroup

    @property
    def num_devices(self) -> int:
        return len(self.group)

    @property
    def rank(self) -> int:
        return len(self.tiles)

    def is_replicated(self) -> bool:
        return all(t == 1 for t in self.tiles)

    def manual_groups(self) -> int:
        return len(np.unique(self.group))

    def same_as(self, other: DeviceMap) -> bool:
        return (self.tiles == other.tiles and np.array_equal(self.index, other.index)
                and np.array_equal(self.group, other.group))

    def replica_rank(self) -> np.ndarray:
        """For each device, its rank among the devices holding the same tile in the same
        group (0 for the first, in device order)."""
        keys = np.concatenate([self.index, self.group[:, None]], axis=1)
        out = np.zeros(self.num_devices, np.int64)
        seen: dict[tuple, int] = {}
        for d in range(self.num_devices):
            k = tuple(keys[d])
            out[d] = seen.get(k, 0)
            seen[k] = out[d] + 1
        return out

    # -- derived maps --

    def with_tiles(self, dims: dict[int, int] | None = None) -> DeviceMap:
        """This map with the given dimensions unsharded (``dims``: dim -> 1)."""
        tiles = list(self.tiles)
        index = self.index.copy()
        for d in dims or {}:
            tiles[d] = 1
            index[:, d] = 0
        return DeviceMap(tuple(tiles), index, self.group)

    def replicate_dims(self, dims) -> DeviceMap:
        return self.with_tiles({d: 1 for d in dims})

    def transpose(self, perm) -> DeviceMap:
        perm = list(perm)
        return DeviceMap(tuple(self.tiles[p] for p in perm), self.index[:, perm], self.group)

    def remove_dims(self, dims) -> DeviceMap:
        keep = [i for i in range(self.rank) if i not in set(dims)]
        return DeviceMap(tuple(self.tiles[i] for i in keep), self.index[:, keep], self.group)

    def insert_dims(self, positions, rank: int) -> DeviceMap:
        """A map of ``rank`` dimensions whose dimensions at ``positions`` are new (untiled)
        and the others are this map's, in order."""
        tiles = []
        cols = []
        it = iter(range(self.rank))
        zero = np.zeros((self.num_devices, 1), np.int64)
        for i in range(rank):
            if i in positions:
                tiles.append(1)
                cols.append(zero)
            else:
                j = next(it)
                tiles.append(self.tiles[j])
                cols.append(self.index[:, j:j + 1])
        index = np.concatenate(cols, axis=1) if cols else np.zeros((self.num_devices, 0),
                                                                     np.int64)
        return DeviceMap(tuple(tiles), index, self.group)

    def select(self, mapping: list[int | None], rank: int) -> DeviceMap:
        """A map of ``rank`` dimensions: dimension i takes this map's dimension
        ``mapping[i]`` (None: untiled)."""
        tiles = []
        cols = []
        for src in mapping:
            if src is None:
                tiles.append(1)
                cols.append(np.zeros((self.num_devices, 1), np.int64))
            else:
                tiles.append(self.tiles[src])
                cols.append(self.index[:, src:src + 1])
        index = np.concatenate(cols, axis=1) if cols else np.zeros((self.num_devices, 0),
                                                                     np.int64)
        return DeviceMap(tuple(tiles), index, self.group)


def device_map(sharding: HloSharding, rank: int, num_devices: int) -> DeviceMap:
    """The map of a non-tuple sharding of an array of ``rank`` dimensions."""
    s = sharding.v2()
    index = np.zeros((num_devices, rank), np.int64)
    group = np.zeros(num_devices, np.int64)
    if s.kind == "manual":
        return DeviceMap((1,) * rank, index, np.arange(num_devices, dtype=np.int64))
    if s.kind != "tiled":
        return DeviceMap((1,) * rank, index, group)
    array = s.tile.array()
    data = len(s.tile.dims) - s.subgroups
    if data != rank:
        raise ValueError(f"sharding {s.to_text()} has {data} data dimensions, the value {rank}")
    manual_dim = s.replication_type_dims().get("manual")
    if array.size != num_devices or sorted(array.reshape(-1).tolist()) != list(range(num_devices)):
        raise ValueError(f"sharding {s.to_text()} holds devices "
                         f"{sorted(set(array.reshape(-1).tolist()))}, but the module is "
                         f"partitioned for {num_devices} (every partition must hold a tile)")
    positions = np.argwhere(array >= 0)
    for pos in positions:
        d = int(array[tuple(pos)])
        if d >= num_devices:
            raise ValueError(f"sharding {s.to_text()} names device {d}, but there are "
                             f"{num_devices} partitions")
        index[d] = pos[:data]
        if manual_dim is not None:
            group[d] = pos[manual_dim]
    return DeviceMap(tuple(int(t) for t in s.tile.dims[:data]), index, group)


def to_sharding(m: DeviceMap) -> HloSharding | None:
    """The canonical HloSharding of a map, or None when the map is no sharding (tiles held
    by different numbers of devices)."""
    n = m.num_devices
    groups = np.unique(m.group)
    manual = len(groups)
    if manual == n and manual > 1 and m.is_replicated():
        return HloSharding.manual()
    tiles = m.tiles
    count = prod(tiles) * manual
    if n % count:
        return None
    k = n // count
    array = np.full(tiles + (manual, k), -1, np.int64)
    fill = np.zeros(tiles + (manual,), np.int64)
    group_pos = {int(g): i for i, g in enumerate(groups)}
    for d in range(n):
        key = tuple(int(v) for v in m.index[d]) + (group_pos[int(m.group[d])],)
        if any(not 0 <= v < t for v, t in zip(key, tiles)):
            return None
        slot = fill[key]
        if slot >= k:
            return None
        array[key + (slot,)] = d
        fill[key] += 1
    if (array < 0).any():
        return None
    array = np.sort(array, axis=-1)
    if manual > 1:
        tile = _maybe_iota(array)
        return HloSharding.subgroup(tile, ("manual", "replicated"))
    array = array.reshape(tiles + (k,))
    if m.is_replicated():
        return HloSharding.replicate()
    return HloSharding.partial_tile(_maybe_iota(array))


def _maybe_iota(array: np.ndarray) -> TileAssignment:
    """An iota tile assignment equal to ``array`` when there is a simple one (the devices
    in order, or a transpose of a factorisation of the device count), else the list."""
    n = array.size
    flat = array.reshape(-1)
    if np.array_equal(flat, np.arange(n)):
        return TileAssignment.make_iota(array.shape)
    factors = _factorisations(n, max_len=4)
    import itertools

    base = np.arange(n)
    for dims in factors:
        for perm in itertools.permutations(range(len(dims))):
            if list(perm) == sorted(perm):
                continue
            if np.array_equal(base.reshape(dims).transpose(perm).reshape(-1), flat):
                return TileAssignment.make_iota(array.shape, dims, perm)
    return TileAssignment.from_array(array)


def _factorisations(n: int, max_len: int) -> list[tuple[int, ...]]:
    out: list[tuple[int, ...]] = []

    def rec(left: int, prefix: tuple[int, ...]):
        if left == 1:
            if len(prefix) > 1:
                out.append(prefix)
            return
        if len(prefix) == max_len:
            return
        for f in range(2, left + 1):
            if left % f == 0:
                rec(left // f, prefix + (f,))

    rec(n, ())
    return out


def merge(a: DeviceMap, b: DeviceMap) -> DeviceMap | None:
    """The map tiled as ``a`` where ``a`` tiles and as ``b`` where ``b`` tiles (XLA's
    MergeSharding of compatible shardings); None when they disagree on a dimension both tile
    or the result is no sharding."""
    if a.rank != b.rank or not np.array_equal(a.group, b.group):
        return None
    tiles = []
    index = np.zeros_like(a.index)
    for i in range(a.rank):
        ta, tb = a.tiles[i], b.tiles[i]
        if ta > 1 and tb > 1 and (ta != tb or not np.array_equal(a.index[:, i],
                                                                b.index[:, i])):
            return None
        if ta > 1:
            tiles.append(ta)
            index[:, i] = a.index[:, i]
        else:
            tiles.append(tb)
            index[:, i] = b.index[:, i]
    out = DeviceMap(tuple(tiles), index, a.group)
    return out if to_sharding(out) is not None else None


def more_specific(a: DeviceMap, b: DeviceMap | None) -> bool:
    """Whether ``a`` splits the value into more tiles than ``b`` (XLA's
    IsShardingMoreSpecific, by tile count)."""
    if b is None:
        return True
    return prod(a.tiles) > prod(b.tiles)


def reshape_map(m: DeviceMap, src: tuple[int, ...], dst: tuple[int, ...]) -> DeviceMap | None:
    """The map of a reshape's result (XLA's ReshapeSharding): dimension groups whose sizes
    match are re-read through their flat index; a group's tiles must be contiguous equal
    blocks in both views (its tiled source dimensions fully tiled except the most minor
    tiled one, which divides evenly). None when the tiling does not carry over."""
    groups = _reshape_groups(src, dst)
    if groups is None:
        return None
    tiles: list[int] = [1] * len(dst)
    index = np.zeros((m.num_devices, len(dst)), np.int64)
    for sdims, ddims in groups:
        stiles = [m.tiles[i] for i in sdims]
        if all(t == 1 for t in stiles):
            continue
        if len(sdims) == 1 and len(ddims) == 1:  # same size: any tiling carries over
            tiles[ddims[0]] = stiles[0]
            index[:, ddims[0]] = m.index[:, sdims[0]]
            continue
        flat_tiles = _flat_tiles([src[i] for i in sdims], stiles)
        if flat_tiles is None:
            return None
        dtiles = _split_tiles([dst[i] for i in ddims], flat_tiles)
        if dtiles is None:
            return None
        flat = np.zeros(m.num_devices, np.int64)
        for i, t in zip(sdims, stiles):
            flat = flat * t + m.index[:, i]
        for j in reversed(range(len(ddims))):
            t = dtiles[j]
            index[:, ddims[j]] = flat % t
            flat //= t
            tiles[ddims[j]] = t
    return DeviceMap(tuple(tiles), index, m.group)


def _reshape_groups(src, dst):
    """Pairs of (source dims, target dims) with equal products, covering both shapes;
    size-1 dimensions attach to a neighbour group."""
    groups = []
    i = j = 0
    while i < len(src) or j < len(dst):
        si, dj = [], []
        ps = pd = 1
        if i < len(src):
            si.append(i)
            ps *= src[i]
            i += 1
        if j < len(dst):
            dj.append(j)
            pd *= dst[j]
            j += 1
        while ps != pd:
            if ps < pd and i < len(src):
                si.append(i)
                ps *= src[i]
                i += 1
            elif pd < ps and j < len(dst):
                dj.append(j)
                pd *= dst[j]
                j += 1
            else:
                return None
        # trailing size-1 dims stay with this group
        while i < len(src) and src[i] == 1 and (j >= len(dst) or dst[j] != 1):
            si.append(i)
            i += 1
        while j < len(dst) and dst[j] == 1 and (i >= len(src) or src[i] != 1):
            dj.append(j)
            j += 1
        groups.append((si, dj))
    return groups


def _flat_tiles(sizes, tiles) -> int | None:
    """Tiles of the flattened group, when they are contiguous equal blocks of it: the
    dimensions before the first tiled one have size 1, the tiled dimensions before the last
    tiled one are fully tiled, the last one divides evenly."""
    tiled = [k for k, t in enumerate(tiles) if t > 1]
    first, last = tiled[0], tiled[-1]
    if any(sizes[k] != 1 for k in range(first)):
        return None
    if any(tiles[k] != sizes[k] for k in range(first, last)) or sizes[last] % tiles[last]:
        return None
    return prod(tiles)


def _split_tiles(sizes, total: int) -> list[int] | None:
    """Distribute ``total`` tiles over the target group's dimensions, major first: whole
    dimensions while they divide, then the rest on one dimension that it divides."""
    out = [1] * len(sizes)
    left = total
    for k, s in enumerate(sizes):
        if left == 1:
            break
        if s == 1:
            continue
        if left % s == 0:
            out[k] = s
            left //= s
        elif s % left == 0:
            out[k] = left
            left = 1
        else:
            return None
    return out if left == 1 else None


__all__ = ["DeviceMap", "device_map", "merge", "more_specific", "reshape_map", "to_sharding"]

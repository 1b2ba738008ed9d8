"""Resharding: a partitioned value moved from one sharding to any other (XLA's
PartitionedHlo::Reshard), with the cheapest of XLA's mechanisms that applies:

1. the same sharding: nothing;
2. every target tile inside the tile the device already holds (the target refines the
   source, e.g. from replicated): ``dynamic-slice`` at partition-id based offsets
   (ReshardFromPartialReplicateWithDynamicSlice);
3. the same tiles held by other devices: ``collective-permute``
   (ReshardWithCollectivePermute);
4. a dimension's tiling moved to another dimension: ``all-to-all`` between the devices that
   exchange blocks (ReshardWithAllToAll: reshape, transpose, all-to-all, transpose,
   reshape); from a partially replicated source the replicas first split the target
   dimension locally, and a ``collective-permute`` follows when the exchange leaves the
   blocks on other devices than the target names;
5. otherwise ``all-gather`` along the dimensions that must be gathered (only up to the
   target's tiling when it divides evenly: ReshardToPartialReplicateWithAllGather), then
   ``dynamic-slice`` to the target (XLA's fallback: replicate, then slice).

Padding of uneven shards is sliced off after gathering and added before slicing, so the
values inside the global shape are exact whatever the tiling.

Owns ``reshard(b, value, sharding)`` and ``reshard_map``. Imports xlapy.passes.spmd.core.
"""

from __future__ import annotations

from math import prod

import numpy as np

from xlapy.hlo.attrs.sharding import HloSharding
from xlapy.passes.spmd.core import (
    Builder,
    PTuple,
    PValue,
    SpmdError,
    ceil_div,
    device_groups,
    from_map,
    local_dims,
    pad_to,
    slice_to,
)
from xlapy.passes.spmd.device_map import DeviceMap, to_sharding
from xlapy.shape import Shape


def reshard(b: Builder, v, target: HloSharding):
    """``v`` (PValue or PTuple) with sharding ``target``."""
    if isinstance(v, PTuple):
        leaves = target.elements if target.kind == "tuple" else None
        return reshard_tuple(b, v, leaves if leaves is not None else target)
    if target.kind == "tuple":
        if len(target.elements) != 1:
            raise SpmdError(f"spmd-partition: a tuple sharding {target.to_text()} for the "
                            f"array {v.shape}")
        target = target.elements[0]
    target = target.v2()
    if target == v.sharding:
        return v
    tm = b.ctx.map_of(target, v.shape)
    out = reshard_map(b, v, tm)
    return PValue(out.hlo, out.shape, target, tm)


def reshard_tuple(b: Builder, v: PTuple, target) -> PTuple:
    """Reshard each leaf; ``target``: a flat list of leaf shardings or one sharding."""
    leaves = iter(target) if isinstance(target, (list, tuple)) else None

    def rec(t: PTuple) -> PTuple:
        elements = []
        changed = False
        for e in t.elements:
            if isinstance(e, PTuple):
                new = rec(e)
            else:
                new = reshard(b, e, next(leaves) if leaves is not None else target)
            changed |= new is not e
            elements.append(new)
        if not changed:
            return t
        hlo = b.add("tuple", [e.hlo for e in elements], {})
        return PTuple(hlo, t.shape, elements)

    return rec(v)


def reshard_map(b: Builder, v: PValue, tm: DeviceMap) -> PValue:
    sm = v.map
    if sm.same_as(tm):
        return v
    if not _same_groups(sm, tm) and sm.manual_groups() == 1:
        # A value every device holds whole can enter manual code as is (each device takes
        # its copy as its own value): gather it first if it is tiled.
        if any(t > 1 for t in sm.tiles):
            v = reshard_map(b, v, sm.replicate_dims(range(sm.rank)))
        sm = DeviceMap(sm.tiles, sm.index * 0, tm.group.copy())
        sm = DeviceMap(tuple(1 for _ in sm.tiles), sm.index, sm.group)
        v = from_map(b.ctx, v.hlo, v.shape, sm)
        if sm.same_as(tm):
            return v
    if not _same_groups(sm, tm):
        raise SpmdError(f"spmd-partition: cannot reshard {v.sharding.to_text()} to "
                        f"{to_sharding(tm).to_text()}: their manual subgroups differ (only "
                        f"SPMDFullToShardShape / SPMDShardToFullShape cross that boundary)")
    if v.shape.is_array() and len(v.shape.dimensions) == 0:
        return from_map(b.ctx, v.hlo, v.shape, tm)
    if _refines(v.shape, sm, tm):
        return _slice_to_map(b, v, tm)
    out = _permute(b, v, tm)
    if out is not None:
        return out
    out = _all_to_all(b, v, tm)
    if out is not None:
        return out
    out = _gather_then_all_to_all(b, v, tm)
    if out is not None:
        return out
    out = _refine_all_to_all(b, v, tm)
    if out is not None:
        return out
    return _gather_then_slice(b, v, tm)


def _same_groups(a: DeviceMap, b: DeviceMap) -> bool:
    if np.array_equal(a.group, b.group):
        return True
    # the same partition of the devices into groups, numbered differently
    pairs = set(zip(a.group.tolist(), b.group.tolist()))
    return len(pairs) == len(set(a.group.tolist())) == len(set(b.group.tolist()))


# -- 2. dynamic-slice ------------------------------------------------------------------------------


def _block(shape: Shape, m: DeviceMap, dim: int, device: int) -> tuple[int, int]:
    n = shape.dimensions[dim]
    size = ceil_div(n, m.tiles[dim])
    start = int(m.index[device, dim]) * size
    return start, size


def _refines(shape: Shape, sm: DeviceMap, tm: DeviceMap) -> bool:
    """Every device's target block (within the global shape) lies in its source block."""
    for dim, n in enumerate(shape.dimensions):
        if sm.tiles[dim] == tm.tiles[dim] and np.array_equal(sm.index[:, dim], tm.index[:, dim]):
            continue
        for d in range(sm.num_devices):
            s0, ss = _block(shape, sm, dim, d)
            t0, ts = _block(shape, tm, dim, d)
            if t0 >= n:  # a block wholly in the padding: nothing to hold
                continue
            if t0 < s0 or min(t0 + ts, n) > s0 + ss:
                return False
    return True


def _slice_to_map(b: Builder, v: PValue, tm: DeviceMap) -> PValue:
    sm = v.map
    shape = v.shape
    target = local_dims(shape, tm)
    starts = []
    need = list(v.hlo.shape.dimensions)
    varies = False
    for dim in range(len(shape.dimensions)):
        offs = []
        for d in range(sm.num_devices):
            s0, _ = _block(shape, sm, dim, d)
            t0, _ = _block(shape, tm, dim, d)
            offs.append(max(t0 - s0, 0))
        need[dim] = max(need[dim], max(offs) + target[dim])
        varies |= any(o != 0 for o in offs)
        starts.append(offs)
    if not varies:
        return from_map(b.ctx, slice_to(b, v.hlo, target), shape, tm)
    x = pad_to(b, v.hlo, need)
    indices = [b.per_device(offs) for offs in starts]
    out = b.add("dynamic-slice", [x] + indices, {"dynamic_slice_sizes": tuple(target)},
                shape=Shape.array(shape.element_type, target), name="dynamic-slice")
    return from_map(b.ctx, out, shape, tm)


# -- 3. collective-permute ---------------------------------------------------------------------------


def _permute(b: Builder, v: PValue, tm: DeviceMap) -> PValue | None:
    sm = v.map
    if sm.tiles != tm.tiles:
        return None
    holders: dict[tuple, list[int]] = {}
    wanters: dict[tuple, list[int]] = {}
    for d in range(sm.num_devices):
        holders.setdefault((tuple(sm.index[d]), int(sm.group[d])), []).append(d)
        wanters.setdefault((tuple(tm.index[d]), int(tm.group[d])), []).append(d)
    pairs = []
    for key, targets in wanters.items():
        sources = holders.get(key, [])
        if len(sources) != len(targets):
            return None
        same = [d for d in targets if d in sources]
        rest_t = [d for d in targets if d not in same]
        rest_s = [d for d in sources if d not in same]
        pairs += [(d, d) for d in same] + list(zip(rest_s, rest_t))
    if all(s == t for s, t in pairs):
        return from_map(b.ctx, v.hlo, v.shape, tm)
    out = b.collective_permute(v.hlo, pairs)
    return from_map(b.ctx, out, v.shape, tm)


# -- 4. all-to-all ---------------------------------------------------------------------------------


def _all_to_all(b: Builder, v: PValue, tm: DeviceMap) -> PValue | None:
    """Source tiled k ways along i, target k ways along j instead, all else equal."""
    sm = v.map
    diff = [d for d in range(sm.rank)
            if sm.tiles[d] != tm.tiles[d] or not np.array_equal(sm.index[:, d], tm.index[:, d])]
    if len(diff) != 2:
        return None
    for i, j in (diff, diff[::-1]):
        k = sm.tiles[i]
        if k > 1 and tm.tiles[i] == 1 and sm.tiles[j] == 1 and tm.tiles[j] == k \
                and np.array_equal(sm.index[:, i], tm.index[:, j]):
            return _do_all_to_all(b, v, tm, i, j, k)
    return None


def _do_all_to_all(b, v: PValue, tm: DeviceMap, i: int, j: int, k: int) -> PValue:
    shape = v.shape
    et = shape.element_type
    groups = device_groups(v.map, [i])
    x = v.hlo
    dims = list(x.shape.dimensions)
    cj = ceil_div(dims[j], k)  # the local block along j (the whole dimension if untiled)
    dims[j] = cj * k
    x = pad_to(b, x, dims)
    # split dimension j into (k, cj), the k blocks major
    split = dims[:j] + [k, cj] + dims[j + 1:]
    x = b.add("reshape", [x], {}, shape=Shape.array(et, split))
    perm = [j] + [d for d in range(len(split)) if d != j]
    moved = b.add("transpose", [x], {"dimensions": tuple(perm)},
                  shape=Shape.array(et, [split[p] for p in perm]))
    exchanged = b.all_to_all(moved, 0, groups)
    # dimension 0 now counts the source blocks along i: move it next to i and merge
    cur = [split[p] for p in perm]  # [k, rest...] where rest is split without j
    rest = [d for d in range(len(split)) if d != j]
    pos_i = rest.index(i if i < j else i + 1) + 1  # position of dim i in cur
    back = list(range(1, pos_i)) + [0] + list(range(pos_i, len(cur)))
    y = b.add("transpose", [exchanged], {"dimensions": tuple(back)},
              shape=Shape.array(et, [cur[p] for p in back]))
    merged = [cur[p] for p in back]
    at = pos_i - 1
    merged = merged[:at] + [merged[at] * merged[at + 1]] + merged[at + 2:]
    y = b.add("reshape", [y], {}, shape=Shape.array(et, merged))
    target = list(local_dims(shape, tm))
    y = slice_to(b, y, target)
    return from_map(b.ctx, y, shape, tm)


def _gather_then_all_to_all(b: Builder, v: PValue, tm: DeviceMap) -> PValue | None:
    """Gather the dimensions the target does not tile as the source does, except one
    dimension i whose tiling then moves to j by an all-to-all (XLA reshards x,y -> None,x
    so: all-gather y, all-to-all x)."""
    sm = v.map
    for i in range(sm.rank):
        k = sm.tiles[i]
        if k == 1 or tm.tiles[i] != 1:
            continue
        for j in range(sm.rank):
            if j == i or tm.tiles[j] != k or not np.array_equal(sm.index[:, i], tm.index[:, j]):
                continue
            differ = [d for d in range(sm.rank) if d != i and (
                sm.tiles[d] != tm.tiles[d] or not np.array_equal(sm.index[:, d],
                                                                tm.index[:, d]))]
            inter = sm.replicate_dims(differ)
            if to_sharding(inter) is None:
                continue
            target_inter = inter.replicate_dims([i])
            target_inter.tiles = tuple(k if d == j else t for d, t in enumerate(target_inter.tiles))
            target_inter.index[:, j] = sm.index[:, i]
            if not target_inter.same_as(tm):
                continue
            cur = v
            for d in differ:
                if cur.map.tiles[d] > 1:
                    cur = _gather_dim(b, cur, d, cur.map.tiles[d])
            return _do_all_to_all(b, cur, tm, i, j, k)
    return None


def _refine_all_to_all(b: Builder, v: PValue, tm: DeviceMap) -> PValue | None:
    """A dimension i's a-way tiling moved into dimension j, which the target tiles a * bb
    ways: the source's replicas first split j locally to bb tiles (a dynamic-slice, when j
    has fewer), an all-to-all among the a devices of each j block moves the i tiles into
    j (device with blocks (i=q, j=c) ends with j block c * a + q), and a collective-permute
    puts the blocks on the devices the target names, when they differ (XLA's reshard of a
    partially replicated source through all-to-all and collective-permute)."""
    sm = v.map
    n = v.shape.dimensions
    for i in range(sm.rank):
        a = sm.tiles[i]
        if a == 1 or tm.tiles[i] != 1:
            continue
        for j in range(sm.rank):
            if j == i or tm.tiles[j] % a:
                continue
            others = [d for d in range(sm.rank) if d not in (i, j)]
            if any(sm.tiles[d] != tm.tiles[d] for d in others):
                continue
            bb = tm.tiles[j] // a
            if bb % sm.tiles[j]:
                continue
            f = bb // sm.tiles[j]
            if (bb > 1 and n[j] % (bb * a)) or n[i] % a:
                continue
            mid = _split_replicas(sm, j, f)
            if mid is None:
                continue
            moved = DeviceMap(tm.tiles, mid.index.copy(), mid.group)
            moved.index[:, j] = mid.index[:, j] * a + mid.index[:, i]
            moved.index[:, i] = 0
            if to_sharding(moved) is None:
                continue
            cur = _slice_to_map(b, v, mid) if f > 1 else v
            cur = _do_all_to_all(b, cur, moved, i, j, a)
            return cur if cur.map.same_as(tm) else _permute(b, cur, tm)
    return None


def _split_replicas(sm: DeviceMap, dim: int, f: int) -> DeviceMap | None:
    """``sm`` with ``dim`` tiled ``f`` times more, each tile's replicas (in device order)
    taking the sub-blocks in turn; None when a tile has too few replicas."""
    if f == 1:
        return sm
    ranks = sm.replica_rank()
    count = sm.num_devices // (prod(sm.tiles) * sm.manual_groups())
    if count % f:
        return None
    out = DeviceMap(sm.tiles[:dim] + (sm.tiles[dim] * f,) + sm.tiles[dim + 1:],
                    sm.index.copy(), sm.group)
    out.index[:, dim] = sm.index[:, dim] * f + ranks // (count // f)
    return out if to_sharding(out) is not None else None


# -- 5. all-gather, then slice -----------------------------------------------------------------------


def _gather_then_slice(b: Builder, v: PValue, tm: DeviceMap) -> PValue:
    shape = v.shape
    cur = v
    for dim in range(len(shape.dimensions)):
        sm = cur.map
        s, t = sm.tiles[dim], tm.tiles[dim]
        if s == 1 or (s == t and np.array_equal(sm.index[:, dim], tm.index[:, dim])):
            continue
        n = shape.dimensions[dim]
        factor = s
        if t > 1 and s % t == 0 and n % s == 0 and np.array_equal(
                sm.index[:, dim] // (s // t), tm.index[:, dim]):
            factor = s // t  # gather only up to the target's tiling
        cur = _gather_dim(b, cur, dim, factor)
    return _slice_to_map(b, cur, tm) if not cur.map.same_as(tm) else cur


def _gather_dim(b: Builder, v: PValue, dim: int, factor: int) -> PValue:
    """All-gather ``factor`` consecutive tiles along ``dim`` (all of them when ``factor``
    is the tile count)."""
    sm = v.map
    s = sm.tiles[dim]
    coarse = sm.index[:, dim] // factor
    fine = sm.index[:, dim] % factor
    keyed = DeviceMap(sm.tiles[:dim] + (s // factor,) + sm.tiles[dim + 1:],
                      sm.index.copy(), sm.group)
    keyed.index[:, dim] = coarse
    # group: same tile elsewhere, same coarse index, same replica rank; order by fine index
    work = DeviceMap(sm.tiles + (factor,), np.concatenate([keyed.index, fine[:, None]], 1),
                     sm.group)
    groups = device_groups(work, [work.rank - 1])
    gathered = b.all_gather(v.hlo, dim, groups)
    n = v.shape.dimensions[dim]
    new_tiles = s // factor
    dims = list(gathered.shape.dimensions)
    dims[dim] = ceil_div(n, new_tiles) if new_tiles > 1 else n
    out = slice_to(b, gathered, dims)
    return from_map(b.ctx, out, v.shape, keyed)


def replicate(b: Builder, v):
    """``v`` on every device whole."""
    if isinstance(v, PTuple):
        return reshard_tuple(b, v, HloSharding.replicate())
    if v.map.manual_groups() > 1:
        m = v.map.replicate_dims(range(v.map.rank))
        return reshard_map(b, v, m)
    return reshard(b, v, HloSharding.replicate())


__all__ = ["replicate", "reshard", "reshard_map", "reshard_tuple"]

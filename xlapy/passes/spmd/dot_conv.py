"""Partitioning dot and convolution (XLA's dot_handler.cc and convolution_handler.cc, in
their common cases).

Both are seen as an iteration space of dimension pairs: batch (lhs, rhs and result),
lhs-only (lhs non-contracting / the convolution's input batch, with a result dimension),
rhs-only (rhs non-contracting / the kernel's output feature), contracting (lhs and rhs,
no result dimension) and, for a convolution, spatial dimensions (all three, kept whole;
one the result is split along, whose window a neighbour's halo covers, keeps its split in
the input and the result, the kernel whole there: the input windows come by halo exchange,
windowed.py, and the local convolution runs without padding on it). A sharding of the iteration space gives each operand
its sharding (the dimensions it lacks become replication) and the local dot computes each
device's block; contracting dimensions tiled leave partial sums, combined by an all-reduce
over the devices that split them - or a reduce-scatter when the result's sharding splits
the summed block among exactly those devices (XLA's PartitionDotGroupOnContracting and its
reduce-scatter).

The iteration space's sharding is chosen among the result's, each operand's, and their
compatible merges (XLA's PartitionBaseCase: batch-partitioned, lhs/rhs
non-contracting-partitioned, contracting-partitioned, and their combinations), by an
estimate of the bytes each choice moves (operand reshards, the all-reduce, the result's
reshard); a choice needing no communication wins.

Imports xlapy.passes.spmd.{core,reshard,partitioner,device_map,handlers_shape,windowed}.
"""

from __future__ import annotations

from math import prod

import numpy as np

from xlapy.passes.spmd.core import PValue, ceil_div, device_groups, from_map, local_dims, mask
from xlapy.passes.spmd.device_map import DeviceMap, merge, to_sharding
from xlapy.passes.spmd.handlers_shape import local, target_map, to, window_of, without_padding
from xlapy.passes.spmd.partitioner import default_handler, handler
from xlapy.passes.spmd.reshard import _refines
from xlapy.passes.spmd.windowed import exchange as halo_exchange
from xlapy.passes.spmd.windowed import plan as halo_plan
from xlapy.shape import PrimitiveType, dtypes


class Space:
    """The iteration space: one entry per dimension, (kind, lhs dim, rhs dim, out dim)."""

    def __init__(self, dims: list[tuple[str, int | None, int | None, int | None]],
                 ranks: tuple[int, int, int]):
        self.dims = dims
        self.ranks = ranks

    def from_operand(self, m: DeviceMap, which: int) -> DeviceMap:
        mapping = [None if d[0] == "H" and which == 1 else d[1 + which] for d in self.dims]
        return m.select(mapping, len(self.dims))

    def to_operand(self, it: DeviceMap, which: int) -> DeviceMap:
        """The operand's (``which`` 0, 1; the result: 2) map; a halo dimension is whole in
        the kernel."""
        rank = self.ranks[which]
        mapping: list[int | None] = [None] * rank
        for k, d in enumerate(self.dims):
            if d[1 + which] is not None and not (d[0] == "H" and which == 1):
                mapping[d[1 + which]] = k
        return it.select(mapping, rank)

    def positions(self, kind: str) -> list[int]:
        return [k for k, d in enumerate(self.dims) if d[0] == kind]

    def whole(self, it: DeviceMap, kinds: str) -> DeviceMap:
        return it.replicate_dims([k for k, d in enumerate(self.dims) if d[0] in kinds])


def dot_space(instr) -> Space:
    dn = instr.attrs["dot_dimension_numbers"]
    lhs_rank = len(instr.operands[0].shape.dimensions)
    rhs_rank = len(instr.operands[1].shape.dimensions)
    lb, rb = list(dn.lhs_batch_dimensions), list(dn.rhs_batch_dimensions)
    lc, rc = list(dn.lhs_contracting_dimensions), list(dn.rhs_contracting_dimensions)
    lnc = [d for d in range(lhs_rank) if d not in lb and d not in lc]
    rnc = [d for d in range(rhs_rank) if d not in rb and d not in rc]
    dims = []
    out = 0
    for a, c in zip(lb, rb):
        dims.append(("B", a, c, out))
        out += 1
    for a in lnc:
        dims.append(("L", a, None, out))
        out += 1
    for c in rnc:
        dims.append(("R", None, c, out))
        out += 1
    for a, c in zip(lc, rc):
        dims.append(("C", a, c, None))
    return Space(dims, (lhs_rank, rhs_rank, out))


def conv_space(instr) -> Space:
    dn = instr.attrs["dim_labels"]
    lhs_rank = len(instr.operands[0].shape.dimensions)
    rhs_rank = len(instr.operands[1].shape.dimensions)
    grouped = instr.attrs.get("feature_group_count", 1) > 1 or \
        instr.attrs.get("batch_group_count", 1) > 1
    dims = [("L" if instr.attrs.get("batch_group_count", 1) == 1 else "S",
             dn.input_batch_dimension, None, dn.output_batch_dimension),
            ("S" if grouped else "R", None, dn.kernel_output_feature_dimension,
             dn.output_feature_dimension),
            ("S" if grouped else "C", dn.input_feature_dimension,
             dn.kernel_input_feature_dimension, None)]
    if grouped:  # the feature pair: kept whole on both sides
        dims[1] = ("S", None, dn.kernel_output_feature_dimension, dn.output_feature_dimension)
        dims[2] = ("S", dn.input_feature_dimension, dn.kernel_input_feature_dimension, None)
    for i, s in enumerate(dn.input_spatial_dimensions):
        dims.append(("S", s, dn.kernel_spatial_dimensions[i], dn.output_spatial_dimensions[i]))
    return Space(dims, (lhs_rank, rhs_rank, len(instr.shape.dimensions)))


def _candidates(space: Space, lhs: PValue, rhs: PValue, out: DeviceMap) -> list[DeviceMap]:
    a = space.from_operand(lhs.map, 0)
    c = space.from_operand(rhs.map, 1)
    o = space.from_operand(out, 2)
    base = [merge(a, c), a, c, o, merge(o, a), merge(o, c)]
    ac = merge(a, c)
    base.append(merge(o, ac) if ac is not None else None)
    out_list: list[DeviceMap] = []
    for m in base:
        if m is None:
            continue
        m = space.whole(m, "S")
        if to_sharding(m) is None:
            continue
        if not any(m.same_as(x) for x in out_list):
            out_list.append(m)
    return out_list


def _bytes(dims, et) -> int:
    return prod(dims) * max(dtypes.byte_width(et), 1)


def reshard_cost(shape, sm: DeviceMap, tm: DeviceMap) -> int:
    """Bytes a device receives to reshard (0 for a local slice)."""
    if sm.same_as(tm) or _refines(shape, sm, tm):
        return 0
    et = shape.element_type
    if sm.tiles == tm.tiles:
        return _bytes(local_dims(shape, tm), et)
    keep = {d for d in range(sm.rank)
            if sm.tiles[d] == tm.tiles[d] and np.array_equal(sm.index[:, d], tm.index[:, d])}
    inter = sm.replicate_dims([d for d in range(sm.rank) if d not in keep])
    return _bytes(local_dims(shape, inter), et)


def _choose(space: Space, lhs: PValue, rhs: PValue, out_shape, tm: DeviceMap) -> DeviceMap:
    best = None
    for it in _candidates(space, lhs, rhs, tm):
        lm, rm = space.to_operand(it, 0), space.to_operand(it, 1)
        om = space.to_operand(space.whole(it, "C"), 2)
        moved = reshard_cost(lhs.shape, lhs.map, lm) + reshard_cost(rhs.shape, rhs.map, rm)
        cost = moved
        if any(it.tiles[k] > 1 for k in space.positions("C")):
            cost += 2 * _bytes(local_dims(out_shape, om), out_shape.element_type)
        cost += reshard_cost(out_shape, om, tm)
        # XLA's PartitionBaseCase first takes a layout the operands already have (no operand
        # moves; the result is combined or resharded afterwards); bytes decide among the rest
        cost = (moved > 0, cost)
        if best is None or cost < best[0]:
            best = (cost, it)
    if best is None:  # nothing compatible: everything whole
        return tm.replicate_dims(range(tm.rank)).select([None] * len(space.dims),
                                                         len(space.dims))
    return best[1]


def _dot_like(p, b, instr, ops, space: Space):
    lhs, rhs = ops[0], ops[1]
    if lhs.map.manual_groups() > 1 and not any(t > 1 for t in lhs.map.tiles + rhs.map.tiles):
        from xlapy.passes.spmd.partitioner import manual_clone

        return manual_clone(p, b, instr, ops)
    tm = target_map(p, instr)
    it = _choose(space, lhs, rhs, instr.shape, tm)
    plans = {}
    for k in space.positions("H"):
        if it.tiles[k] > 1:
            pl = _conv_plan(instr, space, k, it.tiles[k])
            if pl is None:
                it = it.replicate_dims([k])
            else:
                plans[k] = pl
    lm, rm = space.to_operand(it, 0), space.to_operand(it, 1)
    lhs, rhs = to(b, lhs, lm), to(b, rhs, rm)
    contracting = [k for k in space.positions("C") if it.tiles[k] > 1]
    lx, rx = lhs.hlo, rhs.hlo
    if contracting:  # padding of uneven contracting shards must add nothing
        lx = mask(b, lhs, [space.dims[k][1] for k in contracting], b.zero(lhs.shape.element_type))
        rx = mask(b, rhs, [space.dims[k][2] for k in contracting], b.zero(rhs.shape.element_type))
    attrs = dict(instr.attrs.items())
    if plans:  # split spatial dimensions: the input windows by halo exchange
        for k, pl in plans.items():
            lx = halo_exchange(b, lx, lhs.map, space.dims[k][1], pl,
                               b.zero(lhs.shape.element_type))
        attrs["window"] = without_padding(attrs["window"], [k - 3 for k in plans])
    om = space.to_operand(space.whole(it, "C"), 2)
    hlo = b.add(instr.opcode, [lx, rx], attrs, shape=local(instr.shape, om))
    if not contracting:
        return from_map(p.ctx, hlo, instr.shape, om)
    et = instr.shape.element_type
    reducer = p.ctx.reducer("or" if et == PrimitiveType.PRED else "add", et)
    groups = device_groups(it, contracting)
    scattered = _reduce_scatter(b, hlo, instr.shape, om, tm, groups, reducer)
    if scattered is not None:
        return from_map(p.ctx, scattered, instr.shape, tm)
    hlo = b.all_reduce(hlo, groups, reducer)
    return from_map(p.ctx, hlo, instr.shape, om)


def _reduce_scatter(b, hlo, shape, om: DeviceMap, tm: DeviceMap, groups, reducer):
    """A reduce-scatter along one dimension when the target gives each member of a summing
    group its own consecutive sub-block of the group's block, evenly."""
    k = len(groups[0])
    for d in range(om.rank):
        if tm.tiles[d] != om.tiles[d] * k or shape.dimensions[d] % tm.tiles[d]:
            continue
        others = [e for e in range(om.rank) if e != d]
        if any(tm.tiles[e] != om.tiles[e] or not np.array_equal(tm.index[:, e], om.index[:, e])
               for e in others) or not np.array_equal(tm.group, om.group):
            continue
        ordered = []
        ok = True
        for g in groups:
            members = sorted(g, key=lambda dev: tm.index[dev, d])
            for q, dev in enumerate(members):
                if tm.index[dev, d] != om.index[dev, d] * k + q:
                    ok = False
            ordered.append(members)
        if ok:
            return b.reduce_scatter(hlo, d, ordered, reducer)
    return None


@handler("dot")
def dot(p, b, instr, ops):
    return _dot_like(p, b, instr, ops, dot_space(instr))


def _conv_plan(instr, space: Space, k: int, tiles: int):
    """The halo exchange of the convolution's spatial dimension at space position ``k``
    split ``tiles`` ways (None: not a window of that form, or a halo past a neighbour)."""
    _, lhs_d, _, out_d = space.dims[k]
    w = window_of(instr.attrs["window"].dimensions[k - 3], instr.shape.dimensions[out_d])
    if w is None:
        return None
    return halo_plan(instr.operands[0].shape.dimensions[lhs_d], tiles, w)


@handler("convolution")
def convolution(p, b, instr, ops):
    if instr.attrs.get("batch_group_count", 1) > 1 and instr.attrs.get("feature_group_count",
                                                                       1) > 1:
        return default_handler(p, b, instr, ops)
    space = conv_space(instr)
    tm = target_map(p, instr)
    for k, d in enumerate(space.dims):
        # a spatial dimension the result is split along keeps its split: halo exchange
        if k >= 3 and d[0] == "S" and tm.tiles[d[3]] > 1 and \
                _conv_plan(instr, space, k, tm.tiles[d[3]]) is not None:
            space.dims[k] = ("H",) + d[1:]
    return _dot_like(p, b, instr, ops, space)


__all__ = ["Space", "conv_space", "dot_space", "reshard_cost"]

_ = ceil_div

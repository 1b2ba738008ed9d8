"""Partitioning gather and scatter (XLA's gather_scatter_handler.cc, in its passthrough and
operand-parallel forms).

Gather: the result's tiling is kept on the dimensions it can be computed on locally -
offset dimensions whose operand dimension is taken whole by every slice (operand
passthrough: the operand is tiled the same way), batch dimensions (index passthrough: the
indices are tiled along them), and batching dimensions shared by the operand and the
indices; every other dimension of the result is whole. Operands are resharded to match,
the gather runs locally with the slice sizes of the local operand, and the visitor reshards
the result to its sharding.

Scatter: the operand keeps its tiling on the dimensions every update window covers whole
(and on batching dimensions); the updates are tiled the same way along the corresponding
window dimensions; indices, and the operand's other dimensions, are whole.

Operand sharded along an indexed dimension whose slice size is 1 (XLA's
PartitionGatherTrivialSlicedOperandDimensions / its scatter twin; an embedding table split
by rows): the operand keeps that tiling and every device runs the gather or scatter on its
own rows, the indices made local by subtracting the device's first row. A gather first
clamps the indices as the whole gather would, masks the rows the device does not hold to
zero and sums over the devices that split the operand (all-reduce); a scatter needs no
communication at all: an update whose row another device holds is out of bounds locally,
and scatter skips it. The indices (and updates) are the same on the devices that split the
operand. A gather takes this path unless a device would hold more bytes (its operand block
and its result block) than with the operand whole along those dimensions (what XLA's
choices on embedding lookups show: the all-reduce whenever the result is wanted whole).

Imports xlapy.passes.spmd.{core,device_map,handlers_shape,partitioner,reshard}.
"""

from __future__ import annotations

import numpy as np

from xlapy.hlo.attrs.sharding import HloSharding
from xlapy.passes.spmd.core import ceil_div, device_groups, from_map, tile_offsets
from xlapy.passes.spmd.device_map import DeviceMap, merge, to_sharding
from xlapy.passes.spmd.handlers_shape import local, target_map, to
from xlapy.passes.spmd.partitioner import handler
from xlapy.shape import PrimitiveType, Shape, dtypes


@handler("gather")
def gather(p, b, instr, ops):
    operand, indices = ops
    dn = instr.attrs["gather_dimension_numbers"]
    sizes = list(instr.attrs["slice_sizes"])
    op_rank = len(operand.shape.dimensions)
    out_rank = len(instr.shape.dimensions)
    tm = target_map(p, instr)
    offset_dims = list(dn.offset_dims)
    batch_out = [d for d in range(out_rank) if d not in offset_dims]
    index_dims = [d for d in range(len(indices.shape.dimensions)) if d != dn.index_vector_dim]
    window = [d for d in range(op_rank)
              if d not in dn.collapsed_slice_dims and d not in dn.operand_batching_dims]
    op_cols: list[int | None] = [None] * op_rank
    keep_out = set(batch_out)
    for out_d, op_d in zip(offset_dims, window):
        if sizes[op_d] == operand.shape.dimensions[op_d] and op_d not in dn.start_index_map:
            op_cols[op_d] = out_d
            keep_out.add(out_d)
    idx_cols: list[int | None] = [None] * len(indices.shape.dimensions)
    for out_d, idx_d in zip(batch_out, index_dims):
        idx_cols[idx_d] = out_d
    for op_d, idx_d in zip(dn.operand_batching_dims, dn.start_indices_batching_dims):
        op_cols[op_d] = idx_cols[idx_d]
    m = tm.replicate_dims([d for d in range(out_rank) if d not in keep_out])
    trivial = [d for d in dn.start_index_map if sizes[d] == 1 and operand.map.tiles[d] > 1]
    if trivial and not dn.operand_batching_dims and operand.map.manual_groups() == 1:
        out = _gather_operand_parallel(p, b, instr, operand, indices, trivial, op_cols, m)
        if out is not None:
            return out
    op = to(b, operand, m.select(op_cols, op_rank))
    idx = to(b, indices, m.select(idx_cols, len(indices.shape.dimensions)))
    local_sizes = tuple(op.hlo.shape.dimensions[d] if op_cols[d] is not None and
                        d not in dn.operand_batching_dims else sizes[d] for d in range(op_rank))
    local_sizes = tuple(1 if d in dn.operand_batching_dims else s
                        for d, s in enumerate(local_sizes))
    attrs = dict(instr.attrs.items())
    attrs["slice_sizes"] = local_sizes
    hlo = b.add("gather", [op.hlo, idx.hlo], attrs, shape=local(instr.shape, m))
    return from_map(p.ctx, hlo, instr.shape, m)


def _gather_operand_parallel(p, b, instr, operand, indices, trivial, op_cols, m):
    """The gather on each device's rows of an operand split along the indexed dimensions
    ``trivial`` (slice size 1), masked and summed over those devices; None when that moves
    more bytes than gathering the operand, or the layouts do not fit."""
    dn = instr.attrs["gather_dimension_numbers"]
    sizes = list(instr.attrs["slice_sizes"])
    op_rank = len(operand.shape.dimensions)
    out_rank = len(instr.shape.dimensions)
    om = operand.map
    # the result: the operand's passthrough tiling, and the target's tiling of the batch
    # dimensions where it fits beside the operand's split of the indexed ones
    out_to_op: list[int | None] = [None] * out_rank
    for op_d, out_d in enumerate(op_cols):
        if out_d is not None:
            out_to_op[out_d] = op_d
    result = om.replicate_dims([d for d in range(op_rank) if d not in trivial]).select(
        out_to_op, out_rank)
    combined = _with_columns(result, om, trivial)
    if combined is None:
        return None
    batch = m.replicate_dims(list(dn.offset_dims))
    wider = merge(result, batch)
    if wider is not None and _with_columns(wider, om, trivial) is not None:
        result, combined = wider, _with_columns(wider, om, trivial)
    et = instr.shape.element_type
    positions = {d: out_rank + k for k, d in enumerate(trivial)}
    op_map = combined.select([positions.get(d, op_cols[d]) for d in range(op_rank)], op_rank)
    # the bytes a device holds either way (its operand block and its result block); the
    # passthrough way holds the operand whole along the indexed dimensions
    def held(op_m: DeviceMap, out_m: DeviceMap) -> int:
        return _bytes(operand.shape, op_m) + _bytes(instr.shape, out_m)

    if held(op_map, result) > held(m.select(op_cols, op_rank), m):
        return None
    op = to(b, operand, op_map)
    idx_rank = len(indices.shape.dimensions)
    index_dims = [d for d in range(idx_rank) if d != dn.index_vector_dim]
    batch_out = [d for d in range(out_rank) if d not in dn.offset_dims]
    idx_cols: list[int | None] = [None] * idx_rank
    for out_d, idx_d in zip(batch_out, index_dims):
        idx_cols[idx_d] = out_d
    idx = to(b, indices, result.select(idx_cols, idx_rank))
    n = operand.shape.dimensions
    bounds = {d: (0, n[d] - 1) for d in trivial}
    local_idx, ok = _local_indices(b, idx.hlo, dn.start_index_map, dn.index_vector_dim,
                                   {d: tile_offsets(operand.shape, op_map, d) for d in trivial},
                                   {d: ceil_div(n[d], op_map.tiles[d]) for d in trivial},
                                   bounds)
    local_sizes = tuple(op.hlo.shape.dimensions[d] if op_cols[d] is not None else sizes[d]
                        for d in range(op_rank))
    attrs = dict(instr.attrs.items())
    attrs["slice_sizes"] = local_sizes
    shape = local(instr.shape, result)
    g = b.add("gather", [op.hlo, local_idx], attrs, shape=shape)
    keep = b.add("broadcast", [ok], {"dimensions": tuple(batch_out)},
                 shape=Shape.array(PrimitiveType.PRED, shape.dimensions))
    zeros = b.broadcast_scalar(b.zero(et), shape.dimensions)
    g = b.add("select", [keep, g, zeros], {})
    reducer = p.ctx.reducer("or" if et == PrimitiveType.PRED else "add", et)
    g = b.all_reduce(g, device_groups(combined, [positions[d] for d in trivial]), reducer)
    return from_map(p.ctx, g, instr.shape, result)


def _bytes(shape: Shape, m: DeviceMap) -> int:
    return int(np.prod(local(shape, m).dimensions)) * max(dtypes.byte_width(
        shape.element_type), 1)


def _with_columns(m: DeviceMap, source: DeviceMap, dims) -> DeviceMap | None:
    """``m`` with ``source``'s tiling of ``dims`` appended as extra dimensions, when every
    combination of tiles is held by equally many devices (the split of ``dims`` runs over
    devices that hold the same tile of ``m``)."""
    cols = [source.index[:, d:d + 1] for d in dims]
    out = DeviceMap(m.tiles + tuple(source.tiles[d] for d in dims),
                    np.concatenate([m.index] + cols, axis=1), m.group)
    return out if to_sharding(out) is not None else None


def _local_indices(b, idx, index_map, ivd: int, offsets: dict, tile: dict, bounds: dict):
    """Indices made local to each device's rows along the dimensions of ``offsets``: each
    component for operand dimension d clamped to ``bounds[d]`` (when given: gather's clamp)
    and moved by the device's first row ``offsets[d]``. Returns (the local indices, a pred
    over the index batch: every moved component within the device's ``tile[d]`` rows)."""
    shape = idx.shape
    et = shape.element_type
    rank = len(shape.dimensions)
    k_count = len(index_map)
    implicit = ivd == rank
    dtype = dtypes.to_dtype(et)
    info = np.iinfo(dtype)

    def vector(values):
        """Per-component scalars (instructions) as an array of the indices' shape."""
        if implicit:
            return b.broadcast_scalar(values[0], shape.dimensions)
        pieces = [b.add("reshape", [v], {}, shape=Shape.array(et, (1,))) for v in values]
        vec = pieces[0] if k_count == 1 else b.add(
            "concatenate", pieces, {"dimensions": (0,)}, shape=Shape.array(et, (k_count,)))
        return b.add("broadcast", [vec], {"dimensions": (ivd,)}, shape=shape)

    if bounds:
        lo = vector([b.scalar(bounds[d][0] if d in bounds else info.min, et)
                     for d in index_map])
        hi = vector([b.scalar(bounds[d][1] if d in bounds else info.max, et)
                     for d in index_map])
        idx = b.add("clamp", [lo, idx, hi], {})
    off = vector([b.per_device(offsets[d], et) if d in offsets else b.scalar(0, et)
                  for d in index_map])
    idx = b.add("subtract", [idx, off], {})
    batch = tuple(x for i, x in enumerate(shape.dimensions) if i != ivd)
    ok = None
    for k, d in enumerate(index_map):
        if d not in offsets:
            continue
        comp = idx
        if not implicit:
            starts = [0] * rank
            limits = list(shape.dimensions)
            starts[ivd], limits[ivd] = k, k + 1
            from xlapy.hlo.attrs.slicing import SliceRanges

            comp = b.add("slice", [idx], {"slice": SliceRanges.of(starts, limits)},
                         shape=Shape.array(et, limits[:ivd] + [1] + limits[ivd + 1:]))
            comp = b.add("reshape", [comp], {}, shape=Shape.array(et, batch))
        low = b.add("compare", [comp, b.broadcast_scalar(b.scalar(0, et), batch)],
                    {"direction": "GE"})
        high = b.add("compare", [comp, b.broadcast_scalar(b.scalar(tile[d], et), batch)],
                     {"direction": "LT"})
        both = b.add("and", [low, high], {})
        ok = both if ok is None else b.add("and", [ok, both], {})
    return idx, ok


@handler("scatter")
def scatter(p, b, instr, ops):
    n = len(ops) // 2
    operands, indices, updates = ops[:n], ops[n], ops[n + 1:]
    dn = instr.attrs["scatter_dimension_numbers"]
    shape0 = operands[0].shape
    rank = len(shape0.dimensions)
    upd_rank = len(updates[0].shape.dimensions)
    sharding = p.sharding(instr)
    tm = p.ctx.map_of(sharding.elements[0] if sharding.kind == "tuple" else sharding, shape0)
    window_ops = [d for d in range(rank)
                  if d not in dn.inserted_window_dims and d not in dn.input_batching_dims]
    upd_cols: list[int | None] = [None] * upd_rank
    keep = set()
    for upd_d, op_d in zip(dn.update_window_dims, window_ops):
        if updates[0].shape.dimensions[upd_d] == shape0.dimensions[op_d] and \
                op_d not in dn.scatter_dims_to_operand_dims:
            upd_cols[upd_d] = op_d
            keep.add(op_d)
    idx_rank = len(indices.shape.dimensions)
    idx_cols: list[int | None] = [None] * idx_rank
    scatter_upd = [d for d in range(upd_rank) if d not in dn.update_window_dims]
    idx_dims = [d for d in range(idx_rank) if d != dn.index_vector_dim]
    for op_d, idx_d in zip(dn.input_batching_dims, dn.scatter_indices_batching_dims):
        keep.add(op_d)
        idx_cols[idx_d] = op_d
        upd_d = scatter_upd[idx_dims.index(idx_d)]
        upd_cols[upd_d] = op_d
    m = tm.replicate_dims([d for d in range(rank) if d not in keep])
    om = operands[0].map
    trivial = [d for d in dn.scatter_dims_to_operand_dims if om.tiles[d] > 1 and (
        d in dn.inserted_window_dims or _window_size(dn, updates[0].shape, d, rank) == 1)]
    idx_hlo = None
    if trivial and not dn.input_batching_dims and om.manual_groups() == 1 and \
            all(o.map.same_as(om) for o in operands):
        # each device scatters into its own rows: the operand's split of them kept
        m = om.replicate_dims([d for d in range(rank) if d not in keep and d not in trivial])
        idx = to(b, indices, m.select(idx_cols, idx_rank))
        idx_hlo, _ = _local_indices(b, idx.hlo, dn.scatter_dims_to_operand_dims,
                                    dn.index_vector_dim,
                                    {d: tile_offsets(shape0, m, d) for d in trivial},
                                    {d: ceil_div(shape0.dimensions[d], m.tiles[d])
                                     for d in trivial}, {})
    new_ops = [to(b, o, m) for o in operands]
    if idx_hlo is None:
        idx_hlo = to(b, indices, m.select(idx_cols, idx_rank)).hlo
    new_upd = [to(b, u, m.select(upd_cols, upd_rank)) for u in updates]
    shapes = [local(o.shape, m) for o in operands]
    shape = shapes[0] if n == 1 else Shape.tuple(shapes)
    hlo = b.add("scatter", [o.hlo for o in new_ops] + [idx_hlo] + [u.hlo for u in new_upd],
                dict(instr.attrs.items()), shape=shape)
    if n == 1:
        return from_map(p.ctx, hlo, instr.shape, m)
    return p.wrap(b, hlo, instr.shape, HloSharding.tuple_([to_sharding(m)] * n))


def _window_size(dn, upd_shape: Shape, op_dim: int, rank: int) -> int:
    """The update window's size along operand dimension ``op_dim`` (not inserted)."""
    window_ops = [d for d in range(rank)
                  if d not in dn.inserted_window_dims and d not in dn.input_batching_dims]
    if op_dim not in window_ops:
        return 1
    return upd_shape.dimensions[dn.update_window_dims[window_ops.index(op_dim)]]


__all__ = ["gather", "scatter"]

"""Partitioning gather and scatter (XLA's gather_scatter_handler.cc, in its passthrough
forms).

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

Imports xlapy.passes.spmd.{core,handlers_shape,partitioner,reshard}.
"""

from __future__ import annotations

from xlapy.hlo.attrs.sharding import HloSharding
from xlapy.passes.spmd.core import from_map
from xlapy.passes.spmd.handlers_shape import local, target_map, to
from xlapy.passes.spmd.partitioner import handler


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
    new_ops = [to(b, o, m) for o in operands]
    idx = to(b, indices, m.select(idx_cols, idx_rank))
    new_upd = [to(b, u, m.select(upd_cols, upd_rank)) for u in updates]
    shapes = [local(o.shape, m) for o in operands]
    from xlapy.shape import Shape

    shape = shapes[0] if n == 1 else Shape.tuple(shapes)
    hlo = b.add("scatter", [o.hlo for o in new_ops] + [idx.hlo] + [u.hlo for u in new_upd],
                dict(instr.attrs.items()), shape=shape)
    if n == 1:
        return from_map(p.ctx, hlo, instr.shape, m)
    from xlapy.passes.spmd.device_map import to_sharding

    return p.wrap(b, hlo, instr.shape, HloSharding.tuple_([to_sharding(m)] * n))


__all__ = ["gather", "scatter"]

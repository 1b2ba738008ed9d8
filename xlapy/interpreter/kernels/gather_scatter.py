"""Kernels of gather and scatter, and ``apply_scalar_computation`` (a scalar computation -
scatter combiner, sort comparator - evaluated on whole arrays at once).

gather follows HloEvaluator::HandleGather: each start index is clamped so the slice fits in
the operand (``clamp(S, 0, dim - slice_size)``), with explicit batching dimensions.
scatter follows HloEvaluator::HandleScatter: updates are applied in the order of the update
scatter indices (row-major), window elements inside; an update whose window does not fit in
the operand at its start index is skipped (not clamped). Duplicate targets see their updates
in that order, so a "set" combiner keeps the last one (XLA:CPU does the same).

Vectorised: gather is one fancy-index; scatter gives each update element its target and its
rank among the updates of that target, then applies the combiner round by round (round r
takes every target's r-th update: distinct targets, one array call), which is exact for any
computation. Recognised combiners go faster: ``set`` (the root is parameter 1: the last
update of each target), ``keep`` (parameter 0), add/multiply on NumPy's own numeric types
(``np.add.at``: sequential in application order, hence exact), and ops whose grouping cannot
change the result (and, or, xor, maximum, minimum; add/multiply on other integer types):
each target's updates are combined pairwise in log2(duplicates) array calls, then once with
the operand. The combiner itself always decides the values (the elementwise kernels run it).

Imports numpy, the shape layer, the opdefs traits and the interpreter core.
"""

from __future__ import annotations

import numpy as np

from xlapy.interpreter.evaluator import EvaluationError
from xlapy.interpreter.kernels.numeric import index_int64
from xlapy.interpreter.kernels.reduction import is_vectorisable
from xlapy.interpreter.kernels.shape_ops import dense
from xlapy.interpreter.registry import kernel
from xlapy.shape import dtypes

# -- scalar computations on whole arrays (is_vectorisable: the rule in reduction.py) -------


def apply_scalar_computation(ctx, comp, args, shape) -> list[np.ndarray]:
    """Evaluate the scalar computation ``comp`` elementwise over arrays ``args`` (all of
    ``shape``, or broadcastable to it); returns its result leaves as arrays of ``shape``.
    Computations that are not elementwise (a reduce, a while...) run element by element."""
    shape = tuple(shape)
    if is_vectorisable(comp):
        try:
            out = ctx.call(comp, list(args))
            leaves = list(out) if isinstance(out, tuple) else [out]
            return [dense(np.broadcast_to(np.asarray(v), shape)) for v in leaves]
        except (EvaluationError, ValueError):
            # Some kernel did not take whole arrays for scalars: go element by element
            # (which raises the error again if it was not about the arrays).
            pass
    flat = [np.broadcast_to(np.asarray(a), shape).reshape(-1) for a in args]
    count = int(np.prod(shape, dtype=np.int64))
    results: list[list] = []
    for i in range(count):
        out = ctx.call(comp, [a[i].copy() for a in flat])
        leaves = list(out) if isinstance(out, tuple) else [out]
        if not results:
            results = [[] for _ in leaves]
        for acc, v in zip(results, leaves):
            acc.append(np.asarray(v))
    if not results:  # no elements: leaf dtypes from the computation's result shape
        root = comp.root.shape
        leaf_shapes = list(root.tuple_shapes) if root.is_tuple() else [root]
        return [np.zeros(shape, dtypes.to_dtype(s.element_type)) for s in leaf_shapes]
    return [np.stack(acc).reshape(shape) for acc in results]


# -- gather ---------------------------------------------------------------------------------


def _indices_last(indices: np.ndarray, index_vector_dim: int) -> np.ndarray:
    """Start indices as int64 with the index vector as the last dimension (XLA reads an
    index_vector_dim equal to the rank as a trailing dimension of size 1); u64 indices by
    value (numeric.index_int64: 2**64 - 1 clamps to the largest start, as XLA:CPU)."""
    idx = np.asarray(indices)
    if index_vector_dim == idx.ndim:
        idx = idx[..., None]
    return index_int64(np.moveaxis(idx, index_vector_dim, -1))


def _batch_axis(indices_dim: int, index_vector_dim: int) -> int:
    """Position of start-indices dimension ``indices_dim`` among the batch dimensions (the
    start-indices dimensions without index_vector_dim)."""
    return indices_dim - (1 if indices_dim > index_vector_dim else 0)


@kernel("gather")
def gather(ctx, instr, args):
    operand, indices = args
    dn = instr.attrs["gather_dimension_numbers"]
    slice_sizes = list(instr.attrs["slice_sizes"])
    idx = _indices_last(indices, dn.index_vector_dim)
    batch_shape = idx.shape[:-1]
    nb = len(batch_shape)
    rank = operand.ndim
    offset_operand_dims = [d for d in range(rank) if d not in dn.collapsed_slice_dims
                           and d not in dn.operand_batching_dims]
    window_shape = tuple(slice_sizes[d] for d in offset_operand_dims)
    full = batch_shape + window_shape
    # Output dimension o: the next window dimension if o is an offset dim, else the next
    # batch dimension.
    perm, next_batch = [], 0
    for o in range(nb + len(window_shape)):
        if o in dn.offset_dims:
            perm.append(nb + dn.offset_dims.index(o))
        else:
            perm.append(next_batch)
            next_batch += 1
    if operand.size == 0 or int(np.prod(full, dtype=np.int64)) == 0:
        return np.zeros(tuple(full[p] for p in perm), operand.dtype)
    index_arrays = []
    for d in range(rank):
        if d in dn.start_index_map:
            start = idx[..., dn.start_index_map.index(d)]
        elif d in dn.operand_batching_dims:
            k = dn.operand_batching_dims.index(d)
            axis = _batch_axis(dn.start_indices_batching_dims[k], dn.index_vector_dim)
            start = np.arange(batch_shape[axis]).reshape(
                [batch_shape[axis] if a == axis else 1 for a in range(nb)])
        else:
            start = np.zeros(batch_shape, np.int64)
        # Clamp so the slice fits; collapsed and batching dims count as size 1.
        size = slice_sizes[d] if d in offset_operand_dims else 1
        start = np.clip(start, 0, max(operand.shape[d] - size, 0))
        start = np.reshape(start, np.shape(start) + (1,) * len(window_shape))
        if d in offset_operand_dims:
            w = offset_operand_dims.index(d)
            offsets = np.arange(slice_sizes[d]).reshape(
                [slice_sizes[d] if a == w else 1 for a in range(len(window_shape))])
            start = start + offsets
        index_arrays.append(start)
    gathered = operand[tuple(index_arrays)]
    gathered = np.broadcast_to(gathered, full)
    return dense(np.transpose(gathered, perm))


# -- scatter --------------------------------------------------------------------------------

# Root opcodes whose combination order never changes the result (for the types listed).
_ASSOCIATIVE = {"and", "or", "xor", "maximum", "minimum"}
_INTEGER_ASSOCIATIVE = {"add", "multiply"}
_UFUNC_AT = {"add": np.add, "multiply": np.multiply}


def _combiner_kind(comp, dtype: np.dtype) -> str | None:
    """'keep' / 'set' for a root forwarding parameter 0 / 1; an opcode for a root applying
    a recognised binary op to (parameter 0, parameter 1) in the operand's own type; None
    for any other computation."""
    if comp.num_parameters != 2:
        return None
    root = comp.root
    params = comp.parameters
    if any(p.shape.element_type != dtypes.from_dtype(dtype) for p in params):
        return None
    if root.opcode == "parameter":
        return "keep" if root.parameter_number == 0 else "set"
    if root.shape != params[0].shape or len(root.operands) != 2:
        return None
    if sorted(o.parameter_number for o in root.operands if o.opcode == "parameter") != [0, 1]:
        return None
    if root.opcode in _ASSOCIATIVE or root.opcode in _INTEGER_ASSOCIATIVE:
        return root.opcode
    return None


def _scatter_targets(instr, operand_shape, indices, updates_shape):
    """For every update element (in XLA's application order) the flat operand index it
    updates, or -1 when its update window is out of bounds; and the updates' axis order."""
    dn = instr.attrs["scatter_dimension_numbers"]
    rank = len(operand_shape)
    idx = _indices_last(indices, dn.index_vector_dim)
    scatter_shape = idx.shape[:-1]
    ns = len(scatter_shape)
    urank = len(updates_shape)
    scatter_axes = [a for a in range(urank) if a not in dn.update_window_dims]
    window_axes = list(dn.update_window_dims)
    window_shape = tuple(updates_shape[a] for a in window_axes)
    window_operand_dims = [d for d in range(rank) if d not in dn.inserted_window_dims
                           and d not in dn.input_batching_dims]
    nw = len(window_shape)
    valid = np.ones(scatter_shape, bool)
    flat = np.zeros(scatter_shape + window_shape, np.int64)
    stride = 1
    for d in reversed(range(rank)):
        if d in dn.scatter_dims_to_operand_dims:
            start = idx[..., dn.scatter_dims_to_operand_dims.index(d)]
        elif d in dn.input_batching_dims:
            k = dn.input_batching_dims.index(d)
            axis = _batch_axis(dn.scatter_indices_batching_dims[k], dn.index_vector_dim)
            start = np.broadcast_to(np.arange(scatter_shape[axis]).reshape(
                [scatter_shape[axis] if a == axis else 1 for a in range(ns)]), scatter_shape)
        else:
            start = np.zeros(scatter_shape, np.int64)
        size = window_shape[window_operand_dims.index(d)] if d in window_operand_dims else 1
        valid &= (start >= 0) & (start <= operand_shape[d] - size)
        pos = start.reshape(scatter_shape + (1,) * nw)
        if d in window_operand_dims:
            w = window_operand_dims.index(d)
            pos = pos + np.arange(size).reshape([size if a == w else 1 for a in range(nw)])
        flat = flat + pos * stride
        stride *= operand_shape[d]
    valid_full = np.broadcast_to(valid.reshape(scatter_shape + (1,) * nw), flat.shape)
    targets = np.where(valid_full, flat, -1).reshape(-1)
    return targets, scatter_axes + window_axes


def _group(targets: np.ndarray):
    """Valid update positions sorted by target (stable: application order kept within a
    target), their targets, and each one's rank among its target's updates."""
    live = np.nonzero(targets >= 0)[0]
    order = live[np.argsort(targets[live], kind="stable")]
    sorted_targets = targets[order]
    n = len(order)
    if n == 0:
        return order, sorted_targets, np.zeros(0, np.int64)
    starts = np.ones(n, bool)
    starts[1:] = sorted_targets[1:] != sorted_targets[:-1]
    group_start = np.maximum.accumulate(np.where(starts, np.arange(n), 0))
    return order, sorted_targets, np.arange(n) - group_start


def _apply_rounds(ctx, comp, results, update_flat, order, targets, rank):
    """Round r applies every target's r-th update: distinct targets, one array call."""
    n_ops = len(results)
    for r in range(int(rank.max()) + 1 if len(rank) else 0):
        sel = rank == r
        t = targets[sel]
        src = order[sel]
        current = [res[t] for res in results]
        new = apply_scalar_computation(ctx, comp, current + [u[src] for u in update_flat],
                                       t.shape)
        if len(new) != n_ops:
            raise EvaluationError(f"scatter: the update computation %{comp.name} returned "
                                  f"{len(new)} values for {n_ops} operands")
        for res, v in zip(results, new):
            res[t] = v.astype(res.dtype, copy=False)


def _apply_tree(ctx, comp, result, values, targets, rank):
    """Associative-commutative combiners: reduce each target's updates pairwise, then
    combine once with the operand."""
    vals, tg, rk = values, targets, rank
    while len(rk) and rk.max() > 0:
        # Pair every even-ranked update with the next one of the same target.
        has_next = np.zeros(len(rk), bool)
        has_next[:-1] = (tg[1:] == tg[:-1]) & (rk[:-1] % 2 == 0)
        lead = np.nonzero(has_next)[0]
        (combined,) = apply_scalar_computation(ctx, comp, [vals[lead], vals[lead + 1]],
                                               lead.shape)
        vals = vals.copy()
        vals[lead] = combined.astype(vals.dtype, copy=False)
        keep = rk % 2 == 0
        vals, tg, rk = vals[keep], tg[keep], rk[keep] // 2
    if len(tg):
        (new,) = apply_scalar_computation(ctx, comp, [result[tg], vals], tg.shape)
        result[tg] = new.astype(result.dtype, copy=False)


@kernel("scatter")
def scatter(ctx, instr, args):
    n = len(args) // 2
    operands, indices, updates = args[:n], args[n], args[n + 1:]
    comp = instr.attrs["to_apply"]
    shape = operands[0].shape
    targets, axes = _scatter_targets(instr, shape, indices, updates[0].shape)
    out_dtypes = ([dtypes.to_dtype(s.element_type) for s in instr.shape.tuple_shapes]
                  if n > 1 else [dtypes.to_dtype(instr.shape.element_type)])
    results = [np.array(op, dtype=dt).reshape(-1) for op, dt in zip(operands, out_dtypes)]
    update_flat = [np.transpose(u, axes).reshape(-1) for u in updates]
    order, sorted_targets, rank = _group(targets)
    kind = _combiner_kind(comp, results[0].dtype) if n == 1 else None
    if kind == "keep" or len(order) == 0:
        pass
    elif kind == "set":
        last = np.ones(len(order), bool)
        last[:-1] = sorted_targets[1:] != sorted_targets[:-1]
        results[0][sorted_targets[last]] = update_flat[0][order[last]].astype(
            results[0].dtype, copy=False)
    elif kind in _UFUNC_AT and results[0].dtype.kind in "iufc" and results[0].dtype.type in (
            np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
            np.float16, np.float32, np.float64, np.complex64, np.complex128):
        live = targets >= 0
        with np.errstate(all="ignore"):
            _UFUNC_AT[kind].at(results[0], targets[live],
                               update_flat[0][live].astype(results[0].dtype, copy=False))
    elif kind in _ASSOCIATIVE or (kind in _INTEGER_ASSOCIATIVE
                                  and (results[0].dtype.kind in "iub"
                                       or dtypes.is_integral(dtypes.from_dtype(results[0].dtype)))):
        _apply_tree(ctx, comp, results[0], update_flat[0][order].astype(results[0].dtype,
                                                                         copy=False),
                    sorted_targets, rank)
    else:
        _apply_rounds(ctx, comp, results, update_flat, order, sorted_targets, rank)
    outs = [r.reshape(shape) for r in results]
    return tuple(outs) if n > 1 else outs[0]

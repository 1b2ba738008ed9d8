"""Gather and scatter: their attribute schemas and shape rules.

Shape rules follow ShapeInference::InferGatherShape (with ValidateGatherDimensionNumbers) and
InferScatterShape (with ValidateScatterDimensionNumbers, and VerifyReducerShape, shared with
the reduction family); the messages are XLA's. The dimension numbers are multi-key attributes (xlapy.hlo.attrs.gather_scatter).
Imports shape, hlo.attrs and the registry; never the builder or the parser.
"""

from __future__ import annotations

from typing import Sequence

from xlapy.hlo.attrs import AttrSpec, BoolKind, ComputationKind, IntListKind
from xlapy.hlo.attrs.gather_scatter import GATHER_DIMENSION_NUMBERS, SCATTER_DIMENSION_NUMBERS
from xlapy.opdefs.common import expect_array
from xlapy.opdefs.reduction import verify_reducer_shape
from xlapy.opdefs.registry import CALLS_COMPUTATIONS, OpCall, op
from xlapy.shape import Shape, dtypes
from xlapy.shape.shape import UNBOUNDED_SIZE


def _join(values, sep: str = ", ") -> str:
    return sep.join(str(v) for v in values)


def _is_sorted(values) -> bool:
    return all(a <= b for a, b in zip(values, values[1:]))


def _has_adjacent_repeat(values) -> bool:
    return any(a == b for a, b in zip(values, values[1:]))


def _compatible_sizes(a: int, b: int) -> bool:
    """XLA's CompatibleDimensionSizes: equal, or one of them unbounded (``?``)."""
    return a == UNBOUNDED_SIZE or b == UNBOUNDED_SIZE or a == b


# -- gather ---------------------------------------------------------------------------------


def _validate_gather_dimension_numbers(call: OpCall, input_shape: Shape,
                                       indices_dims: Sequence[int], dn) -> None:
    offset_dims = dn.offset_dims
    if not _is_sorted(offset_dims):
        call.fail(f"Output window dimensions in gather op must be ascending; got: "
                  f"{_join(offset_dims)}.")
    if _has_adjacent_repeat(offset_dims):
        call.fail(f"Output window dimensions in gather op must not repeat; got: "
                  f"{_join(offset_dims)}.")
    output_rank = len(offset_dims) + len(indices_dims) - 1
    for i, d in enumerate(offset_dims):
        if not 0 <= d < output_rank:
            call.fail(f"Offset dimension {i} in gather op is out of bounds; got {d}, but "
                      f"should have been in [0,{output_rank}).")
    index_size = indices_dims[dn.index_vector_dim]
    if index_size != UNBOUNDED_SIZE and len(dn.start_index_map) != index_size:
        call.fail(f"Gather op has {len(dn.start_index_map)} elements in start_index_map and "
                  f"the bound of dimension index_vector_dim={dn.index_vector_dim} of "
                  f"start_indices is {index_size}. These two numbers must be equal.")
    rank = input_shape.rank
    for i, d in enumerate(dn.start_index_map):
        if not 0 <= d < rank:
            call.fail(f"Invalid start_index_map; domain is [0, {rank}), got: {i}->{d}.")
    if _has_adjacent_repeat(sorted(dn.start_index_map)):
        call.fail(f"Repeated dimensions are not allowed in start_index_map; got: "
                  f"{_join(dn.start_index_map)}.")
    for d in dn.collapsed_slice_dims:
        if not 0 <= d < rank:
            call.fail(f"Invalid collapsed_slice_dims set in gather op; valid range is "
                      f"[0, {rank}), got: {d}.")
    if not _is_sorted(dn.collapsed_slice_dims):
        call.fail(f"collapsed_slice_dims in gather op must be sorted; got: "
                  f"{_join(dn.collapsed_slice_dims)}")
    if _has_adjacent_repeat(dn.collapsed_slice_dims):
        call.fail(f"Repeated dimensions not allowed in collapsed_slice_dims in gather op; "
                  f"got: {_join(dn.collapsed_slice_dims)}.")
    if len(dn.operand_batching_dims) != len(dn.start_indices_batching_dims):
        call.fail(f"operand_batching_dims and start_indices_batching_dims in gather op must "
                  f"be of the same size; got: {len(dn.operand_batching_dims)} and "
                  f"{len(dn.start_indices_batching_dims)}.")
    for d in dn.operand_batching_dims:
        if not 0 <= d < rank:
            call.fail(f"Invalid operand_batching_dims set in gather op; valid range is "
                      f"[0, {rank}), got: {d}.")
    if not _is_sorted(dn.operand_batching_dims):
        call.fail(f"operand_batching_dims in gather op must be sorted; got: "
                  f"{_join(dn.operand_batching_dims)}")
    if _has_adjacent_repeat(dn.operand_batching_dims):
        call.fail(f"Repeated dimensions not allowed in operand_batching_dims in gather op; "
                  f"got: {_join(dn.operand_batching_dims)}.")
    for i, d in enumerate(dn.start_indices_batching_dims):
        if not 0 <= d < len(indices_dims):
            call.fail(f"Invalid start_indices_batching_dims; domain is "
                      f"[0, {len(indices_dims)}), got: {i}->{d}.")
    if _has_adjacent_repeat(sorted(dn.start_indices_batching_dims)):
        call.fail(f"Repeated dimensions are not allowed in start_indices_batching_dims; "
                  f"got: {_join(dn.start_indices_batching_dims)}.")


def infer_gather_shape(call: OpCall, input_shape: Shape, indices: Shape, dn,
                       slice_sizes: Sequence[int]) -> Shape:
    """ShapeInference::InferGatherShape."""
    expect_array(call, input_shape, "input tensor operand of gather op")
    expect_array(call, indices, "gather indices operand of gather op")
    if not dtypes.is_integral(indices.element_type):
        call.fail(f"Gather indices parameter must be an integral tensor; got {indices}.")
    ivd = dn.index_vector_dim
    if indices.rank < ivd or ivd < 0:
        call.fail(f"Gather index leaf dimension must be within [0, rank(start_indices) + 1). "
                  f"rank(start_indices) is {indices.rank} and gather index leaf dimension "
                  f"is {ivd}.")
    # Indices of shape [A,B,C] with index_vector_dim == 3 are read as [A,B,C,1].
    idims = list(indices.dimensions)
    idyn = list(indices.dynamic_dimensions)
    if len(idims) == ivd:
        idims.append(1)
        idyn.append(False)
    _validate_gather_dimension_numbers(call, input_shape, idims, dn)

    rank = input_shape.rank
    if len(slice_sizes) != rank:
        call.fail(f"Gather op must have one slice size for every input dimension; got: "
                  f"len(slice_sizes)={len(slice_sizes)}, input_shape.rank={rank}.")
    if len(slice_sizes) != (len(dn.offset_dims) + len(dn.collapsed_slice_dims)
                            + len(dn.operand_batching_dims)):
        call.fail(f"All components of the offset index in a gather op must either be a "
                  f"offset dimension or explicitly collapsed or explicitly batched; got "
                  f"len(slice_sizes)={len(slice_sizes)}, output_slice_sizes="
                  f"{_join(dn.offset_dims, ',')}, collapsed_slice_dims="
                  f"{_join(dn.collapsed_slice_dims, ',')}, operand_batching_dims="
                  f"{_join(dn.operand_batching_dims, ',')}.")
    for i, size in enumerate(slice_sizes):
        if input_shape.dimensions[i] == UNBOUNDED_SIZE:
            continue
        bound = input_shape.dimensions[i]
        if not 0 <= size <= bound:
            call.fail(f"Slice size at index {i} in gather op is out of range, must be within "
                      f"[0, {bound + 1}), got {size}.")
    for i, d in enumerate(dn.collapsed_slice_dims):
        if slice_sizes[d] > 1:
            call.fail(f"Gather op can only collapse slice dims with bound 1 or 0, but bound "
                      f"is {slice_sizes[d]} for index {d} at position {i}.")
    for i, d in enumerate(dn.operand_batching_dims):
        if slice_sizes[d] > 1:
            call.fail(f"Gather op can only have operand_batching_dims with bound 1 or 0, but "
                      f"bound is {slice_sizes[d]} for index {d} at position {i}.")

    # Output dimension i is an offset (window) dimension taking the next slice size that
    # is neither collapsed nor batched, or a batch dimension taking the next dimension of
    # the indices other than index_vector_dim.
    skipped = set(dn.collapsed_slice_dims) | set(dn.operand_batching_dims)
    offset_set = set(dn.offset_dims)
    dims, dyn = [], []
    offset_seen = gather_seen = 0
    for i in range(len(dn.offset_dims) + len(idims) - 1):
        if i in offset_set:
            while offset_seen in skipped:
                offset_seen += 1
            # Gathering a whole dynamic dimension keeps it dynamic.
            is_dyn = (slice_sizes[offset_seen] == input_shape.dimensions[offset_seen]
                      and input_shape.dynamic_dimensions[offset_seen])
            dims.append(slice_sizes[offset_seen])
            dyn.append(is_dyn)
            offset_seen += 1
        else:
            if gather_seen == ivd:
                gather_seen += 1
            dims.append(idims[gather_seen])
            dyn.append(idyn[gather_seen])
            gather_seen += 1
    return Shape.array(input_shape.element_type, dims, dynamic_dimensions=dyn)


@op("gather", attrs=[
    AttrSpec("gather_dimension_numbers", GATHER_DIMENSION_NUMBERS,
             doc="offset_dims, collapsed_slice_dims, start_index_map, operand_batching_dims, "
                 "start_indices_batching_dims, index_vector_dim"),
    AttrSpec("slice_sizes", IntListKind()),
    AttrSpec("indices_are_sorted", BoolKind(), default=False),
])
def _gather(call: OpCall) -> Shape:
    """gather(operand, start_indices): slices of ``slice_sizes`` at the start indices."""
    operand, indices = call.operands
    return infer_gather_shape(call, operand, indices, call.gather_dimension_numbers,
                              call.slice_sizes)


# -- scatter --------------------------------------------------------------------------------


def _validate_scatter_dimension_numbers(call: OpCall, operand: Shape,
                                        indices_dims: Sequence[int], updates: Shape,
                                        dn) -> None:
    uwd = dn.update_window_dims
    if not _is_sorted(uwd):
        call.fail(f"update_window_dims in scatter op must be sorted; got: {_join(uwd)}.")
    if _has_adjacent_repeat(uwd):
        call.fail(f"update_window_dims in scatter op must not repeat; got: {_join(uwd)}.")
    for d in uwd:
        if not 0 <= d < updates.rank:
            call.fail(f"Invalid update_window_dims set in scatter op; valid range is "
                      f"[0, {updates.rank}). got: {d}.")
    iwd = dn.inserted_window_dims
    if not _is_sorted(iwd):
        call.fail(f"inserted_window_dims in scatter op must be sorted; got: {_join(iwd)}.")
    if _has_adjacent_repeat(iwd):
        call.fail(f"inserted_window_dims in scatter op must not repeat; got: {_join(iwd)}.")
    rank = operand.rank
    for d in iwd:
        if not 0 <= d < rank:
            call.fail(f"Invalid inserted_window_dims set in scatter op; valid range is "
                      f"[0, {rank}), got: {d}.")
    window = len(uwd) + len(iwd) + len(dn.input_batching_dims)
    if window != rank:
        call.fail(f"Scatter op has window of size {window}; doesn't match operand of rank "
                  f"{rank}.")
    sdod = dn.scatter_dims_to_operand_dims
    index_size = indices_dims[dn.index_vector_dim]
    if not _compatible_sizes(len(sdod), index_size):
        call.fail(f"Scatter op has {len(sdod)} elements in scatter_dims_to_operand_dims and "
                  f"the bound of dimension index_vector_dim={dn.index_vector_dim} of "
                  f"scatter_indices is {index_size}. These two numbers must be equal.")
    for i, d in enumerate(sdod):
        if not 0 <= d < rank:
            call.fail(f"Invalid scatter_dims_to_operand_dims mapping; domain is [0, {rank}), "
                      f"got: {i}->{d}.")
    if _has_adjacent_repeat(sorted(sdod)):
        call.fail(f"Repeated dimensions not allowed in scatter_dims_to_operand_dims; got: "
                  f"{_join(sdod)}.")
    ibd, sibd = dn.input_batching_dims, dn.scatter_indices_batching_dims
    if len(ibd) != len(sibd):
        call.fail(f"input_batching_dims and scatter_indices_batching_dims in scatter op must "
                  f"be of the same size; got: {len(ibd)} and {len(sibd)}.")
    if not _is_sorted(ibd):
        call.fail(f"input_batching_dims in scatter op must be sorted; got: {_join(ibd)}.")
    if _has_adjacent_repeat(ibd):
        call.fail(f"input_batching_dims in scatter op must not repeat; got: {_join(ibd)}.")
    for d in ibd:
        if not 0 <= d < rank:
            call.fail(f"Invalid input_batching_dims set in scatter op; valid range is "
                      f"[0, {rank}), got: {d}.")
    for d in sibd:
        if not 0 <= d < len(indices_dims):
            call.fail(f"Invalid scatter_indices_batching_dims set in scatter op; valid range "
                      f"is [0, {len(indices_dims)}), got: {d}.")
    if _has_adjacent_repeat(sorted(sibd)):
        call.fail(f"scatter_indices_batching_dims in scatter op must not repeat; got: "
                  f"{_join(sibd)}.")


def infer_scatter_shape(call: OpCall, shapes: Sequence[Shape], update_computation,
                        dn) -> Shape:
    """ShapeInference::InferScatterShape: ``shapes`` are N operands, the indices, N
    updates; ``update_computation`` is the to_apply's ProgramShape."""
    n = len(shapes) // 2
    if n * 2 + 1 != len(shapes):
        call.fail(f"Invalid argument count of scatter op: Expected {n * 2 + 1}, saw "
                  f"{len(shapes)}")
    indices = shapes[n]
    expect_array(call, indices, "scatter indices of scatter op")
    if not dtypes.is_integral(indices.element_type):
        call.fail(f"Scatter indices parameter must be an integral tensor; got {indices}.")
    ivd = dn.index_vector_dim
    if indices.rank < ivd or ivd < 0:
        call.fail(f"Scatter index leaf dimension must be within [0, rank(scatter_indices) + "
                  f"1). rank(scatter_indices) is {indices.rank} and scatter index leaf "
                  f"dimension is {ivd}.")
    idims = list(indices.dimensions)
    if len(idims) == ivd:
        idims.append(1)
    operands, updates_list = shapes[:n], shapes[n + 1:]
    for i, (operand, updates) in enumerate(zip(operands, updates_list)):
        expect_array(call, operand, f"operand {i} of scatter op")
        expect_array(call, updates, f"updates {i} of scatter op")
        skipped = set(dn.inserted_window_dims) | set(dn.input_batching_dims)
        max_window = [d for j, d in enumerate(operand.dimensions) if j not in skipped]
        expected_rank = len(idims) - 1 + len(dn.update_window_dims)
        if updates.rank != expected_rank:
            call.fail(f"Updates tensor must be of rank {expected_rank}; got {updates.rank}.")
        _validate_scatter_dimension_numbers(call, operand, idims, updates, dn)
        for k, d in enumerate(dn.update_window_dims):
            if updates.dimensions[d] > max_window[k]:
                call.fail(f"Bounds of the window dimensions of updates must not exceed the "
                          f"bounds of the corresponding dimensions of operand. For dimension "
                          f"{d}, updates bound is {updates.dimensions[d]}, operand bound is "
                          f"{max_window[k]}.")
        scatter_seen = 0
        window_set = set(dn.update_window_dims)
        for d in range(updates.rank):
            if d in window_set:
                continue
            if scatter_seen == ivd:
                scatter_seen += 1
            if not _compatible_sizes(updates.dimensions[d], idims[scatter_seen]):
                call.fail(f"Bounds of the scatter dimensions of updates must be same as the "
                          f"bounds of the corresponding dimensions of scatter indices. For "
                          f"scatter dimension {d}, updates bound is {updates.dimensions[d]}, "
                          f"scatter_indices bound is {idims[scatter_seen]}.")
            scatter_seen += 1
    verify_reducer_shape(call, update_computation,
                         [Shape.scalar(o.element_type) for o in operands],
                         [u.element_type for u in updates_list], n)
    return operands[0] if n == 1 else Shape.tuple(operands)


@op("scatter", traits=[CALLS_COMPUTATIONS], attrs=[
    AttrSpec("scatter_dimension_numbers", SCATTER_DIMENSION_NUMBERS,
             doc="update_window_dims, inserted_window_dims, scatter_dims_to_operand_dims, "
                 "input_batching_dims, scatter_indices_batching_dims, index_vector_dim"),
    AttrSpec("indices_are_sorted", BoolKind(), default=False),
    AttrSpec("unique_indices", BoolKind(), default=False),
    AttrSpec("to_apply", ComputationKind(), doc="update computation, 2N scalars -> N"),
])
def _scatter(call: OpCall) -> Shape:
    """scatter(operands..., scatter_indices, updates...): the operands with slices combined
    with the updates by ``to_apply``; one array, or a tuple for N > 1 operands."""
    return infer_scatter_shape(call, call.operands, call.to_apply.program_shape(),
                               call.scatter_dimension_numbers)

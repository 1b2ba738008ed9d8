"""Collectives, channels and feeds: all-reduce, all-gather, reduce-scatter, all-to-all,
ragged-all-to-all, collective-broadcast, collective-permute (and the -start/-done pairs),
replica-id, partition-id, send/send-done, recv/recv-done, infeed and outfeed.

Shape rules follow ShapeInference::Infer{AllReduce,AllGather,ReduceScatter,AllToAll,
AllToAllTuple,RaggedAllToAll,CollectiveBroadcast,CollectivePermute}Shape and their -Start/-Done
variants, plus the checks XLA's HloVerifier makes on these instructions (replica groups,
source-target pairs, token operands, the shard count implied by the result shape). The
number of participants (replica and partition counts) belongs to the module, not to one
instruction: checks that need it are left to the verifier/runtime.

The shard count of all-gather and reduce-scatter is not an attribute: XLA's builder passes
it in and HLO text keeps it only in the result shape. The rules take it from the declared
result (``call.result``), else from the replica group size, and check the two agree.
Imports the shape and hlo layers and the registry only.
"""

from __future__ import annotations

from collections.abc import Sequence

from xlapy.errors import InvalidArgumentError
from xlapy.hlo.attrs import AttrSpec, BoolKind, ComputationKind, ShapeKind, StringKind
from xlapy.hlo.attrs.enums import COLLECTIVE_OP_GROUP_MODE
from xlapy.hlo.attrs.collective import (
    SINGLE_DIMENSION,
    SLICE_SIZES,
    SOURCE_TARGET_PAIRS,
    CollectiveDeviceList,
    CollectiveOpGroupMode,
    channel_id_spec,
    constrain_layout_spec,
    get_collective_op_group_mode,
    is_host_transfer_spec,
    replica_groups_spec,
    use_global_device_ids_spec,
)
from xlapy.opdefs.common import expect_array, require_result, tname
from xlapy.opdefs.registry import ASYNC, CALLS_COMPUTATIONS, COLLECTIVE, OpCall, op
from xlapy.shape import PrimitiveType, Shape, dtypes
from xlapy.shape.shape import UNBOUNDED_SIZE

P = PrimitiveType
Mode = CollectiveOpGroupMode
_INT64_MAX = 2**63 - 1


def _tuple_or_single(shapes: Sequence[Shape]) -> Shape:
    return shapes[0] if len(shapes) == 1 else Shape.tuple(shapes)


def _with_dim(shape: Shape, dim: int, size: int, dynamic: bool) -> Shape:
    """``shape`` with dimension ``dim`` resized (and its layout kept)."""
    dims = list(shape.dimensions)
    dyn = list(shape.dynamic_dimensions)
    dims[dim], dyn[dim] = size, dynamic
    return Shape.array(shape.element_type, dims, layout=shape.layout, dynamic_dimensions=dyn)


# -- replica groups and group modes -----------------------------------------------------------


def group_mode(call: OpCall, use_global_device_ids: bool | None) -> Mode:
    """GetCollectiveOpGroupMode for this instruction (channel_id present or not)."""
    try:
        return get_collective_op_group_mode(call.attrs["channel_id"] is not None,
                                            use_global_device_ids)
    except InvalidArgumentError as e:
        call.fail(str(e))


def check_replica_groups(call: OpCall, mode: Mode,
                         uniform: bool = True) -> CollectiveDeviceList | None:
    """HloVerifier's CheckReplicaGroups: no empty group, the ids are 0..n-1 each once, and
    (except for all-reduce) every group has the same size. Returns the explicit groups, or
    None when there are none (one group of every participant)."""
    groups = call.attrs["replica_groups"]
    if groups.is_empty():
        if mode is Mode.FLATTENED_ID:
            call.fail("Replica groups must be specified in flattened-id mode "
                      "(channel_id with use_global_device_ids=true)")
        return None
    explicit = groups.expand()
    text = groups.to_text()
    n = sum(len(g) for g in explicit.groups)
    seen: set[int] = set()
    for g in explicit.groups:
        if not g:
            call.fail(f"Instruction cannot have an empty replica group: replica_groups={text}")
        for i in g:
            if not 0 <= i < n:
                call.fail(f"Replica {i} is out of range (should be in [0, {n}) range) in "
                          f"replica_groups={text}")
            if i in seen:
                call.fail(f"Replica {i} is repeated in replica_groups={text}")
            seen.add(i)
    if uniform:
        sizes = sorted({len(g) for g in explicit.groups})
        if len(sizes) > 1:
            call.fail(f"Replica groups expected to be of uniform size, got groups of sizes "
                      f"{', '.join(map(str, sizes))} in replica_groups={text}")
    return explicit


def subgroup_size(groups: CollectiveDeviceList | None, mode: Mode) -> int | None:
    """The number of participants in each group, when the instruction alone fixes it
    (XLA's GetSubgroupSize without the module's replica/partition counts)."""
    if groups is None or mode is Mode.CROSS_REPLICA_AND_PARTITION:
        return None  # the replica count, or group size x partition count: module config
    return groups.num_devices_per_group


def shard_count_for(call: OpCall, derived: int | None, groups, mode: Mode, what: str) -> int:
    """Reconcile the shard count read off the result shape with the replica groups."""
    size = subgroup_size(groups, mode)
    text = call.attrs["replica_groups"].to_text()
    if derived == ANY_SHARD_COUNT:
        return size if size is not None else 1
    if derived is None:
        if size is None:
            call.fail(f"cannot infer the {what}: give the result shape, or replica groups "
                      f"whose size is the {what} (replica_groups={text}, group mode "
                      f"{mode.value})")
        return size
    if size is not None and derived != size:
        call.fail(f"the {what} is {derived} (from the result shape), but the replica groups "
                  f"have {size} members: replica_groups={text}")
    if mode is Mode.CROSS_REPLICA_AND_PARTITION and groups is not None:
        per_group = groups.num_devices_per_group
        if derived % per_group:
            call.fail(f"the {what} is {derived} (from the result shape), which is not a "
                      f"multiple of the replica group size {per_group} (replica_groups={text}, "
                      f"group mode {mode.value})")
    return derived


def _declared_outputs(call: OpCall, count: int, start: bool) -> list[Shape] | None:
    """The declared per-operand results (element 1 of an -start's result)."""
    result = call.result
    if result is None:
        return None
    if start:
        if not result.is_tuple() or len(result.tuple_shapes) != 2:
            call.fail(f"the result must be the tuple (operands, results), got {result}")
        result = result.tuple_shapes[1]
    if count == 1:
        return [result]
    if not result.is_tuple() or len(result.tuple_shapes) != count:
        call.fail(f"with {count} operands the result must be a tuple of {count} shapes, "
                  f"got {result}")
    return list(result.tuple_shapes)


#: The result shape is the same whatever the shard count (a size 0 or ``?`` dimension).
ANY_SHARD_COUNT = -1


def _ratio_from_result(declared: list[Shape] | None, operand: Shape, dim: int,
                       gather: bool) -> int | None:
    """CeilOfRatio(result dim, operand dim) for all-gather (operand/result for
    reduce-scatter), from the first operand; None when it cannot be read off."""
    if declared is None:
        return None
    out = declared[0]
    if not out.is_array() or dim >= len(out.dimensions):
        return None
    big, small = (out.dimensions[dim], operand.dimensions[dim]) if gather else (
        operand.dimensions[dim], out.dimensions[dim])
    if UNBOUNDED_SIZE in (big, small) or small == 0:
        return ANY_SHARD_COUNT
    return -(-big // small)


# -- all-reduce -------------------------------------------------------------------------------


def _promotable(x: PrimitiveType, y: PrimitiveType) -> bool:
    """StableHLO's is_promotable: same kind of type, no narrower."""
    if x == y:
        return True
    kinds = (dtypes.is_integral, dtypes.is_floating, dtypes.is_complex)
    return any(k(x) and k(y) for k in kinds) and dtypes.bit_width(x) <= dtypes.bit_width(y)


def check_reducer(call: OpCall, operands: Sequence[Shape]) -> None:
    """The reduction computation is (T[], T[]) -> T[], and T can hold every operand's
    element type (StableHLO all_reduce C5; XLA's builder requires the same)."""
    comp = call.attrs["to_apply"]
    ps = comp.program_shape()
    params = ps.parameters
    t = params[0].element_type if params and params[0].is_array() else None
    scalars_of_t = all(p.is_scalar() and p.element_type == t for p in params)
    if (len(params) != 2 or t is None or not scalars_of_t or not ps.result.is_scalar()
            or ps.result.element_type != t):
        call.fail(f"the reduction computation %{comp.name} must take two scalars of one type "
                  f"and return a scalar of that type, got {ps}")
    for i, s in enumerate(operands):
        if not _promotable(s.element_type, t):
            call.fail(f"operand {i} {s} cannot be reduced by %{comp.name} of type {ps}: "
                      f"{tname(s.element_type)} does not promote to {tname(t)}")


def infer_all_reduce_shape(call: OpCall, operands: Sequence[Shape]) -> Shape:
    """ShapeInference::InferAllReduceShape: the operand shape, or a tuple of them."""
    for s in operands:
        expect_array(call, s, "operand of cross replica sum")
    return _tuple_or_single(operands)


def _mode_spec() -> AttrSpec:
    # XLA's parser reads mode= on all-reduce(-start) and reduce-scatter, then ignores it:
    # it is never printed.
    return AttrSpec("mode", COLLECTIVE_OP_GROUP_MODE, default=None,
                    doc="accepted and ignored, as in XLA", omit=lambda value, instr: True)


def _all_reduce_attrs():
    return [channel_id_spec(), replica_groups_spec(), constrain_layout_spec(),
            use_global_device_ids_spec(), _mode_spec(),
            AttrSpec("to_apply", ComputationKind(), doc="the reduction computation")]


def _all_reduce(call: OpCall) -> Shape:
    """Reduces each operand across the participants of its replica group with
    ``to_apply``; the result has the operand's shape (a tuple for several operands)."""
    mode = group_mode(call, call.attrs["use_global_device_ids"])
    check_replica_groups(call, mode, uniform=False)
    channel_id = call.attrs["channel_id"]
    if channel_id is not None and channel_id <= 0:
        call.fail(f"All reduce channel id must be greater than 0, got channel_id={channel_id}")
    shape = infer_all_reduce_shape(call, call.operands)
    check_reducer(call, call.operands)
    return shape


op("all-reduce", attrs=_all_reduce_attrs(), traits=[COLLECTIVE, CALLS_COMPUTATIONS],
   min_operands=1)(_all_reduce)
op("all-reduce-start", attrs=_all_reduce_attrs(), traits=[COLLECTIVE, CALLS_COMPUTATIONS, ASYNC],
   min_operands=1, doc="Starts an asynchronous all-reduce; its shape is all-reduce's.")(_all_reduce)


@op("all-reduce-done", traits=[COLLECTIVE, ASYNC])
def _all_reduce_done(call: OpCall) -> Shape:
    """Waits for an all-reduce-start; the result is its (forwarded) shape."""
    return call.operands[0]


# -- all-gather -------------------------------------------------------------------------------


def infer_all_gather_shape(call: OpCall, operands: Sequence[Shape], all_gather_dimension: int,
                           shard_count: int) -> Shape:
    """ShapeInference::InferAllGatherShape: dimension ``all_gather_dimension`` of every
    operand grows ``shard_count`` times."""
    if all_gather_dimension < 0:
        call.fail(f"all_gather_dimension must be >= 0, got {all_gather_dimension}")
    if shard_count <= 0:
        call.fail(f"shard_count must be > 0, got {shard_count}")
    outs = []
    for i, s in enumerate(operands):
        expect_array(call, s, "operand of all-gather")
        if all_gather_dimension >= s.rank:
            call.fail(f"all_gather_dimension {all_gather_dimension} is out of bounds for "
                      f"operand {i} {s} of rank {s.rank}")
        size = s.dimensions[all_gather_dimension]
        if size == UNBOUNDED_SIZE:
            outs.append(_with_dim(s, all_gather_dimension, UNBOUNDED_SIZE, True))
            continue
        if shard_count * size > _INT64_MAX:
            call.fail("AllGather dimension overflow")
        outs.append(_with_dim(s, all_gather_dimension, shard_count * size, False))
    return _tuple_or_single(outs)


def _all_gather_attrs():
    return [channel_id_spec(), replica_groups_spec(), constrain_layout_spec(),
            AttrSpec("dimensions", SINGLE_DIMENSION, doc="all_gather_dimension"),
            use_global_device_ids_spec()]


def _all_gather_common(call: OpCall, start: bool) -> Shape:
    operands = call.operands
    dim = call.attrs["dimensions"]
    mode = group_mode(call, call.attrs["use_global_device_ids"])
    groups = check_replica_groups(call, mode)
    for i, s in enumerate(operands):
        expect_array(call, s, "operand of all-gather")
        if not 0 <= dim < s.rank:
            call.fail(f"all_gather_dimension {dim} is out of bounds for operand {i} {s} of "
                      f"rank {s.rank}")
    declared = _declared_outputs(call, len(operands), start)
    derived = _ratio_from_result(declared, operands[0], dim, gather=True)
    shard_count = shard_count_for(call, derived, groups, mode, "shard count")
    return infer_all_gather_shape(call, operands, dim, shard_count)


@op("all-gather", attrs=_all_gather_attrs(), traits=[COLLECTIVE], min_operands=1)
def _all_gather(call: OpCall) -> Shape:
    """Concatenates the operands of a replica group along ``dimensions={d}``: dimension d
    grows by the group size (the shard count)."""
    return _all_gather_common(call, start=False)


@op("all-gather-start", attrs=_all_gather_attrs(), traits=[COLLECTIVE, ASYNC], min_operands=1)
def _all_gather_start(call: OpCall) -> Shape:
    """Starts an asynchronous all-gather: the result is (operands, gathered results)."""
    gathered = _all_gather_common(call, start=True)
    return Shape.tuple([_tuple_or_single(call.operands), gathered])


def _done_of_start(call: OpCall, start: str) -> Shape:
    (operand,) = call.operands
    if not operand.is_tuple() or len(operand.tuple_shapes) < 2:
        call.fail(f"the operand must be the tuple result of a {start}, got {operand}")
    return operand.tuple_shapes[1]


@op("all-gather-done", traits=[COLLECTIVE, ASYNC])
def _all_gather_done(call: OpCall) -> Shape:
    """Waits for an all-gather-start; the result is element 1 of its tuple."""
    return _done_of_start(call, "all-gather-start")


# -- reduce-scatter ---------------------------------------------------------------------------


def infer_reduce_scatter_shape(call: OpCall, operands: Sequence[Shape], scatter_dimension: int,
                               shard_count: int) -> Shape:
    """ShapeInference::InferReduceScatterShape: dimension ``scatter_dimension`` of every
    operand shrinks ``shard_count`` times (it must divide evenly)."""
    if scatter_dimension < 0:
        call.fail(f"scatter_dimension must be >= 0, got {scatter_dimension}")
    if shard_count <= 0:
        call.fail(f"shard_count must be > 0, got {shard_count}")
    outs = []
    for i, s in enumerate(operands):
        expect_array(call, s, "operand of reduce-scatter")
        if scatter_dimension >= s.rank:
            call.fail(f"scatter_dimension {scatter_dimension} is out of bounds for operand {i} "
                      f"{s} of rank {s.rank}")
        size = s.dimensions[scatter_dimension]
        if size % shard_count:
            shown = "?" if size == UNBOUNDED_SIZE else size
            call.fail(f"ReduceScatter operand scatter dimension size {shown} must be dividable "
                      f"by shard_count {shard_count}.")
        if s.dynamic_dimensions[scatter_dimension]:
            outs.append(_with_dim(s, scatter_dimension, UNBOUNDED_SIZE, True))
        else:
            outs.append(_with_dim(s, scatter_dimension, size // shard_count, False))
    return _tuple_or_single(outs)


@op("reduce-scatter", traits=[COLLECTIVE, CALLS_COMPUTATIONS], min_operands=1, attrs=[
    channel_id_spec(), replica_groups_spec(), constrain_layout_spec(),
    use_global_device_ids_spec(), _mode_spec(),
    AttrSpec("dimensions", SINGLE_DIMENSION, doc="scatter_dimension"),
    AttrSpec("to_apply", ComputationKind(), doc="the reduction computation"),
])
def _reduce_scatter(call: OpCall) -> Shape:
    """An all-reduce whose result is split along ``dimensions={d}`` into group-size
    blocks; each participant keeps its block (dimension d shrinks by the shard count)."""
    operands = call.operands
    dim = call.attrs["dimensions"]
    mode = group_mode(call, call.attrs["use_global_device_ids"])
    groups = check_replica_groups(call, mode)
    for i, s in enumerate(operands):
        expect_array(call, s, "operand of reduce-scatter")
        if not 0 <= dim < s.rank:
            call.fail(f"scatter_dimension {dim} is out of bounds for operand {i} {s} of "
                      f"rank {s.rank}")
    declared = _declared_outputs(call, len(operands), start=False)
    derived = _ratio_from_result(declared, operands[0], dim, gather=False)
    shard_count = shard_count_for(call, derived, groups, mode, "shard count")
    shape = infer_reduce_scatter_shape(call, operands, dim, shard_count)
    check_reducer(call, operands)
    return shape


# -- all-to-all -------------------------------------------------------------------------------


def infer_all_to_all_shape(call: OpCall, shape: Shape, split_dimension: int,
                           concat_dimension: int, split_count: int) -> Shape:
    """ShapeInference::InferAllToAllShape (the builder's array AllToAll): the split
    dimension shrinks ``split_count`` times, the concat dimension grows as many."""
    if split_count <= 0:
        call.fail(f"split_count must be > 0, got {split_count}")
    expect_array(call, shape, "operand of all-to-all")
    if any(dyn and size != UNBOUNDED_SIZE
           for dyn, size in zip(shape.dynamic_dimensions, shape.dimensions)):
        call.fail(f"AllToAll does not support bounded dynamic shapes, got {shape}")
    rank = shape.rank
    if not 0 <= split_dimension < rank:
        call.fail(f"AllToAll split_dimension {split_dimension} is out-of-bounds in shape {shape}.")
    if not 0 <= concat_dimension < rank:
        call.fail(f"AllToAll concat_dimension {concat_dimension} is out-of-bounds in shape "
                  f"{shape}.")
    dims = list(shape.dimensions)
    split_size = dims[split_dimension]
    if split_size != UNBOUNDED_SIZE and split_size % split_count:
        call.fail(f"AllToAll split dimension size {split_size} must be dividable by "
                  f"split_count {split_count}.")
    if split_size != UNBOUNDED_SIZE:
        dims[split_dimension] = split_size // split_count
    if dims[concat_dimension] != UNBOUNDED_SIZE:
        if dims[concat_dimension] * split_count > _INT64_MAX:
            call.fail("AllToAll concat dimension overflow")
        dims[concat_dimension] *= split_count
    return Shape.array(shape.element_type, dims, dynamic_dimensions=shape.dynamic_dimensions)


def infer_all_to_all_tuple_shape(call: OpCall, operands: Sequence[Shape]) -> Shape:
    """ShapeInference::InferAllToAllTupleShape: N operands of one shape, a tuple of N."""
    if not operands:
        call.fail("the tuple form takes at least one operand")
    first = operands[0]
    for i, s in enumerate(operands):
        if s.is_unbounded_dynamic():
            call.fail("AllToAllTuple does not support unbounded dynamic shapes")
        if not _equal_ignoring_memory_space(first, s):
            call.fail(f"HLO all-to-all has operands with different shapes: the 0th operand "
                      f"shape {first}, but the {i}th operand has shape {s}.")
    return Shape.tuple(operands)


def _equal_ignoring_memory_space(a: Shape, b: Shape) -> bool:
    """Shape::Equal().IgnoreMemorySpaceInLayout(): layouts count, memory spaces do not."""
    def strip(s: Shape) -> Shape:
        if s.is_tuple():
            return s.map_leaves(strip)
        if s.is_array() and s.layout is not None and s.layout.memory_space:
            return s.with_layout(s.layout.replace(memory_space=0))
        return s

    return strip(a) == strip(b)


@op("all-to-all", traits=[COLLECTIVE], min_operands=1, attrs=[
    channel_id_spec(), replica_groups_spec(), constrain_layout_spec(),
    AttrSpec("dimensions", SINGLE_DIMENSION, default=None,
             doc="split_dimension of the array form; omitted: the tuple form"),
])
def _all_to_all(call: OpCall) -> Shape:
    """Array form (``dimensions={d}``, one operand): split dimension d into group-size
    blocks, exchange them, and concatenate the received blocks along d again: the shape is
    unchanged. Tuple form: N operands of one shape, one sent to each member; the result
    is the tuple of the N blocks received."""
    mode = group_mode(call, None)
    groups = check_replica_groups(call, mode)
    split_count = subgroup_size(groups, mode)
    split_dimension = call.attrs["dimensions"]
    if split_dimension is not None:
        if len(call.operands) != 1:
            call.fail(f"the array form (dimensions={{{split_dimension}}}) takes exactly one "
                      f"operand, got {len(call.operands)}")
        (operand,) = call.operands
        expect_array(call, operand, "operand of all-to-all")
        # Without groups the split count is the replica count (module config): 1 here.
        infer_all_to_all_shape(call, operand, split_dimension, split_dimension, split_count or 1)
        return operand
    if split_count is not None and len(call.operands) != split_count:
        call.fail(f"the tuple form takes one operand per member of a replica group: "
                  f"{split_count} members in replica_groups={call.attrs['replica_groups']}, "
                  f"got {len(call.operands)} operands")
    return infer_all_to_all_tuple_shape(call, call.operands)


@op("ragged-all-to-all", traits=[COLLECTIVE], attrs=[channel_id_spec(), replica_groups_spec()])
def _ragged_all_to_all(call: OpCall) -> Shape:
    """ragged-all-to-all(input, output, input_offsets, send_sizes, output_offsets,
    recv_sizes): variable-sized blocks of ``input`` are written into ``output`` on the
    receivers; the result has the output's shape."""
    mode = group_mode(call, None)
    check_replica_groups(call, mode)
    shapes = call.operands
    names = ("input", "output", "input_offsets", "send_sizes", "output_offsets", "recv_sizes")
    expect_array(call, shapes[1], "operand 1 of ragged-all-to-all")
    expect_array(call, shapes[0], "operand 0 of ragged-all-to-all")
    for i in range(2, 6):
        s = shapes[i]
        expect_array(call, s, f"operand {i} ({names[i]}) of ragged-all-to-all")
        if s.rank not in (1, 2):
            call.fail(f"RaggedAllToAll operand {i} ({names[i]}) must be rank 1 or 2, got {s}")
        if i > 2 and not _equal_ignoring_memory_space(shapes[i - 1], s):
            call.fail(f"RaggedAllToAll operands have different shapes ({i - 1}, {i}): "
                      f"{shapes[i - 1]} and {s}")
    return shapes[1]


@op("collective-broadcast", traits=[COLLECTIVE], min_operands=1, attrs=[
    channel_id_spec(), replica_groups_spec(),
    # Printed only when true: XLA at jaxlib 0.10.2's commit has no such key (newer XLA
    # prints has_dynamic_root=false too), so text with the default stays readable by it.
    AttrSpec("has_dynamic_root", BoolKind(), default=False,
             doc="the last operand (s32[N-1]) names the root of each group at run time"),
])
def _collective_broadcast(call: OpCall) -> Shape:
    """Every member of a group receives the operand of the group's root (its first
    member, or the one the last operand names with has_dynamic_root=true)."""
    check_replica_groups(call, group_mode(call, None))
    operands = call.operands
    if call.attrs["has_dynamic_root"]:
        if len(operands) < 2:
            call.fail(f"has_dynamic_root=true needs the data operand(s) and a last operand with "
                      f"the roots, got {len(operands)} operand")
        root = operands[-1]
        expect_array(call, root, "last operand of collective-broadcast with dynamic root")
        if root.element_type != P.S32 or root.rank != 1 or root.dimensions[0] != len(operands) - 1:
            call.fail(f"The last operand of collective-broadcast with dynamic root must be a 1-D "
                      f"array of S32 with the same number of elements as the number of non-root "
                      f"operands, but got {root}")
        return _tuple_or_single(operands[:-1])
    expect_array(call, operands[0], "operand of collective-broadcast")
    return operands[0]


# -- collective-permute -----------------------------------------------------------------------


def _permute_attrs():
    return [channel_id_spec(), AttrSpec("source_target_pairs", SOURCE_TARGET_PAIRS),
            AttrSpec("slice_sizes", SLICE_SIZES, default=(),
                     doc="in-place form: the size of each slice sent")]


def _check_buffer_offset(call, buffer: Shape, offsets: Shape, what: str) -> None:
    if not offsets.is_tuple():
        call.fail(f"{what} offset {offsets} is not a tuple")
    parts = offsets.tuple_shapes
    if all(p.is_tuple() for p in parts) and parts:
        for p in parts:
            if len(p.tuple_shapes) != buffer.rank:
                call.fail(f"{what} offset index {p} should have the same number of elements as "
                          f"the buffer's rank ({buffer})")
    elif all(p.is_array() for p in parts):
        if len(parts) != buffer.rank:
            call.fail(f"{what} offset index {offsets} should have the same number of elements "
                      f"as the buffer's rank ({buffer})")
    else:
        call.fail(f"{what} offset {offsets} should either be a tuple of arrays or a tuple of "
                  f"tuples")


def _check_inplace_permute(call: OpCall) -> None:
    """HloVerifier's CheckInplaceCollectivePermute."""
    if len(call.operands) != 4:
        call.fail(f"the in-place form (with slice_sizes) takes exactly four operands (input, "
                  f"output, input offsets, output offsets), got {len(call.operands)}")
    inp, out, in_off, out_off = call.operands
    if inp.is_array() and out.is_array():
        _check_buffer_offset(call, inp, in_off, "input")
        _check_buffer_offset(call, out, out_off, "output")
    elif inp.is_tuple() and out.is_tuple():
        if len(inp.tuple_shapes) != len(out.tuple_shapes):
            call.fail(f"Unmatching input buffers and output buffers: {inp} and {out}")
        for off, buffers, what in ((in_off, inp, "input"), (out_off, out, "output")):
            if not off.is_tuple() or len(off.tuple_shapes) != len(buffers.tuple_shapes):
                call.fail(f"Unmatching {what} buffers and {what} offset: {buffers} and {off}")
            for b, o in zip(buffers.tuple_shapes, off.tuple_shapes):
                _check_buffer_offset(call, b, o, what)
    else:
        call.fail(f"Unmatching input buffers and output buffers: {inp} and {out}")


def _check_source_target_pairs(call: OpCall, inplace: bool) -> None:
    """HloVerifier's CheckDuplicatedSourceOrTarget (ids >= 0, each id a source at most
    once and a target at most once; the in-place form allows one per offset)."""
    allowed = 1
    if inplace:
        inp, _, in_off, _ = call.operands
        offsets = in_off if inp.is_array() else in_off.tuple_shapes[0]
        allowed = len(offsets.tuple_shapes) if offsets.is_tuple() else 1
    pairs = call.attrs["source_target_pairs"]
    sources: dict[int, int] = {}
    targets: dict[int, int] = {}
    for source, target in pairs:
        for role, i, seen in (("Source", source, sources), ("Target", target, targets)):
            if i < 0:
                call.fail(f"{role} {i} in the instruction's source-target pair must be >= 0")
            if seen.get(i, 0) == allowed:
                times = "once" if allowed == 1 else f"{allowed} times"
                call.fail(f"{role} {i} appears more than {times} in instruction's "
                          f"source-target pairs: {SOURCE_TARGET_PAIRS.to_text(pairs)}")
            seen[i] = seen.get(i, 0) + 1


def _permute_common(call: OpCall) -> bool:
    inplace = bool(call.attrs["slice_sizes"])
    if inplace:
        _check_inplace_permute(call)
    else:
        for s in call.operands:
            expect_array(call, s, f"operand of {call.opcode}")
    _check_source_target_pairs(call, inplace)
    return inplace


@op("collective-permute", attrs=_permute_attrs(), traits=[COLLECTIVE], min_operands=1)
def _collective_permute(call: OpCall) -> Shape:
    """Sends the operand from each source to its target (targets that are no pair's
    target get zeros). Several operands give a tuple; the in-place form
    (input, output, input_offsets, output_offsets, with slice_sizes) gives the output's shape."""
    if _permute_common(call):
        return call.operands[1]
    return _tuple_or_single(call.operands)


@op("collective-permute-start", attrs=_permute_attrs(), traits=[COLLECTIVE, ASYNC],
    min_operands=1)
def _collective_permute_start(call: OpCall) -> Shape:
    """Starts an asynchronous collective-permute: (input, output[, contexts...]), the
    context shapes taken from the declared result."""
    if _permute_common(call):
        shapes = [call.operands[0], call.operands[1]]
    else:
        both = _tuple_or_single(call.operands)
        shapes = [both, both]
    result = call.result
    if result is not None and result.is_tuple() and len(result.tuple_shapes) > 2:
        shapes.extend(result.tuple_shapes[2:])
    return Shape.tuple(shapes)


@op("collective-permute-done", traits=[COLLECTIVE, ASYNC])
def _collective_permute_done(call: OpCall) -> Shape:
    """Waits for a collective-permute-start; the result is element 1 of its tuple."""
    return _done_of_start(call, "collective-permute-start")


# -- ids --------------------------------------------------------------------------------------


@op("replica-id")
def _replica_id(call: OpCall) -> Shape:
    """The id of the replica running the program: u32[]."""
    return Shape.array(P.U32, ())


@op("partition-id")
def _partition_id(call: OpCall) -> Shape:
    """The id of the partition running the program: u32[]."""
    return Shape.array(P.U32, ())


# -- send / recv ------------------------------------------------------------------------------


def _channel_attrs():
    return [channel_id_spec(), is_host_transfer_spec()]


def expect_token(call: OpCall, index: int) -> None:
    s = call.operands[index]
    if not s.is_token():
        call.fail(f"Expected operand {index} to be token-shaped, actual shape is {s}")


def _context_tuple(call: OpCall, what: str) -> Shape:
    """The (data, u32[] context, token[]) tuple made by send or recv."""
    (ctx,) = call.operands
    parts = ctx.tuple_shapes if ctx.is_tuple() else ()
    if (len(parts) != 3 or not parts[1].is_scalar() or parts[1].element_type != P.U32
            or not parts[2].is_token()):
        call.fail(f"the operand must be the (data, u32[], token[]) tuple of a {what}, got {ctx}")
    return parts[0]


@op("send", attrs=_channel_attrs())
def _send(call: OpCall) -> Shape:
    """send(data, token): starts sending ``data`` on the channel; the result is
    (data, u32[] context, token[]) for send-done."""
    data, _ = call.operands
    expect_token(call, 1)
    return Shape.tuple([data, Shape.array(P.U32, ()), Shape.token()])


@op("send-done", attrs=_channel_attrs())
def _send_done(call: OpCall) -> Shape:
    """Waits for a send to complete: token[]."""
    _context_tuple(call, "send")
    return Shape.token()


@op("recv", attrs=_channel_attrs())
def _recv(call: OpCall) -> Shape:
    """recv(token): starts receiving on the channel; the data shape is element 0 of the
    declared result (data, u32[] context, token[])."""
    expect_token(call, 0)
    result = require_result(
        call, "recv takes the received shape from its result (data, u32[], token[])")
    if not result.is_tuple() or not result.tuple_shapes:
        call.fail(f"recv must have a non-empty tuple shape, got {result}", parser_check=True)
    return Shape.tuple([result.tuple_shapes[0], Shape.array(P.U32, ()), Shape.token()])


@op("recv-done", attrs=_channel_attrs())
def _recv_done(call: OpCall) -> Shape:
    """Waits for a recv: (data, token[])."""
    data = _context_tuple(call, "recv")
    return Shape.tuple([data, Shape.token()])


# -- infeed / outfeed -------------------------------------------------------------------------


@op("infeed", attrs=[AttrSpec("infeed_config", StringKind(), default="",
                              doc="backend-specific configuration; omitted when empty")])
def _infeed(call: OpCall) -> Shape:
    """infeed(token): reads one value of the declared shape from the device's infeed
    queue; the result is (data, token[])."""
    expect_token(call, 0)
    result = require_result(call, "infeed takes the data shape from its result (data, token[])")
    if not result.is_tuple() or not result.tuple_shapes:
        call.fail(f"infeed must have a non-empty tuple shape, got {result}", parser_check=True)
    data = result.tuple_shapes[0]
    if data.is_tuple() and any(s.is_tuple() for s in data.tuple_shapes):
        call.fail(f"nested tuple shapes are not supported by infeed, got {data}")
    return Shape.tuple([data, Shape.token()])


@op("outfeed", attrs=[
    AttrSpec("outfeed_shape", ShapeKind(), default=None,
             doc="the shape (with layout) sent to the host; omitted: the operand's"),
    AttrSpec("outfeed_config", StringKind(), default="",
             doc="backend-specific configuration; omitted when empty"),
])
def _outfeed(call: OpCall) -> Shape:
    """outfeed(data, token): sends ``data`` to the host's outfeed queue; token[]."""
    data, _ = call.operands
    expect_token(call, 1)
    outfeed_shape = call.attrs["outfeed_shape"]
    if outfeed_shape is not None and not outfeed_shape.compatible(data):
        call.fail(f"Expected outfeed shape to be equal to operand's shape {data}, actual shape "
                  f"is {outfeed_shape}")
    return Shape.token()

"""Collective, channel and feed builder functions with XlaBuilder's names and argument
order: AllReduce, AllReduceTuple, CrossReplicaSum, AllGather, AllGatherTuple, ReduceScatter,
AllToAll, AllToAllTuple, CollectiveBroadcast, CollectivePermute, MultiCollectivePermute,
RaggedAllToAll, ReplicaId, PartitionId, Send/Recv (with and without tokens, to and from the
host), Infeed/InfeedWithToken, Outfeed/OutfeedWithToken, and channel handles.

What XLA's builder composes, these compose the same way: a tuple operand of AllReduce /
AllGather / ReduceScatter becomes one operand per element (get-tuple-element), CrossReplicaSum
is an all-reduce with an add (or, for PRED) computation, the array AllToAll is an HLO
all-to-all along the split dimension followed by reshape/transpose/reshape, Send/Recv/Infeed/
Outfeed without a token make one with after-all. Only shapes and attributes are built here;
running them is the runtime's business.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence

from xlapy.errors import InvalidArgumentError, ParseError
from xlapy.hlo.attrs import check_int_tuples
from xlapy.hlo.attrs.collective import (
    ChannelHandle,
    ChannelType,
    CollectiveDeviceList,
    IotaReplicaGroupList,
    ReplicaGroup,
    replica_groups_from,
)
from xlapy.hlo.attrs.slicing import SliceRanges
from xlapy.opdefs.collectives import (
    infer_all_gather_shape,
    infer_all_reduce_shape,
    infer_all_to_all_shape,
    infer_all_to_all_tuple_shape,
    infer_reduce_scatter_shape,
)
from xlapy.opdefs.registry import OpCall, get_opdef
from xlapy.ops.builder import XlaBuilder, XlaOp, computation_of
from xlapy.ops.core import (
    builder_arg,
    call_overload,
    check_same_builder,
    int_arg,
    op_list,
    reshape_to,
    shape_arg,
)
from xlapy.shape import PrimitiveType, Shape
from xlapy.shape.layout import Layout

__all__ = [
    "AllGather",
    "AllGatherTuple",
    "AllReduce",
    "AllReduceTuple",
    "AllToAll",
    "AllToAllTuple",
    "ChannelHandle",
    "ChannelType",
    "CollectiveBroadcast",
    "CollectiveDeviceList",
    "CollectivePermute",
    "CreateChannelHandle",
    "CreateDeviceToHostChannelHandle",
    "CreateHostToDeviceChannelHandle",
    "CrossReplicaSum",
    "Infeed",
    "InfeedWithToken",
    "IotaReplicaGroupList",
    "MultiCollectivePermute",
    "Outfeed",
    "OutfeedWithToken",
    "PartitionId",
    "RaggedAllToAll",
    "Recv",
    "RecvFromHost",
    "RecvWithToken",
    "ReduceScatter",
    "ReplicaGroup",
    "ReplicaId",
    "Send",
    "SendToHost",
    "SendWithToken",
]

# Per-builder state XLA keeps in XlaBuilder: the next channel id and the implicit
# infeed/outfeed tokens that order token-less Infeed/Outfeed calls.
_next_channel: weakref.WeakKeyDictionary[XlaBuilder, int] = weakref.WeakKeyDictionary()
_infeed_token: weakref.WeakKeyDictionary[XlaBuilder, XlaOp] = weakref.WeakKeyDictionary()
_outfeed_token: weakref.WeakKeyDictionary[XlaBuilder, XlaOp] = weakref.WeakKeyDictionary()


# -- helpers ----------------------------------------------------------------------------------


def _builder(op_name: str, builder) -> XlaBuilder:
    return builder_arg(builder, op_name)


_int = int_arg


def _channel_id(channel_id, op_name: str) -> int | None:
    """A ChannelHandle (or its integer handle) as the ``channel_id`` attribute."""
    if channel_id is None:
        return None
    if isinstance(channel_id, ChannelHandle):
        return channel_id.handle
    return _int(channel_id, "channel_id", op_name)


def _handle(handle, op_name: str) -> ChannelHandle:
    if isinstance(handle, ChannelHandle):
        return handle
    return ChannelHandle(_int(handle, "channel handle", op_name))


def _groups(replica_groups, op_name: str):
    """Replica groups as given (lists of ids, ReplicaGroups, a device list or its text)."""
    try:
        return replica_groups_from(replica_groups, f"{op_name}: replica_groups")
    except ParseError as e:
        raise InvalidArgumentError(f"{op_name}: replica_groups: {e}") from None


def _call(opcode: str, operands: Sequence[Shape], attrs: dict | None = None) -> OpCall:
    """An OpCall for running a shared inference function from the builder, so its errors
    carry the opcode as the rule's do."""
    opdef = get_opdef(opcode)
    return OpCall(opcode, tuple(operands), opdef.check_attrs(attrs or {}))


def _layout(layout, op_name: str) -> Layout | None:
    if layout is None or isinstance(layout, Layout):
        return layout
    raise InvalidArgumentError(f"{op_name}: layout must be a Layout, got {type(layout).__name__}")


def _split_tuple(op_name: str, operand: XlaOp, same_type: bool) -> list[XlaOp]:
    """The operands XLA's builder makes of a (possibly tuple) operand."""
    shape = operand.shape
    if not shape.is_tuple():
        return [operand]
    if not shape.tuple_shapes:
        raise InvalidArgumentError(f"{op_name}: 0 element tuple {op_name} is not supported")
    first = shape.tuple_shapes[0]
    for s in shape.tuple_shapes:
        if same_type and (not s.is_array() or s.element_type != first.element_type):
            raise InvalidArgumentError(
                f"{op_name}: All the shapes of a tuple input of {op_name} must have the same "
                f"element type, got {shape}")
    return [_get_tuple_element(operand, i) for i in range(len(shape.tuple_shapes))]


def _get_tuple_element(t: XlaOp, index: int) -> XlaOp:
    return t.builder.emit("get-tuple-element", [t], {"index": index})


def _tuple(builder: XlaBuilder, elements: Sequence[XlaOp]) -> XlaOp:
    return builder.emit("tuple", list(elements))


def _create_token(builder: XlaBuilder) -> XlaOp:
    return builder.emit("after-all", [])


def _next_channel_handle(builder: XlaBuilder, channel_type: ChannelType) -> ChannelHandle:
    n = _next_channel.get(builder, 1)
    _next_channel[builder] = n + 1
    return ChannelHandle(n, channel_type)


# -- channel handles --------------------------------------------------------------------------


def CreateChannelHandle(builder: XlaBuilder) -> ChannelHandle:
    """``h = ops.CreateChannelHandle(b)``: a new device-to-device channel of this builder
    (ids 1, 2, ...), for Send/Recv pairs and cross-module collectives."""
    return _next_channel_handle(_builder("CreateChannelHandle", builder),
                                ChannelType.DEVICE_TO_DEVICE)


def CreateDeviceToHostChannelHandle(builder: XlaBuilder) -> ChannelHandle:
    """``ops.CreateDeviceToHostChannelHandle(b)``: a channel for SendToHost."""
    return _next_channel_handle(_builder("CreateDeviceToHostChannelHandle", builder),
                                ChannelType.DEVICE_TO_HOST)


def CreateHostToDeviceChannelHandle(builder: XlaBuilder) -> ChannelHandle:
    """``ops.CreateHostToDeviceChannelHandle(b)``: a channel for RecvFromHost."""
    return _next_channel_handle(_builder("CreateHostToDeviceChannelHandle", builder),
                                ChannelType.HOST_TO_DEVICE)


# -- all-reduce -------------------------------------------------------------------------------


def AllReduce(operand: XlaOp, computation, replica_groups=(), channel_id=None,
              shape_with_layout: Shape | None = None,
              use_global_device_ids: bool | None = None) -> XlaOp:
    """``ops.AllReduce(x, add, [[0, 1], [2, 3]])``: reduce ``x`` with ``computation``
    across each replica group; the result has x's shape. A tuple operand reduces each
    element (one variadic all-reduce); ``shape_with_layout`` fixes the result layout
    (constrain_layout=true)."""
    b = check_same_builder("AllReduce", [operand])
    comp = computation_of(computation, "AllReduce")
    groups = _groups(replica_groups, "AllReduce")
    operands = _split_tuple("AllReduce", operand, same_type=True)
    call = _call("all-reduce", [o.shape for o in operands], {"to_apply": comp})
    inferred = infer_all_reduce_shape(call, [o.shape for o in operands])
    attrs = {"replica_groups": groups, "channel_id": _channel_id(channel_id, "AllReduce"),
             "to_apply": comp}
    if shape_with_layout is not None:
        if not isinstance(shape_with_layout, Shape):
            raise InvalidArgumentError(f"AllReduce: shape_with_layout must be a Shape, got "
                                       f"{type(shape_with_layout).__name__}")
        source = None
        if shape_with_layout.is_tuple():
            if len(shape_with_layout.tuple_shapes) == 1 and not inferred.is_tuple():
                source = shape_with_layout.tuple_shapes[0]
        else:
            source = shape_with_layout
        if source is not None and source.layout is not None:
            if inferred.is_tuple():
                raise InvalidArgumentError(
                    f"AllReduce: shape_with_layout {shape_with_layout} is an array but the "
                    f"result {inferred} is a tuple")
            inferred = inferred.with_layout(source.layout)
        attrs["constrain_layout"] = True
    if use_global_device_ids is not None:
        attrs["use_global_device_ids"] = bool(use_global_device_ids)
    result = b.emit("all-reduce", operands, attrs, shape=inferred, op_name="AllReduce")
    if operand.shape.is_tuple() and not inferred.is_tuple():
        return _tuple(b, [result])  # a one-element tuple in, a one-element tuple out
    return result


def AllReduceTuple(operands: Sequence[XlaOp], computation, replica_groups=(), channel_id=None,
                   shape_with_layout: Shape | None = None,
                   use_global_device_ids: bool | None = None) -> XlaOp:
    """``ops.AllReduceTuple([x, y], add)``: one all-reduce of several arrays (of one
    element type); the result is the tuple of the reduced arrays."""
    operands = op_list(operands, "operands", "AllReduceTuple")
    b = check_same_builder("AllReduceTuple", operands)
    return AllReduce(_tuple(b, operands), computation, replica_groups, channel_id,
                     shape_with_layout, use_global_device_ids)


def CrossReplicaSum(operand: XlaOp, replica_groups=()) -> XlaOp:
    """``ops.CrossReplicaSum(x)``: all-reduce with a sum (logical or for PRED) over all
    replicas, or within each of ``replica_groups``."""
    b = check_same_builder("CrossReplicaSum", [operand])
    shape = operand.shape
    if shape.is_tuple():
        if not shape.tuple_shapes:
            raise InvalidArgumentError(
                "CrossReplicaSum: 0 element tuple CrossReplicaSum is not supported")
        shape = shape.tuple_shapes[0]
    if not shape.is_array():
        raise InvalidArgumentError(
            f"CrossReplicaSum: expected an array operand, got {operand.shape}")
    scalar = Shape.array(shape.element_type, ())
    sub = b.create_sub_builder("sum")
    x = sub.parameter(0, scalar, "x")
    y = sub.parameter(1, scalar, "y")
    sub.emit("or" if scalar.element_type == PrimitiveType.PRED else "add", [x, y])
    return AllReduce(operand, sub.build(), replica_groups, None)


# -- all-gather / reduce-scatter --------------------------------------------------------------


def AllGather(operand: XlaOp, all_gather_dimension: int, shard_count: int, replica_groups=(),
              channel_id=None, layout: Layout | None = None,
              use_global_device_ids: bool | None = None) -> XlaOp:
    """``ops.AllGather(x, 0, 2)``: concatenate ``x`` of each of ``shard_count`` members of
    a replica group along ``all_gather_dimension``; f32[2] gives f32[4] with two shards.
    A tuple operand gathers each element."""
    b = check_same_builder("AllGather", [operand])
    dim = _int(all_gather_dimension, "all_gather_dimension", "AllGather")
    count = _int(shard_count, "shard_count", "AllGather")
    layout = _layout(layout, "AllGather")
    groups = _groups(replica_groups, "AllGather")
    operands = _split_tuple("AllGather", operand, same_type=False)
    shapes = [o.shape for o in operands]
    inferred = infer_all_gather_shape(_call("all-gather", shapes, {"dimensions": dim}), shapes,
                                      dim, count)
    attrs = {"dimensions": dim, "replica_groups": groups,
             "channel_id": _channel_id(channel_id, "AllGather")}
    if layout is not None:
        if inferred.is_tuple():
            raise InvalidArgumentError(f"AllGather: a layout applies to an array result, but "
                                       f"the result is {inferred}")
        inferred = inferred.with_layout(layout)
        attrs["constrain_layout"] = True
    if use_global_device_ids is not None:
        attrs["use_global_device_ids"] = bool(use_global_device_ids)
    return b.emit("all-gather", operands, attrs, shape=inferred, op_name="AllGather")


def AllGatherTuple(operands: Sequence[XlaOp], all_gather_dimension: int, shard_count: int,
                   replica_groups=(), channel_id=None, layout: Layout | None = None,
                   use_global_device_ids: bool | None = None) -> XlaOp:
    """``ops.AllGatherTuple([x, y], 0, 2)``: one all-gather of several arrays."""
    operands = op_list(operands, "operands", "AllGatherTuple")
    b = check_same_builder("AllGatherTuple", operands)
    return AllGather(_tuple(b, operands), all_gather_dimension, shard_count, replica_groups,
                     channel_id, layout, use_global_device_ids)


def ReduceScatter(operand: XlaOp, computation, scatter_dimension: int, shard_count: int,
                  replica_groups=(), channel_id=None, layout: Layout | None = None,
                  use_global_device_ids: bool | None = None) -> XlaOp:
    """``ops.ReduceScatter(x, add, 0, 2)``: all-reduce, then each of the ``shard_count``
    group members keeps its block along ``scatter_dimension``; f32[4] gives f32[2]."""
    b = check_same_builder("ReduceScatter", [operand])
    comp = computation_of(computation, "ReduceScatter")
    dim = _int(scatter_dimension, "scatter_dimension", "ReduceScatter")
    count = _int(shard_count, "shard_count", "ReduceScatter")
    layout = _layout(layout, "ReduceScatter")
    groups = _groups(replica_groups, "ReduceScatter")
    operands = _split_tuple("ReduceScatter", operand, same_type=True)
    shapes = [o.shape for o in operands]
    call = _call("reduce-scatter", shapes, {"dimensions": dim, "to_apply": comp})
    inferred = infer_reduce_scatter_shape(call, shapes, dim, count)
    attrs = {"dimensions": dim, "to_apply": comp, "replica_groups": groups,
             "channel_id": _channel_id(channel_id, "ReduceScatter")}
    if layout is not None:
        if inferred.is_tuple():
            raise InvalidArgumentError(f"ReduceScatter: a layout applies to an array result, "
                                       f"but the result is {inferred}")
        inferred = inferred.with_layout(layout)
        attrs["constrain_layout"] = True
    if use_global_device_ids is not None:
        attrs["use_global_device_ids"] = bool(use_global_device_ids)
    return b.emit("reduce-scatter", operands, attrs, shape=inferred, op_name="ReduceScatter")


# -- all-to-all -------------------------------------------------------------------------------


def AllToAll(operand: XlaOp, split_dimension: int, concat_dimension: int, split_count: int,
             replica_groups=(), layout: Layout | None = None, channel_id=None) -> XlaOp:
    """``ops.AllToAll(x, 1, 0, 4)``: split ``x`` into ``split_count`` blocks along
    ``split_dimension``, send block i to member i, concatenate what arrives along
    ``concat_dimension``: f32[4,16] gives f32[16,4]. With a layout the tuple form is used
    (as XLA's builder does)."""
    check_same_builder("AllToAll", [operand])
    if layout is not None:
        return AllToAllTuple(operand, split_dimension, concat_dimension, split_count,
                             replica_groups, layout, channel_id)
    return _all_to_all_array(operand, split_dimension, concat_dimension, split_count,
                             replica_groups, channel_id)


def _all_to_all_array(operand: XlaOp, split_dimension, concat_dimension, split_count,
                      replica_groups, channel_id) -> XlaOp:
    """XlaBuilder::AllToAllArray: an HLO all-to-all with dimensions={split_dimension}
    (same shape), then reshape [.., split_count, size/split_count, ..], transpose the
    split_count dimension before concat_dimension, and reshape to the result."""
    b = operand.builder
    split = _int(split_dimension, "split_dimension", "AllToAll")
    concat = _int(concat_dimension, "concat_dimension", "AllToAll")
    count = _int(split_count, "split_count", "AllToAll")
    shape = operand.shape
    target = infer_all_to_all_shape(_call("all-to-all", [shape]), shape, split, concat, count)
    if shape.is_unbounded_dynamic():
        raise InvalidArgumentError(
            f"AllToAll: {shape} has unbounded dynamic dimensions, which XLA's builder handles "
            f"with dynamic reshapes that xlapy does not build")
    groups = _groups(replica_groups, "AllToAll")
    if groups.is_empty():
        groups = CollectiveDeviceList((tuple(range(count)),))
    result = b.emit("all-to-all", [operand],
                    {"dimensions": split, "replica_groups": groups,
                     "channel_id": _channel_id(channel_id, "AllToAll")},
                    shape=shape, op_name="AllToAll")
    if split == concat:
        return result
    sizes = []
    for i, d in enumerate(shape.dimensions):
        if i == split:
            sizes.extend([count, d // count])
        else:
            sizes.append(d)
    result = reshape_to(result, sizes)
    permutation = []
    for i in range(shape.rank):
        if i == concat:
            permutation.append(split)
        permutation.append(i + 1 if i >= split else i)
    result = b.emit("transpose", [result], {"dimensions": tuple(permutation)}, op_name="AllToAll")
    return reshape_to(result, target.dimensions)


def AllToAllTuple(operand, *args, **kwargs) -> XlaOp:
    """Two overloads, as XLA's:

    ``ops.AllToAllTuple([a, b], replica_groups=(), layout=None, channel_id=None)``: the HLO
    tuple all-to-all of N same-shaped arrays (one to each group member);

    ``ops.AllToAllTuple(x, split_dimension, concat_dimension, split_count, replica_groups=(),
    layout=None, channel_id=None)``: slice x into split_count blocks, exchange them with the
    tuple all-to-all, and concatenate the received blocks."""
    target = _all_to_all_tuple_split if isinstance(operand, XlaOp) else _all_to_all_tuple
    return call_overload("AllToAllTuple", target, operand, *args, **kwargs)


def _all_to_all_tuple(operands: Sequence[XlaOp], replica_groups=(), layout: Layout | None = None,
                      channel_id=None) -> XlaOp:
    operands = op_list(operands, "operands", "AllToAllTuple")
    b = check_same_builder("AllToAllTuple", operands)
    layout = _layout(layout, "AllToAllTuple")
    shapes = [o.shape for o in operands]
    shape = infer_all_to_all_tuple_shape(_call("all-to-all", shapes), shapes)
    attrs = {"replica_groups": _groups(replica_groups, "AllToAllTuple"),
             "channel_id": _channel_id(channel_id, "AllToAllTuple")}
    if layout is not None:
        elements = []
        for i, s in enumerate(shape.tuple_shapes):
            if not s.is_array() or len(layout.minor_to_major) != s.rank:
                raise InvalidArgumentError(
                    f"AllToAllTuple: Provided layout must be compatible with the operands' shape. "
                    f"The layout is {layout}, but operand {i} has shape {s}.")
            elements.append(s.with_layout(layout))
        shape = Shape.tuple(elements)
        attrs["constrain_layout"] = True
    return b.emit("all-to-all", operands, attrs, shape=shape, op_name="AllToAllTuple")


def _all_to_all_tuple_split(operand: XlaOp, split_dimension: int, concat_dimension: int,
                            split_count: int, replica_groups=(), layout: Layout | None = None,
                            channel_id=None) -> XlaOp:
    b = check_same_builder("AllToAllTuple", [operand])
    split = _int(split_dimension, "split_dimension", "AllToAllTuple")
    concat = _int(concat_dimension, "concat_dimension", "AllToAllTuple")
    count = _int(split_count, "split_count", "AllToAllTuple")
    shape = operand.shape
    if shape.is_array() and shape.is_unbounded_dynamic():
        raise InvalidArgumentError("AllToAllTuple: AllToAllTuple does not support unbounded "
                                   "dynamic shapes")
    infer_all_to_all_shape(_call("all-to-all", [shape]), shape, split, concat, count)
    block = shape.dimensions[split] // count
    slices = []
    for i in range(count):
        starts = [0] * shape.rank
        limits = list(shape.dimensions)
        starts[split], limits[split] = i * block, (i + 1) * block
        slices.append(b.emit("slice", [operand], {"slice": SliceRanges.of(starts, limits)},
                             op_name="AllToAllTuple"))
    exchanged = _all_to_all_tuple(slices, replica_groups, layout, channel_id)
    received = [_get_tuple_element(exchanged, i) for i in range(count)]
    return b.emit("concatenate", received, {"dimensions": (concat,)}, op_name="AllToAllTuple")


def RaggedAllToAll(input: XlaOp, input_offsets: XlaOp, send_sizes: XlaOp,
                   output: XlaOp, output_offsets: XlaOp, recv_sizes: XlaOp,
                   replica_groups=(), channel_id=None) -> XlaOp:
    """``ops.RaggedAllToAll(input, input_offsets, send_sizes, output, output_offsets,
    recv_sizes)``: send variable-sized row blocks of ``input`` into the receivers'
    ``output``; the result has output's shape. The HLO operand order is (input, output,
    input_offsets, send_sizes, output_offsets, recv_sizes), the one the verifier and the
    runtime read."""
    args = [input, input_offsets, send_sizes, output, output_offsets, recv_sizes]
    b = check_same_builder("RaggedAllToAll", args)
    operands = [input, output, input_offsets, send_sizes, output_offsets, recv_sizes]
    return b.emit("ragged-all-to-all", operands,
                  {"replica_groups": _groups(replica_groups, "RaggedAllToAll"),
                   "channel_id": _channel_id(channel_id, "RaggedAllToAll")},
                  op_name="RaggedAllToAll")


# -- collective-broadcast / collective-permute ------------------------------------------------


def CollectiveBroadcast(operand, replica_groups, channel_id=None,
                        has_dynamic_root: bool = False) -> XlaOp:
    """``ops.CollectiveBroadcast(x, [[0, 1]])``: every group member gets the value of the
    group's first member. The overload taking a list of operands supports
    ``has_dynamic_root`` (the last operand, s32[N-1], names the roots)."""
    operands = op_list(operand, "operand", "CollectiveBroadcast", one_allowed=True)
    if isinstance(operand, XlaOp) and has_dynamic_root:
        raise InvalidArgumentError("CollectiveBroadcast: has_dynamic_root needs the list form "
                                   "(data operands and the roots operand)")
    b = check_same_builder("CollectiveBroadcast", operands)
    return b.emit("collective-broadcast", operands,
                  {"replica_groups": _groups(replica_groups, "CollectiveBroadcast"),
                   "channel_id": _channel_id(channel_id, "CollectiveBroadcast"),
                   "has_dynamic_root": bool(has_dynamic_root)},
                  op_name="CollectiveBroadcast")


def _pairs(source_target_pairs, op_name: str) -> tuple[tuple[int, int], ...]:
    return check_int_tuples(source_target_pairs, f"{op_name}: source_target_pairs",
                            what="(source, target) pairs")


def CollectivePermute(operand: XlaOp, source_target_pairs: Sequence[tuple[int, int]],
                      channel_id=None) -> XlaOp:
    """``ops.CollectivePermute(x, [(0, 1), (1, 0)])``: each source sends x to its target;
    ids that are no pair's target receive zeros."""
    b = check_same_builder("CollectivePermute", [operand])
    return b.emit("collective-permute", [operand],
                  {"source_target_pairs": _pairs(source_target_pairs, "CollectivePermute"),
                   "channel_id": _channel_id(channel_id, "CollectivePermute")},
                  op_name="CollectivePermute")


def MultiCollectivePermute(operands: Sequence[XlaOp],
                           source_target_pairs: Sequence[tuple[int, int]],
                           channel_id=None) -> XlaOp:
    """``ops.MultiCollectivePermute([x, y], [(0, 1)])``: one collective-permute of
    several arrays; the result is their tuple."""
    operands = op_list(operands, "operands", "MultiCollectivePermute")
    b = check_same_builder("MultiCollectivePermute", operands)
    if len(operands) < 2:
        raise InvalidArgumentError(f"MultiCollectivePermute: needs at least 2 operands, got "
                                   f"{len(operands)} (use CollectivePermute)")
    return b.emit("collective-permute", operands,
                  {"source_target_pairs": _pairs(source_target_pairs, "MultiCollectivePermute"),
                   "channel_id": _channel_id(channel_id, "MultiCollectivePermute")},
                  op_name="MultiCollectivePermute")


def ReplicaId(builder: XlaBuilder) -> XlaOp:
    """``ops.ReplicaId(b)``: this replica's id, u32[]."""
    return _builder("ReplicaId", builder).emit("replica-id", [], op_name="ReplicaId")


def PartitionId(builder: XlaBuilder) -> XlaOp:
    """``ops.PartitionId(b)``: this partition's id, u32[]."""
    return _builder("PartitionId", builder).emit("partition-id", [], op_name="PartitionId")


# -- send / recv ------------------------------------------------------------------------------


def _send(operand: XlaOp, token: XlaOp, data_shape: Shape, handle: ChannelHandle,
          host: bool, op_name: str) -> XlaOp:
    b = operand.builder
    attrs = {"channel_id": handle.handle, "is_host_transfer": host}
    shape = Shape.tuple([data_shape, Shape.array(PrimitiveType.U32, ()), Shape.token()])
    send = b.emit("send", [operand, token], attrs, shape=shape, op_name=op_name)
    return b.emit("send-done", [send], attrs, op_name=op_name)


def _recv(token: XlaOp, shape: Shape, handle: ChannelHandle, host: bool, op_name: str) -> XlaOp:
    b = token.builder
    attrs = {"channel_id": handle.handle, "is_host_transfer": host}
    full = Shape.tuple([shape, Shape.array(PrimitiveType.U32, ()), Shape.token()])
    recv = b.emit("recv", [token], attrs, shape=full, op_name=op_name)
    return b.emit("recv-done", [recv], attrs, op_name=op_name)


def _check_shape_arg(shape, op_name: str) -> Shape:
    return shape_arg(shape, "shape", op_name)


def Send(operand: XlaOp, handle: ChannelHandle) -> None:
    """``ops.Send(x, h)``: send x on device-to-device channel ``h`` (HLO send + send-done
    after a fresh token). Returns nothing, as XLA's Send."""
    b = check_same_builder("Send", [operand])
    SendWithToken(operand, _create_token(b), handle)


def SendWithToken(operand: XlaOp, token: XlaOp, handle: ChannelHandle) -> XlaOp:
    """``ops.SendWithToken(x, tok, h)``: send + send-done on a device-to-device channel,
    ordered after ``tok``; returns the send-done token."""
    check_same_builder("SendWithToken", [operand, token])
    handle = _handle(handle, "SendWithToken")
    if handle.type != ChannelType.DEVICE_TO_DEVICE:
        raise InvalidArgumentError("SendWithToken: Send must use a device-to-device channel")
    return _send(operand, token, operand.shape, handle, False, "SendWithToken")


def Recv(builder: XlaBuilder, shape: Shape, handle: ChannelHandle) -> XlaOp:
    """``ops.Recv(b, shape, h)``: receive a value of ``shape`` from the Send on channel
    ``h`` (recv + recv-done after a fresh token); returns the data."""
    b = _builder("Recv", builder)
    shape = _check_shape_arg(shape, "Recv")
    done = RecvWithToken(_create_token(b), shape, handle)
    return b.emit("get-tuple-element", [done], {"index": 0}, shape=shape, op_name="Recv")


def RecvWithToken(token: XlaOp, shape: Shape, handle: ChannelHandle) -> XlaOp:
    """``ops.RecvWithToken(tok, shape, h)``: recv + recv-done; returns (data, token)."""
    check_same_builder("RecvWithToken", [token])
    shape = _check_shape_arg(shape, "RecvWithToken")
    handle = _handle(handle, "RecvWithToken")
    if handle.type != ChannelType.DEVICE_TO_DEVICE:
        raise InvalidArgumentError("RecvWithToken: Recv must use a device-to-device channel")
    return _recv(token, shape, handle, False, "RecvWithToken")


def SendToHost(operand: XlaOp, token: XlaOp, shape_with_layout: Shape,
               handle: ChannelHandle) -> XlaOp:
    """``ops.SendToHost(x, tok, shape, h)``: send an array to the host over a
    device-to-host channel, laid out as ``shape_with_layout``; returns the send-done token."""
    check_same_builder("SendToHost", [operand, token])
    shape = _check_shape_arg(shape_with_layout, "SendToHost")
    if not shape.has_layout():
        raise InvalidArgumentError("SendToHost: Shape passed to SendToHost must have a layout")
    if not operand.shape.compatible(shape):
        raise InvalidArgumentError(f"SendToHost: SendToHost shape {shape} must be compatible "
                                   f"with operand shape {operand.shape}")
    if not operand.shape.is_array():
        raise InvalidArgumentError(f"SendToHost: SendToHost only supports array shapes, shape: "
                                   f"{operand.shape}")
    handle = _handle(handle, "SendToHost")
    if handle.type != ChannelType.DEVICE_TO_HOST:
        raise InvalidArgumentError("SendToHost: SendToHost must use a device-to-host channel")
    return _send(operand, token, shape, handle, True, "SendToHost")


def RecvFromHost(token: XlaOp, shape: Shape, handle: ChannelHandle) -> XlaOp:
    """``ops.RecvFromHost(tok, shape, h)``: receive an array from the host over a
    host-to-device channel; returns (data, token)."""
    check_same_builder("RecvFromHost", [token])
    shape = _check_shape_arg(shape, "RecvFromHost")
    if not shape.has_layout():
        raise InvalidArgumentError("RecvFromHost: Shape passed to RecvFromHost must have a layout")
    if not shape.is_array():
        raise InvalidArgumentError(f"RecvFromHost: RecvFromHost only supports array shapes, "
                                   f"shape: {shape}")
    handle = _handle(handle, "RecvFromHost")
    if handle.type != ChannelType.HOST_TO_DEVICE:
        raise InvalidArgumentError("RecvFromHost: RecvFromHost must use a host-to-device channel")
    return _recv(token, shape, handle, True, "RecvFromHost")


# -- infeed / outfeed -------------------------------------------------------------------------


def _feed_shape(shape, op_name: str) -> Shape:
    shape = _check_shape_arg(shape, op_name)
    if not shape.has_layout():
        raise InvalidArgumentError(f"{op_name}: Given shape to {op_name.removesuffix('WithToken')} "
                                   f"must have a layout")
    return shape


def Infeed(builder: XlaBuilder, shape: Shape, config: str = "") -> XlaOp:
    """``ops.Infeed(b, shape)``: read one value of ``shape`` from the infeed queue.
    Token-less infeeds of one builder are chained in program order through the previous
    infeed's token (as XLA does); returns the data."""
    b = _builder("Infeed", builder)
    shape = _feed_shape(shape, "Infeed")
    token = _infeed_token.get(b)
    if token is None:
        token = _create_token(b)
    infeed = b.emit("infeed", [token], {"infeed_config": config},
                    shape=Shape.tuple([shape, Shape.token()]), op_name="Infeed")
    _infeed_token[b] = _get_tuple_element(infeed, 1)
    return b.emit("get-tuple-element", [infeed], {"index": 0}, shape=shape, op_name="Infeed")


def InfeedWithToken(token: XlaOp, shape: Shape, config: str = "") -> XlaOp:
    """``ops.InfeedWithToken(tok, shape)``: infeed ordered after ``tok``; returns
    (data, token)."""
    b = check_same_builder("InfeedWithToken", [token])
    shape = _feed_shape(shape, "InfeedWithToken")
    return b.emit("infeed", [token], {"infeed_config": config},
                  shape=Shape.tuple([shape, Shape.token()]), op_name="InfeedWithToken")


def _check_outfeed(operand: XlaOp, shape_with_layout, op_name: str) -> Shape:
    shape = _feed_shape(shape_with_layout, op_name)
    if not operand.shape.compatible(shape):
        raise InvalidArgumentError(f"{op_name}: Outfeed shape {shape} must be compatible with "
                                   f"operand shape {operand.shape}")
    return shape


def Outfeed(operand: XlaOp, shape_with_layout: Shape, outfeed_config: str) -> None:
    """``ops.Outfeed(x, x.shape, "")``: send x to the host's outfeed queue. Token-less
    outfeeds of one builder are chained in program order; like XLA, this adds an empty
    tuple after the outfeed and returns nothing."""
    b = check_same_builder("Outfeed", [operand])
    shape = _check_outfeed(operand, shape_with_layout, "Outfeed")
    token = _outfeed_token.get(b)
    if token is None:
        token = _create_token(b)
    _outfeed_token[b] = b.emit("outfeed", [operand, token],
                               {"outfeed_shape": shape, "outfeed_config": outfeed_config},
                               op_name="Outfeed")
    _tuple(b, [])


def OutfeedWithToken(operand: XlaOp, token: XlaOp, shape_with_layout: Shape,
                     outfeed_config: str) -> XlaOp:
    """``ops.OutfeedWithToken(x, tok, x.shape, "")``: outfeed ordered after ``tok``;
    returns its token."""
    b = check_same_builder("OutfeedWithToken", [operand, token])
    shape = _check_outfeed(operand, shape_with_layout, "OutfeedWithToken")
    return b.emit("outfeed", [operand, token],
                  {"outfeed_shape": shape, "outfeed_config": outfeed_config},
                  op_name="OutfeedWithToken")

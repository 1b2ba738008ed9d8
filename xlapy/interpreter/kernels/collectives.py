"""Kernels of the collective, channel and feed ops: all-reduce, all-gather,
reduce-scatter, all-to-all, ragged-all-to-all, collective-permute, collective-broadcast
(and the -start/-done pairs), replica-id, partition-id, send/send-done, recv/recv-done,
infeed and outfeed.

Collectives resolve their participants (collectives_backend.collective_group /
permutation) and hand the values to the backend in ``ctx.options.collectives`` (default:
the single-device backend, where every collective over a group of one is the identity,
collective-permute copies on a (0,0) pair and gives zeros without a source, and a group
naming other replicas is an error pointing at the runtime).

Channels: ``send`` puts its data on ``ctx.options.channels[channel_id]`` (a queue.Queue,
created on first use) and ``recv-done`` takes it from there, blocking up to
``ctx.options.timeout`` seconds; ``recv``'s own tuple holds a zero-filled buffer (XLA's
buffer is only valid after recv-done). A runtime that pairs channels per sender and receiver
device (xlapy.runtime.channels.DeviceChannels) gives ``channels`` a ``queue_for(ctx, instr)``
method: it returns the queue of this device's end of the channel, or None when the
instruction has no peer on this device (send then drops its data, recv-done gives zeros). Host transfers (is_host_transfer=true) call
``ctx.options.host_send(channel_id, value)`` / ``ctx.options.host_recv(channel_id, shape)``
when given, else use the same channel queues. ``infeed`` reads one value from
``ctx.options.infeed`` (blocking with the timeout; an empty-tuple data shape reads
nothing) and ``outfeed`` puts its operand on ``ctx.options.outfeed``.
Imports the interpreter core and the collectives backend only.
"""

from __future__ import annotations

import queue

import numpy as np

from xlapy.errors import InvalidArgumentError
from xlapy.interpreter.collectives_backend import backend_of, collective_group, permutation
from xlapy.interpreter.evaluator import EvaluationError
from xlapy.interpreter.kernels.control_flow import zero_value
from xlapy.interpreter.registry import kernel
from xlapy.interpreter.values import TOKEN, to_value


def _pack(instr, results: list, shape=None):
    """One result as itself, several as a tuple (as the result shape says)."""
    shape = instr.shape if shape is None else shape
    if shape.is_tuple():
        return tuple(results)
    (only,) = results
    return only


def _check_count(instr, results, expected: int, what: str) -> list:
    if results is None or len(results) != expected:
        got = "None" if results is None else f"{len(results)} values"
        raise EvaluationError(f"{instr.opcode}: the collectives backend returned {got} for "
                              f"{what}, expected {expected} (instruction %{instr.name})")
    return list(results)


# -- all-reduce, all-gather, reduce-scatter ---------------------------------------------------------


def _all_reduce_values(ctx, instr, args) -> list:
    group = collective_group(ctx, instr)
    results = backend_of(ctx).all_reduce(ctx, instr, list(args), group, instr.attrs["to_apply"])
    return _check_count(instr, results, len(args), "all-reduce")


@kernel("all-reduce", "all-reduce-start")
def _all_reduce(ctx, instr, args):
    return _pack(instr, _all_reduce_values(ctx, instr, args))


@kernel("all-reduce-done", "all-gather-done", "collective-permute-done")
def _start_done(ctx, instr, args):
    (started,) = args
    if instr.opcode == "all-reduce-done":
        return started
    if not isinstance(started, tuple) or len(started) < 2:
        raise EvaluationError(f"{instr.opcode}: the operand must be the tuple of its -start "
                              f"(instruction %{instr.name})")
    return started[1]


def _all_gather_values(ctx, instr, args) -> list:
    group = collective_group(ctx, instr)
    results = backend_of(ctx).all_gather(ctx, instr, list(args), group,
                                         int(instr.attrs["dimensions"]))
    return _check_count(instr, results, len(args), "all-gather")


@kernel("all-gather")
def _all_gather(ctx, instr, args):
    return _pack(instr, _all_gather_values(ctx, instr, args))


@kernel("all-gather-start")
def _all_gather_start(ctx, instr, args):
    gathered = _all_gather_values(ctx, instr, args)
    operands = tuple(args) if len(args) > 1 else args[0]
    return (operands, _pack(instr, gathered, instr.shape.tuple_shapes[1]))


@kernel("reduce-scatter")
def _reduce_scatter(ctx, instr, args):
    group = collective_group(ctx, instr)
    results = backend_of(ctx).reduce_scatter(ctx, instr, list(args), group,
                                             int(instr.attrs["dimensions"]),
                                             instr.attrs["to_apply"])
    return _pack(instr, _check_count(instr, results, len(args), "reduce-scatter"))


# -- all-to-all ---------------------------------------------------------------------------------


@kernel("all-to-all")
def _all_to_all(ctx, instr, args):
    group = collective_group(ctx, instr)
    split = instr.attrs.get("dimensions")
    results = backend_of(ctx).all_to_all(ctx, instr, list(args), group,
                                         None if split is None else int(split))
    return _pack(instr, _check_count(instr, results, len(args), "all-to-all"))


@kernel("ragged-all-to-all")
def _ragged_all_to_all(ctx, instr, args):
    group = collective_group(ctx, instr)
    return backend_of(ctx).ragged_all_to_all(ctx, instr, list(args), group)


# -- collective-broadcast ---------------------------------------------------------------------------


def has_root(instr) -> int:
    return 1 if instr.attrs.get("has_dynamic_root") else 0


@kernel("collective-broadcast")
def _collective_broadcast(ctx, instr, args):
    group = collective_group(ctx, instr, allow_outside=True)
    if group is None:  # XLA: a replica in no group gets zeros
        return _pack(instr, [np.zeros_like(a) for a in args[:len(args) - has_root(instr)]])
    backend = backend_of(ctx)
    if not instr.attrs.get("has_dynamic_root"):
        results = backend.collective_broadcast(ctx, instr, list(args), group, 0)
        return _pack(instr, _check_count(instr, results, len(args), "collective-broadcast"))
    data, roots = list(args[:-1]), np.asarray(args[-1]).astype(np.int64)
    out = []
    for value, root in zip(data, roots):
        if not 0 <= root < group.size:
            raise EvaluationError(f"collective-broadcast: dynamic root {int(root)} is not a "
                                  f"rank of the group of {group.size} (instruction "
                                  f"%{instr.name})")
        out.extend(_check_count(instr, backend.collective_broadcast(ctx, instr, [value], group,
                                                                   int(root)), 1,
                                "collective-broadcast"))
    return _pack(instr, out)


# -- collective-permute -------------------------------------------------------------------------------


def _offsets_list(offsets) -> list[tuple[int, ...]]:
    """An offsets operand: a tuple of s32[] (one start) or a tuple of such tuples."""
    if offsets and all(isinstance(o, tuple) for o in offsets):
        return [tuple(int(np.asarray(i)) for i in o) for o in offsets]
    return [tuple(int(np.asarray(i)) for i in offsets)]


def _window(starts, sizes, dims):
    out = []
    for s, n, d in zip(starts, sizes, dims):
        s = min(max(s, 0), max(d - n, 0))
        out.append(slice(s, s + n))
    return tuple(out)


def _inplace_permute(ctx, instr, args):
    """collective-permute(input, output, input_offsets, output_offsets), slice_sizes=...:
    the slices of input at the input offsets are written into the receiver's output at
    the output offsets."""
    inp, out, in_off, out_off = args
    sizes = [tuple(s) for s in instr.attrs["slice_sizes"]]
    tuple_buffers = isinstance(inp, tuple)
    inputs = list(inp) if tuple_buffers else [inp]
    outputs = list(out) if tuple_buffers else [out]
    in_offs = list(in_off) if tuple_buffers else [in_off]
    out_offs = list(out_off) if tuple_buffers else [out_off]
    slices, places = [], []
    for buf, starts_in, result, starts_out in zip(inputs, in_offs, outputs, out_offs):
        for k, (si, so) in enumerate(zip(_offsets_list(starts_in), _offsets_list(starts_out))):
            size = sizes[k] if k < len(sizes) else sizes[-1]
            slices.append(np.ascontiguousarray(buf[_window(si, size, buf.shape)]))
            places.append((len(places), so, size))
    received = backend_of(ctx).collective_permute(ctx, instr, slices, permutation(ctx, instr))
    results = [np.array(o, copy=True) for o in outputs]
    if received is not None:
        received = _check_count(instr, received, len(slices), "collective-permute")
        index = 0
        for b, (starts_in, starts_out) in enumerate(zip(in_offs, out_offs)):
            for so in _offsets_list(starts_out):
                size = received[index].shape
                results[b][_window(so, size, results[b].shape)] = received[index]
                index += 1
    return tuple(results) if tuple_buffers else results[0]


def _permute_values(ctx, instr, args) -> list:
    received = backend_of(ctx).collective_permute(ctx, instr, list(args), permutation(ctx, instr))
    if received is None:
        return [np.zeros_like(a) for a in args]
    return _check_count(instr, received, len(args), "collective-permute")


@kernel("collective-permute")
def _collective_permute(ctx, instr, args):
    if instr.attrs.get("slice_sizes"):
        return _inplace_permute(ctx, instr, args)
    return _pack(instr, _permute_values(ctx, instr, args))


@kernel("collective-permute-start")
def _collective_permute_start(ctx, instr, args):
    contexts = tuple(zero_value(s) for s in instr.shape.tuple_shapes[2:])
    if instr.attrs.get("slice_sizes"):
        return (args[0], _inplace_permute(ctx, instr, args), *contexts)
    received = _permute_values(ctx, instr, args)
    if len(args) == 1:
        return (args[0], received[0], *contexts)
    return (tuple(args), tuple(received), *contexts)


# -- ids ----------------------------------------------------------------------------------------------


@kernel("replica-id")
def _replica_id(ctx, instr, args):
    return np.array(ctx.options.replica_id, dtype=np.uint32)


@kernel("partition-id")
def _partition_id(ctx, instr, args):
    return np.array(ctx.options.partition_id, dtype=np.uint32)


# -- send / recv ----------------------------------------------------------------------------------------


def channel_queue(ctx, channel_id, instr=None) -> queue.Queue | None:
    """The queue of a channel (created on first use; shared by send and recv), or the one
    ``ctx.options.channels.queue_for(ctx, instr)`` picks when the runtime provides it
    (None: no peer for this device)."""
    channels = ctx.options.channels
    if instr is not None and hasattr(channels, "queue_for"):
        return channels.queue_for(ctx, instr)
    return channels.setdefault(channel_id, queue.Queue())


def _get(ctx, instr, q: queue.Queue, what: str):
    timeout = ctx.options.timeout
    try:
        return q.get(timeout=timeout)
    except queue.Empty:
        waited = "forever" if timeout is None else f"{timeout:g} s"
        raise EvaluationError(f"{instr.opcode}: nothing arrived on {what} within {waited} "
                              f"(instruction %{instr.name} expects "
                              f"{instr.shape.tuple_shapes[0].to_string(print_layout=False)})"
                              ) from None


def _convert(instr, value, shape, what: str):
    try:
        return to_value(value, shape, f"{instr.opcode} %{instr.name}: the value from {what}")
    except InvalidArgumentError as e:
        raise EvaluationError(str(e)) from e


@kernel("send")
def _send(ctx, instr, args):
    data, _ = args
    channel_id = instr.attrs.get("channel_id")  # optional, as in XLA's parser
    host_send = ctx.options.host_send
    if instr.attrs["is_host_transfer"] and host_send is not None:
        host_send(channel_id, data)
    else:
        q = channel_queue(ctx, channel_id, instr)
        if q is not None:
            q.put(data)
    return (data, np.zeros((), np.uint32), TOKEN)


@kernel("send-done")
def _send_done(ctx, instr, args):
    return TOKEN


@kernel("recv")
def _recv(ctx, instr, args):
    return (zero_value(instr.shape.tuple_shapes[0]), np.zeros((), np.uint32), TOKEN)


@kernel("recv-done")
def _recv_done(ctx, instr, args):
    channel_id = instr.attrs.get("channel_id")  # optional, as in XLA's parser
    shape = instr.shape.tuple_shapes[0]
    host_recv = ctx.options.host_recv
    what = "the channel without channel_id" if channel_id is None else f"channel {channel_id}"
    if instr.attrs["is_host_transfer"] and host_recv is not None:
        value = host_recv(channel_id, shape)
        what = f"host_recv for {what}"
    else:
        q = channel_queue(ctx, channel_id, instr)
        if q is None:  # no sender pairs with this device (source-target pairs)
            return (zero_value(shape), TOKEN)
        value = _get(ctx, instr, q, what)
    return (_convert(instr, value, shape, what), TOKEN)


# -- infeed / outfeed ------------------------------------------------------------------------------------


@kernel("infeed")
def _infeed(ctx, instr, args):
    shape = instr.shape.tuple_shapes[0]
    if shape.is_tuple() and not shape.tuple_shapes:
        return ((), TOKEN)  # an empty tuple reads nothing (spec)
    value = _get(ctx, instr, ctx.options.infeed, "the infeed queue (EvalOptions.infeed)")
    return (_convert(instr, value, shape, "the infeed queue"), TOKEN)


@kernel("outfeed")
def _outfeed(ctx, instr, args):
    ctx.options.outfeed.put(args[0])
    return TOKEN

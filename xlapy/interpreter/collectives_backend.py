"""How collective instructions reach the other participants: the backend interface, the
resolution of replica groups into participating devices, and the single-device backend.

The collective kernels (xlapy/interpreter/kernels/collectives.py) never exchange data
themselves: they resolve *who* takes part (``collective_group`` / ``permutation``) and call
the backend found in ``ctx.options.collectives`` (default: ``SINGLE_DEVICE``). A runtime that
runs several replicas or partitions (threads, processes, MPI) plugs in its own
CollectivesBackend; each participant's evaluation calls the same method with its own values
and the backend rendezvouses them (``group.key`` identifies the instruction, ``group.rank``
the caller's position in the group).

Devices are (replica, partition) pairs. How an instruction's ``replica_groups`` name them
depends on its group mode (XLA's CollectiveOpGroupMode, from channel_id and
use_global_device_ids):
- cross_replica (no channel_id): replica ids; the partition is the caller's;
- cross_partition (channel_id, no use_global_device_ids attribute): partition ids;
- cross_replica_and_partition (channel_id, use_global_device_ids=false): replica ids, each
  with every partition;
- flattened_id (use_global_device_ids=true): ids replica * num_partitions + partition.
An empty ``replica_groups={}`` is one group of every replica (partition, device).

Imports the interpreter core and the collective attribute types only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from xlapy.hlo.attrs.collective import CollectiveOpGroupMode, get_collective_op_group_mode
from xlapy.interpreter.evaluator import EvaluationError

Mode = CollectiveOpGroupMode
Device = tuple[int, int]  # (replica_id, partition_id)

_ID_KIND = {
    Mode.CROSS_REPLICA: "replicas",
    Mode.CROSS_PARTITION: "partitions",
    Mode.CROSS_REPLICA_AND_PARTITION: "replicas",
    Mode.FLATTENED_ID: "devices",
}


@dataclass(frozen=True)
class CollectiveGroup:
    """The participants of one collective instruction, seen from the executing device.

    ``devices``: every member as (replica, partition), in group order (the order that
    all-gather concatenates and reduce-scatter/all-to-all split in); ``rank``: the caller's
    index in ``devices``; ``ids``: the members as the HLO names them (``id_kind``:
    "replicas", "partitions" or "devices" = flattened ids); ``key``: identifies the
    instruction for a rendezvous (opcode, channel_id, instruction name)."""

    opcode: str
    mode: CollectiveOpGroupMode
    devices: tuple[Device, ...]
    rank: int
    ids: tuple[int, ...]
    id_kind: str
    key: tuple

    @property
    def size(self) -> int:
        return len(self.devices)

    @property
    def me(self) -> Device:
        return self.devices[self.rank]


@dataclass(frozen=True)
class Permutation:
    """collective-permute's pairs, seen from the executing device: ``pairs`` as the HLO
    names them (replica ids without channel_id, partition ids with one), ``me`` the caller's
    id in that space, ``device_of(id)`` the (replica, partition) of an id."""

    opcode: str
    pairs: tuple[tuple[int, int], ...]
    me: int
    id_kind: str
    replica_id: int
    partition_id: int
    key: tuple

    def device_of(self, i: int) -> Device:
        if self.id_kind == "partitions":
            return (self.replica_id, i)
        return (i, self.partition_id)

    @property
    def source(self) -> int | None:
        """The id sending to the caller, if any."""
        for s, t in self.pairs:
            if t == self.me:
                return s
        return None

    @property
    def target(self) -> int | None:
        """The id the caller sends to, if any."""
        for s, t in self.pairs:
            if s == self.me:
                return t
        return None


def _counts(ctx) -> tuple[int, int]:
    module = ctx.module
    replicas = max(ctx.options.replica_count, module.replica_count if module else 1)
    partitions = max(ctx.options.num_partitions, module.num_partitions if module else 1)
    return replicas, partitions


def _mode(instr) -> Mode:
    attrs = instr.attrs
    return get_collective_op_group_mode(attrs.get("channel_id") is not None,
                                        attrs.get("use_global_device_ids"))


def collective_group(ctx, instr, allow_outside: bool = False) -> CollectiveGroup | None:
    """Resolve the instruction's replica groups to the group of the executing device.
    A device in no group is an error, or None with ``allow_outside`` (collective-broadcast
    gives such a device zeros)."""
    mode = _mode(instr)
    replicas, partitions = _counts(ctx)
    my_replica, my_partition = ctx.options.replica_id, ctx.options.partition_id
    groups_attr = instr.attrs["replica_groups"]
    groups = [tuple(g) for g in groups_attr.expand().groups]
    if mode is Mode.CROSS_PARTITION:
        mine = my_partition
        if not groups:
            groups = [tuple(range(partitions))]
    elif mode is Mode.FLATTENED_ID:
        mine = my_replica * partitions + my_partition
        if not groups:
            groups = [tuple(range(replicas * partitions))]
    else:
        mine = my_replica
        if not groups:
            groups = [tuple(range(replicas))]
    group = next((g for g in groups if mine in g), None)
    if group is None:
        if allow_outside:
            return None
        raise EvaluationError(
            f"{instr.opcode}: {_ID_KIND[mode][:-1]} {mine} is in no replica group of "
            f"replica_groups={groups_attr.to_text()} (instruction %{instr.name})")
    if mode is Mode.CROSS_REPLICA:
        devices = tuple((r, my_partition) for r in group)
    elif mode is Mode.CROSS_PARTITION:
        devices = tuple((my_replica, p) for p in group)
    elif mode is Mode.CROSS_REPLICA_AND_PARTITION:
        devices = tuple((r, p) for r in group for p in range(partitions))
    else:
        devices = tuple((i // partitions, i % partitions) for i in group)
    me = (my_replica, my_partition)
    key = (instr.opcode, instr.attrs.get("channel_id"), instr.name)
    return CollectiveGroup(instr.opcode, mode, devices, devices.index(me), group,
                           _ID_KIND[mode], key)


def permutation(ctx, instr) -> Permutation:
    """collective-permute's source-target pairs for the executing device (replica ids
    without channel_id, partition ids with one)."""
    cross_partition = instr.attrs.get("channel_id") is not None
    kind = "partitions" if cross_partition else "replicas"
    me = ctx.options.partition_id if cross_partition else ctx.options.replica_id
    pairs = tuple((int(s), int(t)) for s, t in instr.attrs["source_target_pairs"])
    key = (instr.opcode, instr.attrs.get("channel_id"), instr.name)
    return Permutation(instr.opcode, pairs, me, kind, ctx.options.replica_id,
                       ctx.options.partition_id, key)


def _ids_text(ids) -> str:
    return "{" + ",".join(str(i) for i in sorted(set(ids))) + "}"


def multi_device_error(opcode: str, kind: str, ids) -> EvaluationError:
    return EvaluationError(
        f"{opcode} needs {kind} {_ids_text(ids)}; run with the runtime (xlapy.Client) for "
        f"multi-replica execution")


class CollectivesBackend:
    """The interface a multi-device runtime implements. Every method is called by each
    participant with its own operand values (a list: one array per operand of the
    instruction) and returns this participant's results (a list of arrays of the result
    shapes). ``instr`` gives the attributes; ``ctx.call(computation, [a, b])`` evaluates a
    reducer on whole arrays (it is elementwise, so it combines many pairs at once)."""

    def all_reduce(self, ctx, instr, values: list, group: CollectiveGroup, reducer) -> list:
        """Combine the group's values elementwise with ``reducer`` (in group order);
        every member gets the result, in its operand's element type."""
        raise NotImplementedError

    def all_gather(self, ctx, instr, values: list, group: CollectiveGroup,
                   dimension: int) -> list:
        """Concatenate the members' values along ``dimension`` in group order."""
        raise NotImplementedError

    def reduce_scatter(self, ctx, instr, values: list, group: CollectiveGroup,
                       dimension: int, reducer) -> list:
        """All-reduce, then member ``rank`` keeps block ``rank`` of ``dimension`` split into
        ``group.size`` blocks."""
        raise NotImplementedError

    def all_to_all(self, ctx, instr, values: list, group: CollectiveGroup,
                   split_dimension: int | None) -> list:
        """Array form (``split_dimension``: one value): split it into ``group.size`` blocks
        along the dimension, send block j to member j, concatenate the received blocks
        along the same dimension in group order. Tuple form (None): value j goes to member
        j; the result is the tuple of the values received, in group order."""
        raise NotImplementedError

    def ragged_all_to_all(self, ctx, instr, values: list, group: CollectiveGroup):
        """values = [input, output, input_offsets, send_sizes, output_offsets, recv_sizes];
        for each member j (and each update u of a 2-D offsets array), the rows
        input[input_offsets[j][u]:+send_sizes[j][u]] are written into member j's output
        at output_offsets[j][u]. Returns the caller's updated output."""
        raise NotImplementedError

    def collective_permute(self, ctx, instr, values: list, perm: Permutation) -> list | None:
        """Send ``values`` to ``perm.target`` (if any) and return what ``perm.source``
        sent (None when no pair targets the caller: the kernel then gives zeros)."""
        raise NotImplementedError

    def collective_broadcast(self, ctx, instr, values: list, group: CollectiveGroup,
                             root: int) -> list:
        """Every member receives the values of member ``root`` (a rank in the group)."""
        raise NotImplementedError


class SingleDeviceCollectives(CollectivesBackend):
    """The collectives of a program running on one device (replica 0, partition 0 unless
    the options say otherwise): every group must be just the caller. A group of one makes
    each collective an identity: all-reduce applies the reducer to a single contribution
    (the value itself), all-gather and reduce-scatter have one shard, all-to-all keeps its
    one block, collective-broadcast's root is the caller. A group naming other devices
    raises an EvaluationError pointing at the runtime."""

    def _only_me(self, group: CollectiveGroup) -> None:
        if group.size != 1:
            raise multi_device_error(group.opcode, group.id_kind, group.ids)

    def all_reduce(self, ctx, instr, values, group, reducer):
        self._only_me(group)
        return list(values)

    def all_gather(self, ctx, instr, values, group, dimension):
        self._only_me(group)
        return list(values)

    def reduce_scatter(self, ctx, instr, values, group, dimension, reducer):
        self._only_me(group)
        return list(values)

    def all_to_all(self, ctx, instr, values, group, split_dimension):
        self._only_me(group)
        return list(values)

    def ragged_all_to_all(self, ctx, instr, values, group):
        self._only_me(group)
        return ragged_local_update(instr, values, rank=0, sources=[(0, values)])

    def collective_permute(self, ctx, instr, values, perm):
        named = {i for pair in perm.pairs for i in pair}
        if named - {perm.me}:
            raise multi_device_error(perm.opcode, perm.id_kind, named | {perm.me})
        return list(values) if perm.source == perm.me else None

    def collective_broadcast(self, ctx, instr, values, group, root):
        self._only_me(group)
        return list(values)


def ragged_local_update(instr, receiver_values: Sequence, rank: int,
                        sources: Sequence[tuple[int, Sequence]]):
    """The receiver's output of ragged-all-to-all: its ``output`` operand with, for each
    (sender rank, sender values) in ``sources``, the rows the sender addresses to ``rank``
    written at the sender's output offsets. Shared by every backend."""
    output = np.array(receiver_values[1], copy=True)
    for _sender, sender_values in sources:
        inp, _, in_off, sizes, out_off, _ = sender_values
        in_off, sizes, out_off = (np.asarray(a).astype(np.int64) for a in (in_off, sizes, out_off))
        updates = [(in_off[rank], sizes[rank], out_off[rank])]
        if in_off.ndim == 2:
            updates = list(zip(in_off[rank], sizes[rank], out_off[rank]))
        for start, size, dest in updates:
            start, size, dest = int(start), int(size), int(dest)
            if size < 0 or start < 0 or dest < 0 or start + size > inp.shape[0] \
                    or dest + size > output.shape[0]:
                raise EvaluationError(
                    f"ragged-all-to-all: the update of {size} rows from input offset {start} "
                    f"to output offset {dest} is out of bounds (input has {inp.shape[0]} "
                    f"rows, output {output.shape[0]}; instruction %{instr.name})")
            output[dest:dest + size] = inp[start:start + size]
    return output


SINGLE_DEVICE = SingleDeviceCollectives()


def backend_of(ctx) -> Any:
    """The collectives backend of this evaluation (``ctx.options.collectives`` or the
    single-device one)."""
    backend = ctx.options.collectives
    return SINGLE_DEVICE if backend is None else backend


__all__ = [
    "SINGLE_DEVICE",
    "CollectiveGroup",
    "CollectivesBackend",
    "Permutation",
    "SingleDeviceCollectives",
    "backend_of",
    "collective_group",
    "multi_device_error",
    "permutation",
    "ragged_local_update",
]

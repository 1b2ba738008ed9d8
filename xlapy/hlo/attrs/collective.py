"""Attributes of the collective and channel instructions: replica groups, source-target
pairs, channel handles and ids, the single-dimension ``dimensions={d}`` of all-gather /
reduce-scatter / all-to-all, and the group-formation mode these imply.

Owns the value types (frozen, hashable) with XLA's names and their text syntax:

    replica_groups={{0,1},{2,3}}             CollectiveDeviceList (explicit groups)
    replica_groups={}                        no groups: every participant in one group
    replica_groups=[2,2]<=[4]                IotaReplicaGroupList: groups of an iota
    replica_groups=[2,2]<=[2,2]T(1,0)        ... reshaped to [2,2], transposed by (1,0)
    replica_groups=mesh['x'=2,'y'=2] {'x'}   MeshAxesReplicaGroupList (xlapy.hlo.attrs.mesh)
    source_target_pairs={{0,1},{1,2}}        SourceTargetPairsKind
    slice_sizes={{128,32}}                   IntListListKind (in-place collective-permute)
    dimensions={0}                           SingleDimensionKind (an int)
    has_dynamic_root=false                   AlwaysPrintedBoolKind

XLA prints ``replica_groups`` on every collective, even when empty, and the iota form
exactly when the groups were given that way (after canonicalising its reshape/transpose,
see IotaReplicaGroupList). Kinds that XLA prints even at their default value declare
``always_printed = True``, which the printer honours.

Also: ChannelHandle/ChannelType (xla_data.proto), ReplicaGroup, and
``get_collective_op_group_mode`` (xla/hlo/ir/collective_op_group_mode.cc).
Imports only the shape layer, numpy and the attribute base classes.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from math import prod
from typing import Any

import numpy as np

from xlapy.errors import InvalidArgumentError
from xlapy.hlo.attrs import (
    AttrKind,
    AttrSpec,
    BoolKind,
    IntKind,
    check_int,
    check_int_list,
    check_int_tuples,
    check_sequence,
    is_int,
    read_int_list,
)
from xlapy.shape.text import Scanner

__all__ = [
    "REPLICA_GROUPS",
    "SINGLE_DIMENSION",
    "SLICE_SIZES",
    "SOURCE_TARGET_PAIRS",
    "AlwaysPrintedBoolKind",
    "ChannelHandle",
    "ChannelType",
    "CollectiveDeviceList",
    "CollectiveOpGroupMode",
    "IntListListKind",
    "IotaReplicaGroupList",
    "ReplicaGroup",
    "ReplicaGroupsKind",
    "SingleDimensionKind",
    "SourceTargetPairsKind",
    "canonicalize_iota",
    "channel_id_spec",
    "constrain_layout_spec",
    "get_collective_op_group_mode",
    "is_host_transfer_spec",
    "read_replica_groups",
    "replica_groups_from",
    "replica_groups_spec",
    "use_global_device_ids_spec",
]


def _ints_text(values: Iterable[int]) -> str:
    return "{" + ",".join(str(v) for v in values) + "}"


# -- replica groups ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ReplicaGroup:
    """One group of participants (xla_data.proto's ReplicaGroup): ``ReplicaGroup([0, 2])``."""

    replica_ids: tuple[int, ...] = ()

    def __post_init__(self):
        ids = check_int_list(self.replica_ids, "ReplicaGroup: replica_ids")
        object.__setattr__(self, "replica_ids", ids)

    def __len__(self) -> int:
        return len(self.replica_ids)


@dataclass(frozen=True)
class CollectiveDeviceList:
    """Replica groups listed explicitly: ``{{0,1},{2,3}}``; no groups (``{}``) means one
    group of every participant.

    >>> CollectiveDeviceList(((0, 1), (2, 3))).to_text()
    '{{0,1},{2,3}}'
    """

    groups: tuple[tuple[int, ...], ...] = ()

    def __post_init__(self):
        groups = []
        where = "CollectiveDeviceList: groups"
        for i, g in enumerate(check_sequence(self.groups, where, "a list of replica groups")):
            if isinstance(g, ReplicaGroup):
                groups.append(g.replica_ids)
                continue
            groups.append(check_int_list(g, f"{where}[{i}] (a replica group)"))
        object.__setattr__(self, "groups", tuple(groups))

    @property
    def num_replica_groups(self) -> int:
        return len(self.groups)

    @property
    def num_devices_per_group(self) -> int:
        """Size of the first group (0 without groups), as XLA's num_devices_per_group."""
        return len(self.groups[0]) if self.groups else 0

    def replica_groups(self) -> tuple[ReplicaGroup, ...]:
        return tuple(ReplicaGroup(g) for g in self.groups)

    def flattened_replica_groups(self) -> tuple[tuple[int, ...], ...]:
        return self.groups

    def expand(self) -> CollectiveDeviceList:
        """The explicit list (this list itself)."""
        return self

    def is_empty(self) -> bool:
        return not self.groups

    def to_text(self) -> str:
        return "{" + ",".join(_ints_text(g) for g in self.groups) + "}"

    def __str__(self) -> str:
        return self.to_text()


@dataclass(frozen=True, init=False)
class IotaReplicaGroupList:
    """Replica groups given as ``[num_replica_groups,num_devices_per_group]<=[reshape_dims]
    T(transpose_perm)``: the numbers 0..N-1 reshaped to ``reshape_dims``, transposed by
    ``transpose_perm``, then read row by row into ``num_replica_groups`` groups of
    ``num_devices_per_group``. Like XLA, the reshape/transpose is canonicalised on
    construction (size-1 dimensions dropped, runs of dimensions kept in order merged), so
    ``[2,2]<=[2,2]T(0,1)`` is ``[2,2]<=[4]``.

    >>> IotaReplicaGroupList(2, 2, (2, 2), (1, 0)).flattened_replica_groups()
    ((0, 2), (1, 3))
    """

    num_replica_groups: int
    num_devices_per_group: int
    reshape_dims: tuple[int, ...]
    transpose_perm: tuple[int, ...]

    def __init__(self, num_replica_groups: int, num_devices_per_group: int,
                 reshape_dims: Sequence[int] | None = None,
                 transpose_perm: Sequence[int] | None = None):
        n = check_int(num_replica_groups, "IotaReplicaGroupList: num_replica_groups", 1)
        m = check_int(num_devices_per_group, "IotaReplicaGroupList: num_devices_per_group", 1)
        dims = (n * m,) if reshape_dims is None else check_int_list(
            reshape_dims, "IotaReplicaGroupList: reshape_dims")
        perm = tuple(range(len(dims))) if transpose_perm is None else check_int_list(
            transpose_perm, "IotaReplicaGroupList: transpose_perm")
        problem = _iota_problem(n, m, dims, perm)
        if problem:
            raise InvalidArgumentError(f"IotaReplicaGroupList: {problem}")
        dims, perm = canonicalize_iota(dims, perm)
        set_ = object.__setattr__
        set_(self, "num_replica_groups", n)
        set_(self, "num_devices_per_group", m)
        set_(self, "reshape_dims", dims)
        set_(self, "transpose_perm", perm)

    def to_array(self) -> np.ndarray:
        """The ``[num_replica_groups, num_devices_per_group]`` array of ids."""
        ids = np.arange(prod(self.reshape_dims), dtype=np.int64).reshape(self.reshape_dims)
        return ids.transpose(self.transpose_perm).reshape(
            self.num_replica_groups, self.num_devices_per_group)

    def flattened_replica_groups(self) -> tuple[tuple[int, ...], ...]:
        return tuple(tuple(int(v) for v in row) for row in self.to_array())

    def replica_groups(self) -> tuple[ReplicaGroup, ...]:
        return tuple(ReplicaGroup(g) for g in self.flattened_replica_groups())

    def expand(self) -> CollectiveDeviceList:
        """The same groups as an explicit list (XLA's ConvertToV1CollectiveDeviceList)."""
        return CollectiveDeviceList(self.flattened_replica_groups())

    def is_empty(self) -> bool:
        return False

    def to_text(self) -> str:
        text = f"[{self.num_replica_groups},{self.num_devices_per_group}]<=["
        text += ",".join(str(d) for d in self.reshape_dims) + "]"
        if len(self.reshape_dims) > 1:
            text += "T(" + ",".join(str(p) for p in self.transpose_perm) + ")"
        return text

    def __str__(self) -> str:
        return self.to_text()


def _iota_problem(n: int, m: int, dims: tuple, perm: tuple) -> str | None:
    if not dims:
        return "expected non-empty iota_reshape_dims"
    if not all(d >= 1 for d in dims):
        return f"iota reshape dimensions must be integers >= 1, got [{','.join(map(str, dims))}]"
    if len(perm) != len(dims) or sorted(perm) != list(range(len(dims))):
        return (f"the transpose T({','.join(map(str, perm))}) must be a permutation of "
                f"0..{len(dims) - 1}")
    if prod(dims) != n * m:
        return (f"collective device list iota size {prod(dims)} does not match the tile "
                f"assignment dimensions product {n * m}")
    return None


def canonicalize_iota(dims: tuple[int, ...], perm: tuple[int, ...]):
    """XLA's CanonicalizeIotaDims: repeatedly drop size-1 dimensions and merge runs of
    dimensions that the transpose keeps adjacent and in order.

    ``[3,4,5]T(1,2,0)`` becomes ``[3,20]T(1,0)``; ``[3,4,5]T(0,1,2)`` becomes ``[60]``.
    """
    dims, perm = list(dims), list(perm)
    if len(dims) <= 1:
        return tuple(dims), tuple(perm)
    while True:
        keep = [i for i, d in enumerate(dims) if d != 1]
        if len(keep) != len(dims):
            new_index = {old: new for new, old in enumerate(keep)}
            perm = [new_index[p] for p in perm if p in new_index]
            dims = [dims[i] for i in keep]
        changed = False
        base = 0
        for i in range(1, len(dims)):
            # perm[base..i] reads dims perm[base], perm[base]+1, ...: one merged dimension.
            if perm[base] + (i - base) == perm[i]:
                dims[perm[base]] *= dims[perm[i]]
                dims[perm[i]] = 1
                changed = True
            else:
                base = i
        if not changed:
            break
    if not dims:
        dims, perm = [1], [0]
    return tuple(dims), tuple(perm)


ReplicaGroupList = CollectiveDeviceList | IotaReplicaGroupList


def replica_groups_from(value: Any, where: str = "replica_groups") -> ReplicaGroupList:
    """Normalise what users pass as replica groups: a CollectiveDeviceList, an
    IotaReplicaGroupList, a list of ReplicaGroup, a list of lists of ids, or () / None."""
    from xlapy.hlo.attrs.mesh import MeshAxesReplicaGroupList

    if isinstance(value, (CollectiveDeviceList, IotaReplicaGroupList, MeshAxesReplicaGroupList)):
        return value
    if value is None:
        return CollectiveDeviceList()
    if isinstance(value, str):
        sc = Scanner(value, "replica_groups")
        groups = read_replica_groups(sc)
        if not sc.at_end():
            sc.error(f"extra text after replica groups: {sc.describe_next()}")
        return groups
    try:
        items = list(value)
    except TypeError:
        raise InvalidArgumentError(
            f"{where} must be a list of replica groups (lists of ids), got {value!r}") from None
    try:
        return CollectiveDeviceList(tuple(items))
    except InvalidArgumentError as e:
        raise InvalidArgumentError(f"{where}: {e}") from None


def read_replica_groups(sc: Scanner) -> ReplicaGroupList:
    """XLA's ParseCollectiveDeviceListBase: ``{{..},{..}}`` or ``[n,m]<=[dims]T(perm)``."""
    sc.skip()
    start = sc.pos
    if sc.peek() == "{":
        groups = []
        sc.expect("{", "to start replica groups")
        if not sc.eat("}"):
            while True:
                if sc.peek() != "{":
                    sc.error(f"expected '{{' to start a replica group, found {sc.describe_next()}")
                groups.append(read_int_list(sc))
                if sc.eat("}"):
                    break
                sc.expect(",", "or '}' in replica groups")
        return CollectiveDeviceList(tuple(groups))
    if sc.peek_ident() in ("mesh", "maximal_mesh"):  # MeshAxesReplicaGroupList
        from xlapy.hlo.attrs.mesh import read_mesh_replica_groups

        return read_mesh_replica_groups(sc)
    if sc.peek() != "[":
        sc.error("expected replica groups: {{0,1},{2,3}}, {} or the iota form [2,2]<=[4], "
                 f"found {sc.describe_next()}")
    tile = list(read_int_list(sc, "[", "]"))
    if not sc.eat("<="):
        sc.error("expected '<=' after the replica group dimensions (iota form [n,m]<=[...]): "
                 "an iota replica group list has no explicit device list")
    dims_pos = sc.pos
    sc.skip()
    dims_pos = sc.pos
    reshape = list(read_int_list(sc, "[", "]"))
    if not reshape:
        sc.error("expected non-empty iota_reshape_dims", dims_pos)
    if len(reshape) == 1:
        perm = [0]
    else:
        if sc.peek_ident() != "T":
            sc.error(f"expected 'T(' to start the iota transpose permutation, found "
                     f"{sc.describe_next()}")
        sc.read_ident()
        perm_pos = sc.pos
        perm = list(read_int_list(sc, "(", ")"))
        for p in perm:
            if not 0 <= p < len(reshape):
                sc.error(f"Out of range iota minor_to_major value {p}, expecting value in "
                         f"range [0, {len(reshape)})", perm_pos)
    if len(tile) != 2:
        sc.error(f"expected 2 dimensions [num_replica_groups,num_devices_per_group] for an iota "
                 f"replica group list, got [{','.join(map(str, tile))}]", start)
    if any(d < 1 for d in tile):
        sc.error(f"replica group dimensions must be >= 1, got [{','.join(map(str, tile))}]", start)
    problem = _iota_problem(tile[0], tile[1], tuple(reshape), tuple(perm))
    if problem:
        sc.error(problem, dims_pos)
    return IotaReplicaGroupList(tile[0], tile[1], reshape, perm)


class ReplicaGroupsKind(AttrKind):
    """``replica_groups=``: printed on every collective, even with no groups (``{}``)."""

    name = "replica groups"
    always_printed = True  # the printer shows it even at its default

    def check(self, value, where):
        return replica_groups_from(value, where)

    def to_text(self, value) -> str:
        return value.to_text()

    def read(self, sc, ctx=None):
        return read_replica_groups(sc)


# -- other collective attributes --------------------------------------------------------------


class IntListListKind(AttrKind):
    """``{{1,2},{3}}``: a tuple of tuples of ints (slice_sizes of collective-permute)."""

    name = "list of integer lists"

    def check(self, value, where):
        return check_int_tuples(value, where, None, "integer lists")

    def to_text(self, value) -> str:
        return "{" + ",".join(_ints_text(r) for r in value) + "}"

    def read(self, sc, ctx=None):
        return read_int_list_list(sc)


def read_int_list_list(sc: Scanner) -> tuple[tuple[int, ...], ...]:
    sc.expect("{", "to start a list of integer lists")
    rows = []
    if sc.eat("}"):
        return ()
    while True:
        if sc.peek() != "{":
            sc.error(f"expected '{{' to start an integer list, found {sc.describe_next()}")
        rows.append(read_int_list(sc))
        if sc.eat("}"):
            return tuple(rows)
        sc.expect(",", "or '}' in a list of integer lists")


class SourceTargetPairsKind(IntListListKind):
    """``source_target_pairs={{0,1},{1,2}}``: (source, target) id pairs."""

    name = "source-target pairs"

    def check(self, value, where):
        return check_int_tuples(value, where, (2,), "(source, target) pairs")

    def read(self, sc, ctx=None):
        sc.skip()
        start = sc.pos
        pairs = read_int_list_list(sc)
        for p in pairs:
            if len(p) != 2:
                sc.error(f"expects 'source_target_pairs=' to be a list of pairs, got "
                         f"{_ints_text(p)}", start)
        return pairs


class SingleDimensionKind(AttrKind):
    """``dimensions={d}`` of all-gather, reduce-scatter and all-to-all: exactly one
    dimension number; the value is the int ``d``."""

    name = "single dimension"

    def check(self, value, where):
        if is_int(value):
            return check_int(value, where)
        try:
            items = tuple(value)
        except TypeError:
            items = None
        if items is not None and len(items) == 1 and is_int(items[0]):
            return check_int(items[0], where)
        raise InvalidArgumentError(f"{where} must be one dimension number, got {value!r}")

    def to_text(self, value) -> str:
        return "{" + str(value) + "}"

    def read(self, sc, ctx=None):
        sc.skip()
        start = sc.pos
        dims = read_int_list(sc)
        if len(dims) != 1:
            sc.error(f"expected exactly one dimension, e.g. dimensions={{0}}, got "
                     f"{_ints_text(dims)}", start)
        return dims[0]


class AlwaysPrintedBoolKind(BoolKind):
    """A boolean XLA prints whatever its value (``has_dynamic_root=false``)."""

    always_printed = True


REPLICA_GROUPS = ReplicaGroupsKind()
SOURCE_TARGET_PAIRS = SourceTargetPairsKind()
SLICE_SIZES = IntListListKind()
SINGLE_DIMENSION = SingleDimensionKind()


def channel_id_spec() -> AttrSpec:
    return AttrSpec("channel_id", IntKind(), default=None,
                    doc="only instructions with the same channel id communicate; omitted: none")


def replica_groups_spec() -> AttrSpec:
    return AttrSpec("replica_groups", REPLICA_GROUPS, default=CollectiveDeviceList(),
                    doc="groups of participating ids; {} means one group of all")


def constrain_layout_spec() -> AttrSpec:
    return AttrSpec("constrain_layout", BoolKind(), default=False,
                    doc="the result layout was fixed by the user")


def use_global_device_ids_spec() -> AttrSpec:
    return AttrSpec("use_global_device_ids", BoolKind(), default=False,
                    doc="replica groups hold flattened (replica, partition) ids; needs channel_id")


def is_host_transfer_spec() -> AttrSpec:
    return AttrSpec("is_host_transfer", BoolKind(), default=False,
                    doc="the transfer is between device and host")


# -- channels and group modes -----------------------------------------------------------------


class ChannelType(enum.IntEnum):
    """ChannelHandle.ChannelType of xla_data.proto."""

    CHANNEL_TYPE_INVALID = 0
    DEVICE_TO_DEVICE = 1
    DEVICE_TO_HOST = 2
    HOST_TO_DEVICE = 3


@dataclass(frozen=True)
class ChannelHandle:
    """A channel for send/recv and cross-module collectives: ``ChannelHandle(1)``.

    ``handle`` is the channel id written as ``channel_id=`` in HLO text."""

    handle: int
    type: ChannelType = ChannelType.DEVICE_TO_DEVICE

    def __post_init__(self):
        object.__setattr__(self, "handle", check_int(self.handle, "ChannelHandle: handle"))
        try:
            kind = ChannelType[self.type] if isinstance(self.type, str) else ChannelType(self.type)
            object.__setattr__(self, "type", kind)
        except (KeyError, ValueError):
            raise InvalidArgumentError(
                f"ChannelHandle: unknown channel type {self.type!r}") from None


class CollectiveOpGroupMode(enum.Enum):
    """How replica_groups ids are read (XLA's CollectiveOpGroupMode)."""

    CROSS_REPLICA = "cross_replica"
    CROSS_PARTITION = "cross_partition"
    CROSS_REPLICA_AND_PARTITION = "cross_replica_and_partition"
    FLATTENED_ID = "flattened_id"


def get_collective_op_group_mode(has_channel_id: bool,
                                 use_global_device_ids: bool | None) -> CollectiveOpGroupMode:
    """The group mode implied by the presence of a channel id and by
    use_global_device_ids (None for ops without that attribute: all-to-all,
    collective-permute, collective-broadcast, ragged-all-to-all)."""
    if not has_channel_id:
        if use_global_device_ids:
            raise InvalidArgumentError("Cannot have use_global_device_ids=true without channel_id")
        return CollectiveOpGroupMode.CROSS_REPLICA
    if use_global_device_ids is None:
        return CollectiveOpGroupMode.CROSS_PARTITION
    if not use_global_device_ids:
        return CollectiveOpGroupMode.CROSS_REPLICA_AND_PARTITION
    return CollectiveOpGroupMode.FLATTENED_ID

"""The SPMD partitioner's building blocks: partitioned values, the per-computation builder,
partition-id based offsets, masking of padded shards, and the collectives it emits.

- ``PValue``: one value of the original program on every device: ``hlo`` (the per-device
  instruction), ``shape`` (the original, global shape), ``sharding`` and its device map.
  A dimension of size n tiled t ways has ``ceil(n/t)`` elements per device; the last
  shards may hold padding past n (XLA's PartitionedHlo), whose content is undefined until
  ``mask`` replaces it.
- ``Builder``: adds per-device instructions to a new computation (through
  ``make_instruction``, so every shape rule checks what the partitioner builds), makes
  constants, ``partition-id`` and per-device offset tables (a constant indexed by the
  partition id).
- Collectives as XLA's default SPMDCollectiveOpsCreator emits them: all-reduce,
  all-gather and reduce-scatter with a channel id, ``use_global_device_ids=true`` and the
  partition groups expanded over replicas (global id = replica * partitions + partition);
  all-to-all and collective-permute with a channel id over partition ids. Channel ids
  count up from one past the largest in the module (hlo_query::NextChannelId). Replica
  groups are written in the iota form when they are one, else listed.

Imports the HLO layer and xlapy.opdefs.make_instruction.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

import numpy as np

from xlapy.errors import XlaError
from xlapy.hlo.attrs.collective import CollectiveDeviceList, IotaReplicaGroupList
from xlapy.hlo.attrs.sharding import HloSharding
from xlapy.hlo.ir import Computation, Instruction, Module, NameUniquer
from xlapy.passes.spmd.device_map import DeviceMap, _factorisations, device_map, to_sharding
from xlapy.shape import PrimitiveType, Shape
from xlapy.shape.literal import Literal

S32 = PrimitiveType.S32


class SpmdError(XlaError):
    """The partitioner cannot partition an instruction; the message names it."""


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(eq=False)
class PValue:
    """A partitioned (non-tuple) value. ``map`` is the sharding's device map."""

    hlo: Instruction
    shape: Shape
    sharding: HloSharding
    map: DeviceMap

    @property
    def rank(self) -> int:
        return len(self.shape.dimensions)

    def local_dims(self) -> tuple[int, ...]:
        return local_dims(self.shape, self.map)


@dataclass(eq=False)
class PTuple:
    """A partitioned tuple value: its elements and the per-device tuple instruction."""

    hlo: Instruction
    shape: Shape
    elements: list

    @property
    def sharding(self) -> HloSharding:
        return HloSharding.tuple_([_leaf_sharding(e) for e in _leaves(self)])


def _leaves(value) -> list:
    if isinstance(value, PTuple):
        return [leaf for e in value.elements for leaf in _leaves(e)]
    return [value]


def _leaf_sharding(v) -> HloSharding:
    return v.sharding


def local_dims(shape: Shape, m: DeviceMap) -> tuple[int, ...]:
    return tuple(ceil_div(d, t) for d, t in zip(shape.dimensions, m.tiles))


def local_shape(shape: Shape, m: DeviceMap) -> Shape:
    if not shape.is_array():
        return shape
    return Shape.array(shape.element_type, local_dims(shape, m))


class Context:
    """What one partitioning run shares: device counts, channel ids, the module."""

    def __init__(self, module: Module, num_partitions: int, num_replicas: int = 1):
        self.module = module
        self.n = num_partitions
        self.replicas = num_replicas
        self.next_channel = _next_channel_id(module)
        self.new_computations: list[Computation] = []
        # one namespace for the instructions of every computation the partitioner builds
        # (HLO instruction names are unique module-wide)
        self.uniquer = NameUniquer()
        self._reducers: dict[tuple, Computation] = {}

    def channel(self) -> int:
        c = self.next_channel
        self.next_channel += 1
        return c

    def map_of(self, sharding: HloSharding, shape: Shape) -> DeviceMap:
        rank = len(shape.dimensions) if shape.is_array() else 0
        try:
            return device_map(sharding, rank, self.n)
        except ValueError as e:
            raise SpmdError(str(e)) from None

    def reducer(self, opcode: str, element_type: PrimitiveType) -> Computation:
        """A scalar ``opcode`` computation (add, maximum, ...) for collectives."""
        key = (opcode, element_type)
        comp = self._reducers.get(key)
        if comp is None:
            from xlapy.opdefs import make_instruction

            comp = Computation(self.uniquer.get_unique_name(f"{opcode}.reducer"))
            comp._uniquer = self.uniquer
            scalar = Shape.scalar(element_type)
            a = comp.add_instruction(make_instruction("parameter", [], {"parameter_number": 0},
                                                      shape=scalar, name="x"))
            b = comp.add_instruction(make_instruction("parameter", [], {"parameter_number": 1},
                                                      shape=scalar, name="y"))
            comp.root = comp.add_instruction(make_instruction(opcode, [a, b], {}, name=opcode))
            self.new_computations.append(comp)
            self._reducers[key] = comp
        return comp


def _next_channel_id(module: Module) -> int:
    top = 0
    for comp in module.computations:
        for instr in comp.instructions:
            cid = instr.attrs.get("channel_id") if instr.attrs is not None else None
            if isinstance(cid, int):
                top = max(top, cid)
    return top + 1


class Builder:
    """Adds the per-device instructions of one computation."""

    def __init__(self, ctx: Context, comp: Computation):
        self.ctx = ctx
        self.comp = comp
        self._pid: Instruction | None = None
        self._tables: dict[tuple, Instruction] = {}
        self.origin: Instruction | None = None  # the instruction being partitioned

    @property
    def n(self) -> int:
        return self.ctx.n

    def add(self, opcode: str, operands, attrs=None, shape: Shape | None = None,
            name: str | None = None) -> Instruction:
        from xlapy.opdefs import make_instruction

        origin = self.origin
        if name is None:
            name = origin.name if origin is not None and opcode == origin.opcode else opcode
        try:
            instr = make_instruction(opcode, list(operands), attrs or {}, shape=shape, name=name,
                                     metadata=origin.metadata if origin is not None else None)
        except XlaError as e:
            where = f" while partitioning %{origin.name}" if origin is not None else ""
            raise SpmdError(f"spmd-partition: cannot build {opcode}{where}: {e}") from e
        return self.comp.add_instruction(instr)

    # -- constants and offsets --

    def constant(self, array, element_type: PrimitiveType) -> Instruction:
        from xlapy.shape import dtypes

        array = np.asarray(array).astype(dtypes.to_dtype(element_type))
        shape = Shape.array(element_type, array.shape)
        return self.add("constant", [], {"literal": Literal.from_array(array, shape)},
                        shape=shape, name="constant")

    def scalar(self, value, element_type: PrimitiveType = S32) -> Instruction:
        return self.constant(np.array(value), element_type)

    def partition_id(self) -> Instruction:
        if self._pid is None:
            self._pid = self.add("partition-id", [], {}, name="partition-id")
        return self._pid

    def per_device(self, values, element_type: PrimitiveType = S32) -> Instruction:
        """A scalar holding ``values[partition]`` on each partition (a constant when they
        are all equal; else XLA's table: dynamic-slice of a constant by partition-id)."""
        values = tuple(int(v) for v in values)
        if len(set(values)) == 1:
            return self.scalar(values[0], element_type)
        key = (values, element_type)
        hit = self._tables.get(key)
        if hit is not None:
            return hit
        table = self.constant(np.array(values), element_type)
        pid = self.partition_id()
        one = Shape.array(element_type, (1,))
        sliced = self.add("dynamic-slice", [table, pid], {"dynamic_slice_sizes": (1,)},
                          shape=one)
        out = self.add("reshape", [sliced], {}, shape=Shape.scalar(element_type))
        self._tables[key] = out
        return out

    def zero(self, element_type: PrimitiveType) -> Instruction:
        return self.scalar(0, element_type)

    def broadcast_scalar(self, scalar: Instruction, dims) -> Instruction:
        shape = Shape.array(scalar.shape.element_type, tuple(dims))
        return self.add("broadcast", [scalar], {"dimensions": ()}, shape=shape)

    # -- collectives --

    def _global_groups(self, groups: list[list[int]]) -> list[list[int]]:
        """Partition groups as global device ids: one copy per replica (replica-major)."""
        p = self.n
        return [[r * p + d for d in g] for r in range(self.ctx.replicas) for g in groups]

    def all_reduce(self, x: Instruction, groups, reducer: Computation) -> Instruction:
        groups = _sorted_groups(groups)
        return self.add("all-reduce", [x], {
            "channel_id": self.ctx.channel(), "use_global_device_ids": True,
            "replica_groups": replica_groups(self._global_groups(groups)),
            "to_apply": reducer}, shape=x.shape, name="all-reduce")

    def all_gather(self, x: Instruction, dim: int, groups) -> Instruction:
        k = len(groups[0])
        dims = list(x.shape.dimensions)
        dims[dim] *= k
        return self.add("all-gather", [x], {
            "channel_id": self.ctx.channel(), "use_global_device_ids": True,
            "replica_groups": replica_groups(self._global_groups(_keep_order(groups))),
            "dimensions": dim}, shape=Shape.array(x.shape.element_type, dims), name="all-gather")

    def reduce_scatter(self, x: Instruction, dim: int, groups, reducer) -> Instruction:
        k = len(groups[0])
        dims = list(x.shape.dimensions)
        dims[dim] //= k
        return self.add("reduce-scatter", [x], {
            "channel_id": self.ctx.channel(), "use_global_device_ids": True,
            "replica_groups": replica_groups(self._global_groups(_keep_order(groups))),
            "dimensions": dim, "to_apply": reducer},
            shape=Shape.array(x.shape.element_type, dims), name="reduce-scatter")

    def all_to_all(self, x: Instruction, dim: int, groups) -> Instruction:
        return self.add("all-to-all", [x], {
            "channel_id": self.ctx.channel(),
            "replica_groups": replica_groups(_keep_order(groups)),
            "dimensions": dim}, shape=x.shape, name="all-to-all")

    def collective_permute(self, x: Instruction, pairs) -> Instruction:
        pairs = tuple(sorted((int(s), int(t)) for s, t in pairs))
        return self.add("collective-permute", [x], {
            "channel_id": self.ctx.channel(), "source_target_pairs": pairs},
            shape=x.shape, name="collective-permute")


def _sorted_groups(groups) -> list[list[int]]:
    return sorted([sorted(int(d) for d in g) for g in groups], key=lambda g: g[0])


def _keep_order(groups) -> list[list[int]]:
    """Groups whose member order matters (all-gather, all-to-all): sorted by first member
    only."""
    return sorted([[int(d) for d in g] for g in groups], key=lambda g: min(g))


def replica_groups(groups: list[list[int]]):
    """The groups in XLA's iota form when they are one (as the partitioner's
    IotaReplicaGroupList), else listed."""
    array = np.array(groups, np.int64)
    n = array.size
    flat = array.reshape(-1)
    if sorted(flat.tolist()) == list(range(n)):
        if np.array_equal(flat, np.arange(n)):
            return IotaReplicaGroupList(array.shape[0], array.shape[1])
        import itertools

        for dims in _factorisations(n, 4):
            for perm in itertools.permutations(range(len(dims))):
                if list(perm) != sorted(perm) and np.array_equal(
                        np.arange(n).reshape(dims).transpose(perm).reshape(-1), flat):
                    return IotaReplicaGroupList(array.shape[0], array.shape[1], dims, perm)
    return CollectiveDeviceList(tuple(tuple(g) for g in groups))


def pvalue(ctx: Context, hlo: Instruction, shape: Shape, sharding: HloSharding) -> PValue:
    return PValue(hlo, shape, sharding, ctx.map_of(sharding, shape))


def from_map(ctx: Context, hlo: Instruction, shape: Shape, m: DeviceMap) -> PValue:
    s = to_sharding(m)
    if s is None:
        raise SpmdError(f"spmd-partition: tiles {m.tiles} are held by different numbers of "
                        f"devices")
    return PValue(hlo, shape, s, m)


# -- offsets and masks ---------------------------------------------------------------------------


def tile_offsets(v_shape: Shape, m: DeviceMap, dim: int) -> list[int]:
    """The global start of each device's block along ``dim``."""
    size = ceil_div(v_shape.dimensions[dim], m.tiles[dim])
    return [int(m.index[d, dim]) * size for d in range(m.num_devices)]


def offset_of(b: Builder, shape: Shape, m: DeviceMap, dim: int) -> Instruction:
    return b.per_device(tile_offsets(shape, m, dim))


def is_padded(shape: Shape, m: DeviceMap, dim: int) -> bool:
    n, t = shape.dimensions[dim], m.tiles[dim]
    return t > 1 and n % t != 0


def mask(b: Builder, v: PValue, dims, fill: Instruction) -> Instruction:
    """``v``'s per-device value with the padding past the global size along ``dims``
    replaced by the scalar ``fill`` (XLA's PadWithValue)."""
    dims = [d for d in dims if is_padded(v.shape, v.map, d)]
    if not dims:
        return v.hlo
    local = v.local_dims()
    pred = None
    for d in dims:
        iota = b.add("iota", [], {"iota_dimension": d}, shape=Shape.array(S32, local),
                     name="iota")
        start = b.broadcast_scalar(offset_of(b, v.shape, v.map, d), local)
        pos = b.add("add", [iota, start], {})
        limit = b.broadcast_scalar(b.scalar(v.shape.dimensions[d]), local)
        ok = b.add("compare", [pos, limit], {"direction": "LT"})
        pred = ok if pred is None else b.add("and", [pred, ok], {})
    fill_b = b.broadcast_scalar(fill, local)
    return b.add("select", [pred, v.hlo, fill_b], {})


def pad_to(b: Builder, x: Instruction, dims, value: Instruction | None = None) -> Instruction:
    """``x`` padded at the high end to ``dims`` (with ``value``, zero by default)."""
    have = tuple(x.shape.dimensions)
    dims = tuple(dims)
    if have == dims:
        return x
    if value is None:
        value = b.zero(x.shape.element_type)
    config = [(0, w - h, 0) for h, w in zip(have, dims)]
    return b.add("pad", [x, value], {"padding": config},
                 shape=Shape.array(x.shape.element_type, dims))


def slice_to(b: Builder, x: Instruction, dims) -> Instruction:
    """The leading ``dims`` block of ``x``."""
    have = tuple(x.shape.dimensions)
    dims = tuple(dims)
    if have == dims:
        return x
    from xlapy.hlo.attrs.slicing import SliceRanges

    return b.add("slice", [x], {"slice": SliceRanges.of([0] * len(dims), dims)},
                 shape=Shape.array(x.shape.element_type, dims))


_COLLECTIVE_OPCODES = frozenset({"all-reduce", "all-gather", "all-to-all", "collective-permute",
                                 "reduce-scatter"})
_SHARDING_TARGETS = frozenset({"Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape"})


def removable(instr: Instruction) -> bool:
    """Whether an unused instruction can go: no side effect as XLA counts them (a collective
    only when its layout is constrained; the sharding custom calls only when marked)."""
    if instr.opcode in _COLLECTIVE_OPCODES:
        return not instr.attrs.get("constrain_layout")
    if instr.opcode == "custom-call":
        return instr.attrs.get("custom_call_target") in _SHARDING_TARGETS and \
            not instr.attrs.get("custom_call_has_side_effect")
    return not instr.has_side_effect


def remove_dead(comp: Computation) -> None:
    """Remove the unused, removable instructions of ``comp`` (parameters and the root stay),
    and those that become unused."""
    work = [i for i in comp.instructions]
    while work:
        instr = work.pop()
        if instr.parent is not comp or instr is comp.root or instr.users or \
                instr.opcode == "parameter" or instr.control_successors or not removable(instr):
            continue
        operands = list(instr.operands)
        comp.remove_instruction(instr)
        work.extend(o for o in operands if o.parent is comp)


def device_groups(m: DeviceMap, vary: list[int]) -> list[list[int]]:
    """Devices that differ only along the dimensions ``vary`` (same tile elsewhere, same
    manual group, same rank among the replicas of their tile), each group ordered by its
    tile index along ``vary`` (row-major): the members of a collective over ``vary``."""
    keep = [i for i in range(m.rank) if i not in vary]
    ranks = m.replica_rank()
    groups: dict[tuple, list[int]] = {}
    for d in range(m.num_devices):
        key = tuple(int(v) for v in m.index[d, keep]) + (int(m.group[d]), int(ranks[d]))
        groups.setdefault(key, []).append(d)
    out = []
    for members in groups.values():
        members.sort(key=lambda d: tuple(int(v) for v in m.index[d, vary]))
        out.append(members)
    return out


__all__ = ["Builder", "Context", "PTuple", "PValue", "SpmdError", "ceil_div", "device_groups",
           "from_map", "is_padded", "local_dims", "local_shape", "mask", "offset_of", "pad_to",
           "prod", "pvalue", "removable", "remove_dead", "replica_groups", "slice_to",
           "tile_offsets"]

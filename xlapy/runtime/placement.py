"""Which devices run an executable and whether its collectives fit them.

Device numbering (as XLA/PJRT):
- An executable runs ``replicas x partitions`` programs. XLA's default DeviceAssignment
  (ComputationPlacer::AssignDevices) puts replica r, partition p on device
  ``p * replicas + r``.
- PJRT's Execute takes and returns one entry per addressable device in *logical* order,
  replica-major: entry ``i = r * partitions + p`` (the same number as the "global device
  id" that collectives with ``use_global_device_ids=true`` name). ``Executable.execute``
  uses this order; with one partition, entry i is replica i on device i.

``check_collectives`` applies XLA's verifier rules for replica groups (CheckReplicaGroups)
against the counts an executable runs with, so a bad module fails at compile time with a
message naming the instruction, instead of deadlocking at run time.
Imports the HLO layer only.
"""

from __future__ import annotations

from xlapy.errors import InvalidArgumentError
from xlapy.hlo.attrs.collective import CollectiveOpGroupMode, get_collective_op_group_mode
from xlapy.hlo.ir import Instruction, Module

Mode = CollectiveOpGroupMode


def default_device_assignment(replicas: int, partitions: int) -> tuple[tuple[int, ...], ...]:
    """``assignment[r][p]``: the device id of replica r, partition p (XLA's default)."""
    return tuple(tuple(p * replicas + r for p in range(partitions)) for r in range(replicas))


def logical_ids(replicas: int, partitions: int) -> list[tuple[int, int]]:
    """(replica, partition) of each entry of execute's per-device lists."""
    return [(r, p) for r in range(replicas) for p in range(partitions)]


# Opcodes with replica_groups, and whether XLA requires groups of one size.
_UNIFORM = {
    "all-reduce": False, "all-reduce-start": False,
    "all-gather": True, "all-gather-start": True,
    "reduce-scatter": True, "all-to-all": True, "ragged-all-to-all": True,
    "collective-broadcast": True,
}
# Opcodes whose group mode ignores use_global_device_ids (XLA passes nullopt).
_NO_GLOBAL_IDS = {"all-to-all", "ragged-all-to-all", "collective-broadcast"}


def group_mode(instr: Instruction) -> Mode:
    use_global = None if instr.opcode in _NO_GLOBAL_IDS else instr.attrs.get(
        "use_global_device_ids")
    return get_collective_op_group_mode(instr.attrs.get("channel_id") is not None, use_global)


def _fail(instr: Instruction, message: str):
    raise InvalidArgumentError(f"{instr.opcode} %{instr.name}: {message}")


def _participants(mode: Mode, replicas: int, partitions: int) -> tuple[int, str]:
    if mode is Mode.CROSS_PARTITION:
        return partitions, "partitions"
    if mode is Mode.FLATTENED_ID:
        return replicas * partitions, "flattened device ids"
    return replicas, "replicas"


def _check_groups(instr: Instruction, replicas: int, partitions: int) -> int:
    """Check the replica groups; return the size of the caller's group (XLA's
    GetSubgroupSize) for the shape checks."""
    mode = group_mode(instr)
    attr = instr.attrs["replica_groups"]
    groups = [tuple(g) for g in attr.expand().groups]
    count, kind = _participants(mode, replicas, partitions)
    text = attr.to_text()
    if not groups:
        if mode is Mode.FLATTENED_ID:
            _fail(instr, "replica groups must be given with use_global_device_ids=true")
        size = count
    else:
        if any(not g for g in groups):
            _fail(instr, f"replica_groups={text} has an empty group")
        # collective-broadcast may leave devices out of every group (they get zeros).
        partial = instr.opcode == "collective-broadcast"
        total = count if partial else sum(len(g) for g in groups)
        seen: set[int] = set()
        for g in groups:
            for i in g:
                if i < 0 or i >= total:
                    _fail(instr, f"replica_groups={text}: {i} is out of range [0, {total})")
                if i in seen:
                    _fail(instr, f"replica_groups={text}: {i} is repeated")
                seen.add(i)
        if sum(len(g) for g in groups) != count and not partial:
            _fail(instr, f"replica_groups={text} name {total} {kind} ({mode.value} mode), but "
                  f"the executable runs {replicas} replica(s) x {partitions} partition(s), "
                  f"i.e. {count} {kind}")
        if _UNIFORM.get(instr.opcode, True) and len({len(g) for g in groups}) > 1:
            sizes = ", ".join(str(len(g)) for g in groups)
            _fail(instr, f"replica_groups={text} are uneven (sizes {sizes}); {instr.opcode} "
                  f"needs groups of one size")
        size = len(groups[0])
    if mode is Mode.CROSS_REPLICA_AND_PARTITION:
        size *= partitions
    return size


def _array_operand_dims(instr: Instruction) -> list[tuple[int, ...]]:
    return [tuple(o.shape.dimensions) for o in instr.operands if o.shape.is_array()]


def _result_arrays(instr: Instruction):
    shape = instr.shape
    if instr.opcode == "all-gather-start":
        shape = shape.tuple_shapes[1]
    if shape.is_tuple():
        return [s for s in shape.tuple_shapes if s.is_array()]
    return [shape]


def _check_shards(instr: Instruction, size: int) -> None:
    op = instr.opcode
    if op in ("all-gather", "all-gather-start", "reduce-scatter"):
        dim = int(instr.attrs["dimensions"])
        ins, outs = _array_operand_dims(instr), _result_arrays(instr)
        if not ins or not outs:
            return
        a, b = ins[0][dim], outs[0].dimensions[dim]
        big, small = (b, a) if op != "reduce-scatter" else (a, b)
        if small == 0 or big != small * size:
            _fail(instr, f"its shapes imply {big // small if small else '?'} shards along "
                  f"dimension {dim} ({list(ins[0])} -> {list(outs[0].dimensions)}), but each "
                  f"replica group has {size} members")
    elif op == "all-to-all":
        split = instr.attrs.get("dimensions")
        if split is None:
            if len(instr.operands) != size:
                _fail(instr, f"the tuple form has {len(instr.operands)} operands, but each "
                      f"replica group has {size} members")
        else:
            d = instr.operands[0].shape.dimensions[int(split)]
            if d % size:
                _fail(instr, f"dimension {int(split)} of size {d} does not split into {size} "
                      f"blocks (one per group member)")


def _check_permute(instr: Instruction, replicas: int, partitions: int) -> None:
    by_partition = instr.attrs.get("channel_id") is not None
    count, kind = (partitions, "partitions") if by_partition else (replicas, "replicas")
    for s, t in instr.attrs["source_target_pairs"]:
        for i in (s, t):
            if not 0 <= int(i) < count:
                _fail(instr, f"source_target_pairs name {kind[:-1]} {int(i)}, but the "
                      f"executable runs {count} {kind}")


def check_collectives(module: Module, replicas: int, partitions: int) -> None:
    """Raise InvalidArgumentError for a collective whose replica groups or source-target
    pairs do not fit ``replicas`` x ``partitions`` devices."""
    for comp in module.computations:
        for instr in comp.instructions:
            if instr.opcode in _UNIFORM:
                size = _check_groups(instr, replicas, partitions)
                _check_shards(instr, size)
            elif instr.opcode in ("collective-permute", "collective-permute-start"):
                _check_permute(instr, replicas, partitions)


__all__ = ["check_collectives", "default_device_assignment", "group_mode", "logical_ids"]

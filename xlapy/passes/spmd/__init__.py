"""SPMD partitioning: a module with shardings (GSPMD ``sharding=`` attributes, or Shardy's
``xla.sdy.*`` attributes as jax dumps them) becomes the program each partition runs.

    from xlapy.passes.spmd import partition
    partition(module, num_partitions=4)   # in place; also ``xlapy opt --passes=spmd-partition``

Modules: sdy_import.py (Shardy -> GSPMD), propagation.py (shardings for the rest),
device_map.py (shardings as device -> tile maps), core.py (partitioned values, builder,
collectives), reshard.py, windowed.py (halo exchange), partitioner.py (the visitor and the
custom calls), the handler modules handlers_shape.py, dot_conv.py, gather_scatter.py,
control_flow.py, and arrays.py (global arrays <-> per-device arrays, for running).
``SpmdPartition`` is the pass.
"""

from __future__ import annotations

from math import prod

from xlapy.hlo.attrs.sharding import HloSharding, parse_sharding
from xlapy.hlo.ir import Module
from xlapy.passes.pass_manager import HloPass, PassError
from xlapy.passes.spmd.core import SpmdError, remove_dead
from xlapy.passes.spmd.sdy_import import has_shardy_attributes, import_shardy, read_meshes

_SPMD_TARGETS = ("Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape")


def has_shardings(module: Module) -> bool:
    """Whether the module is written for the SPMD partitioner: Shardy attributes, sharding
    custom calls, or a sharding on some instruction of the entry."""
    if has_shardy_attributes(module):
        return True
    for comp in module.computations:
        for instr in comp.instructions:
            if instr.opcode == "custom-call" and \
                    instr.attrs.get("custom_call_target") in _SPMD_TARGETS:
                return True
    return any(i.sharding for i in module.entry.instructions)


def sharding_devices(module: Module) -> int:
    """The number of devices the module's shardings name (0: none): the Shardy meshes'
    sizes, else one past the largest device id of any tile assignment."""
    fe = module.config.get("frontend_attributes") or {}
    if "xla.sdy.meshes" in fe:
        meshes = read_meshes(fe["xla.sdy.meshes"])
        sizes = [m.num_devices for m in meshes.values() if m.axis_sizes]
        if sizes:
            return max(sizes)
    top = 0
    for comp in module.computations:
        for instr in comp.instructions:
            if not instr.sharding:
                continue
            top = max(top, _devices_of(parse_sharding(instr.sharding)))
    return top


def _devices_of(s: HloSharding) -> int:
    if s.kind == "tuple":
        return max((_devices_of(e) for e in s.elements), default=0)
    v = s.v2()
    if v.tile is None:
        return 0
    return int(v.tile.array().max()) + 1 if v.kind == "tiled" else int(v.tile.devices[0]) + 1


def partition(module: Module, num_partitions: int | None = None,
              num_replicas: int | None = None) -> Module:
    """Partition ``module`` in place for ``num_partitions`` devices (default: the module's
    num_partitions, else the device count its shardings name) and return it."""
    from xlapy.passes.inline_calls import CallInliner
    from xlapy.passes.spmd.partitioner import partition_module
    from xlapy.passes.spmd.propagation import propagate

    if module.entry is None:
        raise SpmdError("spmd-partition: the module has no entry computation")
    shardy = has_shardy_attributes(module)
    named = sharding_devices(module)
    if num_partitions is None:
        num_partitions = module.num_partitions if module.num_partitions > 1 else named
        if num_partitions < 1:
            raise SpmdError("spmd-partition: the module names no devices in its shardings; "
                            "give the number of partitions")
    if named > num_partitions > 1:
        raise SpmdError(f"spmd-partition: the module's shardings name {named} devices, but "
                        f"it is partitioned for {num_partitions}")
    replicas = num_replicas if num_replicas is not None else module.replica_count
    if shardy:
        import_shardy(module)
    CallInliner().run(module)
    _strip_called_sharding_calls(module)
    for comp in module.computations:  # dead code is not partitioned (XLA's DCE runs first)
        remove_dead(comp)
    if num_partitions == 1:
        _remove_shardings(module)
        return module
    shardings = propagate(module, num_partitions)
    partition_module(module, num_partitions, shardings, replicas)
    module.remove_unused_computations()
    return module


def annotate_shardings(module: Module, num_partitions: int | None = None) -> Module:
    """Write every instruction's sharding into the module (in place), as the partitioner
    sees them: after the Shardy import, call inlining and sharding propagation."""
    from xlapy.passes.inline_calls import CallInliner
    from xlapy.passes.spmd.propagation import propagate

    n = num_partitions or (module.num_partitions if module.num_partitions > 1 else
                           sharding_devices(module))
    if has_shardy_attributes(module):
        import_shardy(module)
    CallInliner().run(module)
    _strip_called_sharding_calls(module)
    if n <= 1:
        return module
    shardings = propagate(module, n)
    for comp in module.computations:
        for instr in comp.instructions:
            s = shardings.get(id(instr))
            if s is not None and not instr.shape.is_token():
                instr.sharding = s.to_text()
    return module


def _strip_called_sharding_calls(module: Module) -> None:
    """``Sharding`` custom calls inside reducers and other scalar computations (jax leaves
    them there) carry nothing: their operand takes their place."""
    visited = _visited_computations(module)
    for comp in module.computations:
        if id(comp) in visited:
            continue
        for instr in list(comp.instructions):
            if instr.opcode == "custom-call" and instr.attrs["custom_call_target"] == "Sharding":
                instr.replace_all_uses_with(instr.operands[0])
                if instr is not comp.root:
                    comp.remove_instruction(instr)


def _visited_computations(module: Module) -> set[int]:
    seen: set[int] = set()
    stack = [module.entry]
    while stack:
        c = stack.pop()
        if id(c) in seen:
            continue
        seen.add(id(c))
        for instr in c.instructions:
            if instr.opcode == "while":
                stack += [instr.attrs["body"], instr.attrs["condition"]]
            elif instr.opcode == "conditional":
                a = instr.attrs
                stack += list(a.get("branch_computations") or
                              (a["true_computation"], a["false_computation"]))
    return seen


def _remove_shardings(module: Module) -> None:
    """One partition: shardings mean nothing (XLA's ShardingRemover); the sharding custom
    calls pass their operand through."""
    for comp in module.computations:
        for instr in list(comp.instructions):
            if instr.opcode == "custom-call" and instr.attrs["custom_call_target"] in \
                    _SPMD_TARGETS:
                operand = instr.operands[0]
                if operand.shape.dimensions != instr.shape.dimensions:
                    raise SpmdError(f"spmd-partition: custom-call %{instr.name} changes the "
                                    f"shape {operand.shape} -> {instr.shape}: the module needs "
                                    f"more than one partition")
                instr.replace_all_uses_with(operand)
                if instr is not comp.root:
                    comp.remove_instruction(instr)
            instr.sharding = None
    module.config["num_partitions"] = 1


class SpmdPartition(HloPass):
    """``spmd-partition``: the SPMD partitioner as a pass (``num_partitions`` None: the
    module's, else the devices its shardings name)."""

    name = "spmd-partition"

    def __init__(self, num_partitions: int | None = None, num_replicas: int | None = None):
        self.num_partitions = num_partitions
        self.num_replicas = num_replicas

    def run(self, module: Module) -> bool:
        if not has_shardings(module) and (self.num_partitions or module.num_partitions) <= 1:
            return False
        try:
            partition(module, self.num_partitions, self.num_replicas)
        except SpmdError as e:
            raise PassError(str(e)) from e
        return True


__all__ = ["SpmdError", "SpmdPartition", "annotate_shardings", "has_shardings", "partition",
           "prod", "sharding_devices"]

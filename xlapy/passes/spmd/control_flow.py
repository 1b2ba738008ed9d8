"""Partitioning while and conditional (XLA's HandleWhile / HandleConditional): the loop
state (the while's sharding) is the sharding of the body's parameter and root and of the
condition's parameter; the body and condition become per-device computations (the
condition's result whole). A conditional's branch index is whole on every device, each
branch is partitioned with its operand's sharding and its root resharded to the
conditional's.

Imports xlapy.passes.spmd.{core,partitioner,reshard}.
"""

from __future__ import annotations

from xlapy.hlo.attrs.sharding import HloSharding
from xlapy.passes.spmd.partitioner import handler
from xlapy.passes.spmd.reshard import replicate, reshard


@handler("while")
def while_(p, b, instr, ops):
    s = p.sharding(instr)
    state = reshard(b, ops[0], s)
    body = p.partition_computation(instr.attrs["body"], [s], s,
                                   instr.attrs["body"].name + "_spmd")
    cond = p.partition_computation(instr.attrs["condition"], [s], HloSharding.replicate(),
                                   instr.attrs["condition"].name + "_spmd")
    hlo = b.add("while", [state.hlo], {"body": body, "condition": cond},
                shape=p.local_shape(instr.shape, s))
    return p.wrap(b, hlo, instr.shape, s)


@handler("conditional")
def conditional(p, b, instr, ops):
    s = p.sharding(instr)
    index = replicate(b, ops[0])
    attrs = instr.attrs
    if attrs.get("branch_computations"):
        branches = list(attrs["branch_computations"])
    else:
        branches = [attrs["true_computation"], attrs["false_computation"]]
    new_ops = []
    new_branches = []
    for i, comp in enumerate(branches):
        arg = ops[1 + i]
        arg_s = p.sharding(instr.operands[1 + i])
        arg = reshard(b, arg, arg_s)
        new_ops.append(arg)
        new_branches.append(p.partition_computation(comp, [arg_s], s, comp.name + "_spmd"))
    if attrs.get("branch_computations"):
        new_attrs = {"branch_computations": tuple(new_branches)}
    else:
        new_attrs = {"true_computation": new_branches[0], "false_computation": new_branches[1]}
    hlo = b.add("conditional", [index.hlo] + [o.hlo for o in new_ops], new_attrs,
                shape=p.local_shape(instr.shape, s))
    return p.wrap(b, hlo, instr.shape, s)


__all__ = ["conditional", "while_"]

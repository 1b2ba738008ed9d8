"""The SPMD partitioner (XLA's SpmdPartitioner, xla/service/spmd/spmd_partitioner.cc): a
module whose instructions carry shardings becomes the program one partition runs.

``partition(module, num_partitions)`` (and the ``spmd-partition`` pass) runs:

1. the Shardy import when the module holds ``xla.sdy.*`` attributes (sdy_import.py);
2. call inlining (shard_map bodies and other calls);
3. sharding propagation for instructions without a sharding (propagation.py);
4. the partitioning visitor: every computation in post order, each instruction by its
   opcode's handler (a table: HANDLERS), its operands resharded as the handler needs
   (reshard.py) and its result resharded to its own sharding. Handlers live in
   handlers_shape.py (elementwise, broadcast, reshape, transpose, slice, pad,
   concatenate, dynamic-(update-)slice, iota, constant, rng, reverse, sort, reduce,
   reduce-window), dot_conv.py (dot, convolution), gather_scatter.py and here (parameters,
   tuples, while, conditional, the Sharding / SPMDFullToShardShape / SPMDShardToFullShape
   custom calls, collectives in manual code). An instruction no handler knows runs on
   replicated operands, whole, then is sliced to its sharding (correct, never fast).

The result is a module with ``num_partitions`` set, per-device shapes, parameter and root
shardings kept (as XLA keeps them), and the entry computation named ``<entry>_spmd``.
Imports the HLO layer, xlapy.opdefs and the spmd modules.
"""

from __future__ import annotations

from collections.abc import Callable

from xlapy.hlo.attrs.sharding import HloSharding, parse_sharding
from xlapy.hlo.ir import Computation, Instruction, Module, NameUniquer
from xlapy.passes.spmd.core import (
    Builder,
    Context,
    PTuple,
    PValue,
    SpmdError,
    from_map,
    local_shape,
    pvalue,
    remove_dead,
)
from xlapy.passes.spmd.reshard import replicate, reshard
from xlapy.shape import Shape

Handler = Callable[["Partitioner", Builder, Instruction, list], object]

#: opcode -> handler; filled by the handler modules (register) at import.
HANDLERS: dict[str, Handler] = {}


def handler(*opcodes: str):
    def deco(fn: Handler) -> Handler:
        for op in opcodes:
            HANDLERS[op] = fn
        return fn

    return deco


class Partitioner:
    """Partitions the computations of one module with the given shardings."""

    def __init__(self, ctx: Context, shardings: dict[int, HloSharding]):
        self.ctx = ctx
        self.shardings = shardings
        self.uniquer = ctx.uniquer
        self.done: dict[int, Computation] = {}

    def sharding(self, instr: Instruction) -> HloSharding:
        s = self.shardings.get(id(instr))
        if s is None:
            s = parse_sharding(instr.sharding) if instr.sharding else HloSharding.replicate()
        if instr.shape.is_tuple() and s.kind != "tuple":
            leaves = instr.shape.leaves()
            s = HloSharding.tuple_([s] * max(len(leaves), 1))
        return s

    # -- computations --

    def new_computation(self, name: str) -> Computation:
        comp = Computation(self.uniquer.get_unique_name(name))
        comp._uniquer = self.uniquer
        self.ctx.new_computations.append(comp)
        return comp

    def partition_computation(self, comp: Computation, params: list[HloSharding],
                              root_sharding: HloSharding, name: str) -> Computation:
        """A per-device copy of ``comp`` whose parameters have ``params`` shardings and whose
        root is resharded to ``root_sharding``."""
        new = self.new_computation(name)
        b = Builder(self.ctx, new)
        values: dict[int, object] = {}
        for instr in comp.post_order():
            b.origin = instr
            if instr.opcode == "parameter":
                values[id(instr)] = self.parameter(b, instr, params[instr.parameter_number])
                continue
            ops = [values[id(o)] for o in instr.operands]
            fn = HANDLERS.get(instr.opcode, default_handler)
            out = fn(self, b, instr, ops)
            if instr.opcode not in _KEEP_RESULT:
                out = reshard(b, out, self.sharding(instr))
            values[id(instr)] = out
        b.origin = comp.root
        root = reshard(b, values[id(comp.root)], root_sharding)
        new.root = root.hlo
        remove_dead(new)
        return new

    def parameter(self, b: Builder, instr: Instruction, sharding: HloSharding):
        shape = instr.shape
        per_device = self.local_shape(shape, sharding)
        hlo = b.add("parameter", [], {"parameter_number": instr.parameter_number},
                    shape=per_device, name=instr.name)
        hlo.sharding = sharding.to_text() if shape.is_array() or shape.is_tuple() else None
        return self.wrap(b, hlo, shape, sharding)

    def local_shape(self, shape: Shape, sharding: HloSharding) -> Shape:
        if shape.is_tuple():
            leaves = sharding.elements if sharding.kind == "tuple" else None
            it = iter(leaves) if leaves is not None else None

            def rec(s: Shape) -> Shape:
                if s.is_tuple():
                    return Shape.tuple([rec(e) for e in s.tuple_shapes])
                return self.local_shape(s, next(it) if it is not None else sharding)

            return rec(shape)
        if not shape.is_array():
            return shape
        return local_shape(shape, self.ctx.map_of(sharding, shape))

    def wrap(self, b: Builder, hlo: Instruction, shape: Shape, sharding: HloSharding):
        """A partitioned value for the per-device ``hlo`` of global ``shape``."""
        if not shape.is_tuple():
            if not shape.is_array():
                return PValue(hlo, shape, HloSharding.replicate(),
                              self.ctx.map_of(HloSharding.replicate(), shape))
            return pvalue(self.ctx, hlo, shape, sharding.leaf(0) if sharding.kind == "tuple"
                          else sharding)
        leaves = iter(sharding.elements if sharding.kind == "tuple" else [])

        def rec(h: Instruction, s: Shape):
            if not s.is_tuple():
                leaf = next(leaves, sharding if sharding.kind != "tuple" else None)
                return self.wrap(b, h, s, leaf or HloSharding.replicate())
            elements = []
            for i, es in enumerate(s.tuple_shapes):
                g = b.add("get-tuple-element", [h], {"index": i}, shape=h.shape.tuple_shapes[i],
                          name="get-tuple-element")
                elements.append(rec(g, es))
            return PTuple(h, s, elements)

        return rec(hlo, shape)


#: Opcodes whose handler returns the final value (no reshard to the instruction's own
#: sharding afterwards).
_KEEP_RESULT = {"custom-call"}


# -- handlers of this module ------------------------------------------------------------------


def default_handler(p: Partitioner, b: Builder, instr: Instruction, ops: list):
    """Unknown to the partitioner: run whole on replicated operands, then reshard."""
    if p.sharding(instr).is_manual() or any(_is_manual(o) for o in ops):
        return manual_clone(p, b, instr, ops)
    full = [replicate(b, o) for o in ops]
    hlo = b.add(instr.opcode, [o.hlo for o in full], dict(instr.attrs.items()),
                shape=instr.shape)
    return p.wrap(b, hlo, instr.shape, HloSharding.replicate())


def _is_manual(v) -> bool:
    if isinstance(v, PTuple):
        return any(_is_manual(e) for e in v.elements)
    return v.map.manual_groups() > 1


def manual_clone(p: Partitioner, b: Builder, instr: Instruction, ops: list):
    """An instruction in manual code (a shard_map body): it already works on per-device
    values; operands partially sharded over free axes are gathered within their manual
    group first (except for elementwise use)."""
    target = p.sharding(instr)
    fixed = []
    for o in ops:
        if isinstance(o, PValue) and any(t > 1 for t in o.map.tiles):
            o = replicate(b, o)
        fixed.append(o)
    hlo = b.add(instr.opcode, [o.hlo for o in fixed], dict(instr.attrs.items()),
                shape=instr.shape)
    if instr.shape.is_tuple():
        return p.wrap(b, hlo, instr.shape, target if target.kind == "tuple" else
                      HloSharding.tuple_([target] * len(instr.shape.leaves())))
    s = target if target.is_manual() or target.has_manual_subgroup() else HloSharding.manual()
    m = p.ctx.map_of(s, instr.shape).replicate_dims(range(len(instr.shape.dimensions)))
    return from_map(p.ctx, hlo, instr.shape, m)


@handler("tuple")
def _tuple(p, b, instr, ops):
    hlo = b.add("tuple", [o.hlo for o in ops], {}, name=instr.name)
    return PTuple(hlo, instr.shape, list(ops))


@handler("get-tuple-element")
def _gte(p, b, instr, ops):
    value = ops[0]
    return value.elements[instr.attrs["index"]]


@handler("custom-call")
def _custom_call(p, b, instr, ops):
    target = instr.attrs["custom_call_target"]
    if target == "Sharding":
        return reshard(b, ops[0], p.sharding(instr))
    if target == "SPMDFullToShardShape":
        return _full_to_shard(p, b, instr, ops[0])
    if target == "SPMDShardToFullShape":
        return _shard_to_full(p, b, instr, ops[0])
    return reshard(b, default_handler(p, b, instr, ops), p.sharding(instr))


def _full_to_shard(p: Partitioner, b: Builder, instr: Instruction, v: PValue) -> PValue:
    """The operand's per-device block becomes the manual value: its devices' tiles along the
    manual axes are their own values now (XLA's HandleCustomCall for
    SPMDFullToShardShape)."""
    target = p.sharding(instr)  # {manual} or a manual subgroup sharding
    if not isinstance(v, PValue):
        raise SpmdError(f"custom-call %{instr.name}: SPMDFullToShardShape of a tuple")
    tm = p.ctx.map_of(target, instr.shape)
    # The operand must be tiled along the manual axes as the local value says: its sharding
    # is the one the preceding Sharding custom call gave; take the block as is.
    from xlapy.passes.spmd.core import slice_to

    want = local_shape(instr.shape, tm).dimensions
    have = v.hlo.shape.dimensions
    hlo = v.hlo
    if tuple(have) != tuple(want):
        if all(h >= w for h, w in zip(have, want)):
            hlo = slice_to(b, hlo, want)
        else:
            raise SpmdError(f"custom-call %{instr.name}: SPMDFullToShardShape: the operand's "
                            f"shards {list(have)} do not hold the local shape {list(want)}")
    return PValue(hlo, instr.shape, target.v2(), tm)


def _shard_to_full(p: Partitioner, b: Builder, instr: Instruction, v: PValue) -> PValue:
    target = p.sharding(instr)
    tm = p.ctx.map_of(target, instr.shape)
    want = local_shape(instr.shape, tm).dimensions
    hlo = v.hlo
    if tuple(hlo.shape.dimensions) != tuple(want):
        from xlapy.passes.spmd.core import pad_to

        hlo = pad_to(b, hlo, want)
    return PValue(hlo, instr.shape, target.v2(), tm)


_COLLECTIVES = ("all-reduce", "all-gather", "all-to-all", "collective-permute", "reduce-scatter",
                "collective-broadcast", "ragged-all-to-all", "all-reduce-start", "all-reduce-done",
                "all-gather-start", "all-gather-done", "collective-permute-start",
                "collective-permute-done")


@handler(*_COLLECTIVES)
def _collective(p, b, instr, ops):
    if instr.opcode == "all-reduce" and all(isinstance(o, PValue) for o in ops) and \
            len({o.sharding for o in ops}) == 1 and ops and ops[0].map.manual_groups() > 1:
        # elementwise over the manual group: a free-axis tiling stays
        hlo = b.add(instr.opcode, [o.hlo for o in ops], dict(instr.attrs.items()),
                    shape=ops[0].hlo.shape if len(ops) == 1 else None)
        return PValue(hlo, instr.shape, ops[0].sharding, ops[0].map)
    return manual_clone(p, b, instr, ops) if any(_is_manual(o) for o in ops) or \
        p.sharding(instr).is_manual() else default_handler(p, b, instr, ops)


@handler("partition-id", "replica-id")
def _ids(p, b, instr, ops):
    hlo = b.add(instr.opcode, [], {}, shape=instr.shape)
    s = p.sharding(instr)
    if s.is_manual():
        return PValue(hlo, instr.shape, HloSharding.manual(),
                      p.ctx.map_of(HloSharding.manual(), instr.shape))
    return p.wrap(b, hlo, instr.shape, HloSharding.replicate())


# -- the whole module --------------------------------------------------------------------------


def partition_module(module: Module, num_partitions: int, shardings: dict[int, HloSharding],
                     num_replicas: int = 1) -> None:
    """Replace ``module``'s computations by their per-device programs (in place)."""
    from xlapy.passes.spmd import control_flow, dot_conv, gather_scatter, handlers_shape  # noqa: F401

    ctx = Context(module, num_partitions, num_replicas)
    p = Partitioner(ctx, shardings)
    entry = module.entry
    for comp in module.computations:  # names of the computations kept as they are
        if comp is not entry:
            for instr in comp.instructions:
                p.uniquer.get_unique_name(instr.name)
    params = [p.sharding(q) for q in entry.parameters]
    new_entry = p.partition_computation(entry, params, p.sharding(entry.root),
                                        entry.name + "_spmd")
    new_entry.root.sharding = p.sharding(entry.root).to_text()
    from xlapy.passes.spmd.arrays import SpmdLayout

    layout = SpmdLayout([q.shape for q in entry.parameters], params, entry.root.shape,
                        p.sharding(entry.root), num_partitions)
    _install(module, new_entry, ctx)
    module.config["num_partitions"] = num_partitions
    module.spmd_layout = layout
    module.config.pop("entry_computation_layout", None)
    for key in ("allow_spmd_sharding_propagation_to_parameters",
                "allow_spmd_sharding_propagation_to_output"):
        module.config.pop(key, None)


def _install(module: Module, entry: Computation, ctx: Context) -> None:
    """Make ``entry`` the module's entry and keep only the computations it reaches."""
    old = [c for c in module.computations]
    module.computations = []
    module.name_uniquer = NameUniquer()
    module.computation_uniquer = NameUniquer()
    reach = {id(entry)}
    stack = [entry]
    while stack:
        c = stack.pop()
        for callee in c.called_computations():
            if id(callee) not in reach:
                reach.add(id(callee))
                stack.append(callee)
    for comp in old + ctx.new_computations:
        if id(comp) in reach and comp is not entry:
            comp.module = None
            module.add_computation(comp, uniquify=False)
    entry.module = None
    module.add_computation(entry, entry=True, uniquify=False)
    module.computations = module.post_order_computations()


__all__ = ["HANDLERS", "Partitioner", "default_handler", "handler", "manual_clone",
           "partition_module"]

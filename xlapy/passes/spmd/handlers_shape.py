"""Partitioning rules of the shape-preserving and data-movement instructions (XLA's
SpmdPartitioningVisitor::HandleElementwise, HandleBroadcast, HandleReshape,
HandleTranspose, HandleSlice, HandlePad, HandleConcatenate, HandleDynamicSlice,
HandleDynamicUpdateSlice, HandleIota, HandleConstant, HandleReverse, HandleSort,
HandleReduce, HandleReduceWindow).

The common pattern: the instruction's target sharding, with the dimensions the operation
moves data along made whole (``replicate_dims``), is what the operands are resharded to;
the instruction then runs on each device's block, and the visitor reshards the result to
the target (a local dynamic-slice when only those dimensions differ). Reduce keeps a tiled
reduced dimension tiled: each device reduces its block (padding masked with the init value)
and an all-reduce with the reduce's computation combines the partial results.

Imports xlapy.passes.spmd.{core,reshard,partitioner,device_map} and the op definitions.
"""

from __future__ import annotations

from xlapy.hlo.attrs.sharding import HloSharding
from xlapy.hlo.attrs.slicing import SliceRanges
from xlapy.opdefs import all_opdefs
from xlapy.opdefs.registry import ELEMENTWISE as ELEMENTWISE_TRAIT
from xlapy.passes.spmd.core import (
    PTuple,
    PValue,
    device_groups,
    from_map,
    local_dims,
    mask,
    offset_of,
)
from xlapy.passes.spmd.device_map import DeviceMap, reshape_map
from xlapy.passes.spmd.partitioner import default_handler, handler, manual_clone
from xlapy.passes.spmd.reshard import replicate, reshard_map
from xlapy.shape import Shape

#: Opcodes partitioned as XLA's HandleElementwise partitions them besides those with the
#: ELEMENTWISE trait: copy (arrays and tuples) and map (a computation applied elementwise),
#: which XLA's IsElementwise counts too.
_ALSO_ELEMENTWISE = ("copy", "map")


def elementwise_opcodes() -> tuple[str, ...]:
    """Every opcode whose op definition has the ELEMENTWISE trait, and _ALSO_ELEMENTWISE: a
    new elementwise op is partitioned by its definition alone."""
    traits = tuple(o.opcode for o in all_opdefs().values() if o.has(ELEMENTWISE_TRAIT))
    return traits + tuple(o for o in _ALSO_ELEMENTWISE if o not in traits)


ELEMENTWISE = elementwise_opcodes()


def target_map(p, instr) -> DeviceMap:
    s = p.sharding(instr)
    if s.kind == "tuple":
        s = s.elements[0]
    return p.ctx.map_of(s, _first_array(instr.shape))


def _first_array(shape: Shape) -> Shape:
    while shape.is_tuple():
        shape = shape.tuple_shapes[0]
    return shape


def local(instr_shape: Shape, m: DeviceMap) -> Shape:
    return Shape.array(instr_shape.element_type, local_dims(instr_shape, m))


def to(b, v: PValue, m: DeviceMap) -> PValue:
    """``v`` resharded to the map ``m`` (of ``v``'s rank)."""
    return reshard_map(b, v, m)


def _attrs(instr) -> dict:
    return dict(instr.attrs.items())


@handler(*ELEMENTWISE)
def elementwise(p, b, instr, ops):
    shape = instr.shape
    if instr.opcode == "bitcast-convert" and len(ops[0].shape.dimensions) != len(shape.dimensions):
        return default_handler(p, b, instr, ops)
    tm = target_map(p, instr)
    rank = len(shape.dimensions)
    new = []
    for o in ops:
        if len(o.shape.dimensions) == 0 and rank > 0:
            new.append(replicate(b, o) if o.map.manual_groups() == 1 else o)
        else:
            new.append(to(b, o, tm))
    hlo = b.add(instr.opcode, [o.hlo for o in new], _attrs(instr), shape=local(shape, tm))
    return from_map(p.ctx, hlo, shape, tm)


@handler("broadcast")
def broadcast(p, b, instr, ops):
    tm = target_map(p, instr)
    dims = tuple(instr.attrs["dimensions"])
    v = to(b, ops[0], tm.select(list(dims), len(dims)))
    hlo = b.add("broadcast", [v.hlo], {"dimensions": dims}, shape=local(instr.shape, tm))
    return from_map(p.ctx, hlo, instr.shape, tm)


@handler("reshape")
def reshape(p, b, instr, ops):
    v = ops[0]
    tm = target_map(p, instr)
    src, dst = tuple(v.shape.dimensions), tuple(instr.shape.dimensions)
    back = reshape_map(tm, dst, src)
    if back is not None:
        fwd = reshape_map(back, src, dst)
        if fwd is not None and fwd.same_as(tm):
            v = to(b, v, back)
            hlo = b.add("reshape", [v.hlo], {}, shape=local(instr.shape, tm))
            return from_map(p.ctx, hlo, instr.shape, tm)
    fwd = reshape_map(v.map, src, dst)
    if fwd is not None:
        hlo = b.add("reshape", [v.hlo], {}, shape=local(instr.shape, fwd))
        return from_map(p.ctx, hlo, instr.shape, fwd)
    full = replicate(b, v)
    hlo = b.add("reshape", [full.hlo], {}, shape=instr.shape)
    return p.wrap(b, hlo, instr.shape, _replicated_like(full))


def _replicated_like(v: PValue) -> HloSharding:
    return v.sharding


@handler("transpose")
def transpose(p, b, instr, ops):
    tm = target_map(p, instr)
    perm = tuple(instr.attrs["dimensions"])
    inverse = [perm.index(i) for i in range(len(perm))]
    v = to(b, ops[0], tm.transpose(inverse))
    hlo = b.add("transpose", [v.hlo], {"dimensions": perm}, shape=local(instr.shape, tm))
    return from_map(p.ctx, hlo, instr.shape, tm)


def _whole_along(p, b, instr, ops, dims, make):
    """Reshard the array operands to the target with ``dims`` whole, apply ``make`` to the
    per-device operands; the result has that map."""
    tm = target_map(p, instr).replicate_dims(dims)
    new = [to(b, o, tm) if len(o.shape.dimensions) == tm.rank else replicate(b, o)
           for o in ops]
    hlo = make(new, tm)
    return from_map(p.ctx, hlo, instr.shape, tm)


@handler("slice")
def slice_(p, b, instr, ops):
    r = instr.attrs["slice"]
    n = ops[0].shape.dimensions
    moved = [d for d in range(len(n)) if (r.starts[d], r.limits[d], r.strides[d]) != (0, n[d], 1)]

    def make(new, tm):
        have = new[0].hlo.shape.dimensions
        starts = [r.starts[d] if d in moved else 0 for d in range(len(n))]
        limits = [r.limits[d] if d in moved else have[d] for d in range(len(n))]
        strides = [r.strides[d] if d in moved else 1 for d in range(len(n))]
        return b.add("slice", [new[0].hlo], {"slice": SliceRanges.of(starts, limits, strides)},
                     shape=local(instr.shape, tm))

    return _whole_along(p, b, instr, ops, moved, make)


@handler("pad")
def pad(p, b, instr, ops):
    config = instr.attrs["padding"]
    moved = [d for d, c in enumerate(config.dimensions)
             if (c.edge_padding_low, c.edge_padding_high, c.interior_padding) != (0, 0, 0)]

    def make(new, tm):
        return b.add("pad", [new[0].hlo, new[1].hlo], {"padding": config},
                     shape=local(instr.shape, tm))

    return _whole_along(p, b, instr, ops, moved, make)


@handler("concatenate")
def concatenate(p, b, instr, ops):
    dim = instr.attrs["dimensions"][0]

    def make(new, tm):
        return b.add("concatenate", [o.hlo for o in new], {"dimensions": (dim,)},
                     shape=local(instr.shape, tm))

    return _whole_along(p, b, instr, ops, [dim], make)


@handler("reverse")
def reverse(p, b, instr, ops):
    dims = list(instr.attrs["dimensions"])
    tm = target_map(p, instr)
    n = instr.shape.dimensions
    if all(n[d] % tm.tiles[d] == 0 for d in dims):
        # each device reverses the mirrored tile (XLA's HandleReverse: the operand is
        # resharded, usually by a collective-permute, so tile t-1-k sits where tile k is)
        mirrored = DeviceMap(tm.tiles, tm.index.copy(), tm.group)
        for d in dims:
            mirrored.index[:, d] = tm.tiles[d] - 1 - tm.index[:, d]
        v = to(b, ops[0], mirrored)
        hlo = b.add("reverse", [v.hlo], {"dimensions": tuple(dims)},
                    shape=local(instr.shape, tm))
        return from_map(p.ctx, hlo, instr.shape, tm)

    def make(new, tm):
        return b.add("reverse", [new[0].hlo], {"dimensions": tuple(dims)},
                     shape=local(instr.shape, tm))

    return _whole_along(p, b, instr, ops, dims, make)


@handler("dynamic-slice")
def dynamic_slice(p, b, instr, ops):
    sizes = tuple(instr.attrs["dynamic_slice_sizes"])
    n = ops[0].shape.dimensions
    moved = [d for d in range(len(n)) if sizes[d] != n[d]]

    def make(new, tm):
        have = new[0].hlo.shape.dimensions
        local_sizes = tuple(sizes[d] if d in moved else have[d] for d in range(len(n)))
        return b.add("dynamic-slice", [o.hlo for o in new],
                     {"dynamic_slice_sizes": local_sizes}, shape=local(instr.shape, tm))

    return _whole_along(p, b, instr, ops, moved, make)


@handler("dynamic-update-slice")
def dynamic_update_slice(p, b, instr, ops):
    n = ops[0].shape.dimensions
    u = ops[1].shape.dimensions
    moved = [d for d in range(len(n)) if u[d] != n[d]]

    def make(new, tm):
        return b.add("dynamic-update-slice", [o.hlo for o in new], {},
                     shape=local(instr.shape, tm))

    return _whole_along(p, b, instr, ops, moved, make)


@handler("iota")
def iota(p, b, instr, ops):
    tm = target_map(p, instr)
    dim = instr.attrs["iota_dimension"]
    shape = local(instr.shape, tm)
    hlo = b.add("iota", [], {"iota_dimension": dim}, shape=shape)
    if tm.tiles[dim] > 1:
        off = offset_of(b, instr.shape, tm, dim)
        if shape.element_type != off.shape.element_type:
            off = b.add("convert", [off], {}, shape=Shape.scalar(shape.element_type))
        hlo = b.add("add", [hlo, b.broadcast_scalar(off, shape.dimensions)], {})
    return from_map(p.ctx, hlo, instr.shape, tm)


@handler("constant")
def constant(p, b, instr, ops):
    hlo = b.add("constant", [], _attrs(instr), shape=instr.shape)
    return p.wrap(b, hlo, instr.shape, HloSharding.replicate())


@handler("rng")
def rng(p, b, instr, ops):
    """XLA's HandleRng for a replicated rng: partition 0 draws it and broadcasts it (XLA's
    PartitionedHlo::Broadcast: the value masked to zero elsewhere, then a sum over all
    partitions), so every device holds the same numbers whatever each device's generator
    does. A tiled rng is drawn whole and sliced, so its blocks are those of the one-device
    program (XLA draws each block locally: rng's values are the implementation's choice)."""
    target = p.sharding(instr)
    if not target.is_replicated() or any(_is_manual_value(o) for o in ops):
        return default_handler(p, b, instr, ops)
    full = [replicate(b, o).hlo for o in ops]
    x = b.add("rng", full, _attrs(instr), shape=instr.shape)
    pid = b.partition_id()
    zero_id = b.add("constant", [], {"literal": _u32_zero()}, shape=pid.shape, name="constant")
    first = b.add("compare", [pid, zero_id], {"direction": "EQ"})
    dims = instr.shape.dimensions
    keep = b.add("broadcast", [first], {"dimensions": ()},
                 shape=Shape.array(first.shape.element_type, dims))
    zeros = b.broadcast_scalar(b.zero(instr.shape.element_type), dims)
    masked = b.add("select", [keep, x, zeros], {})
    et = instr.shape.element_type
    out = b.all_reduce(masked, [list(range(b.n))], p.ctx.reducer("add", et))
    return p.wrap(b, out, instr.shape, HloSharding.replicate())


def _is_manual_value(v) -> bool:
    return isinstance(v, PValue) and v.map.manual_groups() > 1


def _u32_zero():
    import numpy as np

    from xlapy.shape import PrimitiveType
    from xlapy.shape.literal import Literal

    return Literal.from_array(np.uint32(0), Shape.scalar(PrimitiveType.U32))


@handler("sort")
def sort(p, b, instr, ops):
    dim = instr.attrs["dimensions"][0]
    tm = target_map(p, instr).replicate_dims([dim])
    new = [to(b, o, tm) for o in ops]
    shapes = [local(o.shape, tm) for o in ops]
    shape = shapes[0] if len(shapes) == 1 else Shape.tuple(shapes)
    hlo = b.add("sort", [o.hlo for o in new], _attrs(instr), shape=shape)
    s = _sharding_of(p, tm)
    if len(ops) == 1:
        return from_map(p.ctx, hlo, instr.shape, tm)
    return p.wrap(b, hlo, instr.shape, HloSharding.tuple_([s] * len(ops)))


def _sharding_of(p, m: DeviceMap) -> HloSharding:
    from xlapy.passes.spmd.device_map import to_sharding

    return to_sharding(m)


@handler("reduce")
def reduce(p, b, instr, ops):
    n = len(ops) // 2
    values, inits = ops[:n], ops[n:]
    reduced = sorted(instr.attrs["dimensions"])
    comp = instr.attrs["to_apply"]
    if any(o.map.manual_groups() > 1 for o in ops) and all(
            not any(t > 1 for t in o.map.tiles) for o in ops):
        return manual_clone(p, b, instr, ops)
    inits = [replicate(b, i) if i.map.manual_groups() == 1 else i for i in inits]
    out_rank = len(values[0].shape.dimensions) - len(reduced)
    tm = target_map(p, instr)
    wanted = tm.insert_dims(reduced, out_rank + len(reduced))
    v0 = values[0]
    partial = n == 1 and any(v0.map.tiles[d] > 1 for d in reduced)
    if partial:
        # keep the operand's tiling of the reduced dims; the kept dims as the target wants
        m = v0.map
        cols = wanted.index.copy()
        tiles = list(wanted.tiles)
        for d in reduced:
            cols[:, d] = m.index[:, d]
            tiles[d] = m.tiles[d]
        candidate = DeviceMap(tuple(tiles), cols, wanted.group)
        from xlapy.passes.spmd.device_map import to_sharding

        if to_sharding(candidate) is None:
            candidate = m
        v = to(b, v0, candidate)
        x = mask(b, v, reduced, inits[0].hlo)
        out_map = candidate.remove_dims(reduced)
        local_out = local(instr.shape, out_map)
        hlo = b.add("reduce", [x, inits[0].hlo], {"dimensions": tuple(reduced), "to_apply": comp},
                    shape=local_out)
        tiled = [d for d in reduced if candidate.tiles[d] > 1]
        groups = device_groups(candidate, tiled)
        hlo = b.all_reduce(hlo, groups, comp)
        return from_map(p.ctx, hlo, instr.shape, out_map)
    m = wanted.replicate_dims(reduced)
    new = [to(b, v, m) for v in values]
    out_map = m.remove_dims(reduced)
    shapes = [local(s, out_map) for s in (instr.shape.tuple_shapes if instr.shape.is_tuple()
                                          else [instr.shape])]
    shape = shapes[0] if len(shapes) == 1 else Shape.tuple(shapes)
    hlo = b.add("reduce", [o.hlo for o in new] + [i.hlo for i in inits],
                {"dimensions": tuple(reduced), "to_apply": comp}, shape=shape)
    if n == 1:
        return from_map(p.ctx, hlo, instr.shape, out_map)
    s = _sharding_of(p, out_map)
    return p.wrap(b, hlo, instr.shape, HloSharding.tuple_([s] * n))


@handler("reduce-window")
def reduce_window(p, b, instr, ops):
    window = instr.attrs["window"]
    n = len(ops) // 2
    moved = [d for d, w in enumerate(window.dimensions)
             if (w.size, w.stride, w.padding_low, w.padding_high, w.window_dilation,
                 w.base_dilation) != (1, 1, 0, 0, 1, 1)]
    tm = target_map(p, instr).replicate_dims(moved)
    values = [to(b, o, tm) for o in ops[:n]]
    inits = [replicate(b, o) for o in ops[n:]]
    out_shapes = instr.shape.tuple_shapes if instr.shape.is_tuple() else [instr.shape]
    shapes = [local(s, tm) for s in out_shapes]
    shape = shapes[0] if n == 1 else Shape.tuple(shapes)
    hlo = b.add("reduce-window", [o.hlo for o in values + inits], _attrs(instr), shape=shape)
    if n == 1:
        return from_map(p.ctx, hlo, instr.shape, tm)
    return p.wrap(b, hlo, instr.shape, HloSharding.tuple_([_sharding_of(p, tm)] * n))


@handler("opt-barrier")
def opt_barrier(p, b, instr, ops):
    v = ops[0]
    hlo = b.add("opt-barrier", [v.hlo], {}, shape=v.hlo.shape)
    if isinstance(v, PTuple):
        return p.wrap(b, hlo, instr.shape, v.sharding)
    return PValue(hlo, v.shape, v.sharding, v.map)


__all__ = ["ELEMENTWISE", "local", "target_map", "to"]

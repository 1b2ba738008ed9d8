"""Sharding propagation (XLA's ShardingPropagation, in its plain form): every instruction of
the computations the partitioner visits gets a sharding.

Shardings written in the module (parameters, roots, ``Sharding`` custom calls, shard_map
boundaries) are fixed. The others are inferred, forward from operands (InferSharding-
FromOperands) and backward from users (GetShardingFromUser), in passes over the
computations until nothing changes; a new sharding replaces the current one only when it
splits the value into more tiles (IsShardingMoreSpecific), so the process ends. Per opcode:

- elementwise, copy, map, select, clamp...: the operands' shardings, merged when compatible
  (MergeSharding), else the most tiled;
- broadcast / reduce: the operand's dimensions mapped, new or reduced ones whole (their
  devices become replicas); backward the other way;
- reshape (ReshapeSharding: groups of dimensions whose sizes match, contiguous tiles) and
  transpose;
- dot and convolution: the result's batch / non-contracting dimensions from each operand,
  merged; backward, an operand from the result (contracting dimensions whole);
- slice, pad, reverse, sort, reduce-window, concatenate, dynamic-update-slice, scatter:
  the operand's sharding (dynamic-slice: the sliced dimensions whole); gather from its
  passthrough dimensions;
- tuple / get-tuple-element per leaf; while: its operand's, shared by the body's
  parameter, the condition's parameter and the body's root; conditional: branch
  parameters from the operands, the result from the branch roots;
- collectives and ids inside manual code: manual.

Instructions left without one are replicated. Imports the sharding model and the spmd
device maps.
"""

from __future__ import annotations

from xlapy.hlo.attrs.sharding import HloSharding, parse_sharding
from xlapy.hlo.ir import Computation, Instruction, Module
from xlapy.passes.spmd.device_map import DeviceMap, device_map, merge, reshape_map, to_sharding

_ELEMENTWISE_EXTRA = {"copy", "map", "reduce-precision", "stochastic-convert"}
_PASS_THROUGH = {"slice", "pad", "reverse", "sort", "reduce-window", "select-and-scatter",
                 "concatenate", "dynamic-update-slice", "scatter", "opt-barrier", "all-reduce",
                 "collective-permute", "all-to-all", "all-gather", "reduce-scatter",
                 "cholesky", "triangular-solve", "fft"}
_LEAVES = {"constant", "iota", "rng", "rng-bit-generator", "partition-id", "replica-id",
           "parameter", "after-all", "infeed", "recv"}


def _elementwise_ops() -> set[str]:
    from xlapy.opdefs.registry import _load_families, all_opdefs

    _load_families()
    return {n for n, d in all_opdefs().items() if "elementwise" in d.traits} | _ELEMENTWISE_EXTRA


class Propagation:
    def __init__(self, module: Module, num_partitions: int):
        self.module = module
        self.n = num_partitions
        self.cur: dict[int, HloSharding] = {}
        self.fixed: set[int] = set()
        self.elementwise = _elementwise_ops()
        self.comps: list[Computation] = []

    # -- maps --

    def map_of(self, instr: Instruction, s: HloSharding | None) -> DeviceMap | None:
        if s is None or s.kind in ("tuple", "unknown") or not instr.shape.is_array():
            return None
        try:
            return device_map(s, len(instr.shape.dimensions), self.n)
        except ValueError:
            return None

    def get_map(self, instr: Instruction) -> DeviceMap | None:
        return self.map_of(instr, self.cur.get(id(instr)))

    # -- running --

    def run(self) -> dict[int, HloSharding]:
        self.collect(self.module.entry)
        for comp in self.comps:
            for instr in comp.instructions:
                if instr.sharding:
                    s = parse_sharding(instr.sharding)
                    if instr.shape.is_tuple() and s.kind != "tuple":
                        s = HloSharding.tuple_([s] * max(len(instr.shape.leaves()), 1))
                    self.cur[id(instr)] = s.v2() if s.kind != "tuple" else s
                    self.fixed.add(id(instr))
        for _ in range(50):
            changed = False
            for comp in self.comps:
                order = comp.post_order()
                for instr in order:
                    changed |= self.forward(instr)
                for instr in reversed(order):
                    changed |= self.backward(instr)
            changed |= self.link_loops()
            if not changed:
                break
        out: dict[int, HloSharding] = {}
        for comp in self.comps:
            for instr in comp.instructions:
                out[id(instr)] = self.final(instr)
        return out

    def collect(self, comp: Computation) -> None:
        """The computations the partitioner visits: the entry, while bodies and
        conditions, conditional branches (reached from those)."""
        if comp in self.comps:
            return
        self.comps.append(comp)
        for instr in comp.instructions:
            if instr.opcode == "while":
                self.collect(instr.attrs["body"])
                self.collect(instr.attrs["condition"])
            elif instr.opcode == "conditional":
                attrs = instr.attrs
                for c in (attrs.get("branch_computations") or
                          (attrs["true_computation"], attrs["false_computation"])):
                    self.collect(c)

    def final(self, instr: Instruction) -> HloSharding:
        s = self.cur.get(id(instr))
        if instr.shape.is_tuple():
            leaves = instr.shape.leaves()
            if s is None or s.kind != "tuple":
                return HloSharding.tuple_([HloSharding.replicate()] * max(len(leaves), 1))
            return HloSharding.tuple_([e if e.kind != "unknown" else HloSharding.replicate()
                                       for e in s.elements])
        if s is None or s.kind == "unknown":
            return HloSharding.replicate()
        return s

    def offer(self, instr: Instruction, s: HloSharding | None) -> bool:
        """Take ``s`` for ``instr`` if it is more specific than what it has."""
        if s is None or id(instr) in self.fixed:
            return False
        old = self.cur.get(id(instr))
        if instr.shape.is_tuple():
            if s.kind != "tuple":
                return False
            if old is None or old.kind != "tuple" or len(old.elements) != len(s.elements):
                self.cur[id(instr)] = s
                return any(e.kind != "unknown" for e in s.elements)
            elems = list(old.elements)
            changed = False
            leaves = instr.shape.leaves()
            for i, (a, new) in enumerate(zip(old.elements, s.elements)):
                if new.kind == "unknown" or i >= len(leaves):
                    continue
                if _better(new, a, len(leaves[i][1].dimensions) if leaves[i][1].is_array()
                           else 0, self.n):
                    elems[i] = new
                    changed = True
            if changed:
                self.cur[id(instr)] = HloSharding.tuple_(elems)
            return changed
        if s.kind == "tuple" or not instr.shape.is_array():
            return False
        if _better(s, old, len(instr.shape.dimensions), self.n):
            self.cur[id(instr)] = s
            return True
        return False

    # -- forward --

    def forward(self, instr: Instruction) -> bool:
        if id(instr) in self.fixed:
            return False
        return self.offer(instr, self.infer(instr))

    def infer(self, instr: Instruction) -> HloSharding | None:
        op = instr.opcode
        ops = instr.operands
        if op in _LEAVES:
            return None
        if op == "tuple":
            return HloSharding.tuple_([leaf for o in ops for leaf in self.leaves_of(o)])
        if op == "get-tuple-element":
            leaves = self.leaves_of(ops[0])
            start = sum(len(_leaf_list(s)) for s in ops[0].shape.tuple_shapes[:instr.attrs["index"]])
            count = len(_leaf_list(instr.shape))
            part = leaves[start:start + count]
            if instr.shape.is_tuple():
                return HloSharding.tuple_(part)
            return part[0] if part[0].kind != "unknown" else None
        if op == "while":
            return self.cur.get(id(ops[0]))
        if op == "custom-call" or op in ("call", "conditional", "get-dimension-size"):
            return None
        if op in self.elementwise:
            maps = [self.get_map(o) for o in ops
                    if o.shape.is_array() and len(o.shape.dimensions) == len(instr.shape.dimensions)]
            return _merged([m for m in maps if m is not None])
        m0 = self.get_map(ops[0]) if ops else None
        if op == "broadcast":
            if m0 is None:
                return None
            dims = list(instr.attrs["dimensions"])
            mapping = [dims.index(d) if d in dims else None
                       for d in range(len(instr.shape.dimensions))]
            return _sh(m0.select(mapping, len(mapping)))
        if op == "reshape" or op == "bitcast":
            if m0 is None:
                return None
            out = reshape_map(m0, tuple(ops[0].shape.dimensions), tuple(instr.shape.dimensions))
            return _sh(out) if out is not None else None
        if op == "transpose":
            return _sh(m0.transpose(instr.attrs["dimensions"])) if m0 is not None else None
        if op == "reduce":
            if m0 is None:
                return None
            out = m0.remove_dims(instr.attrs["dimensions"])
            if instr.shape.is_tuple():
                return HloSharding.tuple_([_sh(out)] * len(instr.shape.tuple_shapes))
            return _sh(out)
        if op in ("dot", "convolution"):
            return self.infer_dot(instr)
        if op == "dynamic-slice":
            if m0 is None:
                return None
            sizes = instr.attrs["dynamic_slice_sizes"]
            moved = [d for d, s in enumerate(sizes) if s != ops[0].shape.dimensions[d]]
            return _sh(m0.replicate_dims(moved))
        if op == "gather":
            return self.infer_gather(instr)
        if op in _PASS_THROUGH:
            if op == "concatenate":
                return _merged([m for m in (self.get_map(o) for o in ops) if m is not None])
            if op == "sort" and instr.shape.is_tuple():
                return HloSharding.tuple_([_sh(m0)] * len(instr.shape.tuple_shapes)) \
                    if m0 is not None else None
            if op == "scatter" and instr.shape.is_tuple():
                return HloSharding.tuple_([_sh(m0)] * len(instr.shape.tuple_shapes)) \
                    if m0 is not None else None
            if op == "opt-barrier":
                return self.cur.get(id(ops[0]))
            if op in ("all-gather", "reduce-scatter", "all-to-all") and m0 is not None and \
                    any(t > 1 for t in m0.tiles):
                return _sh(m0.replicate_dims(range(m0.rank)))
            return _sh(m0) if m0 is not None and instr.shape.is_array() and \
                len(instr.shape.dimensions) == m0.rank else None
        return None

    def leaves_of(self, instr: Instruction) -> list[HloSharding]:
        s = self.cur.get(id(instr))
        count = len(_leaf_list(instr.shape))
        if s is None:
            return [HloSharding.unknown()] * count
        if s.kind == "tuple":
            return list(s.elements)
        return [s] * count

    def infer_dot(self, instr: Instruction) -> HloSharding | None:
        from xlapy.passes.spmd.dot_conv import conv_space, dot_space

        space = dot_space(instr) if instr.opcode == "dot" else conv_space(instr)
        found = []
        for which in (0, 1):
            m = self.get_map(instr.operands[which])
            if m is None:
                continue
            it = space.whole(space.from_operand(m, which), "CS")
            found.append(space.to_operand(it, 2))
        return _merged(found)

    def infer_gather(self, instr: Instruction) -> HloSharding | None:
        operand, indices = instr.operands
        dn = instr.attrs["gather_dimension_numbers"]
        sizes = instr.attrs["slice_sizes"]
        out_rank = len(instr.shape.dimensions)
        found = []
        mi = self.get_map(indices)
        batch_out = [d for d in range(out_rank) if d not in dn.offset_dims]
        idx_dims = [d for d in range(len(indices.shape.dimensions)) if d != dn.index_vector_dim]
        if mi is not None:
            mapping: list[int | None] = [None] * out_rank
            for o, i in zip(batch_out, idx_dims):
                mapping[o] = i
            found.append(mi.select(mapping, out_rank))
        mo = self.get_map(operand)
        if mo is not None:
            window = [d for d in range(len(operand.shape.dimensions))
                      if d not in dn.collapsed_slice_dims and d not in dn.operand_batching_dims]
            mapping = [None] * out_rank
            for o, d in zip(dn.offset_dims, window):
                if sizes[d] == operand.shape.dimensions[d] and d not in dn.start_index_map:
                    mapping[o] = d
            found.append(mo.select(mapping, out_rank))
        return _merged(found)

    # -- backward --

    def backward(self, instr: Instruction) -> bool:
        s = self.cur.get(id(instr))
        if s is None:
            return False
        changed = False
        for i, o in enumerate(instr.operands):
            if id(o) in self.fixed:
                continue
            changed |= self.offer(o, self.wanted(instr, i, s))
        return changed

    def wanted(self, instr: Instruction, i: int, s: HloSharding) -> HloSharding | None:
        op = instr.opcode
        operand = instr.operands[i]
        if op == "tuple":
            leaves = _leaf_list(instr.shape)
            start = sum(len(_leaf_list(o.shape)) for o in instr.operands[:i])
            elems = list(s.elements)[start:start + len(_leaf_list(operand.shape))] \
                if s.kind == "tuple" else None
            if elems is None:
                return None
            del leaves
            return HloSharding.tuple_(elems) if operand.shape.is_tuple() else elems[0]
        if op == "get-tuple-element":
            leaves = [HloSharding.unknown()] * len(_leaf_list(operand.shape))
            start = sum(len(_leaf_list(t)) for t in
                        operand.shape.tuple_shapes[:instr.attrs["index"]])
            mine = list(s.elements) if s.kind == "tuple" else [s]
            leaves[start:start + len(mine)] = mine
            return HloSharding.tuple_(leaves)
        if op == "custom-call":
            if instr.attrs["custom_call_target"] == "Sharding":
                return s
            return None
        if not operand.shape.is_array():
            return None
        m = self.map_of(instr, s)
        if m is None:
            return None
        rank = len(operand.shape.dimensions)
        if op in self.elementwise:
            return _sh(m) if rank == m.rank else None
        if op == "broadcast":
            dims = list(instr.attrs["dimensions"])
            return _sh(m.select(dims, rank))
        if op in ("reshape", "bitcast"):
            out = reshape_map(m, tuple(instr.shape.dimensions), tuple(operand.shape.dimensions))
            return _sh(out) if out is not None else None
        if op == "transpose":
            perm = list(instr.attrs["dimensions"])
            return _sh(m.transpose([perm.index(k) for k in range(len(perm))]))
        if op == "reduce":
            n = len(instr.operands) // 2
            if i >= n:
                return None
            return _sh(m.insert_dims(list(instr.attrs["dimensions"]), rank))
        if op in ("dot", "convolution"):
            from xlapy.passes.spmd.dot_conv import conv_space, dot_space

            space = dot_space(instr) if op == "dot" else conv_space(instr)
            it = space.whole(space.from_operand(m, 2), "CS")
            return _sh(space.to_operand(it, i)) if i < 2 else None
        if op == "dynamic-slice":
            if i > 0:
                return None
            sizes = instr.attrs["dynamic_slice_sizes"]
            moved = [d for d, sz in enumerate(sizes) if sz != operand.shape.dimensions[d]]
            return _sh(m.replicate_dims(moved))
        if op in _PASS_THROUGH and rank == m.rank and op not in ("all-gather",
                                                                 "reduce-scatter", "all-to-all"):
            if op in ("dynamic-update-slice",) and i > 1:
                return None
            if op == "scatter" and i >= 1:
                return None
            return _sh(m)
        return None

    # -- loops --

    def link_loops(self) -> bool:
        """A while's state sharding: the body's parameter, the condition's parameter and the
        body's root share it."""
        changed = False
        for comp in self.comps:
            for instr in comp.instructions:
                if instr.opcode != "while":
                    continue
                body, cond = instr.attrs["body"], instr.attrs["condition"]
                s = self.cur.get(id(instr))
                if s is None:
                    s = self.cur.get(id(body.root))
                    if s is not None:
                        changed |= self.offer(instr, s)
                if s is None:
                    continue
                for param in (body.parameter(0), cond.parameter(0)):
                    changed |= self.offer(param, s)
                changed |= self.offer(body.root, s)
            for instr in comp.instructions:
                if instr.opcode != "conditional":
                    continue
                attrs = instr.attrs
                branches = list(attrs.get("branch_computations") or
                                (attrs["true_computation"], attrs["false_computation"]))
                for k, c in enumerate(branches):
                    s = self.cur.get(id(instr.operands[1 + k]))
                    if s is not None:
                        changed |= self.offer(c.parameter(0), s)
                    r = self.cur.get(id(c.root))
                    if r is not None:
                        changed |= self.offer(instr, r)
        return changed


def _leaf_list(shape) -> list:
    if shape.is_tuple():
        out = []
        for s in shape.tuple_shapes:
            out += _leaf_list(s)
        return out
    return [shape]


def _sh(m: DeviceMap | None) -> HloSharding | None:
    return to_sharding(m) if m is not None else None


def _merged(maps: list[DeviceMap]) -> HloSharding | None:
    if not maps:
        return None
    best = maps[0]
    for m in maps[1:]:
        both = merge(best, m)
        if both is not None:
            best = both
        elif _tiles(m) > _tiles(best):
            best = m
    return to_sharding(best)


def _tiles(m: DeviceMap) -> int:
    out = 1
    for t in m.tiles:
        out *= t
    return out


def _better(new: HloSharding, old: HloSharding | None, rank: int, n: int) -> bool:
    if old is None or old.kind == "unknown":
        return True
    if new == old:
        return False
    try:
        a = device_map(new, rank, n)
        b = device_map(old, rank, n)
    except ValueError:
        return False
    if a.manual_groups() != b.manual_groups():
        return a.manual_groups() > b.manual_groups()
    return _tiles(a) > _tiles(b)


def propagate(module: Module, num_partitions: int) -> dict[int, HloSharding]:
    """The sharding of every instruction of the computations the partitioner visits."""
    return Propagation(module, num_partitions).run()


__all__ = ["Propagation", "propagate"]

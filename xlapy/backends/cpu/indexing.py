"""Index arithmetic for element generators: ``Index`` (a position in a row-major array) and
the generators of the data-movement opcodes, which compute an element of their result as an
element of an operand at a mapped index (XLA's elemental emitter does the same).

Every generator here is branch-free: where an output element comes from one of several
places (concatenate, pad, dynamic-update-slice), each candidate is computed at an index
clamped into range and ``select`` picks one, so the loops stay vectorisable and no value
escapes a basic block that does not dominate its uses.

Buffers are logical row-major arrays (the backend keeps NumPy's C order), so a reshape or a
layout-preserving bitcast is the same linear position.

The generators ask for operand elements with ``yield (operand, index)`` rather than by
calling the emitter, so ``ElementalEmitter.value_at`` walks the expression DAG with a stack
of its own (a long fused chain costs no Python recursion).
"""

from __future__ import annotations

from llvmlite import ir

I64 = ir.IntType(64)


def _c(v: int) -> ir.Constant:
    return ir.Constant(I64, int(v))


class Index:
    """A position in a row-major array of ``dims``: ``linear`` (i64) and ``multi`` (one i64
    per dimension), each derived from the other on demand."""

    def __init__(self, builder: ir.IRBuilder, dims: tuple[int, ...], linear=None, multi=None):
        self.builder = builder
        self.dims = tuple(int(d) for d in dims)
        self._linear = linear
        self._multi = multi
        if linear is None and multi is None:
            raise ValueError("Index needs a linear or a multi-dimensional position")

    @classmethod
    def scalar(cls, builder: ir.IRBuilder) -> "Index":
        return cls(builder, (), linear=_c(0), multi=[])

    @property
    def linear(self):
        if self._linear is None:
            b = self.builder
            acc = None
            for d, (i, n) in enumerate(zip(self._multi, self.dims)):
                acc = i if acc is None else b.add(b.mul(acc, _c(n), name=f"lin.mul{d}"), i,
                                                  name=f"lin.add{d}")
            self._linear = _c(0) if acc is None else acc
        return self._linear

    @property
    def multi(self):
        if self._multi is None:
            b = self.builder
            out, strides, stride = [], [], 1
            for n in reversed(self.dims):
                strides.append(stride)
                stride *= n
            strides.reverse()
            for d, (n, s) in enumerate(zip(self.dims, strides)):
                if n == 1:
                    out.append(_c(0))
                    continue
                q = self._linear if s == 1 else b.udiv(self._linear, _c(s), name=f"idx{d}.div")
                out.append(b.urem(q, _c(n), name=f"idx{d}") if d else q)
            self._multi = out
        return self._multi


def _clamp(b: ir.IRBuilder, v, lo: int, hi: int, name: str):
    """``v`` clamped to [lo, hi] (signed i64)."""
    v = b.select(b.icmp_signed("<", v, _c(lo), name=f"{name}.lt"), _c(lo), v, name=f"{name}.lo")
    return b.select(b.icmp_signed(">", v, _c(hi), name=f"{name}.gt"), _c(hi), v, name=name)


def _dims(instr) -> tuple[int, ...]:
    return tuple(instr.shape.dimensions)


def _broadcast(em, instr, index):
    operand = instr.operands[0]
    dims = tuple(instr.attrs["dimensions"])
    odims = _dims(operand)
    if odims == index.dims and dims == tuple(range(len(odims))):
        return (yield operand, index)
    if not odims:
        return (yield operand, Index.scalar(em.b))
    return (yield operand, Index(em.b, odims, multi=[index.multi[d] for d in dims]))


def _same_position(em, instr, index):
    """reshape, bitcast (row-major: the same linear position), copy."""
    operand = instr.operands[0]
    return (yield operand, Index(em.b, _dims(operand), linear=index.linear))


def _transpose(em, instr, index):
    operand = instr.operands[0]
    perm = tuple(instr.attrs["dimensions"])
    multi = [None] * len(perm)
    for k, p in enumerate(perm):
        multi[p] = index.multi[k]
    return (yield operand, Index(em.b, _dims(operand), multi=multi))


def _slice(em, instr, index):
    b = em.b
    operand = instr.operands[0]
    multi = []
    ranges = instr.attrs["slice"]
    for d, (i, start, stride) in enumerate(zip(index.multi, ranges.starts, ranges.strides)):
        v = i if stride == 1 else b.mul(i, _c(stride), name=f"{instr.name}.s{d}")
        multi.append(v if start == 0 else b.add(v, _c(start), name=f"{instr.name}.o{d}"))
    return (yield operand, Index(b, _dims(operand), multi=multi))


def _reverse(em, instr, index):
    b = em.b
    operand = instr.operands[0]
    dims = set(instr.attrs["dimensions"])
    multi = [b.sub(_c(n - 1), i, name=f"{instr.name}.r{d}") if d in dims else i
             for d, (i, n) in enumerate(zip(index.multi, index.dims))]
    return (yield operand, Index(b, _dims(operand), multi=multi))


def _concatenate(em, instr, index):
    b = em.b
    axis = instr.attrs["dimensions"][0]
    multi = index.multi
    pos = multi[axis]
    chosen = getattr(em, "pieces", {}).get(id(instr))
    if chosen is not None:  # the loop emitter's segment: every position reads this operand
        offset = sum(_dims(o)[axis] for o in instr.operands[:chosen])
        sub = list(multi)
        sub[axis] = b.sub(pos, _c(offset), name=f"{instr.name}.p{chosen}")
        operand = instr.operands[chosen]
        return (yield operand, Index(b, _dims(operand), multi=sub))
    result = None
    offset = 0
    for k, operand in enumerate(instr.operands):
        size = _dims(operand)[axis]
        if size == 0:
            continue
        local = _clamp(b, b.sub(pos, _c(offset), name=f"{instr.name}.p{k}"), 0, size - 1,
                       f"{instr.name}.c{k}")
        sub = list(multi)
        sub[axis] = local
        v = (yield operand, Index(b, _dims(operand), multi=sub))
        if result is None:
            result = v
        else:  # positions at or after this operand's start take its value
            here = b.icmp_signed(">=", pos, _c(offset), name=f"{instr.name}.in{k}")
            result = b.select(here, v, result, name=f"{instr.name}.v{k}")
        offset += size
    if result is None:  # every operand is empty, so is the result: no element is read
        from xlapy.backends.cpu.elemental import TYPES
        return ir.Constant(TYPES[instr.shape.element_type][1], ir.Undefined)
    return result


def _pad(em, instr, index):
    b = em.b
    operand, value = instr.operands
    pad_value = (yield value, Index.scalar(b))
    odims = _dims(operand)
    if 0 in odims:
        return pad_value
    inside = None
    multi = []
    for d, (i, dim) in enumerate(zip(index.multi, instr.attrs["padding"].dimensions)):
        lo, interior = dim.edge_padding_low, dim.interior_padding
        shifted = b.sub(i, _c(lo), name=f"{instr.name}.sh{d}")
        ok = b.and_(b.icmp_signed(">=", shifted, _c(0), name=f"{instr.name}.ge{d}"),
                    b.icmp_signed("<=", shifted, _c((odims[d] - 1) * (interior + 1)),
                                  name=f"{instr.name}.le{d}"), name=f"{instr.name}.ok{d}")
        if interior:
            step = _c(interior + 1)
            rem = b.srem(shifted, step, name=f"{instr.name}.rem{d}")
            ok = b.and_(ok, b.icmp_signed("==", rem, _c(0), name=f"{instr.name}.on{d}"),
                        name=f"{instr.name}.okk{d}")
            shifted = b.sdiv(shifted, step, name=f"{instr.name}.q{d}")
        multi.append(_clamp(b, shifted, 0, odims[d] - 1, f"{instr.name}.i{d}"))
        inside = ok if inside is None else b.and_(inside, ok, name=f"{instr.name}.all{d}")
    v = (yield operand, Index(b, odims, multi=multi))
    return v if inside is None else b.select(inside, v, pad_value, name=instr.name)


def _iota(em, instr, index):
    from xlapy.backends.cpu.elemental import TYPES
    b = em.b
    i = index.multi[instr.attrs["iota_dimension"]]
    kind, ty = TYPES[instr.shape.element_type]
    if kind == "f":
        return b.sitofp(i, ty, name=instr.name)
    if kind == "p":
        return b.icmp_unsigned("!=", i, _c(0), name=instr.name)
    return i if ty.width == 64 else b.trunc(i, ty, name=instr.name)


def _start_indices(em, instr, first: int, sizes, name: str):
    """The clamped start indices of a dynamic (update-)slice: operands ``first``, ... are
    scalars; start = clamp(start, 0, dim - size) as XLA does, unsigned starts by value (a
    u64 start of 2**64 - 1 clamps to dim - size, as XLA:CPU)."""
    from xlapy.backends.cpu.elemental import TYPES
    b = em.b
    operand_dims = _dims(instr.operands[0])
    out = []
    for d, (n, size) in enumerate(zip(operand_dims, sizes)):
        s_instr = instr.operands[first + d]
        s = (yield s_instr, Index.scalar(b))
        kind, ty = TYPES[s_instr.shape.element_type]
        if ty.width < 64:
            s = b.sext(s, I64, name=f"{name}.w{d}") if kind == "s" else b.zext(
                s, I64, name=f"{name}.w{d}")
        elif kind == "u":  # 2**63 or more: beyond every dimension, saturate (not wrap)
            s = b.select(b.icmp_signed("<", s, _c(0)), _c(2**63 - 1), s, name=f"{name}.u{d}")
        out.append(_clamp(b, s, 0, n - size, f"{name}.start{d}"))
    return out


def _dynamic_slice(em, instr, index):
    b = em.b
    starts = yield from _start_indices(em, instr, 1, _dims(instr), instr.name)
    multi = [b.add(i, s, name=f"{instr.name}.i{d}")
             for d, (i, s) in enumerate(zip(index.multi, starts))]
    return (yield instr.operands[0], Index(b, _dims(instr.operands[0]), multi=multi))


def _dynamic_update_slice(em, instr, index):
    b = em.b
    operand, update = instr.operands[:2]
    udims = _dims(update)
    base = (yield operand, index)
    if 0 in udims:
        return base
    starts = yield from _start_indices(em, instr, 2, udims, instr.name)
    inside = None
    multi = []
    for d, (i, s, n) in enumerate(zip(index.multi, starts, udims)):
        rel = b.sub(i, s, name=f"{instr.name}.rel{d}")
        ok = b.icmp_unsigned("<", rel, _c(n), name=f"{instr.name}.in{d}")  # 0 <= rel < n
        inside = ok if inside is None else b.and_(inside, ok, name=f"{instr.name}.all{d}")
        multi.append(_clamp(b, rel, 0, n - 1, f"{instr.name}.u{d}"))
    v = (yield update, Index(b, udims, multi=multi))
    return base if inside is None else b.select(inside, v, base, name=instr.name)


def _gather(em, instr, index):
    """XLA's gather at output ``index``: the start-index vector read from the indices at the
    output's batch position (index_vector_dim's components, signed by sign extension,
    unsigned by value), each start clamped so its slice fits (``clamp(S, 0, dim - size)``),
    explicit batching dimensions taking the batch position itself, the offset dimensions
    added; the operand's element there."""
    from xlapy.backends.cpu.elemental import TYPES
    b = em.b
    operand, indices = instr.operands
    dn = instr.attrs["gather_dimension_numbers"]
    sizes = [int(v) for v in instr.attrs["slice_sizes"]]
    odims, idims = _dims(operand), _dims(indices)
    rank = len(odims)
    offset_dims = list(dn.offset_dims)
    batch = [index.multi[k] for k in range(len(index.dims)) if k not in offset_dims]
    offset_operand = [d for d in range(rank) if d not in dn.collapsed_slice_dims
                      and d not in dn.operand_batching_dims]
    ivd = dn.index_vector_dim
    kind, ty = TYPES[indices.shape.element_type]
    multi = []
    for d in range(rank):
        s = None
        if d in dn.start_index_map:
            at = list(batch)
            if ivd < len(idims):
                at.insert(ivd, _c(dn.start_index_map.index(d)))
            v = (yield indices, Index(b, idims, multi=at))
            if ty.width < 64:
                v = b.sext(v, I64, name=f"{instr.name}.w{d}") if kind == "s" else b.zext(
                    v, I64, name=f"{instr.name}.w{d}")
            elif kind == "u":  # 2**63 or more: beyond every dimension, saturate
                v = b.select(b.icmp_signed("<", v, _c(0)), _c(2**63 - 1), v,
                             name=f"{instr.name}.u{d}")
            s = _clamp(b, v, 0, max(odims[d] - sizes[d], 0), f"{instr.name}.s{d}")
        elif d in dn.operand_batching_dims:
            k = dn.start_indices_batching_dims[list(dn.operand_batching_dims).index(d)]
            s = batch[k - (1 if k > ivd else 0)]
        if d in offset_operand:
            w = index.multi[offset_dims[offset_operand.index(d)]]
            s = w if s is None else b.add(s, w, name=f"{instr.name}.o{d}")
        multi.append(_c(0) if s is None else s)
    return (yield operand, Index(b, odims, multi=multi))


#: opcode -> generator(emitter, instr, index): a Python generator that yields ``(operand,
#: index)`` for each operand element it needs (the emitter sends the value back) and returns
#: the element (iota, needing none, returns it directly).
GENERATORS = {
    "broadcast": _broadcast,
    "reshape": _same_position,
    "bitcast": _same_position,
    "copy": _same_position,
    "transpose": _transpose,
    "slice": _slice,
    "reverse": _reverse,
    "concatenate": _concatenate,
    "pad": _pad,
    "iota": _iota,
    "dynamic-slice": _dynamic_slice,
    "dynamic-update-slice": _dynamic_update_slice,
    "gather": _gather,
}


def supports(instr) -> bool:
    """Whether the movement generator applies (array shapes, same element type in and out,
    row-major layouts where the op's meaning depends on them)."""
    from xlapy.backends.cpu.elemental import TYPES
    op = instr.opcode
    shape = instr.shape
    if op not in GENERATORS or not shape.is_array() or shape.element_type not in TYPES:
        return False
    if shape.is_dynamic():
        return False
    if op == "iota":
        return True
    data = instr.operands[0]
    if not data.shape.is_array() or data.shape.element_type != shape.element_type:
        return False
    if op == "bitcast":
        return _row_major(shape) and _row_major(data.shape)
    if op in ("dynamic-slice", "dynamic-update-slice"):
        first = 1 if op == "dynamic-slice" else 2
        if op == "dynamic-update-slice" and instr.operands[1].shape.element_type != \
                shape.element_type:
            return False
        return all(o.shape.is_array() and not o.shape.dimensions and
                   o.shape.element_type in TYPES and TYPES[o.shape.element_type][0] in "su"
                   for o in instr.operands[first:])
    if op == "pad":
        return instr.operands[1].shape.element_type == shape.element_type
    if op == "gather":
        it = instr.operands[1].shape
        return it.is_array() and not it.is_dynamic() and it.element_type in TYPES and \
            TYPES[it.element_type][0] in "su"
    if op == "concatenate":
        return all(o.shape.element_type == shape.element_type for o in instr.operands)
    return True


def _row_major(shape) -> bool:
    layout = shape.layout
    if layout is None:
        return True
    n = len(shape.dimensions)
    return tuple(layout.minor_to_major) == tuple(range(n - 1, -1, -1)) and not layout.tiles


__all__ = ["GENERATORS", "I64", "Index", "supports"]

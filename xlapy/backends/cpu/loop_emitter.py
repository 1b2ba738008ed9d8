"""Loop kernels: one LLVM function computing a loop fusion (or one elementwise/movement
instruction) over its output's elements, in XLA:CPU's way: a loop nest over the output
index, each element generated from the inputs by the element generators
(``elemental.ElementalEmitter``, ``indexing``), so producers never materialise.

``emit_loop(module, name, roots, inputs, scalars)``:

- ``roots``: the instructions whose values are written (one output buffer each, in order;
  all of the same dimensions - a multi-output loop fusion's tuple elements),
- ``inputs``: the instructions read from input buffers (``bufs[0..]``),
- ``scalars``: id(rank-0 constant) -> value, embedded as immediates.

Every instruction reached from a root before an input is generated. When every generated
instruction maps an output index to the same index of its operands (elementwise ops,
broadcasts of scalars, identity reshapes) the kernel is one flat counted loop over linear
positions (work items = elements), which LLVM vectorises; the loop is marked parallel
(``kernel_abi.mark_parallel``: work items are independent), so without run-time overlap
checks between its buffers, and not interleaved. Otherwise the work items are the
positions along the first dimension larger than 1, with nested loops inside, the innermost
marked parallel the same way. Rank-0 inputs (a dynamic slice's start indices) are loaded
once, before the loops.
"""

from __future__ import annotations

from llvmlite import ir

from xlapy.backends.cpu import elemental as el
from xlapy.backends.cpu.indexing import Index
from xlapy.backends.cpu.kernel_abi import (I64, KernelSpec, buffer_pointer, declare_kernel,
                                           for_range, mark_parallel, smax, smin)
from xlapy.shape import dtypes


def _dims(instr) -> tuple[int, ...]:
    return tuple(int(d) for d in instr.shape.dimensions)


def _c(v: int) -> ir.Constant:
    return ir.Constant(I64, int(v))


def members_of(roots, inputs) -> list:
    """The instructions generated for ``roots`` (reachable from them, stopping at inputs),
    in post order."""
    stop = {id(i) for i in inputs}
    seen: set[int] = set()
    out: list = []
    for root in roots:
        stack = [(root, False)]
        while stack:
            instr, expanded = stack.pop()
            if id(instr) in seen or id(instr) in stop:
                continue
            if expanded:
                seen.add(id(instr))
                out.append(instr)
                continue
            stack.append((instr, True))
            for o in reversed(instr.operands):
                if id(o) not in seen and id(o) not in stop:
                    stack.append((o, False))
    return out


def _flat(members, dims, scalars) -> bool:
    """True when every member reads its operands at the output's own position."""
    for m in members:
        if id(m) in scalars:
            continue
        if m.opcode == "broadcast":
            operand = m.operands[0]
            if _dims(operand) and not (_dims(operand) == dims and tuple(
                    m.attrs["dimensions"]) == tuple(range(len(dims)))):
                return False
            continue
        if m.opcode in ("reshape", "bitcast", "copy"):
            if _dims(m.operands[0]) != dims:
                return False
            continue
        if m.opcode in el.indexing.GENERATORS:
            return False
        if m.opcode == "bitcast-convert" and _dims(m.operands[0]) != _dims(m):
            return False  # a width change: pieces of elements at other positions
        if _dims(m) != dims:
            return False
    return True


def emit_loop(module: ir.Module, name: str, roots: list, inputs: list,
              scalars: dict) -> KernelSpec:
    dims = _dims(roots[0])
    members = members_of(roots, inputs)
    member_ids = {id(m) for m in members}
    fn, b = declare_kernel(module, name)
    bufs, lo, hi = fn.args
    in_ptr = {}
    for k, instr in enumerate(inputs):
        in_ptr[id(instr)] = buffer_pointer(b, bufs, k, el.memory_type(instr.shape.element_type),
                                           f"in{k}")
    out_ptr = [buffer_pointer(b, bufs, len(inputs) + k,
                              el.memory_type(r.shape.element_type), f"out{k}")
               for k, r in enumerate(roots)]

    # rank-0 inputs (a dynamic slice's starts, a scalar operand) loaded once, before the
    # loops: LLVM cannot hoist a load the loop's stores might alias, and a start index
    # reloaded per element keeps a slice's copy from vectorising
    once = {}
    for instr in inputs:
        if not instr.shape.dimensions and id(instr) not in scalars:
            ptr = b.gep(in_ptr[id(instr)], [ir.Constant(I64, 0)], inbounds=True,
                        name=f"{instr.name}.ptr")
            once[id(instr)] = el.load_value(b, ptr, instr.shape.element_type, instr.name)

    def loader(instr, index):
        et = instr.shape.element_type
        if id(instr) in scalars:
            return el.immediate(et, scalars[id(instr)])
        if id(instr) in once:
            return once[id(instr)]
        ptr = b.gep(in_ptr[id(instr)], [index.linear], inbounds=True, name=f"{instr.name}.ptr")
        return el.load_value(b, ptr, et, instr.name)

    pieces: dict = {}  # id(concatenate) -> the operand the positions being emitted read

    def body(index):
        emitter = el.ElementalEmitter(b, loader, member_ids - set(scalars))
        emitter.pieces = pieces
        for k, r in enumerate(roots):
            v = emitter.value_at(r, index)
            ptr = b.gep(out_ptr[k], [index.linear], inbounds=True, name=f"{r.name}.optr")
            el.store_value(b, v, ptr, r.shape.element_type, r.name)

    n = 1
    for d in dims:
        n *= d
    if _flat(members, dims, scalars) or len(dims) <= 1:
        loop = for_range(b, lo, hi, "i")
        with loop as i:
            body(Index(b, dims, linear=i))
        # Its iterations are the ABI's work items, independent: vectorised without overlap
        # checks. Not interleaved (one vector iteration per trip): it holds no reduction,
        # and its elementwise work gains nothing from it while its code (the vector body
        # and the vector epilogue) grew up to 4 times as long.
        mark_parallel(module, loop, list(in_ptr.values()) + out_ptr,
                      hints=[("llvm.loop.interleave.count", 1)])
        domain, cost = n, 1
    elif (blocks := _block_transpose(roots, members, inputs, dims)) is not None:
        operand, c, a, lanes, bits = blocks
        domain, cost = _nest_blocks(b, dims, tuple(roots[0].attrs["dimensions"]), c, a, lanes,
                                    bits, in_ptr[id(operand)], out_ptr[0], lo, hi)
    else:
        tiles = _transpose_tiles(members, dims)
        if tiles is not None:
            domain, cost = _nest_tiled(b, dims, *tiles, lo, hi, body)
        else:
            split = next((d for d, size in enumerate(dims) if size > 1), 0)
            domain, cost = dims[split], n // max(dims[split], 1)
            # the innermost loop's iterations compute distinct output elements from the
            # inputs, as work items do: parallel (vectorised without overlap checks)
            _nest(b, dims, split, lo, hi, body,
                  lambda loop: mark_parallel(module, loop, list(in_ptr.values()) + out_ptr,
                                             hints=[("llvm.loop.interleave.count", 1)]),
                  _segments(roots, members, dims, split), pieces)
    b.ret_void()
    if n == 0:  # an empty output: nothing to run (a 0 dimension under non-empty inner ones)
        domain = 0
    outputs = [r.shape for r in roots]
    return KernelSpec(name, len(inputs), outputs, domain, cost)


#: Edge of the square tiles a transposing loop nest walks (32 x 32 f32 = 4 KiB per side).
TILE = 32


def _transpose_tiles(members, dims):
    """(c, a) when a member transposes the minor dimension: output dimension ``c`` walks the
    transposed operand's contiguous dimension while ``a`` (the last) walks the output's, so
    a plain row-by-row nest reads one element per cache line; tiling c and a fixes that."""
    rank = len(dims)
    for m in members:
        if m.opcode != "transpose" or len(m.shape.dimensions) != rank:
            continue
        perm = tuple(m.attrs["dimensions"])
        if perm[-1] == rank - 1:
            continue
        c = perm.index(rank - 1)
        a = rank - 1
        if dims[c] >= 2 * TILE // 2 and dims[a] >= TILE // 2:
            return c, a
    return None


def _nest_tiled(b: ir.IRBuilder, dims, c: int, a: int, lo, hi, body) -> tuple[int, int]:
    """A loop nest over ``dims`` with dimensions c and a walked in TILE x TILE tiles (the
    other dimensions outside, in order). Work items: the first other dimension larger than 1,
    or else the tiles' rows (blocks of c). Returns (domain, cost per item)."""
    rank = len(dims)
    outer = [d for d in range(rank) if d not in (c, a)]
    split = next((d for d in outer if dims[d] > 1), None)
    n = 1
    for d in dims:
        n *= d
    blocks_c = -(-dims[c] // TILE)
    blocks_a = -(-dims[a] // TILE)
    multi: list = [ir.Constant(I64, 0)] * rank

    def tile_end(start, size, name):
        end = b.add(start, ir.Constant(I64, TILE), name=f"{name}.end")
        big = b.icmp_signed(">", end, ir.Constant(I64, size), name=f"{name}.over")
        return b.select(big, ir.Constant(I64, size), end, name=f"{name}.stop")

    def tiles():
        start, stop = (lo, hi) if split is None else (0, blocks_c)
        with for_range(b, start, stop, "cb") as cb:
            with for_range(b, 0, blocks_a, "ab") as ab:
                c0 = b.mul(cb, ir.Constant(I64, TILE), name="c0")
                a0 = b.mul(ab, ir.Constant(I64, TILE), name="a0")
                with for_range(b, c0, tile_end(c0, dims[c], "c"), "ci") as ci:
                    with for_range(b, a0, tile_end(a0, dims[a], "a"), "ai") as ai:
                        multi[c], multi[a] = ci, ai
                        body(Index(b, dims, multi=list(multi)))

    def level(k):
        if k == len(outer):
            tiles()
            return
        d = outer[k]
        start, stop = (lo, hi) if d == split else (0, dims[d])
        with for_range(b, start, stop, f"o{d}") as i:
            multi[d] = i
            level(k + 1)

    level(0)
    if split is None:
        return blocks_c, n // blocks_c
    return dims[split], n // dims[split]


#: Bits of the vectors a block transpose moves: a block is lanes x lanes elements, lanes =
#: BLOCK_BITS / element bits (at most MAX_LANES), halved until it divides both transposed
#: dimensions (at least MIN_LANES). At 512 bits an f32 or f64 block reads and writes whole
#: cache lines.
BLOCK_BITS = 512
MAX_LANES = 16
MIN_LANES = 4


def _block_transpose(roots, members, inputs, dims):
    """(operand, c, a, lanes, element bits) when the kernel is one transpose of an input
    buffer that moves the minor dimension, both walked dimensions (c: the output dimension
    along the operand's contiguous one; a: the output's last) multiples of ``lanes`` (a
    power of two, at least MIN_LANES): the nest then moves lanes x lanes blocks - lanes
    vector loads along the operand's rows, a transpose in registers, lanes vector stores
    along the output's rows - instead of one element (one strided load) at a time. None
    otherwise."""
    if len(roots) != 1 or len(members) != 1 or members[0] is not roots[0]:
        return None
    t = roots[0]
    rank = len(dims)
    if t.opcode != "transpose" or rank < 2 or t.operands[0] not in inputs:
        return None
    perm = tuple(t.attrs["dimensions"])
    if perm[-1] == rank - 1:
        return None
    bits = 8 * dtypes.to_dtype(t.shape.element_type).itemsize  # moved as bits, any type
    if bits not in (8, 16, 32, 64):
        return None
    c, a = perm.index(rank - 1), rank - 1
    lanes = min(MAX_LANES, BLOCK_BITS // bits)
    while lanes >= MIN_LANES and (dims[c] % lanes or dims[a] % lanes):
        lanes //= 2
    if lanes < MIN_LANES:
        return None
    return t.operands[0], c, a, lanes, bits


def _transpose_registers(b: ir.IRBuilder, rows: list) -> list:
    """The columns of the square matrix whose rows are the vectors ``rows`` (a power of two
    of them, as many lanes each): log2(n) rounds of pairing row i with row i + n/2 and
    interleaving their low halves and their high halves (the perfect shuffle, applied
    log2(n) times, is the transpose)."""
    n = len(rows)
    half = n // 2
    low = [j for i in range(half) for j in (i, n + i)]
    high = [j for i in range(half, n) for j in (i, n + i)]
    mask = ir.VectorType(ir.IntType(32), n)
    low, high = ir.Constant(mask, low), ir.Constant(mask, high)
    for _ in range(n.bit_length() - 1):
        out = []
        for i in range(half):
            x, y = rows[i], rows[i + half]
            out.append(b.shuffle_vector(x, y, low))
            out.append(b.shuffle_vector(x, y, high))
        rows = out
    return rows


def _nest_blocks(b: ir.IRBuilder, dims, perm, c: int, a: int, lanes: int, bits: int, src,
                 dst, lo, hi) -> tuple[int, int]:
    """The loop nest of a block transpose (``_block_transpose``): the output's dimensions in
    order, c and a in steps of ``lanes``, each step a lanes x lanes block moved through
    registers. So the output is written as ``lanes`` sequential streams (a block's rows)
    and the operand read as ``lanes`` of them. Work items: the first dimension (c counted in
    blocks) larger than 1. Returns (domain, cost per item)."""
    rank = len(dims)
    in_dims = [0] * rank
    for k, p in enumerate(perm):
        in_dims[p] = dims[k]
    in_strides, out_strides = [1] * rank, [1] * rank
    for d in range(rank - 2, -1, -1):
        in_strides[d] = in_strides[d + 1] * in_dims[d + 1]
        out_strides[d] = out_strides[d + 1] * dims[d + 1]
    s = [in_strides[perm[k]] for k in range(rank)]  # the operand's stride per output dim
    step = [lanes if d in (c, a) else 1 for d in range(rank)]
    extent = [dims[d] // step[d] for d in range(rank)]
    split = next((d for d in range(rank) if extent[d] > 1), 0)
    vec = ir.VectorType(ir.IntType(bits), lanes)
    vptr = vec.as_pointer()
    align = bits // 8

    def block(src_at, dst_at):
        rows = []
        for u in range(lanes):
            ptr = b.gep(src, [b.add(src_at, _c(u * s[a]))], inbounds=True, name=f"src{u}")
            rows.append(b.load(b.bitcast(ptr, vptr), name=f"row{u}", align=align))
        for t, v in enumerate(_transpose_registers(b, rows)):
            ptr = b.gep(dst, [b.add(dst_at, _c(t * out_strides[c]))], inbounds=True,
                        name=f"dst{t}")
            b.store(v, b.bitcast(ptr, vptr), align=align)

    def level(d, src_at, dst_at):
        if d == rank:
            block(src_at, dst_at)
            return
        if extent[d] == 1:
            level(d + 1, src_at, dst_at)
            return
        start, stop = (lo, hi) if d == split else (0, extent[d])
        with for_range(b, start, stop, f"o{d}") as i:
            level(d + 1, b.add(src_at, b.mul(i, _c(step[d] * s[d])), name=f"src.o{d}"),
                  b.add(dst_at, b.mul(i, _c(step[d] * out_strides[d])), name=f"dst.o{d}"))

    if extent[split] == 1:  # a single block: no loop at all
        with b.if_then(b.icmp_signed("<", lo, hi)):
            level(rank, _c(0), _c(0))
    else:
        level(0, _c(0), _c(0))
    n = 1
    for d in dims:
        n *= d
    return extent[split], n // extent[split]


#: The most segments a concatenated dimension's loop is cut into (one copy of the loop body
#: each; compile time grows with them). Past it every element selects among all the
#: operands' candidates: jnp.concatenate of 32 [64,37] arrays (times 2) took 0.81 ms so at
#: 16 segments, 0.025 ms at 64 (compile 35 -> 125 ms; XLA 0.09 ms).
MAX_SEGMENTS = 64


def _segments(roots, members, dims, split):
    """(axis, [(start, stop, {id(concatenate): operand})]) when concatenates along one
    output dimension (at or after ``split``) are read only at the output's own position
    (every path from them to a root goes through elementwise members of the output's
    dimensions): that dimension's loop is cut at their operands' boundaries, and in each
    segment every such concatenate reads one operand, at an affine index (no clamped
    candidates, no selects: the segment's loop vectorises as plain loads). None
    otherwise."""
    member_ids = {id(m) for m in members}
    root_ids = {id(r) for r in roots}

    def passes(u) -> bool:  # u reads its operands at its own position
        if _dims(u) != dims:
            return False
        if u.opcode in ("reshape", "bitcast", "copy"):
            return True
        return u.opcode not in el.indexing.GENERATORS and u.opcode != "bitcast-convert"

    pure = set()  # members read only at the output's position
    for m in reversed(members):  # users before their operands
        if _dims(m) != dims:
            continue
        users = [u for u in m.users if id(u) in member_ids]
        if id(m) not in root_ids and not users:
            continue
        if all(id(u) in pure and passes(u) for u in users):
            pure.add(id(m))
    concats = [m for m in members if m.opcode == "concatenate" and id(m) in pure]
    if not concats:
        return None
    axis = concats[0].attrs["dimensions"][0]
    concats = [c for c in concats if c.attrs["dimensions"][0] == axis]
    if axis < split:
        return None
    spans = {}  # id(concatenate) -> (start, stop, operand) of its non-empty operands
    for c in concats:
        offset, spans[id(c)] = 0, []
        for k, o in enumerate(c.operands):
            size = _dims(o)[axis]
            if size:
                spans[id(c)].append((offset, offset + size, k))
            offset += size
    cuts = sorted({0, dims[axis]} | {end for s in spans.values() for _, end, _ in s})
    if len(cuts) - 1 > MAX_SEGMENTS:
        return None
    out = []
    for start, stop in zip(cuts, cuts[1:]):
        chosen = {key: next(k for lo, hi, k in s if lo <= start < hi)
                  for key, s in spans.items()}
        out.append((start, stop, chosen))
    return axis, out


def _nest(b: ir.IRBuilder, dims, split: int, lo, hi, body, innermost=None, segments=None,
          pieces=None) -> None:
    """Loops over dims[split] in [lo, hi) and every later dimension (earlier ones are 1);
    ``body(Index)`` emits one element; ``innermost(loop)``, when given, is called with each
    innermost loop once it is emitted. ``segments`` (``_segments``): the loop over that
    axis is one loop per segment, ``pieces`` (the body's concatenate choices) set to the
    segment's while its loop is emitted."""
    zero = ir.Constant(I64, 0)
    axis, cuts = segments if segments is not None else (None, None)

    def bounds(d, start, stop):
        if d != split:
            return _c(start), _c(stop)
        return smax(b, lo, _c(start), name=f"s{d}.lo"), smin(b, hi, _c(stop), name=f"s{d}.hi")

    def level(d, multi, linear):
        if d == len(dims):
            body(Index(b, dims, linear=linear, multi=list(multi)))
            return
        ranges = [((lo, hi) if d == split else (0, dims[d]), None)] if d != axis else \
            [(bounds(d, start, stop), chosen) for start, stop, chosen in cuts]
        for (start, stop), chosen in ranges:
            if chosen is not None:
                pieces.clear()
                pieces.update(chosen)
            loop = for_range(b, start, stop, f"i{d}")
            with loop as i:
                lin = i if linear is None else b.add(
                    b.mul(linear, ir.Constant(I64, dims[d]), name=f"l{d}.m"), i, name=f"l{d}")
                level(d + 1, multi + [i], lin)
            if d == len(dims) - 1 and innermost is not None:
                innermost(loop)
        if d == axis:
            pieces.clear()

    level(split, [zero] * split, None)


__all__ = ["emit_loop", "members_of"]

"""Dots of narrow values read as 32-bit *words* of several: int8 (s8 and u8 operands,
32-bit sums) and bf16 (f32 sums) as a generated packed GEMM.

An int8 dot (what quantised layers run: ``dot(s8, s8) -> s32``) sums products of 8-bit
values in 32-bit integers that wrap (two's complement), so every order of the sums gives
the same bits. The host's integer dot-product instructions do exactly that, several
products per 32-bit lane and instruction:

- ``dot`` (AVX512-VNNI, 512-bit vectors): ``vpdpbusd`` adds to each 32-bit lane the four
  products of an unsigned byte of one operand and a signed byte of the other (64 products
  an instruction). A signed lhs is read shifted to unsigned (a' = a + 128: its top bit
  flipped), an unsigned rhs shifted to signed (b' = b - 128), and the sums corrected:
  sum a b = sum a' b' + ob sum a - oa sum b', with oa = 128 for a signed a and ob = 128
  for an unsigned b (else 0): the sums of b' over each block's columns by vpdpbusd with
  ones, a's row sums (an unsigned b only) while packing. Every term is an exact integer
  taken modulo 2^32, so the result is the dot's.
- ``madd`` (AVX2; AVX-512BW at 512 bits): both operands widened to 16 bits (exact for
  s8 and u8), ``vpmaddwd`` multiplies pairs and adds each pair into a 32-bit lane (32
  products an instruction at 512 bits), then a vector add. No correction.

A bf16 dot (``bf16``, AVX512-BF16): ``vdpbf16ps`` adds to each f32 lane the products of a
pair of bf16 values of each operand (exact in f32), one after the other, each sum rounded
(RNE) - the FMAs of the f32 route in another order: the higher k of the pair first. It
treats denormal inputs and sums as zeros whatever MXCSR says, which is XLA:CPU's default
(its FTZ/DAZ); a compile that keeps denormals (``flush_denormals=False``, ``FLUSHING``)
takes the f32 route. The operands are read as they are (no convert to f32), half the
memory of the f32 route's and twice the products an instruction.

The core has the float core's shape (gemm_packed.py: work items of row and column blocks,
the contraction in blocks of KC, panels of NR = NV * W columns, MR x NV accumulators per
tile, one compiled core per process and kind, called with the dot's parameter array) with
two differences: a *word* of G contraction values (G = 4 bytes for ``dot``, 2 16-bit
values for ``madd`` and ``bf16``) per 32-bit lane, and the lhs packed too (a block's rows
as words of MR rows, so that a tile's step broadcasts one 32-bit word per row whatever a's
layout is; rows past the item and values past the block are zero). b's panels hold, per
word and column, the word's G values of that column; contiguous columns of b are packed by
vector loads of G rows interleaved in registers, other layouts one value at a time.

Used for dots whose operands are s8 or u8 and whose result is s32 or u32
(passes/dot_upcast.py rewrites other integer results of 8-bit dots into such a dot and a
convert) above gemm_kernel's small limit, on a host with AVX2 (``supported``), and for
dots of bf16 operands with an f32 result (dot_upcast: a bf16 result is such a dot
rounded) above that limit on an AVX512-BF16 host (``bf16_supported``). The f32 / f64
route of dot_upcast keeps small dots and other hosts. Blocks: KC = 256 and packs of 512 KiB
took 0.75-0.8x of the time of KC = 512 and 256 KiB on bf16 1024^3 and 2048^3 (znver5).

Imports llvmlite and the backend's GEMM modules (gemm_packed's blocks, parameter array
and core registry; gemm_kernel's forms).
"""

from __future__ import annotations

import contextvars
import math

from llvmlite import ir

from xlapy.backends.cpu import gemm_kernel, gemm_packed
from xlapy.backends.cpu.gemm_packed import _CORE_TYPE, MR, _Dims, _splat
from xlapy.backends.cpu.kernel_abi import (
    I64,
    KernelSpec,
    buffer_pointer,
    for_range,
    smin,
)
from xlapy.shape import PrimitiveType as PT

I8, I16, I32 = ir.IntType(8), ir.IntType(16), ir.IntType(32)
F32 = ir.FloatType()


class _BFloat(ir.types._BaseFloatType):
    """LLVM's ``bfloat`` (llvmlite has no bf16 type): vdpbf16ps's operand elements."""

    null = "0.0"
    intrinsic_name = "bf16"

    def __str__(self):
        return "bfloat"


_BFloat._create_instance()
BF16 = _BFloat()
#: the kind of core, None: the host's best (``mode``); tests and benchmarks set "madd"
MODE = None
KC = 256  # contraction values of a block (words of G: 64 for dot, 128 for madd and bf16)
PACK_BYTES = 512 * 1024  # each of a's and b's packed blocks at most (stack buffers)
#: operand and result types (a, b, result) the core computes
OPERANDS = frozenset({PT.S8, PT.U8})
RESULTS = frozenset({PT.S32, PT.U32})


def _features() -> list[str]:
    from xlapy.backends.cpu.jit import get_jit

    return get_jit().features.split(",")


def supported() -> bool:
    """Whether this host runs the integer core (AVX2's 256-bit integer vectors at least)."""
    return "+avx2" in _features()


def bits() -> int:
    """The core's vector width: 512 with AVX-512BW (unless gemm_kernel.BITS says 256)."""
    if gemm_kernel.vector_bits() == 512 and "+avx512bw" in _features():
        return 512
    return 256


def mode() -> str:
    """``dot`` where the host has AVX512-VNNI and the core is 512 bits wide, else ``madd``
    (AVX-VNNI's 256-bit vpdpbusd is not used: ``madd`` on such hosts)."""
    if MODE is not None:
        return MODE
    return "dot" if bits() == 512 and "+avx512vnni" in _features() else "madd"


def _group(kind: str) -> int:
    """Contraction values per 32-bit word: G."""
    return 4 if kind == "dot" else 2


def _unit(kind: str) -> int:
    """Bytes of a packed value (a byte for dot, an i16 for madd)."""
    return 1 if kind == "dot" else 2


def _elt(kind: str) -> ir.Type:
    """The operands' elements in memory: bytes (int8 kinds) or bf16 encodings."""
    return I16 if kind == "bf16" else I8


def _elt_bytes(kind: str) -> int:
    return 2 if kind == "bf16" else 1


def _acc(kind: str) -> ir.Type:
    """The sums' type (C's elements): i32, or f32 for bf16."""
    return F32 if kind == "bf16" else I32


def _nv(width: int) -> int:
    """Vectors of columns in a panel: 4 at 512 bits (24 accumulators of 32 registers), 2 at
    256 (12 of 16)."""
    return 4 if width == 16 else 2


def _mc(kind: str) -> int:
    """Rows of a work item at most: a's packed block (mc x KC values) within PACK_BYTES."""
    return PACK_BYTES // (KC * _unit(kind)) // MR * MR


def _types(instr):
    """(lhs, rhs, result) element types of two-operand dot ``instr`` (None for a tuple)."""
    return tuple(x.shape.element_type if x.shape.is_array() else None
                 for x in (*instr.operands, instr))


def applies(instr) -> bool:
    """Whether dot ``instr`` (two operands, static shapes) of s8/u8 operands is this core's
    by its types and size: an s32/u32 result (or, for passes/dot_upcast.py, any integer
    result it can take from one), above gemm_kernel's small limit, at least a tile's rows
    (MR) and a vector of columns, on a host with AVX2."""
    if instr.opcode != "dot" or len(instr.operands) != 2:
        return False
    lhs_t, rhs_t, _ = _types(instr)
    if lhs_t not in OPERANDS or rhs_t not in OPERANDS or not supported():
        return False
    m, n, k = gemm_kernel.dot_sizes(instr)
    return m * n * k > gemm_kernel.SMALL and m >= MR and n >= bits() // 32


#: whether the compile in progress flushes denormals (XLA:CPU's FTZ/DAZ, the backend's
#: ``flush_denormals``): vdpbf16ps always does, so the bf16 core is only taken then
FLUSHING = contextvars.ContextVar("xlapy_gemm_words_flushing", default=True)


def bf16_supported() -> bool:
    """Whether this host and compile run the bf16 core: AVX512-BF16 at 512 bits, denormals
    flushed."""
    return bits() == 512 and "+avx512bf16" in _features() and FLUSHING.get()


def applies_bf16(instr) -> bool:
    """Whether dot ``instr`` of bf16 operands with a bf16 or f32 result is the bf16 core's
    (for passes/dot_upcast.py: its sums in f32): above gemm_kernel's small limit, at least a
    tile's rows and a vector of columns, on a host that runs the core."""
    if instr.opcode != "dot" or len(instr.operands) != 2:
        return False
    lhs_t, rhs_t, et = _types(instr)
    if lhs_t != PT.BF16 or rhs_t != PT.BF16 or et not in (PT.BF16, PT.F32) or \
            not bf16_supported():
        return False
    m, n, k = gemm_kernel.dot_sizes(instr)
    return m * n * k > gemm_kernel.SMALL and m >= MR and n >= 16


def form(instr):
    """The Form (kind "int8" or "bf16") of dot ``instr`` of s8/u8 operands with an s32/u32
    result or of bf16 operands with an f32 result, or a reason string."""
    lhs_t, rhs_t, et = _types(instr)
    if lhs_t == PT.BF16 and rhs_t == PT.BF16 and et == PT.F32:
        if not applies_bf16(instr):
            return "a bf16 dot too small for the bf16 core (or a host or compile without it)"
        fields = gemm_kernel.dot_fields(instr)
        if None in (fields["a_k"], fields["b_k"], fields["b_n"], fields["a_row"]):
            return "dimensions that do not read as one strided dimension each"
        return gemm_kernel.Form(kind="bf16", core="bf16", width=16, itemsize=2,
                                unsigned=(False, False), rows=MR, cols=_nv(16),
                                swapped=False, et=et, shape=instr.shape, **fields)
    if et not in RESULTS or lhs_t not in OPERANDS or rhs_t not in OPERANDS:
        return "not an s8/u8 dot with an s32/u32 result"
    if not applies(instr):
        return "an s8/u8 dot too small for the integer core (or a host without AVX2)"
    fields = gemm_kernel.dot_fields(instr)
    if None in (fields["a_k"], fields["b_k"], fields["b_n"], fields["a_row"]):
        return "dimensions that do not read as one strided dimension each"
    kind = mode()
    width = bits() // 32
    return gemm_kernel.Form(kind="int8", core=kind, width=width, itemsize=_unit(kind),
                            unsigned=(lhs_t == PT.U8, rhs_t == PT.U8), rows=MR,
                            cols=_nv(width), swapped=False, et=et, shape=instr.shape,
                            **fields)


#: each kind's core in symbols (gemm_packed._CORE_SYMBOL)
TAGS = {"dot": "i8dot", "madd": "i8madd", "bf16": "bf16dot"}


def core(module: ir.Module, kind: str, width: int) -> ir.Function:
    """The core of ``kind`` (dot, madd, bf16) at ``width`` 32-bit lanes, declared in
    ``module`` (compiled once per process: gemm_packed.shared_core)."""
    return gemm_packed.shared_core(module, f"xlapy_gemm_packed_{TAGS[kind]}x{width}",
                                   lambda mod, name: _emit_core(mod, name, kind, width))


def _c(v: int) -> ir.Constant:
    return ir.Constant(I64, int(v))


def _c32(v: int) -> ir.Constant:
    return ir.Constant(I32, int(v))


def _intrinsic(module: ir.Module, kind: str, width: int) -> ir.Function:
    """vpdpbusd (acc, unsigned bytes, signed bytes), vpmaddwd (i16 pairs, i16 pairs) or
    vdpbf16ps (acc, bf16 pairs, bf16 pairs)."""
    v32 = ir.VectorType(I32, width)
    if kind == "bf16":
        name = "llvm.x86.avx512bf16.dpbf16ps.512"
        pairs = ir.VectorType(BF16, 2 * width)
        ty = ir.FunctionType(ir.VectorType(F32, width), [ir.VectorType(F32, width), pairs,
                                                         pairs])
    elif kind == "dot":
        name = f"llvm.x86.avx512.vpdpbusd.{width * 32}"
        ty = ir.FunctionType(v32, [v32, v32, v32])
    else:
        name = "llvm.x86.avx512.pmaddw.d.512" if width == 16 else "llvm.x86.avx2.pmadd.wd"
        v16 = ir.VectorType(I16, 2 * width)
        ty = ir.FunctionType(v32, [v16, v16])
    try:
        return module.get_global(name)
    except KeyError:
        return ir.Function(module, ty, name=name)


class _Conv:
    """How a's and b's bytes become packed values: for ``dot`` a byte XOR a mask (a signed
    a flipped to unsigned, an unsigned b to signed), for ``madd`` widened to i16 (sign- or
    zero-extended); and the correction's offsets oa, ob (see the module docstring)."""

    def __init__(self, b, kind, d):
        self.kind = kind
        self.a_unsigned = b.icmp_signed("!=", d.a_unsigned, _c(0), name="a.uns")
        self.b_unsigned = b.icmp_signed("!=", d.b_unsigned, _c(0), name="b.uns")
        flip = ir.Constant(I8, 0x80)
        zero8 = ir.Constant(I8, 0)
        self.a_mask = b.select(self.a_unsigned, zero8, flip, name="a.mask")
        self.b_mask = b.select(self.b_unsigned, flip, zero8, name="b.mask")
        self.oa = b.select(self.a_unsigned, _c32(0), _c32(128), name="oa")
        self.ob = b.select(self.b_unsigned, _c32(128), _c32(0), name="ob")

    def value(self, b, x, side):
        """The packed value (i8 or i16) of byte ``x`` of operand ``side`` (a or b); a bf16
        value is its own."""
        if self.kind == "bf16":
            return x
        if self.kind == "dot":
            return b.xor(x, self.a_mask if side == "a" else self.b_mask)
        uns = self.a_unsigned if side == "a" else self.b_unsigned
        return b.select(uns, b.zext(x, I16), b.sext(x, I16))

    def vector(self, b, x, side):
        """``value`` of every element of vector ``x``."""
        if self.kind == "bf16":
            return x
        if self.kind == "dot":
            mask = self.a_mask if side == "a" else self.b_mask
            return b.xor(x, _splat(b, mask, x.type))
        uns = self.a_unsigned if side == "a" else self.b_unsigned
        wide = ir.VectorType(I16, x.type.count)
        return b.select(uns, b.zext(x, wide), b.sext(x, wide))

    def number(self, b, x, side):
        """Byte ``x`` (or each of vector ``x``) of operand ``side`` as the i32 it stands
        for."""
        uns = self.a_unsigned if side == "a" else self.b_unsigned
        ty = ir.VectorType(I32, x.type.count) if isinstance(x.type, ir.VectorType) else I32
        return b.select(uns, b.zext(x, ty), b.sext(x, ty))


def _pack_b(b, kind, d, conv, pb, buf, b_off, p0, kc, words, j0, cols, width, nv):
    """buf[panel][q][c][0:G] = b[p0 + q G + 0:G, j0 + panel NR + c] packed (zero past the
    block and past column n). Contiguous columns (b_n = 1) by whole vectors of W columns
    and whole words: G vector loads interleaved in registers; b contiguous along k (b_k =
    1) by whole words of each column; the rest value by value."""
    g = _group(kind)
    nr = nv * width
    wmax = KC // g
    unit_ty = I8 if kind == "dot" else I16
    panels = b.udiv(b.add(cols, _c(nr - 1)), _c(nr), name="pb.panels")
    whole_words = b.udiv(kc, _c(g), name="pb.ww")
    is_n = b.icmp_signed("==", d.kind, _c(gemm_packed.KIND_COLUMNS), name="pb.is_n")
    is_t = b.icmp_signed("==", d.kind, _c(gemm_packed.KIND_ALONG_K), name="pb.is_t")
    whole = b.select(is_n, b.udiv(cols, _c(width)), _c(0), name="pb.whole")
    v8 = ir.VectorType(_elt(kind), width)
    with for_range(b, 0, whole, "pb.v") as v:
        c0 = b.mul(v, _c(width), name="pb.c0")
        jp, cin = b.udiv(c0, _c(nr)), b.urem(c0, _c(nr))
        src0 = b.add(b.add(b_off, b.mul(p0, d.b_k)), b.add(j0, c0), name="pb.src0")
        with for_range(b, 0, whole_words, "pb.q") as q:
            vals = []
            for t in range(g):
                p = b.add(b.mul(q, _c(g)), _c(t))
                src = b.gep(pb, [b.add(src0, b.mul(p, d.b_k))], inbounds=True)
                vals.append(conv.vector(b, b.load(b.bitcast(src, v8.as_pointer()),
                                                  align=_elt_bytes(kind)), "b"))
            # concatenate the G rows, then interleave: element c * G + t = row t's c
            while len(vals) > 1:
                n = vals[0].type.count
                mask = ir.Constant(ir.VectorType(I32, 2 * n), list(range(2 * n)))
                vals = [b.shuffle_vector(vals[i], vals[i + 1], mask)
                        for i in range(0, len(vals), 2)]
            cat = vals[0]
            mask = ir.Constant(ir.VectorType(I32, g * width),
                               [(x % g) * width + x // g for x in range(g * width)])
            inter = b.shuffle_vector(cat, ir.Constant(cat.type, ir.Undefined), mask)
            dst = b.add(b.mul(b.add(b.mul(jp, _c(wmax)), q), _c(nr * g)), b.mul(cin, _c(g)))
            ptr = b.bitcast(b.gep(buf, [dst], inbounds=True), inter.type.as_pointer())
            b.store(inter, ptr, align=4)
    along = b.select(is_t, cols, _c(0), name="pb.along")
    word_ty = ir.VectorType(_elt(kind), g)
    with for_range(b, 0, along, "pb.c") as c:  # b along k: each column's whole words
        src0 = b.add(b.add(b_off, p0), b.mul(b.add(j0, c), d.b_n), name="pb.tsrc0")
        jp, cin = b.udiv(c, _c(nr)), b.urem(c, _c(nr))
        base = b.add(b.mul(jp, _c(wmax * nr * g)), b.mul(cin, _c(g)), name="pb.tb")
        with for_range(b, 0, whole_words, "pb.w") as q:
            src = b.gep(pb, [b.add(src0, b.mul(q, _c(g)))], inbounds=True)
            word = conv.vector(b, b.load(b.bitcast(src, word_ty.as_pointer()),
                                         align=_elt_bytes(kind)), "b")
            dst = b.gep(buf, [b.add(base, b.mul(q, _c(nr * g)))], inbounds=True)
            b.store(word, b.bitcast(dst, word.type.as_pointer()), align=_unit(kind))
    done = b.select(is_n, b.mul(whole, _c(width)), along, name="pb.done")
    # the last partial word of the columns done above, then every other column whole
    _pack_b_values(b, kind, d, conv, pb, buf, b_off, p0, kc, words, j0, _c(0), done,
                   whole_words, nr, unit_ty)
    _pack_b_values(b, kind, d, conv, pb, buf, b_off, p0, kc, words, j0, done,
                   b.mul(panels, _c(nr)), _c(0), nr, unit_ty)


def _pack_b_values(b, kind, d, conv, pb, buf, b_off, p0, kc, words, j0, c_lo, c_hi, q_lo,
                   nr, unit_ty):
    """Pack columns [c_lo, c_hi) of the block value by value, words from q_lo on."""
    g = _group(kind)
    wmax = KC // g
    zero = ir.Constant(unit_ty, 0)
    with for_range(b, c_lo, c_hi, "pv.c") as c:
        j = b.add(j0, c, name="pv.j")
        inside = b.icmp_signed("<", j, d.n, name="pv.in")
        col = b.mul(b.select(inside, j, b.sub(d.n, _c(1))), d.b_n)
        src0 = b.add(b.add(b_off, b.mul(p0, d.b_k)), col, name="pv.src0")
        jp, cin = b.udiv(c, _c(nr)), b.urem(c, _c(nr))
        base = b.add(b.mul(jp, _c(wmax * nr * g)), b.mul(cin, _c(g)), name="pv.b")
        with for_range(b, q_lo, words, "pv.q") as q:
            _pack_word(b, conv, "b", pb, src0, d.b_k, inside, kc, q, g, buf,
                       b.add(base, b.mul(q, _c(nr * g))), zero)


def _pack_word(b, conv, side, src_ptr, src0, stride, live, kc, q, g, buf, dst0, zero):
    """buf[dst0 + t] = operand ``side``'s value at src0 + (q G + t) stride packed, t < G,
    one value at a time; zero where ``live`` is false or the value is past the block
    (``kc``; nothing past it is read)."""
    for t in range(g):
        p = b.add(b.mul(q, _c(g)), _c(t))
        ok = b.and_(live, b.icmp_signed("<", p, kc))
        src = b.gep(src_ptr, [b.select(ok, b.add(src0, b.mul(p, stride)), src0)],
                    inbounds=True)
        b.store(b.select(ok, conv.value(b, b.load(src), side), zero),
                b.gep(buf, [b.add(dst0, _c(t))], inbounds=True))


def _column_sums(b, d, bbuf, colsum, jp, words, width, nv):
    """colsum[jp NR + 0:NR] = the sums over the block of panel jp's packed (signed) values
    of b, by vpdpbusd with unsigned ones (dot)."""
    nr = nv * width
    v32 = ir.VectorType(I32, width)
    step_fn = _intrinsic(b.module, "dot", width)
    ones = ir.Constant(v32, [0x01010101] * width)
    at = b.mul(jp, _c(KC // 4 * nr), name="cs.at")

    def step(q, accs):
        row = b.add(at, b.mul(q, _c(nr)))
        bvs = [b.load(b.bitcast(b.gep(bbuf, [b.add(row, _c(v * width))], inbounds=True),
                                v32.as_pointer()), align=64) for v in range(nv)]
        return [[b.call(step_fn, [acc, ones, bv]) for acc, bv in zip(accs[0], bvs)]]

    (totals,) = gemm_packed.tile_loop(b, words, v32, nv, step, rows=1)
    for v, total in enumerate(totals):
        ptr = b.gep(colsum, [b.add(b.mul(jp, _c(nr)), _c(v * width))], inbounds=True)
        b.store(total, b.bitcast(ptr, v32.as_pointer()), align=4)


def _pack_a(b, kind, d, conv, pa, abuf, rowsum, a_base, i0, rows, groups, kc, words):
    """abuf[group][q][r][0:G] = a[i0 + group MR + r, block's p = q G + 0:G] packed (zero
    for rows past ``rows`` and values past the block); rowsum[row] = the row's sum over
    the block (dot with an unsigned b only, else zero). Words of contiguous values (a_k =
    1) are loaded whole."""
    g = _group(kind)
    wmax = KC // g
    unit_ty = I8 if kind == "dot" else I16
    zero = ir.Constant(unit_ty, 0)
    word_ty = ir.VectorType(_elt(kind), g)
    whole_words = b.udiv(kc, _c(g), name="pa.ww")
    contiguous = b.icmp_signed("==", d.a_k, _c(1), name="pa.contig")
    need_sums = b.and_(ir.Constant(ir.IntType(1), kind == "dot"), conv.b_unsigned)
    with for_range(b, 0, b.mul(groups, _c(MR)), "pa.i") as i:
        gi, r = b.udiv(i, _c(MR)), b.urem(i, _c(MR))
        live = b.icmp_signed("<", i, rows, name="pa.live")
        row = b.add(a_base, b.mul(b.add(i0, smin(b, i, b.sub(rows, _c(1)))), d.a_row),
                    name="pa.row")
        base = b.add(b.mul(gi, _c(wmax * MR * g)), b.mul(r, _c(g)), name="pa.base")
        fast = b.select(b.and_(live, contiguous), whole_words, _c(0), name="pa.fast")
        with for_range(b, 0, fast, "pa.w") as q:
            src = b.gep(pa, [b.add(row, b.mul(q, _c(g)))], inbounds=True)
            word = b.load(b.bitcast(src, word_ty.as_pointer()), align=_elt_bytes(kind))
            packed = conv.vector(b, word, "a")
            dst = b.gep(abuf, [b.add(base, b.mul(q, _c(MR * g)))], inbounds=True)
            b.store(packed, b.bitcast(dst, packed.type.as_pointer()), align=_unit(kind))
        with for_range(b, fast, words, "pa.q") as q:
            _pack_word(b, conv, "a", pa, row, d.a_k, live, kc, q, g, abuf,
                       b.add(base, b.mul(q, _c(MR * g))), zero)
        slot = b.gep(rowsum, [i], inbounds=True)
        b.store(_c32(0), slot)
        with b.if_then(b.and_(need_sums, live)), for_range(b, 0, kc, "pa.s") as p:
            x = b.load(b.gep(pa, [b.add(row, b.mul(p, d.a_k))], inbounds=True))
            b.store(b.add(b.load(slot), conv.number(b, x, "a")), slot)


def _tile(b, kind, d, conv, pc, abuf, bbuf, tbuf, colsum, rowsum, c_off, i0, gi, jp, j0,
          kc, words, first, width, nv):
    """C[i0 + gi MR + 0:MR, j0 + jp NR + 0:NR] (+)= the block's sums and their correction,
    rows and columns past m and n left out."""
    g = _group(kind)
    wmax = KC // g
    nr = nv * width
    v32 = ir.VectorType(I32, width)
    vacc = ir.VectorType(_acc(kind), width)
    step_fn = _intrinsic(b.module, kind, width)
    a_at = b.mul(gi, _c(wmax * MR), name="t.a")
    b_at = b.mul(jp, _c(wmax * nr), name="t.b")

    def step(q, accs):
        at = b.add(b_at, b.mul(q, _c(nr)), name="t.bat")
        bvs = [b.load(b.bitcast(b.gep(bbuf, [b.add(at, _c(v * width))], inbounds=True),
                                v32.as_pointer()), name=f"bv{v}", align=64) for v in range(nv)]
        a_q = b.add(a_at, b.mul(q, _c(MR)), name="t.aq")
        nexts = []
        for r in range(MR):
            av = _splat(b, b.load(b.gep(abuf, [b.add(a_q, _c(r))], inbounds=True),
                                  name=f"a{r}"), v32)
            row = []
            for v in range(nv):
                if kind == "dot":
                    row.append(b.call(step_fn, [accs[r][v], av, bvs[v]]))
                elif kind == "bf16":  # acc + the two products of each lane's pair, in turn
                    pairs = ir.VectorType(BF16, 2 * width)
                    row.append(b.call(step_fn, [accs[r][v], b.bitcast(av, pairs),
                                                b.bitcast(bvs[v], pairs)]))
                else:
                    v16 = ir.VectorType(I16, 2 * width)
                    prod = b.call(step_fn, [b.bitcast(av, v16), b.bitcast(bvs[v], v16)])
                    row.append(b.add(accs[r][v], prod))
            nexts.append(row)
        return nexts

    nexts = gemm_packed.tile_loop(b, words, vacc, nv, step)
    # the correction: ob sum a - oa sum b' (dot; see the module docstring)
    if kind == "dot":
        col_at = b.mul(jp, _c(nr))
        cols_corr = [b.mul(b.load(b.bitcast(b.gep(colsum, [b.add(col_at, _c(v * width))],
                                                    inbounds=True), v32.as_pointer()),
                                  align=4), _splat(b, conv.oa, v32)) for v in range(nv)]
        for r in range(MR):
            rs = b.load(b.gep(rowsum, [b.add(b.mul(gi, _c(MR)), _c(r))], inbounds=True))
            rcorr = _splat(b, b.mul(conv.ob, rs), v32)
            for v in range(nv):
                nexts[r][v] = b.add(nexts[r][v], b.sub(rcorr, cols_corr[v]))
    i = b.add(i0, b.mul(gi, _c(MR)), name="t.i")
    jt = b.add(j0, b.mul(jp, _c(nr)), name="t.j")
    gemm_packed.store_tile(b, d, pc, tbuf, nexts, i, jt, c_off, first, 4,
                           lambda x, y: _add(b, x, y))


def _add(b, x, y):
    """x + y: wrapping for the integer kinds' sums, IEEE for bf16's."""
    if isinstance(x.type.element if isinstance(x.type, ir.VectorType) else x.type,
                  ir.IntType):
        return b.add(x, y)
    return b.fadd(x, y)


def _emit_core(module: ir.Module, name: str, kind: str, width: int) -> ir.Function:
    """The core's definition (see ``core``) in ``module``."""
    g = _group(kind)
    nv = _nv(width)
    nr = nv * width
    unit_ty = I8 if kind == "dot" else I16
    nc_max = max(nr, PACK_BYTES // (KC * _unit(kind)) // nr * nr)
    mc_max = _mc(kind)
    fn = ir.Function(module, _CORE_TYPE, name=name)
    bufs, lo, hi, params = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    d = _Dims(b, params)
    conv = _Conv(b, kind, d)
    pa, pb = (buffer_pointer(b, bufs, k, _elt(kind), side) for k, side in ((0, "a"), (1, "b")))
    pc = buffer_pointer(b, bufs, 2, _acc(kind), "c")

    def stack(ty, count, label):
        buf = b.alloca(ir.ArrayType(ty, count), name=label)
        buf.align = 64
        return b.bitcast(buf, ty.as_pointer(), name=f"{label}p")

    bbuf = stack(unit_ty, nc_max * KC, "bpack")
    abuf = stack(unit_ty, mc_max * KC, "apack")
    tbuf = stack(_acc(kind), MR * nr, "tile")
    colsum = stack(I32, nc_max, "colsum")
    rowsum = stack(I32, mc_max, "rowsum")
    abuf32 = b.bitcast(abuf, I32.as_pointer())
    bbuf32 = b.bitcast(bbuf, I32.as_pointer())
    with for_range(b, lo, hi, "item") as item:
        a_off, b_off, c_off, i0, j0, rows, cols, groups, panels = \
            gemm_packed.item_block(b, d, item, nr)
        with for_range(b, 0, d.k_blocks, "kb") as kb:
            p0 = b.mul(kb, _c(KC), name="p0")
            kc = smin(b, _c(KC), b.sub(d.k, p0), "kc")
            words = b.udiv(b.add(kc, _c(g - 1)), _c(g), name="words")
            first = b.icmp_signed("==", kb, _c(0), name="first")
            _pack_b(b, kind, d, conv, pb, bbuf, b_off, p0, kc, words, j0, cols, width, nv)
            _pack_a(b, kind, d, conv, pa, abuf, rowsum, b.add(a_off, b.mul(p0, d.a_k)), i0,
                    rows, groups, kc, words)
            with for_range(b, 0, panels, "jp") as jp:
                if kind == "dot":
                    _column_sums(b, d, bbuf32, colsum, jp, words, width, nv)
                with for_range(b, 0, groups, "g") as gi:
                    _tile(b, kind, d, conv, pc, abuf32, bbuf32, tbuf, colsum, rowsum, c_off,
                          i0, gi, jp, j0, kc, words, first, width, nv)
    b.ret_void()
    gemm_packed.run_entry(module, name, fn)
    return fn


def blocks(f) -> tuple[int, int]:
    """(row block, column block) of form ``f`` (gemm_packed.blocks with this core's
    contraction block, pack sizes and panels)."""
    return gemm_packed.blocks(f, kc=KC, mc_max=_mc(f.core), pack=PACK_BYTES,
                              nv=_nv(f.width))


def emit(module: ir.Module, name: str, f) -> KernelSpec:
    """The kernel of int8 or bf16 form ``f``: a call of the shared core with this dot's
    parameter array."""
    mc, nc = blocks(f)
    gemm_packed.core_call(module, name, core(module, f.core, f.width),
                          gemm_packed._params(f, mc, nc, kc=KC))
    count = math.prod(f.batch)
    g = _group(f.core)
    work = gemm_kernel.work(f, min(mc, f.m), min(nc, f.n)) // g
    return KernelSpec(name, 2, [f.shape], count * -(-f.m // mc) * -(-f.n // nc),
                      cost=max(1, work))

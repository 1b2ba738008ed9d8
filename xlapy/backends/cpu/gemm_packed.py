"""Mid and large dots as a generated, cache-blocked GEMM with packed rhs panels.

Used where ``gemm_kernel.form`` says so: f32/f64 dots above gemm_kernel's small limit, on
a host whose vectors are wider than the kernels of the BLAS library loaded (AVX-512 host,
OpenBLAS held to its AVX2 kernels), with the forms gemm_kernel accepts whose lhs free
dimensions also read as one strided dimension (contracting and rhs free dimensions each one
strided dimension; batch dimensions any).

One *core* per element type and vector width (``_core``: the loops below, every number of
the dot read at run time) is compiled once per process in its own module, as the worker
pool's is; a packed dot is a kernel that calls it (an external symbol) with the dot's
constant parameter array (``_params``): programs pay no compile of the loops.

Work item = one block of one matrix of the batch: ``MC`` output rows by ``nc`` output
columns (the last blocks take what is left); the items of a batch are independent, so the
runtime splits them over its worker pool (rows and column blocks and matrices alike).
An item walks the contraction in blocks of ``KC``; for each it

1. packs b[p0 : p0 + kc, j0 : j0 + nc] into a stack buffer as panels of ``NR = NV * W``
   columns (W lanes of a host vector): panel-major, then p, then NR contiguous values,
   columns past n zero (transposed or strided b is gathered here, once per block);
2. for each panel, for each group of ``MR`` rows: ``MR x NV`` vector accumulators sum
   ``a[i, p] * panel[p, 0:NR]`` over the block's p in order (a broadcast of a, NV vector
   loads of the panel serving every row; multiply and add contract to FMAs), then add the
   tile into C (the first block stores it). The last group of rows (m % MR) and the last
   panel (n % NR) run the same loop (rows past m read a's last row, columns past n are
   packed as zeros) and go into C through a small stack buffer, row by row and column by
   column: one copy of the loop per kernel keeps the compile short.

The panel being read (KC x NR) stays in L1/L2 while the rows' groups go by, and the item's
rows of a (up to MC x KC) in L2/L3 while the panels go by; an item packs its columns of b
for each of its blocks of KC, so taller items pack b fewer times (see MC). Each output is its sum over p in KC
blocks, each block summed in order: the dot's value within rounding (BLAS sums in another
order; the interpreter in f64).

The contraction may be read in *taps* (``_Dims``): T runs of k_in elements, each at its
own offset into a's rows, the k blocks cut at their ends; a dot is one tap. Library code
calls the core through ``run`` with taps, rows of two strided dimensions and C added to:
a convolution's input, read at each window offset, is its lhs in place (library.py's
convolutions), and complex products are four real ones read from the interleaved parts.

Imports llvmlite, NumPy (``run``'s parameter array), PrimitiveType and the backend's kernel
ABI only (and threads.py, buffers.py and gemm_kernel.py for the pool's size, the parallel
threshold and the packed rule).
"""

from __future__ import annotations

import ctypes
import math
import re
import threading

import numpy as np
from llvmlite import ir

from xlapy.backends.cpu.kernel_abi import (
    BUFS,
    I64,
    KERNEL_CFUNC,
    KernelSpec,
    buffer_pointer,
    declare_kernel,
    for_range,
    smin,
)
from xlapy.shape import PrimitiveType as PT

# Blocks: measured on an AVX-512 host (znver5) with benchmarks/small_gemm_sweep.py-style
# runs of 1024^3, 512x1024x1024, 64 x 256^3 and 32x128x512 f32 against XLA:CPU (6 x 4
# vectors and a 256 KB pack were best or within the noise of the best, 12 x 2 up to 15%
# slower; row blocks of up to 384 rows took 5-10% less CPU time than 192, 96 more; on
# 2026-11-29 KC 512 and a 512 KB pack, below)
MR = 6  # rows of a tile: MR x NV accumulators, NV panel vectors and a broadcast (32 regs)
NV = 4  # vectors of columns in a panel (NR = NV * W columns: 64 f32, 32 f64 on AVX-512)
KC = 512  # contraction block: a panel (KC x NR) is read from L1/L2 by each row group; C's
# tiles are read and written once per block (2048^3 f32 took 3-4% less time at 512 than at
# 256, 1024^3 2-3%, in same-process A/Bs; 1024 was no better)
MC = 172 * MR  # 1032 rows of a work item at most (a multiple of MR): each item packs b
# again, so fewer, taller items pack b fewer times (2048^3 and 1024^3 f32 took 3-5% less CPU
# time at 768-2048 than at 384 rows); MC_SPLIT: the rows of an item at least when a dot has
# fewer than ITEMS items of MC rows (its batch and column blocks), so it still spreads over
# the worker pool (None: two items per thread of the pool, threads.WORKERS: 1024^3 f32 on 2
# CPUs took 2% less CPU time as 4 items than as 8, 512x1024x1024 7%; 1024x4096x256 took 25%
# less wall time as 4 items of 258 rows than as 3 of 342, for 1-5% more CPU time)
MC_SPLIT = 192
ITEMS = None
PACK_BYTES = 512 * 1024  # the stack buffer of a work item's packed columns (KC x nc: 256
# f32 columns; 128 columns at 256 KiB were 1-2% slower)
_FLAGS = ("contract",)
#: b's layout classes (how a block is packed): contiguous columns, contiguous along k, other
KIND_COLUMNS, KIND_ALONG_K, KIND_OTHER = 0, 1, 2


def _c(v: int) -> ir.Constant:
    return ir.Constant(I64, int(v))


def blocks(f, kc: int = KC, mc_max: int = MC, pack: int = PACK_BYTES,
           nv: int = NV) -> tuple[int, int]:
    """(row block mc, column block nc) for form ``f``: the rows cut into as few blocks of at
    most ``mc_max`` (MC) as can be (more, of at least MC_SPLIT rows and as a multiple of the pool's
    threads where they can, while a dot the runtime runs in parallel has fewer than ITEMS
    work items), of about equal size (a multiple of MR), since each block packs its columns
    again. A dot with too few rows for that (a small batch of short dots, as in a
    recurrent step) cuts its columns into narrower blocks instead, whole panels of NR:
    each column block packs only its own columns, so the pool's threads share the dot at
    the price of reading a's rows once per block."""
    nr = nv * f.width
    nc = max(nr, pack // (kc * f.itemsize) // nr * nr)  # the columns a pack of b holds
    batch = math.prod(f.batch)
    others = -(-f.n // nc) * batch
    from xlapy.backends.cpu import buffers, threads
    from xlapy.backends.cpu.gemm_kernel import column_block, work

    step = threads.WORKERS if ITEMS is None else max(1, ITEMS // 2)
    items = 2 * step
    count = -(-f.m // mc_max)
    if others * count < items and work(f) >= buffers.PARALLEL_MIN_WORK:
        # blocks of at least MC_SPLIT rows, a multiple of the pool's threads where it can
        split = min(-(-items // others), f.m // MC_SPLIT)
        count = max(count, split // step * step if split >= step else split)
        if others * count < step:  # too few rows: narrower column blocks, whole panels
            want = -(-items // (count * batch))
            nc = max(nr, column_block(f.n, want, nr))
    return -(-(-(-f.m // count)) // MR) * MR, nc


def _splat(b, value, vec):
    one = b.insert_element(ir.Constant(vec, ir.Undefined), value, ir.Constant(ir.IntType(32), 0))
    mask = ir.Constant(ir.VectorType(ir.IntType(32), vec.count), [0] * vec.count)
    return b.shuffle_vector(one, ir.Constant(vec, ir.Undefined), mask)


def _pack(b, f, d, pb, buf, b_off, p0, kc, j0, cols, vec):
    """buf[panel][p][0:NR] = b[p0 + p, j0 + panel * NR + 0:NR] (zero past column n), by
    b's layout class (``d.kind``): contiguous columns by vector copies, b contiguous along
    k by W x W blocks transposed in registers, the columns left (and any other b) one by
    one."""
    w = vec.count
    nr = NV * w
    ty = vec.element
    panels = b.udiv(b.add(cols, _c(nr - 1)), _c(nr), name="pk.panels")
    whole = b.udiv(cols, _c(w), name="pk.whole")
    chunks = b.udiv(kc, _c(w), name="pk.chunks")
    is_n = b.icmp_signed("==", d.kind, _c(KIND_COLUMNS), name="pk.is_n")
    is_t = b.icmp_signed("==", d.kind, _c(KIND_ALONG_K), name="pk.is_t")
    with b.if_else(is_n) as (columns, other):
        with columns:  # whole vectors of contiguous columns: vector copies
            with for_range(b, 0, whole, "pk.v") as v:
                jp, q = b.udiv(v, _c(NV)), b.urem(v, _c(NV))
                dst0 = b.add(b.mul(jp, _c(KC * nr)), b.mul(q, _c(w)), name="pk.dst0")
                src0 = b.add(b.add(b_off, b.mul(p0, d.b_k)), b.add(j0, b.mul(v, _c(w))))
                with for_range(b, 0, kc, "pk.p") as p:
                    src = b.gep(pb, [b.add(src0, b.mul(p, d.b_k))], inbounds=True)
                    dst = b.gep(buf, [b.add(dst0, b.mul(p, _c(nr)))], inbounds=True)
                    val = b.load(b.bitcast(src, vec.as_pointer()), align=f.itemsize)
                    b.store(val, b.bitcast(dst, vec.as_pointer()), align=64)
        with other:
            with b.if_then(is_t):  # b stored transposed: W columns by W p
                with for_range(b, 0, whole, "pk.g") as g:
                    jp, q = b.udiv(g, _c(NV)), b.urem(g, _c(NV))
                    dst0 = b.add(b.mul(jp, _c(KC * nr)), b.mul(q, _c(w)), name="pk.tdst0")
                    src0 = b.add(b.add(b_off, p0), b.mul(b.add(j0, b.mul(g, _c(w))), d.b_n))
                    with for_range(b, 0, chunks, "pk.t") as t:
                        pt = b.mul(t, _c(w), name="pk.pt")
                        rows = []
                        for ci in range(w):
                            src = b.gep(pb, [b.add(src0, b.add(pt, b.mul(_c(ci), d.b_n)))],
                                        inbounds=True)
                            rows.append(b.load(b.bitcast(src, vec.as_pointer()),
                                               align=f.itemsize))
                        for r, val in enumerate(_transpose(b, rows)):
                            dst = b.gep(buf, [b.add(dst0, b.mul(b.add(pt, _c(r)), _c(nr)))],
                                        inbounds=True)
                            b.store(val, b.bitcast(dst, vec.as_pointer()), align=64)
                # the p past the last whole chunk
                _pack_columns(b, d, pb, buf, b_off, p0, kc, j0, _c(0), b.mul(whole, _c(w)),
                              b.mul(chunks, _c(w)), nr, ty)
    done = b.select(b.or_(is_n, is_t), b.mul(whole, _c(w)), _c(0), name="pk.done")
    _pack_columns(b, d, pb, buf, b_off, p0, kc, j0, done, b.mul(panels, _c(nr)), _c(0), nr,
                  ty)


def _pack_columns(b, d, pb, buf, b_off, p0, kc, j0, c_lo, c_hi, p_lo, nr, ty):
    """Pack columns [c_lo, c_hi) of the block one by one, p from p_lo (a transposed b reads
    along its rows), zero past column n."""
    with for_range(b, c_lo, c_hi, "pk.c") as c:
        j = b.add(j0, c, name="pk.j")
        inside = b.icmp_signed("<", j, d.n, name="pk.in")
        src0 = b.add(b.add(b_off, b.mul(p0, d.b_k)),
                     b.mul(b.select(inside, j, b.sub(d.n, _c(1))), d.b_n), name="pk.src0")
        dst0 = b.add(b.mul(b.udiv(c, _c(nr)), _c(KC * nr)), b.urem(c, _c(nr)), name="pk.cd0")
        with for_range(b, p_lo, kc, "pk.q") as p:
            x = b.load(b.gep(pb, [b.add(src0, b.mul(p, d.b_k))], inbounds=True))
            b.store(b.select(inside, x, ir.Constant(ty, 0.0)),
                    b.gep(buf, [b.add(dst0, b.mul(p, _c(nr)))], inbounds=True))


def _transpose(b, rows):
    """The W x W matrix of vectors ``rows`` transposed: at each level h = W/2 .. 1, the
    off-diagonal h x h blocks of every 2h x 2h block swap (two-input shuffles)."""
    w = len(rows)
    rows = list(rows)
    h = w // 2
    i32 = ir.IntType(32)
    while h:
        lo_mask = ir.Constant(ir.VectorType(i32, w),
                              [x if not x & h else w + x - h for x in range(w)])
        hi_mask = ir.Constant(ir.VectorType(i32, w),
                              [x + h if not x & h else w + x for x in range(w)])
        for i in range(w):
            if i & h:
                continue
            top, bottom = rows[i], rows[i + h]
            rows[i] = b.shuffle_vector(top, bottom, lo_mask)
            rows[i + h] = b.shuffle_vector(top, bottom, hi_mask)
        h //= 2
    return rows


def _tile(b, f, d, ptrs, buf, tbuf, a_off, c_off, i0, jp, j0, kc, first, vec):
    """C[i0 : i0 + MR, j0 + jp * NR : ... + NR] += the block's sums, the rows and columns
    past m and n left out (rows past m read a's last row, columns past n are zero).
    ``a_off``: the block's first element of a's row 0; ``c_off``: C's row 0."""
    pa, _, pc = ptrs
    w = vec.count
    nr = NV * w
    rows_i = [smin(b, b.add(i0, _c(r)), b.sub(d.m, _c(1)), f"t.i{r}") for r in range(MR)]
    flat = b.icmp_signed(">=", d.m_in, d.m, name="t.flat")
    with b.if_else(flat) as (one, two):
        with one:  # one strided dimension (every dot): i * a_row
            block_one = b.block
            one_offs = [b.mul(i, d.a_row, name=f"t.ai{r}") for r, i in enumerate(rows_i)]
        with two:
            block_two = b.block
            two_offs = [b.add(b.mul(b.udiv(i, d.m_in), d.a_outer),
                              b.mul(b.urem(i, d.m_in), d.a_row), name=f"t.aj{r}")
                        for r, i in enumerate(rows_i)]
    phis = [b.phi(I64, name=f"t.ak{r}") for r in range(MR)]
    for r, a_i in enumerate(phis):
        a_i.add_incoming(one_offs[r], block_one)
        a_i.add_incoming(two_offs[r], block_two)
    a_rows = [b.add(a_off, a_i, name=f"t.a{r}") for r, a_i in enumerate(phis)]
    panel = b.mul(jp, _c(KC * nr), name="t.panel")

    def step(p, accs):
        at = b.add(panel, b.mul(p, _c(nr)), name="t.bat")
        bvs = [b.load(b.bitcast(b.gep(buf, [b.add(at, _c(v * w))], inbounds=True),
                                vec.as_pointer()), name=f"bv{v}", align=64) for v in range(NV)]
        pk = b.mul(p, d.a_k, name="t.pk")
        nexts = []
        for r in range(MR):
            av = _splat(b, b.load(b.gep(pa, [b.add(a_rows[r], pk)], inbounds=True),
                                  name=f"av{r}"), vec)
            nexts.append([b.fadd(accs[r][v], b.fmul(av, bvs[v], flags=_FLAGS), flags=_FLAGS)
                          for v in range(NV)])
        return nexts

    nexts = tile_loop(b, kc, vec, NV, step)
    jt = b.add(j0, b.mul(jp, _c(nr)), name="t.j")
    store_tile(b, d, pc, tbuf, nexts, i0, jt, c_off, first, f.itemsize, b.fadd)


def tile_loop(b, count, acc_type, nv: int, step, rows: int = MR) -> list:
    """A loop over q < ``count`` (at least one step) carrying ``rows`` x ``nv`` accumulators
    of ``acc_type`` from zero; ``step(q, accs)`` emits one step and returns the next
    accumulators. Returns the accumulators after the last step."""
    fn = b.function
    head = b.block
    loop = fn.append_basic_block("t.q")
    done = fn.append_basic_block("t.done")
    b.branch(loop)
    b.position_at_end(loop)
    q = b.phi(I64, name="q")
    q.add_incoming(_c(0), head)
    accs = [[b.phi(acc_type, name=f"acc{r}.{v}") for v in range(nv)] for r in range(rows)]
    for row in accs:
        for acc in row:
            acc.add_incoming(ir.Constant(acc_type, None), head)
    nexts = step(q, accs)
    q_next = b.add(q, _c(1), name="q.next")
    q.add_incoming(q_next, b.block)
    for r in range(rows):
        for v in range(nv):
            accs[r][v].add_incoming(nexts[r][v], b.block)
    b.cbranch(b.icmp_signed("<", q_next, count), loop, done)
    b.position_at_end(done)
    return nexts


def store_tile(b, d, pc, tbuf, sums, i0, jt, c_off, first, align: int, add) -> None:
    """C[i0 + r, jt + v W + 0:W] = sums[r][v] (the first block's, ``first``) or
    ``add(C's, sums)``, r < MR, v < NV (vectors of W elements; ``align``: C's element
    alignment), the rows and columns past m and n left out: whole tiles by vector stores,
    the others through the stack buffer ``tbuf``, element by element."""
    vec = sums[0][0].type
    w, nv = vec.count, len(sums[0])
    nr = nv * w
    zero = ir.Constant(vec, None)  # zeros
    rows = smin(b, _c(MR), b.sub(d.m, i0), "t.rows")
    cols = smin(b, _c(nr), b.sub(d.n, jt), "t.cols")
    whole = b.and_(b.icmp_signed("==", rows, _c(MR)), b.icmp_signed("==", cols, _c(nr)))
    with b.if_else(whole) as (then, otherwise):
        with then:  # vector stores (the first block's sums, or added to C)
            for r in range(MR):
                c_row = b.add(c_off, b.mul(b.add(i0, _c(r)), d.c_row))
                for v in range(nv):
                    ptr = b.gep(pc, [b.add(c_row, b.add(jt, _c(v * w)))], inbounds=True)
                    ptr = b.bitcast(ptr, vec.as_pointer())
                    old = b.load(ptr, align=align)
                    b.store(add(sums[r][v], b.select(first, zero, old)), ptr, align=align)
        with otherwise:  # the tile through a buffer, its rows and columns inside C copied
            for r in range(MR):
                for v in range(nv):
                    ptr = b.gep(tbuf, [_c(r * nr + v * w)], inbounds=True)
                    b.store(sums[r][v], b.bitcast(ptr, vec.as_pointer()), align=64)
            with for_range(b, 0, rows, "t.r") as r:
                c_row = b.add(c_off, b.mul(b.add(i0, r), d.c_row))
                with for_range(b, 0, cols, "t.cj") as cj:
                    x = b.load(b.gep(tbuf, [b.add(b.mul(r, _c(nr)), cj)], inbounds=True))
                    ptr = b.gep(pc, [b.add(c_row, b.add(jt, cj))], inbounds=True)
                    b.store(add(x, b.select(first, ir.Constant(vec.element, None),
                                            b.load(ptr))), ptr)


class _Dims:
    """The numbers of one dot, read by the shared core from its parameter array (i64):
    m, n, k, a_k, b_k, b_n, mc, nc, row_blocks, col_blocks, k_blocks, b's layout class
    (KIND_*), the counts of batch and lhs free dimensions (nb, nm), the contraction's taps
    (its outer part: T, see below), the length of one tap (k_in) and its blocks of KC, C's
    row stride, whether the sums are added to C (1) or stored (0), whether a's and b's
    elements are unsigned (integer cores: gemm_words.py); then nb batch sizes,
    nb a strides, nb b strides, nb c strides, nm lhs free sizes, nm a strides, T tap
    offsets into a.

    The contraction is T taps of k_in each (k = T * k_in; a dot has one tap of k): element
    p = t * k_in + q of row i of a is at ``row(i) + tap[t] + q * a_k`` (b's row p at
    ``p * b_k`` as for any dot), so a convolution's input read at each window offset is a
    dot's lhs in place (``run``). The k blocks never straddle two taps."""

    HEADER = ("m", "n", "k", "a_k", "b_k", "b_n", "mc", "nc", "row_blocks", "col_blocks",
              "k_blocks", "kind", "nb", "nm", "taps", "k_in", "k_in_blocks", "c_row", "add",
              "a_unsigned", "b_unsigned")

    def __init__(self, b, params):
        for j, field in enumerate(self.HEADER):
            setattr(self, field, b.load(b.gep(params, [_c(j)], inbounds=True), name=field))
        base = _c(len(self.HEADER))

        def at(offset, name):
            return b.gep(params, [offset], inbounds=True, name=name)

        self.batch_sizes = at(base, "batch.sizes")
        self.a_batch = at(b.add(base, self.nb), "batch.a")
        self.b_batch = at(b.add(base, b.mul(self.nb, _c(2))), "batch.b")
        self.c_batch = at(b.add(base, b.mul(self.nb, _c(3))), "batch.c")
        self.m_sizes = at(b.add(base, b.mul(self.nb, _c(4))), "m.sizes")
        self.a_m = at(b.add(b.add(base, b.mul(self.nb, _c(4))), self.nm), "m.a")
        self.tap = at(b.add(b.add(base, b.mul(self.nb, _c(4))), b.mul(self.nm, _c(2))),
                      "tap")
        # the lhs free dimensions read as one strided dimension (gemm_kernel.form), or two
        # (``run``: a convolution's output rows and columns): row i's offset is
        # (i / m_in) * a_outer + (i % m_in) * a_row, m_in and a_row the last of the sizes
        # and strides, a_outer the first stride (a dot: m_in = m)
        last = b.sub(self.nm, _c(1), name="m.last")
        self.m_in = b.load(b.gep(self.m_sizes, [last], inbounds=True), name="m.in")
        self.a_row = b.load(b.gep(self.a_m, [last], inbounds=True), name="a.row")
        self.a_outer = b.load(self.a_m, name="a.outer")


def _params(f, mc: int, nc: int, kc: int = KC) -> list[int]:
    """The parameter array of form ``f`` (see _Dims); size-1 dimensions dropped, at least
    one (size 1, stride 0) in each group. C is the dot's result, row-major."""
    def group(sizes, *strides):
        keep = [j for j, size in enumerate(sizes) if size != 1] or None
        if keep is None:
            return [1], *([0] for _ in strides)
        return [sizes[j] for j in keep], *([s[j] for j in keep] for s in strides)

    c_batch = [f.m * f.n * math.prod(f.batch[j + 1:]) for j in range(len(f.batch))]
    return _table(f.m, f.n, f.a_k, f.b_k, f.b_n, mc, nc, group(f.batch, f.a_batch, f.b_batch,
                                                               c_batch),
                  ([f.m], [f.a_row]), [f.k], [0], f.n, kc=kc,
                  unsigned=getattr(f, "unsigned", (False, False)))


def _table(m, n, a_k, b_k, b_n, mc, nc, batch, rows, k_in, taps, c_row,
           add: bool = False, kc: int = KC, unsigned=(False, False)) -> list[int]:
    """The parameter array (see _Dims) of these numbers: ``batch`` (sizes, a, b and c
    strides), ``rows`` (lhs free sizes, a strides), ``k_in`` a one-element list, ``taps``
    the tap offsets into a; ``kc`` the core's contraction block, ``unsigned`` whether a's
    and b's elements are (integer cores)."""
    kind = KIND_COLUMNS if b_n == 1 else KIND_ALONG_K if b_k == 1 else KIND_OTHER
    k_in = k_in[0]
    k = k_in * len(taps)
    k_in_blocks = -(-k_in // kc)
    sizes, a_b, b_b, c_b = batch
    head = [m, n, k, a_k, b_k, b_n, mc, nc, -(-m // mc), -(-n // nc),
            k_in_blocks * len(taps), kind, len(sizes), len(rows[0]), len(taps), k_in,
            k_in_blocks, c_row, int(add), int(unsigned[0]), int(unsigned[1])]
    return head + list(sizes) + list(a_b) + list(b_b) + list(c_b) + list(rows[0]) + \
        list(rows[1]) + list(taps)


def _decode(b, item, count, sizes, strides_list, name):
    """Offsets (one per stride array) of the row-major multi-index ``item`` over ``count``
    dimensions of ``sizes`` (count >= 1; the outermost takes what is left)."""
    fn = b.function
    last = b.sub(count, _c(1), name=f"{name}.last")
    pre = b.block
    head = fn.append_basic_block(f"{name}.head")
    body = fn.append_basic_block(f"{name}.body")
    done = fn.append_basic_block(f"{name}.done")
    b.branch(head)
    b.position_at_end(head)
    dim = b.phi(I64, name=f"{name}.d")
    rest = b.phi(I64, name=f"{name}.rest")
    offs = [b.phi(I64, name=f"{name}.off{j}") for j in range(len(strides_list))]
    dim.add_incoming(last, pre)
    rest.add_incoming(item, pre)
    for off in offs:
        off.add_incoming(_c(0), pre)
    b.cbranch(b.icmp_signed(">", dim, _c(0)), body, done)
    b.position_at_end(body)
    size = b.load(b.gep(sizes, [dim], inbounds=True))
    idx = b.urem(rest, size)
    dim.add_incoming(b.sub(dim, _c(1)), body)
    rest.add_incoming(b.udiv(rest, size), body)
    for off, strides in zip(offs, strides_list):
        stride = b.load(b.gep(strides, [dim], inbounds=True))
        off.add_incoming(b.add(off, b.mul(idx, stride)), body)
    b.branch(head)
    b.position_at_end(done)
    return [b.add(off, b.mul(rest, b.load(strides, name=f"{name}.s0")), name=f"{name}.o{j}")
            for j, (off, strides) in enumerate(zip(offs, strides_list))]


_CORE_TYPE = ir.FunctionType(ir.VoidType(), [BUFS, I64, I64, I64.as_pointer()])


#: core name -> (its symbol, the CompiledModule holding it: kept alive for the process)
_CORES: dict[str, tuple] = {}
_CORES_LOCK = threading.Lock()


def _core_name(f) -> str:
    return f"xlapy_gemm_packed_{'f32' if f.itemsize == 4 else 'f64'}x{f.width}"


def _core(module: ir.Module, f, ty) -> ir.Function:
    """The packed GEMM core for elements ``ty`` declared in ``module``. The core is
    compiled once per process in its own module (through the JIT's disk cache) and its
    address made known to LLVM's symbol resolution (``llvm.add_symbol``), like the worker
    pool's module: programs only call it, so a program with packed dots pays no compile of
    its loops (~60-100 ms of LLVM time each) and its IR holds no address."""
    return shared_core(module, _core_name(f), lambda mod, name: _emit_core(mod, name, f, ty))


def shared_core(module: ir.Module, base: str, emit_core) -> ir.Function:
    """The core ``base`` (``emit_core(module, name)`` defines it, of type _CORE_TYPE, with
    its ``<name>_run`` kernel) declared in ``module``, compiled once per process (see
    ``_core``)."""
    with _CORES_LOCK:
        if base not in _CORES:
            import hashlib

            import llvmlite.binding as llvm

            from xlapy.backends.cpu.jit import get_jit

            jit = get_jit()
            # the symbol names the core's code (a hash of its IR), so a program's object
            # (disk cache) calls the core it was compiled against or fails to resolve
            draft = ir.Module(name=base)
            emit_core(draft, base)
            name = f"{base}_{hashlib.sha256(str(draft).encode()).hexdigest()[:16]}"
            own = ir.Module(name=name)
            own.triple = jit.triple
            emit_core(own, name)
            compiled = jit.compile(own)
            llvm.add_symbol(name, compiled.function_address(name))
            _CORES[base] = (name, compiled)
        name = _CORES[base][0]
    try:
        return module.get_global(name)
    except KeyError:
        return ir.Function(module, _CORE_TYPE, name=name)


#: a core's symbol as it appears in object code: element type (or an integer core's kind,
#: gemm_words.py), vector width, code hash
_CORE_SYMBOL = re.compile(
    rb"xlapy_gemm_packed_(f32|f64|i8dot|i8madd|bf16dot)x([0-9]+)_[0-9a-f]{16}")


class _CoreForm:
    """What a core depends on of a dot's form: its element size and vector width."""

    def __init__(self, itemsize: int, width: int):
        self.itemsize, self.width = itemsize, width


def provide_cores(obj: bytes) -> list[str]:
    """Make the cores object code ``obj`` calls known to LLVM's symbol resolution (compiling
    or loading them from the disk cache, as ``_core`` does), for object code loaded without
    its IR being emitted in this process (plan_cache's stored programs). Returns the
    symbols it calls that this process's cores do not answer (code of another xlapy);
    such an object must not be loaded."""
    missing = []
    for symbol in sorted({m.group(0) for m in _CORE_SYMBOL.finditer(obj)}):
        m = _CORE_SYMBOL.fullmatch(symbol)
        kind, width = m.group(1).decode(), int(m.group(2))
        draft = ir.Module(name="provide")
        if kind not in ("f32", "f64"):
            from xlapy.backends.cpu import gemm_words

            word_kind = {tag: k for k, tag in gemm_words.TAGS.items()}[kind]
            made = gemm_words.core(draft, word_kind, width).name
        else:
            itemsize = 4 if kind == "f32" else 8
            ty = ir.FloatType() if itemsize == 4 else ir.DoubleType()
            made = _core(draft, _CoreForm(itemsize, width), ty).name
        if made.encode() != symbol:
            missing.append(symbol.decode())
    return missing


def _emit_core(module: ir.Module, name: str, f, ty) -> ir.Function:
    """The core's definition (see _core) in ``module``."""
    w = f.width
    nr = NV * w
    vec = ir.VectorType(ty, w)
    nc_max = max(nr, PACK_BYTES // (KC * f.itemsize) // nr * nr)
    fn = ir.Function(module, _CORE_TYPE, name=name)
    bufs, lo, hi, params = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    d = _Dims(b, params)
    ptrs = (buffer_pointer(b, bufs, 0, ty, "a"), buffer_pointer(b, bufs, 1, ty, "b"),
            buffer_pointer(b, bufs, 2, ty, "c"))
    buf = b.alloca(ir.ArrayType(ty, KC * nc_max), name="pack")
    buf.align = 64
    buf = b.bitcast(buf, ty.as_pointer(), name="packp")
    tbuf = b.alloca(ir.ArrayType(ty, MR * nr), name="tile")
    tbuf.align = 64
    tbuf = b.bitcast(tbuf, ty.as_pointer(), name="tilep")
    with for_range(b, lo, hi, "item") as item:
        a_off, b_off, c_off, i0, j0, _rows, cols, groups, panels = item_block(b, d, item, nr)
        with for_range(b, 0, d.k_blocks, "kb") as kb:
            tap = b.udiv(kb, d.k_in_blocks, name="tap")
            q0 = b.mul(b.urem(kb, d.k_in_blocks), _c(KC), name="q0")
            p0 = b.add(b.mul(tap, d.k_in), q0, name="p0")  # b's first row of the block
            kc = smin(b, _c(KC), b.sub(d.k_in, q0), "kc")
            a_p = b.add(b.load(b.gep(d.tap, [tap], inbounds=True)), b.mul(q0, d.a_k),
                        name="a.p")  # the block's first element of a row of a
            first = b.and_(b.icmp_signed("==", kb, _c(0)),
                           b.icmp_signed("==", d.add, _c(0)), name="first")
            _pack(b, f, d, ptrs[1], buf, b_off, p0, kc, j0, cols, vec)
            with for_range(b, 0, panels, "jp") as jp:
                with for_range(b, 0, groups, "g") as g:
                    i = b.add(i0, b.mul(g, _c(MR)), name="gi")
                    _tile(b, f, d, ptrs, buf, tbuf, b.add(a_off, a_p), c_off, i, jp, j0,
                          kc, first, vec)
    b.ret_void()
    run_entry(module, name, fn)
    return fn


def item_block(b, d, item, nr: int) -> tuple:
    """Work item ``item``'s block: (a's, b's and C's offsets of its matrix of the batch, its
    first row i0 and column j0, its rows and columns, its groups of MR rows and its panels
    of ``nr`` columns); items go row blocks first, then column blocks, then the batch."""
    icb = b.urem(item, d.row_blocks, name="icb")
    rest = b.udiv(item, d.row_blocks, name="rest")
    jcb = b.urem(rest, d.col_blocks, name="jcb")
    bi = b.udiv(rest, d.col_blocks, name="bi")
    a_off, b_off, c_off = _decode(b, bi, d.nb, d.batch_sizes,
                                  [d.a_batch, d.b_batch, d.c_batch], "batch")
    i0 = b.mul(icb, d.mc, name="i0")
    j0 = b.mul(jcb, d.nc, name="j0")
    rows = smin(b, d.mc, b.sub(d.m, i0), "rows")
    cols = smin(b, d.nc, b.sub(d.n, j0), "cols")
    groups = b.udiv(b.add(rows, _c(MR - 1)), _c(MR), name="groups")
    panels = b.udiv(b.add(cols, _c(nr - 1)), _c(nr), name="panels")
    return a_off, b_off, c_off, i0, j0, rows, cols, groups, panels


def run_entry(module: ir.Module, name: str, core_fn) -> None:
    """``<name>_run``: core ``core_fn`` as a kernel of the runtime's ABI, its parameter
    array the fourth buffer (``run``: library code calls a core through the worker pool)."""
    entry, eb = declare_kernel(module, f"{name}_run")
    ebufs, elo, ehi = entry.args
    table = eb.bitcast(eb.load(eb.gep(ebufs, [_c(3)], inbounds=True)), I64.as_pointer())
    eb.call(core_fn, [ebufs, elo, ehi, table])
    eb.ret_void()


def emit(module: ir.Module, name: str, f, ty) -> KernelSpec:
    """The kernel of form ``f`` (a gemm_kernel.Form of kind "packed"), elements ``ty``: a
    call of the module's shared core (``_core``) with this dot's parameter array."""
    w = f.width
    mc, nc = blocks(f)
    if mc % MR or nc % (NV * w):
        raise ValueError(f"gemm_packed: blocks {mc} x {nc} are not whole {MR} x {NV * w} "
                         f"tiles")
    core_call(module, name, _core(module, f, ty), _params(f, mc, nc))
    from xlapy.backends.cpu.gemm_kernel import work

    count = math.prod(f.batch)
    return KernelSpec(name, 2, [f.shape], count * -(-f.m // mc) * -(-f.n // nc),
                      cost=work(f, min(mc, f.m), min(nc, f.n)))


def core_call(module: ir.Module, name: str, core, values: list[int]) -> None:
    """Kernel ``name``: a call of ``core`` with the constant parameter array ``values``."""
    table = ir.GlobalVariable(module, ir.ArrayType(I64, len(values)), name=f"{name}.params")
    table.global_constant = True
    table.linkage = "internal"
    table.initializer = ir.Constant(ir.ArrayType(I64, len(values)), values)
    fn, b = declare_kernel(module, name)
    bufs, lo, hi = fn.args
    b.call(core, [bufs, lo, hi, b.gep(table, [_c(0), _c(0)], inbounds=True)])
    b.ret_void()


def applies(dtype, m: int, n: int, taps: bool = False) -> bool:
    """Whether library code should run a [m, k] x [k, n] product of NumPy ``dtype`` through
    ``run``: a convolution's (``taps``) on any host, f32 or f64, with a tile of rows (its
    taps read in place, or an im2col matrix, against a BLAS call per tap or per chunk:
    with the core at AVX2's width, convolutions of 64 features took 0.74-0.89x of the
    BLAS paths' time with OpenBLAS's Haswell kernels, narrow ones 0.25-0.36x:
    benchmarks/conv_paths.py), another only where a dot of that type and size is the packed
    GEMM (gemm_kernel.packed_reason: an AVX-512 host whose BLAS runs AVX2 kernels)."""
    from xlapy.backends.cpu import gemm_kernel

    et = _NUMPY_TYPES.get(np.dtype(dtype))
    if et is None:
        return False
    if taps:
        return gemm_kernel.PACKED and m >= MR
    return gemm_kernel.packed_reason(et, m, n) is None


def run(dtype, *, m: int, n: int, k_in: int, taps, a: int, a_row: int, a_k: int, b: int,
        b_k: int, b_n: int, c: int, c_row: int, batch=(), m_in: int | None = None,
        a_outer: int = 0, add: bool = False, threads: bool = True) -> None:
    """C = A B through the packed core, for library code (``applies`` says where): for each
    batch index (``batch``: (size, a stride, b stride, c stride) per dimension, in
    elements), row i < m and column j < n,
    ``c[i * c_row + j] = sum over t, q of a[row(i) + taps[t] + q * a_k] *
    b[(t * k_in + q) * b_k + j * b_n]``, ``row(i) = (i // m_in) * a_outer + (i % m_in) *
    a_row`` (``m_in`` None: m, one strided dimension of rows; two: a convolution's output
    rows, each of m_in positions). ``a``, ``b``, ``c`` are addresses of elements of
    NumPy ``dtype`` (f32 or f64); C is stored, or with ``add`` the sums added to it (C +=
    A B, as a GEMM with beta 1). The sums go tap by tap, each
    in blocks of KC in order. Work items go over the worker pool (``threads``; on one of
    its threads, inline)."""
    from xlapy.backends.cpu import threads as pool
    from xlapy.backends.cpu.gemm_kernel import Form, lanes, work

    dt = np.dtype(dtype)
    et = _NUMPY_TYPES[dt]
    width = lanes(et)
    ty = ir.FloatType() if dt.itemsize == 4 else ir.DoubleType()
    sizes = [s for s, *_ in batch if s != 1] or [1]
    kept = [x for x in batch if x[0] != 1] or [(1, 0, 0, 0)]
    shape = Form(m=m, n=n, k=k_in * len(taps), batch=sizes, width=width,
                 itemsize=dt.itemsize)  # what blocks() and work() read
    mc, nc = blocks(shape)
    values = _table(m, n, a_k, b_k, b_n, mc, nc,
                    ([x[0] for x in kept], [x[1] for x in kept], [x[2] for x in kept],
                     [x[3] for x in kept]),
                    ([-(-m // (m_in or m)), m_in or m], [a_outer, a_row]), [k_in], list(taps),
                    c_row, add)
    table = np.asarray(values, np.int64)
    bufs = ctypes.cast((ctypes.c_void_p * 4)(a, b, c, table.ctypes.data), ctypes.c_void_p)
    count = math.prod(sizes) * -(-m // mc) * -(-n // nc)
    fn = _core_entry(_CoreForm(dt.itemsize, width), ty)
    pool.run_parallel(fn, bufs, count, work(shape), threads)


_NUMPY_TYPES = {np.dtype(np.float32): PT.F32, np.dtype(np.float64): PT.F64}


def _core_entry(f, ty):
    """The core's kernel-ABI entry (``_emit_core``) for form ``f``, a ctypes function."""
    base = _core_name(f)
    entry = _ENTRIES.get(base)
    if entry is None:
        _core(ir.Module(name="entry"), f, ty)
        name, compiled = _CORES[base]
        entry = _ENTRIES[base] = KERNEL_CFUNC(compiled.function_address(f"{name}_run"))
    return entry


_ENTRIES: dict[str, object] = {}


__all__ = ["KC", "MC", "MR", "NV", "applies", "blocks", "emit", "run"]

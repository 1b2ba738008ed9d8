"""Small dots as generated kernels: a batch of small GEMMs in one LLVM function, no BLAS call.

A BLAS call costs microseconds before it does any work (the call from Python, argument
marshalling, OpenBLAS's dispatch and packing), and a batched dot of small matrices pays it
per matrix; a generated kernel computes the whole batch in one native call and, as a kernel
step, also runs inside compiled while loops. ``form(instr)`` takes f32/f64 dots whose
contracting and rhs free dimensions each read as one strided dimension (any dimension
numbers otherwise: batch and lhs free dimensions are decoded per output row) and whose
matrices are tiny (``m * n * k <= TINY``), or small (``<= SMALL``) with at least ``ROWS``
rows and a vector of contiguous columns. The limits come from
benchmarks/small_gemm_sweep.py (the kernel against BLAS calls over a sweep of shapes, on a
shared AVX-512 host): up to 64^3 the kernel was faster on every shape whose accumulators
stay busy (0.3x-0.8x of the BLAS path's time; 0.1x for long batches of 32^3 matrices),
from there to 256^3 even within the noise; slower on single rows or a few columns with long
sums (one chain of dependent adds), which stay with BLAS unless tiny. At the host's 512-bit
width (2026-11-29, OpenBLAS held to Haswell) the kernel took 0.5x-0.9x of the BLAS path's
time on every swept shape up to 64^3 and 0.5x-0.7x on to 256^3, where the packed GEMM is
as fast; the limits stay.

Above SMALL, on a host whose vectors are wider than the loaded BLAS's GEMM kernels
(``packed_reason``: an AVX-512 host with OpenBLAS held to its AVX2 kernels), a dot with at
least a tile of rows and columns (6 x 64 f32, 6 x 32 f64) is gemm_packed.py's cache-blocked GEMM
(``Form.kind`` "packed"; 0.5x-0.7x of the BLAS path's time from 128^3 to 2048^3, skinny,
batched and transposed, in benchmarks/small_gemm_sweep.py --set large); elsewhere BLAS.

*Skinny* dots (fewer than ``SKINNY`` rows, b's columns contiguous, at least a tile of
them) are the small kernel at any size, on any host: it reads b in place, where the packed
GEMM would pack all of b for a few rows and a BLAS call costs more than such a product (a
recurrent step's ``h @ w``). Above SMALL their tiles are taller (``2 * ROWS`` rows of half as
many vectors: each b vector, read from L3 for a large b, serves more rows), b's rows are
prefetched ``PREFETCH`` ahead (rows a page apart defeat the hardware's stream prefetch),
and with several row blocks the kernel walks the contraction in blocks of ``KB`` rows of b,
each block serving every row block before the next (``k_blocked``: b read from memory once;
a block's sums are added to C). ``benchmarks/small_gemm_sweep.py --set loops`` measures
them in loops against BLAS calls and XLA:CPU.

*Matrix-vector* dots (a ``gemv`` form: a's and b's contracting dimensions both contiguous,
fewer than a tile of columns, at least GEMV_UNROLL vectors of k) sum along k instead: an item's
``GEMV_ROWS`` rows times ``GEMV_UNROLL`` vector accumulators per column, each b vector
loaded serving every row, the lanes summed at the end (a matrix read once at memory speed;
BLAS's GEMV through a library call cost 3-6x this in a loop). A dot whose rhs has no free
dimensions and whose lhs sums are strided (``a.T @ v``) is computed as ``dot(rhs, lhs)``,
which has the same result (``Form.swapped``: one row over a's contiguous columns, the
skinny kernel).

Work is split over the worker pool by the runtime's measure (``work``: a vector FMA counts
``FMA_COST`` elementwise elements); a dot with fewer work items than two per thread (its
batch and row blocks) cuts its columns into chunks of whole tiles (``chunks``), so a dot of
a few rows still runs on every thread.

The kernel: work item = ``ROWS`` output rows of one matrix (a batch index and rows of the
lhs free dimensions; the last item of a matrix takes what is left) and a chunk of columns
(all of them, unless cut as above). Its columns go in tiles of ``COLS`` vectors of ``W``
lanes, the host's vector width (W = 16 f32 / 8 f64 with avx512f, else 8 / 4; COLS 4 / 2):
ROWS x COLS vector accumulators sum
``a[i, p] * b[p, j:j+W]`` over p in order (multiply and add may contract to an FMA; the
independent accumulators hide the add's latency, each loaded b vector serves every row),
then the tile is stored; the columns past the last whole vector, or every column when b's
columns are not contiguous, are summed as scalars in the same order. The result
is the dot's value within rounding (BLAS sums in another order; the interpreter in f64).

Imports llvmlite and the backend's kernel ABI only.
"""

from __future__ import annotations

import functools
import itertools
import math

from llvmlite import ir

from xlapy.backends.cpu.kernel_abi import (
    I64,
    KernelSpec,
    buffer_pointer,
    declare_kernel,
    for_range,
    smin,
)
from xlapy.shape import PrimitiveType as PT

#: per-matrix m*n*k up to which a dot is a generated kernel rather than BLAS calls, when its
#: shape keeps the kernel's accumulators busy (at least ROWS rows, a vector of columns)
SMALL = 64 * 64 * 64
#: per-matrix m*n*k up to which any dot is a generated kernel (the call costs more than the
#: arithmetic, whatever the shape)
TINY = 16 * 16 * 16
#: rows below which a dot of any size over a tile of b's contiguous columns is the small
#: kernel, which reads b in place (the packed GEMM packs all of b for few rows; BLAS calls
#: cost more): recurrent steps and other skinny products. In --set loops of
#: benchmarks/small_gemm_sweep.py, 1 to 48 rows took 0.15-0.6x of BLAS's time and 0.8-1.0x
#: of the packed GEMM's from 24 rows on
SKINNY = 64
_TYPES = {PT.F32: (ir.FloatType(), 4), PT.F64: (ir.DoubleType(), 8),  # (type, bytes)
          PT.S32: (ir.IntType(32), 4), PT.U32: (ir.IntType(32), 4),
          PT.S64: (ir.IntType(64), 8), PT.U64: (ir.IntType(64), 8)}
#: Integer dots: products and sums wrap in two's complement, as XLA's integer dots do, so
#: every order gives the same bits; they take the register-tiled kernel at any size (the
#: packed GEMM and BLAS are float-only).
_INTEGER = frozenset({PT.S32, PT.U32, PT.S64, PT.U64})
_FLAGS = ("contract",)


def _integer(x) -> bool:
    """Whether ``x`` holds integers (a scalar or the elements of a vector)."""
    return isinstance(x.type.element if isinstance(x.type, ir.VectorType) else x.type,
                      ir.IntType)


def _add(b, x, y, flags=(), name=""):
    """x + y: wrapping for integers, IEEE (with ``flags``) for floats."""
    if _integer(x):
        return b.add(x, y, name=name)
    return b.fadd(x, y, flags=flags, name=name)


def _mul(b, x, y, flags=(), name=""):
    """x * y: wrapping for integers, IEEE (with ``flags``) for floats."""
    if _integer(x):
        return b.mul(x, y, name=name)
    return b.fmul(x, y, flags=flags, name=name)


def _zero(ty):
    """0 of scalar type ``ty`` (or of a vector type's elements, every lane)."""
    if isinstance(ty, ir.VectorType):
        return ir.Constant(ty, [_zero(ty.element).constant] * ty.count)
    return ir.Constant(ty, 0 if isinstance(ty, ir.IntType) else 0.0)


#: the vector width the kernels use, None: the host's (benchmarks set 256 to compare)
BITS = None


def vector_bits() -> int:
    """The host's vector register width in bits: 512 where LLVM's host features include
    avx512f (32 zmm registers), else 256 (AVX2's ymm; on a host without them LLVM splits the
    vectors into what it has)."""
    from xlapy.backends.cpu.jit import get_jit

    if BITS is not None:
        return BITS
    return 512 if "+avx512f" in get_jit().features.split(",") else 256


def lanes(et) -> int:
    """Elements of type ``et`` in one host vector: W (16 f32 / 8 f64 on AVX-512, 8 / 4 on
    AVX2)."""
    return vector_bits() // (8 * _TYPES[et][1])


#: vectors of output columns a tile sums together, by vector width in bits: ROWS * COLS
#: independent accumulators, COLS b vectors and a broadcast a value live in the loop (AVX2
#: has 16 vector registers, AVX-512 32)
COLS = {256: 2, 512: 4}


def _c(v: int) -> ir.Constant:
    return ir.Constant(I64, int(v))


def _strides(dims) -> list[int]:
    out, s = [], 1
    for d in reversed(dims):
        out.append(s)
        s *= d
    return out[::-1]


def _collapse(dims, strides, group) -> int | None:
    """The stride of ``group`` (dimensions in the dot's order) read as one dimension, None
    when they do not collapse into one strided dimension (size-1 dimensions drop out)."""
    real = [d for d in group if dims[d] != 1]
    if not real:
        return 0
    for a, b in itertools.pairwise(real):
        if strides[a] != strides[b] * dims[b]:
            return None
    return strides[real[-1]]


class Form:
    """What the kernel needs of a dot (see ``form``)."""

    def __init__(self, **kw):
        self.__dict__.update(kw)


def form(instr):
    """A ``Form`` when ``instr`` is a dot this module compiles, else a reason string."""
    if instr.opcode != "dot" or len(instr.operands) != 2:
        return "not a two-operand dot"
    if instr.shape.is_dynamic() or any(o.shape.is_dynamic() for o in instr.operands):
        return "dynamic shapes"
    if any(o.shape.is_array() and o.shape.element_type in (PT.S8, PT.U8, PT.BF16)
           for o in instr.operands):
        from xlapy.backends.cpu import gemm_words

        return gemm_words.form(instr)
    et = instr.shape.element_type if instr.shape.is_array() else None
    if et not in _TYPES or any(o.shape.element_type != et or not o.shape.is_array()
                               for o in instr.operands):
        return "not an f32, f64, s32, u32, s64 or u64 dot of operands of its type"
    lhs, rhs, lb, rb, lc, rc = _numbers(instr)
    got = _form(et, instr.shape, lhs, rhs, lb, rb, lc, rc)
    if isinstance(got, Form) and got.kind == "gemv":
        return got
    if all(d in rb or d in rc for d in range(len(rhs))):
        # the rhs has no free dimensions (a matrix times a vector) and the lhs's sums are
        # not contiguous: dot(rhs, lhs) has the same result (batch, then the lhs's free
        # dimensions), a vector times a matrix whose columns are the small kernel's
        swapped = _form(et, instr.shape, rhs, lhs, rb, lb, rc, lc)
        if isinstance(swapped, Form):
            swapped.swapped = True
            return swapped
    return got


def _numbers(instr):
    """(lhs sizes, rhs sizes, lhs batch, rhs batch, lhs contracting, rhs contracting) of
    two-operand dot ``instr``."""
    lhs, rhs = (tuple(int(d) for d in o.shape.dimensions) for o in instr.operands)
    dn = instr.attrs["dot_dimension_numbers"]
    return (lhs, rhs, list(dn.lhs_batch_dimensions), list(dn.rhs_batch_dimensions),
            list(dn.lhs_contracting_dimensions), list(dn.rhs_contracting_dimensions))


def dot_sizes(instr) -> tuple[int, int, int]:
    """(m, n, k) of two-operand dot ``instr``: its lhs free, rhs free and contracting sizes
    (one matrix of its batch)."""
    lhs, rhs, lb, rb, lc, rc = _numbers(instr)
    return (math.prod(d for j, d in enumerate(lhs) if j not in lb and j not in lc),
            math.prod(d for j, d in enumerate(rhs) if j not in rb and j not in rc),
            math.prod(lhs[j] for j in lc))


def dot_fields(instr) -> dict:
    """A Form's dimensions and strides (elements) of row-major dot ``instr``: m, n, k, the
    batch sizes and strides, the lhs free sizes and strides, and a_k, b_k, b_n, a_row
    (each dimension group read as one strided dimension, None where it does not)."""
    lhs, rhs, lb, rb, lc, rc = _numbers(instr)
    lf = [d for d in range(len(lhs)) if d not in lb and d not in lc]
    rf = [d for d in range(len(rhs)) if d not in rb and d not in rc]
    ls, rs = _strides(lhs), _strides(rhs)
    m, n, k = dot_sizes(instr)
    return {"m": m, "n": n, "k": k, "batch": [lhs[d] for d in lb],
            "a_batch": [ls[d] for d in lb], "b_batch": [rs[d] for d in rb],
            "m_dims": [lhs[d] for d in lf], "a_m": [ls[d] for d in lf],
            "a_k": _collapse(lhs, ls, lc), "b_k": _collapse(rhs, rs, rc),
            "b_n": _collapse(rhs, rs, rf), "a_row": _collapse(lhs, ls, lf)}


def _form(et, shape, lhs, rhs, lb, rb, lc, rc):
    """``form`` of a dot of ``lhs`` x ``rhs`` (dimension sizes) with these dimension numbers
    (a Form or a reason string)."""
    lf = [d for d in range(len(lhs)) if d not in lb and d not in lc]
    rf = [d for d in range(len(rhs)) if d not in rb and d not in rc]

    def prod(dims, group):
        p = 1
        for d in group:
            p *= dims[d]
        return p

    m, n, k = prod(lhs, lf), prod(rhs, rf), prod(lhs, lc)
    if m * n * k == 0:
        return "an empty dot"
    width = lanes(et)
    ls, rs = _strides(lhs), _strides(rhs)
    a_k, b_k, b_n = _collapse(lhs, ls, lc), _collapse(rhs, rs, rc), _collapse(rhs, rs, rf)
    cols = COLS[vector_bits()]
    common = dict(et=et, width=width, itemsize=_TYPES[et][1], shape=shape, m=m, n=n, k=k,
                  batch=[lhs[d] for d in lb], a_batch=[ls[d] for d in lb],
                  b_batch=[rs[d] for d in rb], m_dims=[lhs[d] for d in lf],
                  a_m=[ls[d] for d in lf], a_k=a_k, b_k=b_k, b_n=b_n,
                  a_row=_collapse(lhs, ls, lf), swapped=False)
    if a_k == 1 and b_k == 1 and n < cols * width and k >= GEMV_UNROLL * width and \
            b_n is not None:
        # every output a sum along contiguous rows of a and b (a matrix times a vector):
        # vectors along k
        return Form(kind="gemv", rows=GEMV_ROWS, cols=GEMV_UNROLL, **common)
    # few rows over a tile of contiguous columns: the small kernel reading b in place, at
    # any size (a tile's accumulators are independent sums even for one row)
    skinny = m < SKINNY and b_n == 1 and n >= cols * width
    small = m * n * k <= SMALL or skinny or et in _INTEGER
    if not small:
        why = packed_reason(et, m, n)
        if why is not None:
            return f"not small (m*n*k = {m * n * k} > {SMALL}) and {why}"
    if a_k is None or b_k is None or b_n is None:
        return "contracting or rhs free dimensions that do not read as one strided dimension"
    if not small and common["a_row"] is None:
        return f"not small (m*n*k = {m * n * k} > {SMALL}) and lhs free dimensions that " \
               f"do not read as one strided dimension (the packed GEMM's rows)"
    if small and not skinny and m * n * k > TINY and et not in _INTEGER and (
            m < ROWS or n < width or b_n != 1):
        return f"m*n*k = {m * n * k} > {TINY} with fewer than {ROWS} rows or {width} " \
               f"contiguous columns (BLAS keeps more sums in flight)"
    # a skinny dot above SMALL: taller tiles of as many accumulators, so each b vector
    # loaded (from L3 for a large b) serves more rows
    wide = skinny and m * n * k > SMALL
    return Form(kind="small" if small else "packed", rows=2 * ROWS if wide else ROWS,
                cols=max(1, cols // 2) if wide else cols, **common)


#: the BLAS kernel families (OpenBLAS's core names) whose GEMM uses 512-bit vectors
BLAS_512 = ("skylakex", "cooperlake", "sapphirerapids")


@functools.cache
def blas_vector_bits() -> int | None:
    """The vector width of the loaded BLAS library's GEMM kernels: 512 for OpenBLAS's
    AVX-512 families, 256 for the others, None when the library does not say (asked once
    per process: OpenBLAS picks its kernels when it loads)."""
    from xlapy.backends.cpu import blas

    core = blas.library_info().get("core")
    if not core:
        return None
    return 512 if core.lower() in BLAS_512 else 256


#: whether mid and large dots may use the packed GEMM (gemm_packed.py) where the rule of
#: ``packed_reason`` allows it (benchmarks turn it off to compare with BLAS)
PACKED = True


def planning_inputs() -> dict:
    """What the choice between these kernels and BLAS reads besides the dot (the plan cache
    keys stored programs by it: a process whose BLAS kernel differs plans its dots anew)."""
    from xlapy.backends.cpu import gemm_words

    return {"vector_bits": vector_bits(), "blas_vector_bits": blas_vector_bits(),
            "int8": gemm_words.mode() if gemm_words.supported() else None,
            "bf16": gemm_words.bf16_supported(),
            "packed": PACKED, "small": SMALL, "tiny": TINY, "skinny": SKINNY,
            "fma_cost": FMA_COST, "prefetch": PREFETCH, "gemv": [GEMV_ROWS, GEMV_UNROLL]}


def packed_reason(et, m: int, n: int) -> str | None:
    """None when a dot above SMALL is the packed generated GEMM (gemm_packed.py), else why
    not: the host's vectors must be wider than the BLAS library's GEMM kernels (an AVX-512
    host with OpenBLAS held to AVX2 kernels: benchmarks/small_gemm_sweep.py), and the
    matrices must fill its tiles (at least gemm_packed.MR rows and NR columns; BLAS's GEMV
    does single rows)."""
    if not PACKED:
        return "the packed GEMM is off"
    host, lib = vector_bits(), blas_vector_bits()
    if lib is None or lib >= host:
        return f"BLAS's GEMM kernels are as wide as the host's {host}-bit vectors"
    from xlapy.backends.cpu import gemm_packed

    rows, cols = gemm_packed.MR, gemm_packed.NV * lanes(et)
    if m < rows or n < cols:  # a tile's accumulators mostly idle (1024x1024x16: 1.8x BLAS)
        return f"fewer than {rows} rows or {cols} columns (a tile of the packed GEMM)"
    return None


def _decode(b, item, sizes, strides_list, name):
    """Offsets (one per stride list) of the row-major multi-index ``item`` over ``sizes``."""
    offsets = [_c(0) for _ in strides_list]
    rest = item
    for d in range(len(sizes) - 1, -1, -1):
        size = sizes[d]
        if size == 1:
            continue
        idx = b.urem(rest, _c(size), name=f"{name}.i{d}") if d else rest
        if d:
            rest = b.udiv(rest, _c(size), name=f"{name}.q{d}")
        for j, strides in enumerate(strides_list):
            if strides[d]:
                offsets[j] = b.add(offsets[j], b.mul(idx, _c(strides[d])), name=f"{name}.o{j}")
    return offsets


ROWS = 4  # output rows a work item computes together (each loaded b vector serves them all)


def _splat(b, value, vec):
    if not isinstance(vec, ir.VectorType):
        return value
    one = b.insert_element(ir.Constant(vec, ir.Undefined), value, _c(0))
    mask = ir.Constant(ir.VectorType(ir.IntType(32), vec.count), [0] * vec.count)
    return b.shuffle_vector(one, ir.Constant(vec, ir.Undefined), mask)


#: rows of b the small kernel's tiles prefetch ahead (0: none)
PREFETCH = 32


def _prefetch(module):
    """llvm.prefetch (address, rw 0: read, locality 3, cache type 1: data)."""
    name = "llvm.prefetch.p0"
    try:
        return module.get_global(name)
    except KeyError:
        i32 = ir.IntType(32)
        return ir.Function(module, ir.FunctionType(ir.VoidType(), [ir.IntType(8).as_pointer(),
                                                                   i32, i32, i32]), name=name)


def _tile(b, f, ptrs, a_rows, b_base, c_rows, j0, vec, cols, align, span=None):
    """C[rows, j0 : j0 + cols * width] for the rows whose a and c offsets are given: one
    loop over p with len(a_rows) * cols accumulators (vectors of ``vec``, or scalars).
    ``span``: None (p over the whole contraction, the sums stored), or (p_lo, p_hi, first)
    values (p over [p_lo, p_hi), the sums stored when ``first``, else added to C)."""
    pa, pb, pc = ptrs
    p_lo, p_hi, first = (_c(0), _c(f.k), None) if span is None else span
    fn = b.function
    head = b.block
    loop = fn.append_basic_block("p.body")
    done = fn.append_basic_block("p.done")
    b.branch(loop)
    b.position_at_end(loop)
    width = vec.count if isinstance(vec, ir.VectorType) else 1
    zero = _zero(vec)
    p = b.phi(I64, name="p")
    p.add_incoming(p_lo, head)
    accs = [[b.phi(vec, name=f"acc{r}.{c}") for c in range(cols)] for r in range(len(a_rows))]
    for row in accs:
        for acc in row:
            acc.add_incoming(zero, head)
    b_row = b.add(b_base, b.mul(p, _c(f.b_k)), name="brow")
    bvs = []
    for c in range(cols):
        j = b.add(j0, _c(c * width), name=f"j{c}")
        at = b.add(b_row, j if f.b_n == 1 else b.mul(j, _c(f.b_n)), name=f"bat{c}")
        ptr = b.gep(pb, [at], inbounds=True)
        if width > 1:
            ptr = b.bitcast(ptr, vec.as_pointer())
        bvs.append(b.load(ptr, name=f"bv{c}", align=align))
    if width > 1 and f.b_n == 1 and PREFETCH and f.k > PREFETCH:
        # b's rows PREFETCH ahead, line by line: rows a page or more apart defeat the
        # hardware's stream prefetch (a skinny dot over a 1024-wide b)
        ahead = b.add(b_row, _c(PREFETCH * f.b_k), name="bpf")
        line = 64 // (f.itemsize)
        for c in range(0, cols * width, line):
            ptr = b.gep(pb, [b.add(ahead, b.add(j0, _c(c)))], name=f"pf{c}")
            b.call(_prefetch(b.module), [b.bitcast(ptr, ir.IntType(8).as_pointer()),
                                         ir.Constant(ir.IntType(32), 0),
                                         ir.Constant(ir.IntType(32), 3),
                                         ir.Constant(ir.IntType(32), 1)])
    nexts = []
    for r, a_row in enumerate(a_rows):
        at = b.add(a_row, b.mul(p, _c(f.a_k)), name=f"aat{r}")
        av = _splat(b, b.load(b.gep(pa, [at], inbounds=True), name=f"av{r}"), vec)
        nexts.append([_add(b, accs[r][c], _mul(b, av, bvs[c], flags=_FLAGS), flags=_FLAGS,
                             name=f"nacc{r}.{c}") for c in range(cols)])
    p_next = b.add(p, _c(1), name="p.next")
    p.add_incoming(p_next, b.block)
    for r in range(len(a_rows)):
        for c in range(cols):
            accs[r][c].add_incoming(nexts[r][c], b.block)
    b.cbranch(b.icmp_signed("<", p_next, p_hi), loop, done)
    b.position_at_end(done)
    for r, c_row in enumerate(c_rows):
        for c in range(cols):
            ptr = b.gep(pc, [b.add(c_row, b.add(j0, _c(c * width)))], inbounds=True)
            if width > 1:
                ptr = b.bitcast(ptr, vec.as_pointer())
            value = nexts[r][c]
            if first is not None:
                old = b.load(ptr, align=align)
                value = _add(b, value, b.select(first, zero, old))
            b.store(value, ptr, align=align)


def _row_offsets(b, f, bi, r0, count):
    """(b's offset, a's row offsets, C's row offsets) of rows r0 .. r0 + count of matrix
    ``bi`` of form ``f`` (batch and lhs free dimensions decoded per row)."""
    a_off, b_off = _decode(b, bi, f.batch, [f.a_batch, f.b_batch], "batch")
    a_rows, c_rows = [], []
    for r in range(count):
        i = b.add(r0, _c(r), name=f"i{r}")
        (a_i,) = _decode(b, i, f.m_dims, [f.a_m], f"m{r}")
        a_rows.append(b.add(a_off, a_i, name=f"arow{r}"))
        c_rows.append(b.mul(b.add(b.mul(bi, _c(f.m)), i), _c(f.n), name=f"crow{r}"))
    return b_off, a_rows, c_rows


def _row_block(b, f, ptrs, bi, r0, count, vec, align, j_base, n, span=None):
    """Output rows r0 .. r0 + count of matrix ``bi``, columns j_base .. j_base + n (``n`` a
    number, ``j_base`` a value): in tiles, of more columns for fewer rows (the same count
    of accumulators: a row of b read in longer runs, more sums in flight)."""
    cols = f.cols * max(1, f.rows // count)
    width = vec.count
    b_off, a_rows, c_rows = _row_offsets(b, f, bi, r0, count)
    j = 0
    if f.b_n == 1:
        wide = n // (cols * width)
        if wide:
            with for_range(b, 0, wide, "jw") as jw:
                j0 = b.add(j_base, b.mul(jw, _c(cols * width)), name="jw0")
                _tile(b, f, ptrs, a_rows, b_off, c_rows, j0, vec, cols, align, span)
            j = wide * cols * width
        if n - j >= width:
            _tile(b, f, ptrs, a_rows, b_off, c_rows, b.add(j_base, _c(j)), vec,
                  (n - j) // width, align, span)
            j += (n - j) // width * width
    if j < n:
        with for_range(b, j, n, "js") as js:
            _tile(b, f, ptrs, a_rows, b_off, c_rows, b.add(j_base, js), vec.element, 1, align,
                  span)


#: a gemv form's item: GEMV_ROWS rows, each summing GEMV_UNROLL vectors along k at once
#: (independent accumulators; each loaded b vector serves the item's rows). 8x2, 4x4, 2x4,
#: 2x2, 1x4 and 8x1 took the same time as 4x2 on a 2048x2048 power iteration (memory speed)
GEMV_ROWS = 4
GEMV_UNROLL = 2


def _hsum(b, v, name):
    """The sum of vector ``v``'s lanes: halves added pairwise (a tree of shuffles)."""
    i32 = ir.IntType(32)
    n = v.type.count
    while n > 1:
        h = n // 2
        lo = b.shuffle_vector(v, ir.Constant(v.type, ir.Undefined),
                              ir.Constant(ir.VectorType(i32, h), list(range(h))))
        hi = b.shuffle_vector(v, ir.Constant(v.type, ir.Undefined),
                              ir.Constant(ir.VectorType(i32, h), list(range(h, n))))
        v = _add(b, lo, hi, name=f"{name}.h{h}")
        n = h
    return b.extract_element(v, ir.Constant(i32, 0), name=name)


def _gemv_rows(b, f, ptrs, bi, r0, count, vec):
    """Rows r0 .. r0 + count of matrix ``bi`` of a gemv form: for each column j, the rows'
    sums along k in vectors (``count`` x GEMV_UNROLL accumulators, then one vector, then
    scalars for the k past the last whole vector), each row's lanes summed at the end."""
    pa, pb, pc = ptrs
    w = vec.count
    u = f.cols
    zero = _zero(vec)
    b_off, a_rows, c_rows = _row_offsets(b, f, bi, r0, count)
    steps, whole = f.k // (u * w), f.k // w

    def load(ptr, base, p, name):
        at = b.gep(ptr, [b.add(base, p)], inbounds=True)
        return b.load(b.bitcast(at, vec.as_pointer()), align=f.itemsize, name=name)

    with for_range(b, 0, f.n, "j") as j:
        b_col = b.add(b_off, b.mul(j, _c(f.b_n)), name="bcol")
        fn = b.function
        head = b.block
        loop, done = fn.append_basic_block("gv.body"), fn.append_basic_block("gv.done")
        b.branch(loop)
        b.position_at_end(loop)
        q = b.phi(I64, name="q")
        q.add_incoming(_c(0), head)
        accs = [[b.phi(vec, name=f"acc{r}.{v}") for v in range(u)] for r in range(count)]
        for row in accs:
            for acc in row:
                acc.add_incoming(zero, head)
        p = b.mul(q, _c(u * w), name="gv.p")
        bvs = [load(pb, b_col, b.add(p, _c(v * w)), f"bv{v}") for v in range(u)]
        nexts = [[_add(b, accs[r][v], _mul(b, load(pa, a_rows[r], b.add(p, _c(v * w)), f"av{r}"),
                                            bvs[v], flags=_FLAGS), flags=_FLAGS)
                  for v in range(u)] for r in range(count)]
        q_next = b.add(q, _c(1), name="q.next")
        q.add_incoming(q_next, b.block)
        for r in range(count):
            for v in range(u):
                accs[r][v].add_incoming(nexts[r][v], b.block)
        b.cbranch(b.icmp_signed("<", q_next, _c(steps)), loop, done)
        b.position_at_end(done)
        sums = []
        for r in range(count):
            acc = nexts[r][0]
            for v in range(1, u):
                acc = _add(b, acc, nexts[r][v])
            for t in range(steps * u, whole):  # whole vectors past the unrolled steps
                acc = _add(b, acc, _mul(b, load(pa, a_rows[r], _c(t * w), "at"),
                                         load(pb, b_col, _c(t * w), "bt"), flags=_FLAGS),
                             flags=_FLAGS)
            s = _hsum(b, acc, f"sum{r}")
            for t in range(whole * w, f.k):  # the k past the last whole vector
                x = b.load(b.gep(pa, [b.add(a_rows[r], _c(t))], inbounds=True))
                y = b.load(b.gep(pb, [b.add(b_col, _c(t))], inbounds=True))
                s = _add(b, s, _mul(b, x, y, flags=_FLAGS), flags=_FLAGS)
            sums.append(s)
        for r in range(count):
            b.store(sums[r], b.gep(pc, [b.add(c_rows[r], j)], inbounds=True))


def k_blocked(f) -> bool:
    """Whether form ``f``'s kernel walks the contraction in blocks of ``KB`` rows of b, each
    serving every row block of the item before the next (a skinny dot over a long b with
    more than one row block: b read from memory once rather than once per row block, the
    block read again from L2)."""
    return f.rows > ROWS and f.k > KB and f.m > f.rows


def chunks(f) -> tuple[int, int]:
    """(column chunks, columns per chunk) of form ``f``'s kernel: the whole row when the dot
    has work items enough for the pool (two per thread: its batch and row blocks) or too
    little work to split; else its columns cut into chunks of whole tiles, so that a dot of
    few rows (a recurrent step's batch) still spreads over the pool's threads. A k-blocked
    kernel's item holds every row of its chunk, and a chunk at most KB_COLS columns (its
    block of b stays in L2)."""
    from xlapy.backends.cpu import buffers, threads

    blocked = k_blocked(f)
    items = (1 if blocked else -(-f.m // f.rows)) * math.prod(f.batch)
    want = 2 * threads.WORKERS
    tile = f.cols * f.width
    count = 1
    if f.b_n == 1 and items < want and work(f) >= buffers.PARALLEL_MIN_WORK:
        count = min(-(-want // items), f.n // tile)
    if blocked:
        count = max(count, -(-f.n // KB_COLS))
    if count < 2:
        return 1, f.n
    per = column_block(f.n, count, tile)
    return -(-f.n // per), per


def column_block(n: int, parts: int, tile: int) -> int:
    """The columns of each of (at most) ``parts`` blocks of ``n`` columns, whole tiles of
    ``tile`` columns (the last block takes what is left)."""
    return -(-(-(-n // parts)) // tile) * tile


#: a k-blocked kernel's block of b: KB rows by at most KB_COLS columns (256 KiB of f32)
KB = 256
KB_COLS = 256


def work(f, rows: int | None = None, cols: int | None = None) -> int:
    """The runtime's measure of ``rows`` x ``cols`` outputs of form ``f`` (default: the
    whole dot, its batch included), about an element of elementwise work
    (buffers.PARALLEL_MIN_WORK): a vector FMA counts ``FMA_COST``."""
    if rows is None:
        rows, cols = f.m * math.prod(f.batch), f.n
    return max(1, rows * cols * f.k * FMA_COST // f.width)


#: a vector FMA in the runtime's unit of work: two FMA units a cycle against an elementwise
#: element's vector load, operation and store (recurrent steps from 16x256 and 32x128 up,
#: split over 2 threads by it, took 0.5-0.65x of one thread's time in
#: benchmarks/small_gemm_sweep.py --set loops; 8x128 and 16x128 stay on one thread)
FMA_COST = 2


def emit(module: ir.Module, name: str, instr) -> KernelSpec:
    f = form(instr)
    if f.kind in ("int8", "bf16"):
        from xlapy.backends.cpu import gemm_words

        return gemm_words.emit(module, name, f)
    if f.kind == "packed":
        from xlapy.backends.cpu import gemm_packed

        return gemm_packed.emit(module, name, f, _TYPES[f.et][0])
    ty, width = _TYPES[f.et][0], f.width
    vec = ir.VectorType(ty, width)
    align = f.itemsize  # element alignment (the vectors need not be aligned)
    fn, b = declare_kernel(module, name)
    bufs, lo, hi = fn.args
    first, second = (1, 0) if f.swapped else (0, 1)  # a swapped dot reads rhs as its a
    ptrs = (buffer_pointer(b, bufs, first, ty, "a"), buffer_pointer(b, bufs, second, ty, "b"),
            buffer_pointer(b, bufs, 2, ty, "c"))
    m = f.m
    rows = f.rows
    full, tail = m // rows, m % rows
    per = full + (1 if tail else 0)  # row blocks per matrix

    def by_rows(rb, body):
        """``body(r0, count)`` for row block ``rb``: ``rows`` rows, or the tail's."""
        r0 = b.mul(rb, _c(rows), name="r0")
        if not tail:
            body(r0, rows)
        elif not full:
            body(r0, tail)
        else:
            is_full = b.icmp_unsigned("<", rb, _c(full), name="full")
            with b.if_else(is_full) as (then, otherwise):
                with then:
                    body(r0, rows)
                with otherwise:
                    body(r0, tail)

    if f.kind == "gemv":
        with for_range(b, lo, hi, "item") as item:
            bi = b.udiv(item, _c(per), name="bi") if per > 1 else item
            rb = b.urem(item, _c(per), name="rb") if per > 1 else _c(0)
            by_rows(rb, lambda r0, count: _gemv_rows(b, f, ptrs, bi, r0, count, vec))
        b.ret_void()
        return KernelSpec(name, 2, [instr.shape], math.prod(f.batch) * per,
                          cost=work(f, min(rows, m), f.n))
    count_c, per_c = chunks(f)
    last_c = f.n - (count_c - 1) * per_c  # columns of the last chunk

    blocked = k_blocked(f)

    def rows_of(bi, rb, j_base, n, span=None):
        by_rows(rb, lambda r0, count: _row_block(b, f, ptrs, bi, r0, count, vec, align,
                                                 j_base, n, span))

    def columns(bi, rb, j_base, n):
        if not blocked:
            rows_of(bi, rb, j_base, n)
            return
        # blocks of KB rows of b, each through every row block (stored, then added)
        with for_range(b, 0, -(-f.k // KB), "kb") as kb:
            p_lo = b.mul(kb, _c(KB), name="p.lo")
            p_hi = smin(b, b.add(p_lo, _c(KB)), _c(f.k), "p.hi")
            first = b.icmp_unsigned("==", kb, _c(0), name="first")
            with for_range(b, 0, per, "rb") as rbk:
                rows_of(bi, rbk, j_base, n, (p_lo, p_hi, first))

    with for_range(b, lo, hi, "item") as item:
        cc = b.urem(item, _c(count_c), name="cc") if count_c > 1 else _c(0)
        rest = b.udiv(item, _c(count_c), name="rest") if count_c > 1 else item
        if blocked:  # an item: every row of a chunk
            bi, rb = rest, None
        else:
            bi = b.udiv(rest, _c(per), name="bi") if per > 1 else rest
            rb = b.urem(rest, _c(per), name="rb") if per > 1 else _c(0)
        if count_c == 1:
            columns(bi, rb, _c(0), f.n)
        else:
            j_base = b.mul(cc, _c(per_c), name="jbase")
            is_last = b.icmp_unsigned("==", cc, _c(count_c - 1), name="lastc")
            with b.if_else(is_last) as (then, otherwise):
                with then:
                    columns(bi, rb, j_base, last_c)
                with otherwise:
                    columns(bi, rb, j_base, per_c)
    b.ret_void()
    count = math.prod(f.batch)
    if blocked:
        return KernelSpec(name, 2, [instr.shape], count * count_c, cost=work(f, m, per_c))
    return KernelSpec(name, 2, [instr.shape], count * per * count_c,
                      cost=work(f, min(rows, m), per_c))


__all__ = ["SKINNY", "SMALL", "TINY", "blas_vector_bits", "chunks", "emit", "form",
           "k_blocked", "lanes", "packed_reason", "vector_bits", "work"]

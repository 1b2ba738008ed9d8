"""Library calls of the CPU backend: dot and convolution through BLAS GEMM, sort through
NumPy's sorts, fft through scipy.fft.

The integrator asks ``supports(instr)`` once per instruction (a fast path exists) and then
calls ``run(instr, operands, out=None)`` with C-contiguous NumPy arrays (ml_dtypes for narrow
types) in logical row-major order. ``run`` returns what the interpreter's kernel returns for
the instruction (``EvalContext(None, EvalOptions()).run_instruction``): same dtype and shape,
floating values within rounding (BLAS sums in the compute type, the interpreter in f64),
integers and sort orders bit for bit. With ``out=`` (an array, or a tuple of arrays for a
tuple-shaped result) the result is written there and ``out`` is returned.

- dot: operands are viewed as [batch, M, K] x [batch, K, N] without copies wherever the
  dimension numbers allow (transposed views go to BLAS as transpose flags with their
  leading dimensions). BLAS runs single-threaded inside the backend's worker pool
  (``threads``): a batch of GEMMs is one GEMM per item, a large GEMM is cut into panels of
  rows or columns, the items handed out in turn; many tiny matrices go to numpy.matmul's
  loop. Compute type: f32 for results of f32 and narrower floats (operands such as bf16
  converted to f32, the sum rounded once to the result type), f64 when the result or an
  operand is 64-bit, c64/c128 for complex results (four real products through the packed
  GEMM's core where a real dot of the size takes it: ``_complex_by_parts``). Integer and
  pred dots of integer
  operands: NumPy's integer matmul in an unsigned type of the result's width (at least 32
  bits: two's-complement sums give the interpreter's bits; pred = any product true), rows
  over the pool.
- cholesky, triangular-solve: LAPACK xPOTRF / BLAS xTRSM (``linalg``).
- custom-call: jaxlib's LAPACK targets (``lapack_<t>potrf_ffi``, trsm, getrf, geqrf,
  orgqr/ungqr, syevd/heevd, gesdd, gesvd, geev) as jaxlib's handlers run them
  (``lapack_calls``).
- convolution: the input goes channels-last, dilated and padded ([N, spatial..., C], the
  padded buffer kept in a pool for the next call), the kernel to [spatial..., I, O]
  (reversed dimensions flipped). The whole convolution is then one product through the
  packed generated GEMM's core (``gemm_packed.run``, f32/f64 on any host: faster than a
  BLAS call per tap or per im2col chunk at AVX2's width too): any strides and dilations, the
  core reading its contraction tap by tap at the taps' offsets into the padded input
  (neighbouring taps merged), output rows over the last two spatial dimensions, the output
  written in place - no im2col, no scratch. A tap of fewer than PACKED_TAP features (a
  first layer's 3 channels): im2col over chunks of output rows (a bounded [rows, taps * I]
  scratch per thread), each chunk one product of the core. A small output with a long
  contraction (kernel gradients): im2col over chunks of taps (copied as runs along the last
  kernel dimension), every thread adding into an accumulator of its own (a bounded [all
  rows, some taps * I] scratch) with the core. Base
  (lhs) dilation with unit strides: one convolution per output phase (``_conv_phases``);
  with a non-finite kernel value, the interpreter's kernel (no product at the holes and the
  padding, as XLA:CPU).
  Without the core (gemm_kernel.PACKED off, fewer rows than its tile): unit strides as
  per-tap BLAS GEMMs accumulating into a small scratch of consecutive padded positions,
  other strides and the chunks above with BLAS. A 1x1 window with unit strides is one GEMM on the input.
  Feature groups too small for GEMMs (depthwise) are broadcast multiply-adds. Chunks are
  handed out to one thread per core (single-threaded BLAS each).
- sort: the comparator is pattern-matched into lexicographic keys: ``compare(T(p2i),
  T(p2i+1))`` LT or GT (either parameter order), chained by ``or(lt_i, and(eq_i, rest))``,
  where T is the same elementwise expression of the operand on both sides (identity, jax's
  canonicalisation of -0 and NaN, or any elementwise expression, evaluated once per element
  by the interpreter's kernels). Keys become integers in comparison order (floats through
  their TOTALORDER keys; FLOAT comparisons with -0 made +0, and NaNs sent to the interpreter,
  whose merge sort defines the order of a comparator that is not a strict weak order). A
  stable order comes from one NumPy sort of (key << 32 | position) for keys of 32 bits or
  fewer, np.lexsort otherwise; one-operand sorts sort the keys themselves and put the
  equivalent-but-different elements (zeros, NaNs) back in their original order. For
  ``is_stable=false`` rows whose equivalent elements differ in bits are replayed through the
  interpreter's libstdc++ std::sort model, which is what XLA:CPU and the interpreter do.
- fft: scipy.fft (over the cores from FFT_PARALLEL_WORK on; its 1-D transforms for one
  axis) in the operand's precision, with the interpreter's cutting and zero-padding of each
  axis to fft_length and to the result.

Imports numpy, scipy, the shape layer, the HLO attributes, the interpreter (its kernels are
the reference semantics) and xlapy.backends.cpu.blas.
"""

from __future__ import annotations

import itertools
import math
import threading

import numpy as np

from xlapy.backends.cpu import blas, gemm_packed, lapack_calls, linalg, threads, workers
from xlapy.backends.cpu.blas import blas_function_pointer
from xlapy.hlo.attrs.enums import ComparisonDirection as Dir
from xlapy.hlo.attrs.enums import ComparisonType, FftType
from xlapy.hlo.attrs.window import dilated_bound
from xlapy.interpreter.evaluator import EvalContext, EvalOptions, EvaluationError
from xlapy.interpreter.kernels.dot_conv import from_compute
from xlapy.interpreter.kernels.sort import std_sort_order, total_order_key
from xlapy.interpreter.registry import get_kernel
from xlapy.opdefs.registry import ELEMENTWISE, get_opdef
from xlapy.shape import dtypes

_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)
_C64, _C128 = np.dtype(np.complex64), np.dtype(np.complex128)


CORES = threads.WORKERS
SCRATCH_BYTES = 64 << 20  # the convolution's im2col scratch, all threads together
CHUNK_BYTES = 4 << 20  # one im2col chunk (a few MiB keeps it in the outer caches)


def supports(instr) -> bool:
    """A fast path exists for ``instr`` (run gives the interpreter kernel's result)."""
    check = _SUPPORTS.get(instr.opcode)
    try:
        return bool(check and check(instr))
    except RecursionError:  # a comparator too deep for the (recursive) pattern matchers:
        return False  # no fast path; the interpreter's kernel runs it


class NotKeyed(Exception):
    """A sort's comparator is not a strict weak order on these operands (FLOAT comparisons
    of NaNs): integer keys cannot give its order (``run(..., keyed_only=True)``)."""


def run(instr, operands, *, out=None, keyed_only=False):
    """The value of ``instr`` on ``operands`` (NumPy arrays), written into ``out`` when
    given (an array of the result's shape and dtype, or a tuple of them). A sort whose keys
    do not apply to these operands runs the interpreter's sort, or raises NotKeyed with
    ``keyed_only`` (the caller has a native sort for it)."""
    fn = _RUN.get(instr.opcode)
    if fn is None or not supports(instr):
        raise EvaluationError(f"{instr.opcode}: the CPU backend's library has no fast path for "
                              f"%{instr.name} = {instr.shape} {instr.opcode}(...)")
    operands = [np.asarray(a) for a in operands]
    if instr.opcode == "sort":
        return _run_sort(instr, operands, out, keyed_only)
    return fn(instr, operands, out)


# -- helpers ----------------------------------------------------------------------------------


def _result_dtype(instr) -> np.dtype:
    return np.dtype(dtypes.to_dtype(instr.shape.element_type))


def _float_kind(dtype: np.dtype) -> str | None:
    """'f' real floating, 'c' complex, None otherwise (integers, pred)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        return "c"
    if dtype.kind == "f":
        return "f"
    if dtype.kind in "biu":
        return None
    t = dtypes.from_dtype(dtype)
    return "f" if dtypes.is_floating(t) else None


def _compute_dtype(result: np.dtype, *operands: np.dtype) -> np.dtype:
    """The GEMM type: f32/c64 unless the result or an operand is 64-bit."""
    wide = result in (_F64, _C128) or any(np.dtype(d) in (_F64, _C128) for d in operands)
    if _float_kind(result) == "c":
        return _C128 if wide else _C64
    return _F64 if wide else _F32


def _to_compute(x: np.ndarray, compute: np.dtype) -> np.ndarray:
    if x.dtype.kind == "c" and compute.kind != "c":
        x = np.real(x)  # the interpreter takes the real part for real results
    return x if x.dtype == compute else x.astype(compute)


def _finish(value: np.ndarray, result: np.dtype, out):
    """``value`` (compute type, result shape) rounded to ``result``, into ``out`` if given."""
    if value.dtype != result:
        value = from_compute(value, result)
    if out is None:
        return np.asarray(value, order="C")  # (ascontiguousarray would make 0-d arrays 1-d)
    if value is not out:
        np.copyto(out, value, casting="unsafe")
    return out


def _direct_out(out, shape, dtype):
    """``out`` when the compute result can be written into it directly."""
    if (out is not None and isinstance(out, np.ndarray) and out.dtype == dtype
            and tuple(out.shape) == tuple(shape) and out.flags.c_contiguous
            and out.flags.writeable):
        return out
    return None


def _prod(values) -> int:
    p = 1
    for v in values:
        p *= int(v)
    return p


def _hlo_dims(a: np.ndarray) -> str:
    return f"{_type_name(a.dtype)}[{','.join(str(d) for d in a.shape)}]"


def _type_name(dtype) -> str:
    try:
        return dtypes.type_name(dtypes.from_dtype(np.dtype(dtype)))
    except Exception:  # noqa: BLE001 - a dtype xlapy has no name for: say NumPy's
        return str(dtype)


# -- GEMM over [batch, M, K] x [batch, K, N] ---------------------------------------------------


def _as3(x: np.ndarray, perm, shape3) -> np.ndarray:
    """``x`` transposed by ``perm`` and reshaped to ``shape3``, a view when possible."""
    t = np.transpose(x, perm)
    try:
        return t.reshape(shape3, copy=False)
    except ValueError:
        return np.ascontiguousarray(t).reshape(shape3)


def _form(m3: np.ndarray):
    isz = m3.itemsize
    rows, cols = m3.shape[1], m3.shape[2]
    rs, cs = m3.strides[1], m3.strides[2]
    if rs % isz or cs % isz or m3.strides[0] % isz:
        return None
    return blas.matrix_form(rows, cols, rs // isz, cs // isz)


def batched_gemm(a3: np.ndarray, b3: np.ndarray, c3: np.ndarray) -> None:
    """c3[i] = a3[i] @ b3[i] for [B, M, K] x [B, K, N] -> [B, M, N] (c3 C-contiguous, all of
    one BLAS type). Strided operands go to BLAS as they are when BLAS can read them."""
    bsz, m, k = a3.shape
    n = b3.shape[2]
    if bsz * m * n == 0:
        return
    if k == 0:
        c3[...] = 0
        return
    fa, fb = _form(a3), _form(b3)
    if fa is None:
        a3 = np.ascontiguousarray(a3)
        fa = _form(a3)
    if fb is None:
        b3 = np.ascontiguousarray(b3)
        fb = _form(b3)
    big = max(m, n, k, fa[1], fb[1]) > blas.INT_MAX
    if c3.dtype.kind == "c" and not big and _complex_by_parts(a3, b3, c3):
        return
    if not blas.has_gemm(c3.dtype) and not big:  # integers: NumPy's loops, over the pool
        _matmul_pool(a3, b3, c3)
        return
    if big or (bsz > 4 and m * n * k < 32768):
        with np.errstate(all="ignore"):
            np.matmul(a3, b3, out=c3)
        return
    isz = c3.dtype.itemsize
    sa, sb, sc = a3.strides[0] // isz, b3.strides[0] // isz, c3.strides[0] // isz
    desc = gemm_descriptor(c3.dtype, bsz, m, n, k, fa, fb, n, sa, sb, sc)
    desc[workers.G_A], desc[workers.G_B] = b3.ctypes.data, a3.ctypes.data  # BLAS's A is B
    desc[workers.G_C] = c3.ctypes.data
    with threads.blas_calls():  # one native call: the pool's threads, no Python per item
        threads.pool().gemm(desc.ctypes.data)


def _complex_by_parts(a3, b3, c3) -> bool:
    """c3 = a3 @ b3 for complex operands as four real products through the packed GEMM's
    core, where a real dot of the size would take it (gemm_packed.applies: an AVX-512 host
    whose BLAS runs AVX2 kernels, against BLAS's complex GEMM there): re = ar br - ai bi,
    im = ar bi + ai br, the parts read in place from the interleaved operands (strides of
    two reals). Returns False (nothing done) where it does not apply, or when an operand
    holds a non-finite value (BLAS's complex GEMM then). Each part sums in k
    order; the difference of the real part's two sums is rounded once more (BLAS and XLA
    sum complex products in other orders)."""
    bsz, m, k = a3.shape
    n = b3.shape[2]
    real = np.dtype(np.float32 if c3.dtype == np.complex64 else np.float64)
    if not gemm_packed.applies(real, m, n):
        return False
    if not (np.isfinite(a3).all() and np.isfinite(b3).all()):
        # an infinity times a complex number: XLA:CPU (and BLAS's complex GEMM, the
        # interpreter's) give NaN + NaN i where the parts' sums would keep the infinities
        return False
    a3 = a3 if a3.strides[2] == a3.itemsize and a3.strides[1] == k * a3.itemsize \
        else np.ascontiguousarray(a3)
    b3 = b3 if b3.strides[2] == b3.itemsize and b3.strides[1] == n * b3.itemsize \
        else np.ascontiguousarray(b3)
    isz = real.itemsize
    sa = a3.strides[0] // isz
    ar = a3.ctypes.data
    # b's parts contiguous (the core packs contiguous columns with vector copies)
    bp = np.empty((2, bsz, k, n), real)
    bp[0], bp[1] = b3.real, b3.imag
    br, bi = bp[0].ctypes.data, bp[1].ctypes.data
    parts = np.empty((3, bsz, m, n), real)

    def product(a, b, c, add=False):
        gemm_packed.run(real, m=m, n=n, k_in=k, taps=[0], a=a, a_row=2 * k, a_k=2, b=b,
                        b_k=n, b_n=1, c=c, c_row=n, batch=[(bsz, sa, k * n, m * n)],
                        add=add)

    at = [p.ctypes.data for p in parts]
    product(ar, br, at[0])  # ar br
    product(ar + isz, bi, at[1])  # ai bi
    product(ar, bi, at[2])  # ar bi
    product(ar + isz, br, at[2], add=True)  # + ai br
    np.subtract(parts[0], parts[1], out=c3.real)
    c3.imag[...] = parts[2]
    return True


def _matmul_pool(a3, b3, c3) -> None:
    """c3 = a3 @ b3 with NumPy's matmul (integer types; it releases the GIL), in pieces of
    rows over the worker pool when large."""
    bsz, m, k = a3.shape
    n = b3.shape[2]
    rows = bsz * m
    pieces = min(rows, 4 * CORES) if bsz * m * n * k >= PARALLEL_GEMM else 1
    bounds = [rows * i // pieces for i in range(pieces + 1)]

    def run(next_item, local):
        while (i := next_item()) is not None:
            for b in range(bounds[i] // m, -(-bounds[i + 1] // m)):
                lo, hi = max(bounds[i] - b * m, 0), min(bounds[i + 1] - b * m, m)
                if lo < hi:
                    with np.errstate(all="ignore"):
                        np.matmul(a3[b, lo:hi], b3[b], out=c3[b, lo:hi])

    parallel(range(pieces), run, CORES)


PARALLEL_GEMM = 1 << 21  # m*n*k from which a GEMM (or a batch of them) uses the pool
PANEL_MIN = 256  # rows or columns of the narrowest panel a GEMM is cut into
PANELS_PER_THREAD = 2  # panels per thread a single large GEMM is cut into (at most)


def gemm_split(bsz: int, m: int, n: int, k: int) -> tuple[int, int, int]:
    """How a batch of ``bsz`` GEMMs C[m,n] = A[m,k] B[k,n] runs on the worker pool:
    (axis, panels, items per thread). Each matrix is cut into ``panels`` along its rows
    (axis 0) or columns (axis 1); the ``bsz * panels`` work items are handed out in turn,
    ``items per thread`` of them per thread at most (0: all on the calling thread).

    A panel's BLAS call packs the whole of the operand the cut does not divide (B for row
    panels, A for column panels) again, so panels cost in proportion to how narrow they
    are (benchmarks/gemm_split_sweep.py): a batch big enough to give every thread whole
    matrices is not cut; otherwise the longer output dimension is cut into panels of at
    least PANEL_MIN, at most PANELS_PER_THREAD per thread. Small GEMMs, and a single GEMM
    when the user set BLAS's threads (BLAS's own threads then, the user's number), run on
    the calling thread."""
    work = bsz * m * n * k
    cores = threads.WORKERS
    if work < PARALLEL_GEMM or cores < 2 or (threads.USER_BLAS_THREADS and bsz == 1):
        return 0, 1, 0
    if bsz >= cores:
        return 0, 1, bsz
    axis, size = (1, n) if n >= m else (0, m)
    per = -(-PANELS_PER_THREAD * cores // bsz)
    per = max(1, min(per, size // PANEL_MIN))
    return axis, per, bsz * per


def gemm_descriptor(dtype, bsz: int, m: int, n: int, k: int, fa, fb, ldc: int, sa: int,
                    sb: int, sc: int) -> np.ndarray:
    """The words of workers.py's GEMM descriptor for ``bsz`` row-major GEMMs C[m,n] =
    A[m,k] B[k,n] (``fa``, ``fb``: blas.matrix_form of A and B; ``sa``, ``sb``, ``sc``: batch
    strides in elements), split by ``gemm_split``; the addresses of A, B and C (words
    G_B, G_A, G_C: BLAS's A is B) are left 0. Row-major C = A B is column-major
    C^T = B^T A^T: BLAS's A is our B, its M our n."""
    from xlapy.backends.cpu import workers as w

    dtype = np.dtype(dtype)
    isz = dtype.itemsize
    (a_kind, lda), (b_kind, ldb) = fa, fb
    axis, panels, per = gemm_split(bsz, m, n, k)
    d = np.zeros(w.GEMM_WORDS, np.int64)
    d[w.G_FN] = blas_function_pointer(blas.gemm_name(dtype))
    d[w.G_TA], d[w.G_TB] = ord("T" if b_kind == "c" else "N"), ord("T" if a_kind == "c" else "N")
    d[w.G_M], d[w.G_N], d[w.G_K] = n, m, k
    d[w.G_LDA], d[w.G_LDB], d[w.G_LDC] = ldb, lda, ldc
    d[w.G_ALPHA:w.G_ALPHA + 2] = np.frombuffer(
        np.array(1, dtype).tobytes().ljust(16, b"\0"), np.int64)
    d[w.G_BATCH] = bsz
    d[w.G_SA], d[w.G_SB], d[w.G_SC] = sb * isz, sa * isz, sc * isz
    d[w.G_PANELS], d[w.G_AXIS], d[w.G_PER_THREAD] = panels, axis, per
    # one column of C (axis 1) is a column of B; one row of C (axis 0) a row of A
    d[w.G_STEP_A] = (1 if b_kind == "r" else ldb) * isz
    d[w.G_STEP_B] = (lda if a_kind == "r" else 1) * isz
    d[w.G_STEP_C] = isz if axis == 1 else ldc * isz
    return d


class NativeGemm:
    """A dot as ``bsz`` GEMMs C[m,n] = A[m,k] B[k,n] read in place from its row-major
    operands (``native_gemm``): the forms and batch strides (elements) of A and B; C is
    the dot's result, [bsz, m, n] row-major."""

    __slots__ = ("bsz", "dtype", "fa", "fb", "k", "m", "n", "sa", "sb")

    def __init__(self, dtype, bsz, m, n, k, fa, fb, sa, sb):
        self.dtype, self.bsz, self.m, self.n, self.k = dtype, bsz, m, n, k
        self.fa, self.fb, self.sa, self.sb = fa, fb, sa, sb

    def descriptor(self) -> np.ndarray:
        """workers.py's GEMM descriptor (addresses left 0, see gemm_descriptor)."""
        return gemm_descriptor(self.dtype, self.bsz, self.m, self.n, self.k, self.fa, self.fb,
                               self.n, self.sa, self.sb, self.m * self.n)


def _row_major_strides(dims) -> list[int]:
    out, s = [], 1
    for d in reversed(dims):
        out.append(s)
        s *= d
    return out[::-1]


def _group(dims, strides, group) -> tuple[int, int] | None:
    """(size, stride) of dimensions ``group`` read as one strided dimension (in the order
    given), None when they do not collapse into one (size-1 dimensions drop out)."""
    real = [d for d in group if dims[d] != 1]
    for a, b in itertools.pairwise(real):
        if strides[a] != strides[b] * dims[b]:
            return None
    return _prod(dims[d] for d in group), (strides[real[-1]] if real else 0)


def native_gemm(dot) -> NativeGemm | None:
    """How native code runs ``dot`` as BLAS GEMMs on its operands' buffers, without copies:
    an f32 or f64 dot (operands and result of one type) whose batch, free and contracting
    dimensions each read as one strided dimension of each operand, and whose matrices BLAS
    can read (``blas.matrix_form``); None otherwise (the library's path copies what it
    must)."""
    if dot.opcode != "dot" or len(dot.operands) != 2:
        return None
    lhs, rhs = dot.operands
    t = np.dtype(dtypes.to_dtype(dot.shape.element_type))
    if t not in (_F32, _F64) or any(np.dtype(dtypes.to_dtype(o.shape.element_type)) != t
                                    for o in (lhs, rhs)):
        return None
    d = dot.attrs["dot_dimension_numbers"]
    lb, rb = list(d.lhs_batch_dimensions), list(d.rhs_batch_dimensions)
    lc, rc = list(d.lhs_contracting_dimensions), list(d.rhs_contracting_dimensions)
    ld, rd = [int(x) for x in lhs.shape.dimensions], [int(x) for x in rhs.shape.dimensions]
    if len(lb) != len(rb) or len(lc) != len(rc) or any(
            ld[a] != rd[b] for a, b in zip(lb + lc, rb + rc)):
        return None
    lf = [i for i in range(len(ld)) if i not in lb and i not in lc]
    rf = [i for i in range(len(rd)) if i not in rb and i not in rc]
    ls, rs = _row_major_strides(ld), _row_major_strides(rd)
    groups = [_group(ld, ls, g) for g in (lb, lf, lc)] + [_group(rd, rs, g) for g in (rb, rc, rf)]
    if any(g is None for g in groups):
        return None
    (bsz, sa), (m, sm), (k, sk), (_, sb), (_, skb), (n, sn) = groups
    want = [*(ld[i] for i in lb), *(ld[i] for i in lf), *(rd[i] for i in rf)]
    if [int(x) for x in dot.shape.dimensions] != want:
        return None
    fa, fb = blas.matrix_form(m, k, sm, sk), blas.matrix_form(k, n, skb, sn)
    if fa is None or fb is None or max(m, n, k, fa[1], fb[1]) > blas.INT_MAX:
        return None
    return NativeGemm(t, bsz, m, n, k, fa, fb, sa, sb)


# -- dot --------------------------------------------------------------------------------------


def _supports_dot(instr) -> bool:
    result = _result_dtype(instr)
    if _float_kind(result) is None:
        return _int_dot_types(instr) is not None
    return all(_float_kind(dtypes.to_dtype(o.shape.element_type)) is not None
               for o in instr.operands)


def _int_dot_types(instr):
    """(result, accumulation type) of an integer or pred dot of NumPy integer/bool operands
    (None otherwise): sums wrap in two's complement, so an unsigned type of the result's
    width (at least 32 bits) gives the interpreter's bits; pred counts the true products."""
    result = _result_dtype(instr)
    if result.kind not in "biu" or any(
            np.dtype(dtypes.to_dtype(o.shape.element_type)).kind not in "biu"
            for o in instr.operands):
        return None
    return result, np.dtype(np.uint64 if result.itemsize == 8 else np.uint32)


def _run_dot(instr, operands, out):
    lhs, rhs = operands
    result = _result_dtype(instr)
    int_types = _int_dot_types(instr) if _float_kind(result) is None else None
    if int_types is not None:
        from xlapy.interpreter.kernels.dot_conv import convert

        acc = int_types[1]
        operands = [convert(x, result).astype(acc) for x in operands]
        value = _run_dot_in(instr, operands, acc, acc, None)
        if result == np.bool_:
            value = value != 0
        else:
            value = value.astype(result)
        return _finish(value, result, out)
    compute = _compute_dtype(result, lhs.dtype, rhs.dtype)
    return _run_dot_in(instr, operands, result, compute, out)


def _run_dot_in(instr, operands, result, compute, out):
    lhs, rhs = operands
    d = instr.attrs["dot_dimension_numbers"]
    lb, rb = list(d.lhs_batch_dimensions), list(d.rhs_batch_dimensions)
    lc, rc = list(d.lhs_contracting_dimensions), list(d.rhs_contracting_dimensions)
    what = f"dot %{instr.name}"
    if (len(lb) != len(rb) or len(lc) != len(rc) or max(lb + lc, default=-1) >= lhs.ndim
            or max(rb + rc, default=-1) >= rhs.ndim):
        text = ", ".join(f"{k}={v}" for k, v in d.items())
        raise EvaluationError(f"{what}: dimension numbers {text} do not fit operands "
                              f"{_hlo_dims(lhs)} and {_hlo_dims(rhs)}")
    for a, b in list(zip(lb, rb)) + list(zip(lc, rc)):
        if lhs.shape[a] != rhs.shape[b]:
            raise EvaluationError(f"{what}: lhs dimension {a} and rhs dimension {b} differ "
                                  f"in size: {_hlo_dims(lhs)} and {_hlo_dims(rhs)}")
    lf = [i for i in range(lhs.ndim) if i not in lb and i not in lc]
    rf = [i for i in range(rhs.ndim) if i not in rb and i not in rc]
    batch = [lhs.shape[i] for i in lb]
    m_dims, n_dims = [lhs.shape[i] for i in lf], [rhs.shape[i] for i in rf]
    bsz, m, n = _prod(batch), _prod(m_dims), _prod(n_dims)
    k = _prod(lhs.shape[i] for i in lc)
    a3 = _as3(_to_compute(lhs, compute), lb + lf + lc, (bsz, m, k))
    b3 = _as3(_to_compute(rhs, compute), rb + rc + rf, (bsz, k, n))
    shape = tuple(batch + m_dims + n_dims)
    target = _direct_out(out, shape, compute)
    c = target if target is not None else np.empty(shape, compute)
    batched_gemm(a3, b3, c.reshape(bsz, m, n))
    return _finish(c, result, out)


# -- convolution ------------------------------------------------------------------------------


def _supports_convolution(instr) -> bool:
    sparsity = instr.attrs["sparsity_config"]
    if getattr(sparsity, "lhs", None) is not None or getattr(sparsity, "rhs", None) is not None:
        return False
    result = _result_dtype(instr)
    if _float_kind(result) is None:
        return False
    return all(_float_kind(dtypes.to_dtype(o.shape.element_type)) is not None
               for o in instr.operands[:2])


class _ConvTask:
    """One group's im2col + GEMM over chunks of output rows."""

    def __init__(self, xp, w2, y2, outs, window, taps, cg, og, feat0, out0, batch0, nb):
        self.xp, self.w2, self.y2 = xp, w2, y2  # [N,P...,C], [T*cg, O], [Nout*prod(outs), O]
        self.outs, self.window, self.taps = outs, window, taps
        self.cg, self.og, self.feat0, self.out0 = cg, og, feat0, out0
        self.batch0, self.nb = batch0, nb  # input batch offset, batch size of this group


def _conv_chunks(task: _ConvTask, row_budget: int):
    """(n0, n1, i0, i1): output batches [n0, n1) and rows [i0, i1) of the first spatial
    dimension (all of it when several batches), at most about ``row_budget`` output rows."""
    outs = task.outs
    first = outs[0] if outs else 1
    inner = _prod(outs[1:])
    per_batch = first * inner
    if per_batch <= row_budget:
        step = max(1, row_budget // max(per_batch, 1))
        return [(n0, min(n0 + step, task.nb), 0, first) for n0 in range(0, task.nb, step)]
    step = max(1, row_budget // max(inner, 1))
    return [(n, n + 1, i0, min(i0 + step, first)) for n in range(task.nb)
            for i0 in range(0, first, step)]


def _conv_chunk(task: _ConvTask, chunk, cols: np.ndarray | None) -> None:
    n0, n1, i0, i1 = chunk
    outs, xp = task.outs, task.xp
    inner = _prod(outs[1:])
    first = outs[0] if outs else 1
    rows = (n1 - n0) * (i1 - i0) * inner
    if rows == 0:
        return
    ntaps = len(task.taps)
    kdim = ntaps * task.cg
    dt = task.y2.dtype
    isz = dt.itemsize
    feat = slice(task.feat0, task.feat0 + task.cg)
    if cols is None:  # 1x1 window, unit strides: the input rows are the GEMM operand
        src = xp[task.batch0 + n0:task.batch0 + n1]
        if outs:
            src = src[:, i0:i1]
        a_ptr = src.ctypes.data + task.feat0 * isz
        a_form = ("r", xp.shape[-1])
    else:
        dst = cols[:rows * kdim].reshape((n1 - n0, i1 - i0, *outs[1:], ntaps, task.cg))
        for t, tap in enumerate(task.taps):
            index = [slice(task.batch0 + n0, task.batch0 + n1)]
            for j, (kj, wd) in enumerate(zip(tap, task.window)):
                lo = kj * wd.window_dilation + (i0 if j == 0 else 0) * wd.stride
                count = (i1 - i0) if j == 0 else outs[j]
                index.append(slice(lo, lo + (count - 1) * wd.stride + 1, wd.stride))
            index.append(feat)
            dst[..., t, :] = xp[tuple(index)]
        a_ptr = cols.ctypes.data
        a_form = ("r", kdim)
    row0 = (n0 * first + i0) * inner
    y2, w2 = task.y2, task.w2
    c_ptr = y2.ctypes.data + (row0 * y2.shape[1] + task.out0) * isz
    b_ptr = w2.ctypes.data + task.out0 * isz
    if gemm_packed.applies(dt, rows, task.og, taps=cols is not None):
        gemm_packed.run(dt, m=rows, n=task.og, k_in=kdim, taps=[0], a=a_ptr, a_row=a_form[1],
                        a_k=1, b=b_ptr, b_k=w2.shape[1], b_n=1, c=c_ptr, c_row=y2.shape[1],
                        threads=False)
    else:
        blas.gemm_rowmajor(dt, rows, task.og, kdim, a_ptr, a_form, b_ptr, ("r", w2.shape[1]),
                           c_ptr, y2.shape[1])


def _run_convolution(instr, operands, out):
    lhs, rhs = operands[:2]
    what = f"convolution %{instr.name}"
    result = _result_dtype(instr)
    dn = instr.attrs["dim_labels"]
    window = instr.attrs["window"].dimensions
    fgc, bgc = instr.attrs["feature_group_count"], instr.attrs["batch_group_count"]
    nsp = len(dn.input_spatial_dimensions)
    if len(window) != nsp or lhs.ndim != nsp + 2 or rhs.ndim != nsp + 2:
        raise EvaluationError(f"{what}: operands {_hlo_dims(lhs)} and {_hlo_dims(rhs)} do not "
                              f"fit dim_labels {dn} with a {len(window)}-dimensional window")
    compute = _compute_dtype(result, lhs.dtype, rhs.dtype)
    # channels last: x [N, S..., C], kernel [K..., I, O]
    x = np.transpose(_to_compute(lhs, compute),
                     [dn.input_batch_dimension, *dn.input_spatial_dimensions,
                      dn.input_feature_dimension])
    w = np.transpose(_to_compute(rhs, compute),
                     [*dn.kernel_spatial_dimensions, dn.kernel_input_feature_dimension,
                      dn.kernel_output_feature_dimension])
    flip = tuple(i for i, wd in enumerate(window) if wd.window_reversal)
    if flip:
        w = np.flip(w, axis=flip)
    n, c = x.shape[0], x.shape[-1]
    cg, o = w.shape[-2], w.shape[-1]
    groups = fgc if bgc == 1 else bgc
    if groups < 1 or c % fgc or o % groups or n % bgc or c // fgc != cg:
        raise EvaluationError(
            f"{what}: input features {c}, kernel input features {cg}, output features {o}, "
            f"batch {n} do not fit feature_group_count {fgc} and batch_group_count {bgc}")
    ksizes = list(w.shape[:nsp])
    if ksizes != [wd.size for wd in window]:
        raise EvaluationError(f"{what}: kernel spatial sizes {ksizes} differ from the window "
                              f"{instr.attrs['window'].to_text()}")
    if _phases_apply(window, w):
        return _conv_phases(dn, window, x, w, o, cg, groups, bgc, compute, result, out)
    if any(wd.base_dilation > 1 for wd in window) and np.issubdtype(w.dtype, np.inexact) \
            and not np.isfinite(w).all():
        # XLA:CPU computes no product at the holes and the padding of a base-dilated
        # convolution: a non-finite kernel value must not meet them (the interpreter's
        # kernel skips them; docs/numerics.md)
        from xlapy.interpreter.kernels.dot_conv import convolution_kernel

        return _finish(convolution_kernel(None, instr, [lhs, rhs]), result, out)
    trivial = all(wd.padding_low == 0 and wd.padding_high == 0 and wd.base_dilation == 1
                  for wd in window)
    if trivial:
        xp, pooled = np.ascontiguousarray(x), None
    else:
        xp, pooled = _padded_input(x, window)
    try:
        return _convolve(instr, dn, window, xp, w, n, o, cg, ksizes, groups, fgc, bgc,
                         compute, result, out)
    finally:
        if pooled is not None:
            del xp
            _PADDED.put(*pooled)


def _convolve(instr, dn, window, xp, w, n, o, cg, ksizes, groups, fgc, bgc, compute, result,
              out):
    outs = _output_sizes([p for p in xp.shape[1:-1]], window)
    y, out_perm = _canonical_output(dn, n // bgc, outs, o, compute, out)
    _canonical_conv(window, xp, w, o, cg, ksizes, groups, bgc, y)
    return _conv_result(y, out_perm, result, out)


def _canonical_output(dn, nout: int, outs, o: int, compute, out):
    """(y, out_perm): the canonical output [nout, outs..., O] to compute into (``out``
    itself when the result's layout is the canonical one and ``out`` can take it) and the
    permutation from the result's axes to it."""
    out_perm = _output_permutation(dn, len(outs))
    shape = (nout, *outs, o)
    target = _direct_out(out, shape, compute) if out_perm == sorted(out_perm) else None
    return (target if target is not None else np.empty(shape, compute)), out_perm


def _conv_result(y, out_perm, result, out):
    """The canonical output ``y`` in the result's layout and type (into ``out`` if given)."""
    value = y if out_perm == sorted(out_perm) else np.transpose(y, out_perm)
    return _finish(value, result, out)


def _output_sizes(padded, window) -> list[int]:
    """Output positions along each spatial dimension of a window over ``padded`` positions."""
    outs = []
    for p, wd in zip(padded, window):
        span = 0 if wd.size == 0 else (wd.size - 1) * wd.window_dilation + 1
        outs.append(0 if p < span or span == 0 else (p - span) // wd.stride + 1)
    return outs


def _output_permutation(dn, nsp: int) -> list[int]:
    """result axis -> axis of the canonical output [N, spatial..., O]."""
    out_perm = [0] * (nsp + 2)
    out_perm[dn.output_batch_dimension] = 0
    out_perm[dn.output_feature_dimension] = nsp + 1
    for i, a in enumerate(dn.output_spatial_dimensions):
        out_perm[a] = 1 + i
    return out_perm


def _canonical_conv(window, xp, w, o, cg, ksizes, groups, bgc, y) -> None:
    """y [N / bgc, outs..., O] = the convolution of the padded channels-last input ``xp``
    with the kernel ``w`` [K..., cg, O]."""
    outs = y.shape[1:-1]
    rows_total = _prod(y.shape[:-1])
    if not rows_total or not o:
        return
    if cg == 0 or _prod(ksizes) == 0:
        y[...] = 0
    elif groups > 1 and bgc == 1 and cg * (o // groups) <= SMALL_GROUP:
        _conv_small_groups(xp, np.ascontiguousarray(w), y, list(outs), window, groups, cg,
                           o // groups)
    else:
        fgc = groups if bgc == 1 else 1
        _conv_gemm(xp, w, y.reshape(rows_total, o), list(outs), window, ksizes, groups, fgc,
                   bgc, cg, o // groups, y.shape[0])


class _WindowDim:
    """One spatial dimension of a window made here (``_conv_phases``), read as the
    instruction's window dimensions are."""

    def __init__(self, size, stride, padding_low, padding_high, window_dilation,
                 base_dilation=1, window_reversal=False):
        self.size, self.stride = size, stride
        self.padding_low, self.padding_high = padding_low, padding_high
        self.window_dilation, self.base_dilation = window_dilation, base_dilation
        self.window_reversal = window_reversal


def _phases_apply(window, w) -> bool:
    """Whether a window with base (lhs) dilation is run as one convolution per output phase
    (``_conv_phases``): unit strides, some base dilation, finite kernel values."""
    if not any(wd.base_dilation > 1 for wd in window):
        return False
    if any(wd.stride != 1 for wd in window):
        return False
    return bool(np.isfinite(w).all())


def _phase_dims(wd, n: int, out: int):
    """The output phases along one window dimension of base dilation d = wd.base_dilation
    (unit stride): for each r < d, (r, output positions r, r + d, ... (count), the window's
    taps reading an input element there (first, step, count), the sub-window over the
    undilated input) - output position r + d * u of tap j reads input element
    u + (r + j * wdil - lo) / d when that divides."""
    d, lo, wdil = wd.base_dilation, wd.padding_low, wd.window_dilation
    dims = []
    for r in range(d):
        count = max(0, -(-(out - r) // d))
        taps = [j for j in range(wd.size) if (r + j * wdil - lo) % d == 0]
        if not count or not taps:
            dims.append((r, count, None, None))
            continue
        step = taps[1] - taps[0] if len(taps) > 1 else 1
        dil = step * wdil // d
        base = (r + taps[0] * wdil - lo) // d
        span = (len(taps) - 1) * dil + 1
        sub = _WindowDim(len(taps), 1, -base, count - 1 + span + base - n, dil)
        dims.append((r, count, (taps[0], step, len(taps)), sub))
    return dims


def _conv_phases(dn, window, x, w, o, cg, groups, bgc, compute, result, out):
    """A window with base dilation d (a transposed convolution, an input gradient) and unit
    strides: output positions r, r + d, ... along a dimension read input elements through
    every d-th tap only (the others fall into the holes), so each combination of phases is
    an ordinary convolution of the undilated input with those taps of the kernel and a
    window dilation of its own - d^dims convolutions of 1/d^dims of the work each, their
    outputs interleaved. As XLA:CPU computes such a convolution, the holes and the padding
    contribute no products (``_phases_apply`` leaves non-finite kernels, whose products
    with the zeros would be NaN, to the interpreter's kernel, which skips those rows)."""
    nsp = len(window)
    nout = x.shape[0] // bgc
    dilated = [max(wd.padding_low + dilated_bound(size, wd.base_dilation) + wd.padding_high, 0)
               for size, wd in zip(x.shape[1:-1], window)]
    outs = _output_sizes(dilated, window)
    y, out_perm = _canonical_output(dn, nout, outs, o, compute, out)
    per_dim = [_phase_dims(wd, size, count)
               for wd, size, count in zip(window, x.shape[1:-1], outs)]
    for phase in itertools.product(*per_dim):
        if any(count == 0 for _, count, _, _ in phase):
            continue
        place = (slice(None),) + tuple(slice(r, None, wd.base_dilation)
                                       for (r, _, _, _), wd in zip(phase, window))
        if any(taps is None for _, _, taps, _ in phase):
            y[place] = 0  # no tap reads an input element there
            continue
        sub = [dim for _, _, _, dim in phase]
        wsub = w[tuple(slice(t0, t0 + (cnt - 1) * step + 1, step)
                       for _, _, (t0, step, cnt), _ in phase)]
        xp, pooled = _padded_input(x, sub)
        try:
            part = np.empty((nout, *(count for _, count, _, _ in phase), o), compute)
            _canonical_conv(sub, xp, wsub, o, cg, list(wsub.shape[:nsp]), groups, bgc, part)
        finally:
            if pooled is not None:
                del xp
                _PADDED.put(*pooled)
        y[place] = part
    return _conv_result(y, out_perm, result, out)


class _BufferPool:
    """Padded-input buffers kept between calls. A block remembers the geometry (key) it last
    held: taken again for that geometry, its padding and holes are still zero (they are
    never written), so only the interior is copied (no zero fill, no page faults). Any free
    block large enough serves another geometry, its bytes outside the interior zeroed first
    (``_padded_input``); a new block is made only when none is large enough, and the free
    blocks smaller than it are dropped then. So the pool holds about one block per
    convolution running at once, of the largest padded input, however many geometries a
    program has (keeping one buffer per geometry made a CNN's training step hold every
    layer's padded inputs at once). At most ``limit`` bytes are kept."""

    def __init__(self, limit: int):
        self.limit, self.lock, self.bytes = limit, threading.Lock(), 0
        self.free: list = []  # [key, block (uint8)], most recently returned last

    def take(self, key, nbytes: int):
        """(block, same): a free block of at least ``nbytes`` (the one that held ``key`` if
        any, else the smallest) and whether it held ``key``; (None, False) when none
        fits (the smaller free blocks are dropped)."""
        with self.lock:
            best = None
            for k, (held, blk) in enumerate(self.free):
                if blk.nbytes < nbytes:
                    continue
                if held == key:
                    best = k
                    break
                if best is None or blk.nbytes < self.free[best][1].nbytes:
                    best = k
            if best is None:
                kept = [e for e in self.free if e[1].nbytes >= nbytes]
                self.bytes = sum(e[1].nbytes for e in kept)
                self.free = kept
                return None, False
            held, blk = self.free.pop(best)
            self.bytes -= blk.nbytes
            return blk, held == key

    def put(self, key, blk) -> None:
        with self.lock:
            if blk.nbytes > self.limit:
                return
            while self.bytes + blk.nbytes > self.limit and self.free:
                self.bytes -= self.free.pop(0)[1].nbytes
            self.free.append([key, blk])
            self.bytes += blk.nbytes


_PADDED = _BufferPool(256 << 20)


def _padded_input(x: np.ndarray, window):
    """x [N, S..., C] with base dilation holes and padding (negative padding crops) on the
    spatial dimensions, zeros elsewhere: (array, (pool key, its block) or None)."""
    shape, dst, src = [x.shape[0]], [slice(None)], [slice(None)]
    for axis, wd in enumerate(window, 1):
        n, bd, lo = x.shape[axis], wd.base_dilation, wd.padding_low
        size = max(lo + dilated_bound(n, bd) + wd.padding_high, 0)
        shape.append(size)
        k0 = 0 if lo >= 0 else (-lo + bd - 1) // bd  # element k lands at lo + k * bd
        k1 = min(n, (size - 1 - lo) // bd + 1) if size > 0 else 0
        if k1 <= k0:
            src.append(slice(0, 0))
            dst.append(slice(0, 0))
        else:
            src.append(slice(k0, k1))
            start = lo + k0 * bd
            dst.append(slice(start, start + (k1 - k0 - 1) * bd + 1, bd))
    shape.append(x.shape[-1])
    nbytes = _prod(shape) * x.dtype.itemsize
    if nbytes == 0:
        return np.zeros(shape, x.dtype), None
    key = (x.shape, x.dtype.str, tuple((wd.padding_low, wd.padding_high, wd.base_dilation)
                                       for wd in window))
    blk, same = _PADDED.take(key, nbytes)
    if blk is None:
        blk = np.zeros(nbytes, np.uint8)
        same = True
    buf = blk[:nbytes].view(x.dtype).reshape(shape)
    if not same:
        _zero_outside(buf, dst)
    buf[tuple(dst) + (slice(None),)] = x[tuple(src) + (slice(None),)]
    return buf, (key, blk)


def _zero_outside(buf: np.ndarray, dst: list) -> None:
    """Zero what of ``buf`` the interior ``dst`` (slices of the spatial axes) does not
    cover: the padding on each side, or everything when the interior has holes."""
    if any(s.step not in (None, 1) and s.stop - s.start > 1 for s in dst[1:]):
        buf[...] = 0
        return
    for axis, s in enumerate(dst[1:], 1):
        lead = (slice(None),) * axis
        buf[lead + (slice(0, s.start),)] = 0
        buf[lead + (slice(s.stop, None),)] = 0


SMALL_GROUP = 16  # cg * og up to which feature groups are multiply-adds, not GEMMs


def _conv_small_groups(xp, w, y, outs, window, groups, cg, og) -> None:
    """Feature groups too small for GEMMs (depthwise convolutions: cg = 1): per tap and
    group input feature, one broadcast multiply-add over all groups and output positions,
    chunked over the batch (NumPy releases the GIL: the chunks run on the cores)."""
    n = xp.shape[0]
    taps = list(np.ndindex(*w.shape[:-2]))
    wg = w.reshape(len(taps), cg, groups, og)  # output features are group-major
    xg = xp.reshape(xp.shape[:-1] + (groups, cg))  # so are the input features
    yg = y.reshape(y.shape[:-1] + (groups, og))
    per_batch = _prod(outs) * groups * max(og, cg)
    step = max(1, (1 << 18) // max(per_batch, 1))
    work = [(b0, min(b0 + step, n)) for b0 in range(0, n, step)]

    def run_chunks(next_item, local: bool) -> None:
        while (item := next_item()) is not None:
            b0, b1 = item
            acc = yg[b0:b1]
            tmp = np.empty(acc.shape, y.dtype)
            first = True
            for t, tap in enumerate(taps):
                index = [slice(b0, b1)]
                for kj, wd, count in zip(tap, window, outs):
                    lo = kj * wd.window_dilation
                    index.append(slice(lo, lo + (count - 1) * wd.stride + 1, wd.stride))
                patch = xg[tuple(index)]  # (batch, outs..., groups, cg)
                for ci in range(cg):
                    np.multiply(patch[..., ci:ci + 1], wg[t, ci], out=tmp if not first else acc)
                    if not first:
                        acc += tmp
                    first = False

    threads = CORES if y.size * len(taps) * cg >= 1 << 22 else 1
    parallel(work, run_chunks, min(threads, len(work)))


def _conv_gemm(xp, w, y2, outs, window, ksizes, groups, fgc, bgc, cg, og, nout) -> None:
    """w: the kernel [K..., cg, O], a view (transposed, flipped) or not."""
    taps = list(np.ndindex(*ksizes))
    direct = len(taps) == 1 and all(wd.stride == 1 for wd in window)
    kdim = len(taps) * cg
    isz = y2.dtype.itemsize
    flops = 2 * y2.shape[0] * og * kdim * groups
    threads = CORES if flops >= 50_000_000 else 1
    long_sums = (len(taps) > 1 and y2.shape[0] * kdim * isz > TAP_CHUNK_BYTES
                 and y2.shape[0] * og * isz <= ACC_BYTES)  # a small output, long sums
    o = w.shape[-1]
    packed = not direct and not long_sums and outs and \
        gemm_packed.applies(y2.dtype, _prod(outs), og, taps=True)
    if packed:
        # the window's taps read in place by the packed GEMM's core (no im2col, no scratch)
        offsets = _tap_offsets(xp, taps, window)
        k_in, merged = _merged_taps(offsets, cg)
        if k_in >= PACKED_TAP:
            w2 = np.ascontiguousarray(w).reshape(-1, o)
            _conv_taps_packed(xp, w2, y2, outs, window, k_in, merged, groups, bgc, cg, og,
                              nout, threads > 1)
            return
    # short taps on the packed core's host: im2col, one contiguous contraction for its core
    flat = not direct and not packed and _flat_applies(xp, outs, window)
    split = not direct and not flat and long_sums
    # the kernel as a [T * cg, O] matrix; split over taps, each chunk of it is copied when
    # the kernel is a view (a kernel gradient's is the output gradient transposed)
    w2 = None if split else np.ascontiguousarray(w).reshape(-1, o)
    tasks = []
    for g in range(groups):
        feat0 = g * cg if bgc == 1 else 0
        batch0 = g * nout if bgc > 1 else 0
        tasks.append(_ConvTask(xp, w2, y2, outs, window, taps, cg, og, feat0, g * og, batch0,
                               nout))
    if flat:
        _conv_flat(tasks, threads)
        return
    if split:
        _conv_taps_split(tasks, w.reshape(len(taps), cg, o), threads)
        return
    budget = max(1, min(CHUNK_BYTES, SCRATCH_BYTES // threads) // max(1, kdim * isz))
    if direct:
        budget = max(budget, 1 << 16)
    work = [(t, ch) for t in tasks for ch in _conv_chunks(t, budget)]
    threads = min(threads, len(work))
    scratch_rows = 0 if direct else max(
        (ch[1] - ch[0]) * (ch[3] - ch[2]) * _prod(outs[1:]) for _, ch in work)

    def run_chunks(next_item, local: bool) -> None:
        cols = None if direct else np.empty(scratch_rows * kdim, y2.dtype)
        while (item := next_item()) is not None:
            _conv_chunk(item[0], item[1], cols)

    parallel(work, run_chunks, threads)


#: Bytes of one contraction chunk of the im2col scratch (_conv_taps_split).
TAP_CHUNK_BYTES = 1 << 20
#: Bytes of a group's output up to which the im2col splits the contraction, not the rows
#: (_conv_taps_split: an accumulator of that size per thread).
ACC_BYTES = 1 << 18


def _conv_taps_split(tasks, wt: np.ndarray, threads: int) -> None:
    """im2col + GEMM over chunks of taps, every output row at once: for a small output
    (ACC_BYTES) and a contraction too long for one scratch chunk (a kernel gradient: the
    window is the whole image). Chunks of output rows would each copy every tap again (a
    NumPy copy per tap and chunk) and read the whole kernel matrix again, with a scratch
    of CHUNK_BYTES per thread; chunks of taps copy each tap once. The chunks are cut into
    a fixed number of *slots* (runs of consecutive chunks, at most twice the threads), each
    summing its chunks' products (beta = 1), in order, into an accumulator of its own per
    group, [rows, og]; the accumulators are summed into the output in slot order. Which
    thread runs a slot does not change a sum, so every run gives the same bits
    (accumulators per thread, over whichever chunks a thread took, did not). ``wt`` is the kernel [T, cg, O]
    (a view when it can be): unless it is contiguous, each chunk's rows of it are copied
    too. The scratch is [rows, taps of a chunk * cg] (and [taps of a chunk * cg, og]) per
    thread, at most about TAP_CHUNK_BYTES each (one tap at least)."""
    t0 = tasks[0]
    xp, y2, outs, window = t0.xp, t0.y2, t0.outs, t0.window
    rows, cg, og = y2.shape[0], t0.cg, t0.og
    dt = y2.dtype
    isz = dt.itemsize
    per_tap = max(1, max(rows, og) * cg * isz)
    step = max(1, min(len(t0.taps), TAP_CHUNK_BYTES // per_tap))
    whole = wt.flags.c_contiguous
    o = wt.shape[-1]
    work = [(k, a, min(a + step, len(t0.taps))) for k in range(len(tasks))
            for a in range(0, len(t0.taps), step)]
    first = outs[0] if outs else 1
    slots = min(len(work), 2 * threads)
    partials: list = [{} for _ in range(slots)]
    core = gemm_packed.applies(dt, rows, og, taps=True)

    def chunks(next_item):
        while (slot := next_item()) is not None:  # a slot's chunks on one thread, in order
            for item in work[slot * len(work) // slots:(slot + 1) * len(work) // slots]:
                yield partials[slot], item

    def run_chunks(next_item, local: bool) -> None:
        cols = np.empty(rows * step * cg, dt)
        wbuf = None if whole else np.empty(step * cg * og, dt)
        for accs, (k, a, b) in chunks(next_item):
            task = tasks[k]
            acc = accs.get(k)
            if acc is None:
                acc = accs[k] = np.zeros((rows, og), dt)
            kc = (b - a) * cg
            dst = cols[:rows * kc].reshape((task.nb, first, *outs[1:], b - a, cg))
            patches = _patches(xp, task, window, outs)
            for t0, t1 in _tap_runs(task.taps, a, b):  # one copy per run along the last
                lead = task.taps[t0][:-1]  # kernel dimension
                last = slice(task.taps[t0][-1], task.taps[t1 - 1][-1] + 1)
                dst[..., t0 - a:t1 - a, :] = patches[(Ellipsis, *lead, last, slice(None))]
            if whole:
                b_ptr, ldb = wt.ctypes.data + (a * cg * o + task.out0) * isz, o
            else:
                wb = wbuf[:kc * og].reshape(b - a, cg, og)
                wb[...] = wt[a:b, :, task.out0:task.out0 + og]
                b_ptr, ldb = wb.ctypes.data, og
            if core:
                gemm_packed.run(dt, m=rows, n=og, k_in=kc, taps=[0], a=cols.ctypes.data,
                                a_row=kc, a_k=1, b=b_ptr, b_k=ldb, b_n=1, c=acc.ctypes.data,
                                c_row=og, add=True, threads=False)
            else:
                blas.gemm_rowmajor(dt, rows, og, kc, cols.ctypes.data, ("r", kc), b_ptr,
                                   ("r", ldb), acc.ctypes.data, og, beta=1.0)

    parallel(list(range(slots)), run_chunks, min(threads, slots))
    for k, task in enumerate(tasks):
        out = y2[:, task.out0:task.out0 + og]
        mine = [accs[k] for accs in partials if k in accs]
        out[...] = mine[0] if mine else 0
        for acc in mine[1:]:
            out += acc


def _patches(xp, task, window, outs):
    """The windows of ``task``'s batch and features of the padded input ``xp`` as a view
    [nb, outs..., K..., cg]: element (n, i..., k..., c) is the input element tap k of output
    position i reads."""
    view = xp[task.batch0:task.batch0 + task.nb, ..., task.feat0:task.feat0 + task.cg]
    st = view.strides
    spatial = st[1:-1]
    ksizes = [wd.size for wd in window]
    return np.lib.stride_tricks.as_strided(
        view, shape=(task.nb, *outs, *ksizes, task.cg),
        strides=(st[0], *(s * wd.stride for s, wd in zip(spatial, window)),
                 *(s * wd.window_dilation for s, wd in zip(spatial, window)), st[-1]),
        writeable=False)


def _tap_runs(taps, a: int, b: int):
    """[t0, t1) runs of taps a..b-1 (np.ndindex order) that differ in the last kernel
    index only, consecutive there."""
    t0 = a
    for t in range(a + 1, b + 1):
        if t == b or taps[t][:-1] != taps[t0][:-1]:
            yield t0, t
            t0 = t


FLAT_ROWS = 2048  # virtual output rows per GEMM of the per-tap path (a few hundred KiB)


def _flat_applies(xp, outs, window) -> bool:
    """Unit strides and a padded input not much larger than the output: the per-tap path
    computes every padded position (the ones past the output are discarded)."""
    if not outs or any(wd.stride != 1 for wd in window) or 0 in outs:
        return False
    return _prod(xp.shape[1:-1]) <= 1.5 * _prod(outs)


def _conv_flat(tasks, threads: int) -> None:
    """Per-tap GEMM accumulation with no im2col copy. With unit strides, output position
    (n, i...) reads input row (n, i...) + offset(tap) of the padded input read as a
    [rows, C] matrix: for a run of consecutive rows, each tap's operand is a plain
    [rows, cg] matrix (leading dimension C), and the GEMMs of all taps accumulate into a
    small [rows, og] scratch; rows whose position lies past the output are dropped when the
    scratch is copied out."""
    t0 = tasks[0]
    xp, w2, outs, window = t0.xp, t0.w2, t0.outs, t0.window
    pdims = xp.shape[1:-1]
    c, o = xp.shape[-1], w2.shape[1]
    stride = [_prod(pdims[j + 1:]) for j in range(len(pdims))]
    offsets = [sum(k * wd.window_dilation * st for k, wd, st in zip(tap, window, stride))
               for tap in t0.taps]
    tail = sum((n - 1) * st for n, st in zip(outs[1:], stride[1:])) + 1
    step = max(1, FLAT_ROWS // stride[0])
    y = t0.y2.reshape((-1, *outs, o))
    inner = (slice(None),) + tuple(slice(0, n) for n in outs[1:])
    dt = y.dtype
    isz = dt.itemsize
    work = [(t, n, i0, min(i0 + step, outs[0])) for t in tasks for n in range(t0.nb)
            for i0 in range(0, outs[0], step)]

    def run_chunks(next_item, local: bool) -> None:
        scratch = np.empty((step * stride[0], t0.og), dt)
        # the pool's BLAS calls are single-threaded (threads.blas_calls)
        while (item := next_item()) is not None:
            task, n, i0, i1 = item
            rows = (i1 - i0 - 1) * stride[0] + tail
            q0 = ((task.batch0 + n) * pdims[0] + i0) * stride[0]
            for t, off in enumerate(offsets):
                a = xp.ctypes.data + ((q0 + off) * c + task.feat0) * isz
                b = w2.ctypes.data + (t * task.cg * o + task.out0) * isz
                blas.gemm_rowmajor(dt, rows, task.og, task.cg, a, ("r", c), b, ("r", o),
                                   scratch.ctypes.data, task.og, beta=1.0 if t else 0.0)
            block = scratch[:(i1 - i0) * stride[0]].reshape(i1 - i0, *pdims[1:], task.og)
            y[(n, slice(i0, i1)) + inner[1:] + (slice(task.out0, task.out0 + task.og),)] \
                = block[inner]

    parallel(work, run_chunks, min(threads, len(work)))


#: Contiguous input features a tap (merged: _merged_taps) must read for the window to run
#: through the packed GEMM's core with its taps in place; shorter ones (a first layer's 3
#: channels) go through im2col, whose contraction is one contiguous run
PACKED_TAP = 16


def _element_strides(xp) -> list[int]:
    """The strides (elements) of the batch and spatial dimensions of the padded input."""
    return [s // xp.itemsize for s in xp.strides[:-1]]


def _tap_offsets(xp, taps, window) -> list[int]:
    """Each tap's offset (elements) into the padded channels-last input ``xp``."""
    elem = _element_strides(xp)[1:]
    return [sum(k * wd.window_dilation * e for k, wd, e in zip(tap, window, elem))
            for tap in taps]


def _conv_taps_packed(xp, w2, y2, outs, window, k_in, taps, groups, bgc, cg, og, nout,
                      threads: bool) -> None:
    """Every output position of every group as one product through the packed GEMM's core
    (gemm_packed.run), its contraction read tap by tap at the taps' offsets into the padded
    input (any strides and dilations): rows are the last two spatial dimensions' output
    positions (row i at (i // W) * stride_h + (i % W) * stride_w, W the last dimension's
    outputs), the batch and the other spatial dimensions batch dimensions, the kernel
    matrix [T * cg, O] b, the output written in place (no im2col copy, no scratch)."""
    o = w2.shape[1]
    isz = y2.dtype.itemsize
    per_batch, *elem = _element_strides(xp)
    step = [wd.stride * e for wd, e in zip(window, elem)]  # an output position's offset
    out_elem = [_prod(outs[j + 1:]) * o for j in range(len(outs))]
    lead = len(outs) - 2 if len(outs) >= 2 else 0
    inner = [(outs[j], step[j], 0, out_elem[j]) for j in range(lead)]
    if len(outs) >= 2:
        rows = {"m": outs[-2] * outs[-1], "m_in": outs[-1], "a_outer": step[-2],
                "a_row": step[-1]}
    else:
        rows = {"m": outs[0], "a_row": step[0]}
    for g in range(groups):
        feat0 = g * cg if bgc == 1 else 0
        batch0 = g * nout if bgc > 1 else 0
        gemm_packed.run(y2.dtype, n=og, k_in=k_in, taps=taps,
                        a=xp.ctypes.data + (batch0 * per_batch + feat0) * isz, a_k=1,
                        b=w2.ctypes.data + g * og * isz, b_k=o, b_n=1,
                        c=y2.ctypes.data + g * og * isz, c_row=o,
                        batch=[(nout, per_batch, 0, _prod(outs) * o), *inner],
                        threads=threads, **rows)


def _merged_taps(taps: list[int], cg: int) -> tuple[int, list[int]]:
    """(k_in, taps) for gemm_packed.run of a contraction of ``len(taps)`` taps of ``cg``
    contiguous input features each at these offsets (elements): runs of
    taps each starting where the one before ends (a window's neighbours along the last
    spatial dimension, without feature groups or dilation there) read as one longer tap,
    so the core's C tiles are written once per run instead of once per tap."""
    count = len(taps)
    for run in range(count, 1, -1):
        if count % run == 0 and all(taps[t + j] == taps[t] + j * cg
                                    for t in range(0, count, run) for j in range(run)):
            return run * cg, taps[::run]
    return cg, taps


#: The backend's worker pool (threads.parallel): BLAS calls inside are single-threaded.
parallel = threads.parallel


# -- sort -------------------------------------------------------------------------------------


class _Level:
    """One key of a lexicographic comparator: operand ``operand`` transformed by the
    expression ``transform`` (None: the operand itself; 'canonical': jax's -0 -> 0, NaN ->
    ``nan``), compared with ``ctype`` in ascending or descending order."""

    def __init__(self, operand, transform, param, ctype, descending, canon=None):
        self.operand, self.transform, self.param = operand, transform, param
        self.ctype, self.descending, self.canon = ctype, descending, canon


def _signature(node, param_number):
    """A structural key of an elementwise expression of one parameter: equal for the two
    sides of a comparison that apply the same expression to the two elements."""
    if node.opcode == "parameter":
        return ("param", node.parameter_number - param_number, str(node.shape))
    attrs = tuple((k, repr(v)) for k, v in node.attrs.items())
    return (node.opcode, str(node.shape), attrs,
            tuple(_signature(o, param_number) for o in node.operands))


def _params_of(node, seen=None) -> set:
    if seen is None:
        seen = set()
    if node.opcode == "parameter":
        seen.add(node.parameter_number)
    for o in node.operands:
        _params_of(o, seen)
    return seen


def _elementwise_tree(node) -> bool:
    if not node.shape.is_array() or node.shape.rank != 0:
        return False
    if node.opcode in ("parameter", "constant"):
        return True
    if node.opcode in ("rng", "stochastic-convert", "custom-call") or node.called_computations():
        return False
    try:
        if not get_opdef(node.opcode).has(ELEMENTWISE):
            return False
    except Exception:  # noqa: BLE001 - an opcode without an OpDef is not elementwise
        return False
    return all(_elementwise_tree(o) for o in node.operands)


def _constant_value(node):
    if node.opcode != "constant":
        return None
    return np.asarray(get_kernel("constant")(None, node, []))


def _canonical_form(node, param):
    """The NaN constant if ``node`` is jax's canonicalisation of parameter ``param``:
    select(x != x, NaN, select(x == 0, 0, x)) (either nesting order); else None."""
    found = {}

    def cond_kind(cond):
        if cond.opcode != "compare":
            return None
        a, b = cond.operands
        direction = cond.attrs["direction"]
        if direction == Dir.NE and a is param and b is param:
            return "nan"
        if direction == Dir.EQ:
            for p, q in ((a, b), (b, a)):
                v = _constant_value(q)
                if p is param and v is not None and v.dtype.kind == "f" and v == 0:
                    return "zero"
        return None

    x = node
    while x is not param:
        if x.opcode != "select":
            return None
        cond, on_true, on_false = x.operands
        kind = cond_kind(cond)
        value = _constant_value(on_true)
        if kind is None or kind in found or value is None:
            return None
        if kind == "nan" and not np.isnan(value):
            return None
        if kind == "zero" and not (value == 0 and not np.signbit(value)):
            return None
        found[kind] = value
        x = on_false
    if set(found) != {"nan", "zero"}:
        return None
    return found["nan"]


def _match_compare(node, directions, operand_count):
    """(operand, lhs tree, lhs param, rhs param) of compare(T(pa), T(pb)) with {pa, pb} an
    operand's pair; None if ``node`` is not such a comparison."""
    if node.opcode != "compare" or node.attrs["direction"] not in directions:
        return None
    lhs, rhs = node.operands
    if not (_elementwise_tree(lhs) and _elementwise_tree(rhs)):
        return None
    pl, pr = _params_of(lhs), _params_of(rhs)
    if len(pl) != 1 or len(pr) != 1:
        return None
    (a,), (b,) = pl, pr
    if a // 2 != b // 2 or a == b or a // 2 >= operand_count:
        return None
    if _signature(lhs, a) != _signature(rhs, b):
        return None
    et = lhs.shape.element_type
    if _float_kind(dtypes.to_dtype(et)) == "c":
        return None
    return a // 2, lhs, a, b


def _strict(node, operand_count):
    m = _match_compare(node, (Dir.LT, Dir.GT), operand_count)
    if m is None:
        return None
    operand, tree, a, _ = m
    descending = (node.attrs["direction"] == Dir.GT) == (a % 2 == 0)
    param = next(p for p in _walk(tree) if p.opcode == "parameter")
    transform = None if tree.opcode == "parameter" else tree
    canon = None
    if transform is not None:
        canon = _canonical_form(tree, param)
    ctype = node.attrs["type"]
    return _Level(operand, transform, param, ctype, descending, canon)


def _walk(node):
    yield node
    for o in node.operands:
        yield from _walk(o)


def _match_lexicographic(node, operand_count):
    level = _strict(node, operand_count)
    if level is not None:
        return [level]
    if node.opcode != "or":
        return None
    for first, rest in (node.operands, node.operands[::-1]):
        level = _strict(first, operand_count)
        if level is None or rest.opcode != "and":
            continue
        for eq, tail in (rest.operands, rest.operands[::-1]):
            m = _match_compare(eq, (Dir.EQ,), operand_count)
            if m is None or m[0] != level.operand or eq.attrs["type"] != level.ctype:
                continue
            lt_tree = level.transform if level.transform is not None else level.param
            if _signature(m[1], m[2]) != _signature(lt_tree, level.param.parameter_number):
                continue
            more = _match_lexicographic(tail, operand_count)
            if more is not None:
                return [level] + more
    return None


_UNSET = object()


def _sort_plan(instr):
    """The comparator's keys of sort ``instr`` (None: not recognised), cached on the
    instruction itself: a global map keyed by instruction, even a weak one, kept every sort's
    module alive for good (the plan refers to the comparator's instructions, which refer to
    their computation and module, and so to the key)."""
    plan = instr.__dict__.get("_cpu_sort_plan", _UNSET)
    if plan is not _UNSET:
        return plan
    plan = None
    comp = instr.attrs["to_apply"]
    dims = instr.attrs["dimensions"]
    count = len(instr.operands)
    if comp is not None and len(dims) == 1 and comp.num_parameters == 2 * count:
        ok = all(_float_kind(dtypes.to_dtype(o.shape.element_type)) != "c"
                 for o in instr.operands)
        if ok:
            plan = _match_lexicographic(comp.root, count)
    instr._cpu_sort_plan = plan  # a race computes it twice, harmlessly
    return plan


def _supports_sort(instr) -> bool:
    return _sort_plan(instr) is not None


def sort_levels(instr) -> list | None:
    """The lexicographic keys of sort ``instr``'s comparator, most significant first
    (objects with ``operand``, ``transform`` (None: the element itself), ``param``,
    ``ctype``, ``descending``), or None when the comparator is not such a chain. The native
    sort's radix path reads them (``sort.radix_keys``)."""
    return _sort_plan(instr)


def _float_bits_key(x: np.ndarray) -> np.ndarray:
    """Signed integers ordered as TOTALORDER orders f32/f64 ``x`` (an involution on the
    bits: applying it to the key gives the float's bits back)."""
    itype = np.int32 if x.dtype.itemsize == 4 else np.int64
    bits = x.view(itype)
    key = np.right_shift(bits, itype(31 if itype is np.int32 else 63))
    np.bitwise_and(key, itype(0x7FFFFFFF if itype is np.int32 else 0x7FFFFFFFFFFFFFFF), out=key)
    np.bitwise_xor(key, bits, out=key)
    return key


def _level_values(level, x: np.ndarray, ctx) -> np.ndarray:
    """The values the comparison sees: T(x)."""
    if level.transform is None:
        return x
    if level.canon is not None:
        with np.errstate(all="ignore"):
            t = np.where(x == 0, np.zeros((), x.dtype), x)
            return np.where(np.isnan(x), level.canon.astype(x.dtype), t)
    memo = {}

    def ev(node):
        got = memo.get(id(node))
        if got is None:
            if node is level.param:
                got = x
            else:
                got = ctx.run_instruction(node, [ev(o) for o in node.operands])
            memo[id(node)] = got
        return got

    return np.broadcast_to(np.asarray(ev(level.transform)), x.shape)


def _level_key(level, values: np.ndarray):
    """Integer keys in the level's ascending order; None when the comparison is not a
    strict weak order on these values (a FLOAT comparison with NaNs)."""
    kind = _float_kind(values.dtype)
    if kind == "f":
        if level.ctype != ComparisonType.TOTALORDER:
            if values.dtype not in (_F32, _F64):
                values = values.astype(_F32)
            if np.isnan(values).any():
                return None
            with np.errstate(all="ignore"):
                values = values + values.dtype.type(0)  # -0 -> +0: they are equivalent
        if values.dtype in (_F32, _F64):
            key = _float_bits_key(np.ascontiguousarray(values))
        else:  # narrow floats: their keys need at most 17 bits
            key = total_order_key(values)
            if values.dtype.itemsize <= 2:
                key = key.astype(np.int32)
    elif values.dtype == np.bool_:
        key = values.view(np.uint8)
    elif values.dtype.kind in "iu":
        key = values
    else:  # ml_dtypes integers (int4, ...)
        key = values.astype(np.int64)
    if level.descending:
        key = ~key
    return key


def _stable_perm(keys: list[np.ndarray]) -> np.ndarray:
    """The stable sorted order of each row under lexicographic integer ``keys``."""
    n = keys[0].shape[1]
    if len(keys) == 1 and keys[0].dtype.itemsize <= 4 and n < (1 << 32):
        k = keys[0]
        if k.dtype.kind == "i":
            bias = 1 << (8 * k.dtype.itemsize - 1)
            u = (k.astype(np.int64) + bias).astype(np.uint64)
        else:
            u = k.astype(np.uint64)
        packed = (u << np.uint64(32)) | np.arange(n, dtype=np.uint64)
        packed.sort(axis=-1)
        return (packed & np.uint64(0xFFFFFFFF)).astype(np.intp)
    if len(keys) == 1:
        return np.argsort(keys[0], axis=-1, kind="stable")
    return np.lexsort(list(reversed(keys)), axis=-1)


def _run_sort(instr, operands, out, keyed_only=False):
    plan = _sort_plan(instr)
    (dim,) = instr.attrs["dimensions"]
    shape = operands[0].shape
    for i, a in enumerate(operands[1:], 1):
        if a.shape != shape:
            raise EvaluationError(f"sort %{instr.name}: operand {i} is {_hlo_dims(a)}, operand "
                                  f"0 is {_hlo_dims(operands[0])}")
    if not shape:  # rank 0: nothing moves
        return _sort_results([np.array(a) for a in operands], out)
    n = shape[dim]
    moved = [np.moveaxis(a, dim, -1) for a in operands]
    rows = _prod(moved[0].shape[:-1])
    flat = [np.ascontiguousarray(m).reshape(rows, n) for m in moved]
    if n <= 1 or rows == 0:
        return _sort_results([np.array(a) for a in operands], out)
    stable = instr.attrs["is_stable"]
    sorted_rows = None
    if len(flat) == 1 and len(plan) == 1:
        sorted_rows = _sort_values_only(plan[0], flat[0], stable)
        if sorted_rows is _INTERPRET:  # not a strict weak order: the interpreter decides
            return _sort_results(_interpret(instr, operands, keyed_only), out)
    if sorted_rows is not None:
        results = [sorted_rows]
    else:
        ctx = EvalContext(None, EvalOptions())
        keys = []
        for lv in plan:
            key = _level_key(lv, _level_values(lv, flat[lv.operand], ctx))
            if key is None:  # not a strict weak order: the interpreter's merge sort decides
                return _sort_results(_interpret(instr, operands, keyed_only), out)
            keys.append(np.ascontiguousarray(key))
        perm = _stable_perm(keys)
        if not stable and n > 16:
            perm = _unstable(perm, keys, flat)
        results = [np.take_along_axis(f, perm, axis=1) for f in flat]
    shaped = [np.moveaxis(r.reshape(m.shape), -1, dim) for r, m in zip(results, moved)]
    return _sort_results(shaped, out)


_INTERPRET = object()  # "the interpreter must run this sort"


def _sort_values_only(level, x, stable):
    """One operand, one key, no transform or jax's canonicalisation: sort the values'
    TOTALORDER keys themselves (no permutation) and turn them back into values. Under
    TOTALORDER -0 sits right before +0 and NaNs at the ends, so the classes that the
    comparison merges (zeros; NaNs when canonicalised) are blocks that get their original
    members in their original order (stable). None when this does not apply (then the
    permutation path runs); _INTERPRET for a FLOAT comparison of NaNs."""
    if level.transform is not None and level.canon is None:
        return None
    floating = x.dtype in (_F32, _F64)
    if floating:
        key = _float_bits_key(x)
    elif x.dtype.kind in "iu":
        key = x.copy()
    elif x.dtype == np.bool_:
        key = x.view(np.uint8).copy()
    else:
        return None
    if level.descending:
        np.invert(key, out=key)
    key.sort(axis=-1)
    if level.descending:
        np.invert(key, out=key)
    if not floating:
        return key.view(x.dtype)
    out = _float_bits_key(key).view(x.dtype)
    if level.transform is None and level.ctype == ComparisonType.TOTALORDER:
        return out  # equivalent elements are identical
    ends = out[:, [0, -1]]
    end_nans = np.isnan(ends)
    if level.ctype != ComparisonType.TOTALORDER and end_nans.any():
        return _INTERPRET  # FLOAT comparison with NaNs: not a strict weak order
    if level.canon is not None and (end_nans & (np.signbit(ends) != np.signbit(level.canon))).any():
        return None  # NaNs of the other sign sort at the other end: the permutation path
    classes = []
    zeros = x == 0
    if zeros.any():
        classes.append((zeros, False))
    if end_nans.any():
        classes.append((np.isnan(x), True))
    if not stable and x.shape[1] > 16 and any(_mixed(x, c) for c, _ in classes):
        return None  # std::sort's order of the class: the permutation path replays it
    for members, is_nan in classes:  # the class's block, filled with its originals in order
        out[np.isnan(out) if is_nan else out == 0] = x[members]
    return out


def _mixed(x: np.ndarray, cls: np.ndarray) -> bool:
    """Some members of the class differ in bits."""
    if not cls.any():
        return False
    bits = x[cls].view(np.uint32 if x.dtype == _F32 else np.uint64)
    return bool((bits != bits[0]).any())


def _unstable(perm, keys, flat) -> np.ndarray:
    """XLA:CPU's order for is_stable=false: rows whose equivalent neighbours (in the stable
    order) differ in some operand's bits are replayed through std::sort's model."""
    rows, n = perm.shape
    sorted_keys = [np.take_along_axis(k, perm, axis=1) for k in keys]
    same = np.ones((rows, n - 1), bool)
    for k in sorted_keys:
        same &= k[:, 1:] == k[:, :-1]
    if not same.any():
        return perm
    identical = np.ones((rows, n - 1), bool)
    for f in flat:
        raw = np.take_along_axis(f, perm, axis=1)
        raw = raw.view(np.uint8).reshape(rows, n, -1)
        identical &= np.all(raw[:, 1:] == raw[:, :-1], axis=2)
    visible = np.any(same & ~identical, axis=1)
    if not visible.any():
        return perm
    perm = perm.copy()
    classes_sorted = np.concatenate([np.zeros((rows, 1), np.int64),
                                     np.cumsum(~same, axis=1, dtype=np.int64)], axis=1)
    for r in np.nonzero(visible)[0]:
        classes = np.empty(n, np.int64)
        classes[perm[r]] = classes_sorted[r]
        perm[r] = std_sort_order(classes.tolist())
    return perm


def _interpret(instr, operands, keyed_only=False):
    if keyed_only:
        raise NotKeyed(instr.name)
    value = EvalContext(None, EvalOptions()).run_instruction(instr, list(operands))
    return list(value) if isinstance(value, tuple) else [value]


def _sort_results(results, out):
    if out is None:
        results = [np.asarray(r, order="C") for r in results]
        return tuple(results) if len(results) > 1 else results[0]
    targets = list(out) if isinstance(out, (tuple, list)) else [out]
    if len(targets) != len(results):
        raise EvaluationError(f"sort: out= has {len(targets)} arrays for {len(results)} "
                              f"results")
    for t, r in zip(targets, results):
        np.copyto(t, r)
    return tuple(targets) if isinstance(out, (tuple, list)) else targets[0]


# -- fft --------------------------------------------------------------------------------------


def _supports_fft(instr) -> bool:
    return _result_dtype(instr) in (_F32, _F64, _C64, _C128) and all(
        np.dtype(dtypes.to_dtype(o.shape.element_type)) in (_F32, _F64, _C64, _C128)
        for o in instr.operands)


def _fit_axis(x: np.ndarray, axis: int, size: int) -> np.ndarray:
    n = x.shape[axis]
    if n == size:
        return x
    if n > size:
        index = [slice(None)] * x.ndim
        index[axis] = slice(0, size)
        return x[tuple(index)]
    pad = [(0, 0)] * x.ndim
    pad[axis] = (0, size - n)
    return np.pad(x, pad)


#: the work (points x log2 of the transform's length, complex points; a real transform's
#: half) from which an FFT is split over the cores: SciPy starts its threads per call
#: (~40-60 us), so smaller transforms take longer on two than on one (on 2 cores:
#: 256x256 complex 2-D 0.16-0.30 ms on two against 0.19 on one, 512x512 0.72 against
#: 1.15; 1024 rows of 256 real points 0.25 against 0.20, 1024 of 1024 0.54 against 0.95)
FFT_PARALLEL_WORK = 2_500_000


def _fft_workers(data: np.ndarray, lengths, fft_type) -> int:
    """SciPy's worker count for an FFT of ``data`` over the last len(lengths) axes."""
    points = data.size * (2 if fft_type is FftType.IRFFT else 1)
    work = points * sum(max(1.0, math.log2(max(1, n))) for n in lengths)
    if fft_type in (FftType.RFFT, FftType.IRFFT):
        work /= 2
    return CORES if work >= FFT_PARALLEL_WORK else 1


def _run_fft(instr, operands, out):
    import scipy.fft

    (x,) = operands
    fft_type = instr.attrs["fft_type"]
    lengths = [int(v) for v in instr.attrs["fft_length"]]
    rank = len(lengths)
    what = f"fft %{instr.name}"
    if not 1 <= rank <= min(3, x.ndim):
        raise EvaluationError(f"{what}: fft_length {lengths} does not fit an operand "
                              f"{_hlo_dims(x)}")
    result = _result_dtype(instr)
    axes = list(range(x.ndim - rank, x.ndim))
    out_dims = list(x.shape[:x.ndim - rank]) + list(instr.shape.dimensions[x.ndim - rank:])
    in_sizes = lengths[:-1] + [lengths[-1] // 2 + 1] if fft_type is FftType.IRFFT else lengths
    data = x
    for axis, size in zip(axes, in_sizes):
        data = _fit_axis(data, axis, size)
    workers = _fft_workers(data, lengths, fft_type)
    # one axis: SciPy's 1-D transforms (its n-D ones over a single axis took twice as long:
    # 1024 rows of 1024 complex points, fftn 2.1 ms, fft 1.0 ms)
    one = rank == 1
    with np.errstate(all="ignore"):
        if 0 in lengths or data.size == 0:
            value = np.zeros([d if i < x.ndim - rank else 0 for i, d in enumerate(out_dims)],
                             result)
        elif fft_type is FftType.FFT:
            value = scipy.fft.fft(data, axis=-1, workers=workers) if one else \
                scipy.fft.fftn(data, axes=axes, workers=workers)
        elif fft_type is FftType.IFFT:
            value = scipy.fft.ifft(data, axis=-1, workers=workers) if one else \
                scipy.fft.ifftn(data, axes=axes, workers=workers)
        elif fft_type is FftType.RFFT:
            value = scipy.fft.rfft(np.real(data), axis=-1, workers=workers) if one else \
                scipy.fft.rfftn(np.real(data), axes=axes, workers=workers)
        else:
            value = scipy.fft.irfft(data, n=lengths[0], axis=-1, workers=workers) if one else \
                scipy.fft.irfftn(data, s=lengths, axes=axes, workers=workers)
    for axis in axes:
        value = _fit_axis(value, axis, out_dims[axis])
    if result.kind != "c":
        value = np.real(value)
    return _finish(value.astype(result, copy=False), result, out)


_SUPPORTS = {"dot": _supports_dot, "convolution": _supports_convolution, "sort": _supports_sort,
             "fft": _supports_fft, "cholesky": linalg.supports_cholesky,
             "triangular-solve": linalg.supports_triangular_solve,
             "custom-call": lapack_calls.supports}
_RUN = {"dot": _run_dot, "convolution": _run_convolution, "sort": _run_sort, "fft": _run_fft,
        "cholesky": linalg.run_cholesky, "triangular-solve": linalg.run_triangular_solve,
        "custom-call": lapack_calls.run}

__all__ = ["CORES", "batched_gemm", "blas_function_pointer", "run", "sort_levels", "supports"]

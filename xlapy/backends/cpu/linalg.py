"""cholesky and triangular-solve of the CPU backend through LAPACK xPOTRF and BLAS xTRSM.

Both routines are called through the raw function pointers SciPy exports
(``blas.lapack_function_pointer`` / ``blas_function_pointer``: Fortran convention, every
argument by pointer), from ctypes (the GIL released during the call), one call per matrix of
the batch, the matrices handed out over the backend's worker pool (``threads.parallel``,
single-threaded BLAS each). Native code can call the same addresses.

Buffers are row-major; Fortran reads a row-major matrix as its transpose, so:
- cholesky(a, lower=true) reads a's lower triangle = the upper triangle of the column-major
  view: xPOTRF('U') gives U with U^T U = a, stored where row-major reading sees L = U^T.
  lower=false is the mirror image (xPOTRF('L')). The other triangle is zeroed, as XLA's
  expander leaves zeros there. A matrix LAPACK does not factor (a pivot <= 0 or NaN: not
  positive definite) is handed to the interpreter's kernel, which is XLA's CholeskyExpander
  model (all NaN for the square root of a negative number, inf/NaN from a zero pivot).
- triangular-solve: op(a) x = b (left_side) transposed is x^T op(a)^T = b^T, i.e. in the
  column-major view the other side, the other triangle and the same transpose flag; xTRSM
  solves in place on a copy of b. unit_diagonal is xTRSM's diag='U' (the diagonal is never
  read), the other triangle is never read either, as in XLA.

Compute type: f32 for f32 and narrower floats (bf16, f16: converted to f32, the result
rounded once), f64 for f64. Complex types stay on the interpreter (XLA's expander divides a
complex diagonal's imaginary part, which LAPACK's Hermitian routines never see).

Imports numpy, ctypes, the interpreter's kernels (the fallback) and the backend's blas and
threads modules.
"""

from __future__ import annotations

import ctypes

import numpy as np

from xlapy.backends.cpu import blas, threads
from xlapy.shape import dtypes

_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)
_PREFIX = {_F32: "s", _F64: "d"}
_PTR = ctypes.c_void_p
_POTRF = ctypes.CFUNCTYPE(None, _PTR, _PTR, _PTR, _PTR, _PTR)
_TRSM = ctypes.CFUNCTYPE(None, _PTR, _PTR, _PTR, _PTR, _PTR, _PTR, _PTR, _PTR, _PTR, _PTR,
                         _PTR)
_fns: dict[str, object] = {}


def _fn(name: str, proto, lapack: bool):
    fn = _fns.get(name)
    if fn is None:
        address = blas.lapack_function_pointer(name) if lapack else \
            blas.blas_function_pointer(name)
        fn = _fns[name] = proto(address)
    return fn


def _compute(dtype) -> np.dtype | None:
    """f32/f64 for real floating types, None for the others (they stay interpreted)."""
    dtype = np.dtype(dtype)
    if dtype == _F64:
        return _F64
    if dtype.kind == "c" or dtype.kind in "biu":
        return None
    try:
        t = dtypes.from_dtype(dtype)
    except (KeyError, ValueError, TypeError):
        return None
    return _F32 if dtypes.is_floating(t) else None


def supports_cholesky(instr) -> bool:
    return _compute(dtypes.to_dtype(instr.shape.element_type)) is not None


def supports_triangular_solve(instr) -> bool:
    return _compute(dtypes.to_dtype(instr.shape.element_type)) is not None and \
        _compute(dtypes.to_dtype(instr.operands[0].shape.element_type)) is not None


def _chars(*values: str):
    return [ctypes.create_string_buffer(v.encode()) for v in values]


def _batch_parallel(count: int, per_matrix, body) -> None:
    """``body(i)`` for every matrix i, over the pool when the batch is big enough."""
    def run(next_item, local):
        while (i := next_item()) is not None:
            body(i)

    threads.parallel(range(count), run, threads.WORKERS if count * per_matrix >= 1 << 18 else 1)


def run_cholesky(instr, operands, out):
    from xlapy.interpreter.evaluator import EvaluationError

    (a,) = operands
    result = np.dtype(dtypes.to_dtype(instr.shape.element_type))
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise EvaluationError(f"cholesky %{instr.name}: expected a batch of square matrices, "
                              f"got dimensions {list(a.shape)}")
    compute = _compute(result)
    n = a.shape[-1]
    work = np.array(a, dtype=compute, order="C", copy=True)
    if work.size == 0:
        return _finish(work, result, out)
    mats = work.reshape(-1, n, n)
    count = mats.shape[0]
    failed = np.zeros(count, bool)
    if n and count:
        fn = _fn(_PREFIX[compute] + "potrf", _POTRF, lapack=True)
        lower = bool(instr.attrs["lower"])
        stride = n * n * compute.itemsize
        base = mats.ctypes.data

        def factor(i):
            uplo, = _chars("U" if lower else "L")
            ints = np.array([n, n, 0], np.int32)
            ip = ints.ctypes.data
            fn(uplo, ip, base + i * stride, ip + 4, ip + 8)
            failed[i] = ints[2] != 0

        _batch_parallel(count, n ** 3, factor)
        tri = np.tril if lower else np.triu
        mats[...] = tri(mats)
    value = work
    if failed.any():  # not positive definite: XLA's expander model decides those matrices
        wide = value.reshape(-1, n, n)
        src = np.asarray(a).reshape(-1, n, n)
        for i in np.nonzero(failed)[0]:
            wide[i] = _cholesky_one(instr, src[i]).astype(compute)
    return _finish(value, result, out)


def _cholesky_one(instr, matrix):
    """The interpreter's cholesky of one matrix (instr's attributes, a rank-2 operand)."""
    from types import SimpleNamespace

    from xlapy.interpreter.kernels.linalg import cholesky_kernel

    one = SimpleNamespace(name=instr.name, attrs={"lower": instr.attrs["lower"]})
    return np.asarray(cholesky_kernel(None, one, [matrix]))


def run_triangular_solve(instr, operands, out):
    from xlapy.interpreter.evaluator import EvaluationError

    a, b = operands
    what = f"triangular-solve %{instr.name}"
    left, lower = bool(instr.attrs["left_side"]), bool(instr.attrs["lower"])
    unit, transpose = bool(instr.attrs["unit_diagonal"]), instr.attrs["transpose_a"]
    if a.ndim < 2 or a.shape[-1] != a.shape[-2] or a.shape[:-2] != b.shape[:-2]:
        raise EvaluationError(f"{what}: a {list(a.shape)} and b {list(b.shape)} are not "
                              f"batches of square matrices and right-hand sides")
    n = a.shape[-1]
    if (b.shape[-2] if left else b.shape[-1]) != n:
        raise EvaluationError(f"{what}: the shared dimension of a {list(a.shape)} and b "
                              f"{list(b.shape)} does not match")
    result = np.dtype(dtypes.to_dtype(instr.shape.element_type))
    compute = _compute(result)
    if _compute(a.dtype) == _F64:
        compute = _F64
    am = np.ascontiguousarray(a, dtype=compute).reshape(-1, n, n)
    x = np.array(b, dtype=compute, order="C", copy=True)
    rows, cols = b.shape[-2], b.shape[-1]
    if x.size == 0 or n == 0:
        return _finish(x, result, out)
    xm = x.reshape(-1, rows, cols)
    count = xm.shape[0]
    name = getattr(transpose, "name", str(transpose))
    if count and rows and cols:
        fn = _fn(_PREFIX[compute] + "trsm", _TRSM, lapack=False)
        # the column-major view: the other side and triangle, the same transpose flag
        flags = ("R" if left else "L", "U" if lower else "L",
                 "N" if name == "NO_TRANSPOSE" else "T", "U" if unit else "N")
        isz = compute.itemsize
        a_base, x_base = am.ctypes.data, xm.ctypes.data
        a_stride, x_stride = n * n * isz, rows * cols * isz

        def solve(i):
            side, uplo, trans, diag = _chars(*flags)
            ints = np.array([cols, rows, n, cols], np.int32)  # m, n, lda, ldb
            one = np.ones(1, compute)
            ip = ints.ctypes.data
            with np.errstate(all="ignore"):
                fn(side, uplo, trans, diag, ip, ip + 4, one.ctypes.data, a_base + i * a_stride,
                   ip + 8, x_base + i * x_stride, ip + 12)

        _batch_parallel(count, n * rows * cols, solve)
    return _finish(x, result, out)


def _finish(value, result, out):
    from xlapy.interpreter.kernels.dot_conv import from_compute

    if value.dtype != result:
        value = from_compute(value, result)
    if out is None:
        return np.asarray(value, order="C")
    np.copyto(out, value, casting="unsafe")
    return out


__all__ = ["run_cholesky", "run_triangular_solve", "supports_cholesky",
           "supports_triangular_solve"]

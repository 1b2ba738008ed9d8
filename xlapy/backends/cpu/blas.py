"""BLAS for the CPU backend: GEMM through the function pointers SciPy exports.

``scipy.linalg.cython_blas`` publishes every BLAS routine of the OpenBLAS SciPy ships as a
PyCapsule in ``__pyx_capi__`` (Fortran calling convention: every argument by pointer, no
hidden string lengths). ``blas_function_pointer(name)`` gives the raw address, so native code
(llvmlite functions) can call BLAS too; ``gemm`` calls xGEMM through ctypes, which releases
the GIL for the duration of the call.

``gemm_rowmajor`` multiplies row-major matrices given as (pointer, row stride, column stride)
triples: an operand whose columns are contiguous is passed as is, one whose rows are
contiguous (a transposed view) with the transpose flag, so transposed operands are never
copied. ``set_local_threads`` bounds the BLAS threads of the calling thread only (OpenBLAS's
``openblas_set_num_threads_local``), so two Python threads can each run a single-threaded GEMM
at once.

Imports numpy, scipy (its BLAS and LAPACK extension modules alone: ``_cython_module``),
ctypes only.
"""

from __future__ import annotations

import ctypes
import glob
import os
import threading

import numpy as np

_TYPES = {np.dtype(np.float32): "s", np.dtype(np.float64): "d",
          np.dtype(np.complex64): "c", np.dtype(np.complex128): "z"}
INT_MAX = 2 ** 31 - 1  # SciPy's BLAS takes 32-bit integers

_lock = threading.RLock()
_pointers: dict[str, int] = {}
_gemms: dict[str, object] = {}
_local_threads = None  # ctypes function or False when the library does not have it


def blas_function_pointer(name: str) -> int:
    """The address of BLAS routine ``name`` (``sgemm``, ``dgemm``, ``cgemm``, ``zgemm``,
    ``saxpy``, ``strsm``, ...) in SciPy's BLAS: Fortran calling convention, every argument
    by pointer."""
    return _capsule_pointer("cython_blas", name)


def lapack_function_pointer(name: str) -> int:
    """The address of LAPACK routine ``name`` (``spotrf``, ``dpotrf``, ...) in SciPy's LAPACK
    (``scipy.linalg.cython_lapack``): Fortran calling convention, as blas_function_pointer."""
    return _capsule_pointer("cython_lapack", name)


def _capsule_pointer(module: str, name: str) -> int:
    key = f"{module}.{name}"
    with _lock:
        if key not in _pointers:
            table = _cython_module(module).__pyx_capi__
            capsule = table.get(name)
            if capsule is None:
                kind = "BLAS" if module == "cython_blas" else "LAPACK"
                raise KeyError(f"{kind} function pointer: SciPy's {kind} has no routine "
                               f"{name!r}")
            api = ctypes.pythonapi
            api.PyCapsule_GetName.restype = ctypes.c_char_p
            api.PyCapsule_GetName.argtypes = [ctypes.py_object]
            api.PyCapsule_GetPointer.restype = ctypes.c_void_p
            api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
            _pointers[key] = int(api.PyCapsule_GetPointer(capsule, api.PyCapsule_GetName(capsule)))
        return _pointers[key]


def _cython_module(module: str):
    """``scipy.linalg.<module>`` (cython_blas, cython_lapack). Loaded as an extension module
    of its own when scipy.linalg is not imported yet: importing the package runs its Python
    layer (f2py wrappers, scipy.special, numpy.testing...), some 25 MiB of resident memory
    the backend does not use; the extension alone costs about 2 MiB. It is registered under
    its full name, so a later import of scipy.linalg finds the same module."""
    import importlib
    import importlib.machinery
    import importlib.util
    import sys

    full = f"scipy.linalg.{module}"
    found = sys.modules.get(full)
    if found is not None:
        return found
    if "scipy.linalg" in sys.modules:
        return importlib.import_module(full)
    if module != "cython_blas":  # cython_lapack imports cython_blas's functions by name
        _cython_module("cython_blas")
    import scipy

    spec = importlib.machinery.PathFinder.find_spec(
        module, [os.path.join(os.path.dirname(scipy.__file__), "linalg")])
    if spec is None:  # not where SciPy keeps it: the ordinary import
        return importlib.import_module(full)
    spec.name = full
    mod = importlib.util.module_from_spec(spec)
    sys.modules[full] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        sys.modules.pop(full, None)
        raise
    return mod


def _gemm_fn(prefix: str):
    fn = _gemms.get(prefix)
    if fn is None:
        proto = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_char_p,
                                 *([ctypes.c_void_p] * 11))
        fn = proto(blas_function_pointer(prefix + "gemm"))
        _gemms[prefix] = fn
    return fn


def gemm_name(dtype) -> str:
    """The BLAS routine multiplying matrices of ``dtype``: sgemm, dgemm, cgemm or zgemm."""
    return _TYPES[np.dtype(dtype)] + "gemm"


def has_gemm(dtype) -> bool:
    return np.dtype(dtype) in _TYPES


def gemm(dtype, trans_a: bool, trans_b: bool, m: int, n: int, k: int, alpha, a: int, lda: int,
         b: int, ldb: int, beta, c: int, ldc: int) -> None:
    """Column-major xGEMM: C[m,n] = alpha op(A) op(B) + beta C with raw pointers (Fortran
    conventions: leading dimensions in elements)."""
    dtype = np.dtype(dtype)
    fn = _gemm_fn(_TYPES[dtype])
    ints = np.array([m, n, k, lda, ldb, ldc], np.int32)
    scalars = np.array([alpha, beta], dtype)
    ip, sp = ints.ctypes.data, scalars.ctypes.data
    fn(b"T" if trans_a else b"N", b"T" if trans_b else b"N", ip, ip + 4, ip + 8, sp, a,
       ip + 12, b, ip + 16, sp + dtype.itemsize, c, ip + 20)


class PreparedGemm:
    """Row-major C[m,n] = A[m,k] B[k,n] for many matrices of one shape and form: the
    arguments that do not change (flags, sizes, leading dimensions, alpha and beta) are
    marshalled once, so a call passes three pointers (``gemm_rowmajor`` builds them per
    call, microseconds that dominate small GEMMs). One instance per thread (it owns its
    argument buffers)."""

    __slots__ = ("args", "fn", "ints", "scalars", "ta", "tb")

    def __init__(self, dtype, m: int, n: int, k: int, a_form, b_form, ldc: int):
        dtype = np.dtype(dtype)
        (a_kind, lda), (b_kind, ldb) = a_form, b_form
        self.fn = _gemm_fn(_TYPES[dtype])
        self.ta, self.tb = (b"T" if b_kind == "c" else b"N"), (b"T" if a_kind == "c" else b"N")
        # column-major C^T[n,m] = B^T A^T (see gemm_rowmajor)
        self.ints = np.array([n, m, k, ldb, lda, ldc], np.int32)
        self.scalars = np.array([1.0, 0.0], dtype)
        ip, sp = self.ints.ctypes.data, self.scalars.ctypes.data
        self.args = (ip, ip + 4, ip + 8, sp, ip + 12, ip + 16, sp + dtype.itemsize, ip + 20)

    def __call__(self, a: int, b: int, c: int) -> None:
        ip_n, ip_m, ip_k, alpha, ld_b, ld_a, beta, ld_c = self.args
        self.fn(self.ta, self.tb, ip_n, ip_m, ip_k, alpha, b, ld_b, a, ld_a, beta, c, ld_c)


def matrix_form(rows: int, cols: int, row_stride: int, col_stride: int):
    """How BLAS can read a row-major-indexed matrix with these element strides:
    ('r', ld) when columns are contiguous, ('c', ld) when rows are, None otherwise (the
    matrix must be copied). Size-1 dimensions take any stride."""
    if col_stride == 1 or cols == 1:
        ld = row_stride if rows > 1 else max(cols, 1)
        if ld >= max(cols, 1):
            return ("r", ld)
    if row_stride == 1 or rows == 1:
        ld = col_stride if cols > 1 else max(rows, 1)
        if ld >= max(rows, 1):
            return ("c", ld)
    return None


def gemm_rowmajor(dtype, m: int, n: int, k: int, a: int, a_form, b: int, b_form, c: int,
                  ldc: int, beta: float = 0.0) -> None:
    """C[m,n] (row-major, row stride ldc) = A[m,k] B[k,n] (+ beta C), A and B given by
    pointer and ``matrix_form``. Row-major C = A B is column-major C^T = B^T A^T."""
    (a_kind, lda), (b_kind, ldb) = a_form, b_form
    # a row-major matrix is, read column-major, its own transpose: no flag needed
    gemm(dtype, b_kind == "c", a_kind == "c", n, m, k, 1.0, b, ldb, a, lda, beta, c, ldc)


def _openblas_library():
    import scipy

    base = os.path.dirname(os.path.dirname(scipy.__file__))
    for folder in (os.path.join(base, "scipy.libs"), os.path.join(base, "scipy_openblas32", "lib")):
        found = sorted(glob.glob(os.path.join(folder, "libscipy_openblas*.so*")))
        if found:
            return found[0]
    return None


_lib = None  # ctypes.CDLL of SciPy's OpenBLAS, or False


def _library():
    global _lib
    with _lock:
        if _lib is None:
            _lib = False
            blas_function_pointer("sgemm")  # loads SciPy's BLAS library
            path = _openblas_library()
            if path is not None:
                try:
                    _lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
                except OSError:
                    _lib = False
    return _lib or None


def _symbol(*names):
    lib = _library()
    for name in names:
        fn = getattr(lib, name, None) if lib is not None else None
        if fn is not None:
            return fn
    return None


def library_info() -> dict:
    """What BLAS the backend calls: ``path`` (the shared library), ``config`` (OpenBLAS's
    build line, ``openblas_get_config``), ``core`` (the kernel family in use,
    ``openblas_get_corename``), ``threads`` (its default thread count), ``coretype`` (the
    environment's ``OPENBLAS_CORETYPE``, None when unset). Entries BLAS cannot say are None."""
    info = {"path": _openblas_library(), "config": None, "core": None, "threads": None,
            "coretype": os.environ.get("OPENBLAS_CORETYPE") or None}
    for key, names, restype in (
            ("config", ("scipy_openblas_get_config", "openblas_get_config"), ctypes.c_char_p),
            ("core", ("scipy_openblas_get_corename", "openblas_get_corename"),
             ctypes.c_char_p),
            ("threads", ("scipy_openblas_get_num_threads", "openblas_get_num_threads"),
             ctypes.c_int)):
        fn = _symbol(*names)
        if fn is None:
            continue
        fn.restype, fn.argtypes = restype, []
        value = fn()
        info[key] = value.decode(errors="replace").strip() if isinstance(value, bytes) \
            else value
    return info


def set_local_threads(count: int) -> int | None:
    """Bound the BLAS threads the calling thread uses (OpenBLAS >= 0.3.27); returns the
    previous bound, or None when SciPy's BLAS cannot do this (then nothing changes)."""
    global _local_threads
    if _local_threads is None:
        fn = _symbol("openblas_set_num_threads_local")
        if fn is not None:
            fn.restype, fn.argtypes = ctypes.c_int, [ctypes.c_int]
        _local_threads = fn or False
    if not _local_threads:
        return None
    return int(_local_threads(int(count)))


__all__ = ["INT_MAX", "PreparedGemm", "blas_function_pointer", "gemm", "gemm_name",
           "gemm_rowmajor", "has_gemm", "lapack_function_pointer", "library_info", "matrix_form",
           "set_local_threads"]

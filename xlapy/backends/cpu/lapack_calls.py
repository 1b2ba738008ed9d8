"""jaxlib's LAPACK custom calls on the CPU backend: LAPACK through SciPy's function pointers.

jax lowers its CPU linear algebra (``jnp.linalg.cholesky``/``eigh``/``qr``/``svd``/``solve``/
``inv``/``det``, ``jax.scipy.linalg.lu``/``solve_triangular``...) to typed-FFI custom calls
``lapack_<t><routine>_ffi`` (t = s, d, c, z). This module runs those targets the way
jaxlib's FFI handlers do, calling the same routines of the same library (jaxlib binds the
LAPACK/BLAS of SciPy's ``cython_lapack``/``cython_blas``; ``blas.lapack_function_pointer``
gives the raw addresses, Fortran convention, every argument by pointer) with the same
arguments and workspace sizes, so the results are XLA:CPU's bit for bit:

| target | operands -> results | LAPACK call per matrix |
| --- | --- | --- |
| potrf | a -> (factor, info s32[batch]) | xPOTRF(uplo); the other triangle keeps a's values |
| trsm | a, b -> x | xTRSM(side, uplo, trans_x, diag, alpha = 1) on a copy of b |
| getrf | a -> (lu, ipiv s32[batch, min(m,n)] 1-based, info) | xGETRF |
| geqrf | a -> (qr, tau[batch, min(m,n)]) | xGEQRF, workspace from its query |
| orgqr, ungqr | a, tau -> q | xORGQR/xUNGQR(k = tau's length), workspace from its query |
| syevd, heevd | a -> (vectors or destroyed a, eigenvalues, info) | xSYEVD/xHEEVD(mode, uplo) |
| gesdd, gesvd | a -> (destroyed a, s, u, vt, info) | xGESDD(mode) / xGESVD(mode, mode); A/S/N |
| geev | a -> (wr, wi, vl, vr, info) or (w, vl, vr, info) | xGEEV(left, right) on a copy |

Workspaces: xSYEVD/xHEEVD get jaxlib's sizes (the routines' documented minimums), the
others the sizes their workspace query gives (lwork = -1), as jaxlib asks. In SVD mode N,
u and vt are not written (jaxlib leaves its buffers as they were; zeros here). geev, as
jaxlib: a matrix with a non-finite element is not factored (info = -4; its other results
are NaN and zeros here, left unwritten by jaxlib); real eigenvectors come back complex, a
conjugate pair unpacked from LAPACK's (re, im) columns when info is 0; eigenvectors not
asked for are zeros (jaxlib leaves whatever its scratch held).

Leading dimensions are batch dimensions. jax asks for column-major operands and results
(``operand_layout_constraints``); xlapy's buffers are logical row-major arrays, so each
matrix is copied into column-major order for LAPACK (the routines work in place on a copy
anyway, as jaxlib's handlers copy the operand into the result first) and back. info is
returned as LAPACK gives it (jax turns failures into NaNs in HLO around the call).

The matrices of a batch go over the backend's worker pool (single-threaded BLAS in each
thread, a workspace per thread) when the batch is large enough; one matrix is one call on
the calling thread with BLAS's own threads. ``form(instr)`` says at plan time whether a
custom call runs here (a registered user function of the same name, an older jaxlib
signature, SVD mode 'O', empty matrices: a reason string, and the interpreter's target
runs it).

Imports numpy, ctypes, the interpreter's custom-call registry (attribute parsing, geev's
unpacking) and the backend's blas and threads modules.
"""

from __future__ import annotations

import ctypes
import re

import numpy as np

from xlapy.backends.cpu import blas, threads
from xlapy.backends.cpu.transposes import swap_last2
from xlapy.shape import dtypes

_BUILTIN_SOURCE = "xlapy.interpreter.custom_calls_lapack"
_TARGET = re.compile(r"lapack_([sdcz])([a-z0-9]+)_ffi\Z")
_DTYPE = {"s": np.dtype(np.float32), "d": np.dtype(np.float64),
          "c": np.dtype(np.complex64), "z": np.dtype(np.complex128)}
_REAL = {"s": _DTYPE["s"], "d": _DTYPE["d"], "c": _DTYPE["s"], "z": _DTYPE["d"]}
_S32 = np.dtype(np.int32)
#: routine name -> (family, prefixes it exists for)
_ROUTINES = {"potrf": ("potrf", "sdcz"), "trsm": ("trsm", "sdcz"), "getrf": ("getrf", "sdcz"),
             "geqrf": ("geqrf", "sdcz"), "orgqr": ("orgqr", "sd"), "ungqr": ("orgqr", "cz"),
             "syevd": ("syevd", "sd"), "heevd": ("syevd", "cz"), "gesdd": ("gesdd", "sdcz"),
             "gesvd": ("gesdd", "sdcz"), "geev": ("geev", "sdcz")}
_PTR = ctypes.c_void_p
_fns: dict[str, object] = {}
PARALLEL_WORK = 1 << 18  # flops of a batch from which its matrices go over the pool


def _routine(name: str, nargs: int, lapack: bool = True):
    fn = _fns.get(name)
    if fn is None:
        address = blas.lapack_function_pointer(name) if lapack else \
            blas.blas_function_pointer(name)
        fn = _fns[name] = ctypes.CFUNCTYPE(None, *([_PTR] * nargs))(address)
    return fn


# -- what runs here -----------------------------------------------------------------------------


class Form:
    """A LAPACK custom call this module runs: ``family`` (potrf, trsm, getrf, geqrf, orgqr,
    syevd, gesdd), ``prefix`` (s, d, c, z), ``routine`` (the LAPACK/BLAS name), ``flags``
    (the backend_config's character codes)."""

    __slots__ = ("family", "flags", "prefix", "routine")

    def __init__(self, family, prefix, routine, flags):
        self.family, self.prefix, self.routine, self.flags = family, prefix, routine, flags


_UNSET = object()


def form(instr):
    """The ``Form`` of ``instr`` when it is a LAPACK custom call this module runs, else a
    string saying why not (cached on the instruction)."""
    got = instr.__dict__.get("_cpu_lapack_form", _UNSET)
    if got is _UNSET:
        try:
            got = _form(instr)
        except Exception as e:  # noqa: BLE001 - a malformed backend_config: the interpreter
            got = f"{instr.attrs.get('custom_call_target')}: {e}"  # reports it when run
        instr._cpu_lapack_form = got
    return got


def is_lapack_target(instr) -> bool:
    """Whether ``instr`` is a custom call to one of jaxlib's ``lapack_*_ffi`` targets."""
    target = instr.attrs.get("custom_call_target") if instr.opcode == "custom-call" else None
    return bool(target and target.startswith("lapack_") and target.endswith("_ffi"))


def _form(instr):
    from xlapy.interpreter.custom_calls import (
        backend_config_attrs,
        char_attr,
        lookup_custom_call,
    )

    if instr.opcode != "custom-call":
        return "not a custom call"
    target = instr.attrs.get("custom_call_target") or ""
    m = _TARGET.match(target)
    entry = _ROUTINES.get(m.group(2)) if m else None
    if entry is None or m.group(1) not in entry[1]:
        if m:
            return f"{target}: no compiled path for LAPACK {m.group(1)}{m.group(2)} (the " \
                   f"interpreter's target runs it)"
        return f"{target}: not a LAPACK target"
    registered = lookup_custom_call(target)
    if registered is None or registered.source != _BUILTIN_SOURCE:
        return f"{target} is registered by the user (their function runs)"
    family, prefix = entry[0], m.group(1)
    attrs = backend_config_attrs(instr)
    flags = {}
    for key, allowed, default in _FLAGS[family]:
        flags[key] = char_attr(instr, attrs, key, allowed, default)
    why = _SIGNATURES[family](instr, prefix, flags)
    if why is not None:
        return f"{target}: {why}"
    return Form(family, prefix, prefix + m.group(2), flags)


_FLAGS = {
    "potrf": [("uplo", "LU", None)],
    "trsm": [("side", "LR", None), ("uplo", "LU", None), ("trans_x", "NTC", None),
             ("diag", "UN", None)],
    "getrf": [], "geqrf": [], "orgqr": [],
    "syevd": [("uplo", "LU", None), ("mode", "VN", "V")],
    "gesdd": [("mode", "ASNO", None)],
    "geev": [("compute_left", "NV", None), ("compute_right", "NV", None)],
}


def _dims(shape) -> tuple:
    return tuple(int(d) for d in shape.dimensions)


def _array(shape, dtype) -> bool:
    return shape.is_array() and not shape.is_dynamic() and \
        np.dtype(dtypes.to_dtype(shape.element_type)) == dtype


def _results(instr) -> list:
    return list(instr.shape.tuple_shapes) if instr.shape.is_tuple() else [instr.shape]


def _signature(instr, prefix, operands: list, results: list) -> str | None:
    """None when the operands and results are (dtype, dims) as given (dims None: any)."""
    got_ops, got_res = list(instr.operands), _results(instr)
    if len(got_ops) != len(operands) or len(got_res) != len(results) or \
            not instr.shape.is_tuple() and len(results) > 1:
        return f"{len(got_ops)} operands and {len(got_res)} results, jaxlib's handler takes " \
               f"{len(operands)} and gives {len(results)}"
    for what, got, want in (("operand", [o.shape for o in got_ops], operands),
                            ("result", got_res, results)):
        for i, (shape, (dtype, dims)) in enumerate(zip(got, want)):
            if not _array(shape, dtype) or dims is not None and _dims(shape) != tuple(dims):
                return f"{what} {i} is {shape}, jaxlib's handler needs " \
                       f"{dtypes.type_name(dtypes.from_dtype(dtype))}" \
                       f"[{','.join(map(str, dims)) if dims is not None else '...'}]"
    return None


def _matrix(instr, prefix) -> tuple | str:
    """(batch, rows, cols) of operand 0, or why it cannot run here."""
    if not instr.operands:
        return "no operand"
    shape = instr.operands[0].shape
    if not _array(shape, _DTYPE[prefix]) or len(shape.dimensions) < 2:
        return f"operand 0 is {shape}, not a batch of {prefix}-type matrices"
    dims = _dims(shape)
    if 0 in dims[-2:]:
        return "empty matrices"
    if max(dims[-2:]) > blas.INT_MAX // max(1, min(dims[-2:])):
        return "matrices too large for 32-bit LAPACK"
    return dims[:-2], dims[-2], dims[-1]


def _potrf_signature(instr, p, flags):
    got = _matrix(instr, p)
    if isinstance(got, str):
        return got
    batch, m, n = got
    if m != n:
        return "a Cholesky factorization of non-square matrices"
    return _signature(instr, p, [(_DTYPE[p], batch + (n, n))],
                      [(_DTYPE[p], batch + (n, n)), (_S32, batch)])


def _trsm_signature(instr, p, flags):
    if len(instr.operands) != 2:
        return "a trsm with an alpha operand (an older jaxlib signature)"
    b = instr.operands[1].shape
    if not _array(b, _DTYPE[p]) or len(b.dimensions) < 2:
        return f"operand 1 is {b}, not a batch of {p}-type matrices"
    bd = _dims(b)
    if 0 in bd:
        return "empty matrices"
    k = bd[-2] if flags["side"] == "L" else bd[-1]
    return _signature(instr, p, [(_DTYPE[p], bd[:-2] + (k, k)), (_DTYPE[p], bd)],
                      [(_DTYPE[p], bd)])


def _getrf_signature(instr, p, flags):
    got = _matrix(instr, p)
    if isinstance(got, str):
        return got
    batch, m, n = got
    return _signature(instr, p, [(_DTYPE[p], batch + (m, n))],
                      [(_DTYPE[p], batch + (m, n)), (_S32, batch + (min(m, n),)),
                       (_S32, batch)])


def _geqrf_signature(instr, p, flags):
    got = _matrix(instr, p)
    if isinstance(got, str):
        return got
    batch, m, n = got
    return _signature(instr, p, [(_DTYPE[p], batch + (m, n))],
                      [(_DTYPE[p], batch + (m, n)), (_DTYPE[p], batch + (min(m, n),))])


def _orgqr_signature(instr, p, flags):
    got = _matrix(instr, p)
    if isinstance(got, str):
        return got
    batch, m, n = got
    if len(instr.operands) != 2 or not instr.operands[1].shape.is_array() or \
            len(instr.operands[1].shape.dimensions) != len(batch) + 1:
        return "operands are not (a, tau)"
    k = _dims(instr.operands[1].shape)[-1]
    if not m >= n >= k:
        return f"a {m}x{n} matrix and {k} reflectors (LAPACK needs m >= n >= k)"
    return _signature(instr, p, [(_DTYPE[p], batch + (m, n)), (_DTYPE[p], batch + (k,))],
                      [(_DTYPE[p], batch + (m, n))])


def _syevd_signature(instr, p, flags):
    got = _matrix(instr, p)
    if isinstance(got, str):
        return got
    batch, m, n = got
    if m != n:
        return "an eigendecomposition of non-square matrices"
    return _signature(instr, p, [(_DTYPE[p], batch + (n, n))],
                      [(_DTYPE[p], batch + (n, n)), (_REAL[p], batch + (n,)), (_S32, batch)])


def _gesdd_signature(instr, p, flags):
    mode = flags["mode"]
    if mode == "O":
        return "SVD mode 'O' (jaxlib does not implement it either)"
    got = _matrix(instr, p)
    if isinstance(got, str):
        return got
    batch, m, n = got
    k = min(m, n)
    u = (m, m) if mode == "A" else (m, k) if mode == "S" else None
    vt = (n, n) if mode == "A" else (k, n) if mode == "S" else None
    why = _signature(instr, p, [(_DTYPE[p], batch + (m, n))],
                     [(_DTYPE[p], batch + (m, n)), (_REAL[p], batch + (k,)),
                      (_DTYPE[p], batch + u if u else None),
                      (_DTYPE[p], batch + vt if vt else None), (_S32, batch)])
    if why is None and mode == "N":
        shapes = _results(instr)
        ud, vd = _dims(shapes[2]), _dims(shapes[3])
        if len(ud) != len(batch) + 2 or len(vd) != len(batch) + 2 or \
                ud[:-2] != batch or vd[:-2] != batch or ud[-2] < m or vd[-2] < 1:
            return f"u {shapes[2]} and vt {shapes[3]} do not give LAPACK leading dimensions"
    return why


def _geev_signature(instr, p, flags):
    got = _matrix(instr, p)
    if isinstance(got, str):
        return got
    batch, m, n = got
    if m != n:
        return "an eigendecomposition of non-square matrices"
    c = _DTYPE["c" if p in "sc" else "z"]
    values = [(_DTYPE[p], batch + (n,))] * (2 if p in "sd" else 1)
    return _signature(instr, p, [(_DTYPE[p], batch + (n, n))],
                      values + [(c, batch + (n, n)), (c, batch + (n, n)), (_S32, batch)])


_SIGNATURES = {"potrf": _potrf_signature, "trsm": _trsm_signature,
               "getrf": _getrf_signature, "geqrf": _geqrf_signature,
               "orgqr": _orgqr_signature, "syevd": _syevd_signature,
               "gesdd": _gesdd_signature, "geev": _geev_signature}


def supports(instr) -> bool:
    return isinstance(form(instr), Form)


# -- running ------------------------------------------------------------------------------------


def _col_major(a: np.ndarray, count: int) -> np.ndarray:
    """The matrices of ``a`` (logical [..., rows, cols]) in column-major order: a C-contiguous
    [count, cols, rows] copy (each matrix as Fortran reads it, leading dimension rows)."""
    rows, cols = a.shape[-2], a.shape[-1]
    return swap_last2(np.asarray(a).reshape(count, rows, cols))


def _row_major(w: np.ndarray, shape) -> np.ndarray:
    """Column-major matrices ([count, cols, rows]) back to a logical array of ``shape``."""
    return swap_last2(w).reshape(shape)


def _over_batch(count: int, cost: int, make) -> None:
    """For every matrix i of a batch: ``one(i)``, where ``one = make()`` is built once per
    thread (its own workspace). Over the pool when the batch's work is large; a single
    matrix on the calling thread with BLAS's own threads."""
    if count == 0:
        return
    if count == 1 or count * cost < PARALLEL_WORK or threads.WORKERS < 2:
        one = make()
        if count == 1 and not threads.in_worker():
            one(0)
            return
        with threads.blas_calls():
            for i in range(count):
                one(i)
        return
    pieces = min(count, 4 * threads.WORKERS)
    bounds = [count * j // pieces for j in range(pieces + 1)]

    def body(next_item, local):
        one = make()
        while (j := next_item()) is not None:
            for i in range(bounds[j], bounds[j + 1]):
                one(i)

    threads.parallel(range(pieces), body)


def _ints(*values) -> np.ndarray:
    return np.array(values, np.int32)


def _char(letter: str):
    return ctypes.create_string_buffer(letter.encode())


def _query(fn, args_before, args_after, dtype) -> int:
    """A LAPACK workspace query (lwork = -1): the optimal size it writes into work[0]."""
    work = np.zeros(1, dtype)
    minus = _ints(-1, 0)
    fn(*args_before, work.ctypes.data, minus.ctypes.data, *args_after(minus.ctypes.data + 4))
    if minus[1] != 0:
        return -1
    return max(1, int(np.real(work[0])))


def run(instr, operands, out=None):
    """The results of LAPACK custom call ``instr`` (``form(instr)`` is a Form) on
    ``operands`` (logical row-major arrays): an array, or a tuple for a tuple result."""
    f = form(instr)
    if not isinstance(f, Form):
        from xlapy.interpreter.evaluator import EvaluationError

        raise EvaluationError(f"custom-call %{instr.name}: {f}")
    ops = [np.asarray(o) for o in operands]
    value = _RUN[f.family](f, ops, instr)
    if out is None or isinstance(value, tuple):
        return value
    np.copyto(out, value)
    return out


def _stride(w: np.ndarray) -> int:
    return w.strides[0] if w.ndim and w.shape[0] > 1 else 0


def _run_potrf(f, ops, instr):
    (a,) = ops
    batch, n = a.shape[:-2], a.shape[-1]
    count = int(np.prod(batch, dtype=np.int64))
    w = _col_major(a, count)
    info = np.zeros(count, np.int32)
    fn = _routine(f.routine, 5)
    base, step, ip = w.ctypes.data, _stride(w), info.ctypes.data

    def make():
        uplo, ints = _char(f.flags["uplo"]), _ints(n)
        nn = ints.ctypes.data

        def one(i):
            fn(uplo, nn, base + i * step, nn, ip + 4 * i)
        one.keep = (uplo, ints)
        return one

    _over_batch(count, n ** 3 // 3 * (3 if f.prefix in "cz" else 1), make)
    return _row_major(w, a.shape), info.reshape(batch)


def _run_trsm(f, ops, instr):
    a, b = ops
    batch, m, n = b.shape[:-2], b.shape[-2], b.shape[-1]
    count = int(np.prod(batch, dtype=np.int64))
    k = a.shape[-1]
    aw, x = _col_major(a, count), _col_major(b, count)
    fn = _routine(f.routine, 11, lapack=False)
    fl = f.flags
    a_base, a_step, x_base, x_step = aw.ctypes.data, _stride(aw), x.ctypes.data, _stride(x)
    dtype = _DTYPE[f.prefix]

    def make():
        chars = [_char(fl[key]) for key in ("side", "uplo", "trans_x", "diag")]
        ints, one_ = _ints(m, n, k), np.ones(1, dtype)
        ip, alpha = ints.ctypes.data, one_.ctypes.data

        def one(i):
            fn(*chars, ip, ip + 4, alpha, a_base + i * a_step, ip + 8, x_base + i * x_step, ip)
        one.keep = (chars, ints, one_)
        return one

    with np.errstate(all="ignore"):
        _over_batch(count, m * n * k * (3 if f.prefix in "cz" else 1), make)
    return _row_major(x, b.shape)


def _run_getrf(f, ops, instr):
    (a,) = ops
    batch, m, n = a.shape[:-2], a.shape[-2], a.shape[-1]
    count = int(np.prod(batch, dtype=np.int64))
    k = min(m, n)
    w = _col_major(a, count)
    ipiv = np.zeros((count, k), np.int32)
    info = np.zeros(count, np.int32)
    fn = _routine(f.routine, 6)
    base, step, pp, ip = w.ctypes.data, _stride(w), ipiv.ctypes.data, info.ctypes.data

    def make():
        ints = _ints(m, n)
        d = ints.ctypes.data

        def one(i):
            fn(d, d + 4, base + i * step, d, pp + 4 * k * i, ip + 4 * i)
        one.keep = ints
        return one

    _over_batch(count, m * n * k * (3 if f.prefix in "cz" else 1), make)
    return _row_major(w, a.shape), ipiv.reshape(batch + (k,)), info.reshape(batch)


def _run_geqrf(f, ops, instr):
    (a,) = ops
    batch, m, n = a.shape[:-2], a.shape[-2], a.shape[-1]
    count = int(np.prod(batch, dtype=np.int64))
    k = min(m, n)
    dtype = _DTYPE[f.prefix]
    w = _col_major(a, count)
    tau = np.zeros((count, k), dtype)
    fn = _routine(f.routine, 8)
    dims = _ints(m, n)
    d = dims.ctypes.data
    lwork = _query(fn, (d, d + 4, None, d, None), lambda info: (info,), dtype)
    base, step, tp = w.ctypes.data, _stride(w), tau.ctypes.data
    tstep = k * dtype.itemsize

    def make():
        ints, work = _ints(m, n, lwork, 0), np.zeros(lwork, dtype)
        p, wp = ints.ctypes.data, work.ctypes.data

        def one(i):
            fn(p, p + 4, base + i * step, p, tp + i * tstep, wp, p + 8, p + 12)
        one.keep = (ints, work)
        return one

    _over_batch(count, 2 * m * n * k * (3 if f.prefix in "cz" else 1), make)
    return _row_major(w, a.shape), tau.reshape(batch + (k,))


def _run_orgqr(f, ops, instr):
    a, tau = ops
    batch, m, n = a.shape[:-2], a.shape[-2], a.shape[-1]
    count = int(np.prod(batch, dtype=np.int64))
    k = tau.shape[-1]
    dtype = _DTYPE[f.prefix]
    w = _col_major(a, count)
    t = np.ascontiguousarray(tau, dtype).reshape(count, k)
    fn = _routine(f.routine, 9)
    dims = _ints(m, n, k)
    d = dims.ctypes.data
    lwork = _query(fn, (d, d + 4, d + 8, None, d, None), lambda info: (info,), dtype)
    base, step, tp = w.ctypes.data, _stride(w), t.ctypes.data
    tstep = k * dtype.itemsize

    def make():
        ints, work = _ints(m, n, k, lwork, 0), np.zeros(lwork, dtype)
        p, wp = ints.ctypes.data, work.ctypes.data

        def one(i):
            fn(p, p + 4, p + 8, base + i * step, p, tp + i * tstep, wp, p + 12, p + 16)
        one.keep = (ints, work)
        return one

    _over_batch(count, 4 * m * n * k * (3 if f.prefix in "cz" else 1), make)
    return _row_major(w, a.shape)


def _run_syevd(f, ops, instr):
    (a,) = ops
    batch, n = a.shape[:-2], a.shape[-1]
    count = int(np.prod(batch, dtype=np.int64))
    dtype, real = _DTYPE[f.prefix], _REAL[f.prefix]
    complex_ = f.prefix in "cz"
    vectors = f.flags["mode"] == "V"
    w = _col_major(a, count)
    values = np.zeros((count, n), real)
    info = np.zeros(count, np.int32)
    # jaxlib's workspace sizes (the documented minimums of xSYEVD / xHEEVD)
    if complex_:
        lwork = 2 * n + n * n if vectors else n + 1
        lrwork = 1 + 5 * n + 2 * n * n if vectors else max(n, 1)
    else:
        lwork = 1 + 6 * n + 2 * n * n if vectors else 2 * n + 1
        lrwork = 0
    liwork = 3 + 5 * n if vectors else 1
    fn = _routine(f.routine, 13 if complex_ else 11)
    base, step = w.ctypes.data, _stride(w)
    vp, ip, vstep = values.ctypes.data, info.ctypes.data, n * real.itemsize

    def make():
        jobz, uplo = _char(f.flags["mode"]), _char(f.flags["uplo"])
        ints = _ints(n, lwork, lrwork, liwork)
        work, iwork = np.zeros(lwork, dtype), np.zeros(liwork, np.int32)
        rwork = np.zeros(max(lrwork, 1), real)
        p, wp, iwp, rwp = ints.ctypes.data, work.ctypes.data, iwork.ctypes.data, \
            rwork.ctypes.data

        if complex_:
            def one(i):
                fn(jobz, uplo, p, base + i * step, p, vp + i * vstep, wp, p + 4, rwp, p + 8,
                   iwp, p + 12, ip + 4 * i)
        else:
            def one(i):
                fn(jobz, uplo, p, base + i * step, p, vp + i * vstep, wp, p + 4, iwp, p + 12,
                   ip + 4 * i)
        one.keep = (jobz, uplo, ints, work, iwork, rwork)
        return one

    _over_batch(count, 5 * n ** 3 * (3 if complex_ else 1), make)
    return _row_major(w, a.shape), values.reshape(batch + (n,)), info.reshape(batch)


def _run_gesdd(f, ops, instr):
    (a,) = ops
    batch, m, n = a.shape[:-2], a.shape[-2], a.shape[-1]
    count = int(np.prod(batch, dtype=np.int64))
    k = min(m, n)
    dtype, real = _DTYPE[f.prefix], _REAL[f.prefix]
    complex_ = f.prefix in "cz"
    mode = f.flags["mode"]
    shapes = _results(instr)
    u_dims, vt_dims = _dims(shapes[2]), _dims(shapes[3])
    ur, uc = u_dims[-2], u_dims[-1]
    vr, vc = vt_dims[-2], vt_dims[-1]
    qr = f.routine.endswith("gesvd")  # xGESVD (jax's algorithm=QR): no iwork, jobu = jobvt
    w = _col_major(a, count)
    s = np.zeros((count, k), real)
    u = np.zeros((count, uc, ur), dtype)  # column-major, leading dimension ur (= m)
    vt = np.zeros((count, vc, vr), dtype)  # leading dimension vr
    info = np.zeros(count, np.int32)
    fn = _routine(f.routine, 15 if complex_ else 14)
    jobz = _char(mode)
    jobs = (jobz, jobz) if qr else (jobz,)
    # jaxlib's workspace query takes ldvt = n in mode A, min(m, n) otherwise
    q = _ints(m, n, m, m, n if mode == "A" else k)
    qp = q.ctypes.data
    tail = 1 if qr else 2  # the pointers between lwork and info: [rwork,] [iwork]
    lwork = _query(fn, (*jobs, qp, qp + 4, None, qp + 8, None, None, qp + 12, None, qp + 16),
                   lambda info: (None,) * (tail - 1 + complex_) + (info,), dtype)
    if lwork < 0:
        lwork = 1
    if complex_ and qr:
        lrwork = 5 * k
    elif complex_:
        lrwork = 7 * k if mode == "N" else max(5 * k * k + 5 * k,
                                               2 * max(m, n) * k + 2 * k * k + k)
    liwork = 8 * k
    base, step, sp, ip = w.ctypes.data, _stride(w), s.ctypes.data, info.ctypes.data
    up, vtp = u.ctypes.data, vt.ctypes.data
    sstep, ustep, vstep = k * real.itemsize, ur * uc * dtype.itemsize, vr * vc * dtype.itemsize

    def make():
        ints = _ints(m, n, m, vr, lwork)  # ldu = m, as jaxlib
        work, iwork = np.zeros(lwork, dtype), np.zeros(liwork, np.int32)
        rwork = np.zeros(lrwork, real) if complex_ else None
        p, wp, iwp = ints.ctypes.data, work.ctypes.data, iwork.ctypes.data
        job = _char(mode)

        head = (job, job) if qr else (job,)
        extra = ((rwork.ctypes.data,) if complex_ else ()) + (() if qr else (iwp,))

        def one(i):
            fn(*head, p, p + 4, base + i * step, p, sp + i * sstep, up + i * ustep, p + 8,
               vtp + i * vstep, p + 12, wp, p + 16, *extra, ip + 4 * i)
        one.keep = (ints, work, iwork, rwork, job)
        return one

    _over_batch(count, 10 * m * n * k * (3 if complex_ else 1), make)
    return (_row_major(w, a.shape), s.reshape(batch + (k,)),
            _row_major(u, batch + (ur, uc)), _row_major(vt, batch + (vr, vc)),
            info.reshape(batch))


def _run_geev(f, ops, instr):
    from xlapy.interpreter.custom_calls_lapack import unpack_eigenvectors

    (a,) = ops
    batch, n = a.shape[:-2], a.shape[-1]
    count = int(np.prod(batch, dtype=np.int64))
    dtype, real = _DTYPE[f.prefix], _REAL[f.prefix]
    complex_ = f.prefix in "cz"
    cdtype = _DTYPE["c" if f.prefix in "sc" else "z"]
    left, right = f.flags["compute_left"], f.flags["compute_right"]
    w = _col_major(a, count)
    finite = np.isfinite(w.reshape(count, -1)).all(axis=1)  # jaxlib checks before LAPACK
    values = [np.full((count, n), np.nan, dtype) for _ in range(1 if complex_ else 2)]
    vl = np.zeros((count, n, n), cdtype)  # column-major
    vr = np.zeros((count, n, n), cdtype)
    info = np.full(count, -4, np.int32)
    fn = _routine(f.routine, 14)
    jl, jr = _char(left), _char(right)
    q = _ints(n)
    qp = q.ctypes.data
    if complex_:
        scratch = np.zeros(1, real)  # LAPACK writes into rwork even when asked for sizes
        lwork = _query(fn, (jl, jr, qp, None, qp, None, None, qp, None, qp),
                       lambda info: (scratch.ctypes.data, info), dtype)
    else:
        lwork = _query(fn, (jl, jr, qp, None, qp, None, None, None, qp, None, qp),
                       lambda info: (info,), dtype)
    if lwork < 0:
        lwork = max(1, 4 * n)
    base, step, ip = w.ctypes.data, _stride(w), info.ctypes.data
    vstep, mstep = n * dtype.itemsize, n * n * dtype.itemsize

    def make():
        ints, work = _ints(n, lwork, 0), np.zeros(lwork, dtype)
        p, wp = ints.ctypes.data, work.ctypes.data
        if complex_:
            rwork = np.zeros(2 * n, real)

            def one(i):
                if not finite[i]:
                    return
                fn(jl, jr, p, base + i * step, p, values[0].ctypes.data + i * vstep,
                   vl.ctypes.data + i * mstep, p, vr.ctypes.data + i * mstep, p,
                   wp, p + 4, rwork.ctypes.data, ip + 4 * i)
            one.keep = (ints, work, rwork)
            return one
        vecs = np.zeros((2, n, n), dtype)  # LAPACK's real storage, column-major

        def one(i):
            if not finite[i]:
                return
            fn(jl, jr, p, base + i * step, p, values[0].ctypes.data + i * vstep,
               values[1].ctypes.data + i * vstep, vecs.ctypes.data, p,
               vecs.ctypes.data + mstep, p, wp, p + 4, ip + 4 * i)
            if info[i] == 0:  # conjugate pairs stored as (re, im) columns: unpack
                wi = values[1][i]
                # column-major [col, row] arrays: a column of the matrix is a row here
                if left == "V":
                    vl[i] = unpack_eigenvectors(wi, vecs[0].T).T
                if right == "V":
                    vr[i] = unpack_eigenvectors(wi, vecs[1].T).T
        one.keep = (ints, work, vecs)
        return one

    _over_batch(count if finite.any() else 0, 10 * n ** 3 * (3 if complex_ else 1), make)
    out = [v.reshape(batch + (n,)) for v in values]
    return (*out, _row_major(vl, batch + (n, n)), _row_major(vr, batch + (n, n)),
            info.reshape(batch))


_RUN = {"potrf": _run_potrf, "trsm": _run_trsm, "getrf": _run_getrf, "geqrf": _run_geqrf,
        "orgqr": _run_orgqr, "syevd": _run_syevd, "gesdd": _run_gesdd, "geev": _run_geev}

__all__ = ["Form", "form", "is_lapack_target", "run", "supports"]

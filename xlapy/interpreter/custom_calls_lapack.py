"""The custom-call targets XLA:CPU programs from jax contain: jaxlib's LAPACK FFI kernels
(lapack_<t>potrf_ffi, trsm, geqrf, orgqr/ungqr, syevd/heevd, gesdd, gesvd, getrf, geev for
t = s, d, c, z), XLA:CPU's "TopK", the sharding annotations of single-device programs
(Sharding, SPMDFullToShardShape, SPMDShardToFullShape: identities on one device) and XLA's
buffer custom calls: "Pin" (an array to the buffer ``b(...)`` holding it) and "Unpin" (back),
both the value itself, and "CreateBuffer" (a new buffer of the result shape: XLA leaves its
contents undefined, the interpreter gives zeros).

The LAPACK targets call the same LAPACK routines as jaxlib (scipy.linalg.lapack, the library
jaxlib binds to), with the same arguments (uplo/side/trans/diag/mode character codes from
the typed-FFI backend_config, e.g. ``{uplo = 76 : ui8}`` = 'L'; optimal workspace sizes),
so results match XLA:CPU up to the library's own rounding. Operands arrive as logical
arrays (``a[..., row, col]``): the column-major ``operand_layout_constraints`` only say how
XLA hands the buffers to Fortran, which the scipy wrappers do for us. Leading dimensions
are batch dimensions (one LAPACK call per matrix). Results follow jaxlib's tuples:

- potrf (a) -> (factor, info[batch]); the other triangle keeps the input's values.
- trsm (a, b[, alpha]) -> x solving op(a) x = alpha b (side L) or x op(a) = alpha b (R).
- geqrf (a) -> (a_out, tau[batch, min(m,n)]) (LAPACK's compact QR).
- orgqr/ungqr (a, tau) -> q (m x n).
- syevd/heevd (a) -> (eigenvectors (mode V; else the destroyed a), eigenvalues, info).
- gesdd/gesvd (a) -> (a_out, s, u, vt, info) (mode A full, S reduced, N values only);
  a_out is LAPACK's destroyed copy of a, as XLA:CPU returns it.
- getrf (a) -> (lu, ipiv (1-based, as LAPACK), info).
- geev real (a) -> (wr, wi, vl, vr, info) with complex vl/vr unpacked from LAPACK's
  conjugate-pair storage; complex (a) -> (w, vl, vr, info). A non-finite input gives
  info = -4 (jaxlib checks before calling LAPACK); eigenvectors not requested are zeros.
- info < 0 or > 0 as LAPACK returns it; jax turns failures into NaNs itself.

Extra results of older jaxlib signatures (workspaces, an info of geqrf/orgqr) are filled
with zeros. TopK follows XLA:CPU's runtime: the k largest along the last dimension, in the
total order -NaN < -inf < ... < -0 < +0 < ... < inf < +NaN, ties to the lower index.
Imports the custom-call registry and the interpreter core only; scipy is imported lazily.
"""

from __future__ import annotations

import numpy as np

from xlapy.interpreter.custom_calls import (
    backend_config_attrs,
    char_attr,
    is_registered,
    register_custom_call,
)
from xlapy.interpreter.evaluator import EvaluationError, UnimplementedError
from xlapy.shape import dtypes

_PREFIX_DTYPE = {"s": np.float32, "d": np.float64, "c": np.complex64, "z": np.complex128}
_REAL = {"s": np.float32, "d": np.float64, "c": np.float32, "z": np.float64}


def _lapack():
    try:
        from scipy.linalg import lapack
    except ImportError as e:  # pragma: no cover - scipy is a dependency
        raise UnimplementedError(f"the LAPACK custom-call targets need scipy: {e}") from e
    return lapack


def _blas():
    from scipy.linalg import blas

    return blas


def _name(instr) -> str:
    return instr.attrs["custom_call_target"]


def _matrix_operand(instr, value, prefix: str, what: str = "operand 0"):
    a = np.asarray(value)
    want = np.dtype(_PREFIX_DTYPE[prefix])
    if a.dtype != want or a.ndim < 2:
        raise EvaluationError(f"custom-call {_name(instr)!r}: {what} must be a {want} array of "
                              f"rank >= 2, got {a.dtype}{list(a.shape)} (instruction "
                              f"%{instr.name})")
    return a


def _batches(shape):
    return list(np.ndindex(*shape)) if shape else [()]


def _result_shapes(instr):
    shape = instr.shape
    return list(shape.tuple_shapes) if shape.is_tuple() else [shape]


def _fill(instr, produced: list):
    """The result tuple: the produced values, then zeros for any further results older
    jaxlib signatures declare (workspaces, info)."""
    shapes = _result_shapes(instr)
    out = list(produced[:len(shapes)])
    for s in shapes[len(out):]:
        dims = tuple(int(d) for d in s.dimensions) if s.is_array() else ()
        out.append(np.zeros(dims, dtypes.to_dtype(s.element_type)))
    if not instr.shape.is_tuple():
        return out[0]
    return tuple(out)


def _check_info(instr, info, routine: str) -> int:
    info = int(info)
    if info < 0:
        raise EvaluationError(f"custom-call {_name(instr)!r}: LAPACK {routine} rejected argument "
                              f"{-info} (instruction %{instr.name})")
    return info


def _lwork(query_result) -> int:
    work = query_result[0]
    value = np.asarray(work).reshape(-1)[0] if np.ndim(work) else work
    return max(int(np.real(value)), 1)


# -- potrf ------------------------------------------------------------------------------------------


def _potrf(prefix: str):
    def target(a, *, instr):
        a = _matrix_operand(instr, a, prefix)
        lower = char_attr(instr, backend_config_attrs(instr), "uplo", "LU") == "L"
        fn = getattr(_lapack(), prefix + "potrf")
        batch = a.shape[:-2]
        out = np.empty_like(a)
        info = np.zeros(batch, np.int32)
        for b in _batches(batch):
            c, info[b] = fn(a[b], lower=int(lower), clean=0)
            _check_info(instr, info[b], prefix + "potrf")
            out[b] = c
        return _fill(instr, [out, info])
    return target


# -- trsm -------------------------------------------------------------------------------------------


def _trsm(prefix: str):
    def target(a, b, alpha=None, *, instr):
        a = _matrix_operand(instr, a, prefix)
        b = _matrix_operand(instr, b, prefix, "operand 1")
        attrs = backend_config_attrs(instr)
        side = char_attr(instr, attrs, "side", "LR")
        lower = char_attr(instr, attrs, "uplo", "LU") == "L"
        trans = "NTC".index(char_attr(instr, attrs, "trans_x", "NTC"))
        unit = char_attr(instr, attrs, "diag", "UN") == "U"
        scale = 1 if alpha is None else np.asarray(alpha).item()
        fn = getattr(_blas(), prefix + "trsm")
        k = b.shape[-2] if side == "L" else b.shape[-1]
        if a.shape[-2:] != (k, k):
            raise EvaluationError(f"custom-call {_name(instr)!r}: a must be {k}x{k} for b of "
                                  f"shape {list(b.shape)} with side {side!r}, got "
                                  f"{list(a.shape)} (instruction %{instr.name})")
        batch = b.shape[:-2]
        out = np.empty_like(b)
        for i in _batches(batch):
            ai = a[i] if a.ndim == b.ndim else a
            out[i] = fn(scale, ai, b[i], side=int(side == "R"), lower=int(lower), trans_a=trans,
                        diag=int(unit))
        return _fill(instr, [out])
    return target


# -- geqrf, orgqr -------------------------------------------------------------------------------------


def _geqrf(prefix: str):
    def target(a, *, instr):
        a = _matrix_operand(instr, a, prefix)
        lp = _lapack()
        fn = getattr(lp, prefix + "geqrf")
        m, n = a.shape[-2:]
        lwork = _lwork(getattr(lp, prefix + "geqrf_lwork")(m, n))
        batch = a.shape[:-2]
        out = np.empty_like(a)
        tau = np.zeros(batch + (min(m, n),), a.dtype)
        info = np.zeros(batch, np.int32)
        for b in _batches(batch):
            qr, t, _, info[b] = fn(a[b], lwork=lwork)
            _check_info(instr, info[b], prefix + "geqrf")
            out[b], tau[b] = qr, t
        return _fill(instr, [out, tau, info])
    return target


def _orgqr(prefix: str):
    routine = prefix + ("orgqr" if prefix in "sd" else "ungqr")

    def target(a, tau, *, instr):
        a = _matrix_operand(instr, a, prefix)
        tau = np.asarray(tau)
        fn = getattr(_lapack(), routine)
        batch = a.shape[:-2]
        out = np.empty_like(a)
        info = np.zeros(batch, np.int32)
        for b in _batches(batch):
            lwork = _lwork(fn(a[b], tau[b], lwork=-1)[1:])
            q, _, info[b] = fn(a[b], tau[b], lwork=lwork)
            _check_info(instr, info[b], routine)
            out[b] = q
        return _fill(instr, [out, info])
    return target


# -- syevd / heevd ---------------------------------------------------------------------------------------


def _syevd(prefix: str):
    routine = prefix + ("syevd" if prefix in "sd" else "heevd")

    def target(a, *, instr):
        a = _matrix_operand(instr, a, prefix)
        attrs = backend_config_attrs(instr)
        lower = char_attr(instr, attrs, "uplo", "LU") == "L"
        vectors = char_attr(instr, attrs, "mode", "VN", default="V") == "V"
        fn = getattr(_lapack(), routine)
        n = a.shape[-1]
        batch = a.shape[:-2]
        out = np.empty_like(a)
        w = np.zeros(batch + (n,), _REAL[prefix])
        info = np.zeros(batch, np.int32)
        for b in _batches(batch):
            wb, v, info[b] = fn(a[b], compute_v=int(vectors), lower=int(lower))
            _check_info(instr, info[b], routine)
            out[b], w[b] = v, wb
        return _fill(instr, [out, w, info])
    return target


# -- gesdd / gesvd ----------------------------------------------------------------------------------------


def _svd(prefix: str, routine: str):
    def target(a, *, instr):
        a = _matrix_operand(instr, a, prefix)
        mode = char_attr(instr, backend_config_attrs(instr), "mode", "ASNO")
        if mode == "O":
            raise UnimplementedError(f"custom-call {_name(instr)!r}: SVD mode 'O' (overwrite a) "
                                     f"is not supported, as in jaxlib (instruction %{instr.name})")
        lp = _lapack()
        fn = getattr(lp, prefix + routine)
        m, n = a.shape[-2:]
        k = min(m, n)
        compute_uv, full = int(mode != "N"), int(mode == "A")
        lwork = _lwork(getattr(lp, prefix + routine + "_lwork")(m, n, compute_uv=compute_uv,
                                                                full_matrices=full))
        shapes = _result_shapes(instr)
        batch = a.shape[:-2]
        u_dims = tuple(int(d) for d in shapes[2].dimensions)
        vt_dims = tuple(int(d) for d in shapes[3].dimensions)
        s = np.zeros(batch + (k,), _REAL[prefix])
        u = np.zeros(u_dims, a.dtype)
        vt = np.zeros(vt_dims, a.dtype)
        info = np.zeros(batch, np.int32)
        a_out = np.empty_like(a)
        for b in _batches(batch):
            work = np.array(a[b], order="F", copy=True)  # LAPACK works in place on it
            ub, sb, vtb, info[b] = fn(work, compute_uv=compute_uv, full_matrices=full,
                                      lwork=lwork, overwrite_a=1)
            _check_info(instr, info[b], prefix + routine)
            s[b], a_out[b] = sb, work
            if compute_uv:
                u[b], vt[b] = ub, vtb
        # the first result is what LAPACK leaves in its copy of a, as XLA:CPU returns it
        return _fill(instr, [a_out, s, u, vt, info])
    return target


# -- getrf ----------------------------------------------------------------------------------------------


def _getrf(prefix: str):
    def target(a, *, instr):
        a = _matrix_operand(instr, a, prefix)
        fn = getattr(_lapack(), prefix + "getrf")
        m, n = a.shape[-2:]
        batch = a.shape[:-2]
        out = np.empty_like(a)
        ipiv = np.zeros(batch + (min(m, n),), np.int32)
        info = np.zeros(batch, np.int32)
        for b in _batches(batch):
            lu, piv, info[b] = fn(a[b])
            _check_info(instr, info[b], prefix + "getrf")
            out[b], ipiv[b] = lu, np.asarray(piv) + 1  # scipy gives 0-based pivots
        return _fill(instr, [out, ipiv, info])
    return target


# -- geev -----------------------------------------------------------------------------------------------


def unpack_eigenvectors(wi, packed):
    """LAPACK's real storage of eigenvectors as complex vectors (columns): a real
    eigenvalue's vector is column j; a conjugate pair (j, j+1) stores re in column j and
    im in column j+1 (vector j = re + i im, vector j+1 = re - i im)."""
    n = packed.shape[-1]
    out = packed.astype(np.result_type(packed.dtype, np.complex64))
    j = 0
    while j < n:
        if wi[j] == 0 or np.isnan(wi[j]) or j + 1 == n:
            j += 1
            continue
        re, im = packed[:, j].copy(), packed[:, j + 1].copy()
        out[:, j].real, out[:, j].imag = re, im  # parts set, not computed: -0.0 stays
        out[:, j + 1].real, out[:, j + 1].imag = re, -im  # (re - 1j * im gives +0.0)
        j += 2
    return out


def _geev(prefix: str):
    real = prefix in "sd"

    def target(a, *, instr):
        a = _matrix_operand(instr, a, prefix)
        attrs = backend_config_attrs(instr)
        left = char_attr(instr, attrs, "compute_left", "NV") == "V"
        right = char_attr(instr, attrs, "compute_right", "NV") == "V"
        lp = _lapack()
        fn = getattr(lp, prefix + "geev")
        n = a.shape[-1]
        if a.shape[-2] != n:
            raise EvaluationError(f"custom-call {_name(instr)!r}: eigendecomposition needs "
                                  f"square matrices, got {list(a.shape)} (instruction "
                                  f"%{instr.name})")
        lwork = _lwork(getattr(lp, prefix + "geev_lwork")(n, compute_vl=int(left),
                                                          compute_vr=int(right)))
        batch = a.shape[:-2]
        cdtype = np.result_type(a.dtype, np.complex64)
        vl = np.zeros(batch + (n, n), cdtype)
        vr = np.zeros(batch + (n, n), cdtype)
        info = np.zeros(batch, np.int32)
        if real:
            wr = np.full(batch + (n,), np.nan, a.dtype)
            wi = np.full(batch + (n,), np.nan, a.dtype)
        else:
            w = np.full(batch + (n,), np.nan, a.dtype)
        for b in _batches(batch):
            if not np.all(np.isfinite(a[b])):
                info[b] = -4  # jaxlib's check before calling LAPACK
                continue
            if real:
                wrb, wib, vlb, vrb, info[b] = fn(a[b], compute_vl=int(left),
                                                 compute_vr=int(right), lwork=lwork)
                wr[b], wi[b] = wrb, wib
                if info[b] == 0:
                    if left:
                        vl[b] = unpack_eigenvectors(wib, vlb)
                    if right:
                        vr[b] = unpack_eigenvectors(wib, vrb)
            else:
                wb, vlb, vrb, info[b] = fn(a[b], compute_vl=int(left), compute_vr=int(right),
                                           lwork=lwork)
                w[b] = wb
                if left:
                    vl[b] = vlb
                if right:
                    vr[b] = vrb
            _check_info(instr, info[b], prefix + "geev")
        values = [wr, wi] if real else [w]
        return _fill(instr, [*values, vl, vr, info])
    return target


# -- TopK -----------------------------------------------------------------------------------------------


def total_order_key(values):
    """Integer keys ordering values as XLA:CPU's TopK does: for floats the bit pattern read
    as sign-magnitude (-NaN < -inf < ... < -0 < +0 < ... < inf < +NaN); integers
    themselves."""
    values = np.asarray(values)
    if values.dtype.kind in "iub":
        return values.astype(np.int64) if values.dtype.kind != "u" else values
    width = values.dtype.itemsize * 8
    signed = {8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}[width]
    bits = values.view(signed).astype(np.int64)
    magnitude = bits & np.int64((1 << (width - 1)) - 1)
    return np.where(bits < 0, -1 - magnitude, magnitude)


def _top_k(x, *, instr):
    """XLA:CPU's TopK: (values, s32 indices) of the k largest along the last dimension."""
    x = np.asarray(x)
    if x.dtype.kind == "c":
        raise UnimplementedError(f"custom-call 'TopK': complex operands have no order "
                                 f"(instruction %{instr.name})")
    shapes = _result_shapes(instr)
    if len(shapes) != 2 or x.ndim < 1:
        raise EvaluationError(f"custom-call 'TopK': expects one array operand and a (values, "
                              f"indices) result, got {instr.shape} (instruction %{instr.name})")
    k = int(shapes[0].dimensions[-1])
    n = x.shape[-1]
    if k > n:
        raise EvaluationError(f"custom-call 'TopK': k = {k} is larger than the last dimension "
                              f"({n}) of the operand (instruction %{instr.name})")
    key = total_order_key(x)
    # A stable ascending sort of the reversed row, read backwards: descending keys with
    # equal keys in increasing index order.
    order = np.argsort(key[..., ::-1], axis=-1, kind="stable")[..., ::-1]
    indices = (n - 1 - order)[..., :k]
    values = np.take_along_axis(x, indices, axis=-1)
    return values, indices.astype(np.int32)


def _identity(x, *_rest):
    return x


def _create_buffer(*, instr):
    shape = instr.shape
    return np.zeros(shape.dimensions, dtypes.to_dtype(shape.element_type))


def _register() -> None:
    def register(name, fn, source):
        if not is_registered(name):  # a target the user registered first wins
            register_custom_call(name, fn, source=source)

    src = __name__
    for p in "sdcz":
        register(f"lapack_{p}potrf_ffi", _potrf(p), source=src)
        register(f"lapack_{p}trsm_ffi", _trsm(p), source=src)
        register(f"lapack_{p}geqrf_ffi", _geqrf(p), source=src)
        register(f"lapack_{p}{'orgqr' if p in 'sd' else 'ungqr'}_ffi", _orgqr(p), source=src)
        register(f"lapack_{p}{'syevd' if p in 'sd' else 'heevd'}_ffi", _syevd(p), source=src)
        register(f"lapack_{p}gesdd_ffi", _svd(p, "gesdd"), source=src)
        register(f"lapack_{p}gesvd_ffi", _svd(p, "gesvd"), source=src)
        register(f"lapack_{p}getrf_ffi", _getrf(p), source=src)
        register(f"lapack_{p}geev_ffi", _geev(p), source=src)
    register("TopK", _top_k, source=src)
    for name in ("Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape", "Pin", "Unpin"):
        register(name, _identity, source=src)
    register("CreateBuffer", _create_buffer, source=src)


_register()

"""jaxlib's LAPACK custom calls (``lapack_<t><routine>_ffi``) on the cpu backend
(backends/cpu/lapack_calls.py) against the interpreter and against real XLA:CPU (jaxlib's
FFI handlers, through the xla backend) on the same inputs: potrf, trsm (every side, triangle,
transpose, diagonal), getrf, geqrf, orgqr/ungqr, syevd/heevd, gesdd and gesvd (modes A, S,
N), geev on f32/f64/c64/c128, unbatched and batched, square, tall and wide; matrices LAPACK
rejects (not positive definite, singular, a zero diagonal, NaN) give XLA's info outputs and
values.

The routines are the ones jaxlib calls (SciPy's LAPACK), with its arguments and workspace
sizes, so every result jax defines is compared bit for bit. Results LAPACK leaves
undefined are not compared: u and vt of an SVD in mode N (jaxlib leaves the buffers as they
were)."""

from __future__ import annotations

import numpy as np
import pytest

from xlapy.backends.cpu import backend as be
from xlapy.backends.cpu import lapack_calls
from xlapy.interpreter import evaluate
from xlapy.parser import parse_hlo_module
from xlapy.runtime import Client

jax = pytest.importorskip("jax")

from xlapy.backends.xla import run_on_xla

NP = {"s": np.float32, "d": np.float64, "c": np.complex64, "z": np.complex128}
HLO = {"s": "f32", "d": "f64", "c": "c64", "z": "c128"}
REAL = {"s": "f32", "d": "f64", "c": "f32", "z": "f64"}


def _layout(rank: int) -> str:
    """jax's column-major layout of a batch of matrices: {rank-2, rank-1, batch...}."""
    if rank == 0:
        return ""
    if rank < 2:
        return "{" + ",".join(str(d) for d in range(rank - 1, -1, -1)) + "}"
    return "{" + ",".join(str(d) for d in [rank - 2, rank - 1] + list(range(rank - 3, -1, -1))) \
        + "}"


def _shape(t: str, dims, layout=True) -> str:
    """``t[dims]`` with jax's column-major layout of matrices when ``layout``; vectors and
    scalars (info, pivots, tau, singular and eigenvalues) keep the default layout."""
    text = f"{t}[{','.join(map(str, dims))}]"
    return text + _layout(len(dims)) if layout and layout != "v" else text


def _module(target, operands, results, config) -> str:
    """The custom call as jax emits it: matrices column-major ({-2,-1,batch...}), the
    vectors given as (type, dims, "v") row-major."""
    params = "\n".join(f"  p{i} = {_shape(o[0], o[1], False)} parameter({i})"
                       for i, o in enumerate(operands))
    names = ", ".join(f"p{i}" for i in range(len(operands)))
    cons = ", ".join(_shape(*o) for o in operands)
    shapes = [_shape(*r) for r in results]
    result = shapes[0] if len(shapes) == 1 else "(" + ", ".join(shapes) + ")"
    return (f"HloModule m\nENTRY e {{\n{params}\n  ROOT r = {result} custom-call({names}), "
            f'custom_call_target="{target}", operand_layout_constraints={{{cons}}}, '
            f"api_version=API_VERSION_TYPED_FFI, backend_config={config}\n}}\n")


def _leaves(v):
    return [np.asarray(x) for x in v] if isinstance(v, tuple) else [np.asarray(v)]


def _same(got, want, what):
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, got.shape,
                                                                 want.dtype, want.shape)
    assert np.array_equal(got.reshape(-1).view(np.uint8), want.reshape(-1).view(np.uint8)), \
        f"{what}: not bit for bit\n{got}\n{want}"


def _check(text, args, *, skip_xla=(), skip_interp=()):
    """Runs ``text`` on the cpu backend, the interpreter and XLA:CPU; the custom call must
    be compiled (a library step), its results the same bits (except those skipped)."""
    module = parse_hlo_module(text)
    program = be.compile_module(module)
    assert program.interpreted() == []
    assert [type(s).__name__ for s in program.entry.steps] == ["LibraryStep"]
    got = _leaves(Client(backend="cpu").compile(module)(*args))
    want = _leaves(evaluate(module, *args))
    xla = _leaves(run_on_xla(module, list(args)))
    for i, (g, w, x) in enumerate(zip(got, want, xla)):
        if i not in skip_interp:
            _same(g, w, f"result {i} against the interpreter")
        if i not in skip_xla:
            _same(g, x, f"result {i} against XLA:CPU")
    return got


def _random(p, dims, rng):
    x = rng.standard_normal(dims)
    if p in "cz":
        x = x + 1j * rng.standard_normal(dims)
    return x.astype(NP[p])


def _hermitian_pd(p, batch, n, rng):
    x = _random(p, batch + (n, n), rng)
    return (x @ np.conj(np.swapaxes(x, -1, -2)) + n * np.eye(n)).astype(NP[p])


PREFIXES = ["s", "d", "c", "z"]
BATCHES = [(), (3,), (2, 2)]


@pytest.mark.parametrize("p", PREFIXES)
@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_potrf(p, batch, uplo):
    rng = np.random.default_rng(1)
    n = 6
    a = _hermitian_pd(p, batch, n, rng)
    if batch:  # a matrix LAPACK stops on: info > 0, the partial factor as LAPACK leaves it
        a.reshape((-1, n, n))[-1] *= -1
    text = _module(f"lapack_{p}potrf_ffi", [(HLO[p], batch + (n, n))],
                   [(HLO[p], batch + (n, n)), ("s32", batch, "v")], f"{{uplo = {ord(uplo)} : ui8}}")
    _factor, info = _check(text, [a])
    if batch:
        assert info.reshape(-1)[-1] > 0 and (info.reshape(-1)[:-1] == 0).all()


@pytest.mark.parametrize("p", PREFIXES)
@pytest.mark.parametrize("side,uplo,trans,diag", [
    ("L", "L", "N", "N"), ("L", "U", "T", "U"), ("R", "L", "C", "N"), ("R", "U", "N", "U"),
    ("L", "U", "C", "N"), ("R", "L", "T", "U")])
@pytest.mark.parametrize("batch", [(), (3,)])
def test_trsm(p, side, uplo, trans, diag, batch):
    rng = np.random.default_rng(2)
    m, n = 5, 3
    k = m if side == "L" else n
    a = _random(p, batch + (k, k), rng) + (3 * np.eye(k)).astype(NP[p])
    b = _random(p, batch + (m, n), rng)
    config = (f"{{diag = {ord(diag)} : ui8, side = {ord(side)} : ui8, "
              f"trans_x = {ord(trans)} : ui8, uplo = {ord(uplo)} : ui8}}")
    text = _module(f"lapack_{p}trsm_ffi", [(HLO[p], batch + (k, k)), (HLO[p], batch + (m, n))],
                   [(HLO[p], batch + (m, n))], config)
    _check(text, [a, b])


def test_trsm_zero_diagonal():
    a = np.eye(3, dtype=np.float32)
    a[1, 1] = 0
    b = np.ones((3, 2), np.float32)
    text = _module("lapack_strsm_ffi", [("f32", (3, 3)), ("f32", (3, 2))], [("f32", (3, 2))],
                   "{diag = 78 : ui8, side = 76 : ui8, trans_x = 78 : ui8, uplo = 76 : ui8}")
    (x,) = _check(text, [a, b])
    assert not np.isfinite(x[1]).any()


@pytest.mark.parametrize("p", PREFIXES)
@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("mn", [(5, 5), (6, 4), (3, 7)])
def test_getrf(p, batch, mn):
    rng = np.random.default_rng(3)
    m, n = mn
    k = min(m, n)
    a = _random(p, batch + (m, n), rng)
    if batch:  # a singular matrix: info > 0, an exact zero pivot
        a.reshape((-1, m, n))[0, :, 1] = 0
    text = _module(f"lapack_{p}getrf_ffi", [(HLO[p], batch + (m, n))],
                   [(HLO[p], batch + (m, n)), ("s32", batch + (k,), "v"), ("s32", batch, "v")],
                   "{}")
    _lu, ipiv, info = _check(text, [a])
    assert ipiv.min() >= 1 and ipiv.max() <= m  # 1-based, as LAPACK
    if batch:
        assert info.reshape(-1)[0] > 0


@pytest.mark.parametrize("p", PREFIXES)
@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("mn", [(5, 5), (7, 4), (3, 6)])
def test_geqrf_and_orgqr(p, batch, mn):
    rng = np.random.default_rng(4)
    m, n = mn
    k = min(m, n)
    a = _random(p, batch + (m, n), rng)
    text = _module(f"lapack_{p}geqrf_ffi", [(HLO[p], batch + (m, n))],
                   [(HLO[p], batch + (m, n)), (HLO[p], batch + (k,), "v")], "{}")
    qr, tau = _check(text, [a])
    # Q from the reflectors: the first k columns (jnp.linalg.qr's reduced mode)
    routine = "orgqr" if p in "sd" else "ungqr"
    cols = qr[..., :, :k] if m >= n else qr[..., :k, :k]
    rows = m if m >= n else k
    text = _module(f"lapack_{p}{routine}_ffi",
                   [(HLO[p], batch + (rows, k)), (HLO[p], batch + (k,), "v")],
                   [(HLO[p], batch + (rows, k))], "{}")
    _check(text, [np.ascontiguousarray(cols), tau])


@pytest.mark.parametrize("p", PREFIXES)
@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("mode,uplo", [("V", "L"), ("V", "U"), ("N", "L")])
def test_syevd(p, batch, mode, uplo):
    rng = np.random.default_rng(5)
    n = 7
    a = _random(p, batch + (n, n), rng)
    a = ((a + np.conj(np.swapaxes(a, -1, -2))) / 2).astype(NP[p])
    routine = "syevd" if p in "sd" else "heevd"
    text = _module(f"lapack_{p}{routine}_ffi", [(HLO[p], batch + (n, n))],
                   [(HLO[p], batch + (n, n)), (REAL[p], batch + (n,), "v"), ("s32", batch, "v")],
                   f"{{mode = {ord(mode)} : ui8, uplo = {ord(uplo)} : ui8}}")
    _check(text, [a])


@pytest.mark.parametrize("p", PREFIXES)
@pytest.mark.parametrize("batch", [(), (3,)])
@pytest.mark.parametrize("mn", [(5, 5), (7, 4), (3, 6)])
@pytest.mark.parametrize("mode", ["A", "S", "N"])
@pytest.mark.parametrize("routine", ["gesdd", "gesvd"])
def test_svd(p, batch, mn, mode, routine):
    rng = np.random.default_rng(6)
    m, n = mn
    k = min(m, n)
    a = _random(p, batch + (m, n), rng)
    u = (m, m) if mode in "AN" else (m, k)
    vt = (n, n) if mode in "AN" else (k, n)
    text = _module(f"lapack_{p}{routine}_ffi", [(HLO[p], batch + (m, n))],
                   [(HLO[p], batch + (m, n)), (REAL[p], batch + (k,), "v"), (HLO[p], batch + u),
                    (HLO[p], batch + vt), ("s32", batch, "v")], f"{{mode = {ord(mode)} : ui8}}")
    undefined = (2, 3) if mode == "N" else ()
    _check(text, [a], skip_xla=undefined, skip_interp=undefined)


@pytest.mark.parametrize("p", PREFIXES)
@pytest.mark.parametrize("batch", [(), (3,)])
@pytest.mark.parametrize("left,right", [("N", "V"), ("V", "V"), ("V", "N")])
def test_geev(p, batch, left, right):
    """Real matrices with complex eigenvalue pairs (unpacked eigenvectors), one matrix of
    the batch with an infinity (info -4, not factored). Eigenvectors not asked for and the
    results of a matrix not factored are left unwritten by jaxlib: compared with the
    interpreter only."""
    rng = np.random.default_rng(10)
    n = 6
    a = _random(p, batch + (n, n), rng)
    if batch:
        a[1, 2, 3] = np.inf
    c = HLO["c" if p in "sc" else "z"]
    nv = 2 if p in "sd" else 1

    def text_for(batch):
        values = [(HLO[p], batch + (n,), "v")] * nv
        return _module(f"lapack_{p}geev_ffi", [(HLO[p], batch + (n, n))],
                       values + [(c, batch + (n, n)), (c, batch + (n, n)), ("s32", batch, "v")],
                       f"{{compute_left = {ord(left)} : ui8, "
                       f"compute_right = {ord(right)} : ui8}}")

    text = text_for(batch)
    unwritten = tuple(i for i, flag in ((nv, left), (nv + 1, right)) if flag == "N")
    if batch:  # against XLA the finite matrices alone (jaxlib leaves the other's unwritten)
        got = _check(text_for((2,)), [np.delete(a, 1, axis=0)], skip_xla=unwritten)
        module = parse_hlo_module(text)
        mine = _leaves(Client(backend="cpu").compile(module)(a))
        want = _leaves(evaluate(module, a))
        for i, (g, w) in enumerate(zip(mine, want)):
            _same(g, w, f"result {i} against the interpreter")
        assert mine[-1][1] == -4 and (np.delete(mine[-1], 1) == 0).all()
    else:
        got = _check(text, [a], skip_xla=unwritten)
    assert (got[-1] == 0).all()


def test_large_batch_over_the_pool():
    """Enough work to hand the matrices out over the worker pool."""
    rng = np.random.default_rng(7)
    a = _hermitian_pd("d", (64,), 24, rng)
    text = _module("lapack_dsyevd_ffi", [("f64", (64, 24, 24))],
                   [("f64", (64, 24, 24)), ("f64", (64, 24), "v"), ("s32", (64,))],
                   "{mode = 86 : ui8, uplo = 76 : ui8}")
    _check(text, [a])


def test_nan_input():
    a = np.full((2, 4, 4), np.nan, np.float32)
    a[0] = np.eye(4)
    text = _module("lapack_spotrf_ffi", [("f32", (2, 4, 4))],
                   [("f32", (2, 4, 4)), ("s32", (2,))], "{uplo = 76 : ui8}")
    factor, info = _check(text, [a])
    assert info[0] == 0 and np.isnan(factor[1]).any()


# -- what stays interpreted, and why -------------------------------------------------------------


@pytest.mark.parametrize("target,operands,results,config,reason", [
    ("lapack_sgeqp3_ffi", [("f32", (3, 3))], [("f32", (3, 3)), ("f32", (3,))], "{}",
     "no compiled path for LAPACK sgeqp3"),
    ("lapack_sgesdd_ffi", [("f32", (3, 3))],
     [("f32", (3, 3)), ("f32", (3,)), ("f32", (3, 3)), ("f32", (3, 3)), ("s32", ())],
     "{mode = 79 : ui8}", "SVD mode 'O'"),
    ("lapack_spotrf_ffi", [("f32", (0, 0))], [("f32", (0, 0)), ("s32", ())],
     "{uplo = 76 : ui8}", "empty matrices"),
    ("lapack_spotrf_ffi", [("f32", (3, 3))], [("f32", (3, 3)), ("s32", ()), ("s32", ())],
     "{uplo = 76 : ui8}", "jaxlib's handler takes 1 and gives 2"),
])
def test_interpreted_with_a_reason(target, operands, results, config, reason):
    program = be.compile_module(parse_hlo_module(_module(target, operands, results, config)))
    ((_, opcode, why),) = program.interpreted()
    assert opcode == "custom-call" and reason in why and target in why


def test_a_user_target_of_the_same_name_wins():
    from xlapy.interpreter.custom_calls import register_custom_call, unregister_custom_call

    text = _module("lapack_spotrf_ffi", [("f32", (2, 2))], [("f32", (2, 2)), ("s32", ())],
                   "{uplo = 76 : ui8}")
    from xlapy.interpreter.custom_calls import lookup_custom_call

    builtin = lookup_custom_call("lapack_spotrf_ffi")
    unregister_custom_call("lapack_spotrf_ffi")
    try:
        register_custom_call("lapack_spotrf_ffi",
                             lambda a: (np.full_like(a, 7), np.int32(0)))
        module = parse_hlo_module(text)
        assert not lapack_calls.supports(module.entry.root)
        factor, _ = Client(backend="cpu").compile(module)(np.eye(2, dtype=np.float32))
        assert (np.asarray(factor) == 7).all()
    finally:
        unregister_custom_call("lapack_spotrf_ffi")
        register_custom_call("lapack_spotrf_ffi", builtin.fn, source=builtin.source)


# -- jax programs ---------------------------------------------------------------------------------


def _jax_programs():
    import jax.numpy as jnp
    import jax.scipy.linalg as jsl

    exact = {
        "cholesky": jnp.linalg.cholesky,
        "solve_triangular": lambda a: jsl.solve_triangular(a, a[..., :2], lower=True),
        "eigh": jnp.linalg.eigh,
        "qr": jnp.linalg.qr,
        "svd": jnp.linalg.svd,
        "svdvals": lambda a: jnp.linalg.svd(a, compute_uv=False),
        "svd_qr": lambda a: jax.lax.linalg.svd(a, full_matrices=False,
                                               algorithm=jax.lax.linalg.SvdAlgorithm.QR),
        "lu_factor": jsl.lu_factor,
        "solve": lambda a: jnp.linalg.solve(a, a[..., :2]),
        "inv": jnp.linalg.inv,
        "eig": jnp.linalg.eig,
        "eigvals": jnp.linalg.eigvals,
    }
    # xlapy's own arithmetic after the call (products, GEMMs): within rounding
    close = {"det": jnp.linalg.det, "slogdet": jnp.linalg.slogdet, "pinv": jnp.linalg.pinv}
    return exact, close


@pytest.mark.parametrize("p", PREFIXES)
@pytest.mark.parametrize("batch", [(), (3,)])
def test_jax_linear_algebra_compiles_and_matches_jax(p, batch):
    """jnp.linalg on xlapy's cpu backend: nothing interpreted, jax's results (bit for bit
    where the program is the LAPACK call and exact data movement)."""
    import xlapy

    rng = np.random.default_rng(8)
    n = 6
    a = _random(p, batch + (n, n), rng)
    spd = _hermitian_pd(p, batch, n, rng)
    exact, close = _jax_programs()
    with jax.enable_x64(p in "dz"):
        for name, fn in {**exact, **close}.items():
            x = spd if name in ("cholesky", "eigh") else a
            compiled = xlapy.jit(fn, backend="cpu")
            program = be.compile_module(compiled.lower(x))
            assert program.interpreted() == [], name
            got = jax.tree_util.tree_leaves(compiled(x))
            want = jax.tree_util.tree_leaves(jax.jit(fn)(x))
            for g, w in zip(got, want):
                g, w = np.asarray(g), np.asarray(w)
                if name in exact:
                    _same(g, w, f"{name} against jax")
                else:
                    tol = 1e-4 if p in "sc" else 1e-12
                    np.testing.assert_allclose(g, w, rtol=tol, atol=tol, err_msg=name)


@pytest.mark.parametrize("p", PREFIXES)
def test_jax_failure_conventions(p):
    """What jax makes of LAPACK's failures (NaNs where info says so) on the cpu backend:
    cholesky of matrices that are not positive definite, inv and solve of singular ones,
    eigh of a matrix holding NaN; batched with good matrices, bit for bit jax's values."""
    import jax.numpy as jnp

    import xlapy

    rng = np.random.default_rng(9)
    n = 5
    good = _hermitian_pd(p, (3,), n, rng)
    bad_pd = good.copy()
    bad_pd[1] *= -1
    singular = good.copy()
    singular[2, :, 0] = 0
    with_nan = good.copy()
    with_nan[0, 1, 1] = np.nan
    cases = [(jnp.linalg.cholesky, bad_pd), (jnp.linalg.inv, singular),
             (lambda a: jnp.linalg.solve(a, a[..., :1]), singular),
             (jnp.linalg.eigh, with_nan)]
    with jax.enable_x64(p in "dz"):
        for fn, x in cases:
            got = jax.tree_util.tree_leaves(xlapy.jit(fn, backend="cpu")(x))
            want = jax.tree_util.tree_leaves(jax.jit(fn)(x))
            for g, w in zip(got, want):
                _same(np.asarray(g), np.asarray(w), "a failing matrix against jax")

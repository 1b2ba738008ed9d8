"""The CPU backend's library calls (xlapy.backends.cpu.library) against the interpreter's
kernels: dot and convolution over many dimension numbers, windows and types, sort with
jax's comparators and others (NaN, -0, ties, stable and unstable, any dimension), fft, and a
few modules end to end through Client(backend="cpu")."""

from __future__ import annotations

import ctypes
import os

import ml_dtypes
import numpy as np
import pytest

from xlapy.backends.cpu import blas, library
from xlapy.interpreter.evaluator import EvalContext, EvalOptions, EvaluationError, evaluate
from xlapy.interpreter.values import flatten
from xlapy.npz import load_npz
from xlapy.parser import parse_hlo_module
from xlapy.runtime import Client
from xlapy.shape import dtypes

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "jax")


def _root(text: str):
    module = parse_hlo_module(text)
    return module, module.entry.root


def _module(params: list[str], root: str, extra: str = "") -> str:
    lines = [f"  p{i} = {s} parameter({i})" for i, s in enumerate(params)]
    return f"HloModule m\n{extra}\nENTRY e {{\n" + "\n".join(lines) + f"\n  ROOT r = {root}\n}}\n"


def _random(shape_text: str, rng, *, kind: str = "normal") -> np.ndarray:
    from xlapy.shape.text import parse_shape

    shape = parse_shape(shape_text)
    dt = np.dtype(dtypes.to_dtype(shape.element_type))
    dims = tuple(shape.dimensions)
    if dt.kind == "c":
        return (rng.standard_normal(dims) + 1j * rng.standard_normal(dims)).astype(dt)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(max(info.min, -50), min(info.max, 50), dims, endpoint=True).astype(dt)
    if dt == np.bool_:
        return rng.integers(0, 2, dims).astype(bool)
    return rng.standard_normal(dims).astype(np.float32).astype(dt)


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def _interpret(instr, args):
    return EvalContext(None, EvalOptions()).run_instruction(instr, list(args))


def _close(got, want, rtol, atol=None):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    g = got.astype(np.complex128 if got.dtype.kind == "c" else np.float64)
    w = want.astype(np.complex128 if want.dtype.kind == "c" else np.float64)
    scale = max(1.0, float(np.max(np.abs(w), initial=0.0)))
    np.testing.assert_allclose(g, w, rtol=rtol, atol=(atol if atol is not None else rtol) * scale)


def _bits_equal(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape,
                                                                 want.dtype, want.shape)
    assert got.tobytes() == want.tobytes()


RTOL = {"f32": 2e-5, "f64": 1e-12, "c64": 2e-5, "c128": 1e-12, "bf16": 2e-2, "f16": 2e-3}


# -- BLAS -------------------------------------------------------------------------------------


def test_blas_function_pointer_calls_sgemm_through_ctypes():
    ptrs = {name: blas.blas_function_pointer(name) for name in ("sgemm", "dgemm", "cgemm", "zgemm")}
    assert all(isinstance(p, int) and p for p in ptrs.values())
    assert len(set(ptrs.values())) == 4
    with pytest.raises(KeyError, match="no routine"):
        blas.blas_function_pointer("notaroutine")
    # the pointer is usable from native code: call it as a C function pointer
    fn = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * 13))(ptrs["dgemm"])
    a = np.arange(6, dtype=np.float64).reshape(2, 3)
    b = np.arange(12, dtype=np.float64).reshape(3, 4)
    c = np.zeros((2, 4))
    i = np.array([4, 2, 3, 4, 3, 4], np.int32)  # n, m, k, ldb, lda, ldc (C^T = B^T A^T)
    s = np.array([1.0, 0.0])
    p, q = i.ctypes.data, s.ctypes.data
    fn(ctypes.c_char_p(b"N"), ctypes.c_char_p(b"N"), p, p + 4, p + 8, q, b.ctypes.data, p + 12,
       a.ctypes.data, p + 16, q + 8, c.ctypes.data, p + 20)
    np.testing.assert_array_equal(c, a @ b)


@pytest.mark.parametrize("rows,cols,rs,cs,form", [
    (3, 4, 4, 1, ("r", 4)), (3, 4, 1, 3, ("c", 3)), (3, 4, 8, 1, ("r", 8)),
    (1, 4, 99, 1, ("r", 4)), (3, 1, 7, 99, ("r", 7)), (3, 4, 2, 2, None), (3, 4, 0, 1, None),
])
def test_matrix_form(rows, cols, rs, cs, form):
    assert blas.matrix_form(rows, cols, rs, cs) == form


# -- dot --------------------------------------------------------------------------------------

# (lhs dims, rhs dims, dimension numbers): every placement of batch, contracting, free dims
DOT_CASES = [
    ("[33,17]", "[17,29]", "lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
    ("[17,33]", "[17,29]", "lhs_contracting_dims={0}, rhs_contracting_dims={0}"),
    ("[33,17]", "[29,17]", "lhs_contracting_dims={1}, rhs_contracting_dims={1}"),
    ("[17,33]", "[29,17]", "lhs_contracting_dims={0}, rhs_contracting_dims={1}"),
    ("[4,33,17]", "[4,17,29]",
     "lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}"),
    ("[33,4,17]", "[17,29,4]",
     "lhs_batch_dims={1}, lhs_contracting_dims={2}, rhs_batch_dims={2}, rhs_contracting_dims={0}"),
    ("[17,33,4]", "[4,29,17]",
     "lhs_batch_dims={2}, lhs_contracting_dims={0}, rhs_batch_dims={0}, rhs_contracting_dims={2}"),
    ("[2,3,9,5,7]", "[3,7,2,5,9]",
     ("lhs_batch_dims={0,1}, lhs_contracting_dims={2,4}, rhs_batch_dims={2,0}, "
     "rhs_contracting_dims={4,1}")),
    ("[6,5,7]", "[7,4,5,3]", "lhs_contracting_dims={1,2}, rhs_contracting_dims={2,0}"),
    ("[6,5,8]", "[3,5,2]", "lhs_contracting_dims={1}, rhs_contracting_dims={1}"),
    ("[13]", "[13]", "lhs_contracting_dims={0}, rhs_contracting_dims={0}"),
    ("[9,13]", "[13]", "lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
    ("[13]", "[13,9]", "lhs_contracting_dims={0}, rhs_contracting_dims={0}"),
    ("[7]", "[5]", "lhs_contracting_dims={}, rhs_contracting_dims={}"),
    ("[6,7]", "[6]", ("lhs_batch_dims={0}, lhs_contracting_dims={}, rhs_batch_dims={0}, "
     "rhs_contracting_dims={}")),
    ("[64,3,4]", "[64,4,2]",
     "lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}"),
    ("[5,0]", "[0,4]", "lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
    ("[0,3]", "[3,4]", "lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
    ("[1,1]", "[1,1]", "lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
    ("[1,9]", "[9,1]", "lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
]

DOT_TYPES = [("f32", "f32", "f32"), ("f64", "f64", "f64"), ("c64", "c64", "c64"),
             ("c128", "c128", "c128"), ("bf16", "bf16", "bf16"), ("bf16", "bf16", "f32"),
             ("f16", "f16", "f16"), ("f32", "f32", "f64")]


def _dot_instr(lt, rt, rtype, lhs_dims, rhs_dims, numbers):
    text = _module([f"{lt}{lhs_dims}", f"{rt}{rhs_dims}"], f"dot(p0, p1), {numbers}")
    module, instr = _root(text)
    if rtype != lt:  # the preferred element type: restate the result with that type
        shape = str(instr.shape).split("[", 1)[1]
        text = text.replace("ROOT r = dot", f"ROOT r = {rtype}[{shape} dot")
        module, instr = _root(text)
    return module, instr


@pytest.mark.parametrize("types", DOT_TYPES, ids=lambda t: "x".join(t))
@pytest.mark.parametrize("case", DOT_CASES, ids=lambda c: f"{c[0]}x{c[1]}")
def test_dot_matches_interpreter(case, types):
    lt, rt, rtype = types
    _, instr = _dot_instr(lt, rt, rtype, *case)
    assert library.supports(instr)
    rng = np.random.default_rng(len(case[2]) + len(case[0]))
    args = [_random(f"{lt}{case[0]}", rng), _random(f"{rt}{case[1]}", rng)]
    want = _interpret(instr, args)
    got = library.run(instr, args)
    _close(got, want, RTOL[rtype])
    out = np.full(want.shape, 7, want.dtype)
    assert library.run(instr, args, out=out) is out
    _close(out, want, RTOL[rtype])


@pytest.mark.parametrize("t", ["c64", "c128"])
@pytest.mark.parametrize("case", DOT_CASES, ids=lambda c: f"{c[0]}x{c[1]}")
def test_complex_dot_by_parts_matches_interpreter(monkeypatch, case, t):
    """Complex dots as four real products through the packed core (forced here; on its own
    where a real dot of the size takes it): every layout, batches, empty and degenerate
    shapes, special values in a part."""
    calls = []
    by_parts = library._complex_by_parts
    monkeypatch.setattr(library.gemm_packed, "applies", lambda *a, **k: True)
    monkeypatch.setattr(library, "_complex_by_parts",
                        lambda *a: (calls.append(1), by_parts(*a))[1])
    _, instr = _dot_instr(t, t, t, *case)
    rng = np.random.default_rng(len(case[2]) + len(case[0]))
    args = [_random(f"{t}{case[0]}", rng), _random(f"{t}{case[1]}", rng)]
    import re

    dims = [int(v) for v in re.findall(r"\d+", case[0])]
    found = re.search(r"lhs_contracting_dims=\{([\d,]*)\}", case[2]).group(1)
    k = int(np.prod([dims[int(i)] for i in found.split(",") if i]))
    for special in (False, True):
        if special and args[0].size > 2 and k > 1:  # BLAS's complex GEMM: NaN + NaN i rows
            args[0].flat[1] = complex(np.inf, 1)
            args[0].flat[2] = complex(2, np.nan)
        want = _interpret(instr, args)
        out = np.full(want.shape, 7, want.dtype)
        assert library.run(instr, args, out=out) is out
        _close(out, want, RTOL[t])
    if min(args[0].size, args[1].size) > 1 and want.size > 1 and \
            "lhs_contracting_dims={}" not in case[2]:
        assert calls


def test_complex_dot_with_an_infinity_is_nan_as_xla():
    """(inf + 1i) in a row of a complex product: XLA:CPU's result row is NaN + NaN i (its
    complex GEMM's, and BLAS's), which the parts' sums would not give."""
    rng = np.random.default_rng(4)
    a = (rng.standard_normal((80, 70)) + 1j * rng.standard_normal((80, 70))).astype(np.complex64)
    b = (rng.standard_normal((70, 90)) + 1j * rng.standard_normal((70, 90))).astype(np.complex64)
    a[1, 0] = complex(np.inf, 1)
    _, instr = _dot_instr("c64", "c64", "c64", "[80,70]", "[70,90]",
                          "lhs_contracting_dims={1}, rhs_contracting_dims={0}")
    got = library.run(instr, [a, b])
    assert np.isnan(got[1].real).all() and np.isnan(got[1].imag).all()
    assert np.isfinite(got[0]).all()


def test_dot_large_transposed_operands_and_views():
    rng = np.random.default_rng(1)
    _, instr = _dot_instr("f32", "f32", "f32", "[300,257]", "[190,300]",
                          "lhs_contracting_dims={0}, rhs_contracting_dims={1}")
    a = rng.standard_normal((300, 257)).astype(np.float32)
    b = rng.standard_normal((190, 300)).astype(np.float32)
    want = _interpret(instr, [a, b])
    _close(library.run(instr, [a, b]), want, 2e-5)
    _close(want, (a.T.astype(np.float64) @ b.T.astype(np.float64)).astype(np.float32), 2e-5)


def test_dot_batches_spread_over_threads(monkeypatch):
    """Medium batched GEMMs run one per core (single-threaded BLAS each): every batch lands
    in its place; an error in a worker thread reaches the caller."""
    monkeypatch.setattr(library, "CORES", 2)
    rng = np.random.default_rng(2)
    _, instr = _dot_instr("f32", "f32", "f32", "[9,100,70]", "[70,9,120]",
                          "lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={1}, "
                          "rhs_contracting_dims={0}")
    a = rng.standard_normal((9, 100, 70)).astype(np.float32)
    b = rng.standard_normal((70, 9, 120)).astype(np.float32)
    _close(library.run(instr, [a, b]), _interpret(instr, [a, b]), 2e-5)
    seen = []

    def body(next_item, local):
        while (item := next_item()) is not None:
            seen.append(item)
            if item == 3:
                raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        library.parallel(list(range(50)), body, 2)
    assert 3 in seen


def test_dot_special_values_propagate():
    _, instr = _dot_instr("f32", "f32", "f32", "[2,3]", "[3,2]",
                          "lhs_contracting_dims={1}, rhs_contracting_dims={0}")
    a = np.array([[np.inf, 1, 0], [np.nan, 0, 1]], np.float32)
    b = np.array([[1, 0], [2, 3], [-1, np.inf]], np.float32)
    want = _interpret(instr, [a, b])
    got = library.run(instr, [a, b])
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[~np.isnan(got)], want[~np.isnan(want)])


def test_dot_float_operands_integer_result_stay_on_the_interpreter():
    """Integer and pred dots of integer operands have a library path (test_cpu_dot_batched);
    float operands with an integer result (XLA's saturating convert first) do not."""
    _, instr = _dot_instr("f32", "f32", "s32", "[3,4]", "[4,5]",
                          "lhs_contracting_dims={1}, rhs_contracting_dims={0}")
    assert not library.supports(instr)
    with pytest.raises(EvaluationError, match="no fast path"):
        library.run(instr, [np.zeros((3, 4), np.float32), np.zeros((4, 5), np.float32)])


def test_dot_runtime_shape_mismatch_names_the_op():
    _, instr = _dot_instr("f32", "f32", "f32", "[3,4]", "[4,5]",
                          "lhs_contracting_dims={1}, rhs_contracting_dims={0}")
    with pytest.raises(EvaluationError, match=r"dot %r: .*f32\[3,4\] and f32\[3,5\]"):
        library.run(instr, [np.zeros((3, 4), np.float32), np.zeros((3, 5), np.float32)])


# -- convolution ------------------------------------------------------------------------------

# (lhs, rhs, attributes)
CONV_CASES = [
    ("[2,9,9,5]", "[3,3,5,6]", "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f"),
    ("[2,5,9,10]", "[6,5,3,2]",
     "window={size=3x2 stride=2x3 pad=1_2x0_1}, dim_labels=bf01_oi01->bf01"),
    ("[2,9,9,5]", "[3,3,5,6]",
     "window={size=3x3 rhs_dilate=2x1 pad=2_2x1_0}, dim_labels=b01f_01io->b01f"),
    ("[2,5,5,4]", "[3,3,4,3]",
     "window={size=3x3 pad=2_2x2_2 lhs_dilate=2x2}, dim_labels=b01f_01io->b01f"),
    ("[2,7,7,4]", "[3,3,4,3]",
     ("window={size=3x3 stride=2x2 pad=1_1x1_1 lhs_dilate=2x1 rhs_dilate=1x2 "
     "rhs_reversal=1x0}, dim_labels=b01f_01io->b01f")),
    ("[2,9,9,4]", "[2,2,4,3]", "window={size=2x2 pad=-1_0x0_-2}, dim_labels=b01f_01io->b01f"),
    ("[3,11,6]", "[3,6,4]", "window={size=3 stride=2 pad=1_1}, dim_labels=b0f_0io->b0f"),
    ("[2,6,5,4,3]", "[2,3,2,3,4]",
     "window={size=2x3x2 stride=1x2x1 pad=0_1x1_1x0_0}, dim_labels=b012f_012io->b012f"),
    ("[2,6,6,8]", "[1,1,8,5]", "window={size=1x1}, dim_labels=b01f_01io->b01f"),
    ("[2,6,6,8]", "[1,1,8,5]", "window={size=1x1 stride=2x2}, dim_labels=b01f_01io->b01f"),
    ("[4,7]", "[7,5]", "dim_labels=bf_io->bf"),
    ("[2,8,8,6]", "[3,3,1,6]",
     "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=6"),
    ("[2,8,8,6]", "[3,3,2,9]",
     ("window={size=3x3 stride=2x2 pad=0_1x0_1}, dim_labels=b01f_01io->b01f, "
     "feature_group_count=3")),
    ("[4,6,6,3]", "[3,3,3,6]",
     "window={size=3x3}, dim_labels=b01f_01io->b01f, batch_group_count=2"),
    ("[3,8,8,6]", "[3,3,2,6]",
     "window={size=3x2 pad=1_1x0_0}, dim_labels=f01b_i01o->01bf, batch_group_count=3"),
    ("[5,4,7,6]", "[3,2,3,4]", "window={size=2x3 stride=1x2}, dim_labels=0f1b_o01i->1b0f"),
    ("[2,3,3,4]", "[5,5,4,2]", "window={size=5x5}, dim_labels=b01f_01io->b01f"),
    ("[2,16,16,12]", "[3,3,6,8]",
     "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=2"),
    ("[1,20,20,4]", "[3,3,4,5]",
     "window={size=3x3 pad=2_2x2_2 rhs_dilate=2x2}, dim_labels=b01f_01io->b01f"),
    ("[0,8,8,4]", "[3,3,4,2]", "window={size=3x3}, dim_labels=b01f_01io->b01f"),
    ("[2,8,8,0]", "[3,3,0,2]", "window={size=3x3}, dim_labels=b01f_01io->b01f"),
]


def _conv_instr(t, case, rtype=None):
    lhs, rhs, attrs = case
    text = _module([f"{t}{lhs}", f"{t}{rhs}"], f"convolution(p0, p1), {attrs}")
    _, instr = _root(text)
    if rtype is not None and rtype != t:
        shape = str(instr.shape).split("[", 1)[1]
        _, instr = _root(text.replace("ROOT r = convolution",
                                           f"ROOT r = {rtype}[{shape} convolution"))
    return instr


@pytest.mark.parametrize("t", ["f32", "f64", "bf16", "c64"])
@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: c[2][:40] + c[0])
def test_convolution_matches_interpreter(case, t):
    instr = _conv_instr(t, case)
    assert library.supports(instr)
    rng = np.random.default_rng(len(case[2]))
    args = [_random(f"{t}{case[0]}", rng), _random(f"{t}{case[1]}", rng)]
    want = _interpret(instr, args)
    got = library.run(instr, args)
    _close(got, want, RTOL[t])
    out = np.full(want.shape, 3, want.dtype)
    assert library.run(instr, args, out=out) is out
    _close(out, want, RTOL[t])


@pytest.fixture
def packed_convolutions(monkeypatch):
    """Every convolution GEMM through gemm_packed's core (on its own: those of windows
    with a tile of output rows; 1x1 windows where a dot would be the packed GEMM); the
    calls are counted."""
    calls = []
    run = library.gemm_packed.run
    monkeypatch.setattr(library.gemm_packed, "applies", lambda *a, **k: True)
    monkeypatch.setattr(library.gemm_packed, "run",
                        lambda *a, **k: (calls.append(k["taps"]), run(*a, **k))[1])
    return calls


@pytest.mark.parametrize("t", ["f32", "f64"])
@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: c[2][:40] + c[0])
def test_convolution_through_the_packed_core_matches_interpreter(case, t,
                                                                 packed_convolutions):
    instr = _conv_instr(t, case)
    rng = np.random.default_rng(len(case[2]))
    args = [_random(f"{t}{case[0]}", rng), _random(f"{t}{case[1]}", rng)]
    want = _interpret(instr, args)
    out = np.full(want.shape, 3, want.dtype)
    assert library.run(instr, args, out=out) is out
    _close(out, want, RTOL[t])


@pytest.mark.parametrize("threads", [1, 2])
def test_convolution_packed_taps(monkeypatch, packed_convolutions, threads):
    """A window's taps read in place by the packed core: neighbours along the last spatial
    dimension merged into one longer tap (3x3: three taps of 3 * C), strides (output rows
    over two spatial dimensions), a dilated 1-D window, feature groups (no merging), a 3-D
    window (a spatial dimension as a batch dimension); too few features per tap (3
    channels): im2col, one tap."""
    monkeypatch.setattr(library, "CORES", threads)
    rng = np.random.default_rng(9)
    cases = [("[4,34,30,32]", "[3,3,32,64]",
              "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f", 3),
             ("[3,33,31,32]", "[3,3,32,80]",
              "window={size=3x3 stride=2x3 pad=0_1x1_1}, dim_labels=b01f_01io->b01f", 3),
             ("[6,700,40]", "[3,40,70]",
              "window={size=3 pad=4_4 rhs_dilate=4}, dim_labels=b0f_0io->b0f", 3),
             ("[2,20,18,32]", "[3,3,16,128]",
              ("window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, "
               "feature_group_count=2"), 9),
             ("[2,7,9,8,16]", "[2,3,3,16,64]",
              "window={size=2x3x3 stride=1x2x1 pad=0_0x1_1x1_1}, dim_labels=b012f_012io->b012f",
              6),
             ("[4,40,40,3]", "[3,3,3,64]",
              "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f", 1)]
    for lhs, rhs, attrs, taps in cases:
        del packed_convolutions[:]
        instr = _conv_instr("f32", (lhs, rhs, attrs))
        args = [_random(f"f32{lhs}", rng), _random(f"f32{rhs}", rng)]
        _close(library.run(instr, args), _interpret(instr, args), 2e-5)
        assert packed_convolutions and {len(t) for t in packed_convolutions} == {taps}, attrs


# (lhs, rhs, window) with base dilation and unit strides: one convolution per output phase
PHASE_CASES = [
    ("[2,7,7,6]", "[4,4,6,5]", "size=4x4 pad=2_2x2_2 lhs_dilate=2x2"),  # conv_transpose
    ("[2,7,7,6]", "[3,3,6,5]", "size=3x3 pad=1_2x1_2 lhs_dilate=2x2"),  # strided conv's grad
    ("[2,9,6]", "[5,6,4]", "size=5 pad=3_1 lhs_dilate=3"),
    ("[2,9,6]", "[5,6,4]", "size=5 pad=4_4 lhs_dilate=3 rhs_dilate=2"),
    ("[2,9,6]", "[3,6,4]", "size=3 pad=-2_3 lhs_dilate=2 rhs_dilate=2"),  # a phase without taps
    ("[2,9,6]", "[2,6,4]", "size=2 pad=0_-3 lhs_dilate=4"),  # cropped, empty phases
    ("[2,6,5,4]", "[3,2,4,6]", "size=3x2 pad=2_2x0_0 lhs_dilate=2x1 rhs_reversal=1x0"),
]


@pytest.mark.parametrize("t", ["f32", "f64"])
@pytest.mark.parametrize("case", PHASE_CASES, ids=lambda c: c[2])
def test_base_dilated_convolution_by_phases(case, t, monkeypatch):
    lhs, rhs, win = case
    labels = {3: "b0f_0io->b0f", 4: "b01f_01io->b01f"}[lhs.count(",") + 1]
    instr = _conv_instr(t, (lhs, rhs, f"window={{{win}}}, dim_labels={labels}"))
    phases = []
    original = library._conv_phases
    monkeypatch.setattr(library, "_conv_phases", lambda *a: (phases.append(1), original(*a))[1])
    rng = np.random.default_rng(len(win))
    args = [_random(f"{t}{lhs}", rng), _random(f"{t}{rhs}", rng)]
    want = _interpret(instr, args)
    out = np.full(want.shape, 3, want.dtype)
    assert library.run(instr, args, out=out) is out
    _close(out, want, RTOL[t])
    assert phases


def test_base_dilated_convolution_skips_holes_and_padding():
    """XLA:CPU computes no product at the holes and the padding of a base-dilated
    convolution (measured through jax, docs/numerics.md): an infinite kernel value gives inf
    where it meets an input element and nothing elsewhere - on both xlapy paths (the CPU
    backend hands such a kernel to the interpreter's). Plain padding is multiplied (0 * inf:
    NaN at the edges), as by XLA:CPU."""
    attrs = "window={size=3x3 pad=1_1x1_1 lhs_dilate=2x2}, dim_labels=b01f_01io->b01f"
    instr = _conv_instr("f32", ("[1,4,4,2]", "[3,3,2,2]", attrs))
    x = np.ones((1, 4, 4, 2), np.float32)
    k = np.ones((3, 3, 2, 2), np.float32)
    k[0, 0, 0, 0] = np.inf
    got = library.run(instr, [x, k])
    np.testing.assert_array_equal(got, _interpret(instr, [x, k]))
    # the padded, dilated input holds elements at positions 1, 3, 5, 7; the infinite tap
    # (offset 0, 0) reads position (i, j) for output (i, j)
    odd = np.arange(7) % 2 == 1
    assert np.array_equal(np.isinf(got[0, :, :, 0]), np.outer(odd, odd))
    assert np.isfinite(got[0, :, :, 0][~np.outer(odd, odd)]).all()
    assert np.isfinite(got[0, :, :, 1]).all()
    plain_attrs = "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f"
    plain = _conv_instr("f32", ("[1,4,4,2]", "[3,3,2,2]", plain_attrs))
    got = library.run(plain, [x, k])
    np.testing.assert_array_equal(got, _interpret(plain, [x, k]))
    assert np.isnan(got[0, 0, 0, 0]) and np.isinf(got[0, 1, 1, 0])


def test_merged_taps():
    assert library._merged_taps([0, 8, 16, 80, 88, 96], 8) == (24, [0, 80])
    assert library._merged_taps([0, 32, 64], 8) == (8, [0, 32, 64])  # dilated
    assert library._merged_taps([0, 4, 16, 20], 4) == (8, [0, 16])  # runs of two
    assert library._merged_taps([0, 4, 8, 20], 4) == (4, [0, 4, 8, 20])  # runs differ
    assert library._merged_taps([5], 3) == (3, [5])


@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: c[2][:40] + c[0])
def test_convolution_blas_paths_match_interpreter(case, monkeypatch):
    """The paths without the packed core (gemm_kernel.PACKED off): per-tap BLAS GEMMs,
    im2col chunks, 1x1 windows."""
    from xlapy.backends.cpu import gemm_kernel

    monkeypatch.setattr(gemm_kernel, "PACKED", False)
    instr = _conv_instr("f32", case)
    rng = np.random.default_rng(len(case[2]))
    args = [_random(f"f32{case[0]}", rng), _random(f"f32{case[1]}", rng)]
    _close(library.run(instr, args), _interpret(instr, args), RTOL["f32"])


def test_convolution_bf16_operands_to_f32_result():
    instr = _conv_instr("bf16", CONV_CASES[0], "f32")
    rng = np.random.default_rng(3)
    args = [_random("bf16[2,9,9,5]", rng), _random("bf16[3,3,5,6]", rng)]
    _close(library.run(instr, args), _interpret(instr, args), 2e-5)


@pytest.mark.parametrize("chunk_bytes,flat_rows", [(1 << 12, 40), (1 << 16, 500)])
def test_convolution_threads_and_small_chunks(monkeypatch, chunk_bytes, flat_rows):
    """Enough work for both cores, chunks smaller than an image (partial rows of the first
    spatial dimension), strides and groups: every chunk lands in its place (the BLAS paths:
    the packed core off)."""
    from xlapy.backends.cpu import gemm_kernel

    monkeypatch.setattr(gemm_kernel, "PACKED", False)
    monkeypatch.setattr(library, "CHUNK_BYTES", chunk_bytes)
    monkeypatch.setattr(library, "FLAT_ROWS", flat_rows)
    paths = []
    for name in ("_conv_flat", "_conv_chunk", "_conv_small_groups"):
        original = getattr(library, name)
        monkeypatch.setattr(library, name, lambda *a, _f=original, _n=name: (
            paths.append(_n), _f(*a))[1])
    rng = np.random.default_rng(5)
    for case in [("[4,34,30,32]", "[3,3,32,32]",
                  "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f"),
                 ("[3,33,33,32]", "[3,3,16,48]",
                  ("window={size=3x3 stride=2x2 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, "
                   "feature_group_count=2")),
                 ("[8,48,48,32]", "[3,3,1,32]",
                  ("window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, "
                   "feature_group_count=32"))]:
        instr = _conv_instr("f32", case)
        args = [_random(f"f32{case[0]}", rng), _random(f"f32{case[1]}", rng)]
        _close(library.run(instr, args), _interpret(instr, args), 2e-5)
    assert set(paths) == {"_conv_flat", "_conv_chunk", "_conv_small_groups"}  # every path


def test_padded_input_buffers_are_shared_between_geometries(monkeypatch):
    """One pooled block serves every padded geometry in turn (no block per geometry): a
    block that held another geometry is zeroed outside the interior first. Free blocks
    are poisoned after each call, so a byte the zeroing or the copy missed shows."""
    pool = library._BufferPool(256 << 20)
    monkeypatch.setattr(library, "_PADDED", pool)
    rng = np.random.default_rng(11)
    cases = []
    for case in CONV_CASES:
        if "pad=" in case[2] or "lhs_dilate" in case[2]:
            instr = _conv_instr("f32", case)
            args = [_random(f"f32{case[0]}", rng), _random(f"f32{case[1]}", rng)]
            cases.append((instr, args, _interpret(instr, args)))
    assert len(cases) >= 10
    held = []
    for rep in range(3):
        for instr, args, want in cases[::1 if rep % 2 == 0 else -1]:
            _close(library.run(instr, args), want, RTOL["f32"])
            if rep:  # poisoned: the next geometry may read only what it writes
                for entry in pool.free:
                    entry[0] = None
                    entry[1][...] = 0xFF  # f32 NaN
        held.append(sum(blk.nbytes for _, blk in pool.free))
        assert len(pool.free) == 1  # one convolution at a time: one block
    assert held[0] == held[1] == held[2]  # the largest padded input, not a sum


@pytest.mark.parametrize("core", [True, False])
@pytest.mark.parametrize("tap_bytes", [1, 3000])
@pytest.mark.parametrize("t", ["f32", "f64", "c64"])
def test_convolution_split_over_taps(monkeypatch, t, tap_bytes, core):
    """Every convolution whose im2col output is small goes over chunks of taps (one tap a
    chunk, or a few; copied as runs along the last kernel dimension), the threads'
    accumulators summed (by the packed core adding to them, or BLAS with beta 1): groups,
    batch groups, strides, dilations, reversal, kernel gradients."""
    from xlapy.backends.cpu import gemm_kernel

    monkeypatch.setattr(gemm_kernel, "PACKED", core)
    monkeypatch.setattr(library, "TAP_CHUNK_BYTES", tap_bytes)
    paths = []
    original = library._conv_taps_split
    monkeypatch.setattr(library, "_conv_taps_split",
                        lambda *a: (paths.append(1), original(*a))[1])
    rng = np.random.default_rng(9)
    for case in CONV_CASES:
        instr = _conv_instr(t, case)
        args = [_random(f"{t}{case[0]}", rng), _random(f"{t}{case[1]}", rng)]
        _close(library.run(instr, args), _interpret(instr, args), RTOL[t])
    assert len(paths) >= 6  # the others: the per-tap GEMMs, 1x1 windows, depthwise


def test_kernel_gradient_split_over_taps_on_both_threads(monkeypatch):
    """A kernel gradient as jax writes it (the window is the whole image): enough work for
    both cores, so two threads accumulate chunks of taps each."""
    calls = []
    original, split = library.parallel, library._conv_taps_split
    monkeypatch.setattr(library, "parallel",
                        lambda work, body, threads: (calls.append((len(work), threads)),
                                                     original(work, body, threads))[1])
    monkeypatch.setattr(library, "_conv_taps_split",
                        lambda *a: (calls.append("split"), split(*a))[1])
    rng = np.random.default_rng(4)
    case = ("[16,32,32,16]", "[16,32,32,32]",
            "window={size=32x32 pad=1_1x1_1}, dim_labels=f01b_i01o->01bf")
    instr = _conv_instr("f32", case)
    args = [_random(f"f32{case[0]}", rng), _random(f"f32{case[1]}", rng)]
    got = library.run(instr, args)
    _close(got, _interpret(instr, args), 2e-5)
    # 144 rows x 16 features a tap: 9 KiB, 113 taps a chunk, 10 chunks in slots of
    # consecutive chunks (twice the threads)
    slots = min(10, 2 * library.CORES)
    assert calls == ["split", (slots, min(library.CORES, slots))]
    # whichever thread runs a slot, the sums are grouped alike: the same bits every run
    for _ in range(6):
        assert np.array_equal(library.run(instr, args), got)


def test_convolution_errors_name_the_op():
    instr = _conv_instr("f32", CONV_CASES[0])
    with pytest.raises(EvaluationError, match="convolution %r: "):
        library.run(instr, [np.zeros((2, 9, 9, 4), np.float32),
                            np.zeros((3, 3, 5, 6), np.float32)])


def test_integer_convolution_stays_on_the_interpreter():
    assert not library.supports(_conv_instr("s32", CONV_CASES[0]))


# -- sort -------------------------------------------------------------------------------------

JAX_CANON = """
cmp {
  a = f32[] parameter(0)
  ne.a = pred[] compare(a, a), direction=NE
  cnan = f32[] constant(nan)
  czero = f32[] constant(0)
  eq.a = pred[] compare(a, czero), direction=EQ
  s.a = f32[] select(eq.a, czero, a)
  c.a = f32[] select(ne.a, cnan, s.a)
  b = f32[] parameter(1)
  ne.b = pred[] compare(b, b), direction=NE
  eq.b = pred[] compare(b, czero), direction=EQ
  s.b = f32[] select(eq.b, czero, b)
  c.b = f32[] select(ne.b, cnan, s.b)
  EXTRA
  ROOT lt = pred[] compare(c.a, c.b), direction=LT, type=TOTALORDER
}
"""


def _cmp(t: str, body: str, nparams: int, types=None) -> str:
    types = types or [t] * (nparams // 2)
    params = "\n".join(f"  q{i} = {types[i // 2]}[] parameter({i})" for i in range(nparams))
    return f"cmp {{\n{params}\n{body}\n}}\n"


def _sort_instr(shapes: list[str], dim: int, comparator: str, stable: bool = True):
    ops = ", ".join(f"p{i}" for i in range(len(shapes)))
    root = f"sort({ops}), dimensions={{{dim}}}, is_stable={'true' if stable else 'false'}, " \
           f"to_apply=cmp"
    if len(shapes) > 1:
        root = "(" + ", ".join(shapes) + ") " + root
    _, instr = _root(_module(shapes, root, comparator))
    return instr


def _special_floats(dt, n, rng, *, nan=True, ties=True):
    x = rng.standard_normal(n).astype(dt)
    specials = [0.0, -0.0, np.inf, -np.inf, 1.0, -1.0, 1e-40]
    if nan:
        specials += [np.nan, -np.nan]
    x[rng.choice(n, min(n, 3 * len(specials)), replace=False)] = np.resize(
        np.array(specials, dt), min(n, 3 * len(specials)))
    if nan:  # a NaN with another payload
        bits = x.view(np.uint32 if x.itemsize == 4 else np.uint64)
        bits[rng.integers(n)] = 0x7FC00123 if x.itemsize == 4 else 0x7FF8000000000123
    if ties:
        x[rng.choice(n, n // 4)] = x[rng.choice(n, n // 4)]
    return x


def _check_sort(instr, args, *, bits=True):
    assert library.supports(instr)
    want = _interpret(instr, args)
    got = library.run(instr, args)
    leaves_w = list(want) if isinstance(want, tuple) else [want]
    leaves_g = list(got) if isinstance(got, tuple) else [got]
    assert len(leaves_g) == len(leaves_w)
    for g, w in zip(leaves_g, leaves_w):
        _bits_equal(g, w)
    outs = tuple(np.empty_like(w) for w in leaves_w)
    res = library.run(instr, args, out=outs if len(outs) > 1 else outs[0])
    for g, w in zip(outs, leaves_w):
        _bits_equal(g, w)
    assert (res is outs[0]) if len(outs) == 1 else all(a is b for a, b in zip(res, outs))


@pytest.mark.parametrize("stable", [True, False])
@pytest.mark.parametrize("shape,dim", [("[1000]", 0), ("[37,40]", 0), ("[37,40]", 1),
                                       ("[5,300,3]", 1), ("[3]", 0)])
def test_sort_jax_canonical_comparator(shape, dim, stable):
    instr = _sort_instr([f"f32{shape}"], dim, JAX_CANON.replace("EXTRA", ""), stable)
    rng = np.random.default_rng(7)
    dims = [int(v) for v in shape[1:-1].split(",")]
    x = _special_floats(np.float32, int(np.prod(dims)), rng).reshape(dims)
    _check_sort(instr, [x])


@pytest.mark.parametrize("stable", [True, False])
def test_sort_canonicalised_classes_keep_their_bits(stable):
    """Only -0 zeros, only non-canonical NaNs: the output holds the operand's bits."""
    instr = _sort_instr(["f32[2,40]"], 1, JAX_CANON.replace("EXTRA", ""), stable)
    x = np.random.default_rng(17).standard_normal((2, 40)).astype(np.float32)
    x[:, ::5] = -0.0
    x.view(np.uint32)[:, 1::7] = 0xFFC00001  # -NaN with a payload
    _check_sort(instr, [x])
    got = library.run(instr, [x])
    assert np.signbit(got[got == 0]).all()
    assert (got.view(np.uint32)[np.isnan(got)] == 0xFFC00001).all()


@pytest.mark.parametrize("stable", [True, False])
@pytest.mark.parametrize("direction", ["LT", "GT"])
def test_sort_canonicalised_positive_nans_and_zeros(stable, direction):
    """Positive NaNs with several payloads and zeros of both signs (no -NaN): the fast
    one-operand path, ascending and descending, rows of any length."""
    comp = JAX_CANON.replace("EXTRA", "").replace("direction=LT", f"direction={direction}")
    rng = np.random.default_rng(18)
    for n in (12, 300):
        instr = _sort_instr([f"f32[3,{n}]"], 1, comp, stable)
        x = rng.integers(-3, 4, (3, n)).astype(np.float32)
        x[:, ::4] = -0.0
        bits = x.view(np.uint32)
        bits[:, 1::9] = 0x7FC00000
        bits[:, 2::11] = 0x7F800005
        _check_sort(instr, [x])


@pytest.mark.parametrize("stable", [True, False])
def test_sort_argsort_with_iota(stable):
    comp = JAX_CANON.replace("EXTRA", "i0 = s32[] parameter(2)\n  i1 = s32[] parameter(3)")
    instr = _sort_instr(["f32[20,300]", "s32[20,300]"], 1, comp, stable)
    rng = np.random.default_rng(8)
    x = _special_floats(np.float32, 6000, rng).reshape(20, 300)
    iota = np.broadcast_to(np.arange(300, dtype=np.int32), (20, 300)).copy()
    _check_sort(instr, [x, iota])


SORT_TYPES = ["f32", "f64", "bf16", "f16", "s32", "u8", "s64", "u64", "pred", "s16"]


@pytest.mark.parametrize("t,totalorder", [(t, False) for t in SORT_TYPES] + [
    (t, True) for t in ("f32", "f64", "bf16", "f16")])
@pytest.mark.parametrize("direction,order", [("LT", "q0, q1"), ("GT", "q0, q1"),
                                             ("LT", "q1, q0")])
def test_sort_plain_compare(t, totalorder, direction, order):
    float_type = t in ("f32", "f64", "bf16", "f16")
    ctype = ", type=TOTALORDER" if totalorder else ""
    comp = _cmp(t, f"  ROOT c = pred[] compare({order}), direction={direction}{ctype}", 2)
    rng = np.random.default_rng(9)
    dt = np.dtype(dtypes.to_dtype(dtypes.from_name(t)))
    for stable in (True, False):
        instr = _sort_instr([f"{t}[6,200]"], 1, comp, stable)
        if float_type:
            x = _special_floats(np.float32 if dt.itemsize <= 4 else np.float64, 1200, rng,
                                nan=totalorder).astype(dt).reshape(6, 200)
        else:
            x = _random(f"{t}[6,200]", rng)
        _check_sort(instr, [x])


@pytest.mark.parametrize("canonical", [False, True])
def test_sort_float_compare_with_nan_uses_the_interpreters_order(canonical):
    """A FLOAT comparison (no TOTALORDER) of NaNs is no strict weak order: the interpreter's
    merge sort decides, with or without jax's canonicalisation in front."""
    if canonical:
        comp = JAX_CANON.replace("EXTRA", "").replace(", type=TOTALORDER", "")
    else:
        comp = _cmp("f32", "  ROOT c = pred[] compare(q0, q1), direction=LT", 2)
    rng = np.random.default_rng(10)
    for stable in (True, False):
        instr = _sort_instr(["f32[3,40]"], 1, comp, stable)
        x = _special_floats(np.float32, 120, rng, nan=False).reshape(3, 40)
        x[:, 5] = np.nan  # positive NaNs in every row (-NaNs would take another path)
        x[:, 17] = np.nan
        _check_sort(instr, [x])


@pytest.mark.parametrize("stable", [True, False])
def test_sort_key_value_with_ties(stable):
    """Ties in the key with different values: is_stable=false must give std::sort's order
    (the interpreter replays it); stable keeps the input order."""
    comp = _cmp("s32", "  ROOT c = pred[] compare(q0, q1), direction=LT", 4, ["s32", "f32"])
    instr = _sort_instr(["s32[4,100]", "f32[4,100]"], 1, comp, stable)
    rng = np.random.default_rng(11)
    keys = rng.integers(0, 5, (4, 100)).astype(np.int32)
    vals = rng.standard_normal((4, 100)).astype(np.float32)
    _check_sort(instr, [keys, vals])


def test_sort_lexicographic_two_keys():
    path = os.path.join(FIXTURES, "sort_multi_operand.pre.hlo")
    module = parse_hlo_module(_read(path))
    instr = next(i for i in module.entry.instructions if i.opcode == "sort")
    rng = np.random.default_rng(12)
    k1 = rng.integers(0, 3, 10).astype(np.int32)
    k2 = rng.integers(0, 3, 10).astype(np.int32)
    v = rng.standard_normal(10).astype(np.float32)
    _check_sort(instr, [k1, k2, v])
    body = ("  a = pred[] compare(q2, q3), direction=LT\n"
            "  e = pred[] compare(q0, q1), direction=EQ\n"
            "  b = pred[] compare(q1, q0), direction=GT\n"
            "  n = pred[] and(a, e)\n"
            "  ROOT o = pred[] or(n, b)")
    comp = _cmp("f64", body, 6, ["f64", "s32", "u8"])
    for stable in (True, False):
        instr = _sort_instr(["f64[3,50]", "s32[3,50]", "u8[3,50]"], 1, comp, stable)
        a = rng.integers(0, 4, (3, 50)).astype(np.float64)
        a[0, :5] = -0.0
        b = rng.integers(-2, 2, (3, 50)).astype(np.int32)
        c = rng.integers(0, 255, (3, 50)).astype(np.uint8)
        _check_sort(instr, [a, b, c])


def test_sort_generic_transform_and_second_operand_key():
    body = ("  a = f32[] abs(q2)\n  b = f32[] abs(q3)\n  n = f32[] negate(a)\n"
            "  m = f32[] negate(b)\n  ROOT c = pred[] compare(n, m), direction=LT, "
            "type=TOTALORDER")
    comp = _cmp("f32", body, 4, ["s32", "f32"])
    for stable in (True, False):
        instr = _sort_instr(["s32[2,64]", "f32[2,64]"], 1, comp, stable)
        rng = np.random.default_rng(13)
        x = _special_floats(np.float32, 128, rng).reshape(2, 64)
        _check_sort(instr, [np.arange(128, dtype=np.int32).reshape(2, 64), x])


def test_sort_top_k_fixture_and_every_jax_sort():
    for name in ("approx_max_k", "argsort", "sort_1d", "sort_2d", "sort_multi_operand"):
        module = parse_hlo_module(_read(os.path.join(FIXTURES, f"{name}.pre.hlo")))
        for comp in module.post_order_computations():
            for instr in comp.instructions:
                if instr.opcode != "sort":
                    continue
                rng = np.random.default_rng(14)
                args = []
                for o in instr.operands:
                    shape = str(o.shape).split("{")[0]
                    a = _random(shape, rng)
                    if a.dtype == np.float32:
                        a = _special_floats(np.float32, a.size, rng).reshape(a.shape)
                    args.append(a)
                _check_sort(instr, args)


@pytest.mark.parametrize("body", [
    "  ROOT c = pred[] compare(q0, q1), direction=LE",
    "  ROOT c = pred[] compare(q0, q3), direction=LT",
    "  ROOT c = pred[] constant(false)",
    ("  a = f32[] add(q0, q2)\n  b = f32[] add(q1, q3)\n  ROOT c = pred[] compare(a, b), "
    "direction=LT"),
    "  a = f32[] negate(q0)\n  ROOT c = pred[] compare(a, q1), direction=LT",
])
def test_sort_unrecognised_comparators_stay_on_the_interpreter(body):
    instr = _sort_instr(["f32[8]", "f32[8]"], 0, _cmp("f32", body, 4))
    assert not library.supports(instr)


def test_sort_complex_keys_are_not_supported():
    comp = _cmp("c64", "  ROOT c = pred[] compare(q0, q1), direction=EQ", 2)
    assert not library.supports(_sort_instr(["c64[8]"], 0, comp))


def test_sort_large_unstable_with_mixed_zeros_matches_std_sort():
    comp = _cmp("f32", "  ROOT c = pred[] compare(q0, q1), direction=GT", 2)
    instr = _sort_instr(["f32[3000]"], 0, comp, stable=False)
    rng = np.random.default_rng(15)
    x = rng.integers(-3, 3, 3000).astype(np.float32)
    x[rng.choice(3000, 400)] = -0.0
    _check_sort(instr, [x])


# -- fft --------------------------------------------------------------------------------------

FFT_CASES = [
    ("c64[4,16]", "FFT", "{16}"), ("c128[3,5,12]", "IFFT", "{5,12}"),
    ("c64[2,4,6,8]", "FFT", "{4,6,8}"), ("f32[5,32]", "RFFT", "{32}"),
    ("f64[3,6,10]", "RFFT", "{6,10}"), ("c64[5,17]", "IRFFT", "{32}"),
    ("c128[2,4,6]", "IRFFT", "{4,11}"), ("c64[2,3,4,5]", "IRFFT", "{3,4,8}"),
    ("f32[2,7]", "RFFT", "{7}"), ("c64[3,0]", "FFT", "{0}"),
    ("c64[64,4096]", "FFT", "{4096}"), ("f32[8,256,512]", "RFFT", "{256,512}"),
]


@pytest.mark.parametrize("case", FFT_CASES, ids=lambda c: f"{c[1]}-{c[0]}")
def test_fft_matches_interpreter(case):
    shape, kind, lengths = case
    _, instr = _root(_module([shape], f"fft(p0), fft_type={kind}, fft_length={lengths}"))
    assert library.supports(instr)
    rng = np.random.default_rng(16)
    x = _random(shape, rng)
    want = _interpret(instr, [x])
    t = "c128" if "128" in str(instr.shape) or "f64" in str(instr.shape) else "c64"
    _close(library.run(instr, [x]), want, 1e-12 if t == "c128" else 3e-5)
    out = np.empty_like(want)
    assert library.run(instr, [x], out=out) is out
    _close(out, want, 1e-12 if t == "c128" else 3e-5)


def test_fft_threads_by_size():
    """Transforms below FFT_PARALLEL_WORK run on one thread (SciPy's threads cost more than
    they save there), larger ones over the cores; the two large FFT_CASES take the threads."""
    from xlapy.hlo.attrs.enums import FftType

    small = np.zeros((256, 256), np.complex64)
    assert library._fft_workers(small, [256, 256], FftType.FFT) == 1
    assert library._fft_workers(np.zeros((1024, 1024), np.float32), [1024],
                                FftType.RFFT) == library.CORES
    assert library._fft_workers(np.zeros((64, 4096), np.complex64), [4096],
                                FftType.FFT) == library.CORES
    assert library._fft_workers(np.zeros((8, 256, 512), np.float32), [256, 512],
                                FftType.RFFT) == library.CORES


# -- end to end -------------------------------------------------------------------------------

LIBRARY_OPS = ("dot", "convolution", "sort", "fft")


def _fixtures_with_library_ops() -> list[str]:
    names = []
    for path in sorted(os.listdir(FIXTURES)):
        if path.endswith(".pre.hlo"):
            text = _read(os.path.join(FIXTURES, path))
            if any(f" {op}(" in text for op in LIBRARY_OPS):
                names.append(path[:-len(".pre.hlo")])
    return names


@pytest.mark.parametrize("name", _fixtures_with_library_ops())
def test_every_jax_fixture_op_matches_the_interpreter(name, monkeypatch):
    """Each dot/convolution/sort/fft the interpreter evaluates in a jax fixture (inside
    loops and calls too, on the values it meets there) gives the same through the library."""
    from xlapy.interpreter import evaluator

    module = parse_hlo_module(_read(os.path.join(FIXTURES, f"{name}.pre.hlo")))
    data = load_npz(os.path.join(FIXTURES, f"{name}.npz"))
    args = [data[k] for k in sorted((k for k in data if k.startswith("arg")),
                                    key=lambda k: int(k[3:]))]
    checked = []
    original = evaluator.get_kernel

    def checking_kernel(opcode):
        fn = original(opcode)
        if opcode not in LIBRARY_OPS:
            return fn

        def both(ctx, instr, values):
            want = fn(ctx, instr, values)
            if library.supports(instr):
                got = library.run(instr, [np.array(v) for v in values])
                for g, w in zip(flatten(got), flatten(want)):
                    if np.asarray(w).dtype.kind in "iub" or instr.opcode == "sort":
                        _bits_equal(g, w)
                    else:
                        _close(g, w, 2e-2 if np.asarray(w).dtype.itemsize <= 2 else 1e-4)
                checked.append(instr.opcode)
            return want

        return both

    monkeypatch.setattr(evaluator, "get_kernel", checking_kernel)
    evaluate(module, *args)
    assert checked or name == "dot_int8"  # integer dots stay on the interpreter


@pytest.mark.parametrize("name", ["conv2d_nhwc", "matmul_bf16", "sort_2d", "argsort", "fft_fft2",
                                  "batched_matmul"])
def test_fixture_end_to_end_through_the_cpu_client(name):
    path = os.path.join(FIXTURES, f"{name}.pre.hlo")
    module = parse_hlo_module(_read(path))
    data = load_npz(os.path.join(FIXTURES, f"{name}.npz"))
    args = [data[k] for k in sorted((k for k in data if k.startswith("arg")),
                                    key=lambda k: int(k[3:]))]
    got = flatten(Client(backend="cpu").compile(module)(*args))
    want = flatten(evaluate(module, *args))
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        if g.dtype.kind in "iub":
            np.testing.assert_array_equal(g, w)
        else:
            _close(g, w, 2e-2 if g.dtype == ml_dtypes.bfloat16 else 1e-5)

"""Small dots as generated kernels (backends/cpu/gemm_kernel.py) against the interpreter:
f32 and f64, any dimension numbers whose contracting and rhs free dimensions read as one
strided dimension (batch dimensions anywhere, several lhs free dimensions, transposed
operands), row counts and column counts around the kernel's tiles (ROWS rows, COLS vectors,
scalar tails), size-1 dimensions, NaN and infinity propagation, inside a compiled while loop;
the shapes it leaves to BLAS."""

from __future__ import annotations

import numpy as np
import pytest

from xlapy.backends.cpu import backend as be
from xlapy.backends.cpu import gemm_kernel
from xlapy.interpreter import evaluate
from xlapy.parser import parse_hlo_module
from xlapy.runtime import Client

NP = {"f32": np.float32, "f64": np.float64}
EPS = {"f32": 2.0 ** -23, "f64": 2.0 ** -52}


def _text(t, a, b, out, dn):
    def dims(d):
        return ",".join(map(str, d))

    return (f"HloModule m\nENTRY e {{\n  a = {t}[{dims(a)}] parameter(0)\n"
            f"  b = {t}[{dims(b)}] parameter(1)\n  ROOT d = {t}[{dims(out)}] dot(a, b), {dn}\n}}\n")


def _check(text, a, b, t, k, kernel=True):
    module = parse_hlo_module(text)
    steps = [type(s).__name__ for s in be.compile_module(module).entry.steps]
    # kernel="transposed": operands transposed first (the dot-operands pass), then a kernel
    if kernel == "transposed":
        assert len(steps) > 1 and set(steps) == {"KernelStep"}, steps
    else:
        assert steps == (["KernelStep"] if kernel else ["LibraryStep"]), steps
    got = np.asarray(Client(backend="cpu").compile(module)(a, b))
    want = np.asarray(evaluate(module, a, b))
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(np.isnan(got), np.isnan(want))
    finite = np.isfinite(want)
    assert np.array_equal(got[~finite], want[~finite], equal_nan=True)
    # each output is a sum of k products, summed in order: within k ulps of the magnitudes
    scale = np.abs(a[np.isfinite(a)]).max(initial=0) * np.abs(b[np.isfinite(b)]).max(initial=0)
    np.testing.assert_allclose(got[finite], want[finite], rtol=0,
                               atol=4 * k * EPS[t] * max(scale, 1e-30))
    return got


@pytest.mark.parametrize("t", ["f32", "f64"])
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (3, 5, 7), (4, 16, 16), (5, 9, 17), (8, 33, 24),
                                   (7, 3, 40), (13, 64, 31), (32, 32, 32), (4, 1, 8)])
@pytest.mark.parametrize("batch", [(), (3,), (2, 5)])
def test_shapes_and_batches(t, m, k, n, batch):
    rng = np.random.default_rng(m * 1000 + k * 10 + n)
    a = rng.standard_normal(batch + (m, k)).astype(NP[t])
    b = rng.standard_normal(batch + (k, n)).astype(NP[t])
    nb = len(batch)
    bd = ",".join(map(str, range(nb)))
    dn = (f"lhs_batch_dims={{{bd}}}, rhs_batch_dims={{{bd}}}, " if nb else "") + \
        f"lhs_contracting_dims={{{nb + 1}}}, rhs_contracting_dims={{{nb}}}"
    _check(_text(t, a.shape, b.shape, batch + (m, n), dn), a, b, t, k)


@pytest.mark.parametrize("t", ["f32", "f64"])
def test_transposed_operands_and_batch_dimensions_anywhere(t):
    rng = np.random.default_rng(1)
    # lhs [k, B1, m], rhs [n, B1, k]: a strided contracting dimension, strided b columns
    a = rng.standard_normal((6, 3, 5)).astype(NP[t])
    b = rng.standard_normal((9, 3, 6)).astype(NP[t])
    dn = ("lhs_batch_dims={1}, rhs_batch_dims={1}, lhs_contracting_dims={0}, "
          "rhs_contracting_dims={2}")
    _check(_text(t, a.shape, b.shape, (3, 5, 9), dn), a, b, t, 6)
    # two batch dimensions in another order, two lhs free dimensions
    a = rng.standard_normal((2, 4, 3, 7, 5)).astype(NP[t])  # B0, m0, B1, k, m1
    b = rng.standard_normal((3, 2, 7, 16)).astype(NP[t])  # B1, B0, k, n
    dn = ("lhs_batch_dims={0,2}, rhs_batch_dims={1,0}, lhs_contracting_dims={3}, "
          "rhs_contracting_dims={2}")
    _check(_text(t, a.shape, b.shape, (2, 3, 4, 5, 16), dn), a, b, t, 7)


def test_collapsed_contracting_dimensions_and_size_one():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((4, 3, 5)).astype(np.float32)  # m, k0, k1
    b = rng.standard_normal((3, 5, 1, 12)).astype(np.float32)  # k0, k1, 1, n
    dn = "lhs_contracting_dims={1,2}, rhs_contracting_dims={0,1}"
    _check(_text("f32", a.shape, b.shape, (4, 1, 12), dn), a, b, "f32", 15)


def test_contracting_dimensions_that_do_not_collapse_are_transposed_first():
    """The kernel cannot read b's contracting dimensions (k1, k0: not one stride); the
    backend's dot-operands pass transposes b so that it can (dot_operands.py)."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((4, 3, 5)).astype(np.float32)
    b = rng.standard_normal((5, 3, 8)).astype(np.float32)  # k1, k0, n: not one stride
    dn = "lhs_contracting_dims={1,2}, rhs_contracting_dims={1,0}"
    text = _text("f32", a.shape, b.shape, (4, 8), dn)
    module = parse_hlo_module(text)
    assert isinstance(gemm_kernel.form(module.entry.root), str)
    steps = be.compile_module(module).entry.steps
    assert [(type(s).__name__, s.instr.opcode) for s in steps] == [
        ("KernelStep", "transpose"), ("KernelStep", "dot")]
    got = np.asarray(Client(backend="cpu").compile(module)(a, b))
    np.testing.assert_allclose(got, np.asarray(evaluate(module, a, b)), rtol=0,
                               atol=4 * 15 * EPS["f32"] * np.abs(a).max() * np.abs(b).max())


def test_nan_and_infinity_propagate():
    a = np.ones((5, 4), np.float32)
    b = np.ones((4, 16), np.float32)
    a[1, 2] = np.nan
    b[3, 5] = np.inf
    a[3, 0] = -np.inf
    _check(_text("f32", a.shape, b.shape, (5, 16),
                 "lhs_contracting_dims={1}, rhs_contracting_dims={0}"), a, b, "f32", 4)


def test_large_or_narrow_dots_stay_with_blas(monkeypatch):
    monkeypatch.setattr(gemm_kernel, "PACKED", False)  # the packed GEMM's rule: below

    def form(a, b, out):
        text = _text("f32", a, b, out, "lhs_contracting_dims={1}, rhs_contracting_dims={0}")
        return gemm_kernel.form(parse_hlo_module(text).entry.root)

    assert isinstance(form((256, 256), (256, 256), (256, 256)), str)  # above SMALL
    assert isinstance(form((1, 4096), (4096, 8), (1, 8)), str)  # one row, a long sum
    assert isinstance(form((64, 2048), (2048, 4), (64, 4)), str)  # four columns
    assert not isinstance(form((1, 16), (16, 4), (1, 4)), str)  # tiny: any shape
    assert not isinstance(form((32, 64), (64, 128), (32, 128)), str)


def test_skinny_dots_are_the_small_kernel(monkeypatch):
    """Fewer than SKINNY rows over a tile of b's contiguous columns: the small kernel at any
    size, whatever the packed GEMM's rule; taller tiles above SMALL."""
    monkeypatch.setattr(gemm_kernel, "PACKED", False)

    def form(a, b, out, dn="lhs_contracting_dims={1}, rhs_contracting_dims={0}"):
        return gemm_kernel.form(parse_hlo_module(_text("f32", a, b, out, dn)).entry.root)

    for m in (1, 3, 8, gemm_kernel.SKINNY - 1):
        f = form((m, 1024), (1024, 1024), (m, 1024))
        assert f.kind == "small" and f.rows == 2 * gemm_kernel.ROWS, m
    f = form((1, 4096), (4096, 64), (1, 64))  # one row, a long sum over a tile of columns
    assert f.kind == "small"
    f = form((16, 16), (16, 64), (16, 64))  # within SMALL: the small kernel's own tiles
    assert f.kind == "small" and f.rows == gemm_kernel.ROWS
    m = gemm_kernel.SKINNY
    assert isinstance(form((m, 1024), (1024, 1024), (m, 1024)), str)  # not skinny: BLAS
    # b stored transposed (its columns strided): BLAS
    assert isinstance(form((4, 1024), (1024, 1024), (4, 1024),
                           "lhs_contracting_dims={1}, rhs_contracting_dims={1}"), str)


def _skinny_forms(monkeypatch):
    """512-bit vectors, a pool of two threads: chunks and blocks the same on any host."""
    from xlapy.backends.cpu import threads

    monkeypatch.setattr(gemm_kernel, "BITS", 512)
    monkeypatch.setattr(threads, "WORKERS", 2)
    be.clear_cache()


@pytest.mark.parametrize("t", ["f32", "f64"])
@pytest.mark.parametrize("m,k,n,batch,chunked,blocked", [
    (1, 600, 1000, (), True, False),  # one row: wide tiles, column chunks, a scalar tail
    (3, 2000, 197, (), True, False),  # a last chunk of a few columns
    (23, 600, 200, (), True, True),  # k blocks 256, 256, 88; row blocks 8, 8, 7
    (63, 257, 321, (2,), True, True),  # a batch; a k block of one row of b
    (9, 1000, 64, (4,), False, True),  # the batch gives the items: one chunk; row blocks 8, 1
])
def test_skinny_shapes_against_the_interpreter(monkeypatch, t, m, k, n, batch, chunked,
                                               blocked):
    _skinny_forms(monkeypatch)
    rng = np.random.default_rng(m * 1000 + k + n)
    a = rng.standard_normal(batch + (m, k)).astype(NP[t])
    b = rng.standard_normal(batch + (k, n)).astype(NP[t])
    text = _text(t, a.shape, b.shape, batch + (m, n), _dot_dn(len(batch)))
    f = gemm_kernel.form(parse_hlo_module(text).entry.root)
    assert f.kind == "small"
    assert (gemm_kernel.chunks(f)[0] > 1) == chunked
    assert gemm_kernel.k_blocked(f) == blocked
    _check(text, a, b, t, k)
    be.clear_cache()


def test_skinny_nan_and_infinity_propagate_across_k_blocks(monkeypatch):
    _skinny_forms(monkeypatch)
    a = np.ones((20, 700), np.float32)
    b = np.ones((700, 130), np.float32)
    a[1, 600] = np.nan  # in the last k block
    b[10, 65] = np.inf  # in the first
    a[19, 300] = -np.inf  # in the second, the tail row block
    text = _text("f32", a.shape, b.shape, (20, 130),
                 "lhs_contracting_dims={1}, rhs_contracting_dims={0}")
    assert gemm_kernel.k_blocked(gemm_kernel.form(parse_hlo_module(text).entry.root))
    _check(text, a, b, "f32", 700)
    be.clear_cache()


def test_dot_work_and_column_chunks(monkeypatch):
    """A dot's work in the runtime's unit; chunks of whole tiles while the dot has fewer
    than two work items per thread and work enough to split."""
    from xlapy.backends.cpu import buffers, threads

    monkeypatch.setattr(threads, "WORKERS", 2)

    def form(m, n, k, batch=(), rows=gemm_kernel.ROWS, cols=4, b_n=1):
        return gemm_kernel.Form(m=m, n=n, k=k, batch=list(batch), width=16, itemsize=4,
                                rows=rows, cols=cols, b_n=b_n)

    f = form(4, 512, 1000, (3,))
    assert gemm_kernel.work(f) == 12 * 512 * 1000 * gemm_kernel.FMA_COST // 16
    assert gemm_kernel.work(f, 4, 64) == 4 * 64 * 1000 * gemm_kernel.FMA_COST // 16
    assert gemm_kernel.chunks(form(4, 512, 1000)) == (4, 128)  # one item: four chunks
    assert gemm_kernel.chunks(form(8, 512, 1000)) == (2, 256)  # two row blocks: two each
    assert gemm_kernel.chunks(form(16, 512, 1000)) == (1, 512)  # four row blocks: enough
    assert gemm_kernel.chunks(form(4, 512, 1000, (4,))) == (1, 512)  # the batch: enough
    assert gemm_kernel.chunks(form(4, 100, 1000)) == (1, 100)  # one tile of 64 columns
    assert gemm_kernel.chunks(form(4, 130, 2000)) == (2, 128)  # two tiles and a tail
    small = form(4, 512, buffers.PARALLEL_MIN_WORK * 16 // (4 * 512 * 2 * 2))
    assert gemm_kernel.work(small) < buffers.PARALLEL_MIN_WORK
    assert gemm_kernel.chunks(small) == (1, 512)  # too little work to split
    assert gemm_kernel.chunks(form(4, 512, 1000, b_n=3)) == (1, 512)  # strided columns


def test_inside_a_compiled_while_loop():
    text = """HloModule w
c {
  s = (s32[], f32[8,16], f32[16,16]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(6)
  ROOT lt = pred[] compare(i, n), direction=LT
}
b {
  s = (s32[], f32[8,16], f32[16,16]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  h = f32[8,16] get-tuple-element(s), index=1
  w = f32[16,16] get-tuple-element(s), index=2
  z = f32[8,16] dot(h, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  h1 = f32[8,16] tanh(z)
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  ROOT t = (s32[], f32[8,16], f32[16,16]) tuple(i1, h1, w)
}
ENTRY e {
  h0 = f32[8,16] parameter(0)
  w0 = f32[16,16] parameter(1)
  zero = s32[] constant(0)
  s0 = (s32[], f32[8,16], f32[16,16]) tuple(zero, h0, w0)
  r = (s32[], f32[8,16], f32[16,16]) while(s0), condition=c, body=b
  ROOT h = f32[8,16] get-tuple-element(r), index=1
}
"""
    from xlapy.backends.cpu import control_flow as cf

    module = parse_hlo_module(text)
    program = be.compile_module(module)
    assert any(isinstance(s, cf.CompiledWhileStep) for s in program.entry.steps)
    rng = np.random.default_rng(4)
    h0 = rng.standard_normal((8, 16)).astype(np.float32)
    w0 = (rng.standard_normal((16, 16)) / 4).astype(np.float32)
    got = np.asarray(Client(backend="cpu").compile(module)(h0, w0))
    want = np.asarray(evaluate(module, h0, w0))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


# -- vector widths and the packed GEMM (gemm_packed.py) ----------------------------------------
# The packed path is taken on an AVX-512 host whose BLAS kernels are narrower; the tests force
# it (512-bit vectors, a 256-bit BLAS, the small limits at 0) so it runs on any x86 host (LLVM
# splits vectors wider than the host's).


@pytest.fixture
def packed(monkeypatch):
    monkeypatch.setattr(gemm_kernel, "BITS", 512)
    monkeypatch.setattr(gemm_kernel, "SMALL", 0)
    monkeypatch.setattr(gemm_kernel, "TINY", 0)
    monkeypatch.setattr(gemm_kernel, "SKINNY", 0)
    monkeypatch.setattr(gemm_kernel, "blas_vector_bits", lambda: 256)
    be.clear_cache()
    yield
    be.clear_cache()


def _dot_dn(nb):
    bd = ",".join(map(str, range(nb)))
    return (f"lhs_batch_dims={{{bd}}}, rhs_batch_dims={{{bd}}}, " if nb else "") + \
        f"lhs_contracting_dims={{{nb + 1}}}, rhs_contracting_dims={{{nb}}}"


def _packed_shape(case, t):
    """(m, k, n) of a named case, from gemm_packed's blocks at 512-bit vectors."""
    from xlapy.backends.cpu import gemm_packed as gp

    w = 16 if t == "f32" else 8
    nr = gp.NV * w
    nc = gp.PACK_BYTES // (gp.KC * (4 if t == "f32" else 8)) // nr * nr
    return {
        "one p, one tile": (gp.MR, 1, nr),
        "one whole tile": (gp.MR, 16, nr),
        "a row and a column past the tiles": (gp.MR + 1, 7, nr + 1),
        "two of every block, each with a tail": (gp.MC + 5, gp.KC + 44, nc + 14),
        "exactly one block of each": (gp.MC, gp.KC, nc),
        "three k blocks, the last of one p": (37, 2 * gp.KC + 1, 2 * nr + 3),
        "one panel of columns": (2 * gp.MR + 3, 40, nr),
        # one column block: the rows cut into blocks of MC_SPLIT for the pool (see blocks)
        "rows split for the pool": (2 * gp.MC_SPLIT + 5, 400, nr + 3),
    }[case]


@pytest.mark.parametrize("t", ["f32", "f64"])
@pytest.mark.parametrize("case", [
    "one p, one tile", "one whole tile", "a row and a column past the tiles",
    "two of every block, each with a tail", "exactly one block of each",
    "three k blocks, the last of one p", "one panel of columns", "rows split for the pool"])
@pytest.mark.parametrize("batch", [(), (3,)])
def test_packed_shapes_and_remainders(packed, monkeypatch, t, case, batch):
    from xlapy.backends.cpu import gemm_packed as gp

    monkeypatch.setattr(gp, "ITEMS", 8)
    m, k, n = _packed_shape(case, t)
    rng = np.random.default_rng(m * 1000 + k * 10 + n)
    a = rng.standard_normal(batch + (m, k)).astype(NP[t])
    b = rng.standard_normal(batch + (k, n)).astype(NP[t])
    text = _text(t, a.shape, b.shape, batch + (m, n), _dot_dn(len(batch)))
    f = gemm_kernel.form(parse_hlo_module(text).entry.root)
    assert f.kind == "packed"
    if case == "rows split for the pool":
        assert gp.blocks(f)[0] < m
    _check(text, a, b, t, k)


def test_packed_blocks(monkeypatch):
    """Rows in as few blocks of at most MC as can be, more (of at least MC_SPLIT rows) while
    the dot has fewer than ITEMS work items; blocks of about equal size, whole tiles."""
    from xlapy.backends.cpu import gemm_packed as gp

    def form(m, n, batch=(), k=1000):
        return gemm_kernel.Form(m=m, n=n, k=k, batch=list(batch), width=16, itemsize=4)

    nc = gp.PACK_BYTES // (gp.KC * 4) // (gp.NV * 16) * (gp.NV * 16)
    monkeypatch.setattr(gp, "ITEMS", 1)
    assert gp.blocks(form(2 * gp.MC, 100)) == (gp.MC, nc)
    mc, _ = gp.blocks(form(2 * gp.MC + 1, 100))  # three blocks of about equal size
    assert mc % gp.MR == 0 and 2 * mc < 2 * gp.MC + 1 <= 3 * mc < 2 * gp.MC + 1 + 3 * gp.MR
    monkeypatch.setattr(gp, "ITEMS", 8)  # 4 threads
    nr = gp.NV * 16
    m = 2 * gp.MC_SPLIT  # one column block: the rows split into blocks of MC_SPLIT ...
    assert gp.blocks(form(m, 100)) == (gp.MC_SPLIT, nr)  # ... and the columns into panels
    assert gp.blocks(form(m, 100, k=8))[0] >= m  # too little work to run in parallel
    assert gp.blocks(form(m, 100, (8,)))[0] >= m  # the batch gives the items
    assert gp.blocks(form(m, 8 * nc))[0] >= m  # so do the column blocks
    assert gp.blocks(form(gp.MC_SPLIT - 5, 100))[0] >= gp.MC_SPLIT - 5  # never below
    m = 5 * gp.MC_SPLIT  # five blocks would fit: four, a multiple of the threads
    assert m <= gp.MC and gp.blocks(form(m, 100))[0] == -(-m // 4 // gp.MR) * gp.MR
    # too few rows to split: narrower column blocks (whole panels of 64), each packing its own
    assert gp.blocks(form(32, 512)) == (36, nr)  # eight column blocks of one panel
    assert gp.blocks(form(32, 4 * nr + 5)) == (36, nr)  # five blocks, the last of 5 columns
    assert gp.blocks(form(32, nr))[1] == nr  # one panel: nothing to cut
    assert gp.blocks(form(32, 512, k=8)) == (36, nc)  # too little work to run in parallel


@pytest.mark.parametrize("t", ["f32", "f64"])
def test_packed_transposed_operands_and_batch_dimensions_anywhere(packed, t):
    rng = np.random.default_rng(5)
    # lhs [k, B, m], rhs [n, B, k]: strided a (a column of a is contiguous), b gathered
    a = rng.standard_normal((270, 2, 30)).astype(NP[t])
    b = rng.standard_normal((70, 2, 270)).astype(NP[t])
    dn = ("lhs_batch_dims={1}, rhs_batch_dims={1}, lhs_contracting_dims={0}, "
          "rhs_contracting_dims={2}")
    text = _text(t, a.shape, b.shape, (2, 30, 70), dn)
    assert gemm_kernel.form(parse_hlo_module(text).entry.root).kind == "packed"
    _check(text, a, b, t, 270)
    # two batch dimensions in another order, two lhs free dimensions that read as one,
    # size-1 dimensions
    a = rng.standard_normal((2, 4, 1, 5, 3, 70)).astype(NP[t])  # B0, m0, m1, m2, B1, k
    b = rng.standard_normal((3, 2, 70, 1, 67)).astype(NP[t])  # B1, B0, k, 1, n
    dn = ("lhs_batch_dims={0,4}, rhs_batch_dims={1,0}, lhs_contracting_dims={5}, "
          "rhs_contracting_dims={2}")
    text = _text(t, a.shape, b.shape, (2, 3, 4, 1, 5, 1, 67), dn)
    assert gemm_kernel.form(parse_hlo_module(text).entry.root).kind == "packed"
    _check(text, a, b, t, 70)
    # lhs free dimensions that do not read as one (m0 and m1 apart): not the packed GEMM;
    # the dot-operands pass transposes the lhs to [B0, B1, m0, m1, k] and the rhs to
    # [B0, B1, k, n] first
    a = rng.standard_normal((2, 4, 3, 70, 5)).astype(NP[t])  # B0, m0, B1, k, m1
    b = rng.standard_normal((3, 2, 70, 67)).astype(NP[t])  # B1, B0, k, n
    dn = ("lhs_batch_dims={0,2}, rhs_batch_dims={1,0}, lhs_contracting_dims={3}, "
          "rhs_contracting_dims={2}")
    text = _text(t, a.shape, b.shape, (2, 3, 4, 5, 67), dn)
    assert isinstance(gemm_kernel.form(parse_hlo_module(text).entry.root), str)
    _check(text, a, b, t, 70, kernel="transposed")


def test_packed_nan_and_infinity_propagate(packed):
    a = np.ones((30, 300), np.float32)
    b = np.ones((300, 70), np.float32)
    a[1, 2] = np.nan
    b[290, 65] = np.inf
    a[25, 0] = -np.inf
    _check(_text("f32", a.shape, b.shape, (30, 70),
                 "lhs_contracting_dims={1}, rhs_contracting_dims={0}"), a, b, "f32", 300)


@pytest.mark.parametrize("t", [np.float32, np.float64])
@pytest.mark.parametrize("m,n,k_in,taps,batch", [
    (50, 70, 24, [0, 96, 192], 3),  # a dilated 1-D window: taps four rows apart
    (1100, 130, 600, [0, 1800], 2),  # taps longer than a k block, row and column blocks
    (7, 64, 5, [3], 1),  # one short tap at an offset
])
def test_packed_run_taps_batches_and_strides(t, m, n, k_in, taps, batch):
    """gemm_packed.run (library code's entry to the core): each row's contraction read tap
    by tap at the taps' offsets, batches with their own a and c strides, b shared, C rows
    wider than n (only the first n columns written)."""
    from xlapy.backends.cpu import gemm_packed

    rng = np.random.default_rng(m)
    a_row, c_row = k_in + 3, n + 5
    span = (m - 1) * a_row + max(taps) + k_in
    a = rng.standard_normal((batch, span + 11)).astype(t)
    b = rng.standard_normal((len(taps) * k_in, n)).astype(t)
    c = np.full((batch, m, c_row), 7, t)
    gemm_packed.run(t, m=m, n=n, k_in=k_in, taps=taps, a=a.ctypes.data, a_row=a_row, a_k=1,
                    b=b.ctypes.data, b_k=n, b_n=1, c=c.ctypes.data, c_row=c_row,
                    batch=[(batch, a.shape[1], 0, m * c_row)])
    rows = np.arange(m)[:, None] * a_row
    want = np.zeros((batch, m, n))
    for j, tap in enumerate(taps):
        cols = tap + np.arange(k_in)[None, :]
        want += a[:, rows + cols].astype(np.float64) @ b[j * k_in:(j + 1) * k_in]
    tol = 1e-4 if t == np.float32 else 1e-12
    np.testing.assert_allclose(c[:, :, :n], want, rtol=tol, atol=tol * np.abs(want).max())
    assert (c[:, :, n:] == 7).all()


def test_packed_rule():
    from xlapy.backends.cpu import blas

    def reason(shape_a, shape_b, out):
        text = _text("f32", shape_a, shape_b, out,
                     "lhs_contracting_dims={1}, rhs_contracting_dims={0}")
        got = gemm_kernel.form(parse_hlo_module(text).entry.root)
        return got if isinstance(got, str) else got.kind

    big = ((256, 256), (256, 256), (256, 256))
    host, lib = gemm_kernel.vector_bits(), gemm_kernel.blas_vector_bits()
    core = blas.library_info()["core"]
    if lib is not None and lib < host:  # e.g. AVX-512 host, OpenBLAS held to Haswell
        assert reason(*big) == "packed", core
    else:
        assert "BLAS" in reason(*big), core
    assert isinstance(reason((1, 4096), (4096, 64), (1, 64)), str)  # one row: BLAS's GEMV
    assert isinstance(reason((300, 2048), (2048, 16), (300, 16)), str)  # fewer columns than NR
    assert isinstance(reason((5, 2048), (2048, 256), (5, 256)), str)  # fewer rows than MR


@pytest.mark.parametrize("bits", [256, 512])
@pytest.mark.parametrize("t", ["f32", "f64"])
def test_small_kernel_at_both_vector_widths(monkeypatch, bits, t):
    monkeypatch.setattr(gemm_kernel, "BITS", bits)
    be.clear_cache()
    try:
        rng = np.random.default_rng(bits)
        for m, k, n in [(5, 9, 17), (8, 33, 70), (4, 64, 128), (13, 3, 200), (6, 2, 1)]:
            for batch in [(), (3,)]:
                a = rng.standard_normal(batch + (m, k)).astype(NP[t])
                b = rng.standard_normal(batch + (k, n)).astype(NP[t])
                text = _text(t, a.shape, b.shape, batch + (m, n), _dot_dn(len(batch)))
                f = gemm_kernel.form(parse_hlo_module(text).entry.root)
                assert f.kind == "small" and f.width == bits // (32 if t == "f32" else 64)
                _check(text, a, b, t, k)
    finally:
        be.clear_cache()


@pytest.mark.parametrize("path", ["small", "skinny", "packed"])
def test_dot_in_a_fori_loop_body(monkeypatch, path):
    """h <- tanh(h @ w) six times, the dot a kernel of the compiled while loop's body (a
    skinny dot: split over the pool in column chunks)."""
    from xlapy.backends.cpu import threads

    monkeypatch.setattr(gemm_kernel, "BITS", 512)
    monkeypatch.setattr(threads, "WORKERS", 2)
    if path == "packed":
        monkeypatch.setattr(gemm_kernel, "SMALL", 0)
        monkeypatch.setattr(gemm_kernel, "TINY", 0)
        monkeypatch.setattr(gemm_kernel, "SKINNY", 0)
        monkeypatch.setattr(gemm_kernel, "blas_vector_bits", lambda: 256)
    m, k = {"small": (20, 60), "skinny": (6, 384), "packed": (20, 300)}[path]
    text = f"""HloModule w
c {{
  s = (s32[], f32[{m},{k}], f32[{k},{k}]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(6)
  ROOT lt = pred[] compare(i, n), direction=LT
}}
b {{
  s = (s32[], f32[{m},{k}], f32[{k},{k}]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  h = f32[{m},{k}] get-tuple-element(s), index=1
  w = f32[{k},{k}] get-tuple-element(s), index=2
  z = f32[{m},{k}] dot(h, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  h1 = f32[{m},{k}] tanh(z)
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  ROOT t = (s32[], f32[{m},{k}], f32[{k},{k}]) tuple(i1, h1, w)
}}
ENTRY e {{
  h0 = f32[{m},{k}] parameter(0)
  w0 = f32[{k},{k}] parameter(1)
  zero = s32[] constant(0)
  s0 = (s32[], f32[{m},{k}], f32[{k},{k}]) tuple(zero, h0, w0)
  r = (s32[], f32[{m},{k}], f32[{k},{k}]) while(s0), condition=c, body=b
  ROOT h = f32[{m},{k}] get-tuple-element(r), index=1
}}
"""
    from xlapy.backends.cpu import control_flow as cf

    be.clear_cache()
    try:
        module = parse_hlo_module(text)
        body = [c for c in module.computations if c.name == "b"][0]
        dot = [i for i in body.instructions if i.opcode == "dot"][0]
        f = gemm_kernel.form(dot)
        assert f.kind == ("small" if path == "skinny" else path)
        assert (gemm_kernel.chunks(f)[0] > 1) == (path == "skinny")
        program = be.compile_module(module)
        assert any(isinstance(s, cf.CompiledWhileStep) for s in program.entry.steps)
        rng = np.random.default_rng(6)
        h0 = rng.standard_normal((m, k)).astype(np.float32)
        w0 = (rng.standard_normal((k, k)) / np.sqrt(k)).astype(np.float32)
        got = np.asarray(Client(backend="cpu").compile(module)(h0, w0))
        want = np.asarray(evaluate(module, h0, w0))
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    finally:
        be.clear_cache()


@pytest.mark.parametrize("path", ["small", "packed"])
@pytest.mark.parametrize("t", ["f32", "f64"])
@pytest.mark.parametrize("lhs_c,rhs_c", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_transposed_dot_is_the_swapped_dot_as_a_kernel(monkeypatch, path, t, lhs_c, rhs_c):
    """transpose(dot(a, b)) (a weight gradient as jax writes it) is computed as dot(b, a)
    by the generated kernel that dot takes, not by a BLAS call (the simplifier's
    transpose-dot rewrite): one kernel step of the dot reading b and a, its value the
    interpreter's."""
    if path == "packed":
        monkeypatch.setattr(gemm_kernel, "BITS", 512)
        monkeypatch.setattr(gemm_kernel, "SMALL", 0)
        monkeypatch.setattr(gemm_kernel, "TINY", 0)
        monkeypatch.setattr(gemm_kernel, "SKINNY", 0)
        monkeypatch.setattr(gemm_kernel, "blas_vector_bits", lambda: 256)
    m, k, n = (70, 45, 90) if path == "packed" else (9, 12, 20)
    a_dims = (k, m) if lhs_c == 0 else (m, k)
    b_dims = (k, n) if rhs_c == 0 else (n, k)
    text = (f"HloModule m\nENTRY e {{\n  a = {t}[{a_dims[0]},{a_dims[1]}] parameter(0)\n"
            f"  b = {t}[{b_dims[0]},{b_dims[1]}] parameter(1)\n"
            f"  d = {t}[{m},{n}] dot(a, b), lhs_contracting_dims={{{lhs_c}}}, "
            f"rhs_contracting_dims={{{rhs_c}}}\n"
            f"  ROOT r = {t}[{n},{m}] transpose(d), dimensions={{1,0}}\n}}\n")
    be.clear_cache()
    module = parse_hlo_module(text)
    steps = be.compile_module(module).entry.steps
    assert [type(s).__name__ for s in steps] == ["KernelStep"]
    assert [o.name for o in steps[0].instr.operands] == ["b", "a"]
    rng = np.random.default_rng(lhs_c * 2 + rhs_c)
    a = rng.standard_normal(a_dims).astype(NP[t])
    b = rng.standard_normal(b_dims).astype(NP[t])
    got = np.asarray(Client(backend="cpu").compile(module)(a, b))
    want = np.asarray(evaluate(module, a, b))
    assert got.shape == want.shape == (n, m)
    scale = np.abs(a).max() * np.abs(b).max()
    np.testing.assert_allclose(got, want, rtol=0, atol=4 * k * EPS[t] * scale)
    be.clear_cache()


# -- matrix-vector products (gemv forms, swapped dots) -----------------------------------------


def _form_of(t, a, b, out, dn):
    return gemm_kernel.form(parse_hlo_module(_text(t, a, b, out, dn)).entry.root)


@pytest.mark.parametrize("t", ["f32", "f64"])
@pytest.mark.parametrize("m,k,batch", [(1, 32, ()), (5, 33, ()), (64, 100, ()), (7, 1000, ()),
                                       (9, 47, (3,)), (130, 256, (2, 2))])
def test_matrix_times_vector_is_the_gemv_kernel(t, m, k, batch):
    # sums along contiguous rows of a and of the vector: vectors along k, the rows in
    # blocks of GEMV_ROWS (a tail block), the k past the last whole vector as scalars
    rng = np.random.default_rng(m + k)
    a = rng.standard_normal(batch + (m, k)).astype(NP[t])
    v = rng.standard_normal(batch + (k,)).astype(NP[t])
    nb = len(batch)
    bd = ",".join(map(str, range(nb)))
    dn = (f"lhs_batch_dims={{{bd}}}, rhs_batch_dims={{{bd}}}, " if nb else "") + \
        f"lhs_contracting_dims={{{nb + 1}}}, rhs_contracting_dims={{{nb}}}"
    text = _text(t, a.shape, v.shape, batch + (m,), dn)
    f = gemm_kernel.form(parse_hlo_module(text).entry.root)
    width = gemm_kernel.lanes(gemm_kernel.PT.F32 if t == "f32" else gemm_kernel.PT.F64)
    assert f.kind == ("gemv" if k >= gemm_kernel.GEMV_UNROLL * width else "small")
    _check(text, a, v, t, k)


@pytest.mark.parametrize("t", ["f32", "f64"])
def test_a_few_columns_stored_along_k_are_the_gemv_kernel(t):
    # b [n, k] contracting its minor dimension (x @ w.T with a narrow w), n below a tile
    rng = np.random.default_rng(5)
    a = rng.standard_normal((37, 300)).astype(NP[t])
    b = rng.standard_normal((5, 300)).astype(NP[t])
    dn = "lhs_contracting_dims={1}, rhs_contracting_dims={1}"
    assert _form_of(t, a.shape, b.shape, (37, 5), dn).kind == "gemv"
    _check(_text(t, a.shape, b.shape, (37, 5), dn), a, b, t, 300)


@pytest.mark.parametrize("t", ["f32", "f64"])
def test_transposed_matrix_times_vector_is_the_swapped_skinny_dot(t):
    # a [k, m] contracting dimension 0 (a.T @ v): dot(v, a) has the same result, one row
    # over a's contiguous columns
    rng = np.random.default_rng(6)
    a = rng.standard_normal((700, 300)).astype(NP[t])
    v = rng.standard_normal((700,)).astype(NP[t])
    dn = "lhs_contracting_dims={0}, rhs_contracting_dims={0}"
    f = _form_of(t, a.shape, v.shape, (300,), dn)
    assert f.swapped and f.kind == "small" and f.m == 1 and f.n == 300
    _check(_text(t, a.shape, v.shape, (300,), dn), a, v, t, 700)
    # with a batch dimension
    a = rng.standard_normal((3, 90, 130)).astype(NP[t])
    v = rng.standard_normal((3, 90)).astype(NP[t])
    dn = ("lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={1}, "
          "rhs_contracting_dims={1}")
    assert _form_of(t, a.shape, v.shape, (3, 130), dn).swapped
    _check(_text(t, a.shape, v.shape, (3, 130), dn), a, v, t, 90)


def test_gemv_nan_and_infinity_propagate():
    a = np.ones((9, 70), np.float32)
    v = np.ones((70,), np.float32)
    a[1, 3], a[2, 69], a[5, 40] = np.nan, np.inf, -np.inf
    a[6, 10], a[6, 11] = np.inf, -np.inf  # inf - inf in one row
    _check(_text("f32", a.shape, v.shape, (9,), "lhs_contracting_dims={1}, "
                 "rhs_contracting_dims={0}"), a, v, "f32", 70)


def test_power_iteration_runs_native():
    # a matrix-vector product in a while loop body: kernels only, no library call
    text = """HloModule p
c {
  s = (s32[], f32[300], f32[300,300]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(20)
  ROOT lt = pred[] compare(i, n), direction=LT
}
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT z = f32[] add(x, y)
}
b {
  s = (s32[], f32[300], f32[300,300]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  v = f32[300] get-tuple-element(s), index=1
  a = f32[300,300] get-tuple-element(s), index=2
  w = f32[300] dot(a, v), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  sq = f32[300] multiply(w, w)
  zero = f32[] constant(0)
  ss = f32[] reduce(sq, zero), dimensions={0}, to_apply=add
  nrm = f32[] sqrt(ss)
  nb = f32[300] broadcast(nrm), dimensions={}
  v1 = f32[300] divide(w, nb)
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  ROOT t = (s32[], f32[300], f32[300,300]) tuple(i1, v1, a)
}
ENTRY e {
  v0 = f32[300] parameter(0)
  a0 = f32[300,300] parameter(1)
  zero = s32[] constant(0)
  s0 = (s32[], f32[300], f32[300,300]) tuple(zero, v0, a0)
  r = (s32[], f32[300], f32[300,300]) while(s0), condition=c, body=b
  ROOT v = f32[300] get-tuple-element(r), index=1
}
"""
    from xlapy.backends.cpu import control_flow as cf

    rng = np.random.default_rng(7)
    mat = (rng.standard_normal((300, 300)) / 17).astype(np.float32)
    module = parse_hlo_module(text)
    program = be.compile_module(module)
    (loop,) = [s for s in program.entry.steps if isinstance(s, cf.CompiledWhileStep)]
    body = [type(s).__name__ for s in loop.body.steps]
    assert "KernelStep" in body and "LibraryStep" not in body
    assert "InterpretStep" not in body
    v0 = rng.standard_normal(300).astype(np.float32)
    got = np.asarray(Client(backend="cpu").compile(module)(v0, mat))
    want = np.asarray(evaluate(module, v0, mat))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


# -- integer dots -----------------------------------------------------------------------------

INT = {"s32": np.int32, "u32": np.uint32, "s64": np.int64, "u64": np.uint64}


def _int_check(text, a, b):
    module = parse_hlo_module(text)
    steps = be.compile_module(module).entry.steps
    assert [(type(s).__name__, s.instr.opcode) for s in steps] == [("KernelStep", "dot")]
    got = np.asarray(Client(backend="cpu").compile(module)(a, b))
    want = np.asarray(evaluate(module, a, b))
    assert got.dtype == want.dtype and np.array_equal(got, want)
    return got


def _ints(rng, shape, t, big):
    info = np.iinfo(INT[t])
    lo, hi = (info.min, info.max) if big else (-50 if info.min else 0, 50)
    return rng.integers(lo, hi, shape, dtype=INT[t], endpoint=True)


@pytest.mark.parametrize("t", list(INT))
@pytest.mark.parametrize("big", [False, True])  # big: products and sums wrap around
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (5, 9, 17), (64, 64, 64), (200, 70, 33),
                                   (3, 300, 1), (300, 128, 80)])
def test_integer_dots_wrap_as_xla(t, big, m, k, n):
    """Integer dots run on the generated kernels at any size (the packed GEMM and BLAS are
    float-only), sums and products wrapping in two's complement: bit for bit the
    interpreter's result in any summation order."""
    rng = np.random.default_rng(m * 1000 + k * 10 + n)
    a, b = _ints(rng, (m, k), t, big), _ints(rng, (k, n), t, big)
    text = _text(t, a.shape, b.shape, (m, n), "lhs_contracting_dims={1}, rhs_contracting_dims={0}")
    assert isinstance(gemm_kernel.form(parse_hlo_module(text).entry.root), gemm_kernel.Form)
    got = _int_check(text, a, b)
    if not big:
        np.testing.assert_array_equal(got, (a.astype(np.int64) @ b.astype(np.int64)).astype(INT[t]))


@pytest.mark.parametrize("t", ["s32", "u64"])
def test_integer_dots_batched_and_transposed(t):
    rng = np.random.default_rng(7)
    a, b = _ints(rng, (3, 40, 6), t, True), _ints(rng, (3, 5, 40), t, True)  # [B, k, m], [B, n, k]
    dn = ("lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={1}, "
          "rhs_contracting_dims={2}")
    _int_check(_text(t, a.shape, b.shape, (3, 6, 5), dn), a, b)
    v = _ints(rng, (40,), t, True)  # a matrix times a vector
    _int_check(_text(t, (3, 5, 40), v.shape, (3, 5), "lhs_contracting_dims={2}, "
                     "rhs_contracting_dims={0}"), b, v)

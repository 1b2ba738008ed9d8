"""Compiled scatter (xlapy.backends.cpu.gather_scatter) against the interpreter, bit for bit:
the interpreter tests' configurations (random dimension numbers with add / set / maximum /
subtract / multiply / a two-op combiner), duplicate indices applied in XLA's order (set: the
last wins; float sums rounded in application order), out-of-bounds windows skipped, batching
dimensions, variadic scatter, every index type, the issue's element types, the parallel path
(disjoint windows split over threads), runs of one window combined on the stack (sorted
segment ids), in place inside compiled while loops, and the caller's operands and held
results never written."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "ops"))  # the interpreter's op tests
import test_scatter_eval as S
from indexing_kernel_helpers import TYPES, check, compiled_whiles, run_cpu, steps_of
from movement_eval_helpers import np_dtype, sample

from xlapy.backends.cpu import gather_scatter as gs


def _scatter(x, idx, u, combiner, update_window_dims, inserted, to_operand, ivd,
             input_batching=(), indices_batching=(), t="f32", it="s32"):
    text = S.scatter_text(t, x.shape, np.shape(idx), u.shape, combiner, update_window_dims,
                          inserted, to_operand, ivd, input_batching, indices_batching, it)
    return check(text, x, idx, u, opcode="scatter")


@pytest.mark.parametrize("seed", range(16))
@pytest.mark.parametrize("combiner", ["add", "set", "maximum", "sub", "multiply",
                                      "twice_plus"])
def test_random_configurations(seed, combiner):
    rng = np.random.default_rng(seed)
    rank = int(rng.integers(1, 4))
    shape = [int(s) for s in rng.integers(1, 5, rank)]
    x = rng.integers(-5, 5, shape).astype(np.int32)
    inserted = sorted(int(d) for d in rng.permutation(rank)[:int(rng.integers(0, rank + 1))])
    window_operand_dims = [d for d in range(rank) if d not in inserted]
    window_sizes = [int(rng.integers(0, shape[d] + 1)) for d in window_operand_dims]
    n_map = int(rng.integers(1, rank + 1))
    to_operand = [int(d) for d in rng.permutation(rank)[:n_map]]
    n_scatter = int(rng.integers(0, 3))
    scatter_sizes = [int(s) for s in rng.integers(1, 6, n_scatter)]
    ivd = int(rng.integers(0, n_scatter + 1))
    ishape = scatter_sizes[:ivd] + [n_map] + scatter_sizes[ivd:]
    idx = rng.integers(-1, 5, ishape).astype(np.int32)
    urank = n_scatter + len(window_operand_dims)
    update_window_dims = sorted(int(d) for d in
                                rng.permutation(urank)[:len(window_operand_dims)])
    ushape = [0] * urank
    for k, d in enumerate([d for d in range(urank) if d not in update_window_dims]):
        ushape[d] = scatter_sizes[k]
    for k, d in enumerate(update_window_dims):
        ushape[d] = window_sizes[k]
    u = rng.integers(-9, 9, ushape).astype(np.int32)
    (want,) = S.scatter_reference([x], idx, [u], S.PY[combiner], update_window_dims, inserted,
                                  to_operand, ivd)
    got = _scatter(x, idx, u, combiner, update_window_dims, inserted, to_operand, ivd, t="s32")
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("t", TYPES + ["f16", "s8", "u64", "c64"])
@pytest.mark.parametrize("combiner", ["add", "set", "maximum", "minimum"])
def test_element_types_with_duplicates(t, combiner):
    if t == "c64" and combiner in ("maximum", "minimum"):
        pytest.skip("no ordering of complex values")
    rng = np.random.default_rng(7)
    x = sample(t, (6, 3))
    idx = rng.integers(-1, 7, (20, 1)).astype(np.int32)  # duplicates and skipped rows
    u = sample(t, (20, 3), offset=5)
    _scatter(x, idx, u, combiner, (1,), (0,), (0,), 1, t=t)


def test_float_sums_round_in_application_order():
    # Many duplicates of values of very different sizes: the rounding of each step shows.
    rng = np.random.default_rng(8)
    for t, dt in (("f32", np.float32), ("f64", np.float64)):
        x = np.zeros(5, dt)
        idx = rng.integers(0, 5, (3000, 1)).astype(np.int32)
        u = (rng.standard_normal(3000) * 10.0 ** rng.integers(-8, 8, 3000)).astype(dt)
        _scatter(x, idx, u, "add", (), (0,), (0,), 1, t=t)
    x = sample("bf16", (5,))
    u = sample("bf16", (300,), offset=3)
    _scatter(x, rng.integers(0, 5, (300, 1)).astype(np.int32), u, "add", (), (0,), (0,), 1,
             t="bf16")


def test_set_keeps_the_last_duplicate_and_skips_out_of_bounds_windows():
    x = np.zeros((5, 4), np.float32)
    idx = np.array([[0, 0], [3, 2], [0, 0], [4, 1], [-1, 0], [2, 3]], np.int32)
    u = np.arange(6 * 2 * 2, dtype=np.float32).reshape(6, 2, 2)
    got = _scatter(x, idx, u, "set", (1, 2), (), (0, 1), 1)
    np.testing.assert_array_equal(got[0:2, 0:2], u[2])  # the later of the two at (0, 0)
    assert not got[4, :2].any() and got[4, 2] == u[1, 1, 0]  # (4, 1) and (-1, 0) skipped


def test_batching_dims_and_index_vector_dim_first():
    rng = np.random.default_rng(9)
    x = rng.integers(-5, 5, (3, 6, 4)).astype(np.int32)
    idx = rng.integers(-1, 7, (3, 5, 1)).astype(np.int32)
    u = rng.integers(-9, 9, (3, 5, 4)).astype(np.int32)
    _scatter(x, idx, u, "add", (2,), (1,), (1,), 2, input_batching=(0,),
             indices_batching=(0,), t="s32")
    x = rng.integers(-5, 5, (4, 5)).astype(np.int32)
    idx = np.array([[0, 3, 1, 3], [1, 0, 4, 0]], np.int32)  # vectors (0,1) (3,0) (1,4) (3,0)
    u = rng.integers(-9, 9, (4,)).astype(np.int32)
    _scatter(x, idx, u, "sub", (), (0, 1), (0, 1), 0, t="s32")


@pytest.mark.parametrize("it", ["s8", "u8", "s16", "u32", "s64", "u64"])
def test_index_types(it):
    info = np.iinfo(np_dtype(it))
    idx = np.array([0, 9, 3, info.max, info.min], dtype=np_dtype(it)).reshape(-1, 1)
    x = np.zeros(10, np.float32)
    got = _scatter(x, idx, np.arange(1, 6, dtype=np.float32), "add", (), (0,), (0,), 1, it=it)
    assert got[0] == (1 + (5 if info.min == 0 else 0))


def test_variadic_scatter_argmax_combiner():
    text = """HloModule m

comb {
  v0 = f32[] parameter(0)
  i0 = s32[] parameter(1)
  v1 = f32[] parameter(2)
  i1 = s32[] parameter(3)
  gt = pred[] compare(v1, v0), direction=GT
  v = f32[] select(gt, v1, v0)
  i = s32[] select(gt, i1, i0)
  ROOT t = (f32[], s32[]) tuple(v, i)
}

ENTRY e {
  x = f32[7] parameter(0)
  xi = s32[7] parameter(1)
  idx = s32[50,1] parameter(2)
  u = f32[50] parameter(3)
  ui = s32[50] parameter(4)
  ROOT s = (f32[7], s32[7]) scatter(x, xi, idx, u, ui), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=comb
}"""
    rng = np.random.default_rng(10)
    x = np.full(7, -np.inf, np.float32)
    xi = np.full(7, -1, np.int32)
    idx = rng.integers(-1, 8, (50, 1)).astype(np.int32)
    u = rng.integers(0, 5, 50).astype(np.float32)  # ties: the earlier index stays
    check(text, x, xi, idx, u, np.arange(50, dtype=np.int32), opcode="scatter")


def test_a_combiner_that_is_not_elementwise_stays_interpreted():
    text = S.NON_ELEMENTWISE_COMBINER
    got = check(text, np.zeros(4, np.float32), np.array([[0], [3], [0], [9], [1]], np.int32),
                np.arange(1, 6, dtype=np.float32), opcode="scatter", compiled=False)
    np.testing.assert_array_equal(got, np.array([12, 15, 0, 6], np.float32))


def test_rows_scatter_split_over_threads_is_the_sequential_result(monkeypatch):
    # Disjoint windows (rows into a table): split over window columns, each thread applies
    # every row in order, so duplicates are summed in XLA's order whatever the split.
    monkeypatch.setattr(gs, "ITEM_BYTES", 64)
    rng = np.random.default_rng(11)
    x = rng.standard_normal((3001, 130)).astype(np.float32)
    idx = rng.integers(-5, 3010, (20000, 1)).astype(np.int32)
    u = rng.standard_normal((20000, 130)).astype(np.float32)
    text = S.scatter_text("f32", x.shape, idx.shape, u.shape, "add", (1,), (0,), (0,), 1)
    (step,) = steps_of(text, "scatter")
    assert step.spec.parallel and step.spec.in_place == ((0, 0),)
    # work items: blocks of 16 window elements (a cache line of f32), the last of 2
    assert step.spec.domain == 9 and step.spec.cost == 20000 * 16
    check(text, x, idx, u, opcode="scatter")


@pytest.mark.parametrize("t,block", [("f64", 8), ("bf16", 32), ("pred", 64)])
def test_window_blocks_follow_the_element_size(monkeypatch, t, block):
    """A work item is a whole number of cache lines of window elements (the widest
    operand's; one line here); the last block takes what is left; split over threads,
    the result is the sequential one."""
    monkeypatch.setattr(gs, "ITEM_BYTES", 64)
    rng = np.random.default_rng(12)
    cols = 3 * block + 5
    x = sample(t, (700, cols))
    idx = rng.integers(-3, 705, (6000, 1)).astype(np.int32)
    u = sample(t, (6000, cols), 7)
    combiner = "maximum" if t == "pred" else "add"
    text = S.scatter_text(t, x.shape, idx.shape, u.shape, combiner, (1,), (0,), (0,), 1)
    (step,) = steps_of(text, "scatter")
    assert step.spec.domain == 4 and step.spec.parallel
    check(text, x, idx, u, opcode="scatter")


@pytest.mark.parametrize("cols,domain", [(130, 1), (2048, 1), (2049, 2), (5000, 3)])
def test_work_items_take_item_bytes_of_each_row(cols, domain):
    """Rows narrower than ITEM_BYTES are one work item (threads splitting a row both
    stream every update); wider ones are cut into ITEM_BYTES blocks, the last shorter."""
    assert gs.ITEM_BYTES == 8192
    rng = np.random.default_rng(13)
    x = rng.standard_normal((40, cols)).astype(np.float32)
    idx = rng.integers(-2, 42, (300, 1)).astype(np.int32)
    u = rng.standard_normal((300, cols)).astype(np.float32)
    text = S.scatter_text("f32", x.shape, idx.shape, u.shape, "add", (1,), (0,), (0,), 1)
    (step,) = steps_of(text, "scatter")
    assert step.spec.domain == domain and step.spec.cost == 300 * min(cols, 2048)
    check(text, x, idx, u, opcode="scatter")


def test_histogram_of_scalar_updates():
    """jnp.zeros(n).at[b].add(1): one-element windows, one work item (constant window
    bounds), duplicates counted in order, out-of-range bins dropped."""
    rng = np.random.default_rng(14)
    bins = rng.integers(-3, 259, (100000, 1)).astype(np.int32)
    text = """HloModule m
add { a = s32[] parameter(0)  b = s32[] parameter(1)  ROOT c = s32[] add(a, b) }
ENTRY e {
  i = s32[100000,1] parameter(0)
  z = s32[] constant(0)
  o = s32[256] broadcast(z), dimensions={}
  one = s32[] constant(1)
  u = s32[100000] broadcast(one), dimensions={}
  ROOT s = s32[256] scatter(o, i, u), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
}"""
    (step,) = steps_of(text, "scatter")
    assert step.spec.domain == 1
    got = check(text, bins, opcode="scatter")
    inside = bins[(bins >= 0) & (bins < 256)]
    np.testing.assert_array_equal(got, np.bincount(inside, minlength=256).astype(np.int32))


@pytest.mark.parametrize("t", ["f32", "bf16", "s32", "f64"])
@pytest.mark.parametrize("combiner", ["add", "maximum", "sub", "set", "twice_plus"])
def test_runs_of_one_window_combine_on_the_stack(t, combiner):
    """Sorted segment ids (runs of updates into one row), with out-of-bounds ids inside the
    runs and a row coming back after another: the run path (gs.RUN_WINDOW) applies the
    combiner to the same values in the same order - bit for bit the interpreter's, for a
    non-commutative combiner (sub) and a non-associative one (twice_plus) too."""
    rng = np.random.default_rng(21)
    x = sample(t, (40, 16))
    ids = np.sort(rng.integers(0, 40, 600))
    ids[rng.choice(600, 30, replace=False)] = -1  # skipped, runs go on around them
    ids[300:310] = 7  # row 7 again after later rows
    idx = ids.astype(np.int32).reshape(600, 1)
    u = sample(t, (600, 16), offset=3)
    text = S.scatter_text(t, x.shape, idx.shape, u.shape, combiner, (1,), (0,), (0,), 1)
    (step,) = steps_of(text, "scatter")
    assert step.spec.domain == 1 and 16 <= gs.RUN_WINDOW
    check(text, x, idx, u, opcode="scatter")


def test_runs_of_overlapping_windows_flush_first():
    """Windows two rows tall starting at rows 3, 3, 4, 3: the run at 3 is stored before the
    window at 4 reads row 4, and row 3's third update starts from the stored values."""
    x = np.arange(8 * 16, dtype=np.float32).reshape(8, 16)
    idx = np.array([[3], [3], [4], [3], [9], [3]], np.int32)
    u = np.arange(6 * 2 * 16, dtype=np.float32).reshape(6, 2, 16) / 7
    text = S.scatter_text("f32", x.shape, idx.shape, u.shape, "twice_plus", (1, 2), (),
                          (0,), 1)
    check(text, x, idx, u, opcode="scatter")


def test_overlapping_windows_run_in_order():
    rng = np.random.default_rng(12)
    x = rng.integers(-5, 5, (30, 4)).astype(np.int32)
    idx = rng.integers(-2, 30, (200, 1)).astype(np.int32)
    u = rng.integers(-9, 9, (200, 3, 4)).astype(np.int32)
    text = S.scatter_text("s32", x.shape, idx.shape, u.shape, "twice_plus", (1, 2), (),
                          (0,), 1)
    (step,) = steps_of(text, "scatter")
    assert not step.spec.parallel
    check(text, x, idx, u, opcode="scatter")


LOOP = """HloModule m

comb {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}

cond {
  s = (s32[], f32[64,16], s32[30,1], f32[30,16]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(6)
  ROOT lt = pred[] compare(i, n), direction=LT
}

body {
  s = (s32[], f32[64,16], s32[30,1], f32[30,16]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  table = f32[64,16] get-tuple-element(s), index=1
  idx = s32[30,1] get-tuple-element(s), index=2
  u = f32[30,16] get-tuple-element(s), index=3
  bi = s32[30,1] broadcast(i), dimensions={}
  shifted = s32[30,1] add(idx, bi)
  new = f32[64,16] scatter(table, shifted, u), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=comb
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  ROOT t = (s32[], f32[64,16], s32[30,1], f32[30,16]) tuple(i2, new, idx, u)
}

ENTRY e {
  table = f32[64,16] parameter(0)
  idx = s32[30,1] parameter(1)
  u = f32[30,16] parameter(2)
  zero = s32[] constant(0)
  init = (s32[], f32[64,16], s32[30,1], f32[30,16]) tuple(zero, table, idx, u)
  w = (s32[], f32[64,16], s32[30,1], f32[30,16]) while(init), condition=cond, body=body
  ROOT r = f32[64,16] get-tuple-element(w), index=1
}
"""


def test_scatter_in_place_inside_a_compiled_while():
    rng = np.random.default_rng(13)
    table = rng.standard_normal((64, 16)).astype(np.float32)
    idx = rng.integers(-3, 66, (30, 1)).astype(np.int32)
    u = rng.standard_normal((30, 16)).astype(np.float32)
    (loop,) = compiled_whiles(LOOP)
    # in place: no second table-sized slot for the scatter's result
    assert loop.resident == [1] and loop.ws_bytes < table.nbytes
    kept = table.copy()
    check(LOOP, table, idx, u, opcode="scatter")
    np.testing.assert_array_equal(table, kept)  # the caller's argument is not written


def test_the_callers_operand_and_held_results_are_never_written():
    text = S.scatter_text("f32", (400, 64), (500, 1), (500, 64), "add", (1,), (0,), (0,), 1)
    rng = np.random.default_rng(14)
    x = rng.standard_normal((400, 64)).astype(np.float32)
    kept_x = x.copy()
    i1 = rng.integers(0, 400, (500, 1)).astype(np.int32)
    u = rng.standard_normal((500, 64)).astype(np.float32)
    first = run_cpu(text, x, i1, u)
    kept = np.array(first, copy=True)
    second = run_cpu(text, first, i1, u)  # the held result as the next call's operand
    np.testing.assert_array_equal(x, kept_x)
    np.testing.assert_array_equal(first, kept)
    assert not np.array_equal(second, first)


def test_non_default_layouts():
    text = S.scatter_text("f32", (6, 3), (20, 1), (20, 3), "add", (1,), (0,), (0,), 1)
    text = text.replace("f32[6,3] parameter(0)", "f32[6,3]{0,1} parameter(0)")
    text = text.replace("f32[20,3] parameter(2)", "f32[20,3]{0,1} parameter(2)")
    text = text.replace("ROOT s = f32[6,3] scatter", "ROOT s = f32[6,3]{0,1} scatter")
    rng = np.random.default_rng(15)
    check(text, sample("f32", (6, 3)), rng.integers(-1, 7, (20, 1)).astype(np.int32),
          sample("f32", (20, 3), offset=3), opcode="scatter")

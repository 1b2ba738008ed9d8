"""Compiled gather (xlapy.backends.cpu.gather_scatter) against the interpreter, bit for bit:
the interpreter tests' dimension-number configurations (random ones, batching dimensions,
index_vector_dim first/middle/implicit, offset dims between batch dims), start indices out of
range (clamped), every index type, every element type, large gathers split over threads,
gathers inside compiled while loops, and results the caller holds surviving later calls."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "ops"))  # the interpreter's op tests
import test_gather_eval as G
from indexing_kernel_helpers import TYPES, check, compiled_whiles, run_cpu, steps_of
from movement_eval_helpers import ALL_TYPES, np_dtype, sample


def _gather(x, idx, offset_dims, collapsed, start_index_map, ivd, slice_sizes,
            operand_batching=(), indices_batching=(), et="f32", it="s32"):
    want = G.gather_reference(x, idx, offset_dims, collapsed, start_index_map, ivd,
                              slice_sizes, operand_batching, indices_batching)
    text = G.gather_text(x.shape, np.shape(idx), want.shape, offset_dims, collapsed,
                         start_index_map, ivd, slice_sizes, operand_batching,
                         indices_batching, et, it)
    got = check(text, x, idx, opcode="gather")
    if want.dtype == got.dtype:
        np.testing.assert_array_equal(got, want)
    return got


@pytest.mark.parametrize("seed", range(24))
def test_random_configurations(seed):
    """As the interpreter's test (its generator, with larger dimensions and starts):
    random dimension numbers, index vector positions and start indices out of range."""
    _gather(*G.random_configuration(np.random.default_rng(seed), dim_high=6, batch_high=5,
                                    index_high=8))


def test_rows_clamped_and_spec_examples():
    x = np.arange(16 * 11, dtype=np.float32).reshape(16, 11)
    idx = np.array([[-5], [16], [100], [2], [15]], np.int32)
    got = _gather(x, idx, (1,), (0,), (0,), 1, (1, 11))
    np.testing.assert_array_equal(got, x[[0, 15, 15, 2, 15]])
    rng = np.random.default_rng(0)
    idx = np.stack([rng.integers(-2, 12, (4, 5)), rng.integers(-2, 9, (4, 5))], -1)
    _gather(x, idx.astype(np.int32), (2, 3), (), (0, 1), 2, (8, 6))
    _gather(x, np.array([[0, 4, 2], [3, 1, 0]], np.int32), (), (0, 1), (0, 1), 0, (1, 1))
    _gather(x, np.array([[1, 3], [0, 2]], np.int32), (2,), (0,), (0,), 2, (1, 11))


def test_offset_dims_between_batch_dims_and_permuted_index_map():
    x = np.arange(4 * 5 * 3, dtype=np.float32).reshape(4, 5, 3)
    idx = np.array([[[1, 2], [2, 0]], [[0, 3], [3, 9]], [[2, 2], [-1, 1]]], np.int32)
    _gather(x, idx, (1, 3), (1,), (1, 0), 2, (2, 1, 3))


def test_explicit_batching_dims():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 5, 6)).astype(np.float32)
    idx = rng.integers(-1, 6, (4, 2, 6, 1)).astype(np.int32)
    _gather(x, idx, (), (1,), (1,), 3, (1, 1, 1), operand_batching=(0, 2),
            indices_batching=(0, 2))
    x = rng.standard_normal((3, 7, 4)).astype(np.float32)
    idx = rng.integers(-2, 8, (2, 1, 3)).astype(np.int32)
    _gather(x, idx, (1, 3), (), (1,), 1, (1, 3, 4), operand_batching=(0,),
            indices_batching=(2,))


@pytest.mark.parametrize("it", ["s8", "u8", "s16", "u16", "s32", "u32", "s64", "u64"])
def test_index_types_and_extremes(it):
    x = np.arange(10 * 3, dtype=np.float32).reshape(10, 3)
    info = np.iinfo(np_dtype(it))
    raw = np.array([0, 9, 3, info.max, info.min, info.max - 1], dtype=np_dtype(it))
    got = _gather(x, raw.reshape(-1, 1), (1,), (0,), (0,), 1, (1, 3), it=it)
    assert np.array_equal(got[3], x[9])  # the largest value clamps to the last row


@pytest.mark.parametrize("t", sorted(set(ALL_TYPES) | set(TYPES)))
def test_every_element_type(t):
    x = sample(t, (7, 3))
    idx = np.array([[6], [0], [2], [9], [-4]], np.int32)
    text = G.gather_text((7, 3), (5, 1), (5, 3), (1,), (0,), (0,), 1, (1, 3), et=t)
    check(text, x, idx, opcode="gather")
    # a column gather: the output row is a batch dimension (per-element path)
    text = G.gather_text((7, 3), (5, 1), (7, 5), (0,), (1,), (1,), 1, (7, 1), et=t)
    check(text, x, np.array([[2], [0], [1], [5], [-1]], np.int32), opcode="gather")


def test_empty_gathers():
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    _gather(x, np.zeros((0, 1), np.int32), (1,), (0,), (0,), 1, (1, 2))
    text = G.gather_text((0, 2), (3, 1), (3, 0), (1,), (0,), (0,), 1, (0, 0))
    check(text, np.zeros((0, 2), np.float32), np.array([[1], [0], [5]], np.int32),
          opcode="gather")


def test_large_gather_split_over_threads():
    # Enough rows for run_parallel to split the work: odd sizes, duplicate and clamped rows.
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1001, 67)).astype(np.float32)
    idx = rng.integers(-10, 1010, (5003, 1)).astype(np.int32)
    (step,) = steps_of(G.gather_text((1001, 67), (5003, 1), (5003, 67), (1,), (0,), (0,), 1,
                                     (1, 67)), "gather")
    assert step.spec.parallel and step.spec.domain == 5003
    got = _gather(x, idx, (1,), (0,), (0,), 1, (1, 67))
    np.testing.assert_array_equal(got, x[np.clip(idx[:, 0], 0, 1000)])


LOOP = """HloModule m

cond {
  s = (s32[], f32[40,8], f32[50,8], s32[40,1]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(5)
  ROOT lt = pred[] compare(i, n), direction=LT
}

body {
  s = (s32[], f32[40,8], f32[50,8], s32[40,1]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  acc = f32[40,8] get-tuple-element(s), index=1
  table = f32[50,8] get-tuple-element(s), index=2
  idx = s32[40,1] get-tuple-element(s), index=3
  bi = s32[40,1] broadcast(i), dimensions={}
  shifted = s32[40,1] add(idx, bi)
  g = f32[40,8] gather(table, shifted), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,8}
  acc2 = f32[40,8] add(acc, g)
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  ROOT t = (s32[], f32[40,8], f32[50,8], s32[40,1]) tuple(i2, acc2, table, idx)
}

ENTRY e {
  acc = f32[40,8] parameter(0)
  table = f32[50,8] parameter(1)
  idx = s32[40,1] parameter(2)
  zero = s32[] constant(0)
  init = (s32[], f32[40,8], f32[50,8], s32[40,1]) tuple(zero, acc, table, idx)
  w = (s32[], f32[40,8], f32[50,8], s32[40,1]) while(init), condition=cond, body=body
  ROOT r = f32[40,8] get-tuple-element(w), index=1
}
"""


def test_gather_inside_a_compiled_while():
    rng = np.random.default_rng(3)
    args = [rng.standard_normal((40, 8)).astype(np.float32),
            rng.standard_normal((50, 8)).astype(np.float32),
            rng.integers(-3, 52, (40, 1)).astype(np.int32)]
    assert len(compiled_whiles(LOOP)) == 1
    check(LOOP, *args, opcode="gather")


def test_results_the_caller_holds_are_never_overwritten():
    text = G.gather_text((300, 64), (400, 1), (400, 64), (1,), (0,), (0,), 1, (1, 64))
    rng = np.random.default_rng(4)
    x = rng.standard_normal((300, 64)).astype(np.float32)
    i1 = rng.integers(0, 300, (400, 1)).astype(np.int32)
    i2 = rng.integers(0, 300, (400, 1)).astype(np.int32)
    first = run_cpu(text, x, i1)
    kept = np.array(first, copy=True)
    second = run_cpu(text, x, i2)
    np.testing.assert_array_equal(first, kept)
    np.testing.assert_array_equal(second, x[i2[:, 0]])


def test_element_gather_split_over_threads():
    # x[idx] of a vector: the last output dimension is a batch dimension, every element has
    # its own start: the work items are elements.
    rng = np.random.default_rng(6)
    x = rng.standard_normal(100003).astype(np.float32)
    idx = rng.integers(-50, 100050, (70001, 1)).astype(np.int32)
    text = G.gather_text((100003,), (70001, 1), (70001,), (), (0,), (0,), 1, (1,))
    (step,) = steps_of(text, "gather")
    assert step.spec.parallel and step.spec.domain == 70001
    got = _gather(x, idx, (), (0,), (0,), 1, (1,))
    np.testing.assert_array_equal(got, x[np.clip(idx[:, 0], 0, 100002)])


def test_non_default_layouts():
    # Layouts name the physical order; the backend's buffers are logical arrays, so the
    # compiled gather gives the same values whatever the operand and result layouts say.
    text = G.gather_text((7, 3), (5, 1), (5, 3), (1,), (0,), (0,), 1, (1, 3))
    text = text.replace("f32[7,3] parameter(0)", "f32[7,3]{0,1} parameter(0)")
    text = text.replace("ROOT g = f32[5,3] gather", "ROOT g = f32[5,3]{0,1} gather")
    x = np.arange(21, dtype=np.float32).reshape(7, 3)
    got = check(text, x, np.array([[6], [0], [2], [9], [-4]], np.int32), opcode="gather")
    np.testing.assert_array_equal(got, x[[6, 0, 2, 6, 0]])


# -- gathers fused into loop kernels ----------------------------------------------------------


def _fused_text(text: str, et: str, it: str) -> str:
    """``text``'s gather between an elementwise producer of its indices and an elementwise
    consumer (a gather of single elements then fuses with both: indexing._gather)."""
    lines = text.splitlines()
    k = next(n for n, line in enumerate(lines) if line.strip().startswith("ROOT g"))
    g = lines[k].replace("ROOT g", "g").replace("gather(x, i)", "gather(x, j)")
    ishape = next(line for line in lines if " i = " in line).split("=")[1].split(" parameter")[0]
    oshape = g.split("=")[1].split(" gather")[0]
    op = "not" if et == "pred" else "negate"
    lines[k:k + 1] = [f"  j = {ishape.strip()} maximum(i, i)", g,
                      f"  ROOT n = {oshape.strip()} {op}(g)"]
    return "\n".join(lines)


def _fused(x, idx, offset_dims, collapsed, start_index_map, ivd, slice_sizes,
           operand_batching=(), indices_batching=(), et="f32", it="s32"):
    from xlapy.backends.cpu import backend as be
    from xlapy.interpreter import evaluate
    from xlapy.parser import parse_hlo_module

    want = G.gather_reference(x, idx, offset_dims, collapsed, start_index_map, ivd,
                              slice_sizes, operand_batching, indices_batching)
    text = _fused_text(G.gather_text(x.shape, np.shape(idx), want.shape, offset_dims,
                                     collapsed, start_index_map, ivd, slice_sizes,
                                     operand_batching, indices_batching, et, it), et, it)
    module = parse_hlo_module(text)
    steps = be.compile_module(module).entry.steps
    if want.size and want.ndim and not (
            want.ndim - 1 in offset_dims and want.shape[-1] > 1):  # not a row gather
        fused = [s for s in steps if s.instr.opcode == "fusion"]
        assert len(fused) == 1 and any(
            i.opcode == "gather" for i in fused[0].instr.attrs["calls"].instructions)
    elif want.size and want.ndim:  # a row gather: the gather kernel
        assert any(s.instr.opcode == "gather" for s in steps)
    got = run_cpu(text, x, idx)
    same = np.asarray(evaluate(module, x, idx)).reshape(-1)
    assert np.array_equal(np.asarray(got).reshape(-1).view(np.uint8), same.view(np.uint8))
    return got


@pytest.mark.parametrize("seed", range(16))
def test_fused_random_configurations(seed):
    _fused(*G.random_configuration(np.random.default_rng(100 + seed), dim_high=6,
                                   batch_high=5, index_high=8))


def test_fused_element_gathers_batching_and_index_positions():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 5, 6)).astype(np.float32)
    idx = rng.integers(-1, 6, (4, 2, 6, 1)).astype(np.int32)
    _fused(x, idx, (), (1,), (1,), 3, (1, 1, 1), operand_batching=(0, 2),
           indices_batching=(0, 2))
    y = np.arange(16 * 11, dtype=np.float32).reshape(16, 11)
    _fused(y, np.array([[0, 4, 2], [3, 1, 0]], np.int32), (), (0, 1), (0, 1), 0, (1, 1))
    # whole rows (an embedding lookup): left to the gather kernel, not fused
    rows = rng.integers(-3, 19, (5, 1)).astype(np.int32)
    _fused(y, rows, (1,), (0,), (0,), 1, (1, 11))


@pytest.mark.parametrize("it", ["s8", "u8", "s16", "u32", "s64", "u64"])
def test_fused_index_types_and_extremes(it):
    x = np.arange(10, dtype=np.float32)
    info = np.iinfo(np_dtype(it))
    raw = np.array([0, 9, 3, info.max, info.min, info.max - 1], dtype=np_dtype(it))
    got = _fused(x, raw.reshape(-1, 1), (), (0,), (0,), 1, (1,), it=it)
    assert got[3] == -x[9]  # the largest value clamps to the last element

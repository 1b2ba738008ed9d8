"""Interpreter kernel of gather: the operation-semantics page's walkthrough (spec 002, Gather:
slices of [8,6] out of [16,11], batched indices [4,5,2], the tf.gather_nd form with
slice_sizes [1,11], remapped_offset_dims), XLA's clamping of start indices (HloEvaluator;
XLA:CPU in the golden fixtures), explicit batching dimensions, and a per-element
transcription of the page's formal definition checked on many configurations."""

import itertools

import numpy as np
import pytest
from movement_eval_helpers import ALL_TYPES, assert_bits, assert_same, np_dtype, run, sample

from xlapy import ops
from xlapy.interpreter import evaluate
from xlapy.ops import GatherDimensionNumbers
from xlapy.ops.builder import XlaBuilder
from xlapy.shape import parse_shape


def gather_reference(operand, indices, offset_dims, collapsed, start_index_map, ivd,
                     slice_sizes, operand_batching=(), indices_batching=()):
    """The page's definition, element by element, with XLA's clamp of the start index."""
    indices = np.asarray(indices)
    if ivd == indices.ndim:
        indices = indices[..., None]
    batch_sizes = [s for i, s in enumerate(indices.shape) if i != ivd]
    window = [d for d in range(operand.ndim) if d not in collapsed and d not in operand_batching]
    out_rank = len(batch_sizes) + len(offset_dims)
    batch_out_dims = [o for o in range(out_rank) if o not in offset_dims]
    out_shape = [0] * out_rank
    for k, o in enumerate(batch_out_dims):
        out_shape[o] = batch_sizes[k]
    for k, o in enumerate(offset_dims):
        out_shape[o] = slice_sizes[window[k]]
    out = np.zeros(out_shape, operand.dtype)
    for out_index in itertools.product(*[range(s) for s in out_shape]):
        g = [out_index[o] for o in batch_out_dims]
        start_in = [0] * operand.ndim
        for k, d in enumerate(start_index_map):
            full = list(g)
            full.insert(ivd, k)
            start_in[d] = int(indices[tuple(full)])
        for od, idim in zip(operand_batching, indices_batching):
            start_in[od] = g[idim - (1 if idim > ivd else 0)]
        for d in range(operand.ndim):
            size = slice_sizes[d] if d in window else 1
            start_in[d] = min(max(start_in[d], 0), operand.shape[d] - size)
        offset_in = [0] * operand.ndim
        for k, o in enumerate(offset_dims):
            offset_in[window[k]] = out_index[o]
        out[out_index] = operand[tuple(s + o for s, o in zip(start_in, offset_in))]
    return out


def gather_text(operand_shape, indices_shape, out_shape, offset_dims, collapsed,
                start_index_map, ivd, slice_sizes, operand_batching=(), indices_batching=(),
                et="f32", it="s32"):
    def braced(v):
        return "{" + ",".join(str(x) for x in v) + "}"

    def dims(v):
        return ",".join(str(x) for x in v)

    batching = ""
    if operand_batching:
        batching = (f", operand_batching_dims={braced(operand_batching)}, "
                    f"start_indices_batching_dims={braced(indices_batching)}")
    return f"""HloModule m
ENTRY e {{
  x = {et}[{dims(operand_shape)}] parameter(0)
  i = {it}[{dims(indices_shape)}] parameter(1)
  ROOT g = {et}[{dims(out_shape)}] gather(x, i), offset_dims={braced(offset_dims)}, collapsed_slice_dims={braced(collapsed)}, start_index_map={braced(start_index_map)}{batching}, index_vector_dim={ivd}, slice_sizes={braced(slice_sizes)}
}}"""


def check(operand, indices, offset_dims, collapsed, start_index_map, ivd, slice_sizes,
          operand_batching=(), indices_batching=(), et="f32", it="s32"):
    want = gather_reference(operand, indices, offset_dims, collapsed, start_index_map, ivd,
                            slice_sizes, operand_batching, indices_batching)
    text = gather_text(operand.shape, np.shape(indices), want.shape, offset_dims, collapsed,
                       start_index_map, ivd, slice_sizes, operand_batching, indices_batching,
                       et, it)
    got = run(text, operand, indices)
    assert_bits(got, want)
    return got


OPERAND = np.arange(16 * 11, dtype=np.float32).reshape(16, 11)


def test_gather_spec_walkthrough_slices_8x6():
    # 5 slices of shape [8,6] out of [16,11]; indices S64[5,2]; out[G,O0,O1] = in[X+O0, Y+O1].
    idx = np.array([[0, 0], [3, 2], [8, 5], [5, 1], [1, 4]], np.int64)
    b = XlaBuilder("t")
    x = ops.Parameter(b, 0, parse_shape("f32[16,11]"), "x")
    i = ops.Parameter(b, 1, parse_shape("s64[5,2]"), "i")
    dn = GatherDimensionNumbers(offset_dims=(1, 2), collapsed_slice_dims=(),
                                start_index_map=(0, 1), index_vector_dim=1)
    comp = b.build(ops.Gather(x, i, dn, [8, 6]))
    got = evaluate(comp, OPERAND, idx)
    assert got.shape == (5, 8, 6)
    for g, (X, Y) in enumerate(idx):
        assert_same(got[g], OPERAND[X:X + 8, Y:Y + 6])


def test_gather_spec_batched_indices_4x5x2():
    # "Gather indices" of shape [4,5,2]: a batch dynamic slice with batch dims G0, G1.
    rng = np.random.default_rng(0)
    idx = np.stack([rng.integers(0, 9, (4, 5)), rng.integers(0, 6, (4, 5))], axis=-1)
    got = check(OPERAND, idx.astype(np.int32), (2, 3), (), (0, 1), 2, (8, 6))
    assert got.shape == (4, 5, 8, 6)
    assert_same(got[3, 2], OPERAND[idx[3, 2, 0]:idx[3, 2, 0] + 8, idx[3, 2, 1]:idx[3, 2, 1] + 6])


def test_gather_spec_gather_nd_rows():
    # tf.gather_nd: each index X picks a whole row (slice_sizes [1,11], dimension 0
    # collapsed); the result concatenates the rows: out[G0,G1,O0] = in[X, O0].
    idx = np.array([[0, 3, 15, 7, 2], [1, 1, 4, 9, 12], [5, 6, 7, 8, 0], [14, 13, 2, 3, 10]],
                   np.int32)
    got = check(OPERAND, idx, (2,), (0,), (0,), 2, (1, 11))
    assert got.shape == (4, 5, 11)
    assert_same(got, OPERAND[idx])


def test_gather_spec_remapped_offset_dims():
    # offset_dims.size 4, operand rank 6, collapsed_slice_dims {0, 2}: remapped_offset_dims
    # is {0->1, 1->3, 2->4, 3->5}.
    operand = np.arange(2 * 3 * 2 * 3 * 2 * 2, dtype=np.int32).reshape(2, 3, 2, 3, 2, 2)
    idx = np.array([[1, 0, 1, 2, 0, 0], [0, 1, 0, 0, 1, 1]], np.int32)
    got = check(operand, idx, (1, 2, 3, 4), (0, 2), (0, 1, 2, 3, 4, 5), 1,
                (1, 2, 1, 2, 1, 2), et="s32")
    assert got.shape == (2, 2, 2, 1, 2)
    # out[b, o0, o1, o2, o3] = operand[S0, S1 + o0, S2, S3 + o1, S4 + o2, S5 + o3]; for b = 0,
    # S = (1, 0, 1, 2, 0, 0) with S3 clamped to 3 - 2 = 1.
    assert got[0, 1, 0, 0, 1] == operand[1, 1, 1, 1, 0, 1]


def test_gather_clamps_out_of_range_starts():
    # HloEvaluator: start = clamp(start, 0, dim - slice_size); jax's mode='clip'/x[idx] rely
    # on it (the golden fixture "gather" checks XLA:CPU).
    x = np.arange(6 * 3, dtype=np.float32).reshape(6, 3)
    idx = np.array([[-5], [6], [100], [2]], np.int32)
    got = check(x, idx, (1,), (0,), (0,), 1, (1, 3))
    assert_same(got, x[[0, 5, 5, 2]])
    # A window of 4 rows starting at 4 of 6 is moved back to start 2.
    got = check(x, np.array([[4, 1]], np.int32), (1, 2), (), (0, 1), 1, (4, 2))
    assert_same(got[0], x[2:6, 1:3])


def test_gather_index_vector_dim_first_and_implicit():
    x = np.arange(5 * 4, dtype=np.float32).reshape(5, 4)
    # index_vector_dim = 0: the indices' dimension 0 holds the vectors.
    idx = np.array([[0, 4, 2], [3, 1, 0]], np.int32)  # 3 vectors (0,3), (4,1), (2,0)
    got = check(x, idx, (), (0, 1), (0, 1), 0, (1, 1))
    assert_same(got, x[[0, 4, 2], [3, 1, 0]])
    # index_vector_dim = rank: a trailing size-1 index vector.
    got = check(x, np.array([[1, 3], [0, 2]], np.int32), (2,), (0,), (0,), 2, (1, 4))
    assert_same(got, x[np.array([[1, 3], [0, 2]])])


def test_gather_offset_dims_between_batch_dims():
    x = np.arange(4 * 5, dtype=np.float32).reshape(4, 5)
    idx = np.array([[[1], [2]], [[0], [3]], [[2], [2]]], np.int32)  # [3,2,1]
    got = check(x, idx, (1,), (0,), (0,), 2, (1, 5))
    assert got.shape == (3, 5, 2)
    assert_same(got[:, :, 1], x[idx[:, 1, 0]])


def test_gather_explicit_batching_dims_take_along_axis():
    # The golden fixture's take_along_axis: operand_batching_dims={0,2} paired with the
    # indices' dimensions {0,2}; out[a, b, c] = x[a, idx[a, b, c], c].
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 5, 6)).astype(np.float32)
    idx = rng.integers(0, 5, (4, 2, 6, 1)).astype(np.int32)
    got = check(x, idx, (), (1,), (1,), 3, (1, 1, 1), operand_batching=(0, 2),
                indices_batching=(0, 2))
    assert_same(got, np.take_along_axis(x, idx[..., 0], axis=1))


def test_gather_batching_dims_with_window_and_index_vector_dim_in_the_middle():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 7, 4)).astype(np.float32)
    idx = rng.integers(-2, 8, (2, 1, 3)).astype(np.int32)  # batch dim of the indices is 2
    got = check(x, idx, (1, 3), (), (1,), 1, (1, 3, 4), operand_batching=(0,),
                indices_batching=(2,))
    assert got.shape == (2, 3, 3, 4)


def random_configuration(rng, dim_high: int = 5, batch_high: int = 4, index_high: int = 7):
    """A random gather: (operand, start indices, offset_dims, collapsed_slice_dims,
    start_index_map, index_vector_dim, slice_sizes) - random dimension numbers, index vector
    positions and starts out of range (from -3 to ``index_high``)."""
    rank = int(rng.integers(1, 4))
    shape = [int(s) for s in rng.integers(1, dim_high, rank)]
    x = rng.standard_normal(shape).astype(np.float32)
    dims = list(range(rank))
    n_map = int(rng.integers(1, rank + 1))
    start_index_map = [int(d) for d in rng.permutation(dims)[:n_map]]
    collapsed = sorted(int(d) for d in rng.permutation(dims)[:int(rng.integers(0, rank + 1))])
    slice_sizes = [1 if d in collapsed else int(rng.integers(0, shape[d] + 1)) for d in dims]
    n_batch = int(rng.integers(0, 3))
    batch = [int(s) for s in rng.integers(1, batch_high, n_batch)]
    ivd = int(rng.integers(0, n_batch + 1))
    ishape = batch[:ivd] + [n_map] + batch[ivd:]
    idx = rng.integers(-3, index_high, ishape).astype(np.int32)
    n_window = rank - len(collapsed)
    out_rank = n_batch + n_window
    offset_dims = sorted(int(d) for d in rng.permutation(out_rank)[:n_window])
    return x, idx, offset_dims, collapsed, start_index_map, ivd, slice_sizes


@pytest.mark.parametrize("seed", range(12))
def test_gather_random_configurations(seed):
    """Random dimension numbers, index vector positions and out-of-range starts, checked
    against the per-element definition."""
    check(*random_configuration(np.random.default_rng(seed)))


@pytest.mark.parametrize("it", ["s8", "u8", "s16", "u32", "s64", "u64"])
def test_gather_index_types(it):
    x = np.arange(10, dtype=np.float32)
    idx = np.array([[0], [9], [3]]).astype(np_dtype(it))
    got = check(x, idx, (1,), (), (0,), 1, (2,), it=it)
    assert_same(got, np.array([[0, 1], [8, 9], [3, 4]], np.float32))


@pytest.mark.parametrize("t", ALL_TYPES)
def test_gather_every_type(t):
    x = sample(t, (5, 2))
    idx = np.array([[4], [0], [2], [4]], np.int32)
    text = gather_text((5, 2), (4, 1), (4, 2), (1,), (0,), (0,), 1, (1, 2), et=t)
    assert_bits(run(text, x, idx), x[[4, 0, 2, 4]])


def test_gather_empty_indices_and_empty_operand():
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    check(x, np.zeros((0, 1), np.int32), (1,), (0,), (0,), 1, (1, 2))
    text = gather_text((0, 2), (3, 1), (3, 0), (1,), (0,), (0,), 1, (0, 0))
    got = run(text, np.zeros((0, 2), np.float32), np.array([[1], [0], [5]], np.int32))
    assert_same(got, np.zeros((3, 0), np.float32))

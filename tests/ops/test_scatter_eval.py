"""Interpreter kernel of scatter: the operation-semantics page's definition (spec 002,
Scatter: update_window_dims, inserted_window_dims, scatter_dims_to_operand_dims,
index_vector_dim, variadic operands), transcribed element by element and checked on many
configurations; XLA's order of application (update scatter indices in row-major order, so a
"set" keeps the last duplicate, as on XLA:CPU), skipped out-of-bounds windows (not clamped),
batching dimensions, combiners that are not elementwise, and every element type."""

import itertools

import ml_dtypes
import numpy as np
import pytest
from movement_eval_helpers import ALL_TYPES, assert_bits, assert_same, np_dtype, run, sample

from xlapy import ops
from xlapy.interpreter import evaluate
from xlapy.ops import ScatterDimensionNumbers
from xlapy.ops.builder import XlaBuilder
from xlapy.shape import parse_shape


def scatter_reference(operands, indices, updates, combine, update_window_dims, inserted,
                      to_operand, ivd, input_batching=(), indices_batching=()):
    """The page's definition, one update element at a time in XLA's order; a window that
    does not fit at its start index is skipped."""
    outs = [np.array(o) for o in operands]
    indices = np.asarray(indices)
    if ivd == indices.ndim:
        indices = indices[..., None]
    rank = outs[0].ndim
    urank = updates[0].ndim
    scatter_dims = [d for d in range(urank) if d not in update_window_dims]
    window_operand_dims = [d for d in range(rank) if d not in inserted and d not in input_batching]
    for s_index in itertools.product(*[range(updates[0].shape[d]) for d in scatter_dims]):
        start = [0] * rank
        for k, d in enumerate(to_operand):
            full = list(s_index)
            full.insert(ivd, k)
            start[d] = int(indices[tuple(full)])
        for od, idim in zip(input_batching, indices_batching):
            start[od] = s_index[idim - (1 if idim > ivd else 0)]
        sizes = [1] * rank
        for k, d in enumerate(window_operand_dims):
            sizes[d] = updates[0].shape[update_window_dims[k]]
        if any(s < 0 or s > outs[0].shape[d] - sizes[d] for d, s in enumerate(start)):
            continue
        for w_index in itertools.product(*[range(updates[0].shape[d]) for d in update_window_dims]):
            u_index = [0] * urank
            for k, d in enumerate(scatter_dims):
                u_index[d] = s_index[k]
            for k, d in enumerate(update_window_dims):
                u_index[d] = w_index[k]
            target = list(start)
            for k, d in enumerate(window_operand_dims):
                target[d] += w_index[k]
            target = tuple(target)
            new = combine(*[o[target] for o in outs], *[u[tuple(u_index)] for u in updates])
            if not isinstance(new, tuple):
                new = (new,)
            for o, v in zip(outs, new):
                o[target] = v
    return outs


def braced(v):
    return "{" + ",".join(str(x) for x in v) + "}"


def dims(v):
    return ",".join(str(x) for x in v)


COMBINERS = {
    "add": "ROOT r = {t}[] add(a, b)",
    "multiply": "ROOT r = {t}[] multiply(a, b)",
    "maximum": "ROOT r = {t}[] maximum(a, b)",
    "minimum": "ROOT r = {t}[] minimum(a, b)",
    "set": None,   # the root is parameter 1 itself
    "keep": None,  # the root is parameter 0 itself
    "sub": "ROOT r = {t}[] subtract(a, b)",          # not commutative: order matters
    "twice_plus": "s = {t}[] add(a, a)\n  ROOT r = {t}[] add(s, b)",
}


def scatter_text(t, operand_shape, indices_shape, updates_shape, combiner, update_window_dims,
                 inserted, to_operand, ivd, input_batching=(), indices_batching=(), it="s32"):
    batching = ""
    if input_batching:
        batching = (f", input_batching_dims={braced(input_batching)}, "
                    f"scatter_indices_batching_dims={braced(indices_batching)}")
    if combiner == "set":
        comb = f"a = {t}[] parameter(0)\n  ROOT b = {t}[] parameter(1)"
    elif combiner == "keep":
        comb = f"ROOT a = {t}[] parameter(0)\n  b = {t}[] parameter(1)"
    else:
        comb = (f"a = {t}[] parameter(0)\n  b = {t}[] parameter(1)\n  "
                + COMBINERS[combiner].format(t=t))
    return f"""HloModule m

comb {{
  {comb}
}}

ENTRY e {{
  x = {t}[{dims(operand_shape)}] parameter(0)
  i = {it}[{dims(indices_shape)}] parameter(1)
  u = {t}[{dims(updates_shape)}] parameter(2)
  ROOT s = {t}[{dims(operand_shape)}] scatter(x, i, u), update_window_dims={braced(update_window_dims)}, inserted_window_dims={braced(inserted)}, scatter_dims_to_operand_dims={braced(to_operand)}{batching}, index_vector_dim={ivd}, to_apply=comb
}}"""


PY = {
    "add": lambda a, b: a + b,
    "multiply": lambda a, b: a * b,
    "maximum": max,
    "minimum": min,
    "set": lambda a, b: b,
    "keep": lambda a, b: a,
    "sub": lambda a, b: a - b,
    "twice_plus": lambda a, b: a + a + b,
}


def check(x, idx, u, combiner, update_window_dims, inserted, to_operand, ivd,
          input_batching=(), indices_batching=(), t="f32", it="s32"):
    (want,) = scatter_reference([x], idx, [u], PY[combiner], update_window_dims, inserted,
                                to_operand, ivd, input_batching, indices_batching)
    text = scatter_text(t, x.shape, np.shape(idx), u.shape, combiner, update_window_dims,
                        inserted, to_operand, ivd, input_batching, indices_batching, it)
    got = run(text, x, idx, u)
    assert_same(got, want)
    return got


def test_scatter_rows_with_duplicates_add():
    # x.at[idx].add(u) with duplicate rows (the golden fixture "scatter_add").
    x = np.arange(18, dtype=np.float32).reshape(6, 3)
    idx = np.array([[1], [3], [1], [5], [1], [0]], np.int32)
    u = np.arange(18, dtype=np.float32).reshape(6, 3) * 10
    got = check(x, idx, u, "add", (1,), (0,), (0,), 1)
    assert_same(got[1], x[1] + u[0] + u[2] + u[4])


def test_scatter_set_last_duplicate_wins():
    # XLA:CPU applies updates in index order: for "set" the last duplicate wins.
    x = np.zeros(4, np.float32)
    idx = np.array([[2], [0], [2], [2], [0]], np.int32)
    u = np.array([1, 2, 3, 4, 5], np.float32)
    got = check(x, idx, u, "set", (), (0,), (0,), 1)
    assert_same(got, np.array([5, 0, 4, 0], np.float32))


def test_scatter_not_commutative_combiner_applies_in_order():
    # subtract: ((x - u0) - u1) - u2 ...; and 2a + b: the order is visible.
    x = np.array([100, 1000], np.int32)
    idx = np.array([[0], [1], [0], [0]], np.int32)
    u = np.array([1, 2, 3, 4], np.int32)
    assert_same(check(x, idx, u, "sub", (), (0,), (0,), 1, t="s32"),
                np.array([92, 998], np.int32))
    assert_same(check(x, idx, u, "twice_plus", (), (0,), (0,), 1, t="s32"),
                np.array([((200 + 1) * 2 + 3) * 2 + 4, 2002], np.int32))


def test_scatter_max_min_nan_and_signed_zero():
    # XLA:CPU via jax 0.10.2 (x.at[i].max(u) / .min(u)): NaN propagates from either side,
    # max(-0, +0) = +0 and min = -0 whichever comes first.
    nan = np.float32("nan")
    x = np.array([0.0, -0.0, 1.0, nan, 3.0], np.float32)
    idx = np.array([[0], [1], [2], [2], [3], [4], [4]], np.int32)
    u = np.array([-0.0, 0.0, nan, 5.0, 2.0, -1.0, 7.0], np.float32)
    text = scatter_text("f32", (5,), (7, 1), (7,), "maximum", (), (0,), (0,), 1)
    assert_bits(run(text, x, idx, u), np.array([0.0, 0.0, nan, nan, 7.0], np.float32))
    text = scatter_text("f32", (5,), (7, 1), (7,), "minimum", (), (0,), (0,), 1)
    assert_bits(run(text, x, idx, u), np.array([-0.0, -0.0, nan, nan, -1.0], np.float32))


def test_scatter_bf16_add_rounds_after_every_update():
    # XLA:CPU: 256 + 1 + 1 + ... in bf16 stays 256 (each sum rounds to nearest even).
    x = np.array([256, 0], ml_dtypes.bfloat16)
    idx = np.array([[0]] * 8 + [[1]], np.int32)
    u = np.array([1] * 8 + [3], ml_dtypes.bfloat16)
    text = scatter_text("bf16", (2,), (9, 1), (9,), "add", (), (0,), (0,), 1)
    assert_same(run(text, x, idx, u), np.array([256, 3], ml_dtypes.bfloat16))


def test_scatter_integer_add_wraps():
    # XLA:CPU: s8 120 + 5 + 5 = -126; -120 - 10 - 10 = 116.
    x = np.array([120, -120], np.int8)
    idx = np.array([[0], [0], [1], [1]], np.int32)
    u = np.array([5, 5, -10, -10], np.int8)
    text = scatter_text("s8", (2,), (4, 1), (4,), "add", (), (0,), (0,), 1)
    assert_same(run(text, x, idx, u), np.array([-126, 116], np.int8))


def test_scatter_out_of_bounds_windows_are_skipped_not_clamped():
    # A window of 2 at start 5 of 6 does not fit: the whole update is dropped; negative
    # starts too (jax's mode='drop' relies on this).
    x = np.zeros(6, np.float32)
    idx = np.array([[5], [-1], [4], [0], [7]], np.int32)
    u = np.arange(1, 11, dtype=np.float32).reshape(5, 2)
    got = check(x, idx, u, "add", (1,), (), (0,), 1)
    assert_same(got, np.array([7, 8, 0, 0, 5, 6], np.float32))


def test_scatter_2d_windows_and_permuted_index_map():
    x = np.zeros((4, 5), np.float32)
    idx = np.array([[1, 0], [3, 2], [0, 3], [1, 1]], np.int32)  # (column, row) pairs
    u = np.arange(4 * 2 * 2, dtype=np.float32).reshape(4, 2, 2) + 1
    check(x, idx, u, "add", (1, 2), (), (1, 0), 1)


def test_scatter_index_vector_dim_first_and_updates_with_window_dims_first():
    x = np.zeros((3, 4), np.int32)
    idx = np.array([[0, 2, 1], [1, 0, 3]], np.int32)  # index_vector_dim 0: 3 vectors
    u = np.array([10, 20, 30], np.int32)
    got = check(x, idx, u, "add", (), (0, 1), (0, 1), 0, t="s32")
    assert got[0, 1] == 10 and got[2, 0] == 20 and got[1, 3] == 30
    # Window dims before the scatter dim in the updates: u[w, s].
    x = np.zeros((5, 3), np.float32)
    idx = np.array([[4], [0], [2]], np.int32)
    u = np.arange(9, dtype=np.float32).reshape(3, 3)
    check(x, idx, u, "set", (0,), (0,), (0,), 1)


def test_scatter_batching_dims():
    # put_along_axis style: input_batching_dims={0} with the indices' dimension 0.
    rng = np.random.default_rng(3)
    x = np.zeros((3, 6), np.float32)
    idx = rng.integers(-1, 7, (3, 4, 1)).astype(np.int32)
    u = rng.standard_normal((3, 4)).astype(np.float32)
    check(x, idx, u, "add", (), (1,), (1,), 2, input_batching=(0,), indices_batching=(0,))


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("combiner", ["add", "set", "maximum", "sub"])
def test_scatter_random_configurations(seed, combiner):
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
    scatter_sizes = [int(s) for s in rng.integers(1, 5, n_scatter)]
    ivd = int(rng.integers(0, n_scatter + 1))
    ishape = scatter_sizes[:ivd] + [n_map] + scatter_sizes[ivd:]
    idx = rng.integers(-1, 5, ishape).astype(np.int32)
    urank = n_scatter + len(window_operand_dims)
    update_window_dims = sorted(int(d) for d in rng.permutation(urank)[:len(window_operand_dims)])
    ushape = [0] * urank
    scatter_axes = [d for d in range(urank) if d not in update_window_dims]
    for k, d in enumerate(scatter_axes):
        ushape[d] = scatter_sizes[k]
    for k, d in enumerate(update_window_dims):
        ushape[d] = window_sizes[k]
    u = rng.integers(-9, 9, ushape).astype(np.int32)
    check(x, idx, u, combiner, update_window_dims, inserted, to_operand, ivd, t="s32")


def test_scatter_heavy_duplicates_take_the_fast_paths():
    # 3000 updates into 3 targets: add (np.add.at), max (a pairwise tree), set (last wins),
    # and an unrecognised combiner (1000 rounds) all agree with the sequential definition.
    rng = np.random.default_rng(4)
    x = np.array([1, -2, 3], np.int32)
    idx = rng.integers(0, 3, (3000, 1)).astype(np.int32)
    u = rng.integers(-100, 100, 3000).astype(np.int32)
    for combiner in ("add", "maximum", "minimum", "set", "multiply", "twice_plus"):
        check(x, idx, u, combiner, (), (0,), (0,), 1, t="s32")


def test_scatter_variadic_argmax_combiner():
    # Two operands scattered together; the combiner keeps (value, index) of the larger
    # value, the earlier one on ties: a tuple-valued, non-commutative update computation.
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
  x = f32[3] parameter(0)
  xi = s32[3] parameter(1)
  idx = s32[6,1] parameter(2)
  u = f32[6] parameter(3)
  ui = s32[6] parameter(4)
  ROOT s = (f32[3], s32[3]) scatter(x, xi, idx, u, ui), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=comb
}"""
    x = np.full(3, -np.inf, np.float32)
    xi = np.full(3, -1, np.int32)
    idx = np.array([[0], [1], [0], [0], [1], [2]], np.int32)
    u = np.array([5, 1, 7, 7, 0.5, 2], np.float32)
    ui = np.arange(6, dtype=np.int32)

    def combine(v0, i0, v1, i1):
        return (v1, i1) if v1 > v0 else (v0, i0)

    want = scatter_reference([x, xi], idx, [u, ui], combine, (), (0,), (0,), 1)
    got = run(text, x, xi, idx, u, ui)
    assert_same(got[0], want[0])
    assert_same(got[1], want[1])
    assert_same(got[1], np.array([2, 1, 5], np.int32))


#: A scatter whose update computation reduces a broadcast (not elementwise).
NON_ELEMENTWISE_COMBINER = """HloModule m

sum {
  p = f32[] parameter(0)
  q = f32[] parameter(1)
  ROOT r = f32[] add(p, q)
}

comb {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  bb = f32[3] broadcast(b), dimensions={}
  zero = f32[] constant(0)
  s = f32[] reduce(bb, zero), dimensions={0}, to_apply=sum
  ROOT r = f32[] add(a, s)
}

ENTRY e {
  x = f32[4] parameter(0)
  i = s32[5,1] parameter(1)
  u = f32[5] parameter(2)
  ROOT s = f32[4] scatter(x, i, u), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=comb
}"""


def test_scatter_with_a_combiner_that_is_not_elementwise():
    # The update computation reduces a broadcast: evaluated element by element.
    text = NON_ELEMENTWISE_COMBINER
    x = np.zeros(4, np.float32)
    idx = np.array([[0], [3], [0], [9], [1]], np.int32)
    u = np.array([1, 2, 3, 4, 5], np.float32)
    assert_same(run(text, x, idx, u), np.array([12, 15, 0, 6], np.float32))


def test_scatter_builder():
    b = XlaBuilder("t")
    sub = b.create_sub_builder("add")
    ops.Add(ops.Parameter(sub, 0, parse_shape("f32[]"), "a"),
            ops.Parameter(sub, 1, parse_shape("f32[]"), "b"))
    add = sub.build()
    x = ops.Parameter(b, 0, parse_shape("f32[5]"), "x")
    i = ops.Parameter(b, 1, parse_shape("s32[3,1]"), "i")
    u = ops.Parameter(b, 2, parse_shape("f32[3]"), "u")
    dn = ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
                                 scatter_dims_to_operand_dims=(0,), index_vector_dim=1)
    comp = b.build(ops.Scatter(x, i, u, add, dn))
    got = evaluate(comp, np.ones(5, np.float32), np.array([[4], [4], [0]], np.int32),
                   np.array([1, 2, 3], np.float32))
    assert_same(got, np.array([4, 1, 1, 1, 4], np.float32))


@pytest.mark.parametrize("it", ["u8", "s64", "u64", "s16"])
def test_scatter_index_types(it):
    x = np.zeros(4, np.float32)
    idx = np.array([[3], [1], [3]]).astype(np_dtype(it))
    text = scatter_text("f32", (4,), (3, 1), (3,), "add", (), (0,), (0,), 1, it=it)
    assert_same(run(text, x, idx, np.array([1, 2, 4], np.float32)),
                np.array([0, 2, 0, 5], np.float32))


@pytest.mark.parametrize("t", ALL_TYPES)
def test_scatter_set_every_type(t):
    x = sample(t, (4,))
    u = sample(t, (3,), offset=7)
    idx = np.array([[2], [0], [2]], np.int32)
    text = scatter_text(t, (4,), (3, 1), (3,), "set", (), (0,), (0,), 1)
    want = x.copy()
    want[0], want[2] = u[1], u[2]
    assert_bits(run(text, x, idx, u), want)


@pytest.mark.parametrize("t", ["s8", "u16", "s32", "u64", "f16", "bf16", "f32", "f64", "c64",
                               "f8e4m3fn", "s4"])
def test_scatter_add_numeric_types(t):
    x = sample(t, (3,))
    u = sample(t, (4,), offset=1)
    idx = np.array([[1], [1], [2], [1]], np.int32)
    text = scatter_text(t, (3,), (4, 1), (4,), "add", (), (0,), (0,), 1)
    got = run(text, x, idx, u)
    # Sequential adds in the type (narrow floats round after every add).
    want = x.copy()
    for k, target in enumerate([1, 1, 2, 1]):
        with np.errstate(all="ignore"):
            if np_dtype(t) in (np.dtype(ml_dtypes.bfloat16), np.dtype(ml_dtypes.float8_e4m3fn)):
                want[target] = (want[target].astype(np.float32) + u[k].astype(np.float32)
                                ).astype(np_dtype(t))
            elif t == "s4":
                want[target] = np.array(((int(want[target]) + int(u[k]) + 8) % 16) - 8).astype(
                    np_dtype(t))
            else:
                want[target] = want[target] + u[k]
    assert_same(got, want)

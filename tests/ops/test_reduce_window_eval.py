"""The reduce-window kernel: the semantics page's examples (the 4x6 max pool with 2x3
windows and strides, the 1-D min with VALID and SAME padding), base and window dilation and
strides (values from XLA:CPU), padding positions skipped (init applied once, as XLA:CPU),
negative padding, empty outputs, variadic (value, index) windows, rank 0, long windows
(cumulative sums), and every element type."""

import ml_dtypes
import numpy as np
import pytest
from movement_eval_helpers import ALL_TYPES, assert_same, np_dtype, sample

from xlapy import ops
from xlapy.errors import ParseError
from xlapy.hlo.attrs.window import Padding
from xlapy.interpreter import evaluate
from xlapy.ops.builder import XlaBuilder
from xlapy.parser import parse_hlo_module
from xlapy.shape import PrimitiveType, Shape


def run(text, *args):
    return evaluate(parse_hlo_module(text), *args)


def rw_module(t, shape, window, out_shape, op="add", init="0"):
    return f"""
HloModule m
red {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ROOT r = {t}[] {op}(a, b)
}}
ENTRY e {{
  x = {t}{shape} parameter(0)
  i = {t}[] constant({init})
  ROOT r = {t}{out_shape} reduce-window(x, i), window={{{window}}}, to_apply=red
}}
"""


def naive(x, sizes, strides, pads, lhs_d, rhs_d, f, init):
    """The page's definition, element by element: positions in padding or dilation holes
    are skipped."""
    dilated = [(n - 1) * d + 1 if n else 0 for n, d in zip(x.shape, lhs_d)]
    padded = [lo + n + hi for n, (lo, hi) in zip(dilated, pads)]
    spans = [(s - 1) * d + 1 for s, d in zip(sizes, rhs_d)]
    outs = [0 if p < w else (p - w) // st + 1 for p, w, st in zip(padded, spans, strides)]
    out = np.empty(outs, x.dtype)
    for o in np.ndindex(*outs):
        acc = init
        for w in np.ndindex(*sizes):
            idx = []
            for i in range(x.ndim):
                p = o[i] * strides[i] + w[i] * rhs_d[i] - pads[i][0]
                if p % lhs_d[i] or not 0 <= p // lhs_d[i] < x.shape[i]:
                    break
                idx.append(p // lhs_d[i])
            else:
                acc = f(acc, x[tuple(idx)])
        out[o] = acc
    return out


def window_text(sizes, strides, pads, lhs_d, rhs_d):
    return (f"size={'x'.join(map(str, sizes))} stride={'x'.join(map(str, strides))} "
            f"pad={'x'.join(f'{lo}_{hi}' for lo, hi in pads)} "
            f"lhs_dilate={'x'.join(map(str, lhs_d))} rhs_dilate={'x'.join(map(str, rhs_d))}")


# -- the page's examples ------------------------------------------------------------------------


def test_page_max_pool_2x3():
    # A [4x6] input, window_dimensions and window_stride_dimensions [2x3], kValid, max with
    # init the lowest f32.
    x = np.array([[7, 2, 5, 3, 10, 2],
                  [3, 8, 9, 3, 4, 2],
                  [1, 5, 7, 5, 6, 1],
                  [0, 6, 2, 7, 2, 8]], np.float32)
    text = rw_module("f32", "[4,6]", "size=2x3 stride=2x3", "[2,2]", "maximum",
                     "-3.40282347e+38")
    assert_same(run(text, x), np.array([[9, 10], [7, 8]], np.float32))


def test_page_min_valid_and_same():
    # [10000, 1000, 100, 10, 1], window 3, stride 2, min with init MAX_FLOAT: kValid gives
    # [100, 1]; kSame pads one MAX_VALUE on each side and gives [1000, 10, 1].
    x = np.array([10000, 1000, 100, 10, 1], np.float32)
    valid = rw_module("f32", "[5]", "size=3 stride=2", "[2]", "minimum", "3.40282347e+38")
    assert_same(run(valid, x), np.array([100, 1], np.float32))
    same = rw_module("f32", "[5]", "size=3 stride=2 pad=1_1", "[3]", "minimum",
                     "3.40282347e+38")
    assert_same(run(same, x), np.array([1000, 10, 1], np.float32))


def test_builder_reduce_window_same_padding():
    b = XlaBuilder("min")
    p, q = (ops.Parameter(b, i, Shape.array(PrimitiveType.F32, ()), n) for i, n in enumerate("pq"))
    ops.Min(p, q)
    fmin = b.build()
    mb = XlaBuilder("m")
    x = ops.Parameter(mb, 0, Shape.array(PrimitiveType.F32, (5,)), "x")
    ops.ReduceWindow(x, ops.ConstantR0(mb, np.float32(np.finfo(np.float32).max)), fmin, [3], [2],
                     Padding.SAME)
    got = evaluate(mb.build(), np.array([10000, 1000, 100, 10, 1], np.float32))
    assert_same(got, np.array([1000, 10, 1], np.float32))


# -- dilation, strides, padding -----------------------------------------------------------------


def test_base_and_window_dilation_from_xla():
    # lax.reduce_window(x, 0, add, (3, 3), (1, 2), [(1, 1), (0, 2)], base_dilation=(2, 1),
    # window_dilation=(1, 2)) on arange(1, 36).reshape(5, 7): XLA:CPU via jax 0.10.2.
    x = np.arange(1, 36, dtype=np.float32).reshape(5, 7)
    text = rw_module("f32", "[5,7]", "size=3x3 stride=1x2 pad=1_1x0_2 lhs_dilate=2x1 rhs_dilate=1x2",
                     "[9,3]")
    want = [[9, 15, 12], [39, 51, 38], [30, 36, 26], [81, 93, 66], [51, 57, 40],
            [123, 135, 94], [72, 78, 54], [165, 177, 122], [93, 99, 68]]
    assert_same(run(text, x), np.array(want, np.float32))


@pytest.mark.parametrize("window,out_shape,op,init,want", [
    # base dilation 2, max: holes between elements are skipped (XLA:CPU values via jax)
    ("size=2 lhs_dilate=2", "[12]", "maximum", "-inf", [1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7]),
    # window dilation 2, sum: every other element
    ("size=3 rhs_dilate=2", "[3]", "add", "0", [9, 12, 15]),
    # both, with padding and stride: each window meets exactly one element
    ("size=2 stride=3 pad=2_1 lhs_dilate=3 rhs_dilate=2", "[7]", "add", "0", [1, 2, 3, 4, 5, 6, 7]),
])
def test_dilation_examples_from_xla(window, out_shape, op, init, want):
    x = np.arange(1, 8, dtype=np.float32)
    assert_same(run(rw_module("f32", "[7]", window, out_shape, op, init), x),
                np.array(want, np.float32))


def test_padding_is_skipped_not_combined():
    # Sum windows of 3 with init 100 and two padding elements on each side: init is combined
    # once per window and the padding not at all - XLA:CPU gives the same through jax 0.10.2.
    x = np.arange(1, 6, dtype=np.float32)
    text = rw_module("f32", "[5]", "size=3 pad=2_2", "[7]", init="100")
    assert_same(run(text, x), np.array([101, 103, 106, 109, 112, 109, 105], np.float32))


def test_window_entirely_in_padding_gives_init():
    x = np.array([1, 2], np.float32)
    text = rw_module("f32", "[2]", "size=2 stride=4 pad=0_4", "[2]", init="-7")
    assert_same(run(text, x), np.array([-4, -7], np.float32))


def test_negative_padding_crops():
    x = np.arange(1, 7, dtype=np.int32)
    text = rw_module("s32", "[6]", "size=2 pad=-1_-2", "[2]")
    assert_same(run(text, x), np.array([5, 7], np.int32))


def test_window_larger_than_base_gives_empty():
    x = np.arange(3, dtype=np.float32)
    assert_same(run(rw_module("f32", "[3]", "size=4", "[0]"), x), np.zeros(0, np.float32))


@pytest.mark.parametrize("case", range(6))
def test_random_windows_against_the_definition(case):
    rng = np.random.default_rng(case)
    shape = tuple(int(v) for v in rng.integers(2, 6, 2))  # padding -1_-1 keeps size >= 0
    sizes = [int(v) for v in rng.integers(1, 4, 2)]
    strides = [int(v) for v in rng.integers(1, 3, 2)]
    pads = [(int(a), int(b)) for a, b in rng.integers(-1, 3, (2, 2))]
    lhs_d = [int(v) for v in rng.integers(1, 3, 2)]
    rhs_d = [int(v) for v in rng.integers(1, 3, 2)]
    x = rng.integers(-50, 50, shape).astype(np.int32)
    want = naive(x, sizes, strides, pads, lhs_d, rhs_d, lambda a, b: a * 3 + b, np.int32(1))
    red = f"""
HloModule m
red {{
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  three = s32[] constant(3)
  m = s32[] multiply(a, three)
  ROOT r = s32[] add(m, b)
}}
ENTRY e {{
  x = s32[{shape[0]},{shape[1]}] parameter(0)
  i = s32[] constant(1)
  ROOT r = s32[{want.shape[0]},{want.shape[1]}] reduce-window(x, i), window={{{window_text(sizes, strides, pads, lhs_d, rhs_d)}}}, to_apply=red
}}
"""
    # f(a, b) = 3a + b is neither commutative nor associative: this pins the row-major left
    # fold of each window (XLA's evaluator's order)
    assert_same(run(red, x), want)


def test_cumulative_sum_long_windows():
    # jnp.cumsum on CPU: a window of the whole axis padded on the left (tests/fixtures/jax).
    x = np.arange(1, 301, dtype=np.int32).reshape(3, 100)
    text = rw_module("s32", "[3,100]", "size=1x100 pad=0_0x99_0", "[3,100]")
    assert_same(run(text, x), np.cumsum(x, axis=1).astype(np.int32))


VARIADIC = """
HloModule m
maxidx {
  a = f32[] parameter(0)
  ai = s32[] parameter(1)
  b = f32[] parameter(2)
  bi = s32[] parameter(3)
  ge = pred[] compare(a, b), direction=GE
  v = f32[] select(ge, a, b)
  i = s32[] select(ge, ai, bi)
  ROOT t = (f32[], s32[]) tuple(v, i)
}
ENTRY e {
  x = f32[6] parameter(0)
  k = s32[6] iota(), iota_dimension=0
  iv = f32[] constant(-inf)
  ik = s32[] constant(-1)
  ROOT r = (f32[3], s32[3]) reduce-window(x, k, iv, ik), window={size=3 stride=2 pad=1_0}, to_apply=maxidx
}
"""


def test_variadic_max_and_index():
    x = np.array([4, 1, 4, 9, 2, 2], np.float32)
    v, i = run(VARIADIC, x)
    assert_same(v, np.array([4, 9, 9], np.float32))
    assert_same(i, np.array([0, 3, 3], np.int32))


def test_rank_zero():
    text = rw_module("f32", "[]", "", "[]", init="2")
    assert_same(run(text, np.float32(5)), np.float32(7))


@pytest.mark.parametrize("t", [t for t in ALL_TYPES if t not in ("c64", "c128")])
def test_max_pool_every_type(t):
    x = sample(t, (4, 4))
    dt = np_dtype(t)
    if t == "pred":
        init = "false"
    elif np.issubdtype(dt, np.integer) or t in ("s1", "s2", "s4", "u1", "u2", "u4"):
        init = str(int(ml_dtypes.iinfo(dt).min))
    else:
        init = repr(float(ml_dtypes.finfo(dt).min))
    got = run(rw_module(t, "[4,4]", "size=2x2 stride=2x2", "[2,2]", "maximum", init), x)
    wide = x.astype(np.float64) if t != "pred" else x
    want = wide.reshape(2, 2, 2, 2).max(axis=(1, 3)).astype(dt)
    assert_same(got, want)


@pytest.mark.parametrize("t", ["s8", "u16", "s64", "f16", "bf16", "f32", "f64", "c64", "c128"])
def test_sum_window_every_arithmetic_type(t):
    x = sample(t, (6,))
    zero = "(0, 0)" if t.startswith("c") else "0"
    got = run(rw_module(t, "[6]", "size=3 stride=1", "[4]", "add", zero), x)
    dt = np_dtype(t)
    wide = x.astype(np.complex128 if dt.kind == "c" else np.float64 if t in ("f16", "bf16", "f32", "f64") else np.int64)
    want = np.array([wide[i:i + 3].sum() for i in range(4)]).astype(dt)
    assert_same(got, want)


# -- huge windows, strides, dilations, paddings ----------------------------------------------------


@pytest.mark.parametrize("case", range(12))
@pytest.mark.parametrize("path", ["strided", "tables"])
def test_random_large_windows_against_the_definition(case, path, monkeypatch):
    # windows longer than the operand, padding and dilations larger than it: both ways of
    # reading windows (strided views of a padded copy, index tables) give the definition
    from xlapy.interpreter.kernels import reduction

    if path == "tables":
        monkeypatch.setattr(reduction, "_strided", lambda shape, window: False)
    rng = np.random.default_rng(100 + case)
    shape = tuple(int(v) for v in rng.integers(1, 5, 2))
    sizes = [int(v) for v in rng.integers(1, 9, 2)]
    strides = [int(v) for v in rng.integers(1, 4, 2)]
    pads = [(int(a), int(b)) for a, b in rng.integers(0, 8, (2, 2))]
    lhs_d = [int(v) for v in rng.integers(1, 4, 2)]
    rhs_d = [int(v) for v in rng.integers(1, 4, 2)]
    x = rng.integers(-50, 50, shape).astype(np.int32)
    want = naive(x, sizes, strides, pads, lhs_d, rhs_d, lambda a, b: a * 3 + b, np.int32(1))
    text = f"""
HloModule m
red {{
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  three = s32[] constant(3)
  m = s32[] multiply(a, three)
  ROOT r = s32[] add(m, b)
}}
ENTRY e {{
  x = s32[{shape[0]},{shape[1]}] parameter(0)
  i = s32[] constant(1)
  ROOT r = reduce-window(x, i), window={{{window_text(sizes, strides, pads, lhs_d, rhs_d)}}}, to_apply=red
}}
"""
    assert_same(run(text, x), want)


@pytest.mark.parametrize("window,want", [
    # the issue 12 reproducer: a window longer than the padded base gives no output
    (f"size=1x{2**62}", np.zeros((2, 0), np.float32)),
    (f"size=1x{2**62} pad=0_0x{2**62}_0", [[0, 1, 3, 6], [0, 4, 9, 15]]),
    (f"size=1x{2**61} stride=1x{2**59} pad=0_0x{2**61}_{2**61}",
     [[0, 6, 6, 6, 6], [0, 15, 15, 15, 15]]),
    (f"size=1x1 stride=1x{2**62}", [[1], [4]]),
    (f"size=1x2 rhs_dilate=1x{2**62}", np.zeros((2, 0), np.float32)),
    (f"size=1x2 stride=1x{2**61} lhs_dilate=1x{2**61}", [[1, 2], [4, 5]]),
])
def test_huge_windows_cost_what_their_output_costs(window, want):
    x = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    text = rw_module("f32", "[2,3]", window, "").replace("ROOT r = f32 ", "ROOT r = ")
    assert_same(run(text, x), np.asarray(want, np.float32))


def test_window_sizes_must_fit_int64():
    with pytest.raises(ParseError, match=r"reduce-window: Window .* on dimension 1 of "
                       r"f32\[2,3\]\{1,0\}: the padded base is 9223372036854775811, outside "
                       r"int64 \(XLA computes window sizes in int64\)"):
        parse_hlo_module(rw_module("f32", "[2,3]", f"size=1x{2**62} pad=0_0x{2**62}_{2**62}",
                                   "").replace("ROOT r = f32 ", "ROOT r = "))
    with pytest.raises(ParseError, match="the dilated base is 9223372036854775809, outside "
                                         "int64"):
        parse_hlo_module(rw_module("f32", "[2,3]", f"size=1x2 lhs_dilate=1x{2**62}", "")
                         .replace("ROOT r = f32 ", "ROOT r = "))

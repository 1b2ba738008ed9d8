"""The select-and-scatter kernel: the semantics page's figure (max selection scattering a
2x2 source with add; overlapping windows selecting the same 9 add up to 2 + 6 = 8), ties
(the first element in row-major order wins, as the page's lexicographic select order and XLA's
evaluator say), padding never selected, scatter(current, source) order for repeated
selections, windows without elements, and element types."""

import numpy as np
import pytest
from movement_eval_helpers import assert_same, np_dtype

from xlapy import ops
from xlapy.hlo.attrs.window import Padding
from xlapy.interpreter import evaluate
from xlapy.ops.builder import XlaBuilder
from xlapy.parser import parse_hlo_module
from xlapy.shape import PrimitiveType, Shape


def run(text, *args):
    return evaluate(parse_hlo_module(text), *args)


def sas_module(t, shape, source_shape, window, select="GE", scatter="add"):
    return f"""
HloModule m
sel {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ROOT c = pred[] compare(a, b), direction={select}
}}
sc {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ROOT c = {t}[] {scatter}(a, b)
}}
ENTRY e {{
  x = {t}{shape} parameter(0)
  s = {t}{source_shape} parameter(1)
  i = {t}[] parameter(2)
  ROOT r = {t}{shape} select-and-scatter(x, s, i), window={{{window}}}, select=sel, scatter=sc
}}
"""


def test_page_figure_non_overlapping_windows():
    # (1): 2x3 windows with strides 2x3 over a [4,6] operand; the maximum of each window
    # receives its source value, every other element the init value 0.
    x = np.array([[7, 2, 5, 3, 10, 2],
                  [3, 8, 9, 3, 4, 2],
                  [1, 5, 7, 5, 6, 1],
                  [0, 6, 2, 7, 2, 8]], np.float32)
    source = np.array([[2, 6], [3, 1]], np.float32)
    got = run(sas_module("f32", "[4,6]", "[2,2]", "size=2x3 stride=2x3"), x, source, np.float32(0))
    want = np.zeros((4, 6), np.float32)
    want[1, 2], want[0, 4], want[2, 2], want[3, 5] = 2, 6, 3, 1
    assert_same(got, want)


def test_page_figure_overlapping_windows_add_up():
    # (2): overlapping 3x3 windows with stride 2: the 9 is the maximum of both top windows,
    # so the add scatter gives 2 + 6 = 8 there.
    x = np.array([[7, 2, 5, 3, 8],
                  [3, 8, 9, 3, 4],
                  [1, 5, 7, 5, 6],
                  [0, 6, 2, 10, 2],
                  [1, 1, 1, 1, 1]], np.float32)
    source = np.array([[2, 6], [3, 1]], np.float32)
    got = run(sas_module("f32", "[5,5]", "[2,2]", "size=3x3 stride=2x2"), x, source, np.float32(0))
    want = np.zeros((5, 5), np.float32)
    want[1, 2] = 8  # both top windows
    want[2, 2] = 3  # bottom-left window: max 7
    want[3, 3] = 1  # bottom-right window: max 10
    assert_same(got, want)


def test_builder_valid_padding():
    def comp(name, build):
        b = XlaBuilder(name)
        p, q = (ops.Parameter(b, i, Shape.array(PrimitiveType.F32, ()), n)
                for i, n in enumerate("pq"))
        build(p, q)
        return b.build()

    ge = comp("ge", ops.Ge)
    add = comp("add", ops.Add)
    mb = XlaBuilder("m")
    x = ops.Parameter(mb, 0, Shape.array(PrimitiveType.F32, (2, 4)), "x")
    s = ops.Parameter(mb, 1, Shape.array(PrimitiveType.F32, (1, 2)), "s")
    ops.SelectAndScatter(x, ge, [2, 2], [2, 2], Padding.VALID, s,
                         ops.ConstantR0(mb, np.float32(0)), add)
    got = evaluate(mb.build(), np.array([[1, 5, 2, 0], [3, 4, 9, 1]], np.float32),
                   np.array([[10, 20]], np.float32))
    assert_same(got, np.array([[0, 10, 0, 0], [0, 0, 20, 0]], np.float32))


def test_ties_select_the_first_in_row_major_order():
    # GE keeps the selected element on ties, LE too: the first of equal elements in
    # row-major window order is chosen (the page calls select(a, b) with a's index
    # lexicographically before b's; XLA's evaluator iterates so). XLA:CPU agrees on windows
    # without padding; with padding its loops may visit a window in another order.
    x = np.array([[5, 1, 5], [5, 5, 0]], np.float32)
    ge = sas_module("f32", "[2,3]", "[1,2]", "size=2x2 stride=1x1", "GE")
    got = run(ge, x, np.array([[1, 2]], np.float32), np.float32(0))
    assert_same(got, np.array([[1, 0, 2], [0, 0, 0]], np.float32))
    le = sas_module("f32", "[2,3]", "[1,2]", "size=2x2 stride=1x1", "LE")
    x = np.array([[3, 0, 1], [0, 0, 1]], np.float32)
    got = run(le, x, np.array([[1, 2]], np.float32), np.float32(0))
    assert_same(got, np.array([[0, 3, 0], [0, 0, 0]], np.float32))


def test_padding_is_never_selected():
    # Windows over padding with a max select: the padding positions are not candidates
    # (negative elements still win over the absent padding).
    x = np.array([[-5, -3], [-4, -8]], np.float32)
    text = sas_module("f32", "[2,2]", "[2,2]", "size=2x2 stride=1x1 pad=1_0x0_1")
    got = run(text, x, np.array([[1, 2], [4, 8]], np.float32), np.float32(0.5))
    # windows: (0,0) covers x[0,0..1] -> -3; (0,1) covers x[0,1] -> -3;
    # (1,0) covers everything -> -3; (1,1) covers x[:,1] -> -3
    assert_same(got, np.array([[0.5, 15.5], [0.5, 0.5]], np.float32))


def test_repeated_selection_applies_scatter_in_source_order():
    # scatter(current, source) = current - source: init 100, then the sources of the
    # windows selecting the same element in row-major order: 100 - 1 - 2 - 4.
    x = np.array([0, 9, 0, 0], np.float32)
    text = sas_module("f32", "[4]", "[3]", "size=2 stride=1 pad=0_0", scatter="subtract")
    text = text.replace("size=2 stride=1 pad=0_0", "size=3 stride=1 pad=1_1")
    text = text.replace("f32[3] parameter(1)", "f32[4] parameter(1)")
    got = run(text, x, np.array([1, 2, 4, 8], np.float32), np.float32(100))
    # windows 0, 1, 2 contain x[1] = 9; window 3 covers x[2], x[3] -> x[2] (first of ties)
    assert_same(got, np.array([100, 93, 92, 100], np.float32))


def test_scatter_parameter_order_is_current_then_source():
    # XLA:CPU through jax 0.10.2 agrees: subtract scatter gives init - source.
    x = np.array([1, 7, 3, 2], np.float32)
    text = sas_module("f32", "[4]", "[2]", "size=2 stride=2", scatter="subtract")
    got = run(text, x, np.array([5, 1], np.float32), np.float32(10))
    assert_same(got, np.array([10, 5, 9, 10], np.float32))


def test_window_without_elements_scatters_nothing():
    x = np.array([1, 2], np.float32)
    text = sas_module("f32", "[2]", "[2]", "size=2 stride=3 pad=0_3")
    got = run(text, x, np.array([5, 7], np.float32), np.float32(0))
    assert_same(got, np.array([0, 5], np.float32))


def test_base_dilation_holes_are_not_candidates():
    x = np.array([-1, -2], np.float32)
    text = sas_module("f32", "[2]", "[3]", "size=1 lhs_dilate=2")
    got = run(text, x, np.array([5, 7, 9], np.float32), np.float32(0))
    # windows 0 and 2 hold x[0], x[1]; window 1 is a hole
    assert_same(got, np.array([5, 9], np.float32))


def test_huge_windows_and_padding():
    # a window of 2**62 over three elements padded by 2**62 on the left: windows o = 1..3
    # hold the first o elements (the rest is padding), never iterated
    x = np.array([3, 1, 2], np.float32)
    text = sas_module("f32", "[3]", "[4]", f"size={2**62} pad={2**62}_0")
    got = run(text, x, np.array([10, 20, 30, 40], np.float32), np.float32(0))
    assert_same(got, np.array([90, 0, 0], np.float32))  # max is x[0] in windows 1, 2, 3
    text = sas_module("f32", "[3]", "[1]", f"size=2 stride={2**62}")
    got = run(text, x, np.array([5], np.float32), np.float32(0))
    assert_same(got, np.array([5, 0, 0], np.float32))


@pytest.mark.parametrize("case", range(8))
@pytest.mark.parametrize("path", ["strided", "tables"])
def test_random_windows_both_paths(case, path, monkeypatch):
    """Index tables (huge windows) and strided views (the rest) select and scatter alike."""
    from xlapy.interpreter.kernels import reduction

    rng = np.random.default_rng(200 + case)
    n = int(rng.integers(1, 7))
    size, stride = int(rng.integers(1, 9)), int(rng.integers(1, 4))
    lo, hi = (int(v) for v in rng.integers(0, 6, 2))
    padded = lo + n + hi
    outs = 0 if size > padded else (padded - size) // stride + 1
    x = rng.permutation(n).astype(np.float32)
    source = np.arange(1, outs + 1, dtype=np.float32)
    text = sas_module("f32", f"[{n}]", f"[{outs}]", f"size={size} stride={stride} pad={lo}_{hi}")
    want = np.zeros(n, np.float32)
    for o in range(outs):  # the definition: the max of the window's elements gets source[o]
        inside = [p - lo for p in range(o * stride, o * stride + size) if 0 <= p - lo < n]
        if inside:
            want[max(inside, key=lambda i: (x[i], -i))] += source[o]
    if path == "tables":
        monkeypatch.setattr(reduction, "_strided", lambda shape, window: False)
    assert_same(run(text, x, source, np.float32(0)), want)


@pytest.mark.parametrize("t", ["s8", "s32", "u8", "u32", "s64", "f16", "bf16", "f32", "f64"])
def test_element_types(t):
    dt = np_dtype(t)
    x = np.array([[1, 4, 2, 0], [3, 2, 6, 5]]).astype(dt)
    text = sas_module(t, "[2,4]", "[1,2]", "size=2x2 stride=2x2")
    got = run(text, x, np.array([[7, 9]]).astype(dt), np.array(1).astype(dt))
    assert_same(got, np.array([[1, 8, 1, 1], [1, 1, 10, 1]]).astype(dt))

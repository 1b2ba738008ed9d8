"""Compiled select-and-scatter (xlapy.backends.cpu.gather_scatter) against the interpreter,
bit for bit: the semantics page's figures (non-overlapping and overlapping windows), ties
(the first element in row-major window order), padding never selected, repeated selections
scattered in source order, base and window dilation, random 1-D and 2-D windows, max-pool
gradients of NHWC tensors (split over threads when windows cannot overlap), the issue's
element types, inside a compiled while, and huge windows left to the interpreter."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "ops"))  # the interpreter's op tests
from indexing_kernel_helpers import check, compiled_whiles, steps_of
from movement_eval_helpers import np_dtype, sample
from test_select_and_scatter_eval import sas_module


def _sas(t, x, source, init, window, select="GE", scatter="add", compiled=True):
    text = sas_module(t, f"[{','.join(map(str, x.shape))}]",
                      f"[{','.join(map(str, source.shape))}]", window, select, scatter)
    return check(text, x, source, init, opcode="select-and-scatter", compiled=compiled)


def test_page_figures():
    x = np.array([[7, 2, 5, 3, 10, 2], [3, 8, 9, 3, 4, 2], [1, 5, 7, 5, 6, 1],
                  [0, 6, 2, 7, 2, 8]], np.float32)
    source = np.array([[2, 6], [3, 1]], np.float32)
    got = _sas("f32", x, source, np.float32(0), "size=2x3 stride=2x3")
    assert got[1, 2] == 2 and got[0, 4] == 6 and got[2, 2] == 3 and got[3, 5] == 1
    x = np.array([[7, 2, 5, 3, 8], [3, 8, 9, 3, 4], [1, 5, 7, 5, 6], [0, 6, 2, 10, 2],
                  [1, 1, 1, 1, 1]], np.float32)
    got = _sas("f32", x, source, np.float32(0), "size=3x3 stride=2x2")
    assert got[1, 2] == 8  # selected by both top windows: 2 + 6


def test_ties_padding_and_source_order():
    _sas("f32", np.array([[5, 1, 5], [5, 5, 0]], np.float32), np.array([[1, 2]], np.float32),
         np.float32(0), "size=2x2 stride=1x1", "GE")
    _sas("f32", np.array([[3, 0, 1], [0, 0, 1]], np.float32), np.array([[1, 2]], np.float32),
         np.float32(0), "size=2x2 stride=1x1", "LE")
    _sas("f32", np.array([[-5, -3], [-4, -8]], np.float32),
         np.array([[1, 2], [4, 8]], np.float32), np.float32(0.5),
         "size=2x2 stride=1x1 pad=1_0x0_1")
    got = _sas("f32", np.array([0, 9, 0, 0], np.float32), np.array([1, 2, 4, 8], np.float32),
               np.float32(100), "size=3 stride=1 pad=1_1", scatter="subtract")
    np.testing.assert_array_equal(got, np.array([100, 93, 92, 100], np.float32))
    _sas("f32", np.array([1, 2], np.float32), np.array([5, 7], np.float32), np.float32(0),
         "size=2 stride=3 pad=0_3")


def test_dilations():
    _sas("f32", np.array([-1, -2], np.float32), np.array([5, 7, 9], np.float32),
         np.float32(0), "size=1 lhs_dilate=2")
    rng = np.random.default_rng(1)
    x = rng.permutation(30).astype(np.float32).reshape(5, 6)
    _sas("f32", x, np.arange(1, 1 + 5 * 3, dtype=np.float32).reshape(5, 3), np.float32(0),
         "size=2x3 stride=1x2 pad=1_1x0_1 rhs_dilate=2x1")
    _sas("f32", x, np.arange(1, 1 + 8 * 6, dtype=np.float32).reshape(8, 6), np.float32(0),
         "size=2x3 stride=1x2 pad=0_0x1_1 lhs_dilate=2x2")


@pytest.mark.parametrize("case", range(12))
def test_random_windows(case):
    rng = np.random.default_rng(300 + case)
    shape, window, out = [], [], []
    for _ in range(int(rng.integers(1, 3))):
        n = int(rng.integers(1, 7))
        size, stride = int(rng.integers(1, 5)), int(rng.integers(1, 4))
        lo, hi = (int(v) for v in rng.integers(0, 3, 2))
        padded = lo + n + hi
        shape.append(n)
        out.append(0 if size > padded else (padded - size) // stride + 1)
        window.append((size, stride, lo, hi))
    x = rng.integers(0, 4, shape).astype(np.float32)  # many ties
    source = rng.integers(1, 9, out).astype(np.float32)
    text = (f"size={'x'.join(str(w[0]) for w in window)} "
            f"stride={'x'.join(str(w[1]) for w in window)} "
            f"pad={'x'.join(f'{w[2]}_{w[3]}' for w in window)}")
    _sas("f32", x, source, np.float32(0), text, select=["GE", "GT", "LE"][case % 3])


@pytest.mark.parametrize("t", ["f32", "f64", "bf16", "s32", "u32", "f16", "s8"])
def test_element_types(t):
    x = sample(t, (6, 8))
    source = sample(t, (3, 4), offset=3)
    _sas(t, x, source, np.array(1).astype(np_dtype(t)), "size=2x2 stride=2x2")
    _sas(t, x, sample(t, (6, 8), offset=1), np.array(0).astype(np_dtype(t)),
         "size=3x3 stride=1x1 pad=1_1x1_1")


def test_pred_or_scatter():
    x = sample("pred", (4, 6))
    text = sas_module("pred", "[4,6]", "[2,3]", "size=2x2 stride=2x2", "GE", "or")
    check(text, x, sample("pred", (2, 3), 1), np.array(False), opcode="select-and-scatter")


def test_max_pool_gradient_nhwc_split_over_threads():
    # jax's max-pool gradient: windows 1x2x2x1, strides 1x2x2x1 (disjoint: parallel) and
    # 1x3x3x1 stride 2 with padding (overlapping: in source order).
    rng = np.random.default_rng(2)
    x = rng.standard_normal((8, 32, 30, 16)).astype(np.float32)
    x[:, :4] = 0  # relu zeros: ties
    text = sas_module("f32", "[8,32,30,16]", "[8,16,15,16]", "size=1x2x2x1 stride=1x2x2x1")
    (step,) = steps_of(text, "select-and-scatter")
    assert step.spec.then.parallel
    check(text, x, rng.standard_normal((8, 16, 15, 16)).astype(np.float32), np.float32(0),
          opcode="select-and-scatter")
    text = sas_module("f32", "[8,32,30,16]", "[8,16,15,16]",
                      "size=1x3x3x1 stride=1x2x2x1 pad=0_0x1_1x1_1x0_0")
    (step,) = steps_of(text, "select-and-scatter")
    assert not step.spec.then.parallel
    check(text, x, rng.standard_normal((8, 16, 15, 16)).astype(np.float32), np.float32(0),
          opcode="select-and-scatter")


def test_huge_windows_stay_interpreted():
    text = sas_module("f32", "[3]", "[4]", f"size={2**62} pad={2**62}_0")
    got = check(text, np.array([3, 1, 2], np.float32), np.array([10, 20, 30, 40], np.float32),
                np.float32(0), opcode="select-and-scatter", compiled=False)
    np.testing.assert_array_equal(got, np.array([90, 0, 0], np.float32))


LOOP = """HloModule m

sel {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=GE
}

sc {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}

cond {
  s = (s32[], f32[6,8], f32[3,4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(4)
  ROOT lt = pred[] compare(i, n), direction=LT
}

body {
  s = (s32[], f32[6,8], f32[3,4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[6,8] get-tuple-element(s), index=1
  src = f32[3,4] get-tuple-element(s), index=2
  zero = f32[] constant(0)
  g = f32[6,8] select-and-scatter(x, src, zero), window={size=2x2 stride=2x2}, select=sel, scatter=sc
  x2 = f32[6,8] subtract(x, g)
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  ROOT t = (s32[], f32[6,8], f32[3,4]) tuple(i2, x2, src)
}

ENTRY e {
  x = f32[6,8] parameter(0)
  src = f32[3,4] parameter(1)
  zero = s32[] constant(0)
  init = (s32[], f32[6,8], f32[3,4]) tuple(zero, x, src)
  w = (s32[], f32[6,8], f32[3,4]) while(init), condition=cond, body=body
  ROOT r = f32[6,8] get-tuple-element(w), index=1
}
"""


def test_inside_a_compiled_while():
    rng = np.random.default_rng(3)
    assert len(compiled_whiles(LOOP)) == 1
    check(LOOP, rng.standard_normal((6, 8)).astype(np.float32),
          rng.standard_normal((3, 4)).astype(np.float32), opcode="select-and-scatter")


def test_non_default_layouts():
    text = sas_module("f32", "[6,8]", "[3,4]", "size=2x2 stride=2x2")
    text = text.replace("f32[6,8] parameter(0)", "f32[6,8]{0,1} parameter(0)")
    text = text.replace("ROOT r = f32[6,8] select", "ROOT r = f32[6,8]{0,1} select")
    check(text, sample("f32", (6, 8)), sample("f32", (3, 4), offset=3), np.float32(0),
          opcode="select-and-scatter")

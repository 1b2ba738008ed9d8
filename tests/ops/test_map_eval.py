"""The map kernel: the page's Map(op1, op2, op3, computation) - the computation applied at
every index of the operands - with results of another element type, rank 0 and size-0
operands, a computation returning a constant, computations that are not elementwise (run
element by element), and element types."""

import numpy as np
import pytest
from movement_eval_helpers import assert_same, np_dtype, sample

from xlapy import ops
from xlapy.interpreter import evaluate
from xlapy.ops.builder import XlaBuilder
from xlapy.parser import parse_hlo_module
from xlapy.shape import PrimitiveType, Shape


def run(text, *args):
    return evaluate(parse_hlo_module(text), *args)


THREE = """
HloModule m
f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = f32[] parameter(2)
  ab = f32[] multiply(a, b)
  ROOT r = f32[] add(ab, c)
}
ENTRY e {
  x = f32[2,3] parameter(0)
  y = f32[2,3] parameter(1)
  z = f32[2,3] parameter(2)
  ROOT m = f32[2,3] map(x, y, z), dimensions={0,1}, to_apply=f
}
"""


def test_page_three_operands():
    # elem_out <- computation(elem1, elem2, elem3) at every index
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = np.full((2, 3), 2, np.float32)
    z = np.array([[1, -1, 0.5], [0, 0, 3]], np.float32)
    assert_same(run(THREE, x, y, z), x * y + z)


def test_builder_map():
    b = XlaBuilder("sq")
    p = ops.Parameter(b, 0, Shape.array(PrimitiveType.S32, ()), "p")
    ops.Mul(p, p)
    sq = b.build()
    mb = XlaBuilder("m")
    x = ops.Parameter(mb, 0, Shape.array(PrimitiveType.S32, (4,)), "x")
    ops.Map(mb, [x], sq, [0])
    assert_same(evaluate(mb.build(), np.array([1, -2, 3, 46341], np.int32)),
                np.array([1, 4, 9, -2147479015], np.int32))  # 46341^2 wraps


def test_result_of_another_type():
    text = """
HloModule m
gt {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = pred[] compare(a, b), direction=GT
}
ENTRY e {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  ROOT m = pred[4] map(x, y), dimensions={0}, to_apply=gt
}
"""
    x = np.array([1, 2, np.nan, 4], np.float32)
    y = np.array([0, 2, 1, 5], np.float32)
    assert_same(run(text, x, y), np.array([True, False, False, False]))


def test_constant_computation_broadcasts():
    text = """
HloModule m
seven {
  a = s32[] parameter(0)
  ROOT c = s32[] constant(7)
}
ENTRY e {
  x = s32[2,2] parameter(0)
  ROOT m = s32[2,2] map(x), dimensions={0,1}, to_apply=seven
}
"""
    assert_same(run(text, np.zeros((2, 2), np.int32)), np.full((2, 2), 7, np.int32))


def test_rank_zero_and_empty():
    text = THREE.replace("[2,3]", "[]").replace("dimensions={0,1}", "dimensions={}")
    assert_same(run(text, np.float32(2), np.float32(3), np.float32(1)), np.float32(7))
    text = THREE.replace("[2,3]", "[0,3]")
    z = np.zeros((0, 3), np.float32)
    assert_same(run(text, z, z, z), z)


def test_computation_that_is_not_elementwise():
    # The computation reduces a broadcast of its parameter (sum of 3 copies): evaluated
    # element by element.
    text = """
HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}
triple {
  p = f32[] parameter(0)
  b = f32[3] broadcast(p), dimensions={}
  z = f32[] constant(0)
  ROOT r = f32[] reduce(b, z), dimensions={0}, to_apply=add
}
ENTRY e {
  x = f32[2,2] parameter(0)
  ROOT m = f32[2,2] map(x), dimensions={0,1}, to_apply=triple
}
"""
    x = np.array([[1, 2], [-0.5, 4]], np.float32)
    assert_same(run(text, x), 3 * x)


def test_computation_calling_another():
    text = """
HloModule m
neg {
  a = f32[] parameter(0)
  ROOT r = f32[] negate(a)
}
f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  n = f32[] call(b), to_apply=neg
  ROOT r = f32[] maximum(a, n)
}
ENTRY e {
  x = f32[3] parameter(0)
  y = f32[3] parameter(1)
  ROOT m = f32[3] map(x, y), dimensions={0}, to_apply=f
}
"""
    x = np.array([1, -5, 0], np.float32)
    y = np.array([2, 3, np.nan], np.float32)
    assert_same(run(text, x, y), np.array([1, -3, np.nan], np.float32))


@pytest.mark.parametrize("t", ["pred", "s4", "s8", "u16", "s32", "u64", "f16", "bf16", "f32",
                               "f64", "f8e4m3fn", "c64", "c128"])
def test_identity_every_type(t):
    text = f"""
HloModule m
ident {{
  a = {t}[] parameter(0)
  ROOT r = {t}[] copy(a)
}}
ENTRY e {{
  x = {t}[2,3] parameter(0)
  ROOT m = {t}[2,3] map(x), dimensions={{0,1}}, to_apply=ident
}}
"""
    x = sample(t, (2, 3))
    got = run(text, x)
    assert got.dtype == np_dtype(t)
    assert_same(got, x)

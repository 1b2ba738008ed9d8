"""The triangular-solve kernel: op(a) x = b (left_side) or x op(a) = b with op(a) = a, a^T or
a^H (transpose_a NO_TRANSPOSE / TRANSPOSE / ADJOINT), lower or upper, unit_diagonal; only
a's chosen triangle is read (and not its diagonal with unit_diagonal), leading batch
dimensions, complex, zero pivots, and float types. Every option combination was compared
with stablehlo.triangular_solve on XLA:CPU through jax 0.10.2 (agreement to 1e-4 on random
well-conditioned systems); here the reference is numpy's general solver on the explicit
op(a)."""

import itertools

import numpy as np
import pytest
from movement_eval_helpers import assert_same

from xlapy import ops
from xlapy.interpreter import evaluate
from xlapy.ops.builder import XlaBuilder
from xlapy.parser import parse_hlo_module
from xlapy.shape import PrimitiveType, Shape


def run(text, *args):
    return evaluate(parse_hlo_module(text), *args)


def dims(shape):
    return "[" + ",".join(map(str, shape)) + "]"


def ts(t, a_shape, b_shape, left, lower, unit, transpose):
    flag = lambda v: "true" if v else "false"
    return f"""
HloModule m
ENTRY e {{
  a = {t}{dims(a_shape)} parameter(0)
  b = {t}{dims(b_shape)} parameter(1)
  ROOT x = {t}{dims(b_shape)} triangular-solve(a, b), left_side={flag(left)}, lower={flag(lower)}, unit_diagonal={flag(unit)}, transpose_a={transpose}
}}
"""


def op_a(a, lower, unit, transpose):
    m = np.tril(a) if lower else np.triu(a)
    if unit:
        n = a.shape[-1]
        m = m.copy()
        m[..., np.arange(n), np.arange(n)] = 1
    if transpose == "TRANSPOSE":
        m = np.swapaxes(m, -1, -2)
    elif transpose == "ADJOINT":
        m = np.conj(np.swapaxes(m, -1, -2))
    return m


def reference(a, b, left, lower, unit, transpose):
    m = op_a(a.astype(np.complex128), lower, unit, transpose)
    b = b.astype(np.complex128)
    if left:
        return np.linalg.solve(m, b)
    return np.swapaxes(np.linalg.solve(np.swapaxes(m, -1, -2), np.swapaxes(b, -1, -2)), -1, -2)


COMBOS = list(itertools.product([True, False], [True, False], [True, False],
                                ["NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"]))


@pytest.mark.parametrize("left,lower,unit,transpose", COMBOS)
@pytest.mark.parametrize("complex_", [False, True])
def test_every_option(left, lower, unit, transpose, complex_):
    rng = np.random.default_rng(len(transpose) + 2 * left + 4 * lower + 8 * unit)
    n, k = 4, 3
    a = rng.standard_normal((2, n, n)) + 4 * np.eye(n)
    b = rng.standard_normal((2, n, k) if left else (2, k, n))
    if complex_:
        a = a + 1j * rng.standard_normal(a.shape)
        b = b + 1j * rng.standard_normal(b.shape)
    t = "c128" if complex_ else "f64"
    got = run(ts(t, a.shape, b.shape, left, lower, unit, transpose), a, b)
    want = reference(a, b, left, lower, unit, transpose)
    if not complex_:
        want = want.real
    assert got.dtype == (np.complex128 if complex_ else np.float64)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


def test_only_the_triangle_and_not_a_unit_diagonal_is_read():
    a = np.array([[2, 99], [3, 4]], np.float32)  # 99 is in the ignored upper triangle
    b = np.array([[4], [10]], np.float32)
    got = run(ts("f32", (2, 2), (2, 1), True, True, False, "NO_TRANSPOSE"), a, b)
    assert_same(got, np.array([[2], [1]], np.float32))  # 2x = 4; 3*2 + 4y = 10
    a = np.array([[7, 0], [3, -5]], np.float32)  # diagonal ignored with unit_diagonal
    got = run(ts("f32", (2, 2), (2, 1), True, True, True, "NO_TRANSPOSE"), a, b)
    assert_same(got, np.array([[4], [-2]], np.float32))


def test_right_side_upper_transpose_by_hand():
    # x op(a) = b with op(a) = a^T, a upper [[2, 1], [0, 4]] -> op(a) = [[2, 0], [1, 4]]
    a = np.array([[2, 1], [-9, 4]], np.float64)
    b = np.array([[5, 8]], np.float64)
    got = run(ts("f64", (2, 2), (1, 2), False, False, False, "TRANSPOSE"), a, b)
    # [x0, x1] [[2, 0], [1, 4]] = [2 x0 + x1, 4 x1] = [5, 8] -> x1 = 2, x0 = 1.5
    assert_same(got, np.array([[1.5, 2]], np.float64))


def test_builder():
    b = XlaBuilder("m")
    a = ops.Parameter(b, 0, Shape.array(PrimitiveType.F32, (2, 2)), "a")
    rhs = ops.Parameter(b, 1, Shape.array(PrimitiveType.F32, (2, 1)), "b")
    ops.TriangularSolve(a, rhs, True, True, False, "NO_TRANSPOSE")
    got = evaluate(b.build(), np.array([[2, 99], [3, 4]], np.float32),
                   np.array([[4], [10]], np.float32))
    assert_same(got, np.array([[2], [1]], np.float32))


def test_zero_pivot_divides_by_zero():
    a = np.array([[0, 0], [1, 1]], np.float32)
    b = np.array([[1], [1]], np.float32)
    got = run(ts("f32", (2, 2), (2, 1), True, True, False, "NO_TRANSPOSE"), a, b)
    assert np.isinf(got[0, 0]) and np.isinf(got[1, 0])


@pytest.mark.parametrize("t,dt,rtol", [("f16", np.float16, 2e-3), ("bf16", None, 1e-2),
                                       ("f32", np.float32, 1e-6), ("c64", np.complex64, 1e-6)])
def test_float_types(t, dt, rtol):
    import ml_dtypes
    dt = dt or ml_dtypes.bfloat16
    a = np.array([[2, 0, 0], [1, 4, 0], [-1, 0.5, 1]]).astype(dt)
    b = np.array([[1, 2], [3, 4], [5, 6]]).astype(dt)
    got = run(ts(t, (3, 3), (3, 2), True, True, False, "NO_TRANSPOSE"), a, b)
    assert got.dtype == np.dtype(dt)
    want = np.linalg.solve(a.astype(np.complex128), b.astype(np.complex128))
    np.testing.assert_allclose(got.astype(np.complex128), want, rtol=rtol, atol=rtol)


def test_empty_right_hand_side():
    a = np.eye(3, dtype=np.float32)
    b = np.zeros((3, 0), np.float32)
    got = run(ts("f32", (3, 3), (3, 0), True, True, False, "NO_TRANSPOSE"), a, b)
    assert_same(got, b)

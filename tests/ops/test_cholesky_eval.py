"""The cholesky kernel: a = l l^H (lower) or a = u^H u (upper) reading only that triangle,
zeros in the other triangle (XLA:CPU's choice for the page's "implementation-defined"
values), batches, complex (Hermitian) matrices - XLA:CPU keeps the imaginary part of a
diagonal element divided by its root - and matrices that are not positive definite (XLA:CPU
returns the whole matrix as NaN, per batch element). Values marked XLA come from
stablehlo.cholesky on XLA:CPU through jax 0.10.2."""

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


def chol(t, shape, lower):
    d = "[" + ",".join(map(str, shape)) + "]"
    return f"""
HloModule m
ENTRY e {{
  a = {t}{d} parameter(0)
  ROOT c = {t}{d} cholesky(a), lower={"true" if lower else "false"}
}}
"""


A = np.array([[4, 12, -16], [12, 37, -43], [-16, -43, 98]], np.float32)
L = np.array([[2, 0, 0], [6, 1, 0], [-8, 5, 3]], np.float32)


def test_lower_and_upper():
    assert_same(run(chol("f32", (3, 3), True), A), L)
    assert_same(run(chol("f32", (3, 3), False), A), L.T.copy())


def test_builder():
    b = XlaBuilder("m")
    a = ops.Parameter(b, 0, Shape.array(PrimitiveType.F64, (3, 3)), "a")
    ops.Cholesky(a, True)
    assert_same(evaluate(b.build(), A.astype(np.float64)), L.astype(np.float64))


def test_only_one_triangle_is_read():
    junk = A.copy()
    junk[0, 2] = 1000  # upper triangle: ignored by lower=true
    junk[2, 0] = -7    # lower triangle: ignored by lower=false
    assert_same(run(chol("f32", (3, 3), True), np.tril(A) + np.triu(junk, 1)), L)
    assert_same(run(chol("f32", (3, 3), False), np.triu(A) + np.tril(junk, -1)), L.T.copy())


def test_random_spd_batches():
    rng = np.random.default_rng(0)
    m = rng.standard_normal((2, 3, 5, 5))
    a = m @ m.transpose(0, 1, 3, 2) + 5 * np.eye(5)
    got = run(chol("f64", a.shape, True), a)
    np.testing.assert_allclose(got, np.linalg.cholesky(a), rtol=1e-12, atol=1e-12)
    assert np.all(np.triu(got, 1) == 0)


def test_not_positive_definite_gives_a_nan_matrix_per_batch_element():
    # XLA: [[4, 2], [2, 5]] factors to [[2, 0], [1, 2]]; [[1, 2], [2, 1]] is indefinite and
    # comes back all NaN
    b = np.array([[[4, 2], [2, 5]], [[1, 2], [2, 1]]], np.float32)
    got = run(chol("f32", (2, 2, 2), True), b)
    assert_same(got[0], np.array([[2, 0], [1, 2]], np.float32))
    assert np.isnan(got[1]).all()


def test_failure_in_the_last_column_poisons_the_whole_matrix():
    # XLA: a negative pivot in the last column still gives an all-NaN 3x3 matrix
    c = np.array([[4, 2, 0], [2, 5, 0], [0, 0, -1]], np.float32)
    assert np.isnan(run(chol("f32", (3, 3), True), c)).all()
    d = np.array([[4, 99], [2, 5]], np.float32)  # upper reads the 99: indefinite
    assert_same(run(chol("f32", (2, 2), True), d), np.array([[2, 0], [1, 2]], np.float32))
    assert np.isnan(run(chol("f32", (2, 2), False), d)).all()


def test_complex_hermitian():
    rng = np.random.default_rng(1)
    m = rng.standard_normal((4, 4)) + 1j * rng.standard_normal((4, 4))
    a = m @ m.conj().T + 4 * np.eye(4)
    lower = run(chol("c128", (4, 4), True), a)
    np.testing.assert_allclose(lower, np.linalg.cholesky(a), rtol=1e-12, atol=1e-12)
    upper = run(chol("c128", (4, 4), False), a)
    np.testing.assert_allclose(upper, np.linalg.cholesky(a).conj().T, rtol=1e-12, atol=1e-12)


def test_complex_diagonal_imaginary_part_from_xla():
    # XLA: [[4+2j, .], [1+1j, 3]] -> [[2+1j, 0], [0.5+0.5j, 1.5811388]]: each column is
    # divided by the root of the real part of its pivot, so 4+2j becomes 2+1j
    a = np.array([[4 + 2j, 7 - 9j], [1 + 1j, 3]], np.complex64)
    got = run(chol("c64", (2, 2), True), a)
    want = np.array([[2 + 1j, 0], [0.5 + 0.5j, 1.5811388492584229]], np.complex64)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    got = run(chol("c64", (2, 2), False), a.conj().T.copy())
    np.testing.assert_allclose(got, np.array([[2 - 1j, 0.5 - 0.5j], [0, 1.5811388492584229]],
                                             np.complex64), rtol=1e-6)


@pytest.mark.parametrize("t,dt", [("f16", np.float16), ("f32", np.float32), ("f64", np.float64),
                                  ("c64", np.complex64)])
def test_float_types(t, dt):
    got = run(chol(t, (3, 3), True), A.astype(dt))
    assert got.dtype == dt
    assert_same(got, L.astype(dt))


def test_size_zero_and_one():
    assert_same(run(chol("f32", (2, 0, 0), True), np.zeros((2, 0, 0), np.float32)),
                np.zeros((2, 0, 0), np.float32))
    assert_same(run(chol("f32", (1, 1), True), np.array([[9]], np.float32)),
                np.array([[3]], np.float32))

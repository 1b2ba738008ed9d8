"""Interpreter kernels on complex numbers (c64, c128): arithmetic with XLA:CPU's special cases
(z / 0 gives infinite parts, not NaN), the functions XLA:CPU computes with its own formulas
(exp, log, sqrt, rsqrt, tanh, tan, sin, cos, expm1, log1p, sign, pow, atan2), complex(),
real/imag/abs, and EQ/NE compare. Expected values: NumPy's C99 functions for ordinary
arguments, and literals that came from XLA:CPU via jax 0.10.2 (said so below)."""

import numpy as np
import pytest
from elementwise_eval_helpers import assert_same, run

from xlapy.interpreter import EvaluationError

NAN, INF = float("nan"), float("inf")
COMPLEX = [np.complex64, np.complex128]


def cplx(pairs, dtype=np.complex64):
    out = np.empty(len(pairs), dtype)
    out.real = [p[0] for p in pairs]
    out.imag = [p[1] for p in pairs]
    return out


def assert_near(got, want, rel):
    """Each component within ``rel`` of |want| (NaN and infinities exactly)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    for part in ("real", "imag"):
        g, w = getattr(got, part).astype(np.float64), getattr(want, part).astype(np.float64)
        finite = np.isfinite(w)
        assert_same(getattr(got, part)[~finite].copy(), getattr(want, part)[~finite].copy())
        scale = np.abs(want[finite]).astype(np.float64)
        assert (np.abs(g[finite] - w[finite]) <= rel * np.maximum(scale, 1e-30)).all(), \
            f"{part}: got {got}, want {want}"


ARGS = [(1, 1), (3e30, 4e30), (-4, 0), (2, 0), (1e-5, 1), (-0.5, -2.5), (0.3, 0.7), (-3, 0.25)]


def test_complex_arithmetic_as_xla():
    # From XLA:CPU via jax 0.10.2: division by zero gives (inf, inf) (inf * each part).
    a = cplx([(1, 1), (3e30, 4e30), (0, 0), (-4, 0), (2, 0), (1e-5, 1)])
    b = cplx([(0, 0), (1, 1), (0, 0), (1, 0), (0, 0), (0, 1)])
    assert_near(run("divide", [a, b]), cplx([
        (INF, INF), (3.4999998259925406e+30, 5.0000008308159684e+29), (NAN, NAN), (-4, 0),
        (INF, NAN), (1, -9.999999747378752e-06)]), 1e-6)
    assert_near(run("power", [a, b]), cplx([
        (1, 0), (-1.5838540641763553e+30, 1.1850450767632804e+30), (1, 0),
        (-4, -3.4969110629390343e-07), (1, 0), (0.2078816443681717, 0)]), 1e-6)


def test_complex_functions_as_xla():
    # From XLA:CPU via jax 0.10.2.
    c = cplx([(1, 1), (3e30, 4e30), (0, 0), (-4, 0), (2, 0), (1e-5, 1)])
    assert_same(run("abs", [c], np.float32), np.float32(
        [1.4142135381698608, 4.9999999241216036e+30, 0, 4, 2, 1]))
    expected = {
        "log": [(0.3465735912322998, 0.7853981852531433), (70.6869888305664, 0.9272952079772949),
                (-INF, 0), (1.3862943649291992, 3.1415927410125732), (0.6931471824645996, 0),
                (4.9999997198124646e-11, 1.5707863569259644)],
        "sqrt": [(1.0986840724945068, 0.45508986711502075), (1999999973982208.0, 1000000054099968.0),
                 (0, 0), (0, 2), (1.4142135381698608, 0), (0.7071103453636169, 0.7071031928062439)],
        "exponential": [(1.4686938524246216, 2.2873551845550537), (-INF, -INF), (1, 0),
                        (0.018315639346837997, 0), (7.389056205749512, 0),
                        (0.5403077006340027, 0.8414793610572815)],
        "tanh": [(1.08392333984375, 0.27175256609916687), (1, 0), (0, 0), (-0.9993293881416321, 0),
                 (0.9640276432037354, 0), (3.4255190257681534e-05, 1.5574077367782593)],
        "sign": [(0.7071067690849304, 0.7071067690849304), (0.5999999642372131, 0.800000011920929),
                 (0, 0), (-1, 0), (1, 0), (9.999999747378752e-06, 1)],
        "rsqrt": [(0.7768869996070862, -0.3217971622943878), (4.000000067449534e-16, -2.000000033724767e-16),
                  (INF, NAN), (-2.1855694143368964e-08, -0.5), (0.7071067690849304, -0.0),
                  (0.7071102857589722, -0.7071032524108887)],
    }
    for opcode, want in expected.items():
        assert_near(run(opcode, [c]), cplx(want), 1e-6)


@pytest.mark.parametrize("dtype", COMPLEX, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("opcode,fn", [
    ("exponential", np.exp), ("log", np.log), ("sqrt", np.sqrt), ("tanh", np.tanh),
    ("tan", np.tan), ("sine", np.sin), ("cosine", np.cos), ("exponential-minus-one", np.expm1),
    ("log-plus-one", np.log1p), ("rsqrt", lambda z: 1 / np.sqrt(z)),
    ("logistic", lambda z: 1 / (1 + np.exp(-z))), ("asin", np.arcsin), ("acos", np.arccos),
    ("asinh", np.arcsinh), ("acosh", np.arccosh), ("atanh", np.arctanh), ("sinh", np.sinh),
    ("cosh", np.cosh), ("negate", np.negative), ("sign", lambda z: z / np.abs(z)),
])
def test_complex_functions_of_ordinary_arguments(opcode, fn, dtype):
    z = cplx([p for p in ARGS if abs(p[0]) < 1e3], dtype)
    want = fn(z.astype(np.complex128)).astype(dtype)
    rel = 2e-6 if dtype == np.complex64 else 1e-13
    assert_near(run(opcode, [z]), want, rel)


@pytest.mark.parametrize("dtype", COMPLEX, ids=lambda t: np.dtype(t).name)
def test_complex_binary_ops(dtype):
    a = cplx([(1, 2), (-0.5, 3), (4, -1), (0.25, 0.25)], dtype)
    b = cplx([(3, -1), (2, 0.5), (-1, -1), (0.5, 2)], dtype)
    wide_a, wide_b = a.astype(np.complex128), b.astype(np.complex128)
    rel = 2e-6 if dtype == np.complex64 else 1e-13
    for opcode, fn in [("add", np.add), ("subtract", np.subtract), ("multiply", np.multiply),
                       ("divide", np.divide), ("power", np.power)]:
        assert_near(run(opcode, [a, b]), fn(wide_a, wide_b).astype(dtype), rel)
    # atan2(y, x) = -i log((x + iy) / sqrt(x^2 + y^2)); real arguments give the real atan2.
    y, x = cplx([(1, 0), (-2, 0)], dtype), cplx([(1, 0), (-3, 0)], dtype)
    got = run("atan2", [y, x])
    assert_near(got, cplx([(np.arctan2(1, 1), 0), (np.arctan2(-2, -3), 0)], dtype), 1e-6)


def test_complex_special_cases():
    # exp(x + 0i) has a +0 imaginary part; log(0) = -inf + 0i; sqrt of a negative real is
    # purely imaginary; x^0 = 1 and 0^0 = 1; 1^w = 1 (XLA's cut-offs).
    z = cplx([(INF, 0), (-INF, 0), (0, 0), (-9, 0)])
    got = run("exponential", [z])
    assert_same(got, cplx([(INF, 0), (0, 0), (1, 0), (np.exp(np.float32(-9)), 0)]))
    assert_same(run("log", [cplx([(0, 0)])]), cplx([(-INF, 0)]))
    assert_same(run("sqrt", [cplx([(-4, 0), (0, 0), (-INF, 1)])]), cplx([(0, 2), (0, 0), (0, INF)]))
    base = cplx([(0, 0), (5, 3), (1, 0), (0, 0)])
    exponent = cplx([(0, 0), (0, 0), (NAN, 7), (2, 0)])
    assert_same(run("power", [base, exponent]), cplx([(1, 0), (1, 0), (1, 0), (0, 0)]))
    assert_same(run("tanh", [cplx([(INF, 1), (-INF, 1), (INF, 2)])]), cplx([(1, 0), (-1, 0), (1, -0.0)]))


def test_complex_abs_does_not_overflow_and_propagates_nan():
    z = cplx([(3e30, 4e30), (INF, NAN), (NAN, 0), (INF, -INF), (0, -0.0)])
    assert_same(run("abs", [z], np.float32), np.float32([5e30, NAN, NAN, INF, 0]))


@pytest.mark.parametrize("dtype", COMPLEX, ids=lambda t: np.dtype(t).name)
def test_complex_compose_and_parts(dtype):
    part = np.float32 if dtype == np.complex64 else np.float64
    re = np.array([1.5, INF, NAN, -0.0], part)
    im = np.array([INF, 0.0, 2.0, -1.0], part)
    z = run("complex", [re, im], dtype)
    # inf * 0 must not appear: the parts are stored, not computed as re + 1j * im.
    assert_same(z.real.copy(), re)
    assert_same(z.imag.copy(), im)
    assert_same(run("real", [z], part), re)
    assert_same(run("imag", [z], part), im)


def test_complex_compare_eq_ne():
    a = cplx([(1, 2), (1, 2), (NAN, 0), (0, 0)])
    b = cplx([(1, 2), (1, 3), (NAN, 0), (-0.0, 0)])
    assert_same(run("compare", [a, b], np.bool_, ", direction=EQ"), np.array([1, 0, 0, 1], bool))
    assert_same(run("compare", [a, b], np.bool_, ", direction=NE"), np.array([0, 1, 1, 0], bool))
    with pytest.raises(EvaluationError, match="EQ and NE"):
        run("compare", [a, b], np.bool_, ", direction=GT")

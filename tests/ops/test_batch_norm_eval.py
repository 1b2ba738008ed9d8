"""The batch-norm-training, batch-norm-inference and batch-norm-grad kernels: the page's
formulas (mean and population variance over every dimension but feature_index; normalise,
scale and shift; the three gradients), the result tuples (output, batch_mean, batch_var) and
(grad_operand, grad_scale, grad_offset), epsilon kept as a 32-bit float, values from XLA:CPU
(which runs these ops through jax 0.10.2), feature_index anywhere, and float types."""

import ml_dtypes
import numpy as np
import pytest
from movement_eval_helpers import np_dtype

from xlapy import ops
from xlapy.interpreter import evaluate
from xlapy.ops.builder import XlaBuilder
from xlapy.parser import parse_hlo_module
from xlapy.shape import PrimitiveType, Shape


def run(text, *args):
    return evaluate(parse_hlo_module(text), *args)


def close(got, want, rtol=2e-6, atol=1e-6):
    got = np.asarray(got)
    assert got.shape == np.shape(want)
    np.testing.assert_allclose(got.astype(np.float64), np.asarray(want, np.float64),
                               rtol=rtol, atol=atol)


def module(t, shape, fi, eps="0.001"):
    d = "[" + ",".join(map(str, shape)) + "]"
    f = f"[{shape[fi]}]"
    return f"""
HloModule m
ENTRY e {{
  x = {t}{d} parameter(0)
  s = {t}{f} parameter(1)
  o = {t}{f} parameter(2)
  mu = {t}{f} parameter(3)
  v = {t}{f} parameter(4)
  dy = {t}{d} parameter(5)
  tr = ({t}{d}, {t}{f}, {t}{f}) batch-norm-training(x, s, o), epsilon={eps}, feature_index={fi}
  ni = {t}{d} batch-norm-inference(x, s, o, mu, v), epsilon={eps}, feature_index={fi}
  gr = ({t}{d}, {t}{f}, {t}{f}) batch-norm-grad(x, s, mu, v, dy), epsilon={eps}, feature_index={fi}
  ROOT r = (({t}{d}, {t}{f}, {t}{f}), {t}{d}, ({t}{d}, {t}{f}, {t}{f})) tuple(tr, ni, gr)
}}
"""


def formulas(x, scale, offset, mean, var, dy, fi, eps):
    """The page's formulas in float64."""
    axes = tuple(d for d in range(x.ndim) if d != fi)
    shape = [1] * x.ndim
    shape[fi] = x.shape[fi]
    b = lambda v: np.asarray(v, np.float64).reshape(shape)
    x, dy = x.astype(np.float64), dy.astype(np.float64)
    mu = x.mean(axis=axes)
    sigma2 = ((x - b(mu)) ** 2).mean(axis=axes)
    y = b(scale) * (x - b(mu)) / np.sqrt(b(sigma2) + eps) + b(offset)
    y_inf = b(scale) * (x - b(mean)) / np.sqrt(b(var) + eps) + b(offset)
    m = x.size // x.shape[fi]
    c = (dy * (x - b(mean)) / (b(var) + eps)).sum(axis=axes) / m
    d = dy.sum(axis=axes) / m
    gx = b(scale) / np.sqrt(b(var) + eps) * (dy - b(d) - b(c) * (x - b(mean)))
    gs = (dy * (x - b(mean)) / np.sqrt(b(var) + eps)).sum(axis=axes)
    go = dy.sum(axis=axes)
    return (y, mu, sigma2), y_inf, (gx, gs, go)


X = np.array([[[1, 2], [3, 5]], [[-1, 0], [4, 8]]], np.float32)
SCALE = np.array([1, 2], np.float32)
OFFSET = np.array([0, 10], np.float32)
MEAN = np.array([1, 3], np.float32)
VAR = np.array([4, 0.25], np.float32)
DY = np.array([[[1, 0], [0, 1]], [[2, -1], [1, 1]]], np.float32)

# stablehlo.batch_norm_training / _inference / _grad on XLA:CPU through jax 0.10.2, epsilon
# 0.001, feature_index 2
XLA_TRAINING = ([[[-0.3905137777328491, 8.845362663269043], [0.6508562564849854, 10.82474136352539]],
                 [[-1.4318838119506836, 7.525776386260986], [1.1715413331985474, 12.804120063781738]]],
                [1.75, 3.75], [3.6875, 9.1875])
XLA_INFERENCE = [[[0.0, 6.0079755783081055], [0.9998750686645508, 17.98404884338379]],
                 [[-0.9998750686645508, -1.9760725498199463], [1.4998126029968262, 29.960121154785156]]]
XLA_GRAD = ([[[0.0, 38.76319122314453], [-0.4374609589576721, -76.52837371826172]],
             [[0.4374609589576721, 114.29357147216797], [0.09371485561132431, -195.8119659423828]]],
            [-0.4999375343322754, 19.960121154785156], [4.0, 1.0])


def test_values_from_xla():
    (y, mu, var), inf, (gx, gs, go) = run(module("f32", (2, 2, 2), 2), X, SCALE, OFFSET, MEAN,
                                          VAR, DY)
    for got, want in zip((y, mu, var), XLA_TRAINING):
        close(got, want)
    close(inf, XLA_INFERENCE)
    for got, want in zip((gx, gs, go), XLA_GRAD):
        close(got, want, rtol=1e-5)


@pytest.mark.parametrize("fi", [0, 1, 2, 3])
def test_page_formulas_any_feature_index(fi):
    rng = np.random.default_rng(fi)
    shape = (3, 4, 2, 5)
    x = (rng.standard_normal(shape) * 3 + 1).astype(np.float64)
    nf = shape[fi]
    scale, offset = rng.standard_normal(nf), rng.standard_normal(nf)
    mean, var = rng.standard_normal(nf), rng.uniform(0.5, 2, nf)
    dy = rng.standard_normal(shape)
    got = run(module("f64", shape, fi), x, scale, offset, mean, var, dy)
    # epsilon is a 32-bit float in XLA: 0.001 on f64 data adds float32(0.001)
    want = formulas(x, scale, offset, mean, var, dy, fi, float(np.float32(0.001)))
    (y, mu, s2), inf, (gx, gs, go) = got
    for g, w in zip((y, mu, s2, inf, gx, gs, go), (*want[0], want[1], *want[2])):
        close(g, w, rtol=1e-12, atol=1e-12)
    assert y.dtype == mu.dtype == np.float64


def test_training_uses_the_population_variance():
    x = np.array([[1], [3]], np.float32)  # feature 0 holds 1 and 3: mean 2, variance 1
    text = module("f32", (2, 1), 1, eps="0")
    (y, mu, var), _, _ = run(text, x, np.ones(1, np.float32), np.zeros(1, np.float32),
                             np.zeros(1, np.float32), np.ones(1, np.float32), x)
    close(mu, [2])
    close(var, [1])
    close(y, [[-1], [1]])


def test_epsilon_is_a_32_bit_float():
    # variance 0: the output is (x - mean) / sqrt(epsilon) with epsilon = float32(0.1)
    x = np.array([[0.0], [0.0], [0.0], [3.0]], np.float64)
    text = module("f64", (4, 1), 1, eps="0.1")
    _, inf, _ = run(text, x, np.ones(1), np.zeros(1), np.zeros(1), np.zeros(1), x)
    assert inf[3, 0] == 3.0 / np.sqrt(float(np.float32(0.1)))
    assert inf[3, 0] != 3.0 / np.sqrt(0.1)


def test_builder_training():
    b = XlaBuilder("m")
    x = ops.Parameter(b, 0, Shape.array(PrimitiveType.F32, (2, 2, 2)), "x")
    s = ops.Parameter(b, 1, Shape.array(PrimitiveType.F32, (2,)), "s")
    o = ops.Parameter(b, 2, Shape.array(PrimitiveType.F32, (2,)), "o")
    ops.BatchNormTraining(x, s, o, 0.001, 2)
    y, mu, var = evaluate(b.build(), X, SCALE, OFFSET)
    for got, want in zip((y, mu, var), XLA_TRAINING):
        close(got, want)


@pytest.mark.parametrize("t", ["f16", "bf16", "f32", "f64"])
def test_float_types(t):
    dt = np_dtype(t)
    x = X.astype(dt)
    got = run(module(t, (2, 2, 2), 2), x, SCALE.astype(dt), OFFSET.astype(dt), MEAN.astype(dt),
              VAR.astype(dt), DY.astype(dt))
    want = formulas(X, SCALE, OFFSET, MEAN, VAR, DY, 2, float(np.float32(0.001)))
    (y, mu, var), inf, (gx, gs, go) = got
    rel = {"f16": 1e-3, "bf16": 8e-3, "f32": 1e-6, "f64": 1e-12}[t]
    for g, w in zip((y, mu, var, inf, gx, gs, go), (*want[0], want[1], *want[2])):
        assert np.asarray(g).dtype == dt
        # computed in f64 and rounded once to the type
        np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w).astype(dt).astype(np.float64),
                                   rtol=rel, atol=rel)


def test_bf16_rounds_once():
    x = np.array([[1.0], [2.0], [4.0]], ml_dtypes.bfloat16)
    text = module("bf16", (3, 1), 1, eps="0")
    one, zero = np.ones(1, ml_dtypes.bfloat16), np.zeros(1, ml_dtypes.bfloat16)
    (_, mu, var), _, _ = run(text, x, one, zero, zero, one, x)
    assert mu[0] == ml_dtypes.bfloat16(7 / 3)
    assert var[0] == ml_dtypes.bfloat16(14 / 9)

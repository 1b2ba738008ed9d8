"""CHLO decompositions and the complex math expansions against XLA's own translation: jax
lowers each function to StableHLO (what xlapy imports) and to HLO (what XLA's translation
makes of the same module); on the same inputs, including edge values, the two modules must
give the same bits on xlapy's interpreter. Covers what the jax fixtures do not (every
float width the decompositions upcast, complex log1p, erfc, polygamma, ...).

jax is in the test extras; the test is skipped without it."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
lax = pytest.importorskip("jax.lax")

import ml_dtypes  # noqa: E402

from xlapy import parse_hlo_module, parse_stablehlo  # noqa: E402
from xlapy.interpreter import evaluate  # noqa: E402

EDGES = [0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 1e-30, -3.5, 7.25, 20.0, -20.0, 100.0, 1e30,
         float("inf"), float("-inf"), float("nan"), 0.999, -0.999, 3.0, -2.0]

UNARY = {
    "erfc": lax.erfc, "erf_inv": lax.erf_inv, "lgamma": lax.lgamma, "digamma": lax.digamma,
    "asin": jnp.arcsin, "acos": jnp.arccos, "atan": jnp.arctan, "asinh": jnp.arcsinh,
    "acosh": jnp.arccosh, "atanh": jnp.arctanh, "sinh": jnp.sinh, "cosh": jnp.cosh,
    "tan": jnp.tan, "i1e": lax.bessel_i1e, "square": jnp.square, "isinf": jnp.isinf,
    "erf": lax.erf,
}
BINARY = {
    "zeta": lax.zeta, "polygamma": lambda n, x: lax.polygamma(jnp.floor(jnp.abs(n)), x),
    "nextafter": lax.nextafter,
}
COMPLEX = {"exp": jnp.exp, "log": jnp.log, "sqrt": jnp.sqrt, "log1p": jnp.log1p,
           "square": jnp.square, "conj": jnp.conj}


def _both(f, *args):
    lowered = jax.jit(f).lower(*args)
    shlo = parse_stablehlo(lowered.as_text())
    hlo = parse_hlo_module(lowered.as_text(dialect="hlo"))
    return evaluate(shlo, *args), evaluate(hlo, *args)


def _same(got, want, what):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, what
    assert got.tobytes() == want.tobytes(), f"{what}:\n{got}\n{want}"


def _values(dtype, n=40, seed=0):
    rng = np.random.default_rng(seed)
    x = np.concatenate([np.asarray(EDGES), rng.standard_normal(n) * 3, rng.uniform(-1, 1, n)])
    with np.errstate(over="ignore"):
        return x.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16],
                         ids=["f32", "f64", "f16", "bf16"])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name, dtype):
    x = _values(dtype)
    with jax.enable_x64(dtype == np.float64):
        got, want = _both(UNARY[name], x)
    _same(got, want, f"{name} {np.dtype(dtype).name}")


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary(name, dtype):
    x = _values(dtype, seed=1)
    y = np.abs(_values(dtype, seed=2)) + np.asarray(0.5, dtype)
    with jax.enable_x64(dtype == np.float64):
        got, want = _both(BINARY[name], x, y)
    _same(got, want, f"{name} {np.dtype(dtype).name}")


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128], ids=["c64", "c128"])
@pytest.mark.parametrize("name", sorted(COMPLEX))
def test_complex(name, dtype):
    re, im = _values(np.float64, seed=3), _values(np.float64, seed=4)[::-1]
    with np.errstate(over="ignore"):
        z = (re + 1j * np.nan_to_num(im, nan=0.25)).astype(dtype)
    with jax.enable_x64(dtype == np.complex128):
        got, want = _both(COMPLEX[name], z)
    _same(got, want, f"{name} {np.dtype(dtype).name}")


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int64, np.uint64, np.int8],
                         ids=["s32", "u32", "s64", "u64", "s8"])
def test_mulhi_through_chlo(dtype):
    # jax has no mulhi; the op is written by hand: compare with the wide product.
    info = np.iinfo(dtype)
    rng = np.random.default_rng(5)
    a = rng.integers(info.min, info.max, 50, dtype=dtype, endpoint=True)
    b = rng.integers(info.min, info.max, 50, dtype=dtype, endpoint=True)
    a[:4] = [info.min, info.max, 0, -1 if info.min else 1]
    t = {np.int32: "i32", np.uint32: "ui32", np.int64: "i64", np.uint64: "ui64",
         np.int8: "i8"}[dtype]
    text = f"""func.func @main(%a: tensor<50x{t}>, %b: tensor<50x{t}>) -> tensor<50x{t}> {{
      %0 = chlo.mulhi %a, %b : tensor<50x{t}>, tensor<50x{t}> -> tensor<50x{t}>
      return %0 : tensor<50x{t}>
    }}"""
    got = evaluate(parse_stablehlo(text), a, b)
    bits = info.bits
    # the high half of the exact product, as a value of the type (two's complement)
    want = [(int(x) * int(y)) >> bits for x, y in zip(a, b)]
    assert [int(v) for v in got] == want

"""xlapy.jit: jax functions run on xlapy, same pytrees in and out as jax.jit, NumPy leaves;
one compilation per input signature; static arguments; donation; x64, bf16, closed-over
constants, multiple outputs. jax is the oracle (and an optional extra of xlapy)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
pytest.importorskip("google.protobuf")

import xlapy  # noqa: E402
from xlapy.errors import InvalidArgumentError  # noqa: E402

BACKENDS = ["interpreter", "cpu"]


def _close(got, want, rtol=2e-6, atol=1e-6):
    got_leaves, got_tree = jax.tree_util.tree_flatten(got)
    want_leaves, want_tree = jax.tree_util.tree_flatten(want)
    assert got_tree == want_tree
    for g, w in zip(got_leaves, want_leaves):
        assert isinstance(g, np.ndarray), type(g)
        w = np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol,
                                   atol=atol)


def _layer(params, x):
    h = jnp.tanh(x @ params["w"] + params["b"])
    return {"out": h, "stats": (h.mean(), h.max(axis=0))}


@pytest.mark.parametrize("backend", BACKENDS)
def test_pytrees_in_and_out_like_jax(backend):
    rng = np.random.default_rng(0)
    params = {"w": rng.standard_normal((3, 4)).astype(np.float32),
              "b": rng.standard_normal(4).astype(np.float32)}
    x = rng.standard_normal((5, 3)).astype(np.float32)
    got = xlapy.jit(_layer, backend=backend)(params, x)
    _close(got, jax.jit(_layer)(params, x))


def test_compiles_once_per_signature():
    f = xlapy.jit(lambda x, y: x * 2 + y, backend="interpreter")
    x = np.ones(3, np.float32)
    f(x, x)
    f(x + 1, x)  # same signature
    assert f.cache_size() == 1
    f(np.ones(4, np.float32), np.ones(4, np.float32))  # new shape
    assert f.cache_size() == 2
    f(np.ones(3, np.int32), np.ones(3, np.int32))  # new dtype
    assert f.cache_size() == 3
    f(x, 1.0)  # a Python scalar: weak-typed, another signature
    assert f.cache_size() == 4
    _close(f(x, 1.0), jax.jit(lambda x, y: x * 2 + y)(x, 1.0))


def test_pytree_structure_is_part_of_the_signature():
    f = xlapy.jit(lambda t: jax.tree_util.tree_reduce(lambda a, b: a + b, t),
                  backend="interpreter")
    one = np.ones(2, np.float32)
    _close(f((one, one)), np.full(2, 2, np.float32))
    _close(f({"a": one, "b": one, "c": one}), np.full(2, 3, np.float32))
    assert f.cache_size() == 2


def test_static_arguments_by_number_and_name():
    def power(x, n, scale=1.0):
        return x ** n * scale

    f = xlapy.jit(power, backend="interpreter", static_argnums=1)  # names inferred: n
    x = np.arange(4, dtype=np.float32)
    _close(f(x, 2), x ** 2)
    _close(f(x, n=2), x ** 2)  # n by name is static too, as in jax.jit
    _close(f(x, 3, 0.5), x ** 3 * 0.5)
    assert f.cache_size() == 3
    g = xlapy.jit(power, backend="interpreter", static_argnames="n")  # numbers inferred: 1
    _close(g(x, 3), x ** 3)
    module = g.lower(x, 3)
    assert len(module.entry.parameters) == 1
    with pytest.raises(InvalidArgumentError, match="static arguments must be hashable"):
        f(x, [2])


def test_x64_follows_jax_config():
    def f(x, n):
        return jnp.cumsum(x * 1e-300), n * n

    x = np.linspace(0, 1, 5)
    n = np.arange(5, dtype=np.int64)
    with jax.enable_x64(True):
        got = xlapy.jit(f, backend="interpreter")(x, n)
        want = jax.jit(f)(x, n)
    assert got[0].dtype == np.float64 and got[1].dtype == np.int64
    _close(got, want, rtol=1e-15, atol=0)
    narrow = xlapy.jit(f, backend="interpreter")(x, n)  # x64 off: f32 / s32, as jax does
    assert narrow[0].dtype == np.float32 and narrow[1].dtype == np.int32


@pytest.mark.parametrize("backend", BACKENDS)
def test_bf16_in_and_out(backend):
    def f(a, b):
        return (a @ b).astype(jnp.bfloat16), jnp.maximum(a, 0)

    rng = np.random.default_rng(1)
    a = rng.standard_normal((4, 8)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((8, 2)).astype(ml_dtypes.bfloat16)
    got = xlapy.jit(f, backend=backend)(a, b)
    assert got[0].dtype == ml_dtypes.bfloat16 and got[1].dtype == ml_dtypes.bfloat16
    _close(got, jax.jit(f)(a, b), rtol=1e-2, atol=1e-2)


def test_closed_over_constants_large_and_small():
    rng = np.random.default_rng(2)
    table = rng.standard_normal((300, 64)).astype(np.float32)  # 76 kB: over jax's warn size
    weights = jnp.asarray(rng.standard_normal((64, 8)).astype(np.float32))

    def f(idx):
        return jnp.take(table, idx, axis=0) @ weights + 3.0

    idx = np.array([0, 299, 17], np.int32)
    module = xlapy.jit(f, backend="interpreter").lower(idx)
    assert len(module.entry.parameters) == 1  # jax 0.10.2 embeds them as constants
    big = [i for i in module.entry.instructions if i.opcode == "constant"
           and i.shape.dimensions == (300, 64)]
    assert big and np.array_equal(big[0].attrs["literal"].array, table)
    _close(xlapy.jit(f)(idx), jax.jit(f)(idx), rtol=1e-5, atol=1e-5)


def test_donation_reuses_the_donated_buffer():
    def step(state, grad):
        return state - 0.5 * grad, grad.sum()

    f = xlapy.jit(step, backend="interpreter", donate_argnums=0)
    state = np.arange(6, dtype=np.float32)
    grad = np.ones(6, np.float32)
    module = f.lower(state, grad)
    (alias,) = module.config["input_output_alias"]
    assert (alias.output_index, alias.parameter_number) == ((0,), 0)
    # A NumPy array is copied into a Buffer that the output then reuses; the array stays.
    new_state, total = f(state, grad)
    np.testing.assert_array_equal(new_state, state - 0.5)
    assert float(total) == 6.0 and state[1] == 1.0
    # An xlapy Buffer is donated: it is deleted by the call.
    buffer = f.client.buffer_from_pyval(state)
    new_state, _ = f(buffer, grad)
    assert buffer.is_deleted()
    np.testing.assert_array_equal(new_state, state - 0.5)
    # In the runtime, the aliased output is written into the donated memory (the results
    # come out of xlapy.jit as NumPy copies, as jax arrays become NumPy arrays on the host).
    buffer = f.client.buffer_from_pyval(state)
    pointer = buffer.unsafe_buffer_pointer()
    executable = f.client.compile(module)
    out, _ = executable.execute([[buffer, grad]], return_buffers=True)[0]
    assert out.unsafe_buffer_pointer() == pointer and buffer.is_deleted()
    # A jax array is deleted, as jax.jit deletes donated arrays.
    array = jnp.asarray(state)
    f(array, grad)
    assert array.is_deleted()


def test_errors_are_xlapy_errors():
    with pytest.raises(InvalidArgumentError, match="expected a function"):
        xlapy.jit(3)
    with pytest.raises(InvalidArgumentError, match="unknown backend 'tpu'"):
        xlapy.jit(lambda x: x, backend="tpu")

    def effect(x):
        jax.debug.print("x={x}", x=x, ordered=True)
        return x + 1

    with pytest.raises(InvalidArgumentError, match="ordered side effects"):
        xlapy.jit(effect, backend="interpreter")(np.ones(2, np.float32))
    with pytest.raises(InvalidArgumentError, match="an argument of type str is not an array"):
        xlapy.jit(lambda x: x, backend="interpreter")("text")


def test_decorator_forms():
    @xlapy.jit
    def double(x):
        return 2 * x

    @xlapy.jit(backend="interpreter", static_argnums=1)
    def add_n(x, n):
        return x + n

    assert double.backend == "cpu" and "double" in repr(double)
    _close(double(np.ones(2, np.float32)), np.full(2, 2, np.float32))
    _close(add_n(np.ones(2, np.float32), 3), np.full(2, 4, np.float32))

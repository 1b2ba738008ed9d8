"""Regenerates examples/mlp.hlo with jax (a test-only dependency): a 2-layer MLP with a
softmax output, batch 2, 4 inputs, 8 hidden units, 3 classes, as jax hands it to XLA."""

from pathlib import Path

import jax
import jax.numpy as jnp


def mlp(x, w1, b1, w2, b2):
    h = jax.nn.relu(x @ w1 + b1)
    return jax.nn.softmax(h @ w2 + b2, axis=-1)


args = (jnp.zeros((2, 4)), jnp.zeros((4, 8)), jnp.zeros((8,)), jnp.zeros((8, 3)), jnp.zeros((3,)))
text = jax.jit(mlp).lower(*args).as_text(dialect="hlo")
Path(__file__).with_name("mlp.hlo").write_text(text)
print(text)

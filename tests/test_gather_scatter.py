"""Indexing, take, take_along_axis, embeddings and x.at[...] updates on metal against the CPU backend."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcompare import check, random_array

RNG = np.random.default_rng(11)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16, jnp.int32, jnp.bool_], ids=lambda d: np.dtype(d).name)
def test_gather_patterns(dtype):
    x = random_array(RNG, (6, 5, 4), dtype)
    i = np.array([0, 5, 2, 2, -1, 7, -9], np.int32)  # negative and out-of-range indices: JAX's modes
    check(lambda x, i: x[i], x, i)
    check(lambda x, i: x[:, i % 5], x, i)
    check(lambda x, i: jnp.take(x, i, axis=2, mode="clip"), x, i)
    check(lambda x, i: jnp.take(x, i, axis=1, mode="fill", fill_value=0), x, i)
    j = (np.abs(RNG.integers(-9, 9, size=(6, 3, 4))) % 5).astype(np.int32)
    check(lambda x, j: jnp.take_along_axis(x, j, axis=1), x, j)
    check(lambda x: x[jnp.array([1, 3]), :, jnp.array([0, 2])], x)


def test_embedding_lookup_and_grad():
    table = random_array(RNG, (50, 8), np.float32)
    tokens = RNG.integers(0, 50, size=(4, 7)).astype(np.int32)
    tokens[0, :3] = 5  # duplicates: their gradients sum
    check(lambda t, ids: t[ids], table, tokens)
    check(jax.grad(lambda t, ids: jnp.sum(jnp.sin(t[ids]))), table, tokens, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.int32], ids=lambda d: np.dtype(d).name)
def test_scatter_updates(dtype):
    x = random_array(RNG, (8, 3), dtype, -5, 5)
    i = np.array([1, 3, 3, 7, 9, -2], np.int32)  # a duplicate, an out-of-bounds and a negative index
    u = random_array(RNG, (6, 3), dtype, -5, 5)
    check(lambda x, i, u: x.at[i].add(u), x, i, u)
    check(lambda x, i, u: x.at[i].set(u, mode="drop")[jnp.array([0, 2, 4, 5, 6])], x, i, u)
    check(lambda x, i, u: x.at[i].max(u), x, i, u)
    check(lambda x, i, u: x.at[i].min(u), x, i, u)
    check(lambda x, i, u: x.at[i, 1].mul(u[:, 0]), x, i % 8, u)


def test_scatter_in_training_grads_and_vmap():
    logits = random_array(RNG, (16, 10), np.float32)
    labels = RNG.integers(0, 10, size=16).astype(np.int32)
    loss = lambda l, y: -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(l), y[:, None], axis=1))
    check(jax.grad(loss), logits, labels, rtol=1e-5, atol=1e-6)
    check(jax.vmap(lambda row, y: row[y]), logits, labels % 10)

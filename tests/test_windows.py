"""reduce_window (pooling of every kind) on metal against the CPU backend."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from jaxcompare import check, random_array

RNG = np.random.default_rng(6)


@pytest.mark.parametrize("padding", ["VALID", "SAME", ((1, 0), (0, 2), (1, 1), (0, 0))], ids=str)
def test_pools(padding):
    x = random_array(RNG, (2, 7, 6, 3), np.float32)
    check(lambda x: lax.reduce_window(x, -jnp.inf, lax.max, (1, 3, 2, 1), (1, 2, 2, 1), padding), x)
    check(lambda x: lax.reduce_window(x, 0.0, lax.add, (1, 2, 3, 1), (1, 1, 2, 1), padding), x, rtol=1e-5)
    check(lambda x: lax.reduce_window(x, jnp.inf, lax.min, (1, 2, 2, 1), (1, 2, 1, 1), padding), x)


def test_dilated_windows_and_int_pools():
    x = random_array(RNG, (9, 8), np.float32)
    check(lambda x: lax.reduce_window(x, 0.0, lax.add, (2, 3), (1, 2), "VALID", window_dilation=(2, 1)), x, rtol=1e-5)
    check(lambda x: lax.reduce_window(x, 0.0, lax.add, (2, 2), (1, 1), "VALID", base_dilation=(2, 1)), x, rtol=1e-5)
    i = (random_array(RNG, (6, 6), np.int32) % 9).astype(np.int32)
    check(lambda i: lax.reduce_window(i, np.int32(-2**31), lax.max, (2, 2), (2, 2), "VALID"), i)


def test_avg_pool_grad():
    x = random_array(RNG, (1, 6, 6, 2), np.float32)
    pool = lambda x: lax.reduce_window(x, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") / 4.0
    check(jax.grad(lambda x: jnp.sum(pool(x) ** 2)), x, rtol=1e-5)


@pytest.mark.parametrize("padding", ["VALID", "SAME"])
def test_max_pool_grad(padding):
    x = random_array(RNG, (2, 7, 6, 3), np.float32)
    x[0, 0, 0, 0] = x[0, 0, 1, 0]  # a tie: the first maximum gets the gradient
    pool = lambda x: lax.reduce_window(x, -jnp.inf, lax.max, (1, 3, 2, 1), (1, 2, 2, 1), padding)
    check(jax.grad(lambda x: jnp.sum(pool(x) ** 2)), x, rtol=1e-5)
    check(jax.vmap(jax.grad(lambda x: jnp.sum(pool(x[None])))), x, rtol=1e-5)

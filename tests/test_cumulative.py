"""Cumulative scans (JAX's reduce_window prefix windows) on MPSGraph's cumulative ops, against the CPU."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from jaxcompare import check, random_array

RNG = np.random.default_rng(5)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.int32, jnp.float16], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("n", [2, 7, 13])
def test_scans(dtype, n):
    x = random_array(RNG, (3, n), dtype, -2, 2)
    if np.dtype(dtype).kind == "i":
        x = (x % 7).astype(dtype)
    check(lambda x: (jnp.cumsum(x, axis=1), lax.cummax(x, axis=1), lax.cummin(x, axis=0)), x, rtol=2e-2 if dtype == jnp.float16 else None)
    check(lambda x: (lax.cumsum(x, axis=1, reverse=True), lax.cummax(x, axis=1, reverse=True)), x,
          rtol=2e-2 if dtype == jnp.float16 else None)
    if dtype == jnp.float32:
        check(lambda x: jnp.cumprod(x * 0.5, axis=1), x, rtol=1e-5)


def test_large_scan_is_one_cumulative_op():
    x = random_array(RNG, (100_000,), np.float32, -1, 1)
    check(jnp.cumsum, x, rtol=1e-4, atol=1e-3)
    from jax_metal_plugin import tools
    text = tools.mps_graph(jnp.cumsum, x)
    assert "CumulativeSum(" in text and "Slice(" not in text


def test_scan_grads_and_logcumsumexp():
    x = random_array(RNG, (4, 9), np.float32)
    check(jax.grad(lambda x: jnp.sum(jnp.cumsum(x, axis=1) ** 2)), x, rtol=1e-5)
    check(lambda x: lax.cumlogsumexp(x, axis=1), x, rtol=1e-5)
    check(jax.vmap(jnp.cumsum), x)

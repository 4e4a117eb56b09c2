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


# ---- sizes, special values, dtypes, inits, grads


def _specials(n):
    x = random_array(RNG, (2, n), np.float32, -2, 2)
    pick = RNG.random((2, n))
    x[pick < 0.05] = np.nan
    x[(pick >= 0.05) & (pick < 0.1)] = np.inf
    x[(pick >= 0.1) & (pick < 0.15)] = -np.inf
    x[(pick >= 0.15) & (pick < 0.2)] = -0.0
    return x


@pytest.mark.parametrize("n", [1, 2, 5, 31, 1000])
def test_scans_with_nans_and_infs(n):
    x = _specials(n)
    for reverse in (False, True):
        check(lambda x: (lax.cumsum(x, axis=1, reverse=reverse), lax.cummax(x, axis=1, reverse=reverse),
                         lax.cummin(x, axis=1, reverse=reverse), lax.cumprod(x, axis=1, reverse=reverse)),
              x, rtol=1e-5, atol=1e-5)
        check(lambda x: lax.cumlogsumexp(x, axis=1, reverse=reverse), x, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [jnp.int8, jnp.uint8, jnp.int16, jnp.uint32, jnp.int32], ids=lambda d: np.dtype(d).name)
def test_integer_scans_wrap_like_the_cpu(dtype):
    x = random_array(RNG, (3, 50), dtype)
    for reverse in (False, True):
        check(lambda x: (lax.cumsum(x, axis=1, reverse=reverse), lax.cumprod(x, axis=1, reverse=reverse),
                         lax.cummax(x, axis=1, reverse=reverse), lax.cummin(x, axis=0, reverse=reverse)), x)


def test_bool_scans():
    b = RNG.random((3, 20)) < 0.3
    n = b.shape[1]
    prefix = dict(window_dimensions=(1, n), window_strides=(1, 1), padding=((0, 0), (n - 1, 0)))
    suffix = dict(window_dimensions=(1, n), window_strides=(1, 1), padding=((0, 0), (0, n - 1)))
    check(lambda b: (lax.reduce_window(b, False, lax.bitwise_or, **prefix), lax.reduce_window(b, True, lax.bitwise_and, **suffix),
                     lax.reduce_window(b, False, lax.max, **suffix), jnp.cumsum(b, axis=1)), b)


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16], ids=lambda d: np.dtype(d).name)
def test_low_precision_scans(dtype):
    x = random_array(RNG, (3, 64), dtype, 0, 1)
    check(lambda x: (lax.cummax(x, axis=1), lax.cummin(x, axis=1, reverse=True)), x, exact=True)
    check(lambda x: (jnp.cumsum(x, axis=1), jnp.cumprod(x * 0.1 + 0.95, axis=1), lax.cumlogsumexp(x, axis=1)),
          x, rtol=3e-2, atol=3e-2)


def test_scan_along_any_axis_of_rank_3():
    x = random_array(RNG, (4, 5, 6), np.float32)
    check(lambda x: (jnp.cumsum(x, axis=0), lax.cummax(x, axis=1), jnp.cumprod(x, axis=2),
                     lax.cumlogsumexp(x, axis=1, reverse=True)), x, rtol=1e-5, atol=1e-5)


def test_large_scans():
    x = random_array(RNG, (100_000,), np.float32, -1, 1)
    check(lambda x: (lax.cummax(x), lax.cummin(x, reverse=True)), x, exact=True)
    check(lambda x: (lax.cumsum(x, reverse=True), lax.cumlogsumexp(x), jnp.cumprod(1 + x * 1e-5)), x, rtol=1e-4, atol=1e-3)
    i = (random_array(RNG, (100_000,), np.int32) % 100).astype(np.int32)
    check(jnp.cumsum, i)


def test_reduce_window_prefix_with_other_inits():
    # The init enters each window once (XLA skips a window's padding; StableHLO's spec would pad with it).
    x = random_array(RNG, (2, 9), np.float32)
    n = x.shape[1]
    prefix = dict(window_dimensions=(1, n), window_strides=(1, 1), padding=((0, 0), (n - 1, 0)))
    suffix = dict(window_dimensions=(1, n), window_strides=(1, 1), padding=((0, 0), (0, n - 1)))
    check(lambda x: (lax.reduce_window(x, 1.5, lax.add, **prefix), lax.reduce_window(x, 0.25, lax.max, **suffix),
                     lax.reduce_window(x, -0.5, lax.min, **prefix), lax.reduce_window(x, 1.01, lax.mul, **suffix),
                     lax.reduce_window(x, 0.0, jnp.logaddexp, **prefix)), x, rtol=1e-5, atol=1e-5)
    i = (random_array(RNG, (2, 9), np.int32) % 9).astype(np.int32)
    check(lambda i: (lax.reduce_window(i, 3, lax.add, **prefix), lax.reduce_window(i, 2, lax.mul, **suffix)), i)


def test_scan_grads_and_vmap():
    x = random_array(RNG, (3, 11), np.float32, 0.5, 1.5)
    check(jax.grad(lambda x: jnp.sum(jnp.cumprod(x, axis=1))), x, rtol=1e-5)
    check(jax.grad(lambda x: jnp.sum(lax.cummax(x, axis=1) * jnp.arange(11.0))), x)
    check(jax.grad(lambda x: jnp.sum(lax.cumlogsumexp(x, axis=1, reverse=True))), x, rtol=1e-5)
    check(jax.grad(lambda x: jnp.sum(lax.cumsum(x, axis=0, reverse=True) ** 2)), x, rtol=1e-5)
    check(jax.vmap(lambda r: (lax.cummin(r), jnp.cumprod(r))), x, rtol=1e-5)


def test_scan_graphs_use_cumulative_ops():
    from jax_metal_plugin import tools
    x = np.ones((4, 1000), np.float32)
    for fn, op in [(lambda x: lax.cummax(x, axis=1), "CumulativeMaximum("),
                   (lambda x: lax.cummin(x, axis=1, reverse=True), "CumulativeMinimum("),
                   (lambda x: jnp.cumprod(x, axis=1), "CumulativeProduct("),
                   (lambda x: jnp.cumsum(x, axis=0), "CumulativeSum(")]:
        text = tools.mps_graph(fn, x)
        assert op in text and "Slice(" not in text, text
    # cumlogsumexp: a log-step scan, O(log n) ops: 100x longer costs a few more steps, not 100x the ops.
    small = tools.mps_graph(lambda x: lax.cumlogsumexp(x, axis=1), x).count("\n")
    large = tools.mps_graph(lambda x: lax.cumlogsumexp(x, axis=1), np.ones((4, 100_000), np.float32)).count("\n")
    assert large < 1.8 * small, (small, large)

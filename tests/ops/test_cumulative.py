"""Cumulative scans (JAX's reduce_window prefix windows) on MPSGraph's cumulative ops, against the CPU."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from jaxcompare import check, check_reduction, random_array, run_on

RNG = np.random.default_rng(5)


def prefix_lengths(n, axis=-1, reverse=False, ndim=2):
    """How many terms each element of a scan of length n along `axis` combines (for check_reduction's k)."""
    k = np.arange(n, 0, -1) if reverse else np.arange(1, n + 1)
    shape = [1] * ndim
    shape[axis] = n
    return k.reshape(shape)


def exact_steps(n, step=2.0 ** -10, high=1.0):
    """n multiples of `step` in [-high, high]: their prefix sums are exact in float32 in any order while
    they stay below 2**24 steps, so long scans compare exactly."""
    return (np.round(RNG.uniform(-high, high, n) / step) * step).astype(np.float32)


def exact_factors(n, span=20):
    """n powers of two whose running products stay within 2**+-2*span: exact in any order."""
    e = np.clip(np.cumsum(RNG.integers(-1, 2, n)), -span, span)
    return np.exp2(np.diff(e, prepend=0)).astype(np.float32)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.int32, jnp.float16], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("n", [2, 7, 13])
def test_scans(dtype, n):
    x = random_array(RNG, (3, n), dtype, -2, 2)
    if np.dtype(dtype).kind == "i":
        x = (x % 7).astype(dtype)
    check_reduction(lambda x: jnp.cumsum(x, axis=1), x, k=prefix_lengths(n))
    check_reduction(lambda x: lax.cumsum(x, axis=1, reverse=True), x, k=prefix_lengths(n, reverse=True))
    check(lambda x: (lax.cummax(x, axis=1), lax.cummin(x, axis=0), lax.cummax(x, axis=1, reverse=True)), x, exact=True)
    if dtype == jnp.float32:
        check_reduction(lambda x: jnp.cumprod(x * 0.5, axis=1), x, k=prefix_lengths(n) + 1)


def test_large_scan_is_one_cumulative_op():
    x = exact_steps(100_000)
    check(jnp.cumsum, x, exact=True)
    from jax_metal_plugin import tools
    text = tools.mps_graph(jnp.cumsum, x)
    assert "CumulativeSum(" in text and "Slice(" not in text


def test_scan_grads_and_logcumsumexp():
    x = random_array(RNG, (4, 9), np.float32)
    # The gradient sums, for each element, the 2 * prefix sums (of up to 9 terms) that include it.
    check_reduction(jax.grad(lambda x: jnp.sum(jnp.cumsum(x, axis=1) ** 2)), x, k=9 + 9)
    check_reduction(lambda x: lax.cumlogsumexp(x, axis=1), x, k=prefix_lengths(9) + 2,
                    magnitude=lambda x: np.abs(np.logaddexp.accumulate(x, axis=1)) + 1)
    check_reduction(jax.vmap(jnp.cumsum), x, k=prefix_lengths(9))


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
        k = prefix_lengths(n, reverse=reverse)
        check_reduction(lambda x: (lax.cumsum(x, axis=1, reverse=reverse), lax.cumprod(x, axis=1, reverse=reverse)),
                        x, k=k)
        check(lambda x: (lax.cummax(x, axis=1, reverse=reverse), lax.cummin(x, axis=1, reverse=reverse)), x, exact=True)
        check_reduction(lambda x: lax.cumlogsumexp(x, axis=1, reverse=reverse), x, k=k + 2,
                        magnitude=lambda x: np.abs(run_on("cpu", lambda x: lax.cumlogsumexp(x, axis=1, reverse=reverse), x))
                        + np.abs(np.where(np.isfinite(x), x, 0)).max() + 1)


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
    k = prefix_lengths(64)
    check_reduction(lambda x: (jnp.cumsum(x, axis=1), jnp.cumprod(x * 0.1 + 0.95, axis=1)), x, k=[k, k + 2])
    check_reduction(lambda x: lax.cumlogsumexp(x, axis=1), x, k=k + 2,
                    magnitude=lambda x: np.abs(np.logaddexp.accumulate(x.astype(np.float32), axis=1)) + 1)


def test_scan_along_any_axis_of_rank_3():
    x = random_array(RNG, (4, 5, 6), np.float32)
    check_reduction(lambda x: (jnp.cumsum(x, axis=0), jnp.cumprod(x, axis=2)), x,
                    k=[prefix_lengths(4, 0, ndim=3), prefix_lengths(6, 2, ndim=3)])
    check(lambda x: lax.cummax(x, axis=1), x, exact=True)
    check_reduction(lambda x: lax.cumlogsumexp(x, axis=1, reverse=True), x, k=prefix_lengths(5, 1, True, 3) + 2,
                    magnitude=lambda x: np.abs(np.flip(np.logaddexp.accumulate(np.flip(x, 1), axis=1), 1))
                    + np.abs(x).max(axis=1, keepdims=True) + 1)


def test_large_scans():
    x = random_array(RNG, (100_000,), np.float32, -1, 1)
    check(lambda x: (lax.cummax(x), lax.cummin(x, reverse=True)), x, exact=True)
    # Sums and products of values chosen to be exact in any order (a rounding bound for 100_000 terms
    # could not tell a wrong element); cumlogsumexp within its bound.
    check(lambda x: lax.cumsum(x, reverse=True), exact_steps(100_000), exact=True)
    check(jnp.cumprod, exact_factors(100_000), exact=True)
    check_reduction(lax.cumlogsumexp, x, k=prefix_lengths(100_000, ndim=1) + 2,
                    magnitude=lambda x: np.abs(np.logaddexp.accumulate(x)) + 1)
    i = (random_array(RNG, (100_000,), np.int32) % 100).astype(np.int32)
    check(jnp.cumsum, i)


def test_reduce_window_prefix_with_other_inits():
    # The init enters each window once (XLA skips a window's padding; StableHLO's spec would pad with it).
    x = random_array(RNG, (2, 9), np.float32)
    n = x.shape[1]
    prefix = dict(window_dimensions=(1, n), window_strides=(1, 1), padding=((0, 0), (n - 1, 0)))
    suffix = dict(window_dimensions=(1, n), window_strides=(1, 1), padding=((0, 0), (0, n - 1)))
    check_reduction(lambda x: (lax.reduce_window(x, 1.5, lax.add, **prefix), lax.reduce_window(x, 1.01, lax.mul, **suffix)),
                    x, k=[prefix_lengths(n) + 1, prefix_lengths(n, reverse=True) + 1],
                    magnitude=lambda x: (np.cumsum(np.abs(x), axis=1) + 1.5,
                                         1.01 * np.flip(np.cumprod(np.flip(np.abs(x), 1), axis=1), 1)))
    check(lambda x: (lax.reduce_window(x, 0.25, lax.max, **suffix), lax.reduce_window(x, -0.5, lax.min, **prefix)), x,
          exact=True)
    check_reduction(lambda x: lax.reduce_window(x, 0.0, jnp.logaddexp, **prefix), x, k=prefix_lengths(n) + 3,
                    magnitude=lambda x: np.abs(np.logaddexp.accumulate(np.concatenate([np.zeros((2, 1)), x], 1), axis=1)[:, 1:])
                    + np.abs(x).max() + 1)
    i = (random_array(RNG, (2, 9), np.int32) % 9).astype(np.int32)
    check(lambda i: (lax.reduce_window(i, 3, lax.add, **prefix), lax.reduce_window(i, 2, lax.mul, **suffix)), i)


def test_scan_grads_and_vmap():
    x = random_array(RNG, (3, 11), np.float32, 0.5, 1.5)
    # Gradients of sums over the scans: sums of up to 11 prefix products or terms, each of up to 11.
    check_reduction(jax.grad(lambda x: jnp.sum(jnp.cumprod(x, axis=1))), x, k=11 + 11)  # positive x: no cancellation
    check(jax.grad(lambda x: jnp.sum(lax.cummax(x, axis=1) * jnp.arange(11.0))), x)
    check_reduction(jax.grad(lambda x: jnp.sum(lax.cumlogsumexp(x, axis=1, reverse=True))), x, k=11 + 11 + 4,
                    magnitude=lambda x: run_on("cpu", jax.grad(lambda x: jnp.sum(lax.cumlogsumexp(x, axis=1, reverse=True))), x))
    check_reduction(jax.grad(lambda x: jnp.sum(lax.cumsum(x, axis=0, reverse=True) ** 2)), x, k=3 + 3)
    check(jax.vmap(lax.cummin), x, exact=True)
    check_reduction(jax.vmap(jnp.cumprod), x, k=prefix_lengths(11))


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

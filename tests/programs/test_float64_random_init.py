"""float64 random numbers and what uses them (a truncated-normal initialisation) under jax_enable_x64,
against JAX's CPU backend, and what kept them lean: large splat constants read as one element, and
splats of constants recomputed by the segment that reads them rather than passed between segments.
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jax_metal_plugin.tools import mps_graph
from jaxcompare import run_on

EPS64 = float(np.finfo(np.float64).eps)


pytestmark = pytest.mark.usefixtures("x64")


def test_normal_float64_matches_cpu():
    # 300k values: every erf_inv coefficient is a splat of 2.4 MB in the program JAX emits.
    f = lambda key: jax.random.normal(key, (300_000,), dtype=jnp.float64)
    key = jax.random.key(3)
    got, want = run_on("metal", f, key), run_on("cpu", f, key)
    assert got.dtype == np.float64
    # Same threefry bits; erf_inv's polynomials are evaluated in a different order of operations, and
    # its condition number grows like |x| exp(x^2 / 2) / sqrt(2 pi) (at most ~1e2 over 300k normals).
    np.testing.assert_allclose(got, want, rtol=1e4 * EPS64, atol=1e4 * EPS64)


def test_truncated_normal_init_and_vmap_match_cpu():
    def init(key):
        k1, k2 = jax.random.split(key)
        return {"w": 0.05 * jax.random.truncated_normal(k1, -2.0, 2.0, (3, 3, 32, 64), jnp.float64),
                "u": jax.random.uniform(k2, (70_000,), jnp.float64)}

    key = jax.random.key(5)
    got, want = run_on("metal", init, key), run_on("cpu", init, key)
    np.testing.assert_allclose(got["u"], want["u"], rtol=0, atol=0)  # the same bits, exactly
    np.testing.assert_allclose(got["w"], want["w"], rtol=1e4 * EPS64, atol=1e4 * EPS64)
    keys = jax.random.split(jax.random.key(6), 3)
    f = jax.vmap(lambda k: jax.random.normal(k, (40_000,), jnp.float64))
    np.testing.assert_allclose(run_on("metal", f, keys), run_on("cpu", f, keys), rtol=1e4 * EPS64, atol=1e4 * EPS64)


def test_no_full_size_splat_crosses_segments():
    # The metal segment makes the random bits, the host segment the float64 normals; the coefficients'
    # splats belong to the host segment, so only the bits cross.
    text = mps_graph(lambda key: jax.random.normal(key, (300_000,), dtype=jnp.float64), jax.random.key(0))
    crossings = [line for line in text.splitlines() if "-- segment" in line]
    assert len(crossings) == 2, text[:2000]
    for line in crossings:
        writes = re.search(r"writes \(([^)]*)\)", line).group(1)
        assert len([w for w in writes.split(",") if w.strip()]) == 1, line


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32, np.bool_, np.complex128])
def test_large_splat_constants(dtype):
    # Constants of 100k elements and more arrive as one element and a shape; as results, operands and
    # under vmap they are the full constant.
    value = np.array(3 if dtype != np.bool_ else True, dtype)
    const = np.full((100_000,), value)

    def f(x):
        return jnp.asarray(const) + x, jnp.asarray(const)

    x = np.arange(100_000).astype(dtype) if dtype != np.bool_ else np.ones(100_000, bool)
    got, want = run_on("metal", f, x), run_on("cpu", f, x)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)
    fv = jax.vmap(lambda x: x * jnp.asarray(const[:3]))
    xs = np.stack([x[:3], x[3:6]])
    np.testing.assert_array_equal(run_on("metal", fv, xs), run_on("cpu", fv, xs))

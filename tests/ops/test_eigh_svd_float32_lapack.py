"""float32 eigh and svd from FLOAT32_LAPACK_FROM rows on (host LAPACK, Accelerate on a Mac), every
EighImplementation cpu accepts (and those only TPU runs), against JAX's CPU backend (LAPACK).

Eigenvalues and singular values are compared with a bound scaled by the matrix norm (a backward-stable
solver's error is O(n eps |A|)); vectors by the residual |A v - v w| and orthonormality, which hold for
any basis of a cluster, and against cpu's where the eigenvalues are well apart.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.lax.linalg import EighImplementation

from jax_metal_plugin._linalg_lowerings import FLOAT32_LAPACK_FROM
from jaxcompare import run_on

RNG = np.random.default_rng(28)
EPS = float(np.finfo(np.float32).eps)


def symmetric(n, batch=()):
    a = RNG.standard_normal((*batch, n, n)).astype(np.float32)
    return (a + np.swapaxes(a, -1, -2)) / 2


def separated(n):
    """A symmetric matrix with eigenvalues 1..n (gaps of 1: eigenvectors are well determined)."""
    q, _ = np.linalg.qr(RNG.standard_normal((n, n)))
    return ((q * np.arange(1, n + 1)) @ q.T).astype(np.float32)


def assert_eigh(a, w, v, w_cpu):
    n = a.shape[-1]
    norm = float(np.linalg.norm(a.astype(np.float64), 2)) or 1.0
    bound = 8 * n * EPS * norm
    assert np.abs(w - w_cpu).max() <= bound, "eigenvalues"
    eye = np.eye(n)
    v64 = v.astype(np.float64)
    assert np.abs(np.swapaxes(v64, -1, -2) @ v64 - eye).max() <= 8 * n * EPS, "orthonormal"
    assert np.abs(a @ v64 - v64 * w[..., None, :]).max() <= bound, "A v = v w"


@pytest.mark.parametrize("implementation", [None, "QR", "JACOBI", "QDWH"])
@pytest.mark.parametrize("n", [5, FLOAT32_LAPACK_FROM, 260])
def test_every_eigh_implementation(implementation, n):
    # QDWH above 256 splits the matrix and solves the blocks with unsorted eigh calls: those stay on
    # Jacobi, which keeps each block's eigenvalues where its padding put them.
    impl = None if implementation is None else EighImplementation[implementation]
    a = symmetric(n)
    w, v = run_on("metal", lambda x: lax.linalg.eigh(x, implementation=impl)[::-1], a)
    # cpu runs LAPACK for the default and QR (it refuses JACOBI and QDWH): every one is compared with it.
    w_cpu, _ = run_on("cpu", lambda x: lax.linalg.eigh(x)[::-1], a)
    assert_eigh(a, w, v, w_cpu)


@pytest.mark.parametrize("n", [256, 300])
def test_large_float32_eigh_matches_cpu(n):
    a = separated(n)
    w, v = run_on("metal", jnp.linalg.eigh, a)
    w_cpu, v_cpu = run_on("cpu", jnp.linalg.eigh, a)
    assert w.dtype == np.float32 and v.dtype == np.float32
    assert_eigh(a, w, v, w_cpu)
    # Gaps of 1 against |A| = n: each eigenvector is determined to ~ n eps |A| / gap.
    v = v * np.where(np.sum(v * v_cpu, axis=0) < 0, -1, 1)
    assert np.abs(v - v_cpu).max() <= 16 * n * n * EPS


def test_large_float32_eigh_grad_and_vmap():
    n = FLOAT32_LAPACK_FROM
    a = separated(n)
    weights = np.linspace(-1, 1, n).astype(np.float32)
    f = jax.grad(lambda a: jnp.sum(jnp.linalg.eigvalsh(a) * weights))
    got, want = run_on("metal", f, a), run_on("cpu", f, a)
    assert np.abs(got - want).max() <= 16 * n * EPS * np.abs(want).max()
    batch = np.stack([separated(n) for _ in range(3)])
    got, want = run_on("metal", jax.vmap(jnp.linalg.eigvalsh), batch), run_on("cpu", jax.vmap(jnp.linalg.eigvalsh), batch)
    assert np.abs(got - want).max() <= 8 * n * EPS * n


@pytest.mark.parametrize("shape", [(256, 256), (300, 200), (70, 130), (2, 96, 80)], ids=str)
def test_large_float32_svd_matches_cpu(shape):
    a = RNG.standard_normal(shape).astype(np.float32)
    norm = float(np.linalg.norm(a.astype(np.float64), 2, axis=(-2, -1)).max())
    k, bound = min(shape[-2:]), 8 * max(shape) * EPS * norm
    s = run_on("metal", lambda a: jnp.linalg.svd(a, compute_uv=False), a)
    s_cpu = run_on("cpu", lambda a: jnp.linalg.svd(a, compute_uv=False), a)
    assert s.dtype == np.float32 and np.abs(s - s_cpu).max() <= bound
    for full in (False, True):
        u, s, vt = run_on("metal", lambda a: jnp.linalg.svd(a, full_matrices=full), a)
        u_cpu, _, vt_cpu = run_on("cpu", lambda a: jnp.linalg.svd(a, full_matrices=full), a)
        assert u.shape == u_cpu.shape and vt.shape == vt_cpu.shape
        u64, vt64 = u.astype(np.float64)[..., :k], vt.astype(np.float64)[..., :k, :]
        assert np.abs((u64 * s[..., None, :]) @ vt64 - a).max() <= bound, "u s vt = a"
        for q in (u.astype(np.float64), np.swapaxes(vt, -1, -2).astype(np.float64)):
            assert np.abs(np.swapaxes(q, -1, -2) @ q - np.eye(q.shape[-1])).max() <= 8 * max(shape) * EPS


def test_large_float32_svd_grad_vmap_and_what_uses_it():
    a = RNG.standard_normal((FLOAT32_LAPACK_FROM + 8, FLOAT32_LAPACK_FROM)).astype(np.float32)
    norm, m = float(np.linalg.norm(a, 2)), a.shape[0]
    f = jax.grad(lambda a: jnp.sum(jnp.linalg.svd(a, compute_uv=False)))
    got, want = run_on("metal", f, a), run_on("cpu", f, a)
    # d(sum s)/dA = U V^T: as well determined as the singular vectors (gaps ~ |A| / k).
    assert np.abs(got - want).max() <= 1e-3
    batch = np.stack([a, 2 * a])
    sv = jax.vmap(lambda a: jnp.linalg.svd(a, compute_uv=False))
    assert np.abs(run_on("metal", sv, batch) - run_on("cpu", sv, batch)).max() <= 16 * m * EPS * norm
    for fn in (lambda a: jnp.linalg.norm(a, ord=2), lambda a: jnp.linalg.pinv(a) @ a):
        got, want = run_on("metal", fn, a), run_on("cpu", fn, a)
        assert np.abs(got - want).max() <= 1e-3 * max(1.0, float(np.abs(want).max()))

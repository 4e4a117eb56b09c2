"""lax.linalg.tridiagonal on metal (LAPACK sytrd/hetrd on the host, for every dtype): the packed
Householder vectors, diagonal, off-diagonal and taus against JAX's CPU backend (the same LAPACK
routine), and the reduction itself: Q^H A Q is the tridiagonal matrix of d and e."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from jaxcompare import assert_close, check, eps, run_on

RNG = np.random.default_rng(16)


def matrix(shape, dtype):
    a = RNG.standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        a = a + 1j * RNG.standard_normal(shape)
    return a.astype(dtype)


def householder_q(packed, taus, lower):
    """Q = H_0 ... H_{n-2} from sytrd's packed vectors (LAPACK's layout, in NumPy)."""
    n = packed.shape[-1]
    q = np.eye(n, dtype=packed.dtype)
    for j in range(n - 1):
        v = np.zeros(n, packed.dtype)
        if lower:  # v[j+1] = 1, v[j+2:] below the subdiagonal of column j
            v[j + 1] = 1
            v[j + 2:] = packed[j + 2:, j]
        else:  # H_j from column j+1 above its superdiagonal, applied in reverse order
            k = n - 2 - j
            v[k] = 1
            v[:k] = packed[:k, k + 1]
        h = np.eye(n, dtype=packed.dtype) - taus[j if lower else n - 2 - j] * np.outer(v, np.conj(v))
        q = q @ h
    return q


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
@pytest.mark.parametrize("lower", [True, False])
def test_tridiagonal_matches_cpu_and_reduces(dtype, lower):
    a = matrix((3, 6, 6), dtype)
    f = lambda a: lax.linalg.tridiagonal(a, lower=lower)
    packed, d, e, taus = check(f, a, rtol=1e-5, atol=1e-5)
    assert d.dtype == e.dtype == np.float32 and taus.dtype == dtype
    # Q^H H Q = T, H the Hermitian matrix of a's chosen triangle.
    for b in range(3):
        tri = np.tril(a[b], -1) if lower else np.triu(a[b], 1)
        h = tri + np.conj(tri.T) + np.diag(np.real(np.diag(a[b])))
        q = householder_q(packed[b], taus[b], lower)
        t = np.diag(d[b]) + np.diag(e[b], -1) + np.diag(e[b], 1)
        err = np.abs(np.conj(q.T) @ h @ q - t).max()
        assert err <= 30 * 6 * eps(dtype) * np.abs(h).max(), err


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_tridiagonal_x64(dtype):
    with jax.enable_x64(True):
        a = matrix((2, 5, 5), dtype)
        check(lambda a: lax.linalg.tridiagonal(a, lower=True), a)


def test_tridiagonal_one_by_one_and_vmap():
    check(lambda a: lax.linalg.tridiagonal(a), np.array([[2.5]], np.float32))
    a = matrix((4, 3, 3), np.float32)
    assert_close(run_on("metal", jax.vmap(lambda m: lax.linalg.tridiagonal(m, lower=False)), a),
                 run_on("cpu", jax.vmap(lambda m: lax.linalg.tridiagonal(m, lower=False)), a), rtol=1e-5, atol=1e-5)

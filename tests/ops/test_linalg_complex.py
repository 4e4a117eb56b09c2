"""Linear algebra on LAPACK (the plugin's host-only LAPACK ops): eig for real and complex matrices, and
complex64 cholesky, solve, triangular_solve, lu, qr, eigh and svd, with batch dimensions, grads and vmap,
each against JAX's CPU backend.

Decompositions that are unique (Cholesky, LU with partial pivoting, QR with LAPACK's Householder
convention, eigenvalues, singular values) are compared with the CPU's values; for the others
(eigenvectors, singular vectors: any phase) the defining residuals are checked instead. Bounds come
from backward stability: a residual like ||A V - V diag(w)|| is at most c n eps ||A|| (Higham,
Accuracy and Stability of Numerical Algorithms; Golub and Van Loan 7.5, 8.1), and two stable
computations of a well-conditioned result agree to c n eps times its condition number."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest
from jax import lax

from jaxcompare import assert_close, check, eps, run_on

RNG = np.random.default_rng(14)
C = 30.0  # the constant of the c n eps bounds: generous, an error of a wrong result is O(1)


def cplx(shape, dtype=np.complex64):
    return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(dtype)


def well_conditioned(shape, dtype=np.complex64):
    n = shape[-1]
    return (cplx(shape, dtype) + 2 * n ** 0.5 * np.eye(n)).astype(dtype)


def hpd(shape, dtype=np.complex64):
    a = cplx(shape, dtype)
    return (a @ np.conj(np.swapaxes(a, -1, -2)) + shape[-1] * np.eye(shape[-1])).astype(dtype)


def hermitian(shape, dtype=np.complex64):
    a = cplx(shape, dtype)
    return ((a + np.conj(np.swapaxes(a, -1, -2))) / 2).astype(dtype)


def norm(a):
    """Spectral norm per matrix, kept as [..., 1, 1] for broadcasting."""
    return np.linalg.norm(np.asarray(a, np.complex128), ord=2, axis=(-2, -1))[..., None, None]


def H(a):
    return np.conj(np.swapaxes(a, -1, -2))


def assert_small(residual, bound, what):
    r = np.abs(np.asarray(residual, np.complex128))
    worst = float(np.max(r / np.broadcast_to(bound, r.shape))) if r.size else 0.0
    assert worst <= 1, f"{what}: residual {float(r.max()):.3g} exceeds the bound by {worst:.3g}x"


def decomposition_tolerance(dtype, n, condition=10.0):
    return C * n * eps(dtype) * condition


# ---- eig


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
@pytest.mark.parametrize("shape", [(5, 5), (3, 4, 4), (1, 1)])
def test_eig_right_and_left_eigenvectors(dtype, shape):
    a = (cplx(shape) if dtype == np.complex64 else RNG.standard_normal(shape)).astype(dtype)
    n = shape[-1]
    w, vl, vr = run_on("metal", lambda a: lax.linalg.eig(a, compute_left_eigenvectors=True), a)
    assert w.dtype == vl.dtype == vr.dtype == np.complex64
    a64 = a.astype(np.complex128)
    bound = C * n * eps(np.float32) * norm(a)
    # A vr = vr diag(w) and vl^H A = diag(w) vl^H, each vector of unit 2-norm (LAPACK's normalisation,
    # which JAX's CPU backend returns as is).
    assert_small(a64 @ vr - vr * w[..., None, :], bound, "A vr - vr diag(w)")
    assert_small(H(vl) @ a64 - w[..., :, None] * H(vl), bound, "vl^H A - diag(w) vl^H")
    np.testing.assert_allclose(np.linalg.norm(vr, axis=-2), 1, rtol=10 * n * eps(np.float32))
    np.testing.assert_allclose(np.linalg.norm(vl, axis=-2), 1, rtol=10 * n * eps(np.float32))
    # The largest component of each vector is real, as LAPACK leaves it.
    big = np.take_along_axis(vr, np.argmax(np.abs(vr), axis=-2)[..., None, :], axis=-2)
    np.testing.assert_allclose(big.imag, 0, atol=10 * eps(np.float32))
    # Eigenvalues: the CPU's, in any order (sorted here; random matrices have well-separated ones).
    expected = run_on("cpu", jnp.linalg.eigvals, a)
    np.testing.assert_allclose(np.sort_complex(w.astype(np.complex128)), np.sort_complex(expected.astype(np.complex128)),
                               atol=float(np.max(bound)) * 10)


def test_eig_real_matrix_with_conjugate_pairs_and_real_eigenvalues():
    rotation = np.array([[0, -1, 0], [1, 0, 0], [0, 0, 2]], np.float32)  # eigenvalues +-i and 2
    w, v = run_on("metal", jnp.linalg.eig, rotation)
    order = np.argsort(w.imag)
    np.testing.assert_allclose(w[order], [-1j, 2, 1j], atol=1e-6)
    # The pair's vectors are each other's conjugates, as LAPACK's packed (re, im) columns unpack to.
    i, j = order[0], order[2]
    np.testing.assert_allclose(v[:, i], np.conj(v[:, j]), atol=1e-6)
    np.testing.assert_allclose(rotation @ v, v * w, atol=1e-6)


def test_eig_only_what_is_asked_and_non_finite_input():
    a = RNG.standard_normal((4, 4)).astype(np.float32)
    w, vl = run_on("metal", lambda a: lax.linalg.eig(a, compute_left_eigenvectors=True,
                                                     compute_right_eigenvectors=False), a)
    assert vl.shape == (4, 4)
    assert_small(H(vl) @ a - w[:, None] * H(vl), C * 4 * eps(np.float32) * norm(a), "left only")
    (w_only,) = run_on("metal", lambda a: lax.linalg.eig(a, compute_left_eigenvectors=False,
                                                          compute_right_eigenvectors=False), a)
    np.testing.assert_allclose(np.sort_complex(w_only), np.sort_complex(w), atol=1e-5)
    bad = np.stack([a, a]).copy()
    bad[1, 0, 0] = np.nan
    w2, v2 = run_on("metal", jnp.linalg.eig, bad)
    assert np.isnan(w2[1]).all() and np.isnan(v2[1]).all(), "a matrix with a NaN gives NaN, as on CPU"
    assert np.isfinite(w2[0]).all() and np.isfinite(v2[0]).all(), "the other batch member is unaffected"


def test_eigvals_grad_and_vmap():
    a = RNG.standard_normal((3, 4, 4)).astype(np.float32)
    check(jax.vmap(lambda a: jnp.sort_complex(jnp.linalg.eigvals(a))), a, rtol=1e-4, atol=1e-5)
    f = lambda a: jnp.sum(jnp.real(jnp.linalg.eigvals(a)) ** 2)  # symmetric in the eigenvalues
    check(jax.grad(f), a[0], rtol=1e-3, atol=1e-4)


# ---- complex factorisations


@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 5, 5)])
def test_cholesky_and_solve(shape):
    a = hpd(shape)
    n = shape[-1]
    tol = decomposition_tolerance(np.complex64, n)
    check(jnp.linalg.cholesky, a, rtol=tol, atol=tol * np.sqrt(float(norm(a).max())))
    check(lambda a: jnp.linalg.cholesky(a, upper=True), a, rtol=tol, atol=tol * np.sqrt(float(norm(a).max())))
    b = cplx(shape[:-1] + (3,))
    check(lambda a, b: jsl.cho_solve(jsl.cho_factor(a), b), a, b, rtol=tol, atol=tol)
    g = well_conditioned(shape)
    check(jnp.linalg.solve, g, b, rtol=tol, atol=tol)
    check(jnp.linalg.inv, g, rtol=tol, atol=tol)


def test_cholesky_of_a_matrix_that_is_not_positive_definite_is_nan():
    a = np.stack([hpd((3, 3)), -hpd((3, 3))])
    l = check(jnp.linalg.cholesky, a, rtol=1e-5, atol=1e-5)  # NaN where the CPU's is NaN
    assert np.isfinite(l[0]).all() and np.isnan(l[1][np.tril_indices(3)]).all()


@pytest.mark.parametrize("left,lower,transpose,conjugate,unit",
                         list(itertools.product([True, False], [True, False], [False, True], [False, True],
                                                [False, True])), ids=str)
def test_triangular_solve_every_flag(left, lower, transpose, conjugate, unit):
    a = well_conditioned((2, 4, 4))
    b = cplx((2, 4, 3) if left else (2, 3, 4))
    f = lambda a, b: lax.linalg.triangular_solve(a, b, left_side=left, lower=lower, transpose_a=transpose,
                                                 conjugate_a=conjugate, unit_diagonal=unit)
    tol = decomposition_tolerance(np.complex64, 4, condition=100.0)
    check(f, a, b, rtol=tol, atol=tol)


@pytest.mark.parametrize("shape", [(4, 4), (2, 5, 3), (3, 4)])
def test_lu_matches_lapack(shape):
    a = cplx(shape)
    lu, pivots, perm = run_on("metal", lax.linalg.lu, a)
    lu_c, pivots_c, perm_c = run_on("cpu", lax.linalg.lu, a)
    np.testing.assert_array_equal(pivots, pivots_c)
    np.testing.assert_array_equal(perm, perm_c)
    tol = decomposition_tolerance(np.complex64, max(shape[-2:]), condition=100.0)
    assert_close(lu, lu_c, rtol=tol, atol=tol)
    m, n = shape[-2:]
    k = min(m, n)
    l = np.tril(lu, -1)[..., :, :k] + np.eye(m, k)
    u = np.triu(lu)[..., :k, :]
    a_perm = np.take_along_axis(a, perm[..., :, None], axis=-2)
    assert_small(a_perm - l @ u, C * k * eps(np.complex64) * norm(a), "a[perm] - L U")


@pytest.mark.parametrize("shape", [(4, 4), (6, 3), (3, 5), (2, 5, 4)])
@pytest.mark.parametrize("mode", ["reduced", "complete"])
def test_qr_matches_lapack(shape, mode):
    a = cplx(shape)
    tol = decomposition_tolerance(np.complex64, max(shape[-2:]), condition=10.0)
    q, r = check(lambda a: jnp.linalg.qr(a, mode=mode), a, rtol=tol, atol=tol)
    assert_small(q @ r - a, C * max(shape) * eps(np.complex64) * norm(a), "QR - A")
    k = q.shape[-1]
    assert_small(H(q) @ q - np.eye(k), C * max(shape) * eps(np.complex64), "Q^H Q - I")


@pytest.mark.parametrize("shape", [(5, 5), (3, 4, 4)])
@pytest.mark.parametrize("lower", [True, False])
def test_eigh(shape, lower):
    a = hermitian(shape)
    n = shape[-1]
    tol = C * n * eps(np.complex64) * float(norm(a).max())
    v, w = run_on("metal", lambda a: lax.linalg.eigh(a, lower=lower), a)
    v_c, w_c = run_on("cpu", lambda a: lax.linalg.eigh(a, lower=lower), a)
    assert w.dtype == np.float32 and v.dtype == np.complex64
    assert_close(w, w_c, rtol=0, atol=tol)
    assert (np.diff(w, axis=-1) >= 0).all(), "eigenvalues ascend"
    # Only the chosen triangle is read: the Hermitian matrix it describes.
    full = np.tril(a) + H(np.tril(a, -1)) if lower else np.triu(a) + H(np.triu(a, 1))
    assert_small(full @ v - v * w[..., None, :], tol, "A V - V diag(w)")
    assert_small(H(v) @ v - np.eye(n), C * n * eps(np.complex64), "V^H V - I")
    check(jnp.linalg.eigvalsh, a, rtol=0, atol=tol)


@pytest.mark.parametrize("shape", [(5, 5), (6, 4), (2, 3, 5)])
@pytest.mark.parametrize("full_matrices", [False, True])
def test_svd(shape, full_matrices):
    a = cplx(shape)
    m, n = shape[-2:]
    k = min(m, n)
    tol = C * max(m, n) * eps(np.complex64) * float(norm(a).max())
    check(lambda a: jnp.linalg.svd(a, compute_uv=False), a, rtol=0, atol=tol)
    u, s, vt = run_on("metal", lambda a: jnp.linalg.svd(a, full_matrices=full_matrices), a)
    assert s.dtype == np.float32 and u.dtype == vt.dtype == np.complex64
    assert u.shape[-2:] == ((m, m) if full_matrices else (m, k))
    assert vt.shape[-2:] == ((n, n) if full_matrices else (k, n))
    assert (np.diff(s, axis=-1) <= 0).all(), "singular values descend"
    assert_small((u[..., :, :k] * s[..., None, :]) @ vt[..., :k, :] - a, tol, "U S V^H - A")
    assert_small(H(u) @ u - np.eye(u.shape[-1]), C * max(m, n) * eps(np.complex64), "U^H U - I")
    assert_small(vt @ H(vt) - np.eye(vt.shape[-2]), C * max(m, n) * eps(np.complex64), "V^H V - I")


def test_what_uses_the_factorisations():
    a = well_conditioned((4, 4))
    b = cplx((4, 2))
    tol = decomposition_tolerance(np.complex64, 4, condition=100.0)
    check(jnp.linalg.pinv, a, rtol=tol, atol=tol)
    check(lambda a, b: jnp.linalg.lstsq(a, b)[0], a, b, rtol=tol, atol=tol)
    check(lambda a: jnp.linalg.norm(a, ord=2), a, rtol=tol, atol=tol)
    check(lambda a: jnp.linalg.matrix_rank(a), a)


# ---- grads and vmap


def test_grads():
    tol = {"rtol": 2e-3, "atol": 2e-4}
    a = hpd((4, 4))
    g = well_conditioned((4, 4))
    b = cplx((4, 2))
    real = lambda x: jnp.sum(jnp.real(x) ** 2 + jnp.imag(x))  # a real function of a complex result
    check(jax.grad(lambda a: real(jnp.linalg.cholesky(a)), holomorphic=False), a, **tol)
    check(jax.grad(lambda g, b: real(jnp.linalg.solve(g, b)), argnums=(0, 1)), g, b, **tol)
    check(jax.grad(lambda g, b: real(lax.linalg.triangular_solve(g, b, left_side=True, lower=True,
                                                                 conjugate_a=True)), argnums=(0, 1)), g, b, **tol)
    check(jax.grad(lambda g: real(jnp.linalg.qr(g)[1])), g, **tol)
    check(jax.grad(lambda h: jnp.sum(jnp.linalg.eigvalsh(h) ** 2)), hermitian((4, 4)), **tol)
    check(jax.grad(lambda g: jnp.sum(jnp.linalg.svd(g, compute_uv=False))), g, **tol)


def test_vmap():
    tol = {"rtol": 1e-4, "atol": 1e-5}
    a = well_conditioned((3, 4, 4))
    b = cplx((3, 4))
    check(jax.vmap(jnp.linalg.solve), a, b, **tol)
    check(jax.vmap(lambda a: jnp.linalg.qr(a)[1]), a, **tol)
    check(jax.vmap(jnp.linalg.eigvalsh), hermitian((3, 4, 4)), rtol=0, atol=1e-4)
    check(jax.vmap(lambda a: lax.linalg.lu(a)[2]), a)


# ---- float64 and complex128 (LAPACK on the host)


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_float64_and_complex128_factorisations(x64, dtype):
    a = cplx((2, 4, 4), dtype) if dtype == np.complex128 else RNG.standard_normal((2, 4, 4))
    a = (a + 4 * np.eye(4)).astype(dtype)
    h = (a @ H(a)).astype(dtype)
    b = a[..., :2].copy()
    tol = decomposition_tolerance(dtype, 4, condition=100.0)
    for fn, args in [(jnp.linalg.cholesky, (h,)), (jnp.linalg.solve, (a, b)), (jnp.linalg.qr, (a,)),
                     (jnp.linalg.eigvalsh, (h,)), (lambda a: jnp.linalg.svd(a, compute_uv=False), (a,)),
                     (lax.linalg.lu, (a,)), (jnp.linalg.inv, (a,))]:
        check(fn, *args, rtol=tol, atol=tol * float(norm(h).max()))
    w, v = run_on("metal", jnp.linalg.eig, a)
    assert w.dtype == v.dtype == np.complex128
    assert_small(a @ v - v * w[..., None, :], C * 4 * eps(dtype) * norm(a), "A V - V diag(w)")

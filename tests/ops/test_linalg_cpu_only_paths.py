"""Linear algebra JAX lowers for CPU and GPU only, on metal through the plugin's LAPACK ops (for every
dtype, float32 included): QR with column pivoting (geqp3: `qr(pivoting=True)`, `qr_multiply`) and
`tridiagonal_solve` (gtsv, with row pivoting, where JAX's generic lowering has none; and with
`perturb_singular`). Each against JAX's CPU backend, which calls the same LAPACK routines, with bounds
scaled by the operands' norms, and by the defining properties of the result."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from jaxcompare import eps, run_on

RNG = np.random.default_rng(23)
DTYPES = [np.float32, np.complex64, np.float64, np.complex128]


def sample(shape, dtype):
    a = RNG.standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        a = a + 1j * RNG.standard_normal(shape)
    return a.astype(dtype)


def x64_for(dtype):
    return jax.enable_x64(np.dtype(dtype) in (np.dtype(np.float64), np.dtype(np.complex128)))


def both(fn, *args):
    return run_on("metal", fn, *args), run_on("cpu", fn, *args)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(6, 4), (4, 6), (5, 5), (3, 7, 5)])
@pytest.mark.parametrize("mode", ["full", "economic"])
def test_pivoted_qr(dtype, shape, mode):
    a = sample(shape, dtype)
    with x64_for(dtype):
        f = jax.vmap(lambda a: jax.scipy.linalg.qr(a, pivoting=True, mode=mode)) if len(shape) == 3 else (
            lambda a: jax.scipy.linalg.qr(a, pivoting=True, mode=mode))
        (q, r, p), (q_cpu, r_cpu, p_cpu) = both(f, a)
    np.testing.assert_array_equal(p, p_cpu)  # random columns: no ties in the pivot choice
    tol = 30 * max(shape[-2:]) * eps(dtype)
    scale = np.abs(a).max()
    assert np.abs(r - r_cpu).max() <= tol * scale and np.abs(q - q_cpu).max() <= tol
    for b in range(a.shape[0] if a.ndim == 3 else 1):
        ab, qb, rb, pb = (a[b], q[b], r[b], p[b]) if a.ndim == 3 else (a, q, r, p)
        assert np.abs(ab[:, pb] - qb @ rb).max() <= tol * scale  # a P = Q R
        assert np.abs(np.conj(qb.T) @ qb - np.eye(qb.shape[1])).max() <= tol  # orthonormal columns
        diag = np.abs(np.diag(rb))
        assert np.all(diag[1:] <= diag[:-1] * (1 + tol))  # pivoting orders |diag R|


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
def test_pivoted_qr_r_mode_and_qr_multiply(dtype):
    a, c = sample((7, 5), dtype), sample((7,), dtype)
    (r, p), (r_cpu, p_cpu) = both(lambda a: jax.scipy.linalg.qr(a, pivoting=True, mode="r"), a)
    np.testing.assert_array_equal(p, p_cpu)
    tol = 30 * 7 * eps(dtype) * np.abs(a).max()
    assert np.abs(r - r_cpu).max() <= tol
    (cq, r, p), (cq_cpu, r_cpu, _) = both(lambda a, c: jax.scipy.linalg.qr_multiply(a, c, pivoting=True), a, c)
    assert np.abs(cq - cq_cpu).max() <= tol * np.abs(c).max() and np.abs(r - r_cpu).max() <= tol


def diagonals(shape, dtype, dominant=True):
    dl, d, du = (sample(shape, dtype) for _ in range(3))
    if dominant:
        d = (d + 4 * np.sign(d.real)).astype(dtype)
    return dl, d, du


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch,n,k", [((), 7, 1), ((3,), 5, 2), ((2, 2), 9, 3), ((), 1, 2), ((), 2, 1)])
def test_tridiagonal_solve(dtype, batch, n, k):
    dl, d, du = diagonals(batch + (n,), dtype)
    b = sample(batch + (n, k), dtype)
    with x64_for(dtype):
        x, x_cpu = both(lambda *a: lax.linalg.tridiagonal_solve(*a), dl, d, du, b)
    # Diagonally dominant: condition number below ~3, a backward stable solve is accurate to ~eps.
    assert np.abs(x - x_cpu).max() <= 30 * n * eps(dtype) * np.abs(x_cpu).max()


@pytest.mark.parametrize("perturb", [False, True])
def test_tridiagonal_solve_that_needs_row_pivoting(perturb):
    # Row 0's diagonal is small beside the row below it: without row swaps the elimination loses
    # everything (JAX's generic lowering gives NaN here); LAPACK's pivoting gives the exact solution.
    dl = np.array([0.0, 2.0, -2.0, 3.0], np.float32)
    d = np.array([1.0, 4.0, 1.0, -1.0], np.float32)
    du = np.array([2.0, -1.0, 1.0, 0.0], np.float32)
    b = np.array([[1.0], [2.0], [3.0], [4.0]], np.float32)
    f = lambda *a: lax.linalg.tridiagonal_solve(*a, perturb_singular=perturb)
    x, x_cpu = both(f, dl, d, du, b)
    np.testing.assert_allclose(x, [[8.0], [-3.5], [0.0], [-4.0]], atol=1e-5)
    np.testing.assert_allclose(x, x_cpu, atol=1e-5)


@pytest.mark.parametrize("dtype", DTYPES)
def test_tridiagonal_solve_of_a_singular_system(dtype):
    # [[1, 3], [1, 3]] is singular: gtsv fails and the result is NaN, as on CPU; perturbed, the pivots
    # move off zero and the result is finite and huge, as on CPU (the same method, the same numbers).
    dl, d, du = (np.array(v, dtype) for v in ([0, 1], [1, 3], [3, 0]))
    b = np.array([[1], [4]], dtype)
    zero = np.zeros(3, dtype)
    with x64_for(dtype):
        x, x_cpu = both(lambda *a: lax.linalg.tridiagonal_solve(*a), dl, d, du, b)
        assert np.all(np.isnan(x)) and np.all(np.isnan(x_cpu))
        f = lambda *a: lax.linalg.tridiagonal_solve(*a, perturb_singular=True)
        x, x_cpu = both(f, dl, d, du, b)
        z, z_cpu = both(f, zero, zero, zero, np.ones((3, 1), dtype))
    assert np.all(np.isfinite(x)) and np.all(np.abs(x) > 1e6)
    np.testing.assert_allclose(x, x_cpu, rtol=1e-6)
    assert np.all(np.isfinite(z))
    np.testing.assert_allclose(z, z_cpu, rtol=1e-6)


def test_tridiagonal_solve_perturbed_matches_cpu_on_random_near_singular_systems():
    # T - lambda I for an eigenvalue lambda of T (inverse iteration's system): nearly singular, so the
    # perturbation decides the answer; the same method gives the same direction, up to rounding.
    n = 8
    dl, d, du = diagonals((n,), np.float64, dominant=False)
    dl[0] = du[-1] = 0
    du = dl.copy()
    du[:-1], du[-1] = dl[1:], 0  # symmetric
    t = np.diag(d) + np.diag(dl[1:], -1) + np.diag(du[:-1], 1)
    lam = np.linalg.eigvalsh(t)[3]
    b = np.ones((n, 1))
    with jax.enable_x64(True):
        f = lambda *a: lax.linalg.tridiagonal_solve(*a, perturb_singular=True)
        x, x_cpu = both(f, dl, d - lam, du, b)
    direction = lambda v: v / np.linalg.norm(v) * np.sign(v[np.argmax(np.abs(v))])
    assert np.abs(direction(x) - direction(x_cpu)).max() <= 1e-6


def test_tridiagonal_solve_grad_and_vmap():
    dl, d, du = diagonals((6,), np.float32)
    b = sample((6, 2), np.float32)
    loss = lambda dl, d, du, b: jnp.sum(jnp.sin(lax.linalg.tridiagonal_solve(dl, d, du, b)))
    g, g_cpu = both(jax.grad(loss, argnums=(0, 1, 2, 3)), dl, d, du, b)
    for got, want in zip(g, g_cpu):
        assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max()
    bs = sample((4, 6, 2), np.float32)
    y, y_cpu = both(jax.vmap(lambda b: lax.linalg.tridiagonal_solve(dl, d, du, b)), bs)
    assert np.abs(y - y_cpu).max() <= 1e-5 * np.abs(y_cpu).max()


def test_pivoted_qr_grad_of_r():
    a = sample((5, 4), np.float32)
    f = jax.grad(lambda a: jnp.sum(jax.scipy.linalg.qr(a, pivoting=True, mode="economic")[1] ** 2))
    g, g_cpu = both(f, a)
    assert np.abs(g - g_cpu).max() <= 1e-4 * np.abs(g_cpu).max()

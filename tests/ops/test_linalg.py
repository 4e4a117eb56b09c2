"""Linear algebra through stablehlo.triangular_solve, stablehlo.cholesky and XLA's QR and Eigh custom
calls (lowered to MPS-op loops), and what JAX builds on them and on its own LU: solve, inv, det, cholesky,
cho_solve, solve_triangular, qr, eigh, svd, pinv, lstsq, multivariate normals; every flag of
triangular_solve, batches, grads and vmap, against the CPU backend."""

import itertools

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest
from jax import lax
from jax_metal_plugin._jax_internals import linalg as lax_linalg_internal  # geqrf: the raw factored form and taus

from jaxcompare import check, check_reduction, random_array, run_on

RNG = np.random.default_rng(21)
TOL = {"rtol": 2e-4, "atol": 2e-5}


def _low_precision_primitive(name, abstract_eval, lowering):
    """A primitive lowering to the StableHLO JAX emits for a linear-algebra op (stablehlo.cholesky, the
    "Eigh" custom call) whatever operand types the installed JAX's own primitive accepts: JAX 0.10
    passes float16 and bfloat16 to the backend, JAX 0.12's jnp.linalg and lax.linalg refuse them; the
    plugin's lowering of the ops takes them either way (computing in float32)."""
    from jax_metal_plugin._jax_internals import core, mlir

    p = core.Primitive(name)
    p.multiple_results = isinstance(abstract_eval(core.ShapedArray((2, 2), np.float32)), (list, tuple))
    p.def_abstract_eval(abstract_eval)
    mlir.register_lowering(p, lowering)
    return p


def _cholesky_rule(ctx, a):
    from jax_metal_plugin._jax_internals import hlo, ir
    return [hlo.cholesky(a, lower=ir.BoolAttr.get(True))]


def _eigh_rule(ctx, a):
    from jax_metal_plugin._jax_internals import tpu_eigh  # the rule the plugin uses for float32 eigh on metal
    return tpu_eigh._eigh_tpu_lowering(ctx, a, lower=True, sort_eigenvalues=True, subset_by_index=None,
                                       algorithm=lax.linalg.EighImplementation.JACOBI)


_raw_cholesky_p = _low_precision_primitive("raw_cholesky", lambda a: a.update(), _cholesky_rule)
_raw_eigh_p = _low_precision_primitive("raw_eigh", lambda a: (a.update(), a.update(shape=a.shape[:-1])), _eigh_rule)


def low_precision_variants(public, raw, a):
    """Ways to apply the op to a float16/bfloat16 operand like `a`: jnp.linalg's when the installed JAX
    accepts the type, and the raw StableHLO op either way."""
    try:
        jax.eval_shape(public, a)
    except TypeError:  # JAX refuses the type: the raw op is left to exercise the lowering with
        return [raw]
    return [public, raw]


def well_conditioned(shape):
    n = shape[-1]
    return (random_array(RNG, shape, np.float32) + 2 * n ** 0.5 * np.eye(n, dtype=np.float32)).astype(np.float32)


def spd(shape):
    a = random_array(RNG, shape, np.float32)
    return (a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1], dtype=np.float32)).astype(np.float32)


@pytest.mark.parametrize("left,lower,transpose,unit", list(itertools.product([True, False], [True, False], [0, 1, 2],
                                                                              [False, True])), ids=str)
def test_triangular_solve_every_flag(left, lower, transpose, unit):
    a = well_conditioned((2, 6, 6))
    b = random_array(RNG, (2, 6, 3) if left else (2, 3, 6), np.float32)
    a[:, 0, 5] = a[:, 5, 0] = np.inf  # the triangle not named is never read
    a[:, 1, 1] = a[:, 1, 1] if not unit else np.nan  # nor the diagonal of a unit one
    check(lambda a, b: lax.linalg.triangular_solve(a, b, left_side=left, lower=lower, transpose_a=bool(transpose),
                                                   conjugate_a=transpose == 2, unit_diagonal=unit), a, b, **TOL)


@pytest.mark.parametrize("n", [1, 2, 7, 40])
def test_solve_inv_det(n):
    a = well_conditioned((n, n))
    b = random_array(RNG, (n, 4), np.float32)
    # LU with partial pivoting: forward errors within cond(A) * 3n * eps of the solution's norm (and of
    # the determinant's magnitude; log|det|'s absolute error is the determinant's relative one).
    k = 3 * n * int(np.ceil(np.linalg.cond(a.astype(np.float64))))
    check_reduction(lambda a, b: (jnp.linalg.solve(a, b), jnp.linalg.inv(a)), a, b, k=k, magnitude="normwise")
    check_reduction(lambda a: (jnp.linalg.det(a), *jnp.linalg.slogdet(a)), a, k=k,
                    magnitude=lambda a: [abs(np.linalg.det(a.astype(np.float64))), 0.0, 1.0])


def test_cholesky_and_what_uses_it():
    a = spd((3, 9, 9))
    b = random_array(RNG, (3, 9, 2), np.float32)
    check(jnp.linalg.cholesky, a, **TOL)
    check(lambda a: jsl.cholesky(a, lower=False), a, **TOL)
    check(jax.vmap(lambda a, b: jsl.cho_solve(jsl.cho_factor(a), b)), a, b[..., 0], **TOL)
    check(jax.vmap(lambda a, b: jsl.solve(a, b, assume_a="pos")), a, b, **TOL)
    # Only the named triangle is read.
    lower_only = np.tril(a) + np.triu(np.full_like(a, np.inf), 1)
    check(lambda a: lax.linalg.cholesky(a, symmetrize_input=False), lower_only, **TOL)


def test_cholesky_of_a_matrix_that_is_not_positive_definite():
    a = spd((5, 5))
    a[2, 2] = -50.0
    batch = np.stack([a, spd((5, 5))])  # only the failing matrix of a batch is NaN
    want = check(jnp.linalg.cholesky, batch, **TOL)
    assert np.isnan(want[0][np.tril_indices(5)]).all() and not np.isnan(want[1]).any()


def test_cholesky_of_a_singular_positive_semidefinite_matrix_fails():
    # A zero pivot fails as LAPACK's potrf decides (pivot <= 0), rank-deficient covariances included:
    # ones((2, 2)) leaves exactly 0 for the last pivot, and sqrt(0) would pass as a factor.
    v = np.array([[1.0], [2.0], [-1.0]], np.float32)
    batch = np.stack([np.ones((2, 2), np.float32), np.eye(2, dtype=np.float32)])
    want = check(jnp.linalg.cholesky, batch, **TOL)
    assert np.isnan(want[0][np.tril_indices(2)]).all() and not np.isnan(want[1]).any()
    check(jnp.linalg.cholesky, (v @ v.T).astype(np.float32), **TOL)
    check(lambda m: jax.random.multivariate_normal(jax.random.key(0), jnp.zeros(2), m, (4,), method="cholesky"),
          np.ones((2, 2), np.float32), **TOL)


def test_grads_vmap_and_low_precision():
    a = well_conditioned((5, 5))
    s = spd((5, 5))
    b = random_array(RNG, (5, 2), np.float32)
    check(jax.grad(lambda a, b: jnp.sum(jnp.linalg.solve(a, b) ** 2), argnums=(0, 1)), a, b, rtol=1e-3, atol=1e-4)
    check(jax.grad(lambda s: jnp.sum(jnp.linalg.cholesky(s) * np.arange(25.0).reshape(5, 5))), s, rtol=1e-3, atol=1e-4)
    check(jax.vmap(jnp.linalg.solve, in_axes=(None, 1), out_axes=1), a, b, **TOL)
    # XLA:CPU's LAPACK has no float16/bfloat16 kernels: the reference is its float32 result.
    want = run_on("cpu", jnp.linalg.cholesky, s)
    for cholesky in low_precision_variants(jnp.linalg.cholesky, _raw_cholesky_p.bind, s.astype(jnp.bfloat16)):
        got = run_on("metal", lambda s: cholesky(s.astype(jnp.bfloat16)).astype(jnp.float32), s)
        np.testing.assert_allclose(got, want, rtol=5e-2, atol=5e-2)
    half = lambda a, b, t: lax.linalg.triangular_solve(a.astype(t), b.astype(t), left_side=True, lower=True)
    np.testing.assert_allclose(run_on("metal", lambda a, b: half(a, b, jnp.float16).astype(jnp.float32), a, b),
                               run_on("cpu", lambda a, b: half(a, b, jnp.float32), a, b), rtol=1e-2, atol=1e-2)


def test_gaussian_process_posterior_and_sampling():
    x = np.linspace(0, 1, 24, dtype=np.float32)[:, None]
    y = np.sin(6 * x[:, 0]).astype(np.float32)

    def posterior(x, y):
        k = jnp.exp(-((x - x.T) ** 2) / 0.02) + 1e-3 * jnp.eye(x.shape[0])
        chol = jnp.linalg.cholesky(k)
        alpha = jsl.cho_solve((chol, True), y)
        mean = k @ alpha
        return mean, -0.5 * y @ alpha - jnp.sum(jnp.log(jnp.diag(chol)))

    check(posterior, x, y, rtol=1e-3, atol=1e-3)
    cov = spd((4, 4))
    draw = lambda key, cov: jax.random.multivariate_normal(key, jnp.zeros(4), cov, (3,))
    key = jax.random.key(3)
    got = jax.jit(draw)(jax.device_put(key, jax.devices("metal")[0]), jax.device_put(cov, jax.devices("metal")[0]))
    want = jax.jit(draw)(jax.device_put(key, jax.devices("cpu")[0]), jax.device_put(cov, jax.devices("cpu")[0]))
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("shape", [(4, 3), (3, 5), (6, 6), (2, 7, 4), (1, 1), (40, 12)], ids=str)
def test_qr_matches_lapack(shape):
    # XLA's Qr and ProductOfElementaryHouseholderReflectors custom calls: Householder QR with LAPACK's
    # sign convention, so Q and R agree with the CPU backend's LAPACK elementwise, not just up to signs.
    a = random_array(RNG, shape, np.float32)
    for mode in ("reduced", "complete", "r"):
        check(lambda a: jnp.linalg.qr(a, mode=mode), a, **TOL)
    check(lax_linalg_internal.geqrf, a, **TOL)  # R, the vectors below it and the taus, as LAPACK stores them
    if shape[-2] >= shape[-1]:  # householder_product needs at least as many rows as columns
        check(lambda a: lax.linalg.householder_product(*lax_linalg_internal.geqrf(a)), a, **TOL)


def test_qr_of_reduced_columns_grads_and_vmap():
    a = random_array(RNG, (6, 4), np.float32)
    a[:, 1] = 0.0          # an all-zero column: tau 0, the reflector is the identity
    a[3:, 2] = 0.0         # a column already reduced below the diagonal
    check(lambda a: jnp.linalg.qr(a), a, **TOL)
    b = random_array(RNG, (6, 4), np.float32)
    check(jax.grad(lambda b: jnp.sum(jnp.linalg.qr(b)[1] ** 2)), b, rtol=1e-3, atol=1e-4)
    check(jax.vmap(jnp.linalg.qr), random_array(RNG, (3, 5, 5), np.float32), **TOL)


def separated(n, batch=()):
    """A symmetric matrix with eigenvalues 1.5 apart (so eigenvectors are well defined) and random
    eigenvectors."""
    q, _ = np.linalg.qr(RNG.standard_normal((*batch, n, n)))
    w = np.linspace(-0.75 * n, 0.75 * n, n)
    return ((q * w[..., None, :]) @ np.swapaxes(q, -1, -2)).astype(np.float32)


def symmetric(shape):
    a = random_array(RNG, shape, np.float32)
    return ((a + np.swapaxes(a, -1, -2)) / 2).astype(np.float32)


def signs_aligned(v, reference):
    """v's columns flipped to point the way reference's do (an eigenvector's sign is arbitrary)."""
    return v * np.where(np.sum(v * reference, axis=-2, keepdims=True) < 0, -1, 1).astype(v.dtype)


def assert_eigh_like_lapack(a, w, v, w_cpu, v_cpu, rtol=2e-4):
    scale = float(np.abs(a).max()) or 1.0
    np.testing.assert_allclose(w, w_cpu, rtol=rtol, atol=rtol * scale)
    n = a.shape[-1]
    eye = np.eye(n, dtype=np.float32)
    assert np.abs(np.swapaxes(v, -1, -2) @ v - eye).max() < 4e-6 * max(n, 4)      # orthonormal
    assert np.abs(a @ v - v * w[..., None, :]).max() < 4e-6 * max(n, 4) * scale   # A v = v w


@pytest.mark.parametrize("n,batch", [(1, ()), (2, ()), (3, ()), (8, (2,)), (17, ()), (64, ())], ids=str)
def test_eigh_matches_lapack(n, batch):
    # The Eigh custom call (Jacobi): eigenvalues as LAPACK's syevd gives them, ascending; eigenvectors
    # equal to LAPACK's up to each one's sign when the eigenvalues are apart.
    a = separated(n, batch)
    w, v = run_on("metal", jnp.linalg.eigh, a)
    w_cpu, v_cpu = run_on("cpu", jnp.linalg.eigh, a)
    assert_eigh_like_lapack(a, w, v, w_cpu, v_cpu)
    np.testing.assert_allclose(signs_aligned(v, v_cpu), v_cpu, atol=5e-5)
    # Clustered eigenvalues (a random symmetric matrix): the decomposition is as exact as LAPACK's.
    b = symmetric((*batch, n, n))
    w, v = run_on("metal", jnp.linalg.eigh, b)
    assert_eigh_like_lapack(b, w, v, *run_on("cpu", jnp.linalg.eigh, b))


def test_eigh_reads_one_triangle_and_handles_degenerate_and_nan():
    a = symmetric((6, 6))
    for lower in (True, False):
        only = np.where(np.tri(6, dtype=bool) if lower else np.tri(6, dtype=bool).T, a, np.nan).astype(np.float32)
        check(lambda x: lax.linalg.eigh(x, lower=lower, symmetrize_input=False)[1], only, **TOL)
    # Repeated eigenvalues: any orthonormal basis of each eigenspace is right.
    q, _ = np.linalg.qr(RNG.standard_normal((5, 5)))
    d = ((q * np.array([2.0, 2.0, 2.0, -1.0, -1.0])) @ q.T).astype(np.float32)
    for m in (d, np.eye(5, dtype=np.float32), np.zeros((5, 5), np.float32)):
        w, v = run_on("metal", jnp.linalg.eigh, m)
        assert_eigh_like_lapack(m, w, v, *run_on("cpu", jnp.linalg.eigh, m))
    # A NaN anywhere: NaN eigenvalues and eigenvectors, as LAPACK's failure gives on the CPU backend.
    bad = symmetric((2, 4, 4))
    bad[1, 2, 1] = bad[1, 1, 2] = np.nan
    w, v = run_on("metal", jnp.linalg.eigh, bad)
    w_cpu, v_cpu = run_on("cpu", jnp.linalg.eigh, bad)
    assert np.isnan(w_cpu[1]).all() and np.isnan(v_cpu[1]).all()
    assert np.isnan(w[1]).all() and np.isnan(v[1]).all()
    assert_eigh_like_lapack(bad[0], w[0], v[0], w_cpu[0], v_cpu[0])  # the batch's other matrix is unharmed


def test_eigh_grads_vmap_low_precision_and_large():
    a = separated(6, (3,))
    weights = np.arange(6, dtype=np.float32)
    check(jax.grad(lambda a: jnp.sum(jnp.linalg.eigvalsh(a) * weights)), a[0], rtol=1e-3, atol=1e-4)
    check(jax.grad(lambda a: jnp.sum(jnp.linalg.eigh(a)[1] ** 2 * weights)), a[0], rtol=1e-3, atol=1e-3)
    check(jax.vmap(jnp.linalg.eigvalsh), a, **TOL)
    # float16 and bfloat16 compute in float32 (LAPACK on the CPU backend has no float16 eigh).
    want = run_on("cpu", jnp.linalg.eigvalsh, a)
    for dtype in (jnp.float16, jnp.bfloat16):
        for eigvalsh in low_precision_variants(jnp.linalg.eigvalsh, lambda a: _raw_eigh_p.bind(a)[1], a.astype(dtype)):
            got = run_on("metal", eigvalsh, a.astype(dtype))
            assert got.dtype == dtype
            np.testing.assert_allclose(got.astype(np.float32), want, rtol=2e-2, atol=2e-2 * np.abs(want).max())
    # From FLOAT32_LAPACK_FROM rows on float32 eigh runs on LAPACK (tests/ops/test_eigh_svd_float32_lapack.py).
    big = separated(260)
    w, v = run_on("metal", jnp.linalg.eigh, big)
    w_cpu, v_cpu = run_on("cpu", jnp.linalg.eigh, big)
    np.testing.assert_allclose(w, w_cpu, rtol=1e-4, atol=1e-3)
    assert np.abs(big @ v - v * w).max() < 2e-3 * np.abs(big).max()


@pytest.mark.parametrize("shape", [(5, 5), (7, 4), (3, 6), (2, 6, 5)], ids=str)
def test_svd_and_what_uses_it(shape):
    # JAX's SVD off CPU and GPU: QDWH polar decomposition, then eigh.
    a = random_array(RNG, shape, np.float32)
    check(lambda a: jnp.linalg.svd(a, compute_uv=False), a, **TOL)
    u, s, vt = run_on("metal", lambda a: jnp.linalg.svd(a, full_matrices=False), a)
    np.testing.assert_allclose((u * s[..., None, :]) @ vt, a, rtol=1e-4, atol=1e-4)
    k = min(shape[-2:])
    eye = np.eye(k, dtype=np.float32)
    assert np.abs(np.swapaxes(u, -1, -2) @ u - eye).max() < 1e-4
    assert np.abs(vt @ np.swapaxes(vt, -1, -2) - eye).max() < 1e-4
    if len(shape) == 2:
        check(jnp.linalg.pinv, a, rtol=1e-3, atol=1e-4)
        check(lambda a: jnp.linalg.norm(a, ord=2), a, **TOL)
        check(lambda a: jnp.linalg.lstsq(a, a[:, :2])[0], a, rtol=1e-3, atol=1e-4)
        check(jax.grad(lambda a: jnp.sum(jnp.linalg.svd(a, compute_uv=False))), a, rtol=1e-3, atol=1e-4)


def test_unsupported_linalg_names_the_op():
    # The LAPACK path computes whole decompositions: a subset of eigenvalues is refused by name.
    hermitian = (spd((3, 3)) + 0j).astype(np.complex64)
    with pytest.raises(Exception, match="eigh.*subset_by_index"):
        run_on("metal", lambda a: jax.lax.linalg.eigh(a, subset_by_index=(0, 2)), hermitian)
    # LAPACK has no half precision: eig is refused naming the type (by our lowering, or by JAX itself
    # in releases whose eig checks dtypes first).
    with pytest.raises(Exception, match=r"f16|float16"):
        run_on("metal", jnp.linalg.eigvals, np.eye(3, dtype=np.float16))

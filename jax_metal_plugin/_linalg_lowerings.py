"""Lowerings for platform "metal" that send linear algebra to the plugin's LAPACK kernels.

MPSGraph has float32 decompositions only; the plugin runs the others (float64, complex64, complex128)
on the host with LAPACK (Accelerate on macOS). JAX has no generic lowering for eig at all, and lowers
lu and svd for other platforms through algorithms built on float32-only pieces, so for those dtypes
(and for eig always) these rules emit custom calls the plugin maps to its LAPACK ops
(cpp/lower/lower_lapack.cc): ``jax_metal.lapack.eig``, ``jax_metal.lapack.lu``, ``jax_metal.lapack.svd``,
and ``jax_metal.lapack.eigh`` for eigh; float32 eigh and svd go there too for matrices of
FLOAT32_LAPACK_FROM rows and columns or more, and eigh with ``EighImplementation.QR`` (what cpu runs)
for every size. What JAX lowers for cpu and gpu only always goes to LAPACK, float32
included: tridiagonal (sytrd/hetrd) to ``jax_metal.lapack.tridiagonal``, geqp3 (the pivoted QR of
``qr(pivoting=True)``) to ``jax_metal.lapack.geqp3``, and tridiagonal_solve (gtsv, with row pivoting,
where JAX's generic lowering has none; or with ``perturb_singular``) to
``jax_metal.lapack.tridiagonal_solve``. cholesky, triangular_solve and qr need nothing here: JAX's generic
lowerings already reach the plugin, which chooses by dtype.

Everything used from JAX is internal: a name a JAX release lacks turns the feature off (an error naming
it when used); importing or initialising the plugin never fails because of it.
"""

from __future__ import annotations

import numpy as np

# Dtypes that go to LAPACK; float32 stays on the GPU decompositions (except eig, LAPACK for all).
_LAPACK_DTYPES = (np.dtype(np.float64), np.dtype(np.complex64), np.dtype(np.complex128))

# float32 eigh and svd go to LAPACK too from this matrix size on. JAX's GPU-side algorithms (Jacobi up
# to 256, QDWH splits above) cost O(n) dependent steps of whole-matrix ops per sweep, some ten sweeps,
# and QDWH adds tens of QR iterations: from a few dozen rows on that outweighs one round trip to the host
# (on a Mac Accelerate's LAPACK reads the same unified memory), and at 256 and above it is 100-1000x
# slower. Below, a batch of small matrices stays on the GPU, where Jacobi runs the whole batch at once.
FLOAT32_LAPACK_FROM = 64


def _uses_lapack(aval) -> bool:
    return np.dtype(aval.dtype) in _LAPACK_DTYPES


def _float32_on_lapack(aval) -> bool:
    return np.dtype(aval.dtype) == np.dtype(np.float32) and min(aval.shape[-2:]) >= FLOAT32_LAPACK_FROM


def _unavailable(what: str, missing: str):
    def rule(ctx, *args, **params):
        raise NotImplementedError(f"{what} on platform metal needs jax internals this JAX release lacks ({missing})")

    return rule


def enable() -> None:
    """Registers the rules above for platform "metal"; what this JAX lacks stays an error naming it."""
    try:
        from jax._src import core
        from jax._src.interpreters import mlir
        from jax._src.lax import linalg
    except ImportError:
        return
    custom_call = getattr(mlir, "custom_call", None)
    to_ir = getattr(mlir, "aval_to_ir_type", None)

    def call(ctx, target, operand, result_avals, config):
        return call_with(ctx, target, [operand], result_avals, config)

    def call_with(ctx, target, operands, result_avals, config):
        types = [to_ir(ctx.module_context, a) for a in result_avals]
        return custom_call(target, result_types=types, operands=list(operands), backend_config=config,
                           api_version=1).results

    def register(name, make_rule):
        primitive = getattr(linalg, name, None)
        if primitive is None:
            return
        if custom_call is None or to_ir is None:
            rule = _unavailable(name, "jax._src.interpreters.mlir.custom_call")
        else:
            rule = make_rule()
        if rule is None:  # float32's rule is missing here: JAX's generic lowering stays for every dtype
            return
        try:
            mlir.register_lowering(primitive, rule, platform="metal")
        except Exception:  # an unknown platform or a changed signature: leave JAX's own behaviour
            pass

    def eig_rule():
        def rule(ctx, operand, *, compute_left_eigenvectors=True, compute_right_eigenvectors=True, **params):
            implementation = params.get("implementation")
            if implementation is not None and getattr(implementation, "name", "LAPACK") != "LAPACK":
                raise NotImplementedError(f"eig: implementation {implementation} is not supported on platform "
                                          "metal (LAPACK only)")
            aval, = ctx.avals_in
            complex_dtype = np.result_type(aval.dtype, np.complex64)
            vectors = core.ShapedArray(aval.shape, complex_dtype)
            values = core.ShapedArray(aval.shape[:-1], complex_dtype)
            w, vl, vr = call(ctx, "jax_metal.lapack.eig", operand, [values, vectors, vectors],
                             f"{int(compute_left_eigenvectors)},{int(compute_right_eigenvectors)}")
            out = [w]
            if compute_left_eigenvectors:
                out.append(vl)
            if compute_right_eigenvectors:
                out.append(vr)
            return out

        return rule

    def lu_rule():
        python_lu = getattr(linalg, "_lu_python", None)
        if python_lu is None:
            return None
        fallback = mlir.lower_fun(python_lu, multiple_results=True)

        def rule(ctx, operand, **params):
            aval, = ctx.avals_in
            if not _uses_lapack(aval):
                return fallback(ctx, operand, **params)
            return call(ctx, "jax_metal.lapack.lu", operand, list(ctx.avals_out), "")

        return rule

    def svd_rule():
        try:
            from jax._src.tpu.linalg import svd as tpu_svd
            fallback = tpu_svd._svd_tpu_lowering_rule
        except (ImportError, AttributeError):
            return None

        def rule(ctx, operand, *, full_matrices, compute_uv, subset_by_index=None, **params):
            aval, = ctx.avals_in
            m, n = aval.shape[-2:]
            whole = subset_by_index is None or tuple(subset_by_index) == (0, min(m, n))
            if not (_uses_lapack(aval) or (_float32_on_lapack(aval) and whole)):
                return fallback(ctx, operand, full_matrices=full_matrices, compute_uv=compute_uv,
                                subset_by_index=subset_by_index, **params)
            if not whole:
                raise NotImplementedError("svd: subset_by_index is not supported on platform metal for "
                                          f"{np.dtype(aval.dtype).name}")
            return call(ctx, "jax_metal.lapack.svd", operand, list(ctx.avals_out),
                        f"{int(full_matrices)},{int(compute_uv)}")

        return rule

    def eigh_rule():
        from . import _jax_internals

        fallback = _jax_internals.eigh_rule() or _unavailable("eigh", "jax._src.tpu.linalg.eigh._eigh_tpu_lowering")

        def rule(ctx, operand, *, lower, sort_eigenvalues, subset_by_index=None, **params):
            aval, = ctx.avals_in
            n = aval.shape[-1]
            whole = subset_by_index is None or tuple(subset_by_index) == (0, n)
            # EighImplementation: QR is LAPACK's (what cpu runs), JACOBI and QDWH are JAX's GPU-side
            # algorithms (TPU's rule); the default picks by dtype and size.
            algorithm = getattr(params.get("algorithm"), "name", None)
            if algorithm == "QR":
                on_lapack = True
            elif algorithm in ("JACOBI", "QDWH"):
                on_lapack = _uses_lapack(aval)
            else:
                # Unsorted eigenvalues stay off LAPACK (which sorts): QDWH's base case asks for them and
                # reads each block's eigenvalues from where its padding put them.
                on_lapack = _uses_lapack(aval) or (_float32_on_lapack(aval) and whole and sort_eigenvalues)
            if not on_lapack:
                return fallback(ctx, operand, lower=lower, sort_eigenvalues=sort_eigenvalues,
                                subset_by_index=subset_by_index, **params)
            if not whole:
                raise NotImplementedError("eigh: subset_by_index is not supported on platform metal for "
                                          f"{np.dtype(aval.dtype).name} on LAPACK")
            return call(ctx, "jax_metal.lapack.eigh", operand, list(ctx.avals_out), f"{int(lower)}")

        return rule

    def tridiagonal_rule():
        def rule(ctx, operand, *, lower, **params):
            return call(ctx, "jax_metal.lapack.tridiagonal", operand, list(ctx.avals_out), f"{int(lower)}")

        return rule

    def geqp3_rule():
        def rule(ctx, a, jpvt, **params):
            return call_with(ctx, "jax_metal.lapack.geqp3", [a, jpvt], list(ctx.avals_out), "")

        return rule

    def tridiagonal_solve_rule():
        def rule(ctx, dl, d, du, b, **params):
            perturb = int(bool(params.get("perturb_singular", False)))
            return call_with(ctx, "jax_metal.lapack.tridiagonal_solve", [dl, d, du, b], list(ctx.avals_out),
                             f"{perturb}")

        return rule

    register("eig_p", eig_rule)
    register("lu_p", lu_rule)
    register("svd_p", svd_rule)
    register("eigh_p", eigh_rule)
    register("tridiagonal_p", tridiagonal_rule)
    register("geqp3_p", geqp3_rule)
    register("tridiagonal_solve_p", tridiagonal_solve_rule)

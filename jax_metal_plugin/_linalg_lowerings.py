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

eigh is registered here once, for every dtype: smaller float32 (and float16, bfloat16) through JAX's TPU rule,
which is JAX code apart from the "Eigh" custom call it emits for matrices up to 256 (larger ones are split
with QDWH first); the plugin lowers that custom call itself (Jacobi, cpp/lower/lower_eigh.cc). svd's
float32 path is JAX's TPU rule too (QDWH), lu's JAX's blocked LU.

Everything used from JAX is internal (_jax_internals): when a JAX release lacks a name a rule needs,
that rule is not registered (JAX's own behaviour stays, which for eig is an error naming the primitive
and the platform) and status() names the missing internal; initialising the plugin never fails for it.
"""

from __future__ import annotations

import numpy as np

from . import _jax_internals, _native, _status

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


def _call(ctx, target, operands, result_avals, **attrs):
    """A custom call to `target`, its attributes encoded as the plugin's table declares them."""
    mlir = _jax_internals.mlir
    types = [mlir.aval_to_ir_type(ctx.module_context, a) for a in result_avals]
    return mlir.custom_call(target, result_types=types, operands=list(operands),
                            backend_config=_native.custom_call_config(target, **attrs), api_version=1).results


def _eig_rule():
    shaped_array = _jax_internals.get("core.ShapedArray")

    def rule(ctx, operand, *, compute_left_eigenvectors=True, compute_right_eigenvectors=True, **params):
        implementation = params.get("implementation")
        if implementation is not None and getattr(implementation, "name", "LAPACK") != "LAPACK":
            raise NotImplementedError(f"eig: implementation {implementation} is not supported on platform "
                                      "metal (LAPACK only)")
        aval, = ctx.avals_in
        # The custom call always gives w, vl and vr (op_kinds.def's LapackEig); eig_p's own result types
        # give w's, and the eigenvectors are matrices like a of w's dtype.
        values = ctx.avals_out[0]
        vectors = shaped_array(aval.shape, values.dtype)
        w, vl, vr = _call(ctx, "jax_metal.lapack.eig", [operand], [values, vectors, vectors],
                          compute_left_eigenvectors=bool(compute_left_eigenvectors),
                          compute_right_eigenvectors=bool(compute_right_eigenvectors))
        out = [w]
        if compute_left_eigenvectors:
            out.append(vl)
        if compute_right_eigenvectors:
            out.append(vr)
        return out

    return rule, "LAPACK geev on the host for every dtype"


def _lu_rule():
    fallback = _jax_internals.get("mlir.lower_fun")(_jax_internals.get("linalg._lu_python"), multiple_results=True)

    def rule(ctx, operand, **params):
        aval, = ctx.avals_in
        if not _uses_lapack(aval):
            return fallback(ctx, operand, **params)
        return _call(ctx, "jax_metal.lapack.lu", [operand], list(ctx.avals_out))

    return rule, "LAPACK getrf for float64 and complex; JAX's blocked LU for float32"


def _svd_rule():
    fallback = _jax_internals.get("tpu_svd._svd_tpu_lowering_rule")

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
        return _call(ctx, "jax_metal.lapack.svd", [operand], list(ctx.avals_out),
                     full_matrices=bool(full_matrices), compute_uv=bool(compute_uv))

    return rule, ("LAPACK gesdd for float64 and complex and for float32 from FLOAT32_LAPACK_FROM on; "
                  "QDWH (JAX's TPU rule) for smaller float32")


def _eigh_rule():
    fallback = _jax_internals.get("tpu_eigh._eigh_tpu_lowering")

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
        return _call(ctx, "jax_metal.lapack.eigh", [operand], list(ctx.avals_out), lower=bool(lower))

    return rule, ("LAPACK syevd/heevd for float64, complex, EighImplementation.QR and float32 from "
                  "FLOAT32_LAPACK_FROM on; Jacobi/QDWH (JAX's TPU rule) for smaller float32")


def _tridiagonal_rule():
    def rule(ctx, operand, *, lower, **params):
        return _call(ctx, "jax_metal.lapack.tridiagonal", [operand], list(ctx.avals_out), lower=bool(lower))

    return rule, "LAPACK sytrd/hetrd on the host for every dtype"


def _geqp3_rule():
    def rule(ctx, a, jpvt, **params):
        return _call(ctx, "jax_metal.lapack.geqp3", [a, jpvt], list(ctx.avals_out))

    return rule, "LAPACK geqp3 on the host for every dtype"


def _tridiagonal_solve_rule():
    def rule(ctx, dl, d, du, b, **params):
        return _call(ctx, "jax_metal.lapack.tridiagonal_solve", [dl, d, du, b], list(ctx.avals_out),
                     perturb_singular=bool(params.get("perturb_singular", False)))

    return rule, "LAPACK gtsv (or xLAGTF/xLAGTS with perturb_singular) on the host for every dtype"


RULES = {
    "eig_p": _eig_rule,
    "lu_p": _lu_rule,
    "svd_p": _svd_rule,
    "eigh_p": _eigh_rule,
    "tridiagonal_p": _tridiagonal_rule,
    "geqp3_p": _geqp3_rule,
    "tridiagonal_solve_p": _tridiagonal_solve_rule,
}


def enable() -> None:
    """Registers each rule above for platform "metal", once; status() tells which and why any is off."""
    for name, make_rule in RULES.items():
        feature = name.removesuffix("_p")
        try:
            for needed in ("mlir.custom_call", "mlir.aval_to_ir_type"):
                _jax_internals.get(needed)
            primitive = _jax_internals.get(f"linalg.{name}")
            rule, detail = make_rule()
            register_lowering = _jax_internals.get("mlir.register_lowering")
        except _jax_internals.MissingInternal as exc:
            _status.record(feature, "lowering", False, str(exc))
            continue
        try:
            register_lowering(primitive, rule, platform="metal")
        except NotImplementedError as exc:  # JAX does not know platform "metal": registration failed
            _status.record(feature, "lowering", False, str(exc))
            continue
        _status.record(feature, "lowering", True, detail)

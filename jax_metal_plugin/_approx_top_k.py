"""approx_max_k / approx_min_k for platform "metal": the exact top k, as XLA's own fallback computes.

JAX lowers approx_top_k on every platform but TPU to an "ApproxTopK" custom call marked is_fallback,
which XLA:CPU and XLA:GPU rewrite to an exact sort-and-slice. The plugin lowers it straight to exact
top_k (MPSGraph's topK through chlo.top_k) instead: an exact answer has recall 1, above any
recall_target. With aggregate_to_topk=False the result keeps JAX's declared size along the reduction
dimension (the best that many, sorted). JAX takes floating operands only; their smallest k are the
largest k of their negation (exact).

The primitive and mlir.lower_fun are JAX internals: when a JAX release moves them, approx_top_k keeps
JAX's own lowering (an error naming the custom call), status() names what is missing, and nothing else
changes.
"""

from __future__ import annotations

import numpy as np

from . import _jax_internals, _status

FEATURE = "approx_top_k"


def _exact(operand, *, size, dimension, is_max_k):
    import jax.numpy as jnp
    from jax import lax

    x = jnp.moveaxis(operand, dimension, -1)
    values, indices = lax.top_k(x if is_max_k else -x, size)
    if not is_max_k:
        values = -values
    return [jnp.moveaxis(values, -1, dimension), jnp.moveaxis(indices.astype(np.int32), -1, dimension)]


def enable() -> None:
    """Registers the exact rule for platform "metal"; a missing JAX internal leaves JAX's own rule."""
    try:
        primitive = _jax_internals.get("ann.approx_top_k_p")
        lower_fun = _jax_internals.get("mlir.lower_fun")
        register_lowering = _jax_internals.get("mlir.register_lowering")
    except _jax_internals.MissingInternal as exc:
        _status.record(FEATURE, "lowering", False, str(exc))
        return

    def rule(ctx, operand, *, reduction_dimension, is_max_k, **params):
        aval = ctx.avals_out[0]
        dimension = reduction_dimension % len(aval.shape)
        size = aval.shape[dimension]
        if not isinstance(size, int):
            raise NotImplementedError("approx_top_k with a symbolic k is not supported on platform metal")

        def exact(x):
            return _exact(x, size=size, dimension=dimension, is_max_k=is_max_k)

        return lower_fun(exact, multiple_results=True)(ctx, operand)

    try:
        register_lowering(primitive, rule, platform="metal")
    except NotImplementedError as exc:  # JAX does not know platform "metal": registration failed
        _status.record(FEATURE, "lowering", False, str(exc))
        return
    _status.record(FEATURE, "lowering", True, "exact top k (recall 1) through MPSGraph's topK")

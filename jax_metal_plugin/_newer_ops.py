"""Primitives that newer JAX releases lower to StableHLO ops newer than the version the plugin reads.

From jax 0.12.1 on, lax.fma and lax.fmuladd lower to StableHLO's fma, and exp2 and log2 to StableHLO's
exp2 and log2, ops of StableHLO 1.24. JAX's PJRT client downgrades a program to the version the plugin
advertises (older): fma then has no form at all, so the program fails to serialize, and exp2 becomes
exp(x * ln 2) in the operand's own type, which in bfloat16 is off by a quarter at x = 100. So on metal:
  * fma is the plugin's custom call ``jax_metal.fma``, lowered as StableHLO's fma: one rounding;
  * fmuladd, whose contract lets it round twice, is a multiply and an add (which the plugin contracts
    into one multiply-add where it can, as XLA:CPU's compiler does);
  * exp2 and log2 of real floats are the custom calls ``jax_metal.exp2`` and ``jax_metal.log2``, lowered
    as StableHLO's own; of complex numbers, exp(x * ln 2) and log(x) / ln 2, as JAX wrote them before.
Each is registered only where this JAX lowers the primitive to the newer op (its hlo module has it), so
older releases keep their own lowerings. A JAX internal missing leaves JAX's rule; status() says why.
"""

from __future__ import annotations

import numpy as np

from . import _jax_internals, _native, _status

FEATURE = "newer StableHLO ops"


def enable() -> None:
    from jax import lax

    try:
        hlo = _jax_internals.module("hlo")
        register_lowering = _jax_internals.get("mlir.register_lowering")
        lower_fun = _jax_internals.get("mlir.lower_fun")
        custom_call = _jax_internals.get("mlir.custom_call")
        ir_type = _jax_internals.get("mlir.aval_to_ir_type")
    except _jax_internals.MissingInternal as exc:
        _status.record(FEATURE, "lowering", False, str(exc))
        return

    def call(target, ctx, *operands):
        aval = ctx.avals_out[0]
        return custom_call(target, result_types=[ir_type(ctx.module_context, aval)], operands=list(operands),
                           backend_config=_native.custom_call_config(target), api_version=1).results

    rules = []
    if hasattr(hlo, "fma") and hasattr(lax, "fma_p") and hasattr(lax, "fmuladd_p"):
        try:
            broadcast = _jax_internals.get("mlir.multi_broadcast_in_dim")
        except _jax_internals.MissingInternal as exc:
            _status.record(FEATURE, "lowering", False, str(exc))
            return

        def fma_rule(ctx, a, b, c):
            aval = ctx.avals_out[0]
            return call("jax_metal.fma", ctx, *broadcast(ctx, (a, b, c), ctx.avals_in, aval.shape, aval.sharding))

        rules.append((lax.fma_p, fma_rule))
        rules.append((lax.fmuladd_p, lower_fun(lambda a, b, c: lax.add(lax.mul(a, b), c), multiple_results=False)))

    def unary(target, complex_form):
        complex_rule = lower_fun(complex_form, multiple_results=False)

        def rule(ctx, x, **params):
            if np.issubdtype(ctx.avals_in[0].dtype, np.complexfloating):
                return complex_rule(ctx, x)
            return call(target, ctx, x)

        return rule

    ln2 = float(np.log(2))
    if hasattr(hlo, "exp2"):
        rules.append((lax.exp2_p, unary("jax_metal.exp2", lambda x: lax.exp(x * np.array(ln2, x.dtype)))))
    if hasattr(hlo, "log2") and hasattr(lax, "log2_p"):
        rules.append((lax.log2_p, unary("jax_metal.log2", lambda x: lax.log(x) / np.array(ln2, x.dtype))))
    if not rules:
        return  # this JAX lowers none of them to an op newer than the plugin reads
    try:
        for primitive, rule in rules:
            register_lowering(primitive, rule, platform="metal")
    except NotImplementedError as exc:  # JAX does not know platform "metal"
        _status.record(FEATURE, "lowering", False, str(exc))
        return
    _status.record(FEATURE, "lowering", True, "fma rounded once; fmuladd a multiply-add; exp2 and log2 as such")

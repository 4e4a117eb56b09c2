"""Custom call targets the lowering registers as "custom_call:<target>" rules. Sharding annotations mean
nothing on one device: their operand passes through, as on CPU; the plugin library lists those targets
(cpp/stablehlo/custom_calls.def). A backend_config the plugin cannot read fails naming the target and the
attribute. (The linear algebra targets, Qr, ProductOfElementaryHouseholderReflectors and Eigh, are tested
in test_linalg.py; an unknown target's error in test_errors.py.)"""

import jax
import jax.numpy as jnp
from jax import lax
import numpy as np
import pytest

from jax.extend.core import Primitive
from jax.interpreters import mlir

from jax_metal_plugin import _jax_internals, _native
from jaxcompare import check, device

PASS_THROUGH = _native.custom_calls().pass_through


def test_the_pass_through_targets_include_jaxs():
    assert {"Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape", "annotate_device_placement",
            "dce_sink"} <= set(PASS_THROUGH)


@pytest.mark.parametrize("target", [t for t in PASS_THROUGH if t != "dce_sink"])  # dce_sink: no results
def test_sharding_annotations_pass_their_operand_through(target):
    def f(x):
        return jax.ffi.ffi_call(target, jax.ShapeDtypeStruct(x.shape, x.dtype))(x) * 2 + 1

    check(f, np.arange(6, dtype=np.float32).reshape(2, 3))


def test_dce_sink_lowers_to_nothing():
    def f(x):
        y = jnp.sin(x) + 1
        lax.dce_sink(y, prevent_mlir_dce=True)
        return x * 2, y

    check(f, np.linspace(-1, 1, 5, dtype=np.float32))


def _svd_with_config(config):
    """svd's custom call with a backend_config of our choosing, as a primitive lowered for metal only."""
    p = Primitive(f"svd_config_{abs(hash(config))}")
    p.multiple_results = True
    p.def_abstract_eval(lambda a: [jax.core.ShapedArray(a.shape[-1:], a.dtype)])

    def rule(ctx, a):
        internal = _jax_internals.mlir  # custom_call is JAX-internal (as for the plugin's own lowerings)
        types = [internal.aval_to_ir_type(ctx.module_context, aval) for aval in ctx.avals_out]
        return internal.custom_call("jax_metal.lapack.svd", result_types=types, operands=[a], backend_config=config,
                                api_version=1).results

    mlir.register_lowering(p, rule, platform="metal")
    return lambda x: p.bind(x)[0]


@pytest.mark.parametrize("config, message", [
    ("full_matrices=maybe,compute_uv=false", "attribute 'full_matrices': 'maybe' is not a bool"),
    ("full_matrices=false,speed=3", "unknown attribute 'speed' (attributes: full_matrices:bool, compute_uv:bool)"),
    ("0,0", "'0' is not name=value"),
])
def test_a_malformed_backend_config_names_the_target_and_the_attribute(config, message):
    x = jax.device_put(np.eye(3, dtype=np.complex64), device("metal"))
    with pytest.raises(RuntimeError) as info:
        jax.jit(_svd_with_config(config))(x)
    assert "custom_call jax_metal.lapack.svd: backend_config" in str(info.value)
    assert message in str(info.value)
    # The process and the device stay usable, and a well-formed config compiles.
    s = jax.jit(_svd_with_config("full_matrices=false,compute_uv=false"))(x)
    np.testing.assert_allclose(np.asarray(s), np.ones(3), rtol=1e-6)

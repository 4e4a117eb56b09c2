"""Custom call targets the lowering registers as "custom_call:<target>" rules. Sharding annotations mean
nothing on one device: their operand passes through, as on CPU. (The linear algebra targets, Qr,
ProductOfElementaryHouseholderReflectors and Eigh, are tested in test_linalg.py; an unknown target's
error in test_errors.py.)"""

import jax
import jax.numpy as jnp
from jax import lax
import numpy as np
import pytest

from jaxcompare import check


@pytest.mark.parametrize("target", ["Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape",
                                    "annotate_device_placement"])
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

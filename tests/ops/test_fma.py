"""lax.fma and lax.fmuladd (StableHLO's fma, from jax 0.12.1) on metal: float32 and float64 rounded once,
as XLA:CPU's fma; float16 and bfloat16 computed in float32, where their product is exact."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax

from jaxcompare import check, jax_config, run_on

pytestmark = pytest.mark.skipif(not hasattr(lax, "fma"), reason="lax.fma is new in jax 0.12.1")
RNG = np.random.default_rng(5)


def operands(dtype, n=4096):
    a, b, c = (RNG.standard_normal(n).astype(dtype) for _ in range(3))
    # Products that cancel against c: a single rounding keeps what two roundings lose.
    eps = np.finfo(dtype).eps
    a[:3] = [1 + 2 * eps, 1 + eps, 3]
    b[:3] = [1 - 2 * eps, 1 - eps, 1 / np.array(3, dtype)]
    c[:3] = [-1, -1, -1]
    return a, b, c


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
def test_fma_rounds_once(dtype):
    with jax_config("jax_enable_x64", dtype == np.float64):
        a, b, c = operands(dtype)
        got = check(lax.fma, a, b, c, exact=True)
        eps = np.finfo(dtype).eps
        # (1 + 2e)(1 - 2e) - 1 = -4e^2 exactly, which the separately rounded product loses.
        assert got[0] == -4 * eps * eps and got[1] == -eps * eps


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16], ids=lambda d: np.dtype(d).name)
def test_fma_of_half_types_computes_in_float32(dtype):
    a, b, c = (RNG.standard_normal(4096).astype(dtype) for _ in range(3))
    got = run_on("metal", lax.fma, a, b, c)
    f = [x.astype(np.float32) for x in (a, b, c)]
    want = (f[0] * f[1] + f[2]).astype(dtype)  # the float32 product is exact: one float32 rounding, then one more
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


def test_fmuladd_grad_and_vmap():
    a, b, c = operands(np.float32, 64)
    check(lambda a, b, c: lax.fmuladd(a, b, c), a, b, c, exact=True)
    loss = lambda a, b, c: jnp.sum(lax.fma(a, b, c) ** 2)  # noqa: E731
    check(jax.grad(loss, argnums=(0, 1, 2)), a, b, c)
    check(jax.vmap(lax.fma, in_axes=(0, None, 0)), a.reshape(8, 8), b[:8], c.reshape(8, 8), exact=True)

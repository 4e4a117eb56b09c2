"""Special functions as JAX emits them (expanded, or as chlo composites), and top_k, against the CPU."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.scipy import special

from jaxcompare import check, random_array, special_floats

RNG = np.random.default_rng(13)

FUNCS = {
    "erf": special.erf,
    "erfc": special.erfc,
    "erfinv": lambda x: special.erfinv(jnp.tanh(x)),
    "lgamma": lambda x: lax.lgamma(jnp.abs(x) + 0.1),
    "digamma": lambda x: lax.digamma(jnp.abs(x) + 0.1),
    "asinh": jnp.arcsinh,
    "acosh": lambda x: jnp.arccosh(jnp.abs(x) + 1),
    "atanh": lambda x: jnp.arctanh(jnp.tanh(x)),
    "cosh": jnp.cosh,
    "log_ndtr": special.log_ndtr,
    "xlogy": lambda x: special.xlogy(x, jnp.abs(x) + 0.5),
    "nextafter": lambda x: jnp.nextafter(x, jnp.zeros_like(x)),
    "atan2": lambda x: jnp.arctan2(x, x[::-1]),
    "round": jnp.round,
}


@pytest.mark.parametrize("name", sorted(FUNCS))
def test_special(name):
    x = random_array(RNG, (64,), np.float32)
    check(FUNCS[name], x, rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("name", ["erf", "asinh", "cosh", "round", "atan2"])
def test_special_edges(name):
    check(FUNCS[name], special_floats(np.float32))


def test_special_grads():
    x = random_array(RNG, (16,), np.float32)
    check(jax.grad(lambda x: jnp.sum(special.erf(x) + lax.lgamma(jnp.abs(x) + 1.0))), x, rtol=1e-5)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.int32, jnp.bfloat16], ids=lambda d: np.dtype(d).name)
def test_top_k(dtype):
    x = random_array(RNG, (4, 33), dtype)
    if np.dtype(dtype).kind == "i":
        x = (x % 6).astype(dtype)  # ties: smaller index first
    else:
        x[1, 3] = np.nan
    check(lambda x: lax.top_k(x, 5), x, exact=True)
    check(jax.vmap(lambda r: lax.top_k(r, 3)), x, exact=True)

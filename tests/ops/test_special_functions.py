"""Special functions as JAX emits them (expanded, as chlo composites, or as plain StableHLO ops), and
top_k, against the CPU backend: on random inputs, on edge values, and through their gradients."""

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
    "erfcx": special.erfcx,
    "lgamma": lambda x: lax.lgamma(jnp.abs(x) + 0.1),
    "digamma": lambda x: lax.digamma(jnp.abs(x) + 0.1),
    "polygamma": lambda x: special.polygamma(1, jnp.abs(x) + 0.1),
    "zeta": lambda x: special.zeta(jnp.abs(x) + 1.1, 2.0),
    "igamma": lambda x: special.gammainc(jnp.abs(x) + 0.1, 1.3 * jnp.abs(x)),
    "igammac": lambda x: special.gammaincc(jnp.abs(x) + 0.1, 0.7 * jnp.abs(x)),
    "betainc": lambda x: special.betainc(jnp.abs(x) + 0.5, 2.0, jax.nn.sigmoid(x)),
    "i0e": special.i0e,
    "i1e": special.i1e,
    "ndtri": lambda x: special.ndtri(jax.nn.sigmoid(x)),
    "log_ndtr": special.log_ndtr,
    "asinh": jnp.arcsinh,
    "acosh": lambda x: jnp.arccosh(jnp.abs(x) + 1),
    "atanh": lambda x: jnp.arctanh(jnp.tanh(x)),
    "sinh": jnp.sinh,
    "cosh": jnp.cosh,
    "tan": jnp.tan,
    "expm1": jnp.expm1,
    "log1p": lambda x: jnp.log1p(jnp.abs(x) - 0.9),
    "cbrt": jnp.cbrt,
    "xlogy": lambda x: special.xlogy(x, jnp.abs(x) + 0.5),
    "nextafter": lambda x: jnp.nextafter(x, jnp.zeros_like(x)),
    "atan2": lambda x: jnp.arctan2(x, x[::-1]),
    "round": jnp.round,
    "round_away": lambda x: lax.round(x, lax.RoundingMethod.AWAY_FROM_ZERO),
    "is_finite": lambda x: jnp.isfinite(x / (x - x[0])),
    "logaddexp": lambda x: jnp.logaddexp(x, x[::-1]),
    "gelu_exact": lambda x: jax.nn.gelu(x, approximate=False),
}

# Edge values (no subnormals: XLA's CPU backend flushes them to zero) plus rounding ties, values near
# ±1 and 0, and where exp overflows in float32.
EDGES = np.concatenate([special_floats(np.float32), np.array(
    [-1, 0.5, -0.5, 1.5, 2.5, -2.5, 1e-30, -1e-30, 0.9999, -0.9999, 1e-6, -1e-6, 80.0, -88.5, 2**24 + 2, 1e7 + 1],
    np.float32)])

EDGE_FUNCS = {
    "erf": special.erf, "erfc": special.erfc, "erfinv": special.erfinv, "lgamma": lax.lgamma, "digamma": lax.digamma,
    "igamma": lambda a: lax.igamma(jnp.abs(a), jnp.float32(1.5)), "igammac": lambda a: lax.igammac(jnp.float32(1.5), jnp.abs(a)),
    "i0e": special.i0e, "i1e": special.i1e, "ndtri": special.ndtri, "log_ndtr": special.log_ndtr, "erfcx": special.erfcx,
    "asinh": jnp.arcsinh, "acosh": jnp.arccosh, "atanh": jnp.arctanh, "sinh": jnp.sinh, "cosh": jnp.cosh, "tan": jnp.tan,
    "expm1": jnp.expm1, "log1p": jnp.log1p, "cbrt": jnp.cbrt, "is_finite": jnp.isfinite, "isinf": jnp.isinf,
    "round_even": jnp.round, "round_away": lambda a: lax.round(a, lax.RoundingMethod.AWAY_FROM_ZERO),
    "floor": jnp.floor, "ceil": jnp.ceil, "trunc": jnp.trunc, "sign": jnp.sign,
    "nextafter_up": lambda a: lax.nextafter(a, jnp.full_like(a, jnp.inf)),
    "nextafter_pairs": lambda a: lax.nextafter(a, a[::-1]),
    "atan2": lambda a: jnp.arctan2(a, a[::-1]), "atan2_zero": lambda a: jnp.arctan2(a, 0 * a),
    "xlogy": lambda a: special.xlogy(a, a), "xlog1py": lambda a: special.xlog1py(a, a),
    "logistic": jax.nn.sigmoid, "softplus": jax.nn.softplus, "logaddexp": lambda a: jnp.logaddexp(a, a[::-1]),
    "fmod": lambda a: jnp.fmod(a, a[::-1]), "power": lambda a: jnp.power(a, a[::-1]),
}


@pytest.mark.parametrize("name", sorted(FUNCS))
def test_special(name):
    x = random_array(RNG, (64,), np.float32)
    check(FUNCS[name], x, rtol=5e-5, atol=5e-6)


@pytest.mark.parametrize("name", sorted(EDGE_FUNCS))
def test_special_edges(name):
    check(EDGE_FUNCS[name], EDGES, rtol=2e-5, atol=2e-6)


def test_expm1_near_overflow():
    check(jnp.expm1, np.array([88.0, 88.5, 88.7], np.float32))


def test_gamma():
    check(special.gamma, np.abs(random_array(RNG, (16,), np.float32)) + 0.1, rtol=5e-5)


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16], ids=lambda d: np.dtype(d).name)
def test_special_low_precision(dtype):
    # Positive inputs made outside jit: XLA's CPU backend may keep a fused bf16 intermediate in f32.
    x = (np.abs(random_array(RNG, (64,), np.float32)) + 0.25).astype(dtype)
    for f in (special.erf, jnp.arcsinh, jnp.expm1, jnp.log1p, lax.lgamma, lax.digamma, jnp.round, jnp.cbrt):
        check(f, x)


def test_special_grads():
    x = random_array(RNG, (16,), np.float32)
    check(jax.grad(lambda x: jnp.sum(special.erf(x) + lax.lgamma(jnp.abs(x) + 1.0))), x, rtol=1e-5)
    check(jax.grad(lambda x: jnp.sum(special.erfinv(jnp.tanh(x)) + lax.digamma(jnp.abs(x) + 0.5))), x, rtol=1e-4, atol=1e-5)
    check(jax.grad(lambda x: jnp.sum(jnp.arcsinh(x) * jnp.expm1(x) + jnp.cbrt(x))), x, rtol=1e-5, atol=1e-6)


def test_samplers_built_on_special_functions():
    k = jnp.abs(random_array(RNG, (32,), np.float32)) + 0.1
    key = jax.random.key(3)
    check(lambda k: jax.random.gamma(key, k), k, rtol=1e-4, atol=1e-5)
    check(lambda k: jax.random.beta(key, k, k + 1), k, rtol=1e-4, atol=1e-5)
    check(lambda k: jax.random.truncated_normal(key, -1.0, 1.0, k.shape) * k, k, rtol=1e-5)
    check(lambda k: jax.random.poisson(key, k * 3), k)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.int32, jnp.bfloat16], ids=lambda d: np.dtype(d).name)
def test_top_k(dtype):
    x = random_array(RNG, (4, 33), dtype)
    if np.dtype(dtype).kind == "i":
        x = (x % 6).astype(dtype)  # ties: smaller index first
    else:
        x[1, 3] = np.nan
    check(lambda x: lax.top_k(x, 5), x, exact=True)
    check(jax.vmap(lambda r: lax.top_k(r, 3)), x, exact=True)

"""float16 and bfloat16 on metal against JAX's CPU backend: elementwise math on random and special
values, comparisons, conversions (round to nearest even, overflow, subnormals, NaN), reduce_precision,
dot_general with preferred_element_type, reductions as JAX asks (in float32), scans, training grads.

The CPU backend may keep excess precision across a chain of low-precision ops (XLA computes them in
float32 and rounds once); the lowering rounds after each StableHLO op, as the spec says. Tolerances are
a few units in the last place for that reason; single ops and data movement compare exactly."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax
from jax.scipy import special

from jaxcompare import check, check_reduction, random_array, run_on, special_floats

RNG = np.random.default_rng(17)
LOW = [jnp.float16, jnp.bfloat16]
IDS = lambda d: np.dtype(d).name  # noqa: E731


def ulps(dtype, n):
    """Relative tolerance of n units in the last place."""
    eps = float(ml_dtypes.finfo(dtype).eps)
    return {"rtol": n * eps, "atol": n * eps * 1e-2}


def inputs(dtype, n=40, low=-3.0, high=3.0):
    return np.concatenate([random_array(RNG, (n,), dtype, low, high),
                           np.array([0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.5, 100.0], np.float32).astype(dtype)])


UNARY = {
    "neg": jnp.negative, "abs": jnp.abs, "sign": jnp.sign, "exp": jnp.exp, "exp2": jnp.exp2, "expm1": jnp.expm1,
    "log": jnp.log, "log1p": jnp.log1p, "log2": jnp.log2, "sqrt": jnp.sqrt, "rsqrt": lax.rsqrt, "cbrt": jnp.cbrt,
    "sin": jnp.sin, "cos": jnp.cos, "tan": jnp.tan, "tanh": jnp.tanh, "sinh": jnp.sinh, "cosh": jnp.cosh,
    "arctan": jnp.arctan, "arcsinh": jnp.arcsinh, "erf": special.erf, "erfc": special.erfc,
    "sigmoid": jax.nn.sigmoid, "softplus": jax.nn.softplus, "gelu": jax.nn.gelu, "silu": jax.nn.silu,
    "relu": jax.nn.relu, "floor": jnp.floor, "ceil": jnp.ceil, "round": jnp.round, "rint": jnp.rint,
    "trunc": jnp.trunc, "isfinite": jnp.isfinite, "isnan": jnp.isnan, "isinf": jnp.isinf, "square": jnp.square,
    "reciprocal": jnp.reciprocal, "nextafter": lambda x: jnp.nextafter(x, jnp.zeros_like(x)),
}
# Expanded by JAX into several ops with cancellation: the CPU's excess precision shows more.
EXPANDED = {
    "arcsin": lambda x: jnp.arcsin(x / 3.5), "arccos": lambda x: jnp.arccos(x / 3.5),
    "arccosh": lambda x: jnp.arccosh(jnp.abs(x) + 1.5), "arctanh": lambda x: jnp.arctanh(x / 3.5),
    "erfinv": lambda x: special.erfinv(x / 3.5), "lgamma": lambda x: lax.lgamma(jnp.abs(x) + 2.5),
    "digamma": lambda x: lax.digamma(jnp.abs(x) + 0.5), "gelu_exact": lambda x: jax.nn.gelu(x, approximate=False),
}


@pytest.mark.parametrize("dtype", LOW, ids=IDS)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name, dtype):
    check(UNARY[name], inputs(dtype), **ulps(dtype, 2))
    # Zeros, infinities, NaN, the largest finite values.
    check(UNARY[name], special_floats(dtype), **ulps(dtype, 2))


@pytest.mark.parametrize("dtype", LOW, ids=IDS)
@pytest.mark.parametrize("name", sorted(EXPANDED))
def test_expanded_functions(name, dtype):
    check(EXPANDED[name], inputs(dtype), rtol=8 * float(ml_dtypes.finfo(dtype).eps), atol=2e-2)


BINARY = {
    "add": jnp.add, "sub": jnp.subtract, "mul": jnp.multiply, "div": jnp.divide, "max": jnp.maximum,
    "min": jnp.minimum, "pow": lambda a, b: jnp.abs(a) ** b, "atan2": jnp.arctan2, "rem": jnp.remainder,
    "fmod": jnp.fmod, "hypot": jnp.hypot, "logaddexp": jnp.logaddexp, "copysign": jnp.copysign,
    "nextafter": jnp.nextafter,
}


@pytest.mark.parametrize("dtype", LOW, ids=IDS)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary(name, dtype):
    a, b = inputs(dtype), inputs(dtype)[::-1]
    check(BINARY[name], a, b, **ulps(dtype, 2))
    s = special_floats(dtype)
    check(BINARY[name], s, s[::-1].copy(), **ulps(dtype, 2))


@pytest.mark.parametrize("dtype", LOW, ids=IDS)
def test_compare_and_select_are_exact(dtype):
    a = np.concatenate([special_floats(dtype), inputs(dtype)])
    b = np.concatenate([special_floats(dtype)[::-1], inputs(dtype)[::-1]])
    check(lambda a, b: (a == b, a != b, a < b, a <= b, a > b, a >= b, jnp.where(a < b, a, b), jnp.clip(a, -1, 2)),
          a, b, exact=True)


# ---- conversions


def _rounding_cases():
    # Ties at both widths, values just past ties, subnormals of both, overflow, NaN and infinities.
    f16_ties = [1.0 + 2.0 ** -11, 1.0 + 3 * 2.0 ** -11, 2048 + 1.0, 2048 + 3.0, 65504.0, 65519.0, 65520.0, 1e5]
    bf16_ties = [1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8, 256 + 1.0, 256 + 3.0, 3.3895314e38, 3.4e38]
    near = [1.0 + 2.0 ** -11 + 2.0 ** -20, 1.0 + 2.0 ** -8 + 2.0 ** -20, 1.0 + 2.0 ** -8 - 2.0 ** -20]
    tiny = [2.0 ** -24, 2.0 ** -25, 3 * 2.0 ** -26, 6e-8, 1e-8, 2.0 ** -133, 2.0 ** -134, 1e-40, 1e-45]
    special = [0.0, -0.0, np.inf, -np.inf, np.nan]
    v = np.array(f16_ties + bf16_ties + near + tiny + special, np.float32)
    return np.concatenate([v, -v, random_array(RNG, (64,), np.float32, -1e4, 1e4)])


@pytest.mark.parametrize("dtype", LOW, ids=IDS)
def test_float32_to_low_rounds_to_nearest_even(dtype):
    check(lambda x: x.astype(dtype), _rounding_cases(), exact=True)


def test_between_float16_and_bfloat16():
    x = _rounding_cases()
    with np.errstate(over="ignore"):
        h = x.astype(np.float16)
    b = x.astype(ml_dtypes.bfloat16)
    check(lambda h, b: (h.astype(jnp.bfloat16), b.astype(jnp.float16), h.astype(jnp.float32), b.astype(jnp.float32)),
          h, b, exact=True)


@pytest.mark.parametrize("dtype", LOW, ids=IDS)
def test_integers_to_and_from_low(dtype):
    i = np.array([0, 1, -1, 255, 256, 257, 2047, 2049, 4097, 65504, 65519, 65520, 70000, 16777217, -16777217,
                  2 ** 31 - 1, -2 ** 31], np.int64).astype(np.int32)
    u = np.array([0, 1, 255, 257, 65535, 65520, 4294967295, 2 ** 24 + 1], np.uint32)
    check(lambda i, u: (i.astype(dtype), u.astype(dtype), i.astype(jnp.int8).astype(dtype),
                        i.astype(jnp.uint16).astype(dtype)), i, u, exact=True)
    x = random_array(RNG, (50,), dtype, -120, 120)
    check(lambda x: (x.astype(jnp.int32), x.astype(jnp.int8), jnp.abs(x).astype(jnp.uint8), x.astype(bool),
                     (x > 0).astype(dtype)), x, exact=True)


@pytest.mark.parametrize("dtype", [jnp.float32] + LOW, ids=IDS)
@pytest.mark.parametrize("bits", [(5, 10), (8, 7), (5, 2), (4, 3), (8, 23), (2, 1), (3, 0)], ids=str)
def test_reduce_precision_is_exact(dtype, bits):
    e, m = bits
    x = np.concatenate([random_array(RNG, (100,), dtype, -1e3, 1e3), random_array(RNG, (40,), dtype, -1e-4, 1e-4),
                        special_floats(dtype)])
    check(lambda x: lax.reduce_precision(x, exponent_bits=e, mantissa_bits=m), x, exact=True)


def test_constants_round_like_the_cpu():
    x = np.ones(4, np.float32)
    check(lambda x: (x.astype(jnp.bfloat16) * jnp.bfloat16(0.1), x.astype(jnp.float16) + jnp.float16(1e-4),
                     jnp.full(3, 1 / 3, jnp.bfloat16)), x, exact=True)
    # linspace is arithmetic in float16 (the CPU may keep float32 between its ops).
    check(lambda x: jnp.linspace(0, 1, 7, dtype=jnp.float16) * x[0], x.astype(np.float16), **ulps(jnp.float16, 2))


# ---- dot_general, reductions, scans


@pytest.mark.parametrize("dtype", LOW, ids=IDS)
def test_dot_general_mixed_precision(dtype):
    a = random_array(RNG, (3, 16, 32), dtype, -1, 1)
    b = random_array(RNG, (3, 32, 8), dtype, -1, 1)
    f = random_array(RNG, (32, 8), np.float32, -1, 1)
    # Products (exact in float32) accumulate in float32 and round once, on both backends.
    check_reduction(lambda a, b: (a @ b, jnp.einsum("bij,bjk->ik", a, b)), a, b, k=[32, 3 * 32], accumulate=jnp.float32)
    check_reduction(lambda a, b: (jnp.matmul(a, b, preferred_element_type=jnp.float32),
                                  lax.dot_general(a, b, (((2,), (1,)), ((0,), (0,))), preferred_element_type=jnp.float32)),
                    a, b, k=32)
    check_reduction(lambda a, f: a @ f, a, f, k=32 + 1)  # promoted to float32


def test_preferred_element_type_feeds_matmul_in_float32():
    from jax_metal_plugin import tools
    a = np.ones((4, 8), ml_dtypes.bfloat16)
    text = tools.mps_graph(lambda a: jnp.matmul(a, a.T, preferred_element_type=jnp.float32), a)
    assert text.count("MatMul(") == 1 and "f32[4,4]" in text


@pytest.mark.parametrize("dtype", LOW, ids=IDS)
def test_reductions_accumulate_as_jax_asks(dtype):
    x = random_array(RNG, (8, 300), dtype, 0, 1)
    # jnp upcasts sums and means to float32 and rounds the result once: exact up to order of summation.
    check(lambda x: (jnp.sum(x), jnp.mean(x, axis=1), jnp.sum(x, axis=0, dtype=jnp.float32), jnp.var(x, axis=1)),
          x, **ulps(dtype, 2))
    check(lambda x: (jnp.max(x, axis=1), jnp.min(x), jnp.argmax(x, axis=1), jnp.argmin(x, axis=0)), x, exact=True)
    check(lambda x: (jax.nn.softmax(x, axis=1), jax.nn.logsumexp(x, axis=1), jnp.linalg.norm(x, axis=1)),
          x, **ulps(dtype, 4))


def test_sum_of_bfloat16_reduces_in_float32():
    from jax_metal_plugin import tools
    text = tools.mps_graph(jnp.sum, np.ones((4, 8), ml_dtypes.bfloat16))
    assert "ReductionSum(" in text and "f32[1,1]" in text


@pytest.mark.parametrize("dtype", LOW, ids=IDS)
def test_cumsum_is_within_rounding_of_the_exact_sum(dtype):
    x = random_array(RNG, (2, 1000), dtype, -1, 1)
    metal = run_on("metal", lambda x: jnp.cumsum(x, axis=1), x).astype(np.float64)
    cpu = run_on("cpu", lambda x: jnp.cumsum(x, axis=1), x).astype(np.float64)
    exact = np.cumsum(x.astype(np.float64), axis=1)
    eps = float(ml_dtypes.finfo(dtype).eps)
    cpu_error = np.abs(cpu - exact).max()
    # Rounded once per element at worst; never worse than the CPU's own running rounding.
    assert np.abs(metal - exact).max() <= max(cpu_error, eps * np.abs(exact).max()), (np.abs(metal - exact).max(), cpu_error)


@pytest.mark.parametrize("dtype", LOW, ids=IDS)
def test_data_movement_is_exact(dtype):
    x = random_array(RNG, (6, 10), dtype)
    idx = np.array([4, 0, 2, 2], np.int32)
    check(lambda x, i: (x.T, x[::-1, 2:7], jnp.pad(x, 1, constant_values=1.5), x[i], x.at[i].set(7.0),
                        jnp.concatenate([x, x]), jnp.sort(x, axis=1), lax.top_k(x, 3), jnp.roll(x, 3, axis=1),
                        lax.dynamic_slice(x, (i[0], i[1]), (2, 3))), x, idx, exact=True)


@pytest.mark.parametrize("dtype", LOW, ids=IDS)
def test_mlp_training_step(dtype):
    k1, k2 = jax.random.split(jax.random.key(0))
    params = (jax.random.normal(k1, (16, 32), dtype) * 0.2, jnp.zeros(32, dtype),
              jax.random.normal(k2, (32, 4), dtype) * 0.2)
    x = random_array(RNG, (8, 16), dtype)
    y = np.eye(4, dtype=np.float32)[RNG.integers(0, 4, 8)]

    def loss(p, x, y):
        h = jax.nn.gelu(x @ p[0] + p[1])
        logits = (h @ p[2]).astype(jnp.float32)
        return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * y, axis=1))

    def step(p, x, y):
        l, g = jax.value_and_grad(loss)(p, x, y)
        return l, jax.tree.map(lambda w, d: w - (0.1 * d).astype(w.dtype), p, g)

    check(step, params, x, y, rtol=4 * float(ml_dtypes.finfo(dtype).eps), atol=2e-2)
    check(jax.vmap(lambda r: jnp.tanh(r) @ params[0]), x, **ulps(dtype, 4))

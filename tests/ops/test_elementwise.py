"""Elementwise ops × dtypes on metal against JAX's CPU backend."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax

from jaxcompare import (FLOAT_DTYPES, INT_DTYPES, SIGNED_DTYPES, UNSIGNED_DTYPES, check, check_reduction, eps,
                        random_array, run_on, special_floats)

RNG = np.random.default_rng(0)

UNARY_FLOAT = {
    "exp": jnp.exp,
    "expm1": jnp.expm1,
    "log": lambda x: jnp.log(jnp.abs(x) + 0.1),
    "log1p": lambda x: jnp.log1p(jnp.abs(x)),
    "sqrt": lambda x: jnp.sqrt(jnp.abs(x)),
    "rsqrt": lambda x: lax.rsqrt(jnp.abs(x) + 0.5),
    "cbrt": jnp.cbrt,
    "sin": jnp.sin,
    "cos": jnp.cos,
    "tan": lambda x: jnp.tan(x * 0.4),
    "tanh": jnp.tanh,
    "logistic": jax.nn.sigmoid,
    "floor": jnp.floor,
    "ceil": jnp.ceil,
    "round_afz": lambda x: lax.round(x * 2.5, lax.RoundingMethod.AWAY_FROM_ZERO),
    "round_even": lambda x: lax.round(x * 2.5, lax.RoundingMethod.TO_NEAREST_EVEN),
    "abs": jnp.abs,
    "neg": jnp.negative,
    "sign": jnp.sign,
    "is_finite": jnp.isfinite,
    "arcsin": lambda x: jnp.arcsin(jnp.tanh(x)),
    "arctan": jnp.arctan,
    "sinh": jnp.sinh,
    "erf": jax.scipy.special.erf,
    "relu": jax.nn.relu,
    "gelu": jax.nn.gelu,
    "softplus": jax.nn.softplus,
    "square": jnp.square,
}


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", sorted(UNARY_FLOAT))
def test_unary_float(name, dtype):
    x = random_array(RNG, (5, 7), dtype)
    check(UNARY_FLOAT[name], x)


@pytest.mark.parametrize("name", ["exp", "expm1", "log1p", "sqrt", "abs", "neg", "sign", "floor", "ceil", "is_finite",
                                  "round_afz", "round_even", "tanh", "logistic", "cbrt"])
def test_unary_special_values(name):
    x = special_floats(np.float32)
    check(UNARY_FLOAT[name], x)


def test_expm1_log1p_precision_near_zero():
    x = np.array([1e-7, -1e-7, 1e-5, -3e-6, 0.0, 1e-30], np.float32)
    check(jnp.expm1, x, rtol=1e-6)
    check(jnp.log1p, x, rtol=1e-6)


BINARY = {
    "add": jnp.add,
    "sub": jnp.subtract,
    "mul": jnp.multiply,
    "max": jnp.maximum,
    "min": jnp.minimum,
}


@pytest.mark.parametrize("name,dtype", [(n, d) for n in sorted(BINARY) for d in FLOAT_DTYPES + INT_DTYPES + [jnp.bool_]
                                        if not (n == "sub" and d == jnp.bool_)],  # jnp.subtract rejects bool
                         ids=str)
def test_binary(name, dtype):
    a = random_array(RNG, (4, 6), dtype)
    b = random_array(RNG, (4, 6), dtype)
    check(BINARY[name], a, b)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=lambda d: np.dtype(d).name)
def test_float_binary_math(dtype):
    a = random_array(RNG, (3, 5), dtype)
    b = random_array(RNG, (3, 5), dtype)
    check(lambda a, b: a / (jnp.abs(b) + 0.5), a, b)
    check(lambda a, b: jnp.power(jnp.abs(a) + 0.1, b), a, b, rtol=3e-5 if dtype == jnp.float32 else None)
    check(jnp.arctan2, a, b)
    check(lax.rem, a, b)
    check(jnp.fmod, a, b)


def test_max_min_nan_propagate():
    a = np.array([np.nan, 1.0, -np.inf, 0.0, -0.0], np.float32)
    b = np.array([1.0, np.nan, np.nan, -0.0, 0.0], np.float32)
    check(jnp.maximum, a, b)
    check(jnp.minimum, a, b)


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=lambda d: np.dtype(d).name)
def test_integer_division_and_remainder(dtype):
    info = np.iinfo(dtype)
    edge = [0, 1, -1, info.min, info.max, 7, -7, 3] if info.min < 0 else [0, 1, info.max, 7, 3, 2, 255, 9]
    a = np.array([x for x in edge for _ in edge], dtype=dtype)
    b = np.array([y for _ in edge for y in edge], dtype=dtype)
    check(lax.div, a, b)
    check(lax.rem, a, b)
    # jnp's floor division and modulo are built from these, with their own guards.
    check(jnp.floor_divide, a, np.where(b == 0, 1, b).astype(dtype))
    check(jnp.remainder, a, np.where(b == 0, 1, b).astype(dtype))


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=lambda d: np.dtype(d).name)
def test_bitwise_and_shifts(dtype):
    bits = np.iinfo(dtype).bits
    a = random_array(RNG, (64,), dtype)
    amounts = np.resize(np.arange(-2, bits + 3), 64)
    s = amounts.astype(dtype)
    check(jnp.bitwise_and, a, s)
    check(jnp.bitwise_or, a, s)
    check(jnp.bitwise_xor, a, s)
    check(jnp.bitwise_not, a)
    check(lax.shift_left, a, s)
    check(lax.shift_right_logical, a, s)
    check(lax.shift_right_arithmetic, a, s)
    check(lax.population_count, a)
    check(lax.clz, a)


@pytest.mark.parametrize("dtype", SIGNED_DTYPES + FLOAT_DTYPES, ids=lambda d: np.dtype(d).name)
def test_signed_unary(dtype):
    a = random_array(RNG, (33,), dtype)
    check(jnp.abs, a)
    check(jnp.negative, a)
    check(jnp.sign, a)


@pytest.mark.parametrize("dtype", UNSIGNED_DTYPES, ids=lambda d: np.dtype(d).name)
def test_unsigned_unary(dtype):
    a = random_array(RNG, (33,), dtype)
    check(jnp.sign, a)
    check(jnp.negative, a)


@pytest.mark.parametrize("dtype", SIGNED_DTYPES, ids=lambda d: np.dtype(d).name)
def test_integer_power(dtype):
    base = np.array([-3, -2, -1, 0, 1, 2, 3, 5], dtype=dtype)
    exp = np.array([0, 1, 2, 3, 5, -1, -2, 4], dtype=dtype)
    check(jnp.power, base, np.abs(exp).astype(dtype))
    check(lambda x: lax.integer_pow(x, 3), base)


COMPARES = {
    "eq": jnp.equal, "ne": jnp.not_equal, "lt": jnp.less, "le": jnp.less_equal,
    "gt": jnp.greater, "ge": jnp.greater_equal,
}


@pytest.mark.parametrize("dtype", FLOAT_DTYPES + INT_DTYPES + [jnp.bool_], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", sorted(COMPARES))
def test_compare(name, dtype):
    if np.dtype(dtype).kind == "f" or dtype == jnp.bfloat16:
        a = np.concatenate([special_floats(dtype), random_array(RNG, (9,), dtype)])
        b = np.concatenate([special_floats(dtype)[::-1], random_array(RNG, (9,), dtype)])
    else:
        a = random_array(RNG, (24,), dtype)
        b = np.where(RNG.random(24) < 0.3, a, random_array(RNG, (24,), dtype)).astype(dtype)
    check(COMPARES[name], a, b)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES + INT_DTYPES + [jnp.bool_], ids=lambda d: np.dtype(d).name)
def test_select_and_clamp(dtype):
    p = RNG.random((5, 3)) < 0.5
    a = random_array(RNG, (5, 3), dtype)
    b = random_array(RNG, (5, 3), dtype)
    check(jnp.where, p, a, b)
    check(lambda p, a, b: lax.select(p[0, 0], a, b), p, a, b)
    if dtype != jnp.bool_:
        lo, hi = np.sort(random_array(RNG, (2,), dtype))
        check(lambda x: jnp.clip(x, lo, hi), a)
        check(lambda x, lo, hi: lax.clamp(lo, x, hi), a, np.minimum(a, b), np.maximum(a, b))


ALL_DTYPES = [jnp.bool_, jnp.int8, jnp.int16, jnp.int32, jnp.uint8, jnp.uint16, jnp.uint32,
              jnp.float16, jnp.bfloat16, jnp.float32]


@pytest.mark.parametrize("src", ALL_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("dst", ALL_DTYPES, ids=lambda d: np.dtype(d).name)
def test_convert(src, dst):
    if np.dtype(src).kind in "f" or src == jnp.bfloat16:
        x = np.concatenate([special_floats(src)[np.isfinite(special_floats(src).astype(np.float32))],
                            random_array(RNG, (20,), src, -300, 300)])
        if np.dtype(dst).kind in "iu":
            # Out-of-range float -> int conversion is implementation-defined in StableHLO; compare in range.
            info = np.iinfo(dst)
            x = np.clip(x.astype(np.float32), info.min, info.max).astype(src)
            x = x[np.abs(x.astype(np.float64)) < min(abs(info.min) if info.min else info.max, info.max)]
    else:
        x = random_array(RNG, (40,), src)
    check(lambda v: lax.convert_element_type(v, dst), x)


def test_convert_rounds_to_nearest_even():
    x = np.array([1.0009765625, 1.00048828125, 1.00146484375, 65519.0, 65520.0, 1e-8, 3.0e-5,
                  1.00390625, 1.01171875, 3.4e38], np.float32)
    check(lambda v: v.astype(jnp.float16), x)
    check(lambda v: v.astype(jnp.bfloat16), x)


@pytest.mark.parametrize("pair", [(jnp.float32, jnp.int32), (jnp.float32, jnp.uint32), (jnp.int32, jnp.float32),
                                  (jnp.float16, jnp.int16), (jnp.bfloat16, jnp.uint16), (jnp.uint32, jnp.int32),
                                  (jnp.float32, jnp.uint8), (jnp.uint8, jnp.uint32), (jnp.float32, jnp.float16),
                                  (jnp.int16, jnp.uint8)], ids=str)
def test_bitcast_convert(pair):
    src, dst = pair
    x = random_array(RNG, (6, 4), src)
    check(lambda v: lax.bitcast_convert_type(v, dst), x)


def test_complex_elementwise():
    a = random_array(RNG, (8,), np.complex64)
    b = random_array(RNG, (8,), np.complex64)
    check(lambda a, b: (a + b, a - b, a * b, a / b, -a), a, b)
    check(lambda a: (jnp.exp(a), jnp.log(a), jnp.sqrt(a), jnp.abs(a), jnp.real(a), jnp.imag(a),
                     jnp.conj(a), jnp.sign(a)), a, rtol=1e-4, atol=1e-5)
    check(lambda a, b: (a == b, a != b, jnp.equal(a, a)), a, b)
    check(lambda x, y: lax.complex(x, y), np.real(a), np.imag(b))


def test_complex_grads_and_dot():
    z = random_array(RNG, (6,), np.complex64)
    w = random_array(RNG, (6, 4), np.complex64)
    check_reduction(lambda z, w: z @ w, z, w, k=2 * 6)
    check(jax.grad(lambda x: jnp.sum(jnp.abs(jnp.exp(x * (1 + 2j))) ** 2)), np.real(z).astype(np.float32), rtol=1e-4)
    check(jax.grad(lambda z: jnp.real(jnp.sum(z * jnp.conj(z) + jnp.sqrt(z)))), z, rtol=1e-4, atol=1e-5)
    check_reduction(jnp.sum, z, k=6)
    check(lambda z: (jnp.real(z).astype(jnp.float16), jnp.where(jnp.abs(z) > 1, z, 0)), z, exact=True)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=lambda d: np.dtype(d).name)
def test_vectorised_exp_tanh_sigmoid_over_the_float_range(dtype):
    # The host executor's own exp/tanh/sigmoid (host_fastmath.h): a dense sweep through every binade
    # that matters, the overflow/underflow edges, and large arrays that split across threads.
    mags = np.concatenate([np.geomspace(1e-30, 110, 30000), np.linspace(87.0, 89.0, 2001), np.linspace(0, 10, 20001)])
    x = np.concatenate([mags, -mags, special_floats(np.float32)]).astype(np.float32)
    with np.errstate(over="ignore"):  # values past float16's range become inf, and are kept as such
        x = x.astype(dtype)
    tight = {"rtol": 1e-6, "atol": 1e-37} if dtype == jnp.float32 else {}
    check(jnp.exp, x, **tight)
    check(jnp.tanh, x, **tight)
    check(jax.nn.sigmoid, x, **tight)
    # 1 + tanh(...) cancels near -1, so gelu there is only as accurate as its operand x allows: within
    # 4 ulps of |x|, elementwise (XLA:CPU computes 16-bit gelu in float32 on some CPUs, natively on
    # others, e.g. with AVX512-FP16; either is within that bound).
    gelu = lambda x: jax.nn.gelu(x, approximate=True)  # noqa: E731
    g, w = (np.asarray(run_on(p, gelu, x), np.float64) for p in ("metal", "cpu"))
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
    np.testing.assert_array_equal(g[np.isinf(w)], w[np.isinf(w)])
    ok = np.isfinite(w)
    bound = 4 * eps(dtype) * np.maximum(np.abs(x.astype(np.float64)), np.abs(w)) + float(ml_dtypes.finfo(dtype).tiny)
    assert np.all(np.abs(g - w)[ok] <= bound[ok])
    check(lambda x: jax.nn.softmax(x.reshape(-1, 7)[:, :5]), x[: x.size // 7 * 7])


def test_an_op_repeated_on_the_same_operands_is_computed_once():
    # XLA's common-subexpression elimination: the program JAX emits takes log(x) twice (as erf_inv does in
    # two branches), and the plugin computes it once, with the same results.
    import jax_metal_plugin
    x = RNG.uniform(0.1, 4.0, 4096).astype(np.float32)
    fn = lambda x: (jnp.log(x) * 2.0, jnp.log(x) + 1.0, jnp.where(x > 1, jnp.log(x), -jnp.log(x)))  # noqa: E731
    # A few ulps of log's largest result (log(4) < 2) on either side.
    check(fn, x, rtol=0, atol=8 * eps(np.float32))
    text = jax_metal_plugin.mps_graph(fn, x)
    assert text.count("Logarithm(") == 1, text

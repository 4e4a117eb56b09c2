"""The host executor's float32, float64 and 32/64-bit integer elementwise loops built for AVX2 (arithmetic,
comparisons, shifts, logic, 4- and 8-byte selects) against JAX's CPU backend, bit for bit: on edge values, on arrays large
enough to be fused into tiles and split over threads, and with one operand a splat (the loops' uniform
path), as threefry and erf_inv use them."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from jaxcompare import check, run_on

N = 5000  # above the fusion threshold, not a multiple of a tile


def values(dtype, seed):
    dtype = np.dtype(dtype)
    rng = np.random.default_rng(seed)
    if dtype.kind == "f":
        # No result may be subnormal (XLA:CPU flushes those to zero, the host executor does not).
        big, tiny = (1e300, 1e-300) if dtype == np.float64 else (1e38, 1e-30)
        edges = np.array([np.nan, -0.0, 0.0, np.inf, -np.inf, big, -big, tiny, 1.5, -2.5], dtype)
        rest = rng.uniform(-4, 4, N).astype(dtype)
    else:
        ii = np.iinfo(dtype)
        bits = dtype.itemsize * 8
        edges = np.array([ii.min, ii.max, 0, 1, bits - 1, bits, bits + 3] + ([-1] if dtype.kind == "i" else []), dtype)
        rest = rng.integers(ii.min, ii.max, N, dtype=dtype, endpoint=True)
    out = np.concatenate([edges, rest])[:N]
    return rng.permutation(out)


def arithmetic(x, y, p):
    splat = jnp.asarray(3, x.dtype)
    out = [x + y, x - y, x * y, jnp.maximum(x, y), jnp.minimum(x, y), jnp.where(p, x, y),
           x + splat, splat - y, x * splat,
           # selects of splats (uniform operands in a fused tile), as erf_inv picks its coefficients
           jnp.where(p, splat, y), jnp.where(p, x, splat), jnp.where(p, splat, -splat),
           # comparisons, with a splat bound on either side (erf_inv's w < 6.25 and w < 16); NaN and ±0 edges
           x == y, x != y, x < y, x <= y, x > y, x >= y, x < splat, splat <= y, x == splat, x != splat]
    if jnp.issubdtype(x.dtype, jnp.floating):
        # (not y / splat: XLA rewrites a division by a constant as a product with its reciprocal)
        out += [x / y, splat / y, jnp.maximum(x, 0.0), jnp.minimum(-0.0, y)]
    else:
        out += [x & y, x | y, x ^ y, lax.shift_left(x, y), lax.shift_right_logical(x, y),
                lax.shift_right_arithmetic(x, y), lax.shift_left(x, splat), lax.shift_right_logical(x, splat),
                (x ^ splat) | (y & splat)]
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.uint64, np.int32, np.uint32])
def test_vector_loops_match_cpu(x64, dtype):
    p = np.arange(N) % 3 == 1
    check(arithmetic, values(dtype, 1), values(dtype, 2), p, exact=True)
    # the same ops unfused: one op per program, the whole array per kernel call
    x, y = values(dtype, 3), values(dtype, 4)
    for fn in (lambda x, y: x + y, lambda x, y: x * y, lambda x, y: jnp.where(x > y, x, y)):
        check(fn, x, y, exact=True)


def test_float32_select_and_int32_in_a_fused_chain():
    x = np.linspace(-3, 3, N).astype(np.float32)
    i = np.arange(N, dtype=np.int32) * 7919

    def f(x, i):
        k = (i ^ (i >> 3)) + 12345
        return jnp.where(k % 2 == 0, x * 2.0, -x), k

    check(f, x, i, exact=True)


def test_float32_relu_mask_selects_by_data():
    # A relu's forward and backward: its mask comes from data, so a loop that branched on it would
    # mispredict half the time; each select has one array side and one splat (a fused tile's uniform).
    rng = np.random.default_rng(5)
    h, g = rng.normal(size=(2, 64, 97)).astype(np.float32)

    def f(h, g):
        m = h > 0
        return jnp.where(m, h, 0.0), jnp.where(m, g, 0.0), jnp.where(m, 0.0, g), m, h >= 0, h < 0

    check(f, h, g, exact=True)
    check(lambda h, g: jax.grad(lambda h: jnp.sum(jax.nn.relu(h) * g))(h), h, g, exact=True)


def test_random_bits_and_float64_normal_match_cpu_bit_for_bit(x64):
    key = jax.random.key(5)
    check(lambda k: jax.random.bits(k, (N,), jnp.uint32), key, exact=True)
    check(lambda k: jax.random.bits(k, (N,), jnp.uint64), key, exact=True)
    check(lambda k: jax.random.uniform(k, (N,), jnp.float64), key, exact=True)


def log_domain():
    """Every binade of float64 (subnormals included), values near 1 where log is smallest, and the edges."""
    rng = np.random.default_rng(7)
    edges = np.array([0.0, -0.0, -1.0, -np.inf, np.inf, np.nan, 5e-324, 2.2250738585072009e-308,
                      2.2250738585072014e-308, 1.0, np.nextafter(1.0, 0.0), np.nextafter(1.0, 2.0), 2.0, 0.5,
                      np.sqrt(0.5), np.sqrt(2.0), np.finfo(np.float64).max, -5e-324])
    binades = np.ldexp(rng.uniform(1.0, 2.0, N), rng.integers(-1074, 1024, N))
    near_one = 1.0 + rng.uniform(-0.3, 0.42, N)
    return np.concatenate([edges, binades, near_one, -binades[:100]])


def test_float64_log_sqrt_negative_abs_match_cpu(x64):
    x = log_domain()
    tiny = np.finfo(np.float64).tiny
    subnormal = (x != 0) & (np.abs(x) < tiny)
    # fastmath::Log is within 1 ulp of log (its error analysis in host_fastmath.h), as is XLA:CPU's: the two
    # may differ by 2 ulp, 2 * 2^-52 relative. Zero, negatives, inf and NaN give the same specials exactly.
    m = run_on("metal", jnp.log, x)
    c = run_on("cpu", jnp.log, x)
    normal = ~subnormal
    special = normal & ~np.isfinite(c)
    np.testing.assert_array_equal(m[special], c[special])
    np.testing.assert_allclose(m[normal & ~special], c[normal & ~special], rtol=2 * 2.0**-52, atol=0)
    # XLA:CPU reads subnormal inputs as zero (log gives -inf); the host executor keeps them, as the
    # other host kernels do, so they are held to IEEE log (NumPy's libm), within the same 2 ulp.
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(m[subnormal], np.log(x[subnormal]), rtol=2 * 2.0**-52, atol=0)
    # sqrt is correctly rounded on both; negation and absolute value are exact
    xn = np.where(subnormal, 0.5, x)
    check(lambda x: (jnp.sqrt(x), -x, jnp.abs(x)), xn, exact=True)
    # in a fused chain, as erf_inv takes w = -log((1 - u)(1 + u)) and sqrt(w): u's rounding gives
    # (1 - u)(1 + u) within 2 ulp on both, log's 1 ulp each, so 4 ulp relative at most
    u = np.concatenate([np.linspace(-1.0, 1.0, N), [np.nextafter(1.0, 0.0), np.nextafter(-1.0, 0.0), 0.0]])

    def w(u):
        return -jnp.log((1.0 - u) * (1.0 + u))

    check(lambda u: (w(u), jnp.sqrt(w(u))), u, rtol=4 * 2.0**-52, atol=0)

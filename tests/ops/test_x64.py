"""jax_enable_x64 end to end: float64, int64/uint64 and complex128 programs on metal (the host executor
runs them: MPSGraph has no float64) against JAX's CPU backend, through every op family the suite covers."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax

from jaxcompare import (assert_close, check, check_fft, check_reduction, device, eps, init_mlp, make_sgd_step,
                        random_array, run_on, special_floats)

RNG = np.random.default_rng(64)


pytestmark = pytest.mark.usefixtures("x64_module")


def f64(*shape, low=-3.0, high=3.0):
    return random_array(RNG, shape, np.float64, low, high)


def c128(*shape, low=-3.0, high=3.0):
    return random_array(RNG, shape, np.complex128, low, high)


def f64_specials():
    """special_floats in float64, and float64's own extremes. No subnormals: XLA:CPU flushes them to zero."""
    vals = special_floats(np.float32).astype(np.float64)
    return np.concatenate([vals, [np.finfo(np.float64).max, -np.finfo(np.float64).tiny, 1e300, -1e-300,
                                  np.pi, 1 - 2**-52, 1 + 2**-52]])


def test_types_stay_64_bit():
    x = f64(3)
    out = run_on("metal", lambda x: (x * 2, x.astype(jnp.int64), x.astype(jnp.complex128)), x)
    assert [o.dtype for o in out] == [np.float64, np.int64, np.complex128]


# ---- elementwise float64

UNARY = {
    "sin": jnp.sin, "cos": jnp.cos, "tan": jnp.tan, "tanh": jnp.tanh, "exp": jnp.exp, "expm1": jnp.expm1,
    "exp2": jnp.exp2, "log": jnp.log, "log1p": jnp.log1p, "log2": jnp.log2, "sqrt": jnp.sqrt, "rsqrt": lax.rsqrt,
    "cbrt": jnp.cbrt, "sigmoid": jax.nn.sigmoid, "erf": jax.scipy.special.erf, "asinh": jnp.arcsinh,
    "acosh": jnp.arccosh, "atanh": jnp.arctanh, "asin": jnp.arcsin, "acos": jnp.arccos, "atan": jnp.arctan,
    "sinh": jnp.sinh, "cosh": jnp.cosh, "abs": jnp.abs, "neg": jnp.negative, "sign": jnp.sign, "floor": jnp.floor,
    "ceil": jnp.ceil, "round": jnp.round, "rint": jnp.rint, "trunc": jnp.trunc, "isfinite": jnp.isfinite,
    "isnan": jnp.isnan, "square": jnp.square, "reciprocal": jnp.reciprocal,
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_float64_unary(name):
    fn = UNARY[name]
    x = np.concatenate([f64(64), f64(16, low=-1e-6, high=1e-6), f64(8, low=-40, high=40)])
    check(fn, x)
    with np.errstate(all="ignore"):
        check(fn, f64_specials())


def test_float64_unary_keeps_float64_precision():
    # exp, log, sin of values whose float32 rounding would show: differences of a float32 ulp fail.
    x = 1 + np.arange(1, 33, dtype=np.float64) * 2.0**-40
    got = check(lambda x: (jnp.exp(x) - np.e, jnp.log(x), jnp.sin(x) - np.sin(1.0), x - 1), x)
    np.testing.assert_array_equal(got[3], x - 1)
    assert np.all(got[1] > 0)


def test_float64_binary():
    a, b = f64(50), f64(50)
    b[::7] = 0
    check(lambda a, b: (a + b, a - b, a * b, a / b, jnp.maximum(a, b), jnp.minimum(a, b), jnp.arctan2(a, b),
                        jnp.fmod(a, b), jnp.remainder(a, b), jnp.power(jnp.abs(a), b), jnp.hypot(a, b),
                        jnp.copysign(a, b), a < b, a == b, a >= b), a, b)
    s = f64_specials()
    with np.errstate(all="ignore"):
        check(lambda a, b: (a + b, a * b, a / b, jnp.maximum(a, b), jnp.minimum(a, b), jnp.nextafter(a, b)),
              s, s[::-1].copy())
    check(lambda x: jnp.clip(x, -1.5, 2.25), a)


def test_float64_nextafter_and_reduce_precision():
    x = f64(20)
    check(lambda x: (jnp.nextafter(x, jnp.inf), jnp.nextafter(x, -jnp.inf), jnp.nextafter(x, x)), x, exact=True)
    y = np.array([0.0, -0.0, 2.5e-308, 1.0, -2.5, np.inf, np.nan, 1 + 2**-30, 1e300, 1e-300], np.float64)
    check(lambda x: (lax.reduce_precision(x, exponent_bits=8, mantissa_bits=23),
                     lax.reduce_precision(x, exponent_bits=5, mantissa_bits=10),
                     lax.reduce_precision(x, exponent_bits=11, mantissa_bits=30)), y, exact=True)


# ---- int64 / uint64

INT64_EDGES = np.array([0, 1, -1, 2**62, -2**62, 2**63 - 1, -2**63, 12345678901234, -98765432109876, 7, -7, 3],
                       np.int64)


def ints(dtype, n):
    return random_array(RNG, (n,), dtype)


@pytest.mark.parametrize("dtype", [np.int64, np.uint64])
def test_int64_arithmetic_wraps(dtype):
    a = np.concatenate([ints(dtype, 40), INT64_EDGES.astype(dtype)])
    b = np.concatenate([ints(dtype, 40), INT64_EDGES[::-1].astype(dtype)])
    check(lambda a, b: (a + b, a - b, a * b, -a, jnp.maximum(a, b), jnp.minimum(a, b), a < b, a == b,
                        a & b, a | b, a ^ b, ~a), a, b)


@pytest.mark.parametrize("dtype", [np.int64, np.uint64])
def test_int64_division(dtype):
    a = np.concatenate([ints(dtype, 40), INT64_EDGES.astype(dtype)])
    b = np.concatenate([ints(dtype, 40) >> 40, INT64_EDGES[::-1].astype(dtype)])
    b[::5] = 0
    check(lambda a, b: (lax.div(a, b), lax.rem(a, b)), a, b)
    nz = np.where(b == 0, 3, b).astype(dtype)
    check(lambda a, b: (a // b, a % b), a, nz)


@pytest.mark.parametrize("dtype", [np.int64, np.uint64])
def test_int64_shifts_and_bits(dtype):
    a = np.concatenate([ints(dtype, 30), INT64_EDGES.astype(dtype)])
    s = (np.arange(a.size) * 3 % 70).astype(dtype)  # amounts past 63 too
    check(lambda a, s: (lax.shift_left(a, s), lax.shift_right_logical(a, s), lax.shift_right_arithmetic(a, s),
                        lax.population_count(a), lax.clz(a)), a, s)
    check(lambda a: (jnp.abs(a), jnp.sign(a), a ** 3, lax.integer_pow(a, 2)), a)


def test_int64_values_beyond_float64():
    # 2^53 + 1 and friends: a detour through float64 would change them.
    a = np.array([2**53 + 1, 2**62 + 3, -(2**61) - 5, 2**63 - 1], np.int64)
    check(lambda a: (a + 2, a * 3, a // 7, jnp.cumsum(a), jnp.sum(a), jnp.max(a), jnp.sort(a[::-1]),
                     a.astype(jnp.uint64) + np.uint64(2**63)), a)


# ---- reductions

def test_float64_reductions():
    x = f64(6, 70, 5)
    check_reduction(lambda x: (jnp.sum(x, axis=1), jnp.mean(x, axis=(0, 2))), x, k=70 * 6 * 5)
    check_reduction(lambda x: jnp.prod(x / 2, axis=2), x, k=5)
    check(lambda x: (jnp.max(x, axis=1), jnp.min(x, axis=(0, 1)), jnp.argmax(x, axis=1), jnp.argmin(x, axis=0)), x)
    y = f64_specials()
    check(lambda y: (jnp.max(y), jnp.min(y), jnp.argmax(y), jnp.nanmax(y), jnp.nanargmin(y)), y)
    check_reduction(lambda x: jnp.var(x, axis=1), x, k=2 * 70, magnitude="normwise")
    check_reduction(lambda x: jax.nn.logsumexp(x, axis=1), x, k=70, magnitude="normwise")


def test_int64_reductions():
    a = random_array(RNG, (4, 33), np.int64)
    check(lambda a: (jnp.sum(a, axis=1), jnp.prod(a, axis=0), jnp.max(a), jnp.min(a, axis=1), jnp.argmax(a, axis=1)),
          a)
    u = random_array(RNG, (4, 33), np.uint64)
    check(lambda u: (jnp.sum(u, axis=1), jnp.max(u, axis=0), jnp.min(u), jnp.argmin(u, axis=1)), u)


def test_complex128_reductions():
    z = c128(5, 40)
    check_reduction(lambda z: (jnp.sum(z, axis=1), jnp.mean(z, axis=0)), z, k=40)
    # Products in another order: relative error within n eps of each factor's (no cancellation).
    w = c128(3, 7, 5, low=0.5, high=1.2)
    got = run_on("metal", lambda w: (jnp.prod(w, axis=1), jnp.prod(w, axis=(0, 2)), jnp.prod(w)), w)
    want = run_on("cpu", lambda w: (jnp.prod(w, axis=1), jnp.prod(w, axis=(0, 2)), jnp.prod(w)), w)
    for g, e, n in zip(got, want, (7, 15, 105)):
        assert g.dtype == np.complex128
        np.testing.assert_allclose(g, e, rtol=4 * n * eps(np.complex128), atol=0)


# ---- matmul, dot_general, convolution

@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
@pytest.mark.parametrize("shape", [(1, 1, 1), (7, 5, 3), (64, 130, 33), (256, 256, 256)])
def test_matmul(dtype, shape):
    m, k, n = shape
    a = random_array(RNG, (m, k), dtype)
    b = random_array(RNG, (k, n), dtype)
    check_reduction(jnp.matmul, a, b, k=k)
    check_reduction(lambda a, b: a.T @ b.T, b, a, k=k)


def test_dot_general_batched_and_mixed():
    a, b = f64(3, 6, 40), f64(3, 40, 5)
    check_reduction(lambda a, b: jnp.einsum("bik,bkj->bij", a, b), a, b, k=40)
    check_reduction(lambda a, b: jnp.einsum("bik,bjk->bji", a, b), a, b.transpose(0, 2, 1).copy(), k=40)
    x32 = random_array(RNG, (6, 40), np.float32)
    check_reduction(lambda x, b: jnp.dot(x, b[0], preferred_element_type=jnp.float64), x32, b, k=40)
    z, w = c128(4, 9), c128(9, 2)
    check_reduction(lambda z, w: jnp.vdot(z[0], w[:, 0]) + (z @ w).sum(), z, w, k=9 * 4 * 2 + 9)
    i, j = random_array(RNG, (5, 9), np.int64), random_array(RNG, (9, 4), np.int64)
    check(jnp.matmul, i, j)  # wraps like the elementwise ops


def test_convolution_float64():
    x, w = f64(2, 3, 12, 11), f64(4, 3, 3, 2)
    conv = lambda x, w: lax.conv_general_dilated(x, w, (1, 2), "SAME", rhs_dilation=(2, 1))
    check_reduction(conv, x, w, k=3 * 3 * 2)
    x1, w1 = f64(2, 4, 20), f64(6, 2, 5)
    check_reduction(lambda x, w: lax.conv_general_dilated(x, w, (1,), [(2, 2)], feature_group_count=2), x1, w1, k=2 * 5)
    check_reduction(jax.grad(lambda x, w: jnp.sum(conv(x, w) ** 2), argnums=(0, 1)), x, w, k=4 * 3 * 2 * 2 * 12 * 11,
                    magnitude="normwise")


def test_convolution_complex128():
    x, w = c128(1, 2, 7, 6), c128(3, 2, 2, 2)
    check_reduction(lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "VALID"), x, w, k=2 * 2 * 2)


# ---- FFT

@pytest.mark.parametrize("n", [1, 8, 13, 64, 100])
def test_fft_complex128_and_float64(n):
    z, x = c128(3, n), f64(3, n)
    got = check_fft(lambda z: (jnp.fft.fft(z), jnp.fft.ifft(z)), z)
    assert got[0].dtype == np.complex128
    check_fft(jnp.fft.rfft, x)
    check_fft(lambda x: jnp.fft.irfft(jnp.fft.rfft(x), n=n), x, passes=2)
    z2 = c128(2, 6, n)
    check_fft(jnp.fft.fft2, z2, axes=(1, 2))
    check_fft(lambda x: jnp.fft.irfft2(jnp.fft.rfft2(x)), f64(2, 5, n), axes=(1, 2), passes=2)


def test_fft_float64_is_float64_accurate():
    # A float32 transform would be off by ~1e-7 here; float64's is within ~1e-15.
    x = f64(256)
    got = run_on("metal", lambda x: jnp.fft.irfft(jnp.fft.rfft(x), n=256), x)
    np.testing.assert_allclose(got, x, rtol=0, atol=1e-13)


# ---- cumulative ops

def test_cumulative_float64():
    x = f64(4, 50)
    check_reduction(lambda x: (jnp.cumsum(x, axis=1), jnp.cumsum(x[:, ::-1], axis=1)[:, ::-1]), x, k=50)
    check_reduction(lambda x: jnp.cumprod(1 + x / 100, axis=1), x, k=50, magnitude="normwise")
    check(lambda x: (lax.cummax(x, axis=1), lax.cummin(x, axis=0, reverse=True)), x)
    check_reduction(lambda x: lax.cumlogsumexp(x, axis=1), x, k=50, magnitude="normwise")
    y = f64_specials()
    check(lambda y: (lax.cummax(y), lax.cummin(y)), y)


def test_cumulative_int64_and_complex128():
    a = random_array(RNG, (3, 40), np.int64)
    check(lambda a: (jnp.cumsum(a, axis=1), jnp.cumprod(a, axis=0), lax.cummax(a, axis=1)), a)
    z = c128(3, 20)
    check_reduction(lambda z: jnp.cumsum(z, axis=1), z, k=20)


# ---- sort, argsort, top_k

def test_sort_float64_nan_and_signed_zero():
    x = np.concatenate([f64(40), [np.nan, -0.0, 0.0, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-300, -1e-300]])
    RNG.shuffle(x)
    check(lambda x: (jnp.sort(x), jnp.argsort(x), jnp.argsort(x, stable=True), jnp.sort(x, descending=True),
                     jnp.argsort(-x, stable=True)), x, exact=True)
    check(lambda x: lax.sort(x, is_stable=True), x, exact=True)  # total order: -0.0 before 0.0


def test_sort_keeps_float64_order():
    # Neighbours that float32 keys would merge into ties.
    base = 1 + np.arange(20, dtype=np.float64) * 2.0**-45
    x = RNG.permutation(base)
    got = check(lambda x: (jnp.sort(x), jnp.argsort(x)), x, exact=True)
    np.testing.assert_array_equal(got[0], base)


@pytest.mark.parametrize("dtype", [np.int64, np.uint64])
def test_sort_int64(dtype):
    a = np.concatenate([ints(dtype, 50), INT64_EDGES.astype(dtype)])
    check(lambda a: (jnp.sort(a), jnp.argsort(a, stable=True), lax.top_k(a, 5)), a, exact=True)


def test_top_k_and_lexsort_float64():
    x = f64(5, 30)
    x[0, :3] = np.nan
    x[1, :4] = -0.0
    check(lambda x: lax.top_k(x, 7), x, exact=True)
    k1, k2 = (RNG.integers(0, 3, 30).astype(np.float64), f64(30))
    check(lambda a, b: jnp.lexsort((b, a)), k1, k2, exact=True)
    z = c128(25)
    check(lambda z: (jnp.sort(z), jnp.argsort(z)), z, exact=True)


# ---- control flow

def test_scan_while_fori_float64_carries():
    x = f64(30)

    def scan_fn(x):
        def body(c, v):
            c = c * 0.999 + v * 1e-3
            return c, c ** 2
        return lax.scan(body, jnp.float64(1.0) + 2.0**-40, x)

    check_reduction(scan_fn, x, k=30, magnitude="normwise")

    def newton_sqrt(a):  # converges in float64, not merely to float32 precision
        def cond(s):
            return jnp.abs(s[1] * s[1] - a) > 1e-14 * a

        def body(s):
            i, y = s
            return i + 1, 0.5 * (y + a / y)
        return lax.while_loop(cond, body, (jnp.int64(0), a))

    got = check(newton_sqrt, np.float64(2.0))
    assert abs(got[1] - np.sqrt(2.0)) < 4e-16
    check(lambda x: lax.fori_loop(0, 10, lambda i, c: c + jnp.sin(c) * x[i], jnp.float64(0.5)), x)
    check(lambda n, x: lax.fori_loop(jnp.int64(0), n, lambda i, c: c * x[i % 30] + i, jnp.float64(1)),
          np.int64(17), x / 3)
    check(lambda p, a, b: lax.cond(p > 0, lambda a, b: a * b + 2**-50, lambda a, b: a - b, a, b),
          np.float64(1), np.float64(3), np.float64(1 / 3))


# ---- gather, scatter, dynamic slices with 64-bit indices

def test_gather_scatter_int64_indices():
    x = f64(10, 6)
    idx = np.array([3, 0, 9, 3, -1, 12, 2**40, -2**40], np.int64)
    check(lambda x, i: (x[i], x[i % 10, 1], jnp.take(x, i, axis=0, mode="clip"), jnp.take(x, i, axis=0, mode="fill")),
          x, idx)
    upd = f64(8, 6)
    check(lambda x, i, u: (x.at[i].add(u), x.at[i].set(u, mode="drop"), x.at[i].max(u), x.at[i].mul(u)),
          x, idx, upd)
    check(lambda x, i: lax.dynamic_slice(x, (i, jnp.int64(1)), (3, 4)), x, np.int64(8))
    check(lambda x, i: lax.dynamic_update_slice(x, jnp.ones((2, 2), x.dtype), (i, i)), x, np.int64(2**40))
    u = np.arange(12, dtype=np.uint64)
    check(lambda u, i: (u[i % 12], u.at[i % 12].add(u[:8])), u, idx)
    z = c128(10)
    check(lambda z, i: (z[i], z.at[i].add(z[:8])), z, idx)


# ---- conversions

ALL_DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
              np.float16, ml_dtypes.bfloat16, np.float32, np.float64, np.complex64, np.complex128]


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: np.dtype(d).name)
def test_convert_float64_to_and_from(dtype):
    x = np.concatenate([f64(40, low=-300, high=300), f64(20), [0.0, -0.0, 0.5, 1.5, 2.5, -2.5, 65519.99, 65520.0,
                                                                    1 + 2**-11, 1 + 3 * 2**-12, 3e38, 1e-300]])
    # Out-of-range float -> integer conversions are implementation-defined: only in-range values there.
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        x = np.clip(x, float(info.min), float(info.max) * 0.999)
    check(lambda x: x.astype(dtype), x, exact=True)
    v = random_array(RNG, (40,), dtype) if np.dtype(dtype) != np.bool_ else RNG.random(40) < 0.5
    check(lambda v: v.astype(jnp.float64), v, exact=True)
    check(lambda v: v.astype(jnp.complex128), v, exact=True)


def test_convert_halfway_cases_to_narrow_floats():
    # Near-halfway cases, where a float32 intermediate would round twice. float64 -> float16 rounds once
    # (1 + 2^-11 + 2^-40 is float16 1 + 2^-10), as NumPy and a direct conversion give it; XLA:CPU does so
    # only on CPUs with one (AVX512-FP16, ARM), so this compares with NumPy. float64 -> bfloat16 goes
    # through float32 on XLA:CPU everywhere, and must equal it.
    h = np.array([1 + 2**-11 + 2**-40, 1 + 2**-11 - 2**-40, 1 + 2**-8 + 2**-35, 1 + 2**-8 - 2**-35, 2049.0000001,
                  2**-24 * (1 + 2**-40), 2**-25 * (1 + 2**-40), 65519.99999, 65520.00001], np.float64)
    h = np.concatenate([h, -h])
    got = run_on("metal", lambda h: h.astype(jnp.float16), h)
    np.testing.assert_array_equal(np.asarray(got).view(np.uint16), h.astype(np.float16).view(np.uint16))
    check(lambda h: h.astype(jnp.bfloat16), h, exact=True)
    i = np.array([2**24 + 1, 2**30 + 2**22 + 1, -(2**40) - 2**32 - 1, 16777217 * 256 + 1], np.int64)
    check(lambda i: (i.astype(jnp.bfloat16), i.astype(jnp.float32), i.astype(jnp.float16)), i, exact=True)


def test_bitcast_float64():
    x = f64_specials()
    check(lambda x: (lax.bitcast_convert_type(x, jnp.int64), lax.bitcast_convert_type(x, jnp.uint32),
                     lax.bitcast_convert_type(lax.bitcast_convert_type(x, jnp.uint64), jnp.float64),
                     lax.bitcast_convert_type(x.astype(jnp.float32), jnp.int32)), x, exact=True)
    pairs = random_array(RNG, (6, 2), np.uint32)
    check(lambda p: lax.bitcast_convert_type(p, jnp.float64), pairs, exact=True)


# ---- complex128

def test_complex128_arithmetic_and_math():
    a, b = c128(40), c128(40)
    check(lambda a, b: (a + b, a - b, a * b, a / b, a == b, jnp.conj(a), jnp.real(a), jnp.imag(a), jnp.abs(a),
                        jnp.angle(a), lax.complex(jnp.real(a), jnp.imag(b))), a, b)
    check(lambda a: (jnp.exp(a), jnp.log(a), jnp.sqrt(a), jnp.sin(a), jnp.cos(a), jnp.tan(a), jnp.tanh(a),
                     jnp.expm1(a / 10), jnp.log1p(a / 10), lax.rsqrt(a), jax.nn.sigmoid(a), jnp.sign(a),
                     a ** 2, a ** 0.5, jnp.power(a, b)), a)
    big = np.array([30 + 1j, -30 - 2j, 15 + 0.5j, 0.1 + 25j], np.complex128)
    check(lambda z: (jnp.tanh(z), jnp.tan(z * 1j)), big)


def test_complex128_keeps_float64_parts():
    z = (1 + 2.0**-40) * np.exp(1j * np.linspace(0, 3, 12))
    got = check(lambda z: (z * np.complex128(1 - 2.0**-41), jnp.abs(z) - 1), z.astype(np.complex128))
    assert np.all(np.abs(got[1] - 2.0**-40) < 1e-15)


# ---- grad, vmap, random, training

def test_grad_and_vmap_float64():
    def f(x, w):
        return jnp.sum(jnp.tanh(x @ w) ** 2 + jnp.log1p(jnp.exp(-jnp.abs(x @ w))))

    x, w = f64(8, 5), f64(5, 3)
    g = check_reduction(jax.grad(f, argnums=(0, 1)), x, w, k=5 * 3 * 8, magnitude="normwise")
    assert g[0].dtype == np.float64
    check_reduction(jax.vmap(jax.grad(lambda r, w: f(r[None], w)), in_axes=(0, None)), x, w, k=5 * 3,
                    magnitude="normwise")
    check(jax.vmap(lambda v: jnp.sort(v) * jnp.exp(v)), f64(4, 9))
    check(jax.jacfwd(lambda v: jnp.sin(v) * jnp.cumsum(v)), f64(6))
    z = c128(5)
    check(jax.grad(lambda z: jnp.real(jnp.sum(z * jnp.conj(z) * jnp.exp(z)))), z)


def test_random_float64_and_64_bit_ints_identical():
    def sample(seed):
        key = jax.random.key(seed)
        k1, k2, k3, k4 = jax.random.split(key, 4)
        return (jax.random.uniform(k1, (17,), jnp.float64), jax.random.bits(k3, (11,), jnp.uint64),
                jax.random.randint(k4, (13,), -2**40, 2**50, jnp.int64), jax.random.permutation(k1, 12),
                jax.random.bernoulli(k2, 0.3, (20,)))

    check(sample, np.uint32(5), exact=True)

    # normal and gamma are those bits through erf_inv / log polynomials: within float64's tolerance
    # (libm's log and XLA's differ in the last bit).
    def transformed(seed):
        k1, k2 = jax.random.split(jax.random.key(seed))
        return jax.random.normal(k1, (9,), jnp.float64), jax.random.gamma(k2, 2.5, (5,), jnp.float64)

    check(transformed, np.uint32(5))


sgd_step = make_sgd_step(jnp.tanh)


def train(platform, steps=25):
    dev = device(platform)
    rng = np.random.default_rng(1)
    x = jax.device_put(rng.normal(size=(64, 16)), dev)
    y = jax.device_put(rng.integers(0, 4, size=64), dev)
    params = jax.device_put(init_mlp(jax.random.key(3), [16, 32, 32, 4]), dev)
    losses = []
    for _ in range(steps):
        params, loss = sgd_step(params, x, y)
        losses.append(loss)
    for leaf in jax.tree.leaves(params):
        assert leaf.devices() == {dev} and leaf.dtype == np.float64
    return np.array(jax.device_get(losses)), jax.device_get(params)


def test_mlp_training_float64_matches_cpu():
    metal_losses, metal_params = train("metal")
    cpu_losses, cpu_params = train("cpu")
    assert metal_losses.dtype == np.float64
    assert metal_losses[-1] < metal_losses[0] * 0.8, metal_losses
    # A step's rounding differences (sums of ~64 terms in another order: ~64 eps) are carried through
    # 25 steps of a contracting map (tanh layers, learning rate 0.1); 1e4 eps leaves two orders of
    # magnitude of room and is still 1e5 times tighter than float32 would pass.
    tol = 1e4 * eps(np.float64)
    np.testing.assert_allclose(metal_losses, cpu_losses, rtol=tol, atol=tol)
    assert_close(metal_params, cpu_params, rtol=tol, atol=tol)

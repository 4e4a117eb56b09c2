"""dot_general and reductions on metal against JAX's CPU backend."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from jaxcompare import FLOAT_DTYPES, assert_close, check, check_reduction, random_array, run_on

RNG = np.random.default_rng(2)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES + [jnp.int32, jnp.int8], ids=lambda d: np.dtype(d).name)
def test_matmul_shapes(dtype):
    low, high = (-3, 3)
    a = random_array(RNG, (5, 7), dtype, low, high)
    b = random_array(RNG, (7, 3), dtype, low, high)
    v = random_array(RNG, (7,), dtype, low, high)
    if np.dtype(dtype).kind in "iu":
        a, b, v = (np.clip(t, -9, 9).astype(dtype) for t in (a, b, v))
    # Low-precision products accumulate in float32 and round once, on both backends; the chained
    # product rounds its first factor to the low type (one more rounding of each term).
    low = np.dtype(dtype) in (np.dtype(jnp.float16), np.dtype(jnp.bfloat16))
    acc = {"accumulate": jnp.float32} if low else {}
    check_reduction(jnp.matmul, a, b, k=7, **acc)
    check_reduction(jnp.dot, a, v, k=7, **acc)
    check_reduction(jnp.dot, v, v, k=7, **acc)
    check_reduction(lambda a, b: a.T @ a @ b, a, b, k=2 if low else 5 + 7)



@pytest.mark.parametrize("dtype", [np.float32, np.complex64], ids=lambda d: np.dtype(d).name)
def test_matmul_split_across_threads(dtype):
    """Products big enough to be split between the host threads: C cut by rows when it is taller than
    wide, by columns when wider, with odd sizes (an uneven cut), operands read through BLAS's transpose
    flags, and a transposed product."""
    a = random_array(RNG, (67, 101), dtype)
    b = random_array(RNG, (101, 171), dtype)
    check_reduction(jnp.matmul, a, b, k=101)               # wider: columns
    check_reduction(lambda a, b: b.T @ a.T, a, b, k=101)   # taller: rows
    check_reduction(lambda a, b: (a @ b).T, a, b, k=101)   # the product written transposed
    check_reduction(lambda a, b: a.T.T @ (b.T * 2).T, a, b, k=101)
    check_reduction(lambda a, c: a @ c.T, a, random_array(RNG, (171, 101), dtype), k=101)
    check_reduction(lambda at, b: at.T @ b, random_array(RNG, (101, 67), dtype), b, k=101)

def test_dot_general_dimension_numbers():
    a = random_array(RNG, (2, 3, 4, 5), np.float32)
    b = random_array(RNG, (2, 5, 4, 6), np.float32)
    # k: the number of terms each output element sums (the contracted dims' sizes multiplied).
    check_reduction(lambda a, b: jnp.einsum("bijk,bkjl->bil", a, b), a, b, k=4 * 5)
    check_reduction(lambda a, b: lax.dot_general(a, b, (((3, 2), (1, 2)), ((0,), (0,)))), a, b, k=5 * 4)
    check_reduction(lambda a, b: jnp.einsum("bijk,bkjl->lib", a, b), a, b, k=4 * 5)
    check_reduction(lambda a: jnp.einsum("bijk,cijk->bc", a, a), a, k=3 * 4 * 5)
    check_reduction(lambda a, b: jnp.einsum("bijk,bkjl->bijl", a, b), a, b, k=5)


def test_mixed_precision_dot():
    a = random_array(RNG, (16, 32), jnp.bfloat16)
    b = random_array(RNG, (32, 8), jnp.bfloat16)
    # Products of bfloat16 or float16 values are exact in float32: only the float32 sum rounds.
    check_reduction(lambda a, b: lax.dot(a, b, preferred_element_type=jnp.float32), a, b, k=32)
    h = random_array(RNG, (16, 32), jnp.float16)
    check_reduction(lambda a, b: jnp.matmul(a, b.astype(jnp.float16), preferred_element_type=jnp.float32), h, b, k=32)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES + [jnp.int32, jnp.uint8], ids=lambda d: np.dtype(d).name)
def test_reductions(dtype):
    x = random_array(RNG, (4, 5, 6), dtype)
    # jnp's sums accumulate low-precision types in float32 and round once; lax.reduce and prod work in
    # the type itself (or wider).
    acc = {"accumulate": jnp.float32} if dtype in (jnp.float16, jnp.bfloat16) else {}
    check_reduction(lambda x: jnp.sum(x, axis=1), x, k=5, **acc)
    check_reduction(lambda x: jnp.sum(x), x, k=4 * 5 * 6, **acc)
    check(lambda x: jnp.max(x, axis=(0, 2)), x, exact=True)
    check(lambda x: jnp.min(x, axis=-1), x, exact=True)
    check_reduction(lambda x: jnp.prod(x[:2, :2, :3], axis=0), x, k=2)
    check_reduction(lambda x: lax.reduce(x, np.array(1, dtype), lax.add, (0,)), x, k=4 + 1,  # a non-identity init
                    magnitude=lambda x: np.sum(np.abs(x.astype(np.float64)), axis=0) + 1)


def test_boolean_reductions():
    x = RNG.random((3, 8)) < 0.5
    check(lambda x: (jnp.any(x, axis=1), jnp.all(x, axis=0), jnp.any(x), jnp.all(x[:, :0])), x)


def test_reductions_with_nan_and_empty():
    x = np.array([[1.0, np.nan, 3.0], [-np.inf, 2.0, 0.0]], np.float32)
    check(lambda x: (jnp.max(x, axis=1), jnp.min(x, axis=0), jnp.sum(x, axis=1)), x)
    check(lambda x: (jnp.sum(x[:, :0], axis=1), jnp.max(x[:0], axis=0, initial=-5.0)), x)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES + [jnp.int32, jnp.uint8], ids=lambda d: np.dtype(d).name)
def test_argmax_argmin(dtype):
    x = random_array(RNG, (6, 9), dtype)
    x[2, 3] = x[2, 7] = x[2].max()  # ties: the first index wins
    check(lambda x: (jnp.argmax(x, axis=1), jnp.argmin(x, axis=0), jnp.argmax(x)), x, exact=True)


def test_argmax_argmin_bool():
    x = RNG.random((5, 7)) < 0.3
    x[1] = False  # all-false row: index 0
    x[2] = True   # all-true row: index 0
    check(lambda x: (jnp.argmax(x, axis=1), jnp.argmin(x, axis=1), jnp.argmax(x, axis=0), jnp.argmax(x)), x, exact=True)
    check(lambda x: jax.vmap(jnp.argmax)(x), x, exact=True)


def test_argmax_nan():
    x = np.array([[1.0, np.nan, 5.0, np.nan], [3.0, 3.0, -1.0, 2.0]], np.float32)
    check(lambda x: (jnp.argmax(x, axis=1), jnp.argmin(x, axis=1)), x, exact=True)


def test_softmax_and_logsumexp():
    # A sum of n positive exponentials (each within an ulp or two): softmax is within (n + a few) * eps
    # of itself relatively; logsumexp's log turns the sum's relative error into an absolute one, next to
    # the rounding of the row maximum it adds back.
    x = random_array(RNG, (8, 10), np.float32)
    n = x.shape[-1] + 4
    check_reduction(jax.nn.softmax, x, k=n, magnitude=lambda x: run_on("cpu", jax.nn.softmax, x))
    row_scale = lambda x: np.abs(x).max(axis=-1, keepdims=True) + 1.0
    check_reduction(lambda x: jax.nn.logsumexp(x, axis=-1), x, k=n, magnitude=lambda x: row_scale(x)[:, 0])
    check_reduction(jax.nn.log_softmax, x, k=n, magnitude=lambda x: row_scale(x) + np.abs(x))


@pytest.mark.parametrize("shape,axes", [((300, 70), (1,)), ((300, 70), (0,)), ((4, 1, 50, 33), (0, 1)),
                                        ((4, 1, 50, 33), (2, 3)), ((6, 40, 1, 9), (1,)), ((70000,), (0,))], ids=str)
def test_float32_reductions_by_layout(shape, axes):
    # Trailing, leading and interior reduced dims, size-1 dims, and lengths past eight-lane blocks.
    # Multiples of 1/16: every partial sum (below 2**18) is exact in float32, so the sums compare exactly
    # whatever the order (a rounding bound for 70000 terms could not tell one wrong element); the means
    # round the exact sum once or twice (a division, or a product with 1/n). Adding +0.0 turns the -0.0
    # that rounding leaves into +0.0: which zero the max or min of both is depends on the order the
    # elements are compared in, on XLA:CPU as much as here.
    x = np.round(random_array(RNG, shape, np.float32) * 16) / 16 + np.float32(0.0)
    check(lambda x: jnp.sum(x, axis=axes), x, exact=True)
    check_reduction(lambda x: jnp.mean(x, axis=axes), x, k=2, magnitude=lambda x: np.abs(np.mean(x, axis=axes)))
    check(lambda x: (jnp.max(x, axis=axes), jnp.min(x, axis=axes)), x, exact=True)
    # NaN propagates (StableHLO's maximum/minimum). XLA:CPU's vectorised row maxima drop NaNs in long
    # rows, so NumPy is the reference here (its sums are exact too).
    x.reshape(-1)[:: 97] = np.nan
    got = run_on("metal", lambda x: (jnp.max(x, axis=axes), jnp.min(x, axis=axes), jnp.sum(x, axis=axes)), x)
    want = (np.max(x, axis=axes), np.min(x, axis=axes), np.sum(x, axis=axes, dtype=np.float64).astype(np.float32))
    assert_close(got, want, exact=True)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int32, np.uint32, np.bool_], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("axes", [(0,), (1, 2), (0, 1, 2)], ids=str)
def test_bitwise_reductions(dtype, axes):
    x = random_array(np.random.default_rng(5), (3, 5, 7), dtype)
    ones = np.array(True if dtype == np.bool_ else -1).astype(dtype)
    zero = np.zeros((), dtype)
    check(lambda x: (lax.reduce(x, ones, lax.bitwise_and, axes), lax.reduce(x, zero, lax.bitwise_or, axes),
                     lax.reduce(x, zero, lax.bitwise_xor, axes), lax.reduce(x, ones, lax.bitwise_xor, axes)), x)


def test_complex_products_and_custom_variadic_reduce():
    rng = np.random.default_rng(6)
    z = (rng.uniform(0.5, 1.5, (4, 9)) * np.exp(1j * rng.uniform(-3, 3, (4, 9)))).astype(np.complex64)
    check(lambda z: (jnp.prod(z, axis=1), jnp.prod(z), jnp.prod(z[:, :0], axis=1)), z, rtol=1e-5, atol=1e-5)

    def body(a, b):  # the element with the larger |value|, ties to the smaller index
        (av, ai), (bv, bi) = a, b
        take_b = (jnp.abs(bv) > jnp.abs(av)) | ((jnp.abs(bv) == jnp.abs(av)) & (bi < ai))
        return lax.select(take_b, bv, av), lax.select(take_b, bi, ai)

    x = np.round(random_array(rng, (5, 7), np.float32))
    idx = np.broadcast_to(np.arange(7, dtype=np.int32), (5, 7))
    check(lambda x, i: lax.reduce((x, i), (np.float32(0), np.int32(-1)), body, (1,)), x, idx, exact=True)


def test_dot_of_bool_is_or_of_ands():
    rng = np.random.default_rng(7)
    a, b = rng.random((3, 3, 2)) < 0.4, rng.random((2, 3, 4)) < 0.4
    check(lambda a, b: (lax.dot_general(a, b, (((2,), (0,)), ((1,), (1,)))), jnp.dot(a[0, 0], b[:, 0, 0]),
                        a[0] @ b[:, 0]), a, b)
    check(lambda a, b: lax.dot_general(a, b, (((2,), (0,)), ((), ()))), a[:, :, :0].reshape(3, 3, 0), b[:0])

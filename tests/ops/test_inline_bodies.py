"""Region bodies lowered inline on whole tensors (scatter update computations, reduce_window bodies) that
read rank-0 values: their own constants, or constants JAX's serializer hoisted out of the region. Each
scalar must be broadcast to the lanes the body runs on."""

import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from jaxcompare import check, random_array, scatter_rows_with_body

RNG = np.random.default_rng(23)
IDX = np.array([0, 3, -2, 3, 1], np.int32)  # index 3 twice: the body runs twice there


def test_apply_with_constants_float():
    x = random_array(RNG, (8, 5), np.float32)
    check(lambda x: x.at[IDX].apply(lambda v: v * 2 + 1), x)
    check(lambda x: x.at[IDX].apply(lambda v: jnp.where(v > 0, v, 0.5)), x)
    check(lambda x: x.at[IDX].apply(lambda v: jnp.clip(v, -1.0, 1.0) * 3), x)
    check(lambda x: x.at[jnp.array([1, 4])].apply(lambda v: v - 0.25, unique_indices=True), x)


def test_apply_returning_a_constant():
    # The body's result is the (hoisted) constant itself: the terminator's operand is rank 0.
    x = random_array(RNG, (8, 5), np.float32)
    check(lambda x: x.at[IDX].apply(lambda v: jnp.float32(3)), x)


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16, jnp.int32, jnp.uint8, jnp.int8],
                         ids=lambda d: np.dtype(d).name)
def test_apply_with_constants_dtypes(dtype):
    x = random_array(RNG, (6, 4), dtype, low=-4, high=4)
    check(lambda x: x.at[IDX % 6].apply(lambda v: v * 3 + 1), x)


def test_apply_with_constants_bool():
    m = random_array(RNG, (6, 4), np.bool_)
    check(lambda m: m.at[IDX % 6].apply(lambda v: jnp.logical_xor(v, True)), m)
    check(lambda m: m.at[IDX % 6].apply(lambda v: v | False), m)


def test_unique_scatter_body_with_constants():
    x = random_array(RNG, (8, 5), np.float32)
    u = random_array(RNG, (3, 5), np.float32)
    idx = np.array([[1], [6], [9]], np.int32)  # 9 is dropped
    check(lambda x, i, u: scatter_rows_with_body(x, i, u, lambda a, b: a * 2.0 + b * b - 1.0), x, idx, u)
    check(lambda x, i, u: scatter_rows_with_body(x, i, u, lambda a, b: jnp.where(b > 0.5, a, 7.0)), x, idx, u)


def test_reduce_window_bodies_with_constants():
    x = random_array(RNG, (3, 6), np.float32)
    # one-element windows: body(init, x) elementwise
    check(lambda x: lax.reduce_window(x, 1.0, lambda a, b: a * 2.0 + b, (1, 1), (1, 1), [(0, 0), (0, 0)]), x)
    check(lambda x: lax.reduce_window(x, 0.0, lambda a, b: jnp.clip(a + b, -2.0, 2.0), (1, 1), (1, 1),
                                      [(0, 0), (0, 0)]), x)
    # prefix scans of a body that is not a bare monoid op (forward and reverse, init not the identity)
    check(lambda x: lax.reduce_window(x, 0.0, lambda a, b: a + b + 0.0, (1, 6), (1, 1), [(0, 0), (5, 0)]), x)
    check(lambda x: lax.reduce_window(x, 1.0, lambda a, b: jnp.maximum(a, b) * 1.0, (1, 6), (1, 1),
                                      [(0, 0), (0, 5)]), x)
    check(lambda x: lax.reduce_window(x, 1.0, jnp.logaddexp, (1, 6), (1, 1), [(0, 0), (5, 0)]), x)

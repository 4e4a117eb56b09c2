"""approx_max_k / approx_min_k on metal: the exact top k, equal to XLA:CPU's fallback on distinct values."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from jaxcompare import check


def distinct(shape, dtype, seed=0):
    """Distinct values (a permutation), so that the top k and their indices are unique."""
    values = np.random.default_rng(seed).permutation(int(np.prod(shape))).reshape(shape)
    return (values - values.size // 2).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, jnp.bfloat16])
@pytest.mark.parametrize("is_max", [True, False])
def test_approx_k_last_axis(dtype, is_max):
    # Each row a permutation of 200 small integers: exact in bfloat16, so no ties.
    rows = np.stack([np.random.default_rng(i).permutation(200) for i in range(6)])
    x = (rows - 100).astype(dtype)
    fn = lax.approx_max_k if is_max else lax.approx_min_k
    check(lambda x: fn(x, 7), x, exact=True)


@pytest.mark.parametrize("is_max", [True, False])
def test_approx_k_first_axis_and_rank_3(is_max):
    x = distinct((50, 3, 4), np.float32)
    fn = lax.approx_max_k if is_max else lax.approx_min_k
    check(lambda x: fn(x, 5, reduction_dimension=0), x, exact=True)


def test_approx_k_not_aggregated_keeps_declared_size():
    x = distinct((4, 4096), np.float32, seed=1)
    f = lambda x: lax.approx_max_k(x, 3, aggregate_to_topk=False)
    out = check(f, x, exact=True)
    assert out[0].shape == jax.eval_shape(f, x)[0].shape


def test_approx_k_grad_and_vmap():
    x = distinct((3, 5, 40), np.float32, seed=2) / 7
    check(jax.grad(lambda x: jnp.sum(lax.approx_max_k(x, 4)[0] ** 2)), x)
    check(jax.vmap(lambda x: lax.approx_min_k(x, 2)), x, exact=True)

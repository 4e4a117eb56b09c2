"""sort, argsort, lexsort and top_k on metal: bit-identical to the CPU backend, ties and NaNs included."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from jaxcompare import check, random_array, special_floats

RNG = np.random.default_rng(7)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float16, jnp.bfloat16, jnp.int32, jnp.uint8, jnp.int8, jnp.bool_],
                         ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("n", [1, 7, 13, 1000])
def test_sort_and_argsort(dtype, n):
    x = random_array(RNG, (3, n), dtype)
    if np.dtype(dtype).kind in "iu":
        x = (x % 5).astype(dtype)  # many ties
    check(lambda x: (jnp.sort(x, axis=-1), jnp.argsort(x, axis=-1), jnp.sort(x, axis=0)), x, exact=True)
    check(lambda x: (jnp.sort(x, axis=-1, descending=True), jnp.argsort(x, axis=-1, descending=True)), x, exact=True)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float16, jnp.bfloat16], ids=lambda d: np.dtype(d).name)
def test_sort_nans_infs_and_signed_zeros(dtype):
    x = np.concatenate([special_floats(dtype), special_floats(dtype)[::-1]])
    check(lambda x: (jnp.sort(x), jnp.argsort(x), jnp.argsort(x, descending=True)), x, exact=True)


def test_lexsort_and_multi_key_sort():
    a = (random_array(RNG, (50,), np.int32) % 4).astype(np.int32)
    b = random_array(RNG, (50,), np.float32)
    b[::7] = np.nan
    c = np.arange(50, dtype=np.float32)
    check(lambda a, b: jnp.lexsort((b, a)), a, b, exact=True)
    check(lambda a, b, c: lax.sort((a, b, c), num_keys=2), a, b, c, exact=True)
    check(lambda a, b, c: lax.sort((b, a, c), num_keys=1), a, b, c, exact=True)


def test_sort_grad_and_vmap():
    x = random_array(RNG, (4, 9), np.float32)
    check(jax.grad(lambda x: jnp.sum(jnp.sort(x, axis=-1) * jnp.arange(9.0))), x)
    check(jax.vmap(lambda r: jnp.argsort(r)), x, exact=True)


def test_random_permutation_uses_sort():
    check(lambda k: jax.random.permutation(jax.random.key(k), 100), np.uint32(3), exact=True)


def test_sort_lowers_to_argsort_and_gather():
    from jax_metal_plugin import tools
    text = tools.mps_graph(lambda x: jnp.sort(x), np.ones(8, np.float32))
    assert "ArgSort(" in text and "GatherAlongAxis(" in text
    assert "Sort(" in tools.mps_graph(lambda x: jnp.sort(x), np.ones(8, np.int32))

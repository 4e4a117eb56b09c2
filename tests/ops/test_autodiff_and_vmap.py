"""grad, value_and_grad and vmap of the ops, on metal against JAX's CPU backend."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcompare import check, random_array

RNG = np.random.default_rng(4)

FUNCTIONS = {
    "tanh_mlp": lambda w, x: jnp.sum(jnp.tanh(x @ w) ** 2),
    "softmax_xent": lambda w, x: -jnp.sum(jax.nn.log_softmax(x @ w) * jax.nn.one_hot(jnp.arange(x.shape[0]) % 3, 3)),
    "elementwise": lambda w, x: jnp.sum(jnp.exp(-jnp.abs(w)) * jnp.sin(w) + jnp.sqrt(w ** 2 + 1.0)),
    "max_pool_like": lambda w, x: jnp.sum(jnp.max(x @ w, axis=0)),
    "normalize": lambda w, x: jnp.sum((x @ w - jnp.mean(x @ w, axis=0)) / (jnp.std(x @ w, axis=0) + 1e-3)),
}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_grad(name):
    w = random_array(RNG, (4, 3), np.float32)
    x = random_array(RNG, (5, 4), np.float32)
    check(jax.grad(FUNCTIONS[name]), w, x, rtol=1e-4, atol=1e-5)
    check(jax.value_and_grad(FUNCTIONS[name], argnums=(0, 1)), w, x, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_vmap(name):
    w = random_array(RNG, (6, 4, 3), np.float32)
    x = random_array(RNG, (5, 4), np.float32)
    check(jax.vmap(FUNCTIONS[name], in_axes=(0, None)), w, x, rtol=1e-4, atol=1e-5)
    check(jax.vmap(jax.grad(FUNCTIONS[name]), in_axes=(0, None)), w, x, rtol=1e-4, atol=1e-5)


def test_jacobians_and_hessian():
    x = random_array(RNG, (4,), np.float32)
    f = lambda x: jnp.sin(x) * jnp.sum(x ** 2)
    check(jax.jacfwd(f), x, rtol=1e-4, atol=1e-5)
    check(jax.jacrev(f), x, rtol=1e-4, atol=1e-5)
    check(jax.hessian(lambda x: jnp.sum(jnp.tanh(x) ** 3)), x, rtol=1e-4, atol=1e-5)

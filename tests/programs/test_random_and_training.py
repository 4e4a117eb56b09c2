"""jax.random bit-identical to CPU, and a training loop whose parameters stay on the metal device."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcompare import assert_close, check, device, init_mlp, make_sgd_step, run_on


@pytest.mark.parametrize("impl", ["threefry2x32"])
def test_random_bits_identical(impl):
    def sample(seed):
        key = jax.random.key(seed, impl=impl)
        k1, k2, k3 = jax.random.split(key, 3)
        return (jax.random.bits(k1, (33,), jnp.uint32), jax.random.uniform(k2, (4, 5)),
                jax.random.normal(k3, (7,)), jax.random.randint(k1, (9,), -5, 17),
                jax.random.bernoulli(k2, 0.3, (12,)), jax.random.permutation(k3, 10))

    check(sample, np.uint32(42), exact=True)


def test_dropout_mask_identical():
    def dropout(key, x):
        keep = jax.random.bernoulli(key, 0.8, x.shape)
        return jnp.where(keep, x / 0.8, 0.0)

    key = jax.random.key(7)
    x = np.ones((16, 16), np.float32)
    expected = jax.device_get(jax.jit(dropout)(jax.device_put(key, device("cpu")), x))
    actual = jax.device_get(jax.jit(dropout)(jax.device_put(key, device("metal")), x))
    np.testing.assert_array_equal(actual, expected)


sgd_step = make_sgd_step()


def train(platform, steps=20):
    dev = device(platform)
    rng = np.random.default_rng(0)
    x = jax.device_put(rng.normal(size=(64, 16)).astype(np.float32), dev)
    y = jax.device_put(rng.integers(0, 4, size=64).astype(np.int32), dev)
    params = jax.device_put(init_mlp(jax.random.key(0), [16, 32, 32, 4]), dev)
    losses = []
    for _ in range(steps):
        params, loss = sgd_step(params, x, y)
        for leaf in jax.tree.leaves(params):
            assert leaf.devices() == {dev}
        losses.append(loss)
    return np.array(jax.device_get(losses)), jax.device_get(params)


def test_mlp_training_matches_cpu():
    metal_losses, metal_params = train("metal")
    cpu_losses, cpu_params = train("cpu")
    assert metal_losses[-1] < metal_losses[0] * 0.7, metal_losses
    np.testing.assert_allclose(metal_losses, cpu_losses, rtol=2e-4, atol=1e-5)
    assert_close(metal_params, cpu_params, rtol=2e-3, atol=1e-4)

"""Computations with no outputs or no arguments: JAX hands Execute null or empty argument and output lists
for them, and they must run (each of these raised "output_lists is null" once)."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxcompare import check, device


def test_grad_of_a_real_valued_function_of_complex_input():
    x = (np.arange(6, dtype=np.float32) - 2.5 + 1j * np.linspace(-1.0, 2.0, 6, dtype=np.float32)).astype(np.complex64)
    check(jax.grad(lambda x: jnp.sum(jnp.real(x * jnp.conj(x)))), x, jit=False)
    check(jax.grad(lambda x: jnp.sum(jnp.real(x * jnp.conj(x)))), x)


def test_jit_returning_an_empty_tuple():
    x = np.arange(3, dtype=np.float32)
    assert check(lambda x: (), x) == ()


def test_jit_of_no_arguments_returning_nothing():
    for platform in ("cpu", "metal"):
        with jax.default_device(device(platform)):
            assert jax.jit(lambda: ())() == ()


def test_jit_returning_an_empty_dict_or_list():
    x = np.ones((2, 2), np.float32)
    assert check(lambda x: {}, x) == {}
    assert check(lambda x: [], x) == []
    assert check(lambda x: {"a": (), "b": []}, x) == {"a": (), "b": []}


def test_tree_map_over_an_empty_tree_under_jit():
    assert check(lambda t: jax.tree.map(jnp.zeros_like, t), {}) == {}
    for platform in ("cpu", "metal"):
        with jax.default_device(device(platform)):
            assert jax.jit(lambda: jax.tree.map(jnp.zeros_like, {}))() == {}


def test_empty_results_mixed_with_arrays():
    x = np.arange(4, dtype=np.float32)
    out = check(lambda x: ((), x * 2, {}), x)
    np.testing.assert_array_equal(out[1], x * 2)


def _cross_entropy(logits, labels):
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=-1))


def test_softmax_cross_entropy_with_integer_labels_and_its_grad():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(8, 5)).astype(np.float32)
    labels = rng.integers(0, 5, size=8).astype(np.int32)
    check(_cross_entropy, logits, labels)
    check(jax.grad(_cross_entropy), logits, labels)
    check(jax.value_and_grad(_cross_entropy), logits, labels)
    # The grad with respect to the integer labels is float0: a result the executable does not produce.
    check(lambda l, y: jax.grad(_cross_entropy, argnums=(0, 1), allow_int=True)(l, y)[0], logits, labels)


def test_zero_size_arrays_in_and_out():
    x = np.zeros((0, 3), np.float32)
    check(lambda x: (x * 2, jnp.sum(x), ()), x)

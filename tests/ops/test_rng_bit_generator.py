"""lax.rng_bit_generator and JAX's rbg / unsafe_rbg PRNGs bit-identical to XLA:CPU: every algorithm
JAX emits (DEFAULT is Philox on CPU), every bits dtype and odd, empty and 0-d shapes, chained states."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from jaxcompare import assert_close, check, device, jax_config, run_on

ALGORITHMS = [lax.RandomAlgorithm.RNG_DEFAULT, lax.RandomAlgorithm.RNG_THREE_FRY, lax.RandomAlgorithm.RNG_PHILOX]
# Odd sizes (no even dimension: ThreeFry splits the largest), an even dimension in every position,
# size-1 and size-0 dimensions, and a scalar.
SHAPES = [(), (1,), (7,), (8,), (0,), (3, 5), (5, 3), (4, 3), (3, 4), (2, 3, 4), (5, 7, 9), (3, 0, 5), (1, 1, 5),
          (9, 1), (3, 2, 1, 5)]
KEY = np.array([0x12345678, 0x9ABCDEF0, 0xFFFFFFFF, 0x00000001], np.uint32)


def chained(shape, dtype, algorithm, steps=3):
    def f(key):
        outs = []
        for _ in range(steps):
            key, bits = lax.rng_bit_generator(key, shape, dtype=dtype, algorithm=algorithm)
            outs.append(bits)
        return key, outs

    return f


def every_shape(shapes, dtype, algorithm):
    """One program holding the chained generators of every shape, each from the same key: one compile
    per backend instead of one per shape, the shapes' bits as separate results."""
    def f(key):
        return [chained(shape, dtype, algorithm)(key) for shape in shapes]

    return f


def check_every_shape(shapes, dtype, algorithm, key):
    f = every_shape(shapes, dtype, algorithm)
    expected, actual = run_on("cpu", f, key), run_on("metal", f, key)
    for shape, a, e in zip(shapes, actual, expected):
        assert_close(a, e, exact=True, what=f"{algorithm.name} {np.dtype(dtype).name} {shape}")


@pytest.mark.parametrize("algorithm", ALGORITHMS, ids=lambda a: a.name)
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32], ids=lambda d: np.dtype(d).name)
def test_bits_and_states_equal_cpu(algorithm, dtype):
    check_every_shape(SHAPES, dtype, algorithm, KEY)


@pytest.mark.parametrize("algorithm", ALGORITHMS, ids=lambda a: a.name)
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.uint64], ids=lambda d: np.dtype(d).name)
def test_u64_state_and_bits_equal_cpu(algorithm, dtype, x64):
    # A u64[2] state as JAX passes it with x64 on; the counter's low word wraps within three steps.
    key = np.array([0xFEDCBA9876543210, 2**64 - 20], np.uint64)
    check_every_shape([(), (0,), (5,), (6,), (3, 5), (2, 3, 4)], dtype, algorithm, key)


def _compile_text(platform, text):
    from jax_metal_plugin._jax_internals import xla_bridge

    dev = device(platform)
    devices = xla_bridge.xla_client.DeviceList((dev,)) if hasattr(xla_bridge.xla_client, "DeviceList") else [dev]
    return xla_bridge.get_backend(platform).compile_and_load(text, devices), dev


@pytest.mark.parametrize("bits", ["5x3xui32", "7xui64", "3xui8", "ui16"])
def test_philox_three_word_state_equals_cpu(bits, x64):
    # JAX only sends two-word states; XLA also takes Philox's full 128-bit counter (key, low, high).
    # The low word overflows into the high one after the first block.
    text = f"""
module @m {{
  func.func public @main(%arg0: tensor<3xui64>) -> (tensor<3xui64>, tensor<{bits}>) {{
    %s, %b = stablehlo.rng_bit_generator %arg0, algorithm = PHILOX : (tensor<3xui64>) -> (tensor<3xui64>, tensor<{bits}>)
    return %s, %b : tensor<3xui64>, tensor<{bits}>
  }}
}}"""
    state = np.array([0x0123456789ABCDEF, 2**64 - 1, 41], np.uint64)
    results = {}
    for platform in ("cpu", "metal"):
        exe, dev = _compile_text(platform, text)
        results[platform] = [np.asarray(o) for o in exe.execute([jax.device_put(state, dev)])]
    for a, e in zip(results["metal"], results["cpu"]):
        assert a.dtype == e.dtype and a.shape == e.shape
        np.testing.assert_array_equal(a, e)
    assert results["cpu"][0][2] == 42  # the carry happened


def samples(seed):
    key = jax.random.key(seed)
    k1, k2, k3 = jax.random.split(key, 3)
    k4 = jax.random.fold_in(k1, 17)
    return (jax.random.key_data(jnp.stack([k1, k2, k3, k4])), jax.random.bits(k1, (33,), jnp.uint32),
            jax.random.bits(k2, (3, 5), jnp.uint8), jax.random.bits(k4, (7,), jnp.uint16),
            jax.random.uniform(k2, (4, 5)), jax.random.bernoulli(k4, 0.3, (13,)),
            jax.random.randint(k1, (9,), -5, 17), jax.random.uniform(k3, ()), jax.random.normal(k1, (0, 3)))


@pytest.mark.parametrize("impl", ["rbg", "unsafe_rbg"])
def test_jax_random_equal_cpu(impl):
    with jax_config("jax_default_prng_impl", impl):
        check(samples, np.uint32(42), exact=True)
        check(lambda s: jax.random.normal(jax.random.key(s), (7,)), np.uint32(42))


@pytest.mark.parametrize("impl", ["rbg", "unsafe_rbg"])
def test_jax_random_explicit_impl_under_vmap_equal_cpu(impl):
    def f(seeds):
        keys = jax.vmap(lambda s: jax.random.key(s, impl=impl))(seeds)
        split = jax.vmap(lambda k: jax.random.split(k, 2))(keys)
        folded = jax.vmap(jax.random.fold_in)(keys, seeds)
        u = jax.vmap(lambda k: jax.random.uniform(k, (3, 5)))(split[:, 1])
        b = jax.vmap(lambda k: jax.random.bernoulli(k, 0.5, (11,)))(keys)
        bits = jax.vmap(lambda k: jax.random.bits(k, (6,), jnp.uint32))(folded)
        return jax.random.key_data(split), jax.random.key_data(folded), u, b, bits

    def normal(seeds):
        keys = jax.vmap(lambda s: jax.random.fold_in(jax.random.key(s, impl=impl), 3))(seeds)
        return jax.vmap(lambda k: jax.random.normal(k, (6,)))(keys)

    seeds = np.arange(5, dtype=np.uint32)
    check(f, seeds, exact=True)
    # normal's erf_inv may differ by an ulp between backends; the bits under it are checked above.
    check(normal, seeds)


def test_rbg_training_style_loop_equal_cpu():
    # Successive keys through a scan: the state threads through the loop on the device.
    def f(seed):
        def step(key, _):
            key, sub = jax.random.split(key)
            return key, jax.random.uniform(sub, (4,))

        return lax.scan(step, jax.random.key(seed, impl="unsafe_rbg"), None, length=6)[1]

    check(f, np.uint32(3), exact=True)


def test_three_fry_with_a_three_word_state_is_refused_at_compile_time():
    text = """
module @m {
  func.func public @main(%arg0: tensor<3xui64>) -> (tensor<3xui64>, tensor<4xui32>) {
    %s, %b = stablehlo.rng_bit_generator %arg0, algorithm = THREE_FRY : (tensor<3xui64>) -> (tensor<3xui64>, tensor<4xui32>)
    return %s, %b : tensor<3xui64>, tensor<4xui32>
  }
}"""
    with pytest.raises(Exception, match="THREE_FRY needs a ui64\\[2\\] state"):
        _compile_text("metal", text)

"""Runtime behaviour on the metal device: registration, buffers of every dtype, deletion errors, four
threads at once, and a soak run whose device memory stays flat."""

import jax
import jax.extend
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from jaxcompare import assert_reduction_close, device, run_in_threads

DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32, np.float16,
          ml_dtypes.bfloat16, np.float32, np.complex64]


def test_registration_and_device():
    metal = jax.devices("metal")
    assert len(metal) == 1
    assert metal[0].platform == "metal"
    assert metal[0].device_kind
    backend = jax.extend.backend.get_backend("metal")
    assert list(backend.stablehlo_current_version) >= [1, 0, 0]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_round_trip_every_dtype(dtype):
    x = (np.arange(24).reshape(2, 3, 4) % 5).astype(dtype)
    y = jax.device_put(x, device("metal"))
    np.testing.assert_array_equal(np.asarray(y), x)
    np.testing.assert_array_equal(np.asarray(jax.device_put(x[:, ::2, 1:], device("metal"))), x[:, ::2, 1:])


def test_use_after_delete_raises():
    x = jax.device_put(np.ones(4, np.float32), device("metal"))
    x.delete()
    assert x.is_deleted()
    with pytest.raises(RuntimeError):
        np.asarray(x)
    with pytest.raises(RuntimeError):
        jax.jit(lambda v: v + 1)(x)
    x.delete()  # deleting twice is harmless


def test_four_threads_at_once():
    f = jax.jit(lambda x, k: jnp.tanh(x @ x.T) * k)

    def worker(k):
        rng = np.random.default_rng(k)
        for _ in range(25):
            x = rng.normal(size=(16, 8)).astype(np.float32)
            got = np.asarray(f(jax.device_put(x, device("metal")), np.float32(k)))
            a = np.abs(x.astype(np.float64))  # tanh's slope is at most 1: the product's bound carries over
            assert_reduction_close(got, (np.tanh(x @ x.T) * k).astype(np.float32), (a @ a.T) * k, x.shape[1] + 2)

    run_in_threads(worker)


def test_soak_memory_stays_flat():
    dev = device("metal")
    step = jax.jit(lambda w, x: w - 0.01 * jax.grad(lambda w: jnp.sum(jnp.tanh(x @ w) ** 2))(w))
    w = jax.device_put(np.ones((32, 32), np.float32) * 0.1, dev)
    x = jax.device_put(np.random.default_rng(0).normal(size=(64, 32)).astype(np.float32), dev)
    for _ in range(200):
        w = step(w, x)
    w.block_until_ready()
    before = dev.memory_stats()["bytes_in_use"]
    for _ in range(10_000):
        w = step(w, x)
    w.block_until_ready()
    after = dev.memory_stats()["bytes_in_use"]
    assert after <= before + 64 * 1024, (before, after)

"""NumPy and the buffer protocol read a metal array where it lies, as they read XLA:CPU's: the plugin's
buffers live in memory the CPU addresses (a Mac's unified memory), so `np.asarray` and `memoryview` make
no copy. What they read stays valid while they hold it, through the array's deletion and its donation,
and what each platform allows or refuses is the same."""

import warnings

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from jaxcompare import assert_close, device

RNG = np.random.default_rng(5)
PLATFORMS = ("cpu", "metal")


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.uint8, np.bool_, np.complex64, np.int64,
                                   np.float64])
def test_buffer_protocol_gives_the_arrays_bytes(dtype, x64):
    a = (RNG.normal(size=(3, 5)) * 10).astype(dtype)
    described = {}
    for platform in PLATFORMS:
        view = memoryview(jax.device_put(a, device(platform)))
        assert view.readonly, platform
        assert view.tobytes() == a.tobytes(), platform
        described[platform] = (view.format, view.shape, view.strides, view.itemsize)
    assert described["metal"] == described["cpu"]
    assert described["metal"][1] == a.shape


def test_a_dtype_the_buffer_protocol_cannot_name_is_refused_as_on_cpu():
    a = np.ones(4, ml_dtypes.bfloat16)
    for platform in PLATFORMS:
        x = jax.device_put(a, device(platform))
        with pytest.raises(BufferError, match="BF16"):
            memoryview(x)
        assert_close(np.asarray(x), a, exact=True, what=platform)  # __array__ still serves it


def test_asarray_reads_the_buffer_in_place():
    a = RNG.normal(size=(64, 32)).astype(np.float32)
    for platform in PLATFORMS:
        x = jax.jit(lambda v: v * 2)(jax.device_put(a, device(platform)))
        host = np.asarray(x)
        assert host.ctypes.data == x.unsafe_buffer_pointer(), platform
        assert not host.flags.writeable, platform
        with pytest.raises(ValueError):
            host[0, 0] = 1.0
        assert_close(host, a * 2, exact=True, what=platform)


def test_what_numpy_holds_outlives_the_arrays_deletion():
    a = RNG.normal(size=(128, 64)).astype(np.float32)
    for platform in PLATFORMS:
        x = jax.jit(lambda v: v + 1)(jax.device_put(a, device(platform)))
        host, view = np.asarray(x), memoryview(x)
        x.delete()
        assert x.is_deleted()
        # Memory freed with the array would be handed to these new arrays and overwritten.
        junk = [jax.jit(lambda v: v * 0 - 7)(jax.device_put(a, device(platform))) for _ in range(4)]
        jax.block_until_ready(junk)
        assert_close(host, a + 1, exact=True, what=platform)
        assert view.tobytes() == (a + 1).tobytes(), platform


def test_donating_an_array_numpy_reads_leaves_what_numpy_reads():
    # The result gets fresh memory while another framework reads the donor's; the donor stays alive
    # and whole (as XLA:CPU before jax 0.12.1; later XLA:CPU marks it deleted and keeps only the memory).
    a = RNG.normal(size=(64, 64)).astype(np.float32)
    step = jax.jit(lambda w: w * 0.5 + 1, donate_argnums=0)
    for platform in PLATFORMS:
        w = jax.device_put(a, device(platform))
        host = np.asarray(w)
        w2 = step(w)
        assert_close(np.asarray(w2), a * np.float32(0.5) + 1, exact=True, what=platform)
        assert_close(host, a, exact=True, what=platform)
        if platform == "metal":
            assert not w.is_deleted()
            assert_close(np.asarray(w), a, exact=True, what=platform)
        del host


def test_a_donated_array_is_consumed_once_numpy_lets_go():
    a = RNG.normal(size=(64, 64)).astype(np.float32)
    step = jax.jit(lambda w: w - 1, donate_argnums=0)
    w = jax.device_put(a, device("metal"))
    view = memoryview(w)
    view.release()  # the external reference goes with it
    w2 = step(w)
    assert w.is_deleted()
    assert_close(np.asarray(w2), a - 1, exact=True)


def test_results_of_a_sharded_array_read_per_shard():
    devices = jax.devices("metal")
    a = RNG.normal(size=(len(devices) * 2, 3)).astype(np.float32)
    mesh = jax.sharding.Mesh(np.array(devices), ("x",))
    x = jax.device_put(a, jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("x")))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        y = jax.jit(lambda v: jnp.sin(v) + v)(x)
    expected = jax.jit(lambda v: jnp.sin(v) + v)(jax.device_put(a, device("cpu")))
    assert_close(np.asarray(y), np.asarray(expected))
    for shard in y.addressable_shards:
        assert_close(np.asarray(shard.data), np.asarray(expected)[shard.index])

"""Memory kinds as JAX's CPU backend offers them: the device addresses `device`, `pinned_host` and
`unpinned_host`; arrays move between them with jax.device_put and keep their values; jit places results
in the kind out_shardings (or the program) asks for; JAX's host-offload remat policy trains as on cpu.
On a Mac the three kinds are one unified memory: a device_put between kinds shares the array's memory,
so these tests also check that sharing never lets one array's donation change another."""

import warnings

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import SingleDeviceSharding

from jaxcompare import assert_close, device, eps

KINDS = ["device", "pinned_host", "unpinned_host"]
PLATFORMS = ["metal", "cpu"]


def in_kind(platform, kind):
    return SingleDeviceSharding(device(platform), memory_kind=kind)


def sample(dtype, shape=(3, 5)):
    rng = np.random.default_rng(7)
    if np.dtype(dtype).kind in "iub":
        return rng.integers(0, 2 if dtype == np.bool_ else 100, size=shape).astype(dtype)
    return rng.normal(size=shape).astype(dtype)


def test_the_device_offers_cpus_memory_kinds():
    for platform in PLATFORMS:
        d = device(platform)
        memories = d.addressable_memories()
        assert sorted(m.kind for m in memories) == sorted(KINDS), platform
        assert d.default_memory().kind == "device"
        for m in memories:
            assert m.addressable_by_devices() == [d]
            assert d.memory(m.kind) == m
    metal = device("metal")
    assert len({str(m) for m in metal.addressable_memories()}) == 3  # each names its kind


def test_an_unknown_kind_is_refused_naming_the_kinds_offered():
    with pytest.raises(ValueError, match="pinned_host"):
        jax.device_put(np.ones(2, np.float32), in_kind("metal", "hbm"))


@pytest.mark.parametrize("src", KINDS)
@pytest.mark.parametrize("dst", KINDS)
@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.bool_, ml_dtypes.bfloat16, np.complex64])
def test_device_put_between_kinds_keeps_values_and_reports_the_kind(src, dst, dtype):
    host = sample(dtype)
    seen = {}
    for platform in PLATFORMS:
        x = jax.device_put(host, in_kind(platform, src))
        assert x.sharding.memory_kind == src
        y = jax.device_put(x, in_kind(platform, dst))
        back = jax.device_put(y, in_kind(platform, src))
        assert y.sharding.memory_kind == dst and back.sharding.memory_kind == src
        seen[platform] = [np.asarray(a) for a in (x, y, back)]
        for a in seen[platform]:
            assert_close(a, host, exact=True, what=f"{platform} {src}->{dst}")
        # Each is its own array (JAX hands back x itself for a put into its own kind): deleting one
        # leaves the others readable.
        x.delete()
        for a in (y, back):
            if a is not x:
                assert_close(np.asarray(a), host, exact=True)
    assert_close(seen["metal"], seen["cpu"], exact=True)


@pytest.mark.parametrize("kind", KINDS)
def test_jit_places_results_in_the_out_shardings_kind(kind):
    def fn(a, b):
        return jnp.sin(a) * b, (a + b).sum(axis=0)

    a, b = sample(np.float32), sample(np.float32)
    results = {}
    for platform in PLATFORMS:
        f = jax.jit(fn, out_shardings=(in_kind(platform, kind), in_kind(platform, "device")))
        args = jax.device_put((a, b), device(platform))
        out = f(*args)
        assert [o.sharding.memory_kind for o in out] == [kind, "device"], platform
        kinds = f.lower(*args).compile().runtime_executable().get_output_memory_kinds()
        assert list(kinds[0]) == [kind, "device"], (platform, kinds)
        results[platform] = [np.asarray(o) for o in out]
    # sin and one multiply per element, a sum of 3 terms: a few roundings of the result.
    assert_close(results["metal"], results["cpu"], rtol=8 * eps(np.float32), atol=8 * eps(np.float32) * 9)


@pytest.mark.parametrize("kind", KINDS)
def test_results_follow_the_arguments_kind_as_on_cpu(kind):
    """Without out_shardings JAX propagates the kind through the program and reads the executable's
    output memory kinds: the result's kind is what cpu gives."""
    a = sample(np.float32)
    kinds, values = {}, {}
    for platform in PLATFORMS:
        x = jax.device_put(a, in_kind(platform, kind))
        out = jax.jit(lambda v: v * 2 + 1)(x)
        kinds[platform] = out.sharding.memory_kind
        values[platform] = np.asarray(out)
    assert kinds["metal"] == kinds["cpu"]
    assert_close(values["metal"], values["cpu"], exact=True)  # two exact-or-once-rounded ops


@pytest.mark.parametrize("kind", ["pinned_host", "unpinned_host"])
def test_device_put_inside_jit_to_host_and_back(kind):
    def on(platform):
        def fn(a):
            h = jax.device_put(a * 3, in_kind(platform, kind))
            return jax.device_put(h, in_kind(platform, "device")) + 1, h

        return jax.jit(fn)

    a = sample(np.float32)
    seen = {}
    for platform in PLATFORMS:
        out = on(platform)(jax.device_put(a, device(platform)))
        seen[platform] = ([o.sharding.memory_kind for o in out], [np.asarray(o) for o in out])
    assert seen["metal"][0] == seen["cpu"][0]
    # a * 3 + 1: cpu may contract it into one fused multiply-add; two roundings at most apart.
    bound = 2 * eps(np.float32) * np.max(3 * np.abs(a) + 1)
    assert_close(seen["metal"][1], seen["cpu"][1], rtol=0, atol=bound)


OFFLOAD = jax.checkpoint_policies.save_and_offload_only_these_names(
    names_which_can_be_saved=[], names_which_can_be_offloaded=["h1", "h2"],
    offload_src="device", offload_dst="pinned_host")

WIDTHS = (8, 16, 16, 1)
BATCH = 4


def offload_loss(params, x, y):
    h = checkpoint_name(jnp.tanh(x @ params[0]), "h1")
    h = checkpoint_name(jnp.tanh(h @ params[1]), "h2")
    return jnp.mean((h @ params[2] - y) ** 2)


@jax.jit
def offload_step(params, x, y):
    loss, grads = jax.value_and_grad(jax.checkpoint(offload_loss, policy=OFFLOAD))(params, x, y)
    return loss, grads, jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)


def test_host_offload_remat_training_step_matches_cpu():
    rng = np.random.default_rng(3)
    params = [(rng.normal(size=(m, n)) / np.sqrt(m)).astype(np.float32) for m, n in zip(WIDTHS[:-1], WIDTHS[1:])]
    x = rng.normal(size=(BATCH, WIDTHS[0])).astype(np.float32)
    y = rng.normal(size=(BATCH, 1)).astype(np.float32)
    # The policy does move the saved activations to host memory in the program JAX builds.
    assert "<host>" in str(jax.make_jaxpr(offload_step)(params, x, y))
    results = {}
    for platform in PLATFORMS:
        p, xs, ys = jax.device_put((params, x, y), device(platform))
        for _ in range(3):
            loss, grads, p = offload_step(p, xs, ys)
        results[platform] = jax.tree.map(np.asarray, (loss, grads, p))
    # Each value is a chain of dot products (forward: contractions of 8, 16, 16 terms; backward: of 16,
    # 16 and the batch) through tanh, three steps deep: each rounding contributes at most eps times the
    # magnitude, so the two platforms agree within a few times the summed lengths times eps, normwise.
    terms = 3 * (sum(WIDTHS[:-1]) + 2 * 16 + BATCH)
    for got, want in zip(jax.tree.leaves(results["metal"]), jax.tree.leaves(results["cpu"])):
        bound = 4 * terms * eps(np.float32) * max(np.max(np.abs(want)), 1.0)
        np.testing.assert_allclose(got, want, rtol=0, atol=bound)


def test_donating_an_array_never_changes_its_copy_in_another_kind():
    """device_put into another kind shares the memory on metal: the shared array is used, not donated,
    and the other one keeps its values; once it is gone, donation works again."""
    a = sample(np.float32)
    overwrite = jax.jit(lambda v: v * 0 - 1, donate_argnums=0)
    for platform in PLATFORMS:
        x = jax.device_put(a, device(platform))
        pinned = jax.device_put(x, in_kind(platform, "pinned_host"))
        out = overwrite(x)
        assert_close(np.asarray(out), np.full_like(a, -1), exact=True)
        assert_close(np.asarray(pinned), a, exact=True, what=platform)
        alone = jax.device_put(a, device(platform))
        overwrite(alone).block_until_ready()
        assert alone.is_deleted(), platform


@pytest.mark.parametrize("kind", KINDS)
def test_donation_into_a_result_of_another_kind(kind):
    """JAX donates only into a result of the argument's own kind (it warns that the buffer was not
    usable otherwise, on cpu too); either way the results are cpu's."""
    a = sample(np.float32)
    seen = {}
    for platform in PLATFORMS:
        f = jax.jit(lambda v: v * 2, donate_argnums=0, out_shardings=in_kind(platform, kind))
        x = jax.device_put(a, device(platform))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = f(x)
        seen[platform] = (out.sharding.memory_kind, np.asarray(out), x.is_deleted(), sorted(str(w.message) for w in caught))
    assert seen["metal"][0] == seen["cpu"][0] == kind
    assert seen["metal"][2:] == seen["cpu"][2:]
    assert_close(seen["metal"][1], seen["cpu"][1], exact=True)


def test_a_serialized_executable_keeps_its_output_kinds():
    """What JAX's persistent compilation cache stores and loads places results in the same kinds."""
    from jax_metal_plugin._jax_internals import compiler, xla_bridge

    d = device("metal")
    f = jax.jit(lambda a: (a + 1, a * 2), out_shardings=(in_kind("metal", "pinned_host"), in_kind("metal", "device")))
    x = jax.device_put(sample(np.float32), d)
    backend = xla_bridge.get_backend("metal")
    data = backend.serialize_executable(f.lower(x).compile().runtime_executable())
    options = compiler.get_compile_options(num_replicas=1, num_partitions=1)
    loaded = backend.deserialize_executable(data, [d], options)
    assert [list(k) for k in loaded.get_output_memory_kinds()] == [["pinned_host", "device"]]


def test_a_put_into_another_kind_shares_the_memory_and_counts_it_once():
    d = device("metal")
    a = np.arange(1 << 16, dtype=np.float32)
    x = jax.device_put(a, d)
    x.block_until_ready()
    before = d.memory_stats()["bytes_in_use"]
    y = jax.device_put(x, in_kind("metal", "pinned_host"))
    assert y.unsafe_buffer_pointer() == x.unsafe_buffer_pointer()  # no copy on unified memory
    assert d.memory_stats()["bytes_in_use"] == before
    x.delete()
    assert d.memory_stats()["bytes_in_use"] == before  # y still holds it
    assert_close(np.asarray(y), a, exact=True)
    y.delete()
    assert d.memory_stats()["bytes_in_use"] == before - a.nbytes

"""The plugin's work counters (jax_metal_plugin.stats(), what the benchmark reports per step): a float32
training step is one device graph run with no host wait and, once warm, no fresh allocation or copy; a
step with float64 in the middle (a host segment after a Metal one on a Mac) counts its waits."""

import jax
import jax.numpy as jnp
import numpy as np

import jax_metal_plugin


def delta(fn):
    before = jax_metal_plugin.stats()
    fn()
    after = jax_metal_plugin.stats()
    return {k: after[k] - before[k] for k in after}


def test_a_float32_training_step_is_one_graph_run_without_syncs_allocations_or_copies(metal_device):
    def step(w, x):
        g = jax.grad(lambda w: jnp.mean(jnp.tanh(x @ w) ** 2))(w)
        return w - 0.1 * g

    f = jax.jit(step)
    rng = np.random.default_rng(0)
    w, x = jax.device_put((rng.normal(size=(64, 32)).astype(np.float32),
                           rng.normal(size=(16, 64)).astype(np.float32)), metal_device)

    def loop():
        v = w
        for _ in range(10):
            v = f(v, x)
        jax.block_until_ready(v)
        return v

    loop()  # warm: compiles and fills the allocator's cache to the loop's depth
    d = delta(loop)
    assert d["graph_runs"] == 10 and d["syncs"] == 0, d
    assert d["fresh_allocs"] == 0 and d["copies"] == 0, d
    assert d["programs_lowered"] == 0, d  # nothing compiled again


def test_a_host_segment_after_a_metal_one_counts_as_a_sync(metal_device):
    def clip(x):
        n = jnp.sqrt(jnp.sum(x.astype(jnp.float64) ** 2))  # float64: a host segment on a Mac
        return (x / n.astype(jnp.float32)) * 2.0

    with jax.enable_x64(True):
        f = jax.jit(lambda x: clip(jnp.exp(x)))
        x = jax.device_put(np.linspace(-1, 1, 32, dtype=np.float32), metal_device)
        jax.block_until_ready(f(x))
        d = delta(lambda: jax.block_until_ready(f(x)))
        cpu_x = jax.device_put(np.linspace(-1, 1, 32, dtype=np.float32), jax.devices("cpu")[0])
        want = jax.jit(lambda x: clip(jnp.exp(x)))(cpu_x)
        np.testing.assert_allclose(np.asarray(f(x)), np.asarray(want), rtol=1e-6)
    assert d["graph_runs"] >= 1 and d["syncs"] >= 1, d
    assert d["syncs"] <= d["graph_runs"], d

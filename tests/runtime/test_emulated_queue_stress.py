"""The pipelined runtime under an emulated command queue with random completion delays: placed mode runs
every Metal segment through a queue with Metal's contract (commit returns at once, a completion thread
finishes runs in order after a seeded random delay), so every wait of the pipelined executor is exercised:
a run that reads an earlier run's results, a host segment (float64, a Python callback) waiting for the GPU
work it reads, donation writing over memory queued work still reads, host reads of buffers still being
computed. Results must match JAX's CPU backend. Runs in a fresh process with the delays set."""

import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import numpy as np
    import jax, jax.numpy as jnp
    from jax import lax

    metal, cpu = jax.devices("metal")[0], jax.devices("cpu")[0]

    def close(a, b, rtol, atol, what):
        for u, v in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
            np.testing.assert_allclose(np.asarray(u), np.asarray(v), rtol=rtol, atol=atol, err_msg=what)

    # 1. Training with donated parameters, never synced until the end, loss read every 7 steps.
    def loss(p, x, y):
        h = jnp.tanh(x @ p["w1"] + p["b1"])
        return jnp.mean((h @ p["w2"] - y) ** 2)

    def sgd(p, x, y):
        l, g = jax.value_and_grad(loss)(p, x, y)
        return jax.tree.map(lambda a, d: a - 0.05 * d, p, g), l

    def train(dev, steps=40):
        step = jax.jit(sgd, donate_argnums=0)
        k = jax.random.PRNGKey(3)
        p = {"w1": jax.random.normal(k, (8, 16)) / 3, "b1": jnp.zeros(16),
             "w2": jax.random.normal(jax.random.fold_in(k, 1), (16, 4)) / 4}
        x = jax.random.normal(jax.random.fold_in(k, 2), (32, 8))
        y = jax.random.normal(jax.random.fold_in(k, 3), (32, 4))
        p, x, y = jax.device_put((p, x, y), dev)
        losses = []
        for i in range(steps):
            p, l = step(p, x, y)
            if i % 7 == 0:
                losses.append(float(l))
        return p, np.array(losses)

    # The loss is a mean over 128 products of sums over 16 terms: float32 rounding bounds, amplified a
    # little by 40 steps of a contracting update.
    close(train(metal), train(cpu), 2e-4, 2e-5, "training loop")

    # 2. float64 host segments between float32 device segments, chained over runs without syncs.
    def mixed(a, b):
        s = jnp.sin(a) * 2.0 + a                       # float32: Metal
        d = s.astype(jnp.float64) @ b                  # float64: host, reads the GPU's result
        e = jnp.exp(-jnp.abs(d)).astype(jnp.float32)   # back to float32
        return jnp.cumsum(e * s[:, :3], axis=0)

    def chain(dev):
        f = jax.jit(mixed)
        a = jax.device_put(jnp.linspace(-1, 1, 24, dtype=jnp.float32).reshape(8, 3), dev)
        b = jax.device_put(jnp.arange(9, dtype=jnp.float64).reshape(3, 3) / 10, dev)
        outs = []
        for _ in range(12):
            a = f(a, b) / 3.0
            outs.append(a)
        return outs

    close(chain(metal), chain(cpu), 1e-5, 1e-6, "float64 host segments")

    # 3. A Python callback between device segments, in a loop with donation.
    def cb_step(v):
        w = jnp.cos(v) + v
        u = jax.pure_callback(lambda t: np.asarray(t) * 0.5 + 1.0, jax.ShapeDtypeStruct(w.shape, w.dtype), w)
        return jnp.tanh(u * w)

    def cb_loop(dev):
        f = jax.jit(cb_step, donate_argnums=0)
        v = jax.device_put(jnp.linspace(0, 2, 64, dtype=jnp.float32), dev)
        seen = []
        for i in range(15):
            v = f(v)
            if i % 4 == 0:
                seen.append(np.asarray(v))
        return seen + [np.asarray(v)]

    close(cb_loop(metal), cb_loop(cpu), 1e-5, 1e-6, "callbacks")

    # 4. Host reads racing donation: a copy to host is started, then the buffer is donated to a run that
    # writes over it; the copy must see the value before the run.
    def bump(v):
        return v * 1.5 + 1.0

    def race(dev):
        f = jax.jit(bump, donate_argnums=0)
        v = jax.device_put(jnp.arange(4096, dtype=jnp.float32) / 4096, dev)
        got = []
        for i in range(20):
            v = f(v)
            if i % 3 == 0:
                v.copy_to_host_async()
                held = v
                got.append(held)        # read after the donation below, from the copy already started
                v = f(jnp.copy(v))      # a fresh copy is donated: `held` stays valid
        return [np.asarray(g) for g in got] + [np.asarray(v)]

    close(race(metal), race(cpu), 1e-6, 0, "reads and donation")

    # 5. Many small runs reading each other's results, read back out of order.
    def ping(a, b):
        return a + jnp.roll(b, 1), b * 0.5 - a

    def web(dev):
        f = jax.jit(ping)
        a = jax.device_put(jnp.arange(16.0, dtype=jnp.float32), dev)
        b = jax.device_put(jnp.ones(16, jnp.float32), dev)
        keep = []
        for i in range(60):
            a, b = f(a, b)
            keep.append(a)
        return [np.asarray(k) for k in reversed(keep)]

    close(web(metal), web(cpu), 1e-5, 1e-4, "chained small runs")
    print("all cases match")
""")


@pytest.mark.parametrize("seed,delay", [(1, "0,2000"), (7, "0,300"), (42, "500,500")])
def test_pipelined_runtime_matches_cpu_under_random_delays(seed, delay):
    env = dict(os.environ, JAX_PLATFORMS="metal,cpu", JAX_ENABLE_X64="1", JAX_METAL_EXECUTOR="placed",
               JAX_METAL_EMULATED_SEED=str(seed), JAX_METAL_EMULATED_DELAY_US=delay)
    env.pop("JAX_METAL_EMULATED_QUEUE", None)
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-6000:]
    assert "all cases match" in proc.stdout

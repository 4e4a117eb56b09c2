"""Bounded, pipelined execution and the device pool: a training loop that never syncs paces itself (resident
memory stays flat, at most a bounded number of runs is ever queued), and a warm training step takes no
new memory from the pool. Each case runs in a fresh process, so that what earlier tests leave behind cannot
move the figures."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

MB = 1 << 20

# A small MLP trained with SGD, parameters donated each step (as a training loop does).
PRELUDE = textwrap.dedent("""
    import ctypes, json, os, sys
    import numpy as np
    import jax, jax.numpy as jnp
    import jax_metal_plugin

    lib = ctypes.CDLL(jax_metal_plugin.library_path())
    lib.jmp_pjrt_runs_in_flight.restype = ctypes.c_int64
    dev = jax.devices("metal")[0]

    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def init(key, sizes=(32, 64, 64, 10)):
        params = []
        for i, (m, n) in enumerate(zip(sizes[:-1], sizes[1:])):
            k = jax.random.fold_in(key, i)
            params.append((jax.random.normal(k, (m, n), jnp.float32) / np.sqrt(m), jnp.zeros((n,), jnp.float32)))
        return params

    def loss(params, x, y):
        h = x
        for w, b in params[:-1]:
            h = jnp.tanh(h @ w + b)
        w, b = params[-1]
        return jnp.mean((h @ w + b - y) ** 2)

    @jax.jit
    def _step(params, x, y):
        l, g = jax.value_and_grad(loss)(params, x, y)
        return jax.tree.map(lambda p, d: p - 0.01 * d, params, g), l
    step = jax.jit(_step, donate_argnums=0)

    key = jax.random.PRNGKey(0)
    params = jax.device_put(init(key), dev)
    x = jax.device_put(jax.random.normal(jax.random.fold_in(key, 7), (16, 32)), dev)
    y = jax.device_put(jax.random.normal(jax.random.fold_in(key, 8), (16, 10)), dev)
""")


def run_case(body: str, **env) -> dict:
    code = PRELUDE + textwrap.dedent(body)
    full_env = dict(os.environ, JAX_PLATFORMS="metal,cpu", **{k: str(v) for k, v in env.items()})
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full_env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads resident memory from /proc")
def test_unsynced_loop_paces_itself_and_memory_stays_flat():
    r = run_case("""
        for _ in range(200):
            params, l = step(params, x, y)
        l.block_until_ready()
        start = rss()
        most_in_flight = 0
        for i in range(5000):
            params, l = step(params, x, y)
            if i % 50 == 0:
                most_in_flight = max(most_in_flight, lib.jmp_pjrt_runs_in_flight())
        after_loop = rss()  # before any sync: everything queued is still held
        l.block_until_ready()
        print(json.dumps(dict(start=start, after_loop=after_loop, end=rss(), most_in_flight=most_in_flight,
                              loss=float(l))))
    """)
    # Execute waits once the bound (32 by default) is reached: the loop never runs far ahead.
    assert 1 <= r["most_in_flight"] <= 33, r
    assert r["after_loop"] - r["start"] < 20 * MB, r
    assert r["end"] - r["start"] < 20 * MB, r
    assert r["loss"] == r["loss"], r  # a number, not NaN: the steps really ran


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads resident memory from /proc")
def test_long_loop_with_rare_syncs_stays_flat():
    r = run_case("""
        for _ in range(200):
            params, l = step(params, x, y)
        l.block_until_ready()
        samples = [rss()]
        for i in range(40000):
            params, l = step(params, x, y)
            if (i + 1) % 10000 == 0:
                l.block_until_ready()
                samples.append(rss())
        print(json.dumps(dict(samples=samples)))
    """)
    s = r["samples"]
    assert len(s) == 5
    assert max(s) - s[0] < 20 * MB, [v / MB for v in s]
    # No creep from one sync to the next either (unbounded queues grow with every interval).
    assert s[-1] - s[1] < 10 * MB, [v / MB for v in s]


def test_warm_training_step_reuses_the_pool():
    # Each step's loss is read (as a loop that logs it does): the pool then holds one step's memory. A
    # loop that never syncs holds up to the in-flight bound's worth of steps, and grows the pool to that.
    r = run_case("""
        for _ in range(20):
            params, l = step(params, x, y)
            float(l)
        warm = dev.memory_stats()
        for _ in range(100):
            params, l = step(params, x, y)
            float(l)
        after = dev.memory_stats()
        released = jax_metal_plugin.trim_memory()
        trimmed = dev.memory_stats()
        for _ in range(5):
            params, l = step(params, x, y)
        l.block_until_ready()
        print(json.dumps(dict(warm=warm, after=after, released=released, trimmed=trimmed, loss=float(l))))
    """)
    warm, after, trimmed = r["warm"], r["after"], r["trimmed"]
    for key in ("bytes_in_use", "peak_bytes_in_use", "bytes_reserved", "num_allocs", "bytes_limit"):
        assert key in warm, (key, warm)
    assert warm["bytes_reserved"] > 0
    # The pool holds at least what live buffers use, and no warm step needed a new block.
    assert warm["bytes_reserved"] >= warm["bytes_in_use"] > 0
    assert after["bytes_reserved"] == warm["bytes_reserved"], (warm, after)
    assert after["peak_bytes_reserved"] == warm["peak_bytes_reserved"], (warm, after)
    assert warm["bytes_limit"] > warm["bytes_reserved"]
    # A trim gives back the kept blocks, never the ones in use; training goes on afterwards.
    assert r["released"] > 0
    assert trimmed["bytes_reserved"] == after["bytes_reserved"] - r["released"]
    assert trimmed["bytes_reserved"] >= trimmed["bytes_in_use"]
    assert r["loss"] == r["loss"]


def test_bound_holds_with_python_callbacks_in_the_loop():
    # A tiny bound, a loop that never syncs and a Python callback in every step: Execute waits for a
    # slot while queued runs call back into Python, which needs the interpreter the waiting caller left.
    r = run_case("""
        @jax.jit
        def cb_step(v):
            w = jnp.sin(v) + v
            u = jax.pure_callback(lambda t: np.asarray(t) * 0.5, jax.ShapeDtypeStruct(w.shape, w.dtype), w)
            return u + 1.0
        v = jax.device_put(jnp.linspace(0, 1, 32, dtype=jnp.float32), dev)
        most_in_flight = 0
        for _ in range(60):
            v = cb_step(v)
            most_in_flight = max(most_in_flight, lib.jmp_pjrt_runs_in_flight())
        got = np.asarray(v)
        ref = np.linspace(0, 1, 32, dtype=np.float32)
        for _ in range(60):
            ref = ((np.sin(ref) + ref) * 0.5 + 1.0).astype(np.float32)
        print(json.dumps(dict(most_in_flight=most_in_flight, err=float(np.max(np.abs(got - ref))))))
    """, JAX_METAL_MAX_INFLIGHT=2)
    assert r["most_in_flight"] <= 2, r
    # 60 steps of a contraction with derivative <= 1: float32 rounding does not grow past a few ulps of 2.
    assert r["err"] < 1e-5, r

"""jax.profiler traces show what the plugin ran: each execution, its segments with their executor and
duration, the Python callbacks, compiles and copies, on a device plane of the plugin's own (the PJRT
profiler extension). The trace files are read back with JAX's own reader."""

import glob
import time

import jax
import jax.numpy as jnp
import numpy as np
from jaxcompare import assert_close

PLANE = "/device:CUSTOM:0"


def read_trace(logdir):
    files = glob.glob(f"{logdir}/**/*.xplane.pb", recursive=True)
    assert len(files) == 1, files
    data = jax.profiler.ProfileData.from_file(files[0])
    planes = [p for p in data.planes if p.name == PLANE]
    assert len(planes) == 1, [p.name for p in data.planes]
    events = {}
    for line in planes[0].lines:
        for e in line.events:
            events.setdefault(line.name, []).append((e.name, e.start_ns, e.duration_ns, dict(e.stats)))
    return events


CALLBACK_SECONDS = 0.02


def slow_callback(v):
    time.sleep(CALLBACK_SECONDS)


def train_step(w, x):
    # float32 work for Metal, a float64 reduction and a callback for the host, then float32 again.
    y = jnp.tanh(x @ w)
    loss = (y.astype(jnp.float64) ** 2).sum()
    jax.debug.callback(slow_callback, loss)
    return w - 0.01 * (x.T @ y), loss


def test_a_training_step_trace_shows_segments_executors_and_callback(tmp_path, x64):
    metal, cpu = jax.devices("metal")[0], jax.devices("cpu")[0]
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal((16, 16)).astype(np.float32)
    x = rng.standard_normal((8, 16)).astype(np.float32)
    step = jax.jit(train_step)
    steps = 3
    with jax.profiler.trace(str(tmp_path)):
        w = jax.device_put(w0, metal)
        for _ in range(steps):
            w, loss = step(w, jax.device_put(x, metal))
        w.block_until_ready()
    w_cpu = jax.device_put(w0, cpu)
    for _ in range(steps):
        w_cpu, loss_cpu = jax.jit(train_step)(w_cpu, jax.device_put(x, cpu))
    assert_close(np.asarray(w), np.asarray(w_cpu))

    events = read_trace(tmp_path)
    executes = events["Execute"]
    assert len(executes) >= steps
    segments = events["Segment"]
    by_executor = {}
    for name, start, duration, stats in segments:
        assert duration > 0
        by_executor.setdefault(stats["executor"], []).append((name, start, duration, stats))
    assert set(by_executor) == {"metal", "host"}
    # Each step runs a metal segment (placement takes every float32 op it can first) and a host one
    # (float64 and the callback).
    assert len(by_executor["host"]) >= steps and len(by_executor["metal"]) >= steps
    assert all("PythonCallback" in s["ops"] for _, _, _, s in by_executor["host"])
    assert any("MatMul" in s["ops"] for _, _, _, s in by_executor["metal"])
    # Every segment lies within an execution.
    for _, start, duration, _ in segments:
        assert any(s <= start and start + duration <= s + d + 1e3 for _, s, d, _ in executes)
    callbacks = events["Callback"]
    assert len(callbacks) == steps
    for _, _, duration, stats in callbacks:
        assert duration >= CALLBACK_SECONDS * 1e9 * 0.9
        assert "test_profiler_trace.py" in stats["source"]
    # The host segment holding the callback lasts at least as long as the callback.
    assert all(d >= CALLBACK_SECONDS * 1e9 * 0.9 for _, _, d, _ in by_executor["host"])
    # The first step compiled inside the trace; the argument copies to the device are there too.
    assert len(events["Compile"]) >= 1
    assert any(name == "host to device" and int(stats["bytes"]) == w0.nbytes for name, _, _, stats in events["Copy"])


def test_nothing_is_recorded_outside_a_trace(tmp_path):
    f = jax.jit(lambda a: jnp.sin(a) * 2)
    a = jnp.arange(8.0)
    f(a).block_until_ready()  # outside any trace: must not show up in the next one
    with jax.profiler.trace(str(tmp_path)):
        out = jax.jit(lambda a: jnp.cos(a) + 1)(a)
        out.block_until_ready()
    assert_close(np.asarray(out), np.cos(np.arange(8.0, dtype=np.float32)) + 1)
    events = read_trace(tmp_path)
    ops = [stats["ops"] for _, _, _, stats in events["Segment"]]
    assert ops and all("Sin" not in o for o in ops)
    assert any("Cos" in o for o in ops)


def test_signposts_are_a_mac_feature():
    import sys

    import jax_metal_plugin.profiler as mp

    on = mp.start()
    try:
        assert on == (sys.platform == "darwin")
        # The plugin keeps working with signposts asked for, wherever it runs.
        assert_close(np.asarray(jax.jit(lambda a: a * 3)(jnp.arange(4.0))), np.arange(4.0, dtype=np.float32) * 3)
    finally:
        mp.stop()

"""Host callbacks on metal behave as on JAX's CPU backend: jax.debug.print (the same text),
jax.debug.callback, jax.pure_callback and io_callback (the same values, call counts and order), in
loops, under vmap and grad, for every dtype the plugin has; exceptions surface from the jitted call and
the next call works; a callback may itself call JAX without deadlocking."""

import os
import subprocess
import sys
import textwrap
import threading

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax
from jax.experimental import io_callback

from jaxcompare import assert_close, device

PLATFORMS = ("cpu", "metal")


def run(platform, fn, *args):
    """fn jitted on `platform`, its results as NumPy, every callback it queued done."""
    out = jax.jit(fn)(*jax.device_put(args, device(platform)))
    out = jax.tree.map(np.asarray, out)
    jax.effects_barrier()
    return out


def printed(capfd, platform, fn, *args):
    capfd.readouterr()
    run(platform, fn, *args)
    return capfd.readouterr().out


def both_print(capfd, fn, *args, ordered=False):
    """The same text on both platforms: the same lines in the same order for ordered prints; for
    unordered ones, whose order neither platform promises, the same lines."""
    texts = [printed(capfd, p, fn, *args) for p in PLATFORMS]
    same = texts[0] == texts[1] if ordered else sorted(texts[0].splitlines()) == sorted(texts[1].splitlines())
    assert same, f"cpu printed {texts[0]!r}, metal printed {texts[1]!r}"
    assert texts[0], "nothing was printed"
    return texts[1]


def recorded(platform, fn, *args):
    """fn(record, *args) on platform: what its callbacks recorded, and its result."""
    log = []
    out = run(platform, lambda *a: fn(log.append, *a), *args)
    return log, out


DTYPE_VALUES = [
    np.array([1.5, -2.25, 3.0], np.float32),
    np.array([1.5, -2.25, 65504.0], np.float16),
    np.array([1.5, -2.25, 3.0], ml_dtypes.bfloat16),
    np.array([1 + 2j, -3.5j], np.complex64),
    np.array([True, False, True]),
    np.array([-7, 0, 2**31 - 1], np.int32),
    np.array([0, 255, 7], np.uint8),
    np.array([-3, 4], np.int8),
    np.zeros((0, 3), np.float32),
    np.float32(2.5),
    np.int32(-4),
]
IDS = [f"{np.asarray(v).dtype}{list(np.shape(v))}" for v in DTYPE_VALUES]


# ---- jax.debug.print


@pytest.mark.parametrize("value", DTYPE_VALUES, ids=IDS)
def test_debug_print_same_text_every_dtype(capfd, value):
    def f(x):
        jax.debug.print("x={x} shape={s}", x=x, s=x.shape)
        return x

    both_print(capfd, f, value)


def test_debug_print_of_computed_values_and_formats(capfd):
    def f(x):
        y = jnp.sin(x) * 2
        jax.debug.print("y={} sum={:.3f} max={m}", y, y.sum(), m=y.max())
        jax.debug.print("no arguments at all")
        return y

    text = both_print(capfd, f, np.linspace(0, 1, 5, dtype=np.float32))
    assert "no arguments at all" in text


def test_debug_print_ordered_in_a_loop_keeps_program_order(capfd):
    def f(x):
        def body(i, x):
            jax.debug.print("step {i}: {x}", i=i, x=x, ordered=True)
            return x * 2

        x = lax.fori_loop(0, 6, body, x)
        jax.debug.print("after the loop {}", x, ordered=True)
        return x

    text = both_print(capfd, f, np.float32(1.0), ordered=True)
    assert text.index("step 0") < text.index("step 5") < text.index("after the loop")


def test_debug_print_ordered_across_calls(capfd):
    f = jax.jit(lambda x, i: (jax.debug.print("call {i}", i=i, ordered=True), x + 1)[1])
    x = jax.device_put(np.float32(0), device("metal"))
    capfd.readouterr()
    for i in range(20):
        x = f(x, i)
    jax.effects_barrier()
    lines = capfd.readouterr().out.split()
    assert lines == [w for i in range(20) for w in ("call", str(i))]


def test_debug_print_under_vmap_and_grad(capfd):
    def f(x):
        def loss(x):
            jax.debug.print("x={}", x)
            return (x**2).sum()

        return jax.vmap(jax.grad(loss))(x)

    both_print(capfd, f, np.arange(6, dtype=np.float32).reshape(3, 2))


def test_debug_print_in_cond_and_while(capfd):
    def f(x):
        x = lax.cond(x.sum() > 0, lambda x: (jax.debug.print("pos {}", x), x)[1],
                     lambda x: (jax.debug.print("neg {}", x), -x)[1], x)

        def body(c):
            jax.debug.print("c={}", c)
            return c + 1

        return lax.while_loop(lambda c: c < 3, body, x.sum().astype(np.int32))

    both_print(capfd, f, np.array([1.0, -0.5], np.float32))
    both_print(capfd, f, np.array([-1.0, -0.5], np.float32))


# ---- jax.debug.callback


def test_debug_callback_values_and_call_counts_in_scan():
    def f(record, xs):
        def step(c, x):
            jax.debug.callback(lambda c, x: record((int(c), float(x))), c, x)
            return c + 1, x * 2

        return lax.scan(step, 0, xs)

    xs = np.arange(5, dtype=np.float32)
    (cpu_log, cpu_out), (metal_log, metal_out) = [recorded(p, f, xs) for p in PLATFORMS]
    assert sorted(metal_log) == sorted(cpu_log) and len(metal_log) == 5
    assert_close(metal_out, cpu_out)


def test_debug_callback_ordered_keeps_order():
    def f(record, x):
        for k in range(8):
            jax.debug.callback(lambda v, k=k: record((k, float(v))), x + k, ordered=True)
        return x

    (cpu_log, _), (metal_log, _) = [recorded(p, f, np.float32(1)) for p in PLATFORMS]
    assert metal_log == cpu_log == [(k, 1.0 + k) for k in range(8)]


def test_debug_callback_arguments_may_be_kept():
    # Values a callback keeps must not change when the executor reuses memory afterwards.
    kept = []

    def f(x):
        for k in range(3):
            jax.debug.callback(lambda v: kept.append(np.asarray(v)), x * (k + 1), ordered=True)
        return jnp.zeros_like(x) - 1

    run("metal", f, np.arange(4, dtype=np.float32))
    assert [k.tolist() for k in kept] == [[0, 1, 2, 3], [0, 2, 4, 6], [0, 3, 6, 9]]


# ---- jax.pure_callback


@pytest.mark.parametrize("value", DTYPE_VALUES, ids=IDS)
def test_pure_callback_round_trips_every_dtype(value):
    def f(x):
        shape = jax.ShapeDtypeStruct(x.shape, x.dtype)
        return jax.pure_callback(lambda v: np.asarray(v)[::-1] if np.ndim(v) else np.asarray(v), shape, x)

    assert_close(run("metal", f, value), run("cpu", f, value), exact=True)


def test_pure_callback_numpy_escape_hatch_and_several_results():
    def f(x, y):
        shapes = (jax.ShapeDtypeStruct(x.shape, x.dtype), jax.ShapeDtypeStruct((), np.int32))
        a, n = jax.pure_callback(lambda x, y: (np.sin(x) + y, np.int32(x.size)), shapes, x, y)
        return a * 2, n

    x, y = np.linspace(0, 1, 7, dtype=np.float32), np.float32(0.5)
    assert_close(run("metal", f, x, y), run("cpu", f, x, y))


@pytest.mark.parametrize("vmap_method", ["sequential", "expand_dims", "broadcast_all"])
def test_pure_callback_under_vmap(vmap_method):
    def counted(calls):
        def f(x):
            def host(x):
                calls.append(x.shape)
                return np.cos(x)

            shape = jax.ShapeDtypeStruct(x.shape, x.dtype)
            return jax.vmap(lambda r: jax.pure_callback(host, jax.ShapeDtypeStruct(r.shape, r.dtype), r,
                                                        vmap_method=vmap_method))(x) + 0 * jnp.zeros(shape.shape)

        return f

    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    cpu_calls, metal_calls = [], []
    expected = run("cpu", counted(cpu_calls), x)
    assert_close(run("metal", counted(metal_calls), x), expected)
    assert metal_calls == cpu_calls


def test_pure_callback_under_grad_with_custom_jvp():
    @jax.custom_jvp
    def host_sin(x):
        return jax.pure_callback(np.sin, jax.ShapeDtypeStruct(x.shape, x.dtype), x)

    @host_sin.defjvp
    def _(primals, tangents):
        (x,), (t,) = primals, tangents
        return host_sin(x), jax.pure_callback(np.cos, jax.ShapeDtypeStruct(x.shape, x.dtype), x) * t

    def f(x):
        return jax.grad(lambda x: host_sin(x).sum())(x), jax.jacfwd(host_sin)(x)

    x = np.linspace(-1, 1, 4, dtype=np.float32)
    assert_close(run("metal", f, x), run("cpu", f, x))
    assert_close(run("metal", f, x)[0], np.cos(x))


def test_pure_callback_in_while_loop_and_cond():
    def f(x):
        def body(c):
            i, v = c
            v = jax.pure_callback(lambda v: v * 2 + 1, jax.ShapeDtypeStruct(v.shape, v.dtype), v)
            return i + 1, v

        _, v = lax.while_loop(lambda c: c[0] < 4, body, (0, x))
        return lax.cond(v[0] > 10, lambda v: jax.pure_callback(np.negative, jax.ShapeDtypeStruct(v.shape, v.dtype), v),
                        lambda v: v, v)

    x = np.array([1, 2, 3], np.int32)
    assert_close(run("metal", f, x), run("cpu", f, x))


# ---- io_callback


def test_io_callback_ordered_feeds_data_in_order():
    def make():
        source = iter(range(100))
        seen = []

        def feed(x):
            seen.append(int(x))
            return np.float32(next(source))

        def f(x):
            def body(i, acc):
                return acc + io_callback(feed, jax.ShapeDtypeStruct((), np.float32), i, ordered=True)

            return lax.fori_loop(0, 10, body, x)

        return f, seen

    (f_cpu, seen_cpu), (f_metal, seen_metal) = make(), make()
    expected = run("cpu", f_cpu, np.float32(0))
    assert_close(run("metal", f_metal, np.float32(0)), expected)
    assert seen_metal == seen_cpu == list(range(10))


def test_io_callback_unordered_neither_dropped_nor_duplicated():
    def f(record, x):
        def host(v):
            record(float(v))
            return np.float32(v) + 1

        ys = [io_callback(host, jax.ShapeDtypeStruct((), np.float32), x + k) for k in range(5)]
        return sum(ys)

    (cpu_log, cpu_out), (metal_log, metal_out) = [recorded(p, f, np.float32(1)) for p in PLATFORMS]
    assert sorted(metal_log) == sorted(cpu_log) == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert_close(metal_out, cpu_out)


def test_io_callback_under_vmap_runs_once_per_row():
    def f(record, x):
        def host(v):
            record(v.tolist())
            return v * 3

        return jax.vmap(lambda r: io_callback(host, jax.ShapeDtypeStruct(r.shape, r.dtype), r))(x)

    x = np.arange(6, dtype=np.int32).reshape(3, 2)
    (cpu_log, cpu_out), (metal_log, metal_out) = [recorded(p, f, x) for p in PLATFORMS]
    assert metal_log == cpu_log
    assert_close(metal_out, cpu_out)


# ---- failures


def still_alive():
    out = jax.jit(lambda x: x * 2 + 1)(jax.device_put(np.arange(3, dtype=np.float32), device("metal")))
    np.testing.assert_array_equal(np.asarray(out), [1, 3, 5])
    # A failed execution with effects leaves its failure in the device's runtime token, which
    # jax.effects_barrier() (and JAX at exit) reports; the next effectful execution replaces it.
    calls = []
    for platform in PLATFORMS:
        f = jax.jit(lambda x: (jax.debug.callback(lambda v: calls.append(v), x), x)[1])
        f(jax.device_put(np.float32(1), device(platform))).block_until_ready()
    jax.effects_barrier()
    assert len(calls) == 2


def failing(x):
    def host(v):
        raise ValueError(f"bad value {float(v[0])}")

    return jax.pure_callback(host, jax.ShapeDtypeStruct(x.shape, x.dtype), x)


def test_exception_surfaces_with_type_and_message_and_next_call_works():
    x = np.array([4.5, 1.0], np.float32)
    for platform in PLATFORMS:
        with pytest.raises(Exception) as info:
            run(platform, failing, x)
        assert "ValueError" in str(info.value) and "bad value 4.5" in str(info.value), (platform, str(info.value))
    still_alive()
    # The same executable again: it fails again the same way, and runs once the callback is fine.
    with pytest.raises(Exception, match="bad value 4.5"):
        run("metal", failing, x)
    np.testing.assert_array_equal(
        run("metal", lambda x: jax.pure_callback(np.abs, jax.ShapeDtypeStruct(x.shape, x.dtype), x), -x), x)


def test_debug_callback_exception_surfaces():
    def f(x):
        jax.debug.callback(lambda v: 1 / 0, x)
        return x + 1

    for platform in PLATFORMS:
        with pytest.raises(Exception) as info:
            run(platform, f, np.float32(1))
        assert "ZeroDivisionError" in str(info.value), (platform, str(info.value))
    still_alive()


@pytest.mark.parametrize("returned, declared", [
    (np.zeros(3, np.float32), "f32[2]"),
    (np.zeros(2, np.int32), "f32[2]"),
])
def test_result_of_the_wrong_type_is_an_error_naming_both(returned, declared):
    def f(x):
        return jax.pure_callback(lambda v: returned, jax.ShapeDtypeStruct((2,), np.float32), x)

    with pytest.raises(Exception):
        run("cpu", f, np.float32(1))
    with pytest.raises(Exception) as info:
        run("metal", f, np.float32(1))
    message = str(info.value)
    assert declared in message and f"[{returned.shape[0]}]" in message, message
    still_alive()


def test_wrong_number_of_results_is_an_error():
    def f(x):
        return jax.pure_callback(lambda v: (v, v), jax.ShapeDtypeStruct((), np.float32), x)

    with pytest.raises(Exception, match="(?i)outputs"):
        run("metal", f, np.float32(1))
    still_alive()


# ---- callbacks that call JAX


@pytest.mark.parametrize("inner", PLATFORMS)
def test_callback_that_calls_jax_does_not_deadlock(inner):
    inner_fn = jax.jit(lambda v: jnp.cumsum(v) * 2)

    def host(v):
        out = inner_fn(jax.device_put(np.asarray(v), device(inner)))
        return np.asarray(out)

    def f(x):
        y = jax.pure_callback(host, jax.ShapeDtypeStruct(x.shape, x.dtype), x + 1)
        jax.debug.callback(lambda v: np.asarray(inner_fn(jax.device_put(np.asarray(v), device(inner)))), y)
        return y - 1

    x = np.arange(5, dtype=np.float32)
    result = {}
    worker = threading.Thread(target=lambda: result.update(out=run("metal", f, x)), daemon=True)
    worker.start()
    worker.join(120)
    assert not worker.is_alive(), "the jitted call with a callback that calls JAX hung"
    np.testing.assert_allclose(result["out"], np.cumsum(x + 1) * 2 - 1)


def test_queued_work_behind_a_callback_that_calls_jax_does_not_deadlock():
    # Asynchronous dispatch queues later steps (which need this step's results) behind the step whose
    # callback is running; the callback's own JAX work must not wait behind them.
    inner_fn = jax.jit(lambda v: v + 1)

    def host(v):
        return np.asarray(inner_fn(jax.device_put(np.asarray(v), device("metal"))))

    step = jax.jit(lambda x: jax.pure_callback(host, jax.ShapeDtypeStruct(x.shape, x.dtype), x) * 2)
    result = {}

    def loop():
        x = jax.device_put(np.zeros(3, np.float32), device("metal"))
        for _ in range(5):
            x = step(x)
        result["out"] = np.asarray(x)

    worker = threading.Thread(target=loop, daemon=True)
    worker.start()
    worker.join(120)
    assert not worker.is_alive(), "steps queued behind a callback that calls JAX hung"
    expected = np.zeros(3, np.float32)
    for _ in range(5):
        expected = (expected + 1) * 2
    np.testing.assert_array_equal(result["out"], expected)


def test_other_python_threads_run_while_a_step_runs():
    # The GIL is taken for the callback only: a Python thread makes progress meanwhile.
    import time

    def host(v):
        time.sleep(0.05)
        return v

    step = jax.jit(lambda x: jax.pure_callback(host, jax.ShapeDtypeStruct(x.shape, x.dtype), jnp.sort(x)))
    ticks = []
    stop = threading.Event()

    def ticker():
        while not stop.is_set():
            ticks.append(1)
            time.sleep(0.001)

    t = threading.Thread(target=ticker)
    t.start()
    try:
        np.asarray(step(jax.device_put(np.random.rand(1 << 16).astype(np.float32), device("metal"))))
    finally:
        stop.set()
        t.join()
    assert len(ticks) > 5


# ---- JAX_PLATFORMS=metal alone


def test_with_metal_alone_eager_and_jitted(tmp_path):
    script = textwrap.dedent("""
        import jax, jax.numpy as jnp, numpy as np
        from jax.experimental import io_callback
        assert jax.devices()[0].platform == "metal", jax.devices()
        x = jnp.arange(3.0)
        jax.debug.print("eager x={x}", x=x)
        jax.debug.callback(lambda v: print("eager callback", v), x)
        jax.jit(lambda x: jax.debug.print("jit x={x}", x=x))(x)
        y = jax.pure_callback(np.sin, jax.ShapeDtypeStruct(x.shape, x.dtype), x)
        print("pure", np.round(np.asarray(y), 3))
        z = jax.jit(lambda x: io_callback(lambda v: v * 2, jax.ShapeDtypeStruct(x.shape, x.dtype), x, ordered=True))(x)
        print("io", np.asarray(z), next(iter(z.devices())).platform)
        jax.effects_barrier()
    """)
    env = dict(os.environ, JAX_PLATFORMS="metal")
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "eager x=[0. 1. 2.]" in lines
    assert "eager callback [0. 1. 2.]" in lines
    assert "jit x=[0. 1. 2.]" in lines
    assert "pure [0.    0.841 0.909]" in lines
    assert "io [0. 2. 4.] metal" in lines


def test_debug_breakpoint_reads_commands_and_shows_values_as_on_cpu(tmp_path):
    script = textwrap.dedent("""
        import sys, jax, jax.numpy as jnp, numpy as np

        @jax.jit
        def f(x):
            y = jnp.sin(x)
            jax.debug.breakpoint(backend="cli")
            return y * 2

        x = jax.device_put(np.arange(3, dtype=np.float32), jax.devices(sys.argv[1])[0])
        print(np.asarray(f(x)))
        jax.effects_barrier()
    """)
    outputs = []
    for platform in PLATFORMS:
        out = subprocess.run([sys.executable, "-c", script, platform], input="p y\np x\nc\n", capture_output=True,
                             text=True, timeout=300, cwd=tmp_path, env=dict(os.environ, JAX_PLATFORMS="metal,cpu"))
        assert out.returncode == 0, out.stderr
        outputs.append(out.stdout)
    assert outputs[0] == outputs[1]
    assert "0.84147" in outputs[1] and "(jdb)" in outputs[1]

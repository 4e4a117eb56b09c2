"""Callbacks behave as on JAX's CPU backend in what a program sees of them: a jitted call that calls into
Python has done so when it returns (its printed text lands inside the call), a callback's error fails the
call (directly or under vmap), callbacks get the types cpu gives them (jax.Array, PRNG keys) with or
without a CPU backend, branches of cond/switch that only print compile and run, and checkify's check and
debug_check staged without checkify lower as on cpu."""

import contextlib
import io
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.experimental import checkify

from jaxcompare import device, jax_config

PLATFORMS = ("cpu", "metal")


def on(platform, fn, *args):
    return jax.jit(fn)(*jax.device_put(args, device(platform)))


# ---- the call returns after the callback ran


@pytest.mark.parametrize("platform", PLATFORMS)
def test_print_after_a_loop_lands_inside_the_call(platform):
    def f(x):
        x = lax.fori_loop(0, 500, lambda i, c: jnp.sin(c) * 1.0001 + 1, x)
        jax.debug.print("last={}", x[0])
        return x

    step = jax.jit(f)
    x = jax.device_put(np.ones(4096, np.float32), device(platform))
    step(x).block_until_ready()  # compiled, and its first print flushed
    jax.effects_barrier()
    inside = 0
    for _ in range(20):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            step(x)
        inside += "last=" in buf.getvalue()
    jax.effects_barrier()
    assert inside == 20, f"{platform}: {inside} of 20 prints landed inside the call"


def test_io_callback_has_run_when_the_call_returns():
    from jax.experimental import io_callback

    seen = []

    def f(x):
        y = lax.fori_loop(0, 200, lambda i, c: c * 0.5 + 1, x)
        io_callback(lambda v: seen.append(float(v[0])) or np.int32(0), jax.ShapeDtypeStruct((), np.int32), y)
        return y

    out = on("metal", f, np.ones(1024, np.float32))
    assert len(seen) == 1, "the call returned before its callback ran"
    np.testing.assert_allclose(seen[0], np.asarray(out)[0], rtol=1e-6)


# ---- errors reach the caller


def wrong_shape(x):
    return np.zeros(x.shape[-1] + 1, np.float32)


def wrong_count(x):
    return np.asarray(x), np.asarray(x)


@pytest.mark.parametrize("bad", [wrong_shape, wrong_count], ids=["shape", "count"])
@pytest.mark.parametrize("batched", [False, True], ids=["plain", "vmap"])
def test_a_bad_pure_callback_result_fails_the_call_as_on_cpu(bad, batched):
    def f(x):
        return jax.pure_callback(bad, jax.ShapeDtypeStruct(x.shape, x.dtype), x, vmap_method="sequential")

    fn = jax.vmap(f) if batched else f
    x = np.ones((2, 3), np.float32) if batched else np.ones(3, np.float32)
    for platform in PLATFORMS:
        with pytest.raises(RuntimeError):
            on(platform, fn, x)
            jax.effects_barrier()
    np.testing.assert_array_equal(np.asarray(on("metal", lambda v: v + 1, np.float32(1))), 2)


def test_an_exception_in_a_debug_callback_reaches_the_caller():
    def boom(v):
        raise ValueError("boom")

    def f(x):
        jax.debug.callback(boom, x)
        return x

    for platform in PLATFORMS:
        with pytest.raises(Exception, match="boom"):
            on(platform, f, np.float32(1))
            jax.effects_barrier()


# ---- what callbacks receive


SCRIPT = textwrap.dedent("""
    import jax, jax.numpy as jnp, numpy as np
    from jax.experimental import io_callback
    assert {d.platform for d in jax.devices()} == {PLATFORM}, jax.devices()
    c = jnp.int32(2)
    jax.jit(lambda: jax.debug.print("{} {!r}", c, c))()
    jax.debug.print("{} {!r}", c, c)
    k = jax.random.key(0)
    jax.debug.print("{}", k)
    jax.jit(lambda k: jax.debug.print("{}", k))(k)
    def show(*a):
        print([type(v).__name__ for v in a], [str(v.dtype) for v in a], [isinstance(v, jax.Array) for v in a])
    jax.debug.callback(show, c, k)
    jax.jit(lambda c, k: jax.debug.callback(show, c, k))(c, k)
    def pure(x):
        show(x)
        return jnp.asarray(x) + 1
    s = jax.ShapeDtypeStruct((), jnp.int32)
    print(jax.jit(lambda x: jax.pure_callback(pure, s, x))(c))
    print(jax.pure_callback(pure, s, c))
    print(jax.jit(lambda x: io_callback(pure, s, x))(c))
    print(jax.jit(lambda x: jax.pure_callback(lambda v: jnp.sin(v) * 2, jax.ShapeDtypeStruct((3,), jnp.float32),
                                              x))(jnp.arange(3.0)))
    jax.effects_barrier()
""")


def test_callbacks_get_what_cpu_gives_them_with_each_platform_alone(tmp_path):
    texts = {}
    for platform in PLATFORMS:
        env = dict(os.environ, JAX_PLATFORMS=platform)
        out = subprocess.run([sys.executable, "-c", SCRIPT.replace("PLATFORM", repr(platform))], env=env,
                             capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert out.returncode == 0, f"{platform}: {out.stderr[-3000:]}"
        texts[platform] = out.stdout
    assert "Array(2, dtype=int32)" in texts["cpu"] and "key<" in texts["cpu"], texts["cpu"]
    assert texts["metal"] == texts["cpu"]


def test_callbacks_get_jax_arrays_with_both_platforms():
    kinds = {}
    for platform in PLATFORMS:
        seen = []

        def f(x, k):
            jax.debug.callback(lambda v, key: seen.append((type(v), isinstance(v, jax.Array), str(key.dtype))), x, k)
            return x

        on(platform, f, np.float32(1), jax.random.key_data(jax.random.key(1)))
        jax.effects_barrier()
        kinds[platform] = seen
    assert kinds["metal"] == kinds["cpu"] and kinds["cpu"][0][1]


# ---- branches without results


def branchy(x):
    lax.cond(x > 0, lambda: jax.debug.print("positive {}", x), lambda: jax.debug.print("not positive {}", x))
    lax.switch(jnp.int32(jnp.abs(x)) % 3,
               [lambda: jax.debug.print("zero"), lambda: jax.debug.print("one {}", x * 2), lambda: None])
    return x + 1


@pytest.mark.parametrize("value", [1.0, -1.0, 0.0, 2.0])
def test_cond_and_switch_whose_branches_only_print(capfd, value):
    texts, results = {}, {}
    for platform in PLATFORMS:
        capfd.readouterr()
        results[platform] = np.asarray(on(platform, branchy, np.float32(value)))
        jax.effects_barrier()
        texts[platform] = capfd.readouterr().out
    assert texts["cpu"] and texts["metal"] == texts["cpu"]
    np.testing.assert_array_equal(results["metal"], results["cpu"])


def test_branches_that_only_print_under_vmap_and_grad(capfd):
    def f(x):
        lax.cond(x > 0, lambda: jax.debug.print("pos"), lambda: jax.debug.print("neg"))
        return x * x

    texts, values = {}, {}
    for platform in PLATFORMS:
        capfd.readouterr()
        xs = jax.device_put(np.array([1.0, -2.0, 3.0], np.float32), device(platform))
        values[platform] = (np.asarray(jax.jit(jax.vmap(f))(xs)), np.asarray(jax.jit(jax.vmap(jax.grad(f)))(xs)))
        jax.effects_barrier()
        texts[platform] = sorted(capfd.readouterr().out.splitlines())
    assert texts["cpu"] and texts["metal"] == texts["cpu"]
    for a, b in zip(values["metal"], values["cpu"]):
        np.testing.assert_allclose(a, b, rtol=1e-6)


# ---- checkify's primitives staged without checkify


def test_debug_check_without_checkify_is_a_no_op_as_on_cpu():
    def f(x):
        checkify.debug_check(x < 10, "too big")
        return x * 2

    for value in (1.0, 20.0):
        got = [np.asarray(on(p, f, np.float32(value))) for p in PLATFORMS]
        np.testing.assert_array_equal(got[1], got[0])


def test_check_without_checkify_is_refused_as_on_cpu():
    def f(x):
        checkify.check(x > 0, "x must be positive")
        return x * 2

    for platform in PLATFORMS:
        with pytest.raises(ValueError, match="functionaliz"):
            on(platform, f, np.float32(1))


def test_check_with_runtime_errors_raises_from_the_call_as_on_cpu():
    def f(x):
        checkify.check(x > 0, "x must be positive {}", x)
        return x * 2

    with jax_config("jax_experimental_unsafe_xla_runtime_errors", True):
        for platform in PLATFORMS:
            np.testing.assert_array_equal(np.asarray(on(platform, f, np.float32(3))), 6)
            with pytest.raises(Exception, match="x must be positive -1"):
                on(platform, f, np.float32(-1))
                jax.effects_barrier()


def test_checkify_transform_still_reports_on_metal():
    def f(x):
        checkify.check(x > 0, "x must be positive {}", x)
        return jnp.log(x)

    checked = jax.jit(checkify.checkify(f))
    for platform in PLATFORMS:
        err, out = checked(jax.device_put(np.float32(-2), device(platform)))
        assert "x must be positive -2" in str(err.get())

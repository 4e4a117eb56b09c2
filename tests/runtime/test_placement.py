"""One executable, two executors: what MPSGraph cannot run (float64, complex128, host-only ops) is placed on
the host, the rest on Metal, and the segment runner joins them. Here the host executor stands in for
Metal with the Mac's placement (JAX_METAL_EXECUTOR=placed, the default off macOS), so these tests see the
Mac's cuts, their order, and donation across them; results are compared with JAX's CPU backend."""

import ctypes
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import jax_metal_plugin
from jax_metal_plugin import tools
from jaxcompare import assert_reduction_close

pytestmark = pytest.mark.usefixtures("x64")


def placement(fn, *args):
    """[(executor, op line)] of the placed graph's top-level ops, and the segments' executors."""
    text = tools.mps_graph(fn, *args)
    ops = [(m.group(2), m.group(1)) for m in re.finditer(r"^  (%.*?)  @(metal|host)$", text, re.M)]
    segments = re.findall(r"^  -- segment \d+ on (metal|host)", text, re.M)
    return ops, segments, text


def executors_of(ops, kind):
    return {where for where, line in ops if re.search(rf"= {kind}\(", line)}


def on(device, fn, *args):
    return jax.jit(fn)(*jax.device_put(args, device))


def test_f32_matmul_on_metal_f64_matmul_on_host():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    ops, segments, _ = placement(lambda a: a @ a.T, a)
    assert executors_of(ops, "MatMul") == {"metal"} and segments == ["metal"]
    ops, segments, _ = placement(lambda a: a @ a.T, a.astype(np.float64))
    assert executors_of(ops, "MatMul") == {"host"} and segments == ["host"]


def test_mixed_program_cuts_once_each_way_and_matches_cpu(metal_device, cpu_device):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 16)).astype(np.float32)
    w = rng.standard_normal((16, 4)).astype(np.float32)

    def f(x, w):
        h = jnp.tanh(x @ w)  # float32: Metal
        total = jnp.sum(h.astype(jnp.float64) ** 2)  # an accurate float64 sum: host
        return h, total, h * total.astype(jnp.float32)  # float32 again: Metal

    ops, segments, _ = placement(f, x, w)
    assert segments == ["metal", "host", "metal"]
    assert executors_of(ops, "MatMul") == {"metal"} and executors_of(ops, "Tanh") == {"metal"}
    assert "metal" not in {where for where, line in ops if "f64" in line}
    h, total, scaled = on(metal_device, f, x, w)
    want = on(cpu_device, f, x, w)
    assert_reduction_close(h, want[0], magnitude=np.abs(x) @ np.abs(w), k=16, c=4.0)
    # The host segment read exactly what the Metal segment wrote.
    h64 = np.asarray(h, np.float64)
    assert_reduction_close(total, np.sum(h64**2), magnitude=np.sum(h64**2), k=h64.size)
    np.testing.assert_array_equal(np.asarray(scaled), np.asarray(h) * np.float32(total))


def test_loop_with_a_host_op_in_its_body_runs_on_the_host_whole(metal_device, cpu_device):
    x = np.linspace(-1, 1, 6, dtype=np.float32)

    def f(x):
        def body(i, c):
            return (c + jnp.sin(c.astype(jnp.float64)).astype(jnp.float32)) * 0.5

        return lax.fori_loop(0, 5, body, x) * 2.0

    ops, segments, _ = placement(f, x)
    assert executors_of(ops, "While") == {"host"}
    np.testing.assert_allclose(np.asarray(on(metal_device, f, x)), np.asarray(on(cpu_device, f, x)), rtol=1e-6)


def test_float32_loop_stays_on_metal():
    ops, segments, _ = placement(lambda x: lax.fori_loop(0, 3, lambda i, c: c * 2.0, x), np.ones(3, np.float32))
    assert executors_of(ops, "While") == {"metal"} and segments == ["metal"]


def test_grad_and_vmap_across_segments(metal_device, cpu_device):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 3)).astype(np.float32)

    def loss(x):
        y = jnp.exp(x)  # Metal
        z = jnp.log1p(y.astype(jnp.float64))  # host
        return jnp.sum(z.astype(jnp.float32) * y)  # Metal

    g = jax.grad(loss)
    np.testing.assert_allclose(np.asarray(on(metal_device, g, x)), np.asarray(on(cpu_device, g, x)), rtol=1e-5)
    v = jax.vmap(loss)
    np.testing.assert_allclose(np.asarray(on(metal_device, v, x)), np.asarray(on(cpu_device, v, x)), rtol=1e-5)


def test_donated_parameter_read_by_a_later_host_segment(metal_device, cpu_device):
    # The float32 update is computed first (Metal) and returned in the donated parameter's memory, while a
    # host segment still reads the parameter: the runner must not write over it early.
    def step(p):
        new_p = p * 0.5 + 1.0
        stat = jnp.sum(p.astype(jnp.float64) * 3.0)
        return new_p, stat

    p0 = np.arange(6, dtype=np.float32)
    want = on(cpu_device, step, p0)
    p = jax.device_put(p0, metal_device)
    got = jax.jit(step, donate_argnums=0)(p)
    np.testing.assert_array_equal(np.asarray(got[0]), np.asarray(want[0]))
    assert float(got[1]) == float(want[1]) == 45.0


def copy_count():
    lib = ctypes.CDLL(jax_metal_plugin.library_path())
    lib.jmp_pjrt_copy_count.restype = ctypes.c_int64
    return lib.jmp_pjrt_copy_count()


def test_segments_share_memory_without_copies(metal_device):
    @jax.jit
    def step(w, x):
        h = jnp.tanh(x @ w)
        scale = jnp.sqrt(jnp.sum(h.astype(jnp.float64) ** 2)).astype(jnp.float32)
        return w - 0.1 * (x.T @ h) / scale

    _, segments, _ = placement(step, np.ones((4, 4), np.float32), np.ones((8, 4), np.float32))
    assert segments.count("host") >= 1 and segments.count("metal") >= 1
    w = jax.device_put(np.eye(4, dtype=np.float32), metal_device)
    x = jax.device_put(np.ones((8, 4), np.float32), metal_device)
    w = step(w, x).block_until_ready()
    before = copy_count()
    for _ in range(3):
        w = step(w, x)
    w.block_until_ready()
    assert copy_count() == before


def test_x64_training_loop_matches_cpu(metal_device, cpu_device):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((32, 4))
    y = np.sin(x.sum(axis=1, keepdims=True))
    params = {"w1": rng.standard_normal((4, 16)) * 0.5, "w2": rng.standard_normal((16, 1)) * 0.5}

    def loss(p, x, y):
        h = jnp.tanh(x @ p["w1"])
        return jnp.mean((h @ p["w2"] - y) ** 2)

    @jax.jit
    def step(p, x, y):
        g = jax.grad(loss)(p, x, y)
        return jax.tree.map(lambda a, b: a - 0.1 * b, p, g)

    def train(device):
        p = jax.device_put(params, device)
        xs, ys = jax.device_put((x, y), device)
        for _ in range(20):
            p = step(p, xs, ys)
        return float(loss(p, xs, ys))

    got, want = train(metal_device), train(cpu_device)
    # Float64 throughout: 20 steps of sums over 32x16 terms stay within a few thousand ulps.
    assert abs(got - want) <= 1e-12 * max(1.0, abs(want))


def test_float64_truncated_normal_host_chain_is_one_segment(metal_device, cpu_device):
    # The clip bounds are nextafter(+-2): a float64 constant's bits through integer ops Metal can run and
    # back. Scheduled when Metal needs them, they keep erf_inv and the clip in one host segment (one fused
    # chain) instead of cutting it where the clip waits for the bounds.
    def f(key):
        return 0.5 * jax.random.truncated_normal(key, -2.0, 2.0, (64, 48), jnp.float64)

    key = jax.random.key(3)
    _, segments, text = placement(f, key)
    full = [body for body in re.split(r"^  -- segment ", text, flags=re.M)[1:] if "f64[64,48]" in body]
    assert len(full) == 1, segments  # erf_inv, the clip and the scaling: one segment, one chain
    assert re.search(r"= ErfInv\(|= Maximum\(.*f64\[64,48\]", full[0]) and "= Minimum(" in full[0]
    got = np.asarray(on(metal_device, f, key))
    want = np.asarray(on(cpu_device, f, key))
    # The same bits through erf_inv and a clip: a few ulps of erf_inv's polynomial, amplified near the
    # tails by its slope (|d erfinv/du| <= sqrt(pi)/2 * exp(erfinv(u)^2) ~ 48 at |x| = 2).
    np.testing.assert_allclose(got, want, rtol=0, atol=64 * 48 * np.finfo(np.float64).eps)
    assert np.all(np.abs(got) <= 1.0)

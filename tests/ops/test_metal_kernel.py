"""A user's Metal kernel as a JAX op (jax_metal_plugin.metal_kernel): the program carries the kernel
as one MetalKernel op in a Metal segment of its own with its reference as the fallback; here (no Mac)
the reference runs, under jit, vmap and grad, with the results JAX's CPU backend gives."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxcompare import assert_close

import jax_metal_plugin

SAXPY = "uint i = thread_position_in_grid.x; if (i < x_size) out[i] = a[0] * x[i] + y[i];"


def saxpy_reference(a, x, y):
    return (a[0] * x + y,)


def make_saxpy(**kwargs):
    return jax_metal_plugin.metal_kernel("saxpy", ["a", "x", "y"], ["out"], SAXPY, reference=saxpy_reference,
                                         **kwargs)


def call_saxpy(kernel, a, x, y):
    (out,) = kernel(a, x, y, grid=(x.size, 1, 1), threadgroup=(64, 1, 1), output_shapes=[x.shape],
                    output_dtypes=[x.dtype])
    return out


def inputs(n=100, seed=0):
    rng = np.random.default_rng(seed)
    return (np.array([1.5], np.float32), rng.standard_normal(n).astype(np.float32),
            rng.standard_normal(n).astype(np.float32))


def on(platform, fn, *args):
    dev = jax.devices(platform)[0]
    return np.asarray(jax.jit(fn)(*jax.device_put(args, dev)))


def test_jit_matches_cpu_and_the_kernel_is_a_metal_segment_of_its_own():
    kernel = make_saxpy()
    fn = lambda a, x, y: call_saxpy(kernel, a, x * 2, y) + 1  # noqa: E731
    args = inputs()
    assert_close(on("metal", fn, *args), on("cpu", fn, *args))
    assert_close(on("metal", fn, *args), 1.5 * (2 * args[1]) + args[2] + 1)
    text = jax_metal_plugin.mps_graph(fn, *args)
    kernel_lines = [line for line in text.splitlines() if "MetalKernel" in line]
    assert len(kernel_lines) == 1 and kernel_lines[0].rstrip().endswith("@metal")
    # The segment holding the kernel holds nothing else.
    segments = re.split(r"\n\s*-- segment", text)
    holding = [s for s in segments if "MetalKernel" in s]
    assert len(holding) == 1
    assert [line for line in holding[0].splitlines() if "@" in line and "= " in line] == kernel_lines


def test_the_generated_source_declares_buffers_types_and_shapes():
    kernel = make_saxpy()
    a, x, y = inputs(10)
    avals = [jax.ShapeDtypeStruct(v.shape, v.dtype) for v in (a, x, y)]
    src = kernel.msl(avals, [jax.ShapeDtypeStruct(x.shape, x.dtype)], (("T", np.float16), ("N", 4)))
    assert "[[kernel]] void saxpy(" in src
    assert "const device float* a [[buffer(0)]]" in src and "const device float* y [[buffer(2)]]" in src
    assert "device float* out [[buffer(3)]]" in src
    assert "uint3 thread_position_in_grid [[thread_position_in_grid]]" in src
    assert "constant constexpr uint x_size = 10;" in src and "constant constexpr uint out_shape[] = {10};" in src
    assert "using T = half;" in src and "constant constexpr int N = 4;" in src
    assert SAXPY in src


def test_vmap_sequential_runs_the_kernel_per_batch_member():
    kernel = make_saxpy()
    a = np.array([2.0], np.float32)
    xs = np.random.default_rng(1).standard_normal((3, 16)).astype(np.float32)
    y = np.ones(16, np.float32)
    fn = jax.vmap(lambda x: call_saxpy(kernel, a, x, y))
    expected = 2.0 * xs + 1.0
    assert_close(on("metal", fn, xs), expected)
    assert_close(on("cpu", fn, xs), expected)
    # Per batch member: the kernel runs inside a loop on the batch.
    assert "MetalKernel" in jax_metal_plugin.mps_graph(fn, xs)


def test_vmap_follows_the_users_rule():
    calls = []

    def rule(axis_size, in_batched, a, x, y):
        # The user knows their kernel takes a whole batch at once (here: through the reference).
        calls.append((axis_size, tuple(in_batched)))
        return (a[:, :1] * x + y,), [True]

    kernel = make_saxpy(vmap_method=rule)
    a = np.array([[1.0], [3.0]], np.float32)
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    y = np.ones((2, 4), np.float32)
    fn = jax.vmap(lambda a, x, y: call_saxpy(kernel, a, x, y))
    assert_close(on("metal", fn, a, x, y), a * x + y)
    assert calls == [(2, (True, True, True))]
    assert_close(on("cpu", fn, a, x, y), a * x + y)


def test_grad_uses_the_users_vjp():
    # A vjp that differs from the reference's own derivative proves which one grad used.
    def vjp(args, results, cotangents):
        a, x, y = args
        (ct,) = cotangents
        return jnp.zeros_like(a), 3.0 * ct, ct

    kernel = make_saxpy(vjp=vjp)
    args = inputs(32)
    loss = lambda a, x, y: jnp.sum(call_saxpy(kernel, a, x, y) ** 2)  # noqa: E731
    grad = jax.grad(loss, argnums=1)
    out = args[0][0] * args[1] + args[2]
    assert_close(on("metal", grad, *args), 3.0 * 2 * out, rtol=1e-5, atol=1e-5)
    assert_close(on("metal", grad, *args), on("cpu", grad, *args))
    # And under vmap of grad.
    batched = jax.vmap(grad, in_axes=(None, 0, None))
    xs = np.stack([args[1], -args[1]])
    assert_close(on("metal", batched, args[0], xs, args[2]), on("cpu", batched, args[0], xs, args[2]))


def test_numpy_reference_under_jit_and_vmap():
    kernel = jax_metal_plugin.metal_kernel(
        "square", ["x"], ["out"], "uint i = thread_position_in_grid.x; out[i] = x[i] * x[i];",
        numpy_reference=lambda x: np.square(np.asarray(x)))
    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    one = lambda x: kernel(x, grid=(4, 1, 1), threadgroup=(4, 1, 1), output_shapes=[(4,)],  # noqa: E731
                           output_dtypes=[np.float32])[0]
    assert_close(on("metal", one, x[0]), x[0] ** 2)
    assert_close(on("metal", jax.vmap(one), x), x ** 2)
    assert_close(on("cpu", jax.vmap(one), x), x ** 2)


def test_operands_metal_lacks_run_the_reference_on_the_host():
    with jax.enable_x64(True):
        kernel = jax_metal_plugin.metal_kernel("double", ["x"], ["out"], "out[0] = x[0] * 2;",
                                               reference=lambda x: (x * 2,))
        fn = lambda x: kernel(x, grid=(1, 1, 1), threadgroup=(1, 1, 1), output_shapes=[x.shape],  # noqa: E731
                              output_dtypes=[jnp.float32])[0]
        x = np.arange(3, dtype=np.float32)
        assert_close(on("metal", fn, x), x * 2)
        with pytest.raises(TypeError, match="float64"):
            kernel.msl([jax.ShapeDtypeStruct((3,), np.float64)], [jax.ShapeDtypeStruct((3,), np.float64)])


def test_bad_definitions_and_calls_are_clear_errors():
    with pytest.raises(ValueError, match="exactly one of reference"):
        jax_metal_plugin.metal_kernel("k", ["x"], ["y"], "")
    with pytest.raises(ValueError, match="distinct identifiers"):
        jax_metal_plugin.metal_kernel("k", ["x"], ["x"], "", reference=lambda x: (x,))
    kernel = jax_metal_plugin.metal_kernel("k", ["x"], ["y"], "", reference=lambda x: (x[:2],))
    x = np.zeros(4, np.float32)
    with pytest.raises(ValueError, match="three positive integers"):
        kernel(x, grid=(0, 1, 1), threadgroup=(1, 1, 1), output_shapes=[(4,)], output_dtypes=[np.float32])
    with pytest.raises(TypeError, match="the reference returns"):
        jax.jit(lambda x: kernel(x, grid=(4, 1, 1), threadgroup=(1, 1, 1), output_shapes=[(4,)],
                                 output_dtypes=[np.float32]))(x)

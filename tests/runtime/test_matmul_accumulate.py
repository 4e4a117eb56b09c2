"""A product whose one reader adds it to another value (a weight update w - lr * x^T g, a sum of two
products, a residual) is computed as one GEMM that accumulates into a copy of that value
(exec/host/host_plan_matmul.cc, FoldMatMulAccumulates). The same values as CPU in every form the pass takes or
refuses, float32 and float64, inside a loop, and the host profile shows no separate pass over the sum."""

import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from jaxcompare import check_reduction, jax_config, random_array

RNG = np.random.default_rng(11)
LR = 0.125


def _operands(dtype, batch=48, n_in=40, n_out=24):
    x = random_array(RNG, (batch, n_in), dtype)
    g = random_array(RNG, (batch, n_out), dtype)
    w = random_array(RNG, (n_in, n_out), dtype)
    v = random_array(RNG, (n_out, n_in), dtype)
    return x, g, w, v


def _magnitude_of_update(w, x, g):
    return np.abs(w) + LR * (np.abs(x).T @ np.abs(g))


FORMS = {
    # name: (function of (x, g, w, v), its terms' magnitude, contraction length + 1)
    "sgd_update": (lambda x, g, w, v: w - LR * (x.T @ g), lambda x, g, w, v: _magnitude_of_update(w, x, g), 49),
    "scaled_add": (lambda x, g, w, v: w + (x.T @ g) * -LR, lambda x, g, w, v: _magnitude_of_update(w, x, g), 49),
    "add_product_first": (lambda x, g, w, v: (x @ w) + g, lambda x, g, w, v: np.abs(x) @ np.abs(w) + np.abs(g), 41),
    "add_product_second": (lambda x, g, w, v: g + x @ w, lambda x, g, w, v: np.abs(x) @ np.abs(w) + np.abs(g), 41),
    # The second product's maker runs after the first's: the first becomes the second's addend.
    "two_products": (lambda x, g, w, v: x @ w + (g @ v) @ w,
                     lambda x, g, w, v: np.abs(x) @ np.abs(w) + (np.abs(g) @ np.abs(v)) @ np.abs(w), 24 + 40 + 1),
    # Refused: the product is read twice, or is a result itself; the addend is made after the product.
    "product_read_twice": (lambda x, g, w, v: (x @ w + g, jnp.sin(x @ w)),
                           # sin carries the product's error (it is 1-Lipschitz) and adds its own rounding
                           lambda x, g, w, v: (np.abs(x) @ np.abs(w) + np.abs(g), np.abs(x) @ np.abs(w) + 1), 41),
    "product_is_a_result": (lambda x, g, w, v: (x @ w + g, x @ w),
                            lambda x, g, w, v: (np.abs(x) @ np.abs(w) + np.abs(g), np.abs(x) @ np.abs(w)), 41),
    "addend_made_later": (lambda x, g, w, v: x @ w + jnp.cos(g) * 2,
                          lambda x, g, w, v: np.abs(x) @ np.abs(w) + 2 + 2 * np.abs(g), 41),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("form", sorted(FORMS))
def test_product_added_to_a_value_as_on_cpu(form, dtype):
    fn, magnitude, k = FORMS[form]
    with jax_config("jax_enable_x64", dtype == np.float64):
        check_reduction(fn, *_operands(dtype), k=k, magnitude=magnitude)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_weight_update_of_a_batched_and_a_transposed_product(dtype):
    with jax_config("jax_enable_x64", dtype == np.float64):
        xb = random_array(RNG, (3, 16, 12), dtype)
        gb = random_array(RNG, (3, 16, 10), dtype)
        wb = random_array(RNG, (3, 12, 10), dtype)
        check_reduction(lambda w, x, g: w - LR * jnp.einsum("bti,bto->bio", x, g), wb, xb, gb, k=17,
                        magnitude=lambda w, x, g: np.abs(w) + LR * np.einsum("bti,bto->bio", np.abs(x), np.abs(g)))
        # The gradient transposed straight back ((g^T x)^T), as jax.grad makes a weight's.
        x, g, w, _ = _operands(dtype)
        check_reduction(lambda w, x, g: w - LR * (g.T @ x).T, w, x, g, k=49,
                        magnitude=lambda w, x, g: _magnitude_of_update(w, x, g))


def test_sgd_loop_over_a_dense_layer_as_on_cpu():
    # The update inside a while body, which runs it over buffers bound once for every iteration.
    x = random_array(RNG, (64, 32), np.float32)
    y = random_array(RNG, (64, 8), np.float32)
    w0 = random_array(RNG, (32, 8), np.float32) * 0.1

    def train(w, x, y):
        def step(_, w):
            g = jax.grad(lambda w: 0.5 * jnp.sum((x @ w - y) ** 2) / x.shape[0])(w)
            return w - 0.05 * g
        return lax.fori_loop(0, 25, step, w)

    # Each step rounds a sum of 64 terms per gradient element; 25 contracting steps stay within
    # k = 25 * 65 terms of the weights' norm.
    check_reduction(train, w0, x, y, k=25 * 65, magnitude="normwise")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("make", ["sort", "cumsum"])
def test_addend_written_in_place_as_a_scan_output(make, dtype):
    # The addend is also a stacked output, made straight in its row of the scan's result, whose place
    # moves every iteration: the product must read it there each time, not where it was first bound.
    made = {"sort": lambda x: jnp.sort(x, axis=-1), "cumsum": lambda x: jnp.cumsum(x, axis=0)}[make]

    def f(xs, a, b):
        def body(c, x):
            u = made(x)
            return c + (a @ b + u), u
        return lax.scan(body, jnp.zeros(xs.shape[1:], xs.dtype), xs)

    with jax_config("jax_enable_x64", dtype == np.float64):
        xs, a, b = random_array(RNG, (6, 8, 16), dtype), random_array(RNG, (8, 12), dtype), random_array(RNG, (12, 16), dtype)
        # Six sums of a 12-term product, a cumsum of up to 8 terms and the carry.
        check_reduction(f, xs, a, b, k=6 * (12 + 8 + 1), magnitude="normwise")


PROFILED = textwrap.dedent("""
    import jax, jax.numpy as jnp, numpy as np
    rng = np.random.default_rng(0)
    x, g, w = (jax.device_put(rng.normal(size=s).astype(np.float32)) for s in [(64, 256), (64, 384), (256, 384)])
    jax.jit(lambda w, x, g: w - 0.01 * (x.T @ g))(w, x, g).block_until_ready()
""")


def test_the_update_makes_no_pass_of_its_own():
    out = subprocess.run([sys.executable, "-c", PROFILED], capture_output=True, text=True, cwd="/",
                         env=dict(os.environ, JAX_PLATFORMS="metal", JMP_HOST_PROFILE="1"), check=True).stderr
    ops = [line.split()[0] for line in out.splitlines() if line.startswith("  ")]
    assert "MatMul" in ops, out
    # No elementwise op or fused group over the 256x384 weight: the product's GEMM adds into it.
    assert not [line for line in out.splitlines() if line.startswith("  ") and "MatMul" not in line
                and ("98304" in line or "[256,384]" in line)], out

"""while, fori_loop, scan, cond and switch on metal against JAX's CPU backend."""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxcompare import check, check_reduction, random_array, run_on

RNG = np.random.default_rng(3)


def test_while_loop_with_captured_values():
    x = random_array(RNG, (4,), np.float32)
    scale = random_array(RNG, (4,), np.float32)

    def f(x, scale):
        def cond(c):
            return c[0] < 10

        def body(c):
            i, v = c
            return i + 1, jnp.tanh(v * scale) + 0.1  # scale is captured from outside the loop

        return lax.while_loop(cond, body, (0, x))

    check(f, x, scale)



def test_while_loop_carries_passed_through_read_or_not_after_the_loop():
    """A carry the body returns unchanged is read straight from the loop's input; after the loop it is
    copied to the loop's result only when something reads that result."""
    w = random_array(RNG, (64, 64), np.float32)
    x = random_array(RNG, (64,), np.float32)

    def loop(w, x):
        return lax.while_loop(lambda c: c[0] < 5, lambda c: (c[0] + 1, c[1], jnp.tanh(c[1][0] * c[2])), (0, w, x))

    check(lambda w, x: loop(w, x)[2], w, x)                           # w's result unread
    check(lambda w, x: loop(w, x), w, x)                              # read: returned
    check(lambda w, x: (lambda r: r[1].sum(0) + r[2])(loop(w, x)), w, x)  # read by an op
    check(lambda w, x: lax.scan(lambda h, wi: (jnp.tanh(wi[0] * h), None), x, jnp.stack([w, w.T]))[0], w, x)

def test_fori_loop_and_scan():
    x = random_array(RNG, (5, 3), np.float32)
    check(lambda x: lax.fori_loop(0, 7, lambda i, v: v * 0.9 + i, x), x)

    def rnn(xs):
        w = jnp.eye(3) * 0.5

        def step(h, x):
            h = jnp.tanh(h @ w + x)
            return h, h.sum()

        return lax.scan(step, jnp.zeros(3), xs)

    check(rnn, x)
    check(lambda x: lax.scan(lambda c, x: (c + x, c * x), jnp.zeros(3), x, reverse=True), x)


def test_nested_loops():
    def f(x):
        def outer(i, v):
            return lax.fori_loop(0, i, lambda j, w: w + j * 0.5, v)

        return lax.fori_loop(0, 4, outer, x)

    check(f, random_array(RNG, (3,), np.float32))


def test_cond_and_switch():
    x = random_array(RNG, (3,), np.float32)
    y = random_array(RNG, (3,), np.float32)
    check(lambda p, x, y: lax.cond(p, lambda: x + y, lambda: x * y), np.bool_(True), x, y)
    check(lambda p, x, y: lax.cond(p, lambda: x + y, lambda: x * y), np.bool_(False), x, y)
    branches = [lambda x: x + 1, lambda x: x * 2, lambda x: jnp.sin(x)]
    for i in [-1, 0, 1, 2, 5]:
        check(lambda i, x: lax.switch(i, branches, x), np.int32(i), x)


def test_cond_inside_loop_with_tuple_carry():
    def f(x):
        def body(i, c):
            a, b = c
            a = lax.cond(i % 2 == 0, lambda: a + b, lambda: a - 1.0)
            return a, b * 1.5

        return lax.fori_loop(0, 5, body, (x, x))

    check(f, random_array(RNG, (2, 2), np.float32))


def test_grad_through_scan():
    xs = random_array(RNG, (6, 4), np.float32)
    w = random_array(RNG, (4, 4), np.float32) * 0.3

    def loss(w, xs):
        def step(h, x):
            h = jnp.tanh(h @ w + x)
            return h, h

        _, hs = lax.scan(step, jnp.zeros(4), xs)
        return jnp.sum(hs ** 2)

    # Six steps of a 4-term product forwards and back, and the sum over steps: normwise.
    check_reduction(jax.grad(loss), w, xs, k=6 * (4 + 4) + 6, magnitude="normwise")


def test_grad_of_scan_over_stacked_layers():
    # A residual MLP whose layers are a scan over stacked parameters: the backward scan reads each
    # layer with dynamic_slice and accumulates each layer's gradient into an [L, ...] buffer with
    # dynamic_update_slice.
    n_layers, width, batch = 4, 16, 8
    params = {"w1": random_array(RNG, (n_layers, width, width), np.float32) * 0.3,
              "b1": random_array(RNG, (n_layers, width), np.float32) * 0.1,
              "w2": random_array(RNG, (n_layers, width, width), np.float32) * 0.3,
              "scale": random_array(RNG, (n_layers, width), np.float32, low=0.5, high=1.5)}
    x = random_array(RNG, (batch, width), np.float32)
    y = random_array(RNG, (batch, width), np.float32)

    def loss(p, x, y):
        def layer(h, lp):
            z = h * lax.rsqrt(jnp.mean(h * h, axis=-1, keepdims=True) + 1e-5) * lp["scale"]
            z = jax.nn.gelu(z @ lp["w1"] + lp["b1"])
            return h + z @ lp["w2"], jnp.sum(z)

        h, sums = lax.scan(layer, x, p)
        return jnp.mean((h - y) ** 2) + 1e-3 * jnp.sum(sums)

    def train(p, x, y):
        for _ in range(3):
            g = jax.grad(loss)(p, x, y)
            p = jax.tree.map(lambda a, b: a - 0.05 * b, p, g)
        return p, loss(p, x, y)

    # Four layers of 16-term products and means forwards and back, over a batch of 8; three steps of it.
    chain = n_layers * 4 * width + batch
    check_reduction(jax.grad(loss), params, x, y, k=chain, magnitude="normwise")
    check_reduction(train, params, x, y, k=3 * chain, magnitude="normwise")


def test_loop_carries_kept_written_in_place_and_swapped():
    # The host runs carries the body returns unchanged without copies and updates stacked buffers in
    # place; these loops mix every kind, including buffers a scatter updates while other carries read
    # them, carries that swap places, and a condition reading the updated buffer.
    xs = random_array(RNG, (6, 5, 4), np.float32)

    def scan_like(xs):
        def body(i, c):
            buf, other, w, swap_a, swap_b, stack = c
            row = jnp.tanh(xs[i] @ w[:4, :4]) + other[i]
            stack = lax.dynamic_update_slice(stack, row[None], (i, 0, 0))  # in place: only the update reads it
            new_buf = lax.dynamic_update_slice(buf, row[None] * 3, (i, 0, 0))
            old_row = buf[(i + 1) % xs.shape[0]]                           # the old value, read after the update
            other = other.at[i].add(stack[i] * 0.5)
            return new_buf, other, w, swap_b, swap_a + new_buf.sum() + old_row.sum(), stack
        init = (xs - 1, xs * 2, jnp.eye(6, dtype=xs.dtype), jnp.float32(1), jnp.float32(-1), jnp.zeros_like(xs))
        return lax.fori_loop(0, xs.shape[0], body, init)

    # The two scalar carries add up every step's buffer sum (up to 6 * 2 * 120 terms of the buffers'
    # magnitude); the buffers themselves each hold a 4-term product and a few additions.
    def carry_scale(xs):
        want = run_on("cpu", scan_like, xs)
        big = max(float(np.abs(want[k]).max()) for k in (0, 1, 5))
        return [np.abs(want[0]).max(), np.abs(want[1]).max(), 1.0, 6 * 2 * xs[0].size * big, 6 * 2 * xs[0].size * big,
                np.abs(want[5]).max()]

    step, total = 6 * (4 + 3), 6 * (4 + 3) + 2 * 120 + 6
    check_reduction(scan_like, xs, k=[step, step, step, total, total, step], magnitude=carry_scale)
    check_reduction(jax.grad(lambda xs: jnp.sum(scan_like(xs)[0] ** 2) + scan_like(xs)[3]), xs, k=6 * 2 * (4 + 3) + 120,
                    magnitude="normwise")

    def until_full(xs):
        def cond(c):
            return (c[1] < xs.shape[0]) & (jnp.max(c[0]) < 1e6)
        def body(c):
            buf, i = c
            return buf.at[i].set(xs[i] + jnp.sum(buf)), i + 1
        return lax.while_loop(cond, body, (jnp.zeros_like(xs), 0))

    check(until_full, xs)
    ys = check(lambda xs: lax.scan(lambda c, x: (c + x, (c * x, c)), jnp.zeros((5, 4), xs.dtype), xs), xs)
    assert ys[1][0].shape == (6, 5, 4)

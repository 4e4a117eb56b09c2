"""Operands the host plan reads where they lie instead of copying them (exec/host/host_plan_*.cc): a
dynamic slice of one block is a view of its data, a MatMul reads a transposed operand through BLAS's
transpose flag (also when the transpose rotates a batch-and-sequence matrix, as dot_general's weight
gradients do), and a transpose of a transpose is one transpose. Each must give what XLA:CPU gives, also
when the viewed data is then overwritten in place or the slice start is out of range."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from jaxcompare import check, check_reduction, random_array

RNG = np.random.default_rng(17)


def test_scan_over_stacked_layers_forward_and_grad():
    layers, dim, batch = 5, 48, 9
    w = random_array(RNG, (layers, dim, dim), np.float32) / np.sqrt(dim)
    b = random_array(RNG, (layers, dim), np.float32)
    x = random_array(RNG, (batch, dim), np.float32)

    def loss(w, b, x):
        def layer(h, wb):
            return jnp.tanh(h @ wb[0] + wb[1]), None
        h, _ = lax.scan(layer, x, (w, b))
        return jnp.sum(h * h)

    # A composite of products through the layers: normwise, k the terms along one path through them.
    check_reduction(jax.value_and_grad(loss, argnums=(0, 1, 2)), w, b, x, k=2 * layers * dim, magnitude="normwise")


@pytest.mark.parametrize("start", [-3, 0, 2, 4, 9])
def test_dynamic_slice_view_clamps_its_start(start):
    x = random_array(RNG, (5, 6, 7), np.float32)
    y = random_array(RNG, (7, 3), np.float32)
    check(lambda x, i: lax.dynamic_slice(x, (i, 0, 0), (1, 6, 7)) * 2.0, x, np.int32(start), exact=True)
    check_reduction(lambda x, y, i: lax.dynamic_slice(x, (i, 0, 0), (1, 6, 7)) @ y, x, y, np.int32(start), k=7)


@pytest.mark.parametrize("scale", [False, True])
def test_slice_of_data_then_overwritten_in_place(scale):
    # y.at[j].set(y[i]) in a loop, the update the slice itself or made from it: the row read must be
    # the old row, whether or not the update is written into y's own memory.
    def f(x):
        def body(k, x):
            i, j = k % 4, (k + 1) % 4
            y = -x
            row = lax.dynamic_slice(y, (i, 0), (1, 300))
            return lax.dynamic_update_slice(y, row * 0.5 if scale else row, (j, 0))
        return lax.fori_loop(0, 7, body, x)

    check(f, random_array(RNG, (4, 300), np.float32), exact=True)


def test_slice_of_a_fused_chain_and_int64_start():
    # The sliced data is made by an elementwise chain; the slice must see the whole chain's result.
    def f(x, i):
        y = jnp.exp(jnp.sin(x) * 0.5) + 1.0
        s = lax.dynamic_slice(y, (i, 0), (1, 4096))
        return s * jnp.cos(x[1:2]) + y[0:1]

    check(f, random_array(RNG, (3, 4096), np.float32), np.int32(2), rtol=2e-6)
    with jax.enable_x64(True):
        x, y = random_array(RNG, (3, 8), np.float64), random_array(RNG, (8, 2), np.float64)
        check_reduction(lambda x, y, i: lax.dynamic_slice(x, (i, 0), (1, 8)) @ y, x, y, np.int64(1), k=8)


def test_weight_gradient_contracting_batch_and_sequence():
    x = random_array(RNG, (4, 6, 10), np.float32)
    g = random_array(RNG, (4, 6, 3), np.float32)
    check_reduction(lambda x, g: jnp.einsum("btd,bte->de", x, g), x, g, k=4 * 6)
    check_reduction(lambda x, g: jnp.einsum("btd,bte->ed", x, g), x, g, k=4 * 6)
    w = random_array(RNG, (10, 3), np.float32)
    # A dense layer's gradients: x^T g for the weight, g w^T for the input.
    fn = jax.grad(lambda w, x: jnp.sum(jnp.sin(x @ w)), argnums=(0, 1))
    check_reduction(fn, w, x, k=2 * 4 * 6 * 10, magnitude="normwise")


def test_attention_heads_forward_and_grad():
    b, t, h, d = 2, 5, 3, 4
    q, k, v = (random_array(RNG, (b, t, h * d), np.float32) for _ in range(3))

    def attend(q, k, v):
        split = lambda a: a.reshape(b, t, h, d).transpose(0, 2, 1, 3)
        q, k, v = split(q), split(k), split(v)
        att = jax.nn.softmax(q @ k.transpose(0, 1, 3, 2), axis=-1)
        return (att @ v).transpose(0, 2, 1, 3).reshape(b, t, h * d)

    # Softmax weights are convex: each output is a sum of t terms each at most max |v| in size.
    check_reduction(attend, q, k, v, k=t * d, magnitude=float(np.abs(v).max()))
    fn = jax.grad(lambda q, k, v: jnp.sum(attend(q, k, v) ** 2), argnums=(0, 1, 2))
    check_reduction(fn, q, k, v, k=4 * t * d, magnitude="normwise")


@pytest.mark.parametrize("p1,p2", [((0, 2, 1, 3), (0, 1, 3, 2)), ((1, 0, 2, 3), (1, 0, 2, 3)),
                                   ((3, 1, 0, 2), (2, 0, 3, 1))])
def test_transpose_of_transpose(p1, p2):
    x = random_array(RNG, (2, 3, 4, 5), np.float32)
    check(lambda x: (jnp.transpose(jnp.transpose(x, p1), p2), jnp.transpose(x, p1)), x, exact=True)
    check(lambda x: jnp.transpose(jnp.transpose(x, p1), p2) + 1.0, x, exact=True)


def test_results_made_straight_in_their_outputs():
    # One value returned twice and reshaped, a loop's carries, and a donated input read after the
    # output that reuses its memory is made: each output must hold its own result.
    def f(x, y):
        z = jnp.sin(x) * y
        w = lax.fori_loop(0, 3, lambda i, c: (c[1] + 1.0, c[0] * 0.5), (z, x))
        return z, z.reshape(-1), w, x + z

    x, y = random_array(RNG, (37, 50), np.float32), random_array(RNG, (37, 50), np.float32)
    # Within rounding, not bit for bit: XLA:CPU's sin is its own polynomial, which JAX releases change.
    check(f, x, y)
    for platform in ("metal", "cpu"):
        dev = jax.devices(platform)[0]
        g = jax.jit(lambda x, y: (x * 2.0, jnp.cos(x) + y, x[::-1]), donate_argnums=(0,))
        out = g(jax.device_put(x, dev), jax.device_put(y, dev))
        np.testing.assert_array_equal(np.asarray(out[0]), x * 2.0)
        np.testing.assert_array_equal(np.asarray(out[2]), x[::-1])


def test_static_slices_of_one_block_read_in_place():
    # Rows and halves of a stacked array read where they lie: the data made by a fused chain or an input,
    # read again after a later op overwrites nothing, and a donated input whose memory an output reuses.
    def f(x):
        y = jnp.exp(jnp.sin(x) * 0.5)  # made whole before its halves are read
        top, bottom = y[0], y[1]
        return top * 2.0 - bottom, x[1, 1:3] + x[0, 0:2], y[:, ::2].sum(), x[2:3] * top

    x = random_array(RNG, (3, 4, 257), np.float32)
    check(f, x, rtol=2e-6, atol=1e-6)
    check(lambda x: lax.fori_loop(0, 5, lambda i, c: jnp.stack([c[1] * 0.5, c[0] + c[1]]), x), x[:2], exact=True)
    for platform in ("metal", "cpu"):
        g = jax.jit(lambda x: (x[0] * 3.0, x[1] + x[0]), donate_argnums=(0,))
        out = g(jax.device_put(x[:2], jax.devices(platform)[0]))
        np.testing.assert_array_equal(np.asarray(out[0]), x[0] * np.float32(3.0))
        np.testing.assert_array_equal(np.asarray(out[1]), x[1] + x[0])


def test_bernoulli_in_high_mode_matches_cpu():
    # Its threefry bits are made as one [2, n] array whose halves are then combined: read in place.
    key = jax.random.key(3)
    check(lambda k: jax.random.bernoulli(k, p=0.3, shape=(50_000,), mode="high"), key, exact=True)


def _block_of_a_folded_transpose(x, w, b, i):
    # A transpose read by a MatMul through BLAS's flag must still be made when a block of it is read.
    t = x.T
    return t @ w, jnp.sin(t[3:5])


def _block_of_a_product_written_transposed(x, w, b, i):
    # A product read as a block may be written neither transposed nor as the sum it is added to.
    p = x.T @ w
    return jnp.sin(p[1:3]), p.T * 2.0


def _block_of_a_product_added_to(x, w, b, i):
    p = x.T @ w
    return jnp.sin(p[1:3]), p + b


def _dynamic_block_of_a_product(x, w, b, i):
    p = x.T @ w
    return jnp.cos(lax.dynamic_slice(p, (i, i * 0), (1, 4))), p + b


BLOCK_READERS = {f.__name__[1:]: f for f in (_block_of_a_folded_transpose, _block_of_a_product_written_transposed,
                                             _block_of_a_product_added_to, _dynamic_block_of_a_product)}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("form", sorted(BLOCK_READERS))
def test_block_view_counts_as_a_reader_of_its_data(form, dtype):
    x, w = random_array(RNG, (6, 5), dtype), random_array(RNG, (6, 4), dtype)
    b = random_array(RNG, (5, 4), dtype)
    with jax.enable_x64(dtype == np.float64):
        check_reduction(BLOCK_READERS[form], x, w, b, np.int32(2), k=7, magnitude="normwise")


@pytest.mark.parametrize("n", [2049, 4096])
def test_bitcast_to_another_width_read_by_a_fused_group(n):
    # The bitcast is a view of its source's memory with another element count; the elementwise group
    # reading it must step through it by the view's own element size, tile after tile.
    rng = np.random.default_rng(5)
    x = rng.standard_normal(n).astype(np.float32)
    check(lambda x: lax.bitcast_convert_type(x, jnp.uint16) >> 1, x, exact=True)
    pairs = rng.standard_normal(2 * n).astype(np.float32).view(np.uint16).reshape(2 * n, 2)
    check(lambda a: jnp.where(a[:, 0] > 0, lax.bitcast_convert_type(a, jnp.float32) + 1.0, 0.5), pairs, exact=True)
    with jax.enable_x64(True):
        words = rng.standard_normal(n).view(np.uint32).reshape(n, 2)
        check(lambda w: lax.bitcast_convert_type(w, jnp.float64) + 1.0, words, exact=True)

"""Indexing, take, take_along_axis, embeddings and x.at[...] updates on metal against the CPU backend."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from jaxcompare import check, check_reduction, random_array, scatter_rows_with_body

RNG = np.random.default_rng(11)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16, jnp.int32, jnp.bool_], ids=lambda d: np.dtype(d).name)
def test_gather_patterns(dtype):
    x = random_array(RNG, (6, 5, 4), dtype)
    i = np.array([0, 5, 2, 2, -1, 7, -9], np.int32)  # negative and out-of-range indices: JAX's modes
    check(lambda x, i: x[i], x, i)
    check(lambda x, i: x[:, i % 5], x, i)
    check(lambda x, i: jnp.take(x, i, axis=2, mode="clip"), x, i)
    check(lambda x, i: jnp.take(x, i, axis=1, mode="fill", fill_value=0), x, i)
    j = (np.abs(RNG.integers(-9, 9, size=(6, 3, 4))) % 5).astype(np.int32)
    check(lambda x, j: jnp.take_along_axis(x, j, axis=1), x, j)
    check(lambda x: x[jnp.array([1, 3]), :, jnp.array([0, 2])], x)


def test_embedding_lookup_and_grad():
    table = random_array(RNG, (50, 8), np.float32)
    tokens = RNG.integers(0, 50, size=(4, 7)).astype(np.int32)
    tokens[0, :3] = 5  # duplicates: their gradients sum
    check(lambda t, ids: t[ids], table, tokens)
    # A row's gradient sums cos() over the row's occurrences (|cos| <= 1 each), in any order.
    count = np.bincount(tokens.ravel(), minlength=len(table))[:, None]
    check_reduction(jax.grad(lambda t, ids: jnp.sum(jnp.sin(t[ids]))), table, tokens, k=int(count.max()) + 1,
                    magnitude=lambda t, ids: count)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.int32], ids=lambda d: np.dtype(d).name)
def test_scatter_updates(dtype):
    x = random_array(RNG, (8, 3), dtype, -5, 5)
    i = np.array([1, 3, 3, 7, 9, -2], np.int32)  # a duplicate, an out-of-bounds and a negative index
    u = random_array(RNG, (6, 3), dtype, -5, 5)
    check_reduction(lambda x, i, u: x.at[i].add(u), x, i, u, k=3)  # duplicates add in either order
    check(lambda x, i, u: x.at[i].set(u, mode="drop")[jnp.array([0, 2, 4, 5, 6])], x, i, u)
    check(lambda x, i, u: x.at[i].max(u), x, i, u)
    check(lambda x, i, u: x.at[i].min(u), x, i, u)
    check(lambda x, i, u: x.at[i, 1].mul(u[:, 0]), x, i % 8, u)


def test_scatter_in_training_grads_and_vmap():
    logits = random_array(RNG, (16, 10), np.float32)
    labels = RNG.integers(0, 10, size=16).astype(np.int32)
    loss = lambda l, y: -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(l), y[:, None], axis=1))
    check(jax.grad(loss), logits, labels, rtol=1e-5, atol=1e-6)
    check(jax.vmap(lambda row, y: row[y]), logits, labels % 10)


GD, SD = lax.GatherDimensionNumbers, lax.ScatterDimensionNumbers
IDX = np.array([0, 3, 3, 7, 6, -1, 9], np.int32)  # duplicates, the last row, negative and past the end


@pytest.mark.parametrize("mode", ["clip", "fill", "drop", "promise_in_bounds"])
def test_every_mode_of_every_update(mode):
    x = random_array(RNG, (8, 5), np.float32)
    i = IDX if mode != "promise_in_bounds" else IDX % 8
    u = random_array(RNG, (7, 5), np.float32)
    if mode != "fill":
        check(lambda x, i: x.at[i].get(mode=mode), x, i)
    else:
        check(lambda x, i: x.at[i].get(mode="fill", fill_value=-7.0), x, i)
    # Updates landing on one row (up to 3, after clipping) combine in either order.
    check_reduction(lambda x, i, u: x.at[i].add(u, mode=mode), x, i, u, k=4)
    check_reduction(lambda x, i, u: x.at[i].multiply(u, mode=mode), x, i, u, k=4)
    check(lambda x, i, u: x.at[i].min(u, mode=mode), x, i, u)
    check(lambda x, i, u: x.at[i].max(u, mode=mode), x, i, u)
    # set: no two updates may land on one row (which one wins is unspecified), even after clipping.
    unique = np.array([0, 3, -2, 9, 1, 2, 5] if mode != "promise_in_bounds" else [0, 3, 6, 7, 1, 2, 5], np.int32)
    check(lambda x, i, u: x.at[i].set(u, mode=mode), x, unique, u)


def test_two_dim_points_and_slices():
    x = random_array(RNG, (8, 5), np.float32)
    check(lambda x, i: x[i % 8, (i + 1) % 5], x, IDX)
    check(lambda x, i: x.at[i, i - 3].get(mode="fill", fill_value=9.0), x, IDX)
    check(lambda x, i: x.at[i, i - 3].get(mode="clip"), x, IDX)
    check(lambda x, i: x.at[i, i].add(1.0), x, IDX)  # points outside either dim are dropped
    check(lambda x, i: x.at[i, :2].set(1.0), x, IDX)
    check(lambda x, i: x.at[i % 8, 1:4].add(2.0), x, IDX)
    check(jax.grad(lambda x, i: jnp.sum(x[i % 8, (i + 1) % 5] ** 2)), x, IDX)


def test_windows_clamped_and_dropped_whole():
    x = random_array(RNG, (8, 5), np.float32)
    # A gather window of 3 rows starting at 7 or 9 is clamped to start at 5.
    check(lambda x, i: lax.gather(x, i[:, None], GD(offset_dims=(1, 2), collapsed_slice_dims=(), start_index_map=(0,)),
                                  (3, 2)), x, IDX)
    # A scatter window that does not fit is skipped whole (rows 6..8 at index 6 too).
    dn = SD(update_window_dims=(1, 2), inserted_window_dims=(), scatter_dims_to_operand_dims=(0,))
    check(lambda x, i: lax.scatter_add(x, i[:, None], jnp.ones((7, 3, 5)), dn), x, IDX)
    # Windows narrower than an unindexed dim start at 0 there.
    check(lambda x, i: lax.scatter_add(x, i[:, None], jnp.ones((7, 3, 2)), dn), x, IDX)
    dn1 = SD(update_window_dims=(1, 2), inserted_window_dims=(), scatter_dims_to_operand_dims=(1,))
    check(lambda x, i: lax.scatter_mul(x, (i % 4)[:, None], jnp.full((7, 5, 2), 1.5, np.float32), dn1), x, IDX)
    # No index components at all: every window is the whole operand.
    none = SD(update_window_dims=(1, 2), inserted_window_dims=(), scatter_dims_to_operand_dims=())
    check(lambda x: lax.scatter_add(x, jnp.zeros((3, 0), jnp.int32), jnp.ones((3, 8, 5)), none), x)
    check(lambda x: lax.gather(x, jnp.zeros((3, 0), jnp.int32), GD(offset_dims=(1, 2), collapsed_slice_dims=(),
                                                                      start_index_map=()), (8, 3)), x)


def test_batched_indexing_segments_and_narrow_index_types():
    x = random_array(RNG, (4, 6, 5), np.float32)
    rows = np.array([[0, 1], [2, 3], [5, 5], [1, 0]], np.int32)
    check(jax.vmap(lambda x, i: x[i]), x, rows)
    check(jax.vmap(lambda x, i: x.at[i].add(1.0)), x, rows)
    check(jax.vmap(jax.vmap(lambda r, j: r[j], (0, None)), (None, 0)), x[0], rows % 5)
    data = random_array(RNG, (7, 3), np.float32)
    seg = np.array([0, 2, 2, 1, 3, 0, 2], np.int32)
    check_reduction(lambda d, s: jax.ops.segment_sum(d, s, num_segments=4), data, seg, k=3)
    check(lambda d, s: jax.ops.segment_max(d, s, num_segments=5), data, seg)
    check(lambda x, i: x[0][(i % 6).astype(jnp.uint8)], x, IDX)
    check(lambda x, i: x[0][(i % 6).astype(jnp.int16)], x, IDX)
    check(lambda i: jnp.bincount(jnp.abs(i), length=10), IDX)


def test_dynamic_slices_in_scans():
    x = random_array(RNG, (8, 5), np.float32)

    def body(c, j):
        window = lax.dynamic_slice(x, (j, 0), (2, 5))
        updated = lax.dynamic_update_slice(x, jnp.ones((1, 5), x.dtype), (j, 1))
        return c + window.sum(), updated[j]

    # The carry sums len(IDX) windows of 10 elements.
    n = len(IDX) * 10
    check_reduction(lambda i: lax.scan(body, jnp.float32(0), i), IDX, k=[n, 1],
                    magnitude=lambda i: [n * np.abs(x).max(), np.maximum(np.abs(x).max(), 1)])
    check(lambda x: lax.fori_loop(0, 5, lambda i, c: c.at[i].set(c[i - 1] * 2 + x[i]), jnp.zeros_like(x)), x)


def test_bool_updates_and_apply():
    x = random_array(RNG, (8, 5), np.float32)
    m = x > 0
    check(lambda m, i: m.at[i].max(jnp.ones((7, 5), bool)), m, IDX)
    check(lambda m, i: m.at[i].min(jnp.zeros((7, 5), bool)), m, IDX)
    check(lambda m, i: m.at[i].set(~m[:7]), m, np.array([0, 3, -2, 9, 1, 2, 5], np.int32))
    # apply: an element hit twice (index 3) gets the function twice, as XLA applies it per update.
    check(lambda x, i: x.at[i].apply(jnp.sin), x, IDX)
    check(lambda x, i: x.at[i].apply(jnp.exp, mode="clip"), x, IDX)
    check(lambda x: x.at[jnp.array([1, 4])].apply(jnp.tanh, unique_indices=True), x)


def test_unique_scatter_with_any_update_computation():
    x = random_array(RNG, (8, 5), np.float32)
    u = random_array(RNG, (3, 5), np.float32)
    idx = np.array([[1], [6], [9]], np.int32)  # 9 is dropped
    check(lambda x, i, u: scatter_rows_with_body(x, i, u, lambda a, b: a * b - jnp.sin(b)), x, idx, u)


def test_scatter_subtract_update():
    x = np.arange(20, dtype=np.float32).reshape(4, 5) / 3
    i = np.array([[0], [2], [0], [3]], np.int32)  # a repeated index: both updates subtract
    u = np.linspace(-2, 2, 20, dtype=np.float32).reshape(4, 5)
    dn = lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                     scatter_dims_to_operand_dims=(0,))
    check(lambda x, i, u: lax.scatter_sub(x, i, u, dn), x, i, u)
    check(lambda x, i, u: lax.scatter_sub(x, i, u, dn), x.astype(np.int32), i, (u * 5).astype(np.int32))
    check(lambda x, i, u: x.at[i[:, 0]].subtract(u), x, i, u)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.int32], ids=lambda d: np.dtype(d).name)
def test_scatter_into_a_scalar(dtype):
    # A rank-0 operand: the index vector is empty and every update lands on the one element.
    dn = lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(), scatter_dims_to_operand_dims=())
    idx = np.zeros((0,), np.int32)
    x, u = random_array(RNG, (), dtype), random_array(RNG, (), dtype)
    check(lambda x, u: (lax.scatter_add(x, idx, u, dn), lax.scatter_max(x, idx, u, dn), lax.scatter(x, idx, u, dn),
                        lax.scatter_mul(x, idx, u, dn), lax.scatter_min(x, idx, u, dn)), x, u)
    if dtype == jnp.float32:
        check(lambda x: lax.scatter_apply(x, idx, jnp.sin, dn), x)


def test_sparse_products_with_padding_indices():
    # BCOO padding: out-of-range indices whose values must be ignored; its sparse-sparse product
    # reduces into a scalar through a scatter.
    from jax.experimental import sparse

    def products(xd, xi, yd, yi):
        x_sp, y_sp = sparse.BCOO((xd, xi), shape=(5,)), sparse.BCOO((yd, yi), shape=(5,))
        return (x_sp @ y_sp).todense(), (y_sp @ x_sp).todense(), x_sp.sum(), x_sp.sum_duplicates(nse=5).todense()

    check(products, np.array([1, 2, 3, 100, 100], np.int32), np.array([[1], [2], [3], [5], [5]], np.int32),
          np.array([3, 2, 100, 100], np.int32), np.array([[2], [3], [5], [5]], np.int32))

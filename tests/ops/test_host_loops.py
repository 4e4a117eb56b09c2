"""Loops as the host executor runs them once bound (condition and body bound once per iteration parity,
small elementwise ops called straight) against JAX's CPU backend: every op and type with a small kernel
on edge values, trip counts of zero, one, odd and even, carries that swap, repeat or pass through,
donated carries, blocks at run-time indices, large carries in a small loop, and loops run on the
caller's thread after queued work."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from jaxcompare import check, run_on

INT_TYPES = [np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32]


def edge_values(dtype, n=19):
    """Edge values first (NaN, signed zeros, infinities, limits; integer limits and shift amounts past
    the width), then ordinary ones."""
    dtype = np.dtype(dtype)
    rng = np.random.default_rng(7)
    if dtype.kind == "f":
        # No result may be subnormal (XLA:CPU flushes those to zero, the host executor does not): the
        # large and small edges are far from the limits, and their products over- or underflow fully.
        big = 1e30 if dtype == np.float32 else 1e300
        edges = [np.nan, -0.0, 0.0, np.inf, -np.inf, big, -big, 1 / big, 1.5, -2.5, 3.0]
        rest = rng.uniform(-4, 4, n)
    else:
        ii = np.iinfo(dtype)
        bits = dtype.itemsize * 8
        edges = [ii.min, ii.max, 0, 1, bits - 1, bits, bits + 3] + ([-1] if dtype.kind == "i" else [])
        rest = rng.integers(max(ii.min, -40), min(ii.max, 57), n)
    return np.concatenate([np.array(edges, dtype), rest.astype(dtype)])[:n]


def elementwise_body(x, y, p):
    """Every op with a small kernel that this dtype has, on (x, y) and on (x, x rotated)."""
    xs = jnp.roll(x, -1)
    out = []
    for a, b in ((x, y), (x, xs)):
        out += [a + b, a - b, a * b, jnp.maximum(a, b), jnp.minimum(a, b),
                a == b, a != b, a < b, a <= b, a > b, a >= b, jnp.where(p, a, b), jnp.where(p[0], a, b), -a]
        if jnp.issubdtype(x.dtype, jnp.floating):
            out.append(a / b)
        else:
            out += [a & b, a | b, a ^ b, ~a, lax.shift_left(a, b), lax.shift_right_logical(a, b),
                    lax.shift_right_arithmetic(a, b)]
    out += [jnp.logical_and(p, ~p[::-1]), jnp.logical_or(p, p[::-1]), jnp.logical_xor(p, p[::-1]), ~p]
    return out


def loop_of(body, trips):
    """The results of `body(*args)` recomputed in each of `trips` iterations (inputs passed through)."""
    def f(*args):
        init = tuple(jnp.zeros_like(r) for r in jax.eval_shape(body, *args))

        def step(i, carry):
            return tuple(body(*args))
        return lax.fori_loop(0, trips, step, init)
    return f


@pytest.mark.parametrize("dtype", INT_TYPES + [np.float32])
def test_small_kernels_in_a_loop_match_cpu(dtype):
    x, y = edge_values(dtype), edge_values(dtype)[::-1].copy()
    p = (np.arange(19) % 3 != 0)
    check(loop_of(elementwise_body, 3), x, y, p, exact=True)


@pytest.mark.parametrize("dtype", [np.int64, np.uint64, np.float64])
def test_small_kernels_in_a_loop_match_cpu_x64(x64, dtype):
    x, y = edge_values(dtype), edge_values(dtype)[::-1].copy()
    p = (np.arange(19) % 3 != 0)
    check(loop_of(elementwise_body, 2), x, y, p, exact=True)


@pytest.mark.parametrize("trips", [0, 1, 2, 3, 8])
def test_trip_counts_and_carries_that_swap_repeat_and_pass_through(trips):
    """The last iteration's parity decides which buffer holds the result; carries that swap places,
    repeat another carry or pass through unchanged must come out as on cpu for any trip count, also one
    known only at run time."""
    a = np.arange(8, dtype=np.float32)
    b = -np.arange(8, dtype=np.float32) - 0.5

    def f(a, b, n):
        def body(i, c):
            x, y, z, w, k = c
            return y * 2.0, x + 1.0, x, w, k + i
        static = lax.fori_loop(0, trips, body, (a, b, a, b, jnp.int32(0)))
        dynamic = lax.fori_loop(0, n, body, (a, b, a, b, jnp.int32(0)))
        never = lax.while_loop(lambda c: c[0][0] > 1e9, lambda c: (c[1], c[0]), (a, b))
        return static, dynamic, never

    check(f, a, b, np.int32(trips), exact=True)


def test_while_loop_on_a_float_condition_and_bool_carry():
    def f(x):
        def cond(c):
            v, done, _ = c
            return jnp.logical_not(done)

        def body(c):
            v, done, k = c
            v = v * 1.5 + 0.25
            return v, v.sum() > 100.0, k + 1
        return lax.while_loop(cond, body, (x, False, 0))

    check(f, np.linspace(-1, 1, 5).astype(np.float32), exact=True)


def test_donated_carry_into_a_loop():
    x = np.linspace(0, 1, 16).astype(np.float32)

    def f(x):
        return lax.fori_loop(0, 5, lambda i, c: (c[0] * 0.5 + c[1], c[1] + 1.0), (x, x[::-1]))

    expected = run_on("cpu", f, x)
    metal = jax.devices("metal")[0]
    g = jax.jit(f, donate_argnums=0)
    for _ in range(3):  # the donated buffer is reused as the loop's carry, call after call
        arg = jax.device_put(x, metal)
        out = g(arg)
        for got, want in zip(out, expected):
            np.testing.assert_array_equal(np.asarray(got), want)


def test_blocks_at_run_time_indices_in_a_loop():
    """Ops reading or writing a block at an index computed in the body (dynamic slices, updates made
    in place in a carry, a scan's stacked outputs) find their buffers again every iteration."""
    xs = np.arange(24, dtype=np.float32).reshape(6, 4)

    def f(xs):
        def body(i, c):
            acc, buf = c
            row = lax.dynamic_slice(xs, (i, 0), (1, 4))[0]
            pair = lax.dynamic_slice(row, (jnp.minimum(i, 2),), (2,))
            buf = buf.at[i].set(row * 2.0 + pair.sum())
            return acc + row, buf
        loop = lax.fori_loop(0, 6, body, (jnp.zeros(4), jnp.zeros((6, 4))))
        scan = lax.scan(lambda c, x: (c + x, c * x), jnp.ones(4), xs)
        return loop, scan

    check(f, xs, exact=True)


@pytest.mark.parametrize("dtype", [np.int32, np.float32, np.float64])
def test_update_made_in_its_block_when_the_index_depends_on_it(dtype):
    """A carry's block written by an update the body makes is only made in the block when the block's
    index is known first: here the index is computed from the update itself (A[v] = v)."""
    def f(a):
        def body(i, a):
            u = ((i * 3 + 1) % 8).astype(a.dtype)
            return lax.dynamic_update_slice(a, u[None], (u.astype(jnp.int32),))
        return lax.fori_loop(0, 6, body, a)

    with jax.enable_x64(dtype == np.float64):
        check(f, np.zeros(8, dtype), exact=True)


def test_update_made_in_one_carry_indexes_another():
    """Two carries updated in place: the update of one is the index of the other's block. Making the
    second block's index early must not move the first update ahead of its own block's index."""
    def f(a, c, h):
        def body(i, carry):
            a, c, h = carry
            big = jnp.sin(h)  # made before the update it will be indexed by
            v = (i * 3 + 1) % 4
            a = lax.dynamic_update_slice(a, v[None], ((i + 2) % 4,))
            c = lax.dynamic_update_index_in_dim(c, big, v, 0)
            return a, c, h + 1.0
        return lax.fori_loop(0, 6, body, (a, c, h))

    check(f, np.zeros(4, np.int32), np.zeros((4, 8), np.float32), np.zeros(8, np.float32), rtol=2e-6)


def test_large_carries_in_a_loop():
    """A body over arrays large enough for the generic kernels (and fused groups) next to scalar
    bookkeeping with small kernels."""
    x = np.linspace(-2, 2, 6000).astype(np.float32)

    def f(x):
        def body(i, c):
            v, s = c
            v = jnp.where(v > 0, v * 0.75, v + 0.125) - 0.01 * i.astype(jnp.float32)
            return v, s + (v > 0).sum()
        return lax.fori_loop(0, 7, body, (x, jnp.int32(0)))

    check(f, x, exact=True)


def test_nested_loops_with_empty_inner_loops():
    def f(x):
        def outer(i, v):
            return lax.fori_loop(0, i % 3, lambda j, w: w * 0.5 + j, v) + i
        return lax.fori_loop(0, 7, outer, x)

    check(f, np.arange(4, dtype=np.float32), exact=True)


def test_a_loop_after_queued_work_sees_its_results():
    """A program with a cheap loop runs on the caller's thread when the queue is idle; after queued work
    it must wait for its argument like any other program."""
    metal = jax.devices("metal")[0]
    heavy = jax.jit(lambda a: ((a * 3.0 + 1.0) * 0.5 - a).reshape(-1, 8)[-1])  # exact in float32
    loop = jax.jit(lambda v: lax.fori_loop(0, 50, lambda i, c: c * 0.5 + v, v))
    a = np.linspace(-1, 1, 1 << 22).astype(np.float32)
    expected = run_on("cpu", lambda a: loop(heavy(a)), a)
    for _ in range(3):
        got = loop(heavy(jax.device_put(a, metal)))
        np.testing.assert_array_equal(np.asarray(got), expected)


@pytest.mark.parametrize("dtype, fill", [(np.float32, 0.0), (np.float32, -1.5), (np.int16, -3), (np.uint8, 7),
                                         (np.float16, 0.5), (np.bool_, True)])
def test_carries_that_start_as_splats(dtype, fill):
    """Carries initialised from constant splats (a scan's stacked outputs, zeros or not) that the loop
    writes only in part: the blocks it never writes keep the splat's value, for every element size."""
    x = np.arange(12).reshape(3, 4).astype(dtype)

    def f(x):
        def body(i, c):
            buf, acc = c
            buf = buf.at[2 * i].set(x[i])  # rows 0, 2, 4 of 7; the rest keep the fill
            return buf, acc
        init = (jnp.full((7, 4), fill, dtype), jnp.full((5,), fill, dtype))
        return lax.fori_loop(0, 3, body, init)

    run = jax.jit(f)
    for _ in range(2):  # a second run finds the carries' buffers filled again, not left from the first
        check(run, x, exact=True)


def test_grad_and_vmap_of_a_scan_over_stacked_weights():
    """A scan over stacked per-layer weights (stacked outputs zero-initialised and written in place, the
    weights passed through), its gradient (the stacked weight gradient made in place, block by block)
    and its vmap, against the CPU."""
    from jaxcompare import check_reduction
    rng = np.random.default_rng(3)
    w = rng.normal(size=(6, 8)).astype(np.float32) * 0.5
    x = rng.normal(size=(8,)).astype(np.float32)

    def loss(w, x):
        def layer(h, wl):
            h = jnp.tanh(h * wl + 0.25)
            return h, h * 2.0
        h, ys = lax.scan(layer, x, w)
        return h.sum() + ys.sum()

    # Each gradient element is a chain of 6 layers' products and sums: a few dozen roundings each.
    check_reduction(jax.grad(loss, argnums=(0, 1)), w, x, k=64, magnitude="normwise")
    check_reduction(jax.vmap(loss, in_axes=(None, 0)), w, np.stack([x, -x, 0.5 * x]), k=64, magnitude="normwise")

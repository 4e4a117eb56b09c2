"""Which runs the calling thread does inside the call, and which it queues: a cheap program may run
inline (as XLA:CPU runs its cheap ones), but one whose work the executor cannot bound small (a loop of
many costly iterations, or of a trip count that depends on data) is queued and the call returns at once,
as asynchronous dispatch promises. Queued runs keep their order, donation and callbacks as inline ones
do. `inline_runs` (jax_metal_plugin.stats()) counts the runs done inside the call."""

import time

import jax
import jax.numpy as jnp
import jax_metal_plugin
import numpy as np
import pytest
from jax import lax

from jaxcompare import assert_close, check, device

N = 64


def matrix(seed, scale=0.05, dtype=np.float32):
    # Small entries: tanh(c @ c) stays finite and well away from saturation for any trip count.
    return np.random.default_rng(seed).uniform(-scale, scale, (N, N)).astype(dtype)


def tanh_loop(iterations):
    return lambda x: lax.fori_loop(0, iterations, lambda i, c: jnp.tanh(c @ c), x)


def inline_runs():
    return jax_metal_plugin.stats()["inline_runs"]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_long_loop_returns_before_its_run_is_done(dtype, request):
    # 20000 products of 64x64 matrices: a fraction of a second to seconds here, of which the call must
    # take under a fifth. Run inline, the call would take the whole run every time; queued, it takes
    # a dispatch. Up to three tries, so that a moment of the caller's thread descheduled on a loaded
    # machine cannot fail it. In float64 the loop is a host segment on a Mac too.
    if dtype == np.float64:
        request.getfixturevalue("x64")
    f = jax.jit(tanh_loop(20000))
    x = jax.device_put(matrix(0, dtype=dtype), device("metal"))
    f(x).block_until_ready()  # compiled, and the queue idle
    before = inline_runs()
    tries = []
    for _ in range(3):
        start = time.perf_counter()
        y = f(x)
        returned = time.perf_counter() - start
        y.block_until_ready()
        done = time.perf_counter() - start
        tries.append((returned, done))
        if returned < 0.2 * done:
            break
    assert any(r < 0.2 * d for r, d in tries), f"call returned after (call s, run s) {tries}"
    assert inline_runs() == before, "the long loop ran on the calling thread"
    assert np.all(np.isfinite(np.asarray(y)))


def test_a_cheap_loop_runs_inline_and_right():
    # The fori-loop benchmark's loop: a thousand iterations on 8 floats, cheaper than two thread handoffs.
    fn = lambda x: lax.fori_loop(0, 1000, lambda i, c: c * 0.999 + 1.0, x)  # noqa: E731
    x = np.linspace(-1, 1, 8, dtype=np.float32)
    check(fn, x, rtol=1000 * 4 * np.finfo(np.float32).eps)
    f = jax.jit(fn)
    xm = jax.device_put(x, device("metal"))
    f(xm).block_until_ready()
    before = inline_runs()
    for _ in range(10):
        f(xm).block_until_ready()
    # The queue's thread may still be finishing its bookkeeping when a result is ready, and then the
    # next call queues: most calls, not all, run inline.
    assert inline_runs() > before, "no call of the cheap loop ran on the calling thread"


def test_a_loop_of_unknown_trip_count_is_queued():
    def fn(x, n):
        return lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * 0.5 + 1.0), (0, x))[1]

    x = np.ones(8, np.float32)
    check(fn, x, np.int32(5))
    f = jax.jit(fn)
    args = jax.device_put((x, np.int32(5)), device("metal"))
    f(*args).block_until_ready()
    before = inline_runs()
    for _ in range(3):
        f(*args).block_until_ready()
    assert inline_runs() == before


def test_queued_runs_keep_order_donation_and_callbacks():
    # A contraction (products with a small matrix) to a fixed point of entries near tanh(0.5): the
    # result is far from the buffer's earlier contents, and errors do not grow with the trip count.
    w = matrix(2, scale=0.01)
    # Long enough (tens of ms) that the two calls after it are made while it still runs: a run
    # finished by then leaves the queue idle, and the next call may run inline.
    loop = lambda x: lax.fori_loop(0, 200_000, lambda i, c: jnp.tanh(c @ w + 0.5), x)  # noqa: E731
    dev = device("metal")
    long = jax.jit(loop, donate_argnums=0)
    add_one = jax.jit(lambda y: y + 1.0)
    seen = []

    def record(v):
        seen.append(np.asarray(v).copy())

    @jax.jit
    def with_callback(y):
        jax.debug.callback(record, y)
        return y * 2.0

    x0 = matrix(1)
    expected = np.asarray(jax.jit(loop)(jax.device_put(x0, device("cpu"))))
    long(jax.device_put(x0, dev)).block_until_ready()  # compiled
    before = inline_runs()
    x = jax.device_put(x0, dev)
    y = long(x)  # queued; x is donated to it
    assert x.is_deleted()
    z = add_one(y)  # queued behind the loop, reading its result
    w2 = with_callback(y)  # a callback program completes before its call returns, after the loop
    assert len(seen) == 1, "the callback had not run when its call returned"
    assert inline_runs() - before <= 1, "the loop ran on the calling thread"  # only the callback's may
    # Each entry's error stays within a few roundings of the fixed point (the map contracts by 0.64).
    tol = dict(rtol=0, atol=64 * np.finfo(np.float32).eps)
    assert_close(seen[0], expected, **tol, what="the callback saw the loop's result")
    assert_close(np.asarray(y), expected, **tol, what="the loop's result")
    assert_close(np.asarray(z), expected + 1.0, **tol, what="the run queued after the loop")
    assert_close(np.asarray(w2), expected * 2.0, **tol, what="the callback program's result")

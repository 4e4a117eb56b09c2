"""Buffer donation on the metal device: JAX lowers it (no "not usable" warning), the runtime consumes
the donated arrays (deleted afterwards, every use raises) and reuses their memory for the results, with
the same results and the same errors as JAX's CPU backend."""

import threading
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax_metal_plugin._jax_internals import mlir

from jaxcompare import abs_inputs, assert_close, assert_reduction_close, device, init_mlp, run_in_threads

NOT_USABLE = "donated buffers were not usable"


def run_donating(platform, fn, args, donate_argnums):
    """fn jitted with donation on `platform`; returns (results as numpy, the argument arrays, warnings)."""
    args = jax.device_put(args, device(platform))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = jax.jit(fn, donate_argnums=donate_argnums)(*args)
        out = jax.tree.map(np.asarray, out)
    return out, args, [str(w.message) for w in caught]


def check_donating(fn, args, donate_argnums, k=None):
    """Same results as on CPU, no "not usable" warning, and the donated arguments deleted, as on CPU.
    With k, results that sum up to k terms compare within the rounding of such sums (assert_reduction_close,
    the magnitude being fn of the arguments' absolute values)."""
    expected, cpu_args, _ = run_donating("cpu", fn, args, donate_argnums)
    actual, metal_args, caught = run_donating("metal", fn, args, donate_argnums)
    assert not [w for w in caught if NOT_USABLE in w], caught
    what = getattr(fn, "__name__", str(fn))
    if k is None:
        assert_close(actual, expected, what=what)
    else:
        magnitude = run_donating("cpu", fn, jax.tree.map(lambda a: abs_inputs(a)[0], args), ())[0]
        assert_reduction_close(actual, expected, jax.tree.leaves(magnitude), k, what=what)
    cpu_deleted = [a.is_deleted() for a in jax.tree.leaves(cpu_args)]
    metal_deleted = [a.is_deleted() for a in jax.tree.leaves(metal_args)]
    assert metal_deleted == cpu_deleted
    return metal_args


def test_metal_is_a_platform_with_donation():
    assert "metal" in mlir._platforms_with_donation


def test_lowering_for_metal_marks_donated_arguments():
    x = jax.device_put(np.ones((2, 3), np.float32), device("metal"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        text = jax.jit(lambda a, b, c: (a * 2, jnp.sum(b) + c.ravel()), donate_argnums=(0, 1)).lower(
            x, x, np.ones(6, np.float32)).as_text()
    assert not [w for w in caught if NOT_USABLE in str(w.message)]
    assert "tf.aliasing_output = 0" in text
    assert "jax.buffer_donor = true" in text


RNG = np.random.default_rng(0)
A = RNG.normal(size=(8, 16)).astype(np.float32)
B = RNG.normal(size=(8, 16)).astype(np.float32)
I = RNG.integers(-100, 100, size=(8, 16)).astype(np.int32)

CASES = {
    # name: (fn, args, donate_argnums[, the number of terms a result sums])
    "update": (lambda w, g: w - 0.1 * g, (A, B), 0),
    "both_donated": (lambda w, g: (w - 0.1 * g, g * 0.9), (A, B), (0, 1)),
    "swap": (lambda a, b: (b, a), (A, B), (0, 1)),
    "identity_and_more": (lambda a: (a, a * 2, jnp.sum(a)), (A,), 0, [1, 1, A.size]),
    "view_of_donated": (lambda a: (a + 1, a.reshape(16, 8), a.T), (A,), 0),
    "read_after_overwrite": (lambda a, b: (b @ a.T, a + b), (A, B), 0, [A.shape[1], 1]),
    "buffer_donor_reshape": (lambda a: (a.reshape(16, 8) * 3,), (A,), 0),
    "buffer_donor_other_dtype": (lambda a, i: (a * 2, (i * 3).astype(jnp.float32).reshape(128)), (A, I), (0, 1)),
    "int_update": (lambda i: i * 3 - 7, (I,), 0),
    "pytree": (lambda p, g: jax.tree.map(lambda a, b: a - b, p, g), ({"w": A, "b": B[0]}, {"w": B, "b": A[0]}), 0),
    "scan_carry": (lambda c, xs: jax.lax.scan(lambda c, x: (c * 0.5 + x, c.sum()), c, xs), (A[0], A), 0,
                   2 * len(A) + A.shape[1]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_donated_results_match_cpu(name):
    fn, args, donate_argnums, *k = CASES[name]
    donated = check_donating(fn, args, donate_argnums, *k)
    assert any(a.is_deleted() for a in jax.tree.leaves(donated))


@pytest.mark.parametrize("fn, shapes", [
    (lambda a, b: a @ b, [(8, 16), (16, 4)]),            # no result of a donor's size
    (lambda a, b: (a + 1, b[0]), [(8, 16), (8, 16)]),   # one result for two donors of its size
], ids=["none_fits", "one_of_two_fits"])
def test_donors_without_a_result_of_their_size_stay_alive(fn, shapes):
    # XLA consumes a jax.buffer_donor only where a result of its size is left to take its memory; the
    # others live on (JAX warns they were not usable). Which ones, as on CPU.
    args = [RNG.integers(-8, 8, size=s).astype(np.float32) for s in shapes]  # exact products
    deleted = {}
    for platform in ("cpu", "metal"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out, placed, _ = run_donating(platform, fn, args, (0, 1))
        deleted[platform] = [a.is_deleted() for a in placed]
        assert_close(out, fn(*args), exact=True, what=platform)
    assert deleted["metal"] == deleted["cpu"]
    assert not all(deleted["metal"])


def error_of(thunk):
    """The exception thunk() raises (None if it returns): what the installed JAX does, to compare."""
    try:
        thunk()
    except Exception as e:  # noqa: BLE001 - compared by the caller
        return e
    return None


def test_donated_array_is_deleted_and_every_use_raises():
    # Every use of a donated array raises the error it raises on the CPU backend (JAX words the message;
    # its text changes between releases, so the type and the array's deletion are what is compared).
    f = jax.jit(lambda a: a * 2, donate_argnums=0)
    uses = {"to numpy": np.asarray, "jit": lambda a: jax.jit(lambda a: a + 1)(a), "op": lambda a: a + 1,
            "donating it again": f, "block_until_ready": lambda a: a.block_until_ready()}
    donated = {}
    for platform in ("cpu", "metal"):
        x = jax.device_put(np.arange(6, dtype=np.float32), device(platform))
        y = f(x)
        assert x.is_deleted() and not y.is_deleted(), platform
        np.testing.assert_array_equal(np.asarray(y), np.arange(6, dtype=np.float32) * 2)
        donated[platform] = x
    for name, use in uses.items():
        want, got = error_of(lambda: use(donated["cpu"])), error_of(lambda: use(donated["metal"]))
        assert want is not None, f"{name}: the CPU backend allows it"
        assert type(got) is type(want), f"{name}: metal raised {got!r}, the CPU backend {want!r}"
        assert str(got), name
    x = donated["metal"]
    x.delete()  # deleting a donated array is harmless, twice too
    x.delete()
    assert x.is_deleted()
    # The result lives on: it is what the next step donates.
    y = jax.device_put(np.arange(6, dtype=np.float32) * 2, device("metal"))
    y = f(y / 2)  # a result of a donating run
    z = f(y)
    assert y.is_deleted()
    np.testing.assert_array_equal(np.asarray(z), np.arange(6, dtype=np.float32) * 4)


def test_use_after_delete_and_double_delete_raise_like_cpu():
    for platform in ("cpu", "metal"):
        x = jax.device_put(np.ones(3, np.float32), device(platform))
        x.delete()
        x.delete()
        assert x.is_deleted()
        with pytest.raises(RuntimeError, match="deleted"):
            np.asarray(x)
        with pytest.raises(RuntimeError, match="deleted"):
            jax.jit(lambda v: v + 1, donate_argnums=0)(x)


def test_arguments_not_donated_stay_alive():
    f = jax.jit(lambda a, b: a + b, donate_argnums=1)
    x, y = jax.device_put((np.ones(4, np.float32), np.ones(4, np.float32)), device("metal"))
    out = f(x, y)
    assert not x.is_deleted() and y.is_deleted()
    np.testing.assert_array_equal(np.asarray(x), np.ones(4, np.float32))
    np.testing.assert_array_equal(np.asarray(out), np.full(4, 2, np.float32))
    # Without donate_argnums nothing is consumed.
    z = jax.jit(lambda a: a * 2)(x)
    assert not x.is_deleted()
    np.testing.assert_array_equal(np.asarray(z), np.full(4, 2, np.float32))


def test_unusable_donation_warns_and_keeps_the_array_like_cpu():
    # No result of that size: JAX warns on every platform with donation, and nothing is consumed.
    for platform in ("cpu", "metal"):
        x = jax.device_put(np.ones(4, np.float32), device(platform))
        with pytest.warns(UserWarning, match=NOT_USABLE):
            out = jax.jit(lambda a: jnp.sum(a), donate_argnums=0)(x)
        assert float(out) == 4.0
        assert not x.is_deleted()


def test_same_array_donated_and_used_twice_is_an_error_like_cpu():
    errors = {}
    for platform in ("cpu", "metal"):
        x = jax.device_put(np.ones(4, np.float32), device(platform))
        with pytest.raises(Exception) as info:
            jax.jit(lambda a, b: a + b, donate_argnums=0)(x, x)
        errors[platform] = info.value
        assert "INVALID_ARGUMENT" in str(info.value) and "donate" in str(info.value), str(info.value)
        # Nothing was consumed: the array is still there and usable.
        assert not x.is_deleted()
        np.testing.assert_array_equal(np.asarray(x + 1), np.full(4, 2, np.float32))
    assert type(errors["metal"]) is type(errors["cpu"])
    # Passed twice without donation, it is simply read twice.
    x = jax.device_put(np.ones(4, np.float32), device("metal"))
    np.testing.assert_array_equal(np.asarray(jax.jit(lambda a, b: a + b)(x, x)), np.full(4, 2, np.float32))


def test_donated_memory_is_reused_in_place():
    dev = device("metal")
    f = jax.jit(lambda w, g: w - 0.5 * g, donate_argnums=0)
    w = jax.device_put(np.ones((64, 64), np.float32), dev)
    g = jax.device_put(np.ones((64, 64), np.float32), dev)
    w = f(w, g)
    w.block_until_ready()
    pointer = w.unsafe_buffer_pointer()
    before = dev.memory_stats()
    w2 = f(w, g)
    w2.block_until_ready()
    after = dev.memory_stats()
    assert w.is_deleted()
    assert w2.unsafe_buffer_pointer() == pointer  # the result is the donated buffer
    assert after["num_allocs"] == before["num_allocs"]  # and nothing was allocated
    assert after["bytes_in_use"] == before["bytes_in_use"]
    np.testing.assert_array_equal(np.asarray(w2), np.zeros((64, 64), np.float32))
    stats = f.lower(w2, g).compile().memory_analysis()
    assert stats.alias_size_in_bytes == 64 * 64 * 4
    assert stats.argument_size_in_bytes == 2 * 64 * 64 * 4


def test_donation_after_queued_reads_of_the_same_buffer():
    # Work queued before the donation reads the buffer's old contents, though the donating run writes
    # over it in place.
    dev = device("metal")
    x_host = RNG.normal(size=(128, 128)).astype(np.float32) / 8
    slow = jax.jit(lambda a: jnp.tanh(a @ a @ a @ a).sum(axis=0))
    overwrite = jax.jit(lambda a: a * 0 - 1, donate_argnums=0)
    expected = np.asarray(slow(jax.device_put(x_host, device("cpu"))))
    a = np.abs(x_host.astype(np.float64))
    magnitude = np.sum(a @ a @ a @ a, axis=0)  # tanh's slope is at most 1
    k = 3 * 128 + 128 + 2
    for _ in range(20):
        x = jax.device_put(x_host, dev)
        reads = [slow(x) for _ in range(3)]
        copy = jax.device_put(x, dev, may_alias=False)
        y = overwrite(x)
        for r in reads:
            assert_reduction_close(np.asarray(r), expected, magnitude, k)
        np.testing.assert_array_equal(np.asarray(copy), x_host)
        np.testing.assert_array_equal(np.asarray(y), np.full_like(x_host, -1))


def test_host_reads_racing_a_donation_see_the_old_contents_or_a_deleted_array():
    # A copy to host that started before the donation finishes before the donating run writes over the
    # buffer; one that starts after it finds the array deleted. (A smoke test: the GIL makes the exact
    # interleaving rare, so it does not reliably catch a missing wait.)
    dev = device("metal")
    overwrite = jax.jit(lambda a: a * 0 - 1, donate_argnums=0)
    shape = (256, 512)
    for k in range(30):
        x = jax.device_put(np.full(shape, k, np.float32), dev)
        x.block_until_ready()
        seen, started = [], threading.Event()

        def read(x=x, seen=seen, started=started):
            started.set()
            try:
                seen.append(np.asarray(x))
            except RuntimeError as e:  # the donation came first
                assert "deleted" in str(e)

        reader = threading.Thread(target=read)
        reader.start()
        started.wait()
        y = overwrite(x)
        reader.join()
        for s in seen:
            assert (s == k).all(), f"step {k}: a host read saw values written after the donation"
        assert (np.asarray(y) == -1).all()


def mlp_loss(params, x, y):
    h = x
    for w, b in params[:-1]:
        h = jax.nn.relu(h @ w + b)
    w, b = params[-1]
    return jnp.mean((h @ w + b - y) ** 2)


def sgd_step(params, momentum, x, y):
    loss, grads = jax.value_and_grad(mlp_loss)(params, x, y)
    momentum = jax.tree.map(lambda m, g: 0.9 * m + g, momentum, grads)
    params = jax.tree.map(lambda p, m: p - 0.01 * m, params, momentum)
    return params, momentum, loss


def train(platform, steps, check_memory=False):
    dev = device(platform)
    rng = np.random.default_rng(1)
    x = jax.device_put(rng.normal(size=(64, 8)).astype(np.float32), dev)
    y = jax.device_put(np.sin(np.asarray(x).sum(axis=1, keepdims=True)), dev)
    params = jax.device_put(init_mlp(jax.random.key(0), [8, 32, 32, 1]), dev)
    momentum = jax.tree.map(jnp.zeros_like, params)
    step = jax.jit(sgd_step, donate_argnums=(0, 1))
    losses, usage = [], []
    for i in range(steps):
        old = params
        with warnings.catch_warnings():
            warnings.filterwarnings("error", message=".*" + NOT_USABLE)
            params, momentum, loss = step(params, momentum, x, y)
        assert all(p.is_deleted() for p in jax.tree.leaves(old))
        losses.append(loss)
        if check_memory and i in (50, steps - 1):
            params[0][0].block_until_ready()
            usage.append(dev.memory_stats())
    return jax.tree.map(np.asarray, params), np.asarray(losses), usage


def test_training_loop_with_donated_params_matches_cpu_and_memory_stays_flat():
    steps = 400
    metal_params, metal_losses, usage = train("metal", steps, check_memory=True)
    cpu_params, cpu_losses, _ = train("cpu", steps)
    assert metal_losses[-1] < metal_losses[0] * 0.5
    assert_close(metal_losses, cpu_losses, rtol=2e-3, atol=1e-5)
    # 400 momentum steps carry each step's rounding differences forward: they grow with the weights'
    # scale, not with each weight's own size, so a weight that passes near zero is compared against its
    # array's norm (a wrong update or a lost donation is off by the norm itself, not by 2e-3 of it).
    for m, c in zip(jax.tree.leaves(metal_params), jax.tree.leaves(cpu_params)):
        assert np.max(np.abs(m - c)) <= 2e-3 * np.max(np.abs(c)), np.max(np.abs(m - c)) / np.max(np.abs(c))
    middle, end = usage
    # Between the two readings, steps 51 .. steps-1 each kept one float32 loss alive, and nothing else.
    kept = steps - 1 - 50
    assert end["bytes_in_use"] - middle["bytes_in_use"] <= 4 * kept, (middle, end)
    # Params and momentum are written in place: each step allocates only its loss.
    assert end["num_allocs"] - middle["num_allocs"] <= kept, (middle, end)


def test_donating_loops_on_four_threads():
    f = jax.jit(lambda w, k: w * 0.5 + k, donate_argnums=0)

    def worker(k):
        dev = device("metal")
        w = jax.device_put(np.full((32, 32), k, np.float32), dev)
        expected = np.full((32, 32), k, np.float32)
        for _ in range(50):
            w = f(w, np.float32(k))
            expected = expected * 0.5 + k
        np.testing.assert_allclose(np.asarray(w), expected, rtol=1e-6)

    run_in_threads(worker)

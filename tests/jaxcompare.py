"""Run one function on the metal plugin and on JAX's CPU backend and compare, with tolerances per dtype."""

from __future__ import annotations

import contextlib
import inspect

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np

# (rtol, atol) per result dtype; integers and bools compare exactly. float64/complex128 (under
# jax_enable_x64) get float32's bounds in units of their own epsilon: rtol ~ 170 eps, atol ~ 8 eps.
TOLERANCES = {
    np.dtype(np.float32): (2e-5, 1e-6),
    np.dtype(np.float16): (2e-3, 1e-4),
    np.dtype(ml_dtypes.bfloat16): (1.6e-2, 1e-3),
    np.dtype(np.complex64): (2e-5, 1e-6),
    np.dtype(np.float64): (4e-14, 2e-15),
    np.dtype(np.complex128): (4e-14, 2e-15),
}


@contextlib.contextmanager
def jax_config(name: str, value):
    """A jax.config flag set for a block and restored after it (jax.config works alike on jax 0.10.2 and
    the newest jax)."""
    previous = getattr(jax.config, name)
    jax.config.update(name, value)
    try:
        yield
    finally:
        jax.config.update(name, previous)


def device(platform: str):
    return jax.devices(platform)[0]


def run_on(platform: str, fn, *args, jit: bool = True):
    dev = device(platform)
    args = jax.device_put(args, dev)
    f = jax.jit(fn) if jit else fn
    out = f(*args)
    for leaf in jax.tree.leaves(out):
        assert leaf.devices() == {dev}, f"result on {leaf.devices()}, expected {dev}"
    return jax.tree.map(np.asarray, out)


def assert_close(actual, expected, rtol=None, atol=None, exact=False, what=""):
    actual_leaves, expected_leaves = jax.tree.leaves(actual), jax.tree.leaves(expected)
    assert len(actual_leaves) == len(expected_leaves), what
    for a, e in zip(actual_leaves, expected_leaves):
        a, e = np.asarray(a), np.asarray(e)
        assert a.dtype == e.dtype, f"{what}: dtype {a.dtype} != {e.dtype}"
        assert a.shape == e.shape, f"{what}: shape {a.shape} != {e.shape}"
        if exact or e.dtype not in TOLERANCES:
            if e.dtype.kind in "fcV" or e.dtype == ml_dtypes.bfloat16:
                wide = np.complex128 if e.dtype.kind == "c" else np.float64
                aw, ew = a.astype(wide), e.astype(wide)
                np.testing.assert_array_equal(aw, ew, err_msg=what)
                if e.dtype.kind != "c":  # -0.0 and +0.0 differ too
                    np.testing.assert_array_equal(np.signbit(aw) & ~np.isnan(aw), np.signbit(ew) & ~np.isnan(ew), err_msg=what)
            else:
                np.testing.assert_array_equal(a, e, err_msg=what)
            continue
        r, t = TOLERANCES[e.dtype]
        r = rtol if rtol is not None else r
        t = atol if atol is not None else t
        np.testing.assert_allclose(a.astype(np.complex128 if e.dtype.kind == "c" else np.float64),
                                   e.astype(np.complex128 if e.dtype.kind == "c" else np.float64),
                                   rtol=r, atol=t, equal_nan=True, err_msg=what)


def check(fn, *args, rtol=None, atol=None, exact=False, jit=True):
    """fn on metal equals fn on cpu; returns the metal result."""
    expected = run_on("cpu", fn, *args, jit=jit)
    actual = run_on("metal", fn, *args, jit=jit)
    assert_close(actual, expected, rtol=rtol, atol=atol, exact=exact, what=getattr(fn, "__name__", str(fn)))
    return actual


def eps(dtype) -> float:
    """Machine epsilon of a float or complex dtype (complex64: float32's, complex128: float64's)."""
    return float(ml_dtypes.finfo(real_dtype(dtype)).eps)


def real_dtype(dtype):
    """The dtype of a complex dtype's parts; any other dtype itself."""
    dtype = np.dtype(dtype)
    return np.dtype(np.float64 if dtype == np.complex128 else np.float32) if dtype.kind == "c" else dtype


def assert_reduction_close(actual, expected, magnitude, k, c=2.0, accumulate=None, what=""):
    """actual and expected are two roundings of sums of at most k terms each (a dot product, a sum or
    mean, a window or convolution sum, a scan, the stages of an FFT) whose terms' absolute values add up
    to at most `magnitude` per element: |A| @ |B| for A @ B, sum(|x|) for sum(x), the same function of
    |x| for any sum of products with non-negative coefficients. A broadcastable magnitude (a scalar, a
    row's norm) gives a normwise bound. Each result is within gamma_k * magnitude of the exact value
    whatever the summation order, blocking, BLAS kernel or thread split (Higham, Accuracy and Stability
    of Numerical Algorithms, 3.1), so they must agree within

        |actual - expected| <= c * k * eps(accumulate) * magnitude + eps(result) * |expected|

    elementwise, the last term for each side rounding a wider accumulator to the result type once. That
    still catches a wrong element, a dropped or doubled term or a transposed operand: their errors are
    of the order of the magnitude, not of k * eps times it. Non-finite expected values must match
    exactly; integer and boolean results compare exactly. Pytrees compare leaf by leaf (magnitude and k
    may be one value for all leaves or a matching tree/list)."""
    actual_leaves, expected_leaves = jax.tree.leaves(actual), jax.tree.leaves(expected)
    assert len(actual_leaves) == len(expected_leaves), what
    n = len(expected_leaves)
    mags = jax.tree.leaves(magnitude) if isinstance(magnitude, (list, tuple, dict)) else [magnitude] * n
    ks = list(k) if isinstance(k, (list, tuple)) else [k] * n
    assert len(mags) == n and len(ks) == n, f"{what}: {len(mags)} magnitudes, {len(ks)} lengths for {n} results"
    for i, (a, e, m, kk) in enumerate(zip(actual_leaves, expected_leaves, mags, ks)):
        a, e = np.asarray(a), np.asarray(e)
        where = f"{what} [result {i}]"
        assert a.dtype == e.dtype, f"{where}: dtype {a.dtype} != {e.dtype}"
        assert a.shape == e.shape, f"{where}: shape {a.shape} != {e.shape}"
        if e.dtype not in TOLERANCES:
            assert_close(a, e, exact=True, what=where)
            continue
        wide = np.complex128 if e.dtype.kind == "c" else np.float64
        aw, ew = a.astype(wide), e.astype(wide)
        m = np.broadcast_to(np.abs(np.asarray(m).astype(wide)), e.shape)
        finite = np.isfinite(ew)
        np.testing.assert_array_equal(np.where(finite, 0, aw), np.where(finite, 0, ew), err_msg=f"{where}: non-finite values")
        acc = np.dtype(accumulate) if accumulate is not None else e.dtype
        tiny = float(ml_dtypes.finfo(real_dtype(e.dtype)).tiny)  # flushed subnormal products
        bound = c * kk * eps(acc) * m + eps(e.dtype) * np.abs(ew) + kk * tiny
        with np.errstate(invalid="ignore"):  # inf - inf where expected is not finite: compared above
            err = np.where(finite, np.abs(aw - ew), 0)
        bad = finite & ~(err <= bound)  # a NaN bound or result fails too
        if bad.any():
            idx = tuple(np.argwhere(bad)[0])
            raise AssertionError(
                f"{where}: {int(bad.sum())} of {e.size} elements differ by more than {c} * k * eps * magnitude "
                f"(k={kk}); first at {idx}: actual {aw[idx]}, expected {ew[idx]}, |diff| {err[idx]:.3g} > bound {bound[idx]:.3g} "
                f"(magnitude {m[idx]:.3g}); worst |diff|/bound {float(np.max(err / np.maximum(bound, tiny))):.3g}")


def abs_inputs(*args):
    """Each argument's absolute value, in its own dtype: what a sum-of-products function of them maps to
    its terms' magnitude (integers and booleans, typically indices or masks, are passed unchanged)."""
    out = []
    for x in args:
        x = np.asarray(x)
        if x.dtype.kind == "c":
            out.append(np.abs(x).astype(x.dtype))
        elif x.dtype in TOLERANCES:
            out.append(np.abs(x))
        else:
            out.append(x)
    return out


def check_reduction(fn, *args, k, magnitude=None, c=2.0, accumulate=None, jit=True):
    """fn on metal equals fn on cpu within assert_reduction_close's bound; returns the metal result. The
    magnitude defaults to fn on the arguments' absolute values, which is the terms' magnitude when fn is
    a sum of products of its arguments' elements with non-negative coefficients (sum, mean, dot, einsum,
    convolution, window sums, cumsum, cumprod); otherwise pass magnitude: a value, a function of the
    arguments, or "normwise" for composite functions (a solve, a training step) whose terms cannot be
    bounded that way: each result's largest absolute value, so k * eps relative to the result's norm,
    elementwise. Normwise does not suit results that cancel to nearly zero as a whole (the gradient of
    a sum of normalised values): their terms are far larger than the result."""
    expected = run_on("cpu", fn, *args, jit=jit)
    actual = run_on("metal", fn, *args, jit=jit)
    if magnitude is None:
        magnitude = run_on("cpu", fn, *abs_inputs(*args), jit=jit)
    elif isinstance(magnitude, str):
        assert magnitude == "normwise", magnitude
        magnitude = [np.nanmax(np.abs(np.where(np.isfinite(e), e, 0)), initial=0.0) for e in jax.tree.leaves(expected)]
    elif callable(magnitude):
        magnitude = magnitude(*args)
    assert_reduction_close(actual, expected, magnitude, k, c=c, accumulate=accumulate,
                           what=getattr(fn, "__name__", str(fn)))
    return actual


FLOAT_DTYPES = [jnp.float32, jnp.float16, jnp.bfloat16]
SIGNED_DTYPES = [jnp.int8, jnp.int16, jnp.int32]
UNSIGNED_DTYPES = [jnp.uint8, jnp.uint16, jnp.uint32]
INT_DTYPES = SIGNED_DTYPES + UNSIGNED_DTYPES


def random_array(rng: np.random.Generator, shape, dtype, low=-3.0, high=3.0):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
    if dtype.kind == "c":
        return (rng.uniform(low, high, shape) + 1j * rng.uniform(low, high, shape)).astype(dtype)
    return rng.uniform(low, high, shape).astype(dtype)


def special_floats(dtype):
    """Values where implementations differ: zeros, infinities, NaN, tiny and huge."""
    dtype = np.dtype(dtype)
    big = float(ml_dtypes.finfo(dtype).max) if dtype == ml_dtypes.bfloat16 else float(np.finfo(dtype).max)
    vals = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.5, np.inf, -np.inf, np.nan, 1e-3, -7.25, big, -big, 100.0]
    return np.array(vals, dtype=np.float32).astype(dtype)


def scatter_rows_with_body(x, idx, updates, fn):
    """x with rows idx[:, 0] combined with `updates` by fn(old, update): lax.scatter_apply with the update
    passed to the body (JAX's public scatter_apply drops it), unique indices, out-of-range rows dropped."""
    from jax import lax
    from jax_metal_plugin._jax_internals import core, lax_internal, slicing

    jaxpr, consts = lax_internal._reduction_jaxpr(fn, core.typeof(lax_internal._zero(x)))
    dn = lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))
    return bind_scatter(x, idx, updates, update_jaxpr=jaxpr, update_consts=consts, dimension_numbers=dn,
                        indices_are_sorted=False, unique_indices=True, mode=slicing.GatherScatterMode.FILL_OR_DROP)


def bind_scatter(x, idx, updates, **params):
    """scatter_p bound with `params` and those the JAX release adds (scatter_extra_params)."""
    from jax_metal_plugin._jax_internals import slicing

    return slicing.scatter_p.bind(x, idx, updates, **params, **scatter_extra_params())


def scatter_extra_params():
    """scatter_p's parameters beyond those of jax 0.10.2: the result's sharding, from jax 0.12.1."""
    from jax_metal_plugin._jax_internals import slicing

    return {"out_sharding": None} if "out_sharding" in inspect.signature(slicing._scatter_shape_rule).parameters else {}


def init_mlp(key, sizes):
    """He-initialised (weights, zero biases) per layer of an MLP with these layer sizes."""
    params = []
    for k, (m, n) in zip(jax.random.split(key, len(sizes) - 1), zip(sizes[:-1], sizes[1:])):
        params.append((jax.random.normal(k, (m, n)) * np.sqrt(2.0 / m), jnp.zeros(n)))
    return params


def run_in_threads(worker, count=4):
    """Runs worker(k) for k < count on as many threads at once; raises the first error any raised."""
    import threading

    errors = []

    def guarded(k):
        try:
            worker(k)
        except Exception as e:  # noqa: BLE001 - re-raised below
            errors.append(e)

    threads = [threading.Thread(target=guarded, args=(k,)) for k in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def check_fft(fn, *args, axes=(-1,), passes=1):
    """fn (`passes` chained transforms over `axes`) on metal against the CPU, normwise over each
    transform as FFT error analysis bounds it (Higham, Accuracy and Stability, 24.1): the error's 2-norm
    is within c * log2(n) * eps of the result's, for any radix or order of the stages; each element's
    error is at most that. Sizes other than powers of two may go through Bluestein's algorithm (three
    transforms of about twice the length)."""
    want = run_on("cpu", fn, *args)
    got = run_on("metal", fn, *args)
    results = jax.tree.leaves(want)
    rank = results[0].ndim
    shapes = [np.shape(a) for a in args if np.ndim(a) == rank] + [w.shape for w in results]
    sizes = [max(s[a] for s in shapes) for a in axes]
    stages = sum(int(np.ceil(np.log2(max(n, 2)))) + 1 for n in sizes)
    if any(n & (n - 1) for n in sizes):
        stages *= 3
    norms = [np.sqrt(np.sum(np.abs(w.astype(np.complex128)) ** 2, axis=axes, keepdims=True)) for w in jax.tree.leaves(want)]
    assert_reduction_close(got, want, norms, passes * stages, what=getattr(fn, "__name__", str(fn)))
    return got


def mlp_loss(params, x, y, activation=jax.nn.relu):
    """Softmax cross-entropy of an MLP (params from init_mlp) on integer labels y."""
    h = x
    for w, b in params[:-1]:
        h = activation(h @ w + b)
    w, b = params[-1]
    logits = h @ w + b
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * jax.nn.one_hot(y, logits.shape[-1]), axis=-1))


def make_sgd_step(activation=jax.nn.relu, lr=0.1):
    """A jitted SGD step on mlp_loss: (params, x, y) -> (new params, loss)."""

    @jax.jit
    def step(params, x, y):
        loss, grads = jax.value_and_grad(mlp_loss)(params, x, y, activation)
        return jax.tree.map(lambda p, g: p - lr * g, params, grads), loss

    return step

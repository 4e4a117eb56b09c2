"""float6_e2m3fn and float6_e3m2fn on metal, bit for bit. JAX's CPU backend only moves these types
(device_put, reshape, concatenate, ...), so data movement is compared with it and with NumPy, and
arithmetic with ml_dtypes' own conversions: each op computes in float32 and rounds once, to nearest even,
saturating (the formats have neither infinity nor NaN)."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from jaxcompare import run_on

F6 = [ml_dtypes.float6_e2m3fn, ml_dtypes.float6_e3m2fn]
IDS = lambda d: np.dtype(d).name  # noqa: E731


def _jax_takes_float6():
    try:
        jax.device_put(np.zeros(2, F6[0]), jax.devices("cpu")[0])
        return True
    except Exception:  # noqa: BLE001 - jax 0.10's client names no dtype it cannot convert
        return False


pytestmark = pytest.mark.skipif(not _jax_takes_float6(), reason="this JAX release cannot transfer float6 arrays")


def bits(a):
    return np.asarray(a).view(np.uint8)


def every_value(dtype):
    return np.arange(64, dtype=np.uint8).view(dtype)


def f32_boundaries(dtype):
    """float32 values at and beside each midpoint between neighbouring values (ties go to even), past the
    largest value, and the IEEE specials, which saturate or give the format's own choice for NaN."""
    v = np.unique(every_value(dtype).astype(np.float32))
    mids = ((v[:-1].astype(np.float64) + v[1:]) / 2).astype(np.float32)
    top = np.float32(ml_dtypes.finfo(dtype).max)
    around = np.concatenate([mids, v, [top * np.float32(1.0625), top * 2, 1e30]])
    out = np.concatenate([around, np.nextafter(around, np.float32(np.inf)), np.nextafter(around, np.float32(-np.inf))])
    return np.concatenate([out, -out, [np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-30, -1e-30]]).astype(np.float32)


@pytest.mark.parametrize("dtype", F6, ids=IDS)
def test_movement_keeps_every_bit(dtype):
    x = every_value(dtype).reshape(8, 8)
    back = np.asarray(jax.device_put(x, jax.devices("metal")[0]))
    assert back.dtype == x.dtype
    np.testing.assert_array_equal(bits(back), bits(x))
    fn = lambda a: (a, a.T, a[::-1], jnp.concatenate([a, a]), a.reshape(4, 16))  # noqa: E731
    got, want = run_on("metal", fn, x), run_on("cpu", fn, x)
    for g, w, n in zip(got, want, (x, x.T, x[::-1], np.concatenate([x, x]), x.reshape(4, 16))):
        np.testing.assert_array_equal(bits(g), bits(w))
        np.testing.assert_array_equal(bits(g), bits(n))


@pytest.mark.parametrize("dtype", F6, ids=IDS)
def test_conversions_match_ml_dtypes(dtype):
    x = every_value(dtype)
    np.testing.assert_array_equal(run_on("metal", lambda a: a.astype(jnp.float32), x), x.astype(np.float32))
    f = f32_boundaries(dtype)
    np.testing.assert_array_equal(bits(run_on("metal", lambda a: a.astype(dtype), f)), bits(f.astype(dtype)))
    with np.errstate(over="ignore"):
        h = f.astype(np.float16)
    np.testing.assert_array_equal(bits(run_on("metal", lambda a: a.astype(dtype), h)), bits(h.astype(dtype)))


@pytest.mark.parametrize("dtype", F6, ids=IDS)
def test_arithmetic_rounds_once(dtype):
    x = every_value(dtype)
    a, b = np.meshgrid(x, x)
    a, b = a.ravel(), b.ravel()
    af, bf = a.astype(np.float32), b.astype(np.float32)
    for name, fn, ref in [("add", lambda p, q: p + q, af + bf), ("mul", lambda p, q: p * q, af * bf),
                          ("neg", lambda p, q: -p, -af)]:
        got = run_on("metal", fn, a, b)
        assert got.dtype == np.dtype(dtype), name
        np.testing.assert_array_equal(bits(got), bits(ref.astype(dtype)), err_msg=name)
    # Which zero the maximum of +0 and -0 is, is not specified: compared as values.
    mx = run_on("metal", jnp.maximum, a, b)
    np.testing.assert_array_equal(mx.astype(np.float32), np.maximum(af, bf))
    lt = run_on("metal", lambda p, q: p < q, a, b)
    np.testing.assert_array_equal(lt, af < bf)

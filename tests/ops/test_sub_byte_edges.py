"""Sub-byte types (int2, uint2, int4, uint4, float4_e2m1fn) wherever JAX's CPU backend takes them: as
arguments and results of a jitted function, through iota and the shape ops, comparisons and
conversions, as operands and results of Python callbacks (the callback sees the narrow type), and
through device_put; the same values as on cpu."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax

from jaxcompare import assert_close, device

NAMES = ["int2", "uint2", "int4", "uint4", "float4_e2m1fn"]
DTYPES = [np.dtype(getattr(ml_dtypes, n)) for n in NAMES if hasattr(ml_dtypes, n) and hasattr(jnp, n)]
IDS = [d.name for d in DTYPES]


def sample(dtype, shape=(2, 4)):
    """Every value of the type that fits, cycled to `shape`."""
    if dtype.name.startswith("float"):
        values = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.5, -1, -6, 0], np.float32)
    else:
        info = ml_dtypes.iinfo(dtype)
        values = np.arange(int(info.min), int(info.max) + 1)
    n = int(np.prod(shape))
    return np.resize(values, n).reshape(shape).astype(dtype)


def both(fn, *args):
    outs = []
    for platform in ("cpu", "metal"):
        out = jax.jit(fn)(*jax.device_put(args, device(platform)))
        outs.append(jax.tree.map(np.asarray, out))
    assert_close(outs[1], outs[0], exact=True, what=getattr(fn, "__name__", "fn"))
    return outs[1]


SHAPE_OPS = {
    "identity": lambda a: a,
    "reshape_transpose": lambda a: a.reshape(4, 2).T,
    "concat_reverse": lambda a: jnp.concatenate([a, a[:, ::-1]], axis=1),
    "slice_dynamic": lambda a: lax.dynamic_slice(a, (1, 1), (1, 2)),
    "update_slice": lambda a: lax.dynamic_update_slice(a, a[:1, :2], (1, 1)),
    "broadcast": lambda a: jnp.broadcast_to(a[:1], (3, 4)),
    "gather": lambda a: a[jnp.array([1, 0, 1]), jnp.array([3, 0, 2])],
    "where": lambda a: jnp.where(jnp.arange(4) > 1, a, a[::-1]),
    "pad": lambda a: lax.pad(a, jnp.zeros((), a.dtype), [(1, 0, 0), (0, 2, 1)]),
    "scan_rows": lambda a: lax.scan(lambda c, r: (c, r[::-1]), 0, a)[1],
    "equal": lambda a: a == a[::-1],
}


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_sort_orders_values(dtype):
    # Against NumPy: XLA:CPU (jaxlib 0.10.2) sorts 2-bit integers wrongly ([1, 0, 1, 1] -> [-2, -1, -1, 0]).
    x = sample(dtype)
    out = np.asarray(jax.jit(lambda a: jnp.sort(a, axis=-1))(jax.device_put(x, device("metal"))))
    assert out.dtype == dtype
    np.testing.assert_array_equal(out.astype(np.float32), np.sort(x.astype(np.float32), axis=-1))


@pytest.mark.parametrize("op", list(SHAPE_OPS), ids=list(SHAPE_OPS))
@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_arguments_results_and_shape_ops_as_on_cpu(dtype, op):
    both(SHAPE_OPS[op], sample(dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_made_inside_iota_ones_and_conversions_as_on_cpu(dtype):
    both(lambda: (lax.iota(dtype, 5), jnp.ones((3,), dtype), jnp.zeros((2, 2), dtype)))
    wide = np.float32 if dtype.name.startswith("float") else np.int32
    both(lambda a: (a.astype(wide), (a.astype(wide) * 2).astype(dtype)), sample(dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_device_put_and_back(dtype):
    x = sample(dtype)
    y = jax.device_put(x, device("metal"))
    assert y.dtype == dtype
    np.testing.assert_array_equal(np.asarray(y).astype(np.float32), x.astype(np.float32))


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_callback_operands_and_results_have_the_narrow_type(dtype):
    seen = {}

    def host(v):
        seen.setdefault("types", []).append(np.asarray(v).dtype)
        return np.asarray(v)[::-1]

    def f(a):
        jax.debug.callback(lambda v: seen.setdefault("debug", []).append(np.asarray(v).copy()), a)
        return jax.pure_callback(host, jax.ShapeDtypeStruct(a.shape, a.dtype), a)

    x = sample(dtype)
    out = both(f, x)
    jax.effects_barrier()
    assert seen["types"] == [dtype, dtype]
    np.testing.assert_array_equal(seen["debug"][1].astype(np.float32), x.astype(np.float32))
    np.testing.assert_array_equal(out.astype(np.float32), x[::-1].astype(np.float32))


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_debug_print_of_a_sub_byte_array_as_on_cpu(capfd, dtype):
    texts = []
    for platform in ("cpu", "metal"):
        capfd.readouterr()
        jax.jit(lambda a: jax.debug.print("{}", a))(jax.device_put(sample(dtype), device(platform)))
        jax.effects_barrier()
        texts.append(capfd.readouterr().out)
    assert texts[0] and texts[1] == texts[0]


@pytest.mark.parametrize("dtype", [d for d in DTYPES if not d.name.startswith("float")],
                         ids=[d.name for d in DTYPES if not d.name.startswith("float")])
def test_integer_arithmetic_wraps_as_on_cpu(dtype):
    x = sample(dtype)
    both(lambda a: (a + a, a * 3, -a, a >> 1, lax.shift_right_logical(a, jnp.ones_like(a)),
                    lax.clz(a)), x)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_under_vmap_and_grad_of_a_float_through_the_type(dtype):
    x = sample(dtype).astype(np.float32)

    def f(v):
        return jnp.sum(v.astype(dtype).astype(jnp.float32) * v)

    both(jax.vmap(lambda r: r.astype(dtype)), x)
    both(jax.grad(f), x)

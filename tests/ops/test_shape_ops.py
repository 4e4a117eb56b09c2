"""Constants, iota and the shape ops on metal against JAX's CPU backend."""

import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from jaxcompare import FLOAT_DTYPES, INT_DTYPES, check, check_reduction, random_array

RNG = np.random.default_rng(1)
DTYPES = FLOAT_DTYPES + INT_DTYPES + [jnp.bool_]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_constants_and_iota(dtype):
    dense = random_array(RNG, (3, 4), dtype)
    check(lambda x: (x, jnp.asarray(dense), jnp.full((2, 3), dense[0, 0]), jnp.zeros((0, 3), dtype)), dense[:1])
    if dtype != jnp.bool_:
        check(lambda x: x + lax.broadcasted_iota(dtype, (3, 4), 1) + lax.broadcasted_iota(dtype, (3, 4), 0), dense)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_reshape_transpose_broadcast(dtype):
    x = random_array(RNG, (2, 3, 4), dtype)
    check(lambda x: x.reshape(4, 6), x)
    check(lambda x: x.reshape(-1), x)
    check(lambda x: jnp.transpose(x, (2, 0, 1)), x)
    check(lambda x: jnp.transpose(x, (1, 2, 0)), x)
    check(lambda x: jnp.broadcast_to(x[:, :1, :], (2, 3, 4)), x)
    check(lambda x: lax.broadcast_in_dim(x[0, 0], (3, 4, 2), (1,)), x)
    check(lambda x: lax.broadcast_in_dim(x[0], (4, 5, 3), (2, 0)), x)
    check(lambda x: jnp.broadcast_to(x[0, 0, 0], (3, 2)), x)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_slice_concat_reverse(dtype):
    x = random_array(RNG, (6, 7), dtype)
    check(lambda x: x[1:5, 2:7:2], x)
    check(lambda x: x[::3, ::-1], x)
    check(lambda x: lax.slice(x, (0, 1), (6, 7), (4, 3)), x)
    check(lambda x: jnp.concatenate([x, x[:2], x[1:3]], axis=0), x)
    check(lambda x: jnp.concatenate([x, x[:, :0], x[:, 3:]], axis=1), x)
    check(lambda x: lax.rev(x, (0, 1)), x)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16, jnp.int32, jnp.uint8, jnp.bool_],
                         ids=lambda d: np.dtype(d).name)
def test_pad(dtype):
    x = random_array(RNG, (4, 5), dtype)
    v = random_array(RNG, (), dtype)
    check(lambda x: jnp.pad(x, ((1, 2), (0, 3))), x)
    check(lambda x: lax.pad(x, v, ((1, 2, 1), (2, 0, 2))), x)
    check(lambda x: lax.pad(x, v, ((-1, 2, 0), (1, -2, 1))), x)
    check(lambda x, v: lax.pad(x, v, ((-2, -1, 3), (0, 0, 0))), x, v)  # padding value not a constant
    check(lambda x: jnp.pad(x, 2, mode="edge"), x)
    check(lambda x: jnp.pad(x, ((1, 1), (2, 2)), mode="reflect"), x)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.int32, jnp.bool_], ids=lambda d: np.dtype(d).name)
def test_dynamic_slice_and_update(dtype):
    x = random_array(RNG, (6, 5, 3), dtype)
    u = random_array(RNG, (2, 3, 3), dtype)
    for start in [(0, 0, 0), (1, 2, 0), (5, 4, 1), (-3, 9, 0), (4, -1, 2)]:
        s = np.array(start, np.int32)
        check(lambda x, s: lax.dynamic_slice(x, (s[0], s[1], s[2]), (2, 3, 3)), x, s)
        check(lambda x, u, s: lax.dynamic_update_slice(x, u, (s[0], s[1], s[2])), x, u, s)
    check(lambda x, i: x[i], x, np.int32(4))
    check(lambda x, i: lax.dynamic_update_index_in_dim(x, x[0], i, 0), x, np.int32(2))


@pytest.mark.parametrize("shape", [(70, 33), (3, 40, 17), (16, 64, 4, 16), (5, 1, 33, 2, 19), (2, 3, 260, 300)],
                         ids=lambda s: "x".join(map(str, s)))
def test_large_layout_copies(shape):
    # Sizes past the host executor's 16x16 transpose tiles and its per-thread split, every permutation
    # kind (inner dim kept, moved, swapped with the outermost), and broadcasts, slices, reverses.
    x = random_array(np.random.default_rng(len(shape)), shape, np.float32)
    rank = len(shape)
    perms = [tuple(reversed(range(rank))), tuple(range(1, rank)) + (0,), (rank - 1,) + tuple(range(rank - 1))]
    if rank >= 3:
        perms.append(tuple(range(rank - 3)) + (rank - 2, rank - 3, rank - 1))
    for perm in perms:
        check(lambda x: jnp.transpose(x, perm), x, exact=True)
    check(lambda x: (jnp.broadcast_to(x[..., :1], x.shape), jnp.broadcast_to(x[:1], x.shape),
                     x[::-1, ..., ::2], jnp.flip(x, axis=-1), x.reshape(-1)[::3]), x, exact=True)
    if rank <= 3:  # a product over the strided (transposed) operand: within rounding of a k-term sum
        check_reduction(lambda x: jnp.swapaxes(x, -1, -2) @ x, x, k=shape[-2])


# Update windows of every kind: partial along leading, middle and trailing axes, spanning axes,
# length-1 axes, the whole operand and nothing at all; starts below 0 and past the end clamp to
# [0, operand_dim - update_dim] (JAX wraps negative starts once, -10 stays negative).
DUS_CASES = [
    ((6, 5, 3), (2, 3, 3)),
    ((6, 5, 3), (1, 5, 3)),   # one row of a stack (scan outputs, gradient accumulators)
    ((6, 5, 3), (6, 1, 3)),   # a middle-axis column (a KV cache time step)
    ((6, 5, 3), (6, 5, 2)),   # the last axis only
    ((6, 5, 3), (1, 1, 1)),
    ((6, 5, 3), (6, 5, 3)),   # the whole operand
    ((6, 5, 3), (0, 5, 3)),   # nothing
    ((7,), (3,)),
]


@pytest.mark.parametrize("shapes", DUS_CASES, ids=lambda s: f"{s[0]}<-{s[1]}".replace(" ", ""))
def test_dynamic_slice_windows_and_clamping(shapes):
    xs, us = shapes
    x = random_array(RNG, xs, np.float32)
    u = random_array(RNG, us, np.float32)
    rank = len(xs)
    update = lambda x, u, s: lax.dynamic_update_slice(x, u, tuple(s[d] for d in range(rank)))
    read = lambda x, s: lax.dynamic_slice(x, tuple(s[d] for d in range(rank)), us)
    for start in [(0, 0, 0), (1, 2, 1), (5, 4, 2), (-10, 9, 1), (4, -10, 7), (2**30, 3, -2**30)]:
        s = np.array(start[:rank], np.int32)
        check(update, x, u, s, exact=True)
        check(read, x, s, exact=True)


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16, jnp.int8, jnp.uint8, jnp.uint32, jnp.complex64],
                         ids=lambda d: np.dtype(d).name)
def test_dynamic_slice_dtypes(dtype):
    x = random_array(RNG, (4, 6, 2), dtype)
    u = random_array(RNG, (2, 1, 2), dtype)
    for start in [(0, 0, 0), (3, 5, 1), (1, 2, 0)]:
        s = np.array(start, np.int32)
        check(lambda x, u, s: lax.dynamic_update_slice(x, u, (s[0], s[1], s[2])), x, u, s, exact=True)
        check(lambda x, s: lax.dynamic_slice(x, (s[0], s[1], s[2]), (2, 1, 2)), x, s, exact=True)


def test_dynamic_slice_start_types():
    # starts of narrow or unsigned integer types, including values past the end and past 2^31 (the
    # operand is kept short enough for operand_dim - update_dim to fit the start's type: XLA computes
    # that bound in the start's type, StableHLO exactly)
    x = random_array(RNG, (200, 4), np.float32)
    u = random_array(RNG, (2, 4), np.float32)
    for dtype, value in [(np.int8, -100), (np.int8, 100), (np.uint8, 250), (np.int16, 199), (np.uint16, 60000),
                         (np.uint32, 4000000000), (np.uint32, 7), (np.int32, -2**31)]:
        i = dtype(value)
        check(lambda x, u, i: lax.dynamic_update_slice(x, u, (i, i * 0)), x, u, i, exact=True)
        check(lambda x, i: lax.dynamic_slice(x, (i, i * 0), (3, 4)), x, i, exact=True)


def test_iota_of_complex():
    check(lambda x: (lax.iota(jnp.complex64, 5) * x, lax.broadcasted_iota(jnp.complex64, (3, 4), 1) + x,
                     lax.iota(jnp.uint8, 7)), np.complex64(1 + 0j))

"""int4/uint4, float8 in every format JAX has and float4_e2m1fn on metal against JAX's CPU backend, bit
for bit: device_put / device_get of every value, conversions of every value and of float32 values
around each rounding boundary and overflow, int4 arithmetic with wrap-around, reductions, bitcasts,
vmap, and 2-bit lanes packed into and out of wider types. The lowering emulates these types on their
storage (cpp/stablehlo/passes/narrow_types.cc)."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax

from jaxcompare import run_on

INT4 = [jnp.int4, jnp.uint4]
# Every float8 format and float4_e2m1fn: infinities (e5m2, e4m3, e3m4), an all-ones NaN (e4m3fn,
# e8m0fnu: no sign, no zero), 0x80 as the NaN and no negative zero (the fnuz formats), neither
# infinity nor NaN (float4_e2m1fn).
F8 = [jnp.float8_e4m3fn, jnp.float8_e5m2, jnp.float8_e4m3fnuz, jnp.float8_e5m2fnuz, jnp.float8_e4m3b11fnuz,
      jnp.float8_e4m3, jnp.float8_e3m4, jnp.float8_e8m0fnu]
F4 = [jnp.float4_e2m1fn]
NF = F8 + F4
IDS = lambda d: np.dtype(d).name  # noqa: E731


def bits(a):
    """An array's bytes, so that comparisons see NaN payloads, signed zeros and int4 storage alike."""
    a = np.asarray(a)
    return a.view(np.uint8) if a.dtype.itemsize == 1 else a.view(f"u{a.dtype.itemsize}")


def assert_bits_equal(actual, expected, what=""):
    for a, e in zip(jax.tree.leaves(actual), jax.tree.leaves(expected)):
        a, e = np.asarray(a), np.asarray(e)
        assert a.dtype == e.dtype and a.shape == e.shape, f"{what}: {a.dtype}{a.shape} != {e.dtype}{e.shape}"
        np.testing.assert_array_equal(bits(a), bits(e), err_msg=what)


def check_exact(fn, *args, what=""):
    assert_bits_equal(run_on("metal", fn, *args), run_on("cpu", fn, *args), what=what)


def every_value(dtype):
    if dtype in INT4:
        lo, hi = (-8, 8) if dtype == jnp.int4 else (0, 16)
        return np.arange(lo, hi).astype(dtype)
    return np.arange(16 if dtype in F4 else 256, dtype=np.uint8).view(dtype)


def f32_boundaries(dtype):
    """float32 values at, just below and just above every midpoint between neighbouring values of the
    format (ties round to even), around the largest finite value, the subnormals, and the specials."""
    v = every_value(dtype).astype(np.float32)
    v = np.unique(v[np.isfinite(v)])
    mids = ((v[:-1].astype(np.float64) + v[1:]) / 2).astype(np.float32)
    top = np.float32(ml_dtypes.finfo(dtype).max)
    around = np.concatenate([mids, v, [top * np.float32(1.0625), top * np.float32(1.125), top * 2, 1e30, 3e38]])
    out = np.concatenate([around, np.nextafter(around, np.float32(np.inf)), np.nextafter(around, np.float32(-np.inf))])
    out = np.concatenate([out, -out, [np.inf, -np.inf, np.nan, -np.nan, 0.0, -0.0, 1e-30, -1e-30, 1e-45]])
    return out.astype(np.float32)


@pytest.mark.parametrize("dtype", INT4 + NF, ids=IDS)
def test_device_put_get_round_trip(dtype):
    x = every_value(dtype).reshape(-1, 4 if dtype in INT4 + F4 else 16)
    back = np.asarray(jax.device_put(x, jax.devices("metal")[0]))
    assert back.dtype == x.dtype and back.shape == x.shape
    np.testing.assert_array_equal(bits(back), bits(x))
    # Through a program too: data movement keeps every bit, NaN payloads and signs included. Compared
    # with NumPy's movement, not XLA:CPU's: at jax 0.12 XLA:CPU reverses float8_e5m2 through a float
    # conversion that canonicalises NaNs, its choice of lowering, not the op's semantics.
    out = run_on("metal", lambda a: (a, a.T, a[::-1]), x)
    for got, want in zip(out, (x, x.T, x[::-1])):
        np.testing.assert_array_equal(bits(got), bits(want), err_msg="identity, transpose, reverse")


@pytest.mark.parametrize("to", [jnp.float32, jnp.bfloat16, jnp.float16, jnp.int8, jnp.int32, jnp.uint8,
                                jnp.int4, jnp.uint4, jnp.bool_] + NF, ids=IDS)
@pytest.mark.parametrize("frm", INT4 + NF, ids=IDS)
def test_convert_every_value(frm, to):
    check_exact(lambda a: a.astype(to), every_value(frm), what=f"{np.dtype(frm).name} -> {np.dtype(to).name}")


@pytest.mark.parametrize("to", NF + INT4, ids=IDS)
def test_convert_from_float32_boundaries(to):
    for of in NF:
        check_exact(lambda a: a.astype(to), f32_boundaries(of), what=f"{np.dtype(of).name} boundaries")


@pytest.mark.parametrize("to", NF, ids=IDS)
@pytest.mark.parametrize("frm", [jnp.bfloat16, jnp.float16, jnp.int8, jnp.int32, jnp.uint8], ids=IDS)
def test_convert_to_float8(frm, to):
    if jnp.issubdtype(frm, jnp.floating):
        x = np.arange(65536, dtype=np.uint16).view(frm)
    else:
        info = np.iinfo(frm)
        x = np.unique(np.clip(np.concatenate([np.arange(-600, 600), 2 ** np.arange(31) - 1, -(2 ** np.arange(31))]),
                              info.min, info.max)).astype(frm)
    if to == jnp.float8_e8m0fnu and jnp.issubdtype(frm, jnp.floating):
        # ml_dtypes' rounding, which XLA:CPU follows from jax 0.12.1 on: below 2^-126 to the nearer of
        # 2^-127 and 2^-126 (before, XLA:CPU took anything above 2^-127 up).
        assert_bits_equal(run_on("metal", lambda a: a.astype(to), x), x.astype(to))
        return
    check_exact(lambda a: a.astype(to), x)


BINARY = {
    "add": lax.add, "sub": lax.sub, "mul": lax.mul, "div": lax.div, "rem": lax.rem, "max": lax.max,
    "min": lax.min, "shift_left": lax.shift_left, "shift_right_arithmetic": lax.shift_right_arithmetic,
    "shift_right_logical": lax.shift_right_logical, "and": lax.bitwise_and, "or": lax.bitwise_or,
    "xor": lax.bitwise_xor, "eq": lax.eq, "ne": lax.ne, "lt": lax.lt, "ge": lax.ge,
}


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("dtype", INT4, ids=IDS)
def test_int4_binary_every_pair(dtype, name):
    v = every_value(dtype)
    a, b = np.meshgrid(v, v)
    if name in ("div", "rem"):  # XLA:CPU's division by zero is its own business; avoid it
        b = np.where(b == 0, np.ones_like(b), b)
    check_exact(BINARY[name], a, b, what=name)


@pytest.mark.parametrize("name", ["neg", "not", "sign", "popcnt", "clz"])
@pytest.mark.parametrize("dtype", INT4, ids=IDS)
def test_int4_unary_every_value(dtype, name):
    fn = {"neg": lax.neg, "not": lax.bitwise_not, "sign": lax.sign,
          "popcnt": lax.population_count, "clz": lax.clz}[name]
    if name == "popcnt":
        # The bits of the type's own width (StableHLO's popcnt): XLA:CPU before jax 0.12.1 counted a
        # negative int4's sign-extended byte instead.
        x = every_value(dtype)
        want = np.array([bin(int(v) & 0xF).count("1") for v in x.astype(np.int8)]).astype(dtype)
        assert_bits_equal(run_on("metal", fn, x), want, what=name)
        return
    check_exact(fn, every_value(dtype), what=name)


@pytest.mark.parametrize("dtype", INT4, ids=IDS)
def test_int4_wraps_and_reduces(dtype):
    v = np.tile(every_value(dtype), 3).reshape(6, 8)
    check_exact(lambda a: (a + a + a, a * a * a, lax.iota(dtype, 20)), v)
    check_exact(lambda a: (lax.reduce(a, np.array(0, dtype), lax.add, (1,)),
                           lax.reduce(a, np.array(1, dtype), lax.mul, (0,)),
                           lax.reduce(a, np.array(ml_dtypes.iinfo(dtype).min, dtype), lax.max, (1,))), v)
    check_exact(lambda a: jnp.cumsum(a, axis=1, dtype=dtype), v)
    check_exact(lambda a: jnp.sort(a, axis=1), v)


def _width(d):
    return 4 if d in INT4 + F4 else np.dtype(d).itemsize * 8


# Every pair with a 4-bit or float8 side (the others are the existing bitcast tests' business).
BITCAST_PAIRS = [(f, t) for f in [jnp.int4, jnp.uint4, jnp.int8, jnp.uint8, jnp.int32, jnp.float16, jnp.float32,
                                  jnp.float8_e5m2, jnp.float8_e4m3fnuz, jnp.float4_e2m1fn]
                 for t in [jnp.int4, jnp.uint4, jnp.int8, jnp.uint8, jnp.int32, jnp.float16, jnp.float32,
                           jnp.float8_e4m3fn, jnp.float8_e8m0fnu, jnp.float4_e2m1fn]
                 if 4 in (_width(f), _width(t)) or {f, t} & set(NF)]


@pytest.mark.parametrize("frm,to", BITCAST_PAIRS, ids=lambda d: np.dtype(d).name)
def test_bitcast_convert(frm, to):
    fb, tb = _width(frm), _width(to)
    rng = np.random.default_rng(fb * 100 + tb)
    shape = (3, tb // fb) if fb < tb else (3, 4)
    raw = rng.integers(0, 256, size=(*shape, fb // 8 if fb >= 8 else 1), dtype=np.uint8)
    if frm in F4:
        x = (raw[..., 0] & 0xF).view(frm)
    elif fb == 4:
        x = (raw[..., 0] & 0xF).astype(np.int8).astype(frm) if frm == jnp.uint4 else \
            (((raw[..., 0] & 0xF).astype(np.int8) << 4) >> 4).astype(frm)
    else:
        x = raw.view(frm).reshape(shape)
    if jnp.issubdtype(frm, jnp.floating) or jnp.issubdtype(to, jnp.floating):
        x = np.where(np.isnan(x.astype(np.float32)), np.zeros_like(x), x) if jnp.issubdtype(frm, jnp.floating) else x
    check_exact(lambda a: lax.bitcast_convert_type(a, to), x)


@pytest.mark.parametrize("dtype", NF, ids=IDS)
def test_narrow_float_arithmetic_every_pair(dtype):
    v = every_value(dtype)
    if dtype == jnp.float8_e8m0fnu:  # 2^-64 and up: XLA:CPU runs with float32 denormals flushed, so an
        v = v[64:]  # operand or product below 2^-126 is 0 there (e8m0's NaN) and a tiny number here
    a, b = np.meshgrid(v, v)
    # Which NaN a NaN-NaN pair gives is the hardware's choice (x86 returns the first operand's): keep one
    # NaN operand at most.
    both_nan = np.isnan(a.astype(np.float32)) & np.isnan(b.astype(np.float32))
    b = np.where(both_nan, np.ones_like(b), b)
    # A NaN result's sign is the implementation's too (XLA:CPU gives 0x7f at jax 0.10 and the NaN
    # operand's sign at 0.12): NaN results compare as NaN, every other result bit for bit.
    fn = lambda p, q: (p + q, p * q, p - q, lax.max(p, q), p < q, p == q, -p)  # noqa: E731
    got, want = run_on("metal", fn, a, b), run_on("cpu", fn, a, b)
    for g, w in zip(got, want):
        if np.dtype(w.dtype).kind == "V" or w.dtype in [np.dtype(d) for d in NF]:
            nan_g, nan_w = np.isnan(g.astype(np.float32)), np.isnan(w.astype(np.float32))
            np.testing.assert_array_equal(nan_g, nan_w)
            g, w = np.where(nan_w, 0, bits(g)), np.where(nan_w, 0, bits(w))
        assert_bits_equal(g, w)


@pytest.mark.parametrize("dtype", NF, ids=IDS)
def test_narrow_float_movement_reduce_sort_dot(dtype):
    x = np.random.default_rng(3).standard_normal((4, 8))
    x = (np.abs(x) if dtype == jnp.float8_e8m0fnu else x).astype(dtype)  # e8m0fnu: positive numbers only
    check_exact(lambda a: (a.T, jnp.concatenate([a, a[::-1]]), a[jnp.array([2, 0, 3])], jnp.pad(a, 1),
                           jnp.where(a > 0, a, -a), jnp.argsort(a, axis=1)), x)
    check_exact(lambda a: (jnp.max(a, axis=1), a.astype(jnp.float32).sum(axis=0)), x)
    dot = lambda a, b: lax.dot(a, b, preferred_element_type=jnp.float32)  # noqa: E731
    if dtype in F4:  # XLA:CPU refuses float4 dot operands ("custom element sizes"): its float32 dot
        assert_bits_equal(run_on("metal", dot, x, x.T),  # is the same sum of exact products
                          run_on("cpu", lambda a, b: dot(a.astype(jnp.float32), b.astype(jnp.float32)), x, x.T))
    else:
        check_exact(dot, x, x.T)


@pytest.mark.parametrize("dtype", INT4 + NF, ids=IDS)
def test_vmap(dtype):
    v = every_value(dtype)[:16].reshape(4, 4)
    f = lambda r: (r[::-1], r.astype(jnp.float32) * 2)  # noqa: E731
    check_exact(jax.vmap(f), v)
    if dtype in INT4:
        check_exact(jax.vmap(lambda r, s: r * s + r), v, v.T)


def test_grad_through_int4_and_float8_casts():
    # The cast is the quantisation step of a training loop: its gradient is float32's (straight through).
    def loss(w):
        q = w.astype(jnp.float8_e4m3fn).astype(jnp.float32) + w.astype(jnp.int4).astype(jnp.float32)
        return jnp.sum(q * w)
    w = np.linspace(-9, 9, 37, dtype=np.float32)
    check_exact(jax.grad(loss), w)


INT2 = [jnp.int2, jnp.uint2]


def _lanes(d):
    return 2 if d in INT2 else _width(d)


# Every pair with a 2-bit side: 2-bit lanes pack into and unpack from 2-, 4-, 8-, 16- and 32-bit types,
# lane j at bits 2j as on cpu.
BITCAST_2BIT_PAIRS = [(f, t) for f in INT2 + [jnp.int4, jnp.uint4, jnp.float4_e2m1fn, jnp.int8, jnp.uint8,
                                              jnp.float8_e4m3fn, jnp.int16, jnp.bfloat16, jnp.int32, jnp.float32]
                      for t in INT2 + [jnp.int4, jnp.float4_e2m1fn, jnp.uint8, jnp.float8_e5m2, jnp.uint16,
                                       jnp.float16, jnp.float32]
                      if 2 in (_lanes(f), _lanes(t))]


@pytest.mark.parametrize("frm,to", BITCAST_2BIT_PAIRS, ids=lambda d: np.dtype(d).name)
def test_bitcast_convert_2bit(frm, to):
    fb, tb = _lanes(frm), _lanes(to)
    rng = np.random.default_rng(fb * 100 + tb)
    shape = (3, tb // fb) if fb < tb else (3, 4)
    raw = rng.integers(0, 256, size=(*shape, max(fb // 8, 1)), dtype=np.uint8)
    if fb < 8:  # every bit pattern of the narrow type; int2/int4 sign-extended as ml_dtypes holds them
        low = (raw[..., 0] & ((1 << fb) - 1)).astype(np.int8)
        signed = frm in (jnp.int2, jnp.int4)
        x = (((low << (8 - fb)) >> (8 - fb)) if signed else low).astype(frm) if frm not in F4 else \
            low.astype(np.uint8).view(frm)
    else:
        x = raw.view(frm).reshape(shape)
        if jnp.issubdtype(frm, jnp.floating):
            x = np.where(np.isnan(x.astype(np.float32)), np.zeros_like(x), x)
    check_exact(lambda a: lax.bitcast_convert_type(a, to), x)


def test_int2_packs_and_unpacks_under_jit_and_vmap():
    # A byte into its four 2-bit lanes and back, batched: the round trip is the identity, as on cpu.
    x = np.arange(-128, 128, dtype=np.int8).reshape(16, 16)
    check_exact(lambda v: lax.bitcast_convert_type(lax.bitcast_convert_type(v, jnp.int2), jnp.int8), x)
    check_exact(jax.vmap(lambda v: lax.bitcast_convert_type(v, jnp.uint2)), x.view(np.uint8))


def test_control_flow_scatter_and_indexing():
    x4 = np.arange(-8, 8).astype(jnp.int4)
    xf = np.linspace(-3, 3, 16).astype(jnp.float8_e4m3fn)
    loop = lambda a, b: lax.fori_loop(0, 5, lambda i, c: (c[0] * 3 + 1, (c[1] * b).astype(b.dtype)), (a, b))  # noqa: E731
    check_exact(loop, x4, xf, what="fori_loop")
    branch = lambda p, a, b: lax.cond(p, lambda: (a + a, b * b), lambda: (-a, -b))  # noqa: E731
    check_exact(branch, True, x4, xf, what="cond true")
    check_exact(branch, False, x4, xf, what="cond false")
    check_exact(lambda a: lax.scan(lambda c, r: (c + r, c * r), a[0], a), x4.reshape(4, 4), what="scan")
    check_exact(lambda b: (jnp.max(b), jnp.argmax(b), jnp.min(b.reshape(4, 4), axis=0),
                           b[jnp.array([3, 1])].astype(jnp.float16)), xf, what="max/argmax")
    check_exact(lambda a, i, u: a.at[i].set(u), xf, np.array([1, 5]), xf[:2], what="scatter f8")
    check_exact(lambda a, i, u: a.at[i].add(u), x4, np.array([1, 5, 5]), x4[:3], what="scatter-add int4")
    check_exact(lambda n: (jnp.eye(3, dtype=jnp.int4) * n, jnp.arange(20, dtype=jnp.uint4) + n.astype(jnp.uint4)),
                np.array(1, jnp.int4), what="iota")
    check_exact(lambda a: lax.clamp(jnp.int4(-3), a, jnp.int4(5)), x4, what="clamp")
    check_exact(lambda a: jnp.dot(a.reshape(4, 4), a.reshape(4, 4), preferred_element_type=jnp.int4), x4,
                what="int4 dot")


def test_block_scaled_matmul_mxfp8():
    # MXFP8 (float8_e4m3fn data, a float8_e8m0fnu scale per 32 elements): jax.nn.scaled_matmul, which
    # JAX lowers on every platform from 0.11 to exactly this decomposition, and itself where this jax
    # lowers it for CPU.
    rng = np.random.default_rng(7)
    B, M, N, K = 2, 16, 24, 96
    a = rng.standard_normal((B, M, K)).astype(jnp.float8_e4m3fn)
    b = rng.standard_normal((B, N, K)).astype(jnp.float8_e4m3fn)
    sa = (2.0 ** rng.integers(-4, 5, (B, M, K // 32))).astype(jnp.float8_e8m0fnu)
    sb = (2.0 ** rng.integers(-4, 5, (B, N, K // 32))).astype(jnp.float8_e8m0fnu)

    def decomposed(a, b, sa, sb):
        scale = lambda x, s: (x.astype(jnp.float32).reshape(*x.shape[:2], -1, 32)  # noqa: E731
                              * s.astype(jnp.float32)[..., None]).reshape(x.shape)
        return lax.dot_general(scale(a, sa), scale(b, sb), (((2,), (2,)), ((0,), (0,))),
                               preferred_element_type=jnp.float32)

    def scaled64(x, s):
        return (x.astype(np.float64).reshape(*x.shape[:2], -1, 32) * s.astype(np.float64)[..., None]).reshape(x.shape)

    want = np.einsum("bmk,bnk->bmn", scaled64(a, sa), scaled64(b, sb))
    # float32 sums of K exact products: within K ulps of the sum of their magnitudes
    mags = np.einsum("bmk,bnk->bmn", np.abs(scaled64(a, sa)), np.abs(scaled64(b, sb)))
    bound = K * np.finfo(np.float32).eps * mags
    for fn in [decomposed] + ([lambda *x: jax.nn.scaled_matmul(*x, preferred_element_type=jnp.float32)]
                              if _cpu_lowers_scaled_matmul() else []):
        got, ref = run_on("metal", fn, a, b, sa, sb), run_on("cpu", fn, a, b, sa, sb)
        assert np.all(np.abs(np.asarray(got, np.float64) - want) <= bound)
        assert np.all(np.abs(np.asarray(got, np.float64) - np.asarray(ref, np.float64)) <= 2 * bound)


def _cpu_lowers_scaled_matmul():
    x = np.zeros((1, 1, 32), jnp.float8_e4m3fn)
    s = np.ones((1, 1, 1), jnp.float8_e8m0fnu)
    try:
        fn = jax.jit(lambda *v: jax.nn.scaled_matmul(*v, preferred_element_type=jnp.float32))
        fn.trace(x, x, s, s).lower(lowering_platforms=("cpu",))
        return True
    except NotImplementedError:
        return False

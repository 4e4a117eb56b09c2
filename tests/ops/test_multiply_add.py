"""A float product read only by an add or a subtract is rounded once, with the sum, as XLA:CPU computes it:
its LLVM backend contracts such a pair into one fused multiply-add. The lowering makes the pair one
MultiplyAdd op (lower/lower_multiply_add.cc); a product read twice or kept as a result stays rounded on
its own, as XLA keeps it. Every comparison here is exact: both backends round a*b+c once (or a*b and then
the sum, where neither contracts), so any difference is a different rounding rule, not noise."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_metal_plugin
from jaxcompare import assert_close, check, run_on

# (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24 is a tie that rounds to 1 + 2^-11: minus that, one rounding leaves
# 2^-24 and two roundings leave 0. The rest: random values whose products keep about half their low
# bits under a rounding, plus signed zeros and non-finite values.
TIE_A = np.float32(1 + 2.0**-12)
TIE_C = np.float32(-(1 + 2.0**-11))


def operands(dtype, n=4099, seed=0):
    rng = np.random.default_rng(seed)
    a, b, c = (rng.uniform(-4, 4, n).astype(dtype) for _ in range(3))
    a[:6] = [TIE_A, -TIE_A, 0.0, np.inf, np.nan, 3.0]
    b[:6] = [TIE_A, TIE_A, -0.0, 0.0, 1.0, 2.0]
    c[:6] = [TIE_C, -TIE_C, 0.0, 1.0, 1.0, -6.0]
    return a, b, c


FORMS = {
    "a*b+c": lambda a, b, c: a * b + c,
    "c+a*b": lambda a, b, c: c + a * b,
    "a*b-c": lambda a, b, c: a * b - c,
    "c-a*b": lambda a, b, c: c - a * b,
    "a*b+c*a": lambda a, b, c: a * b + c * a,  # two products: the first operand's is contracted
}


@pytest.mark.parametrize("form", FORMS)
def test_product_and_sum_round_once(form):
    a, b, c = operands(np.float32)
    out = check(FORMS[form], a, b, c, exact=True)
    if form == "a*b+c":
        assert out[0] == np.float32(2.0**-24) and out[1] == np.float32(-(2.0**-24))


def test_the_tie_is_rounded_once_on_cpu_too():
    # What the comparisons above rest on: XLA:CPU does contract, so metal must.
    out = run_on("cpu", lambda a, b, c: a * b + c, TIE_A, TIE_A, TIE_C)
    assert float(out) == 2.0**-24


def test_scalar_step_of_a_time_variable():
    # An adaptive solver's stage times t0 + dt * alpha[i], alpha a constant table read at a loop index.
    alpha = jnp.array([1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0, 1.0, 0.0], jnp.float32)

    def stage_times(t0, dt):
        return jax.lax.fori_loop(0, 6, lambda i, acc: acc.at[i].set(t0 + dt * alpha[i]), jnp.zeros(6, jnp.float32))

    rng = np.random.default_rng(1)
    for t0, dt in zip(rng.uniform(0, 5, 50).astype(np.float32), rng.uniform(0, 2, 50).astype(np.float32)):
        check(stage_times, t0, dt, exact=True)


def test_under_vmap_in_a_loop_and_in_gradients():
    a, b, c = (x.reshape(-1, 1) for x in operands(np.float32, n=300, seed=2))
    check(jax.vmap(lambda a, b, c: a * b + c), a, b, c, exact=True)
    check(lambda a, b, c: jax.lax.fori_loop(0, 3, lambda i, x: x * b + c, a), a, b, c, exact=True)
    # d/dx of x * b + c is b and the cotangent is one: the product of the backward pass is b * 1.
    check(jax.vmap(jax.grad(lambda x, b, c: jnp.sum(x * b - c))), a, b, c, exact=True)


def _shared_loop(a, b, c, d):
    p = a * b
    return (p + c) * (p - d)


def _output_and_loop(a, b, c, d):
    p = a * b
    q = p + c
    return q, q * (p - d)


# How XLA treats a product with several readers, and so what the lowering must do: (function, whether
# the add rounds the product only once).
PATTERNS = {
    # Equal products are one (CSE); a result is kept in memory, and so is a product a reduction or a
    # matrix product reads: the add reads it rounded.
    "equal product returned": (lambda a, b, c, d: (a * b + c, a * b), False),
    "product summed": (lambda a, b, c, d: (lambda p: (p + c, jnp.sum(p)))(a * b), False),
    "product in a matmul": (lambda a, b, c, d: (lambda p: (p + c, p @ d))(a * b), False),
    # Both readers fused into the loop of the op that reads them: one product, read twice, not contracted.
    "two readers of one op": (_shared_loop, False),
    # Readers in loops of their own each get a copy of the product, and the add's copy is contracted.
    "other elementwise reader": (lambda a, b, c, d: (lambda p: (p + c, jnp.exp(p * d)))(a * b), True),
    "two adds, two results": (lambda a, b, c, d: (lambda p: (p + c, p - d))(a * b), True),
    "a reader returned and reused": (_output_and_loop, True),
    # An add and its commuted twin are one op (XLA's CSE sees through operand order): the product then
    # has one reader, and it is contracted.
    "an add and its commuted twin": (lambda a, b, c, d: (lambda p: (p + c) + (c + p))(a * b), True),
}


@pytest.mark.parametrize("pattern", PATTERNS)
def test_a_product_with_several_readers_contracts_where_xla_does(pattern):
    fn, contracted = PATTERNS[pattern]
    a, b, c = (x[:4096].reshape(64, 64) for x in operands(np.float32, seed=3))
    d = np.random.default_rng(6).uniform(-1, 1, (64, 64)).astype(np.float32)
    # The add's result (the first) exactly; the others only keep their readers in the program (a sum's
    # or a matrix product's own rounding is another file's subject).
    expected, actual = run_on("cpu", fn, a, b, c, d), run_on("metal", fn, a, b, c, d)
    assert_close(jax.tree.leaves(actual)[0], jax.tree.leaves(expected)[0], exact=True, what=pattern)
    assert ("MultiplyAdd(" in jax_metal_plugin.mps_graph(fn, a, b, c, d)) == contracted


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16])
def test_half_precision_rounds_the_product(dtype):
    # Each op's result is rounded to the narrow type, so the product is rounded before the sum: no
    # MultiplyAdd. XLA:CPU does the same on most CPUs (it computes in float32 and rounds each op), but
    # on a CPU with AVX512-FP16 it contracts float16 a*b+c into one fused, once-rounded operation, so
    # against it the bound is the product's rounding error and the sum's.
    a, b, c = (x.astype(dtype) for x in operands(np.float32, n=513, seed=4))
    fn = lambda a, b, c: a * b + c  # noqa: E731
    got = np.asarray(run_on("metal", fn, a, b, c)).astype(np.float64)
    # The rule, in numpy: a narrow product is exact in float32, and float32 holds more than twice the
    # narrow types' digits, so rounding a float32 sum to them rounds the exact sum once.
    a32, b32, c32 = (np.asarray(x).astype(np.float32) for x in (a, b, c))
    with np.errstate(invalid="ignore"):  # inf * 0 is NaN here as there
        product = (a32 * b32).astype(dtype)
    want = (product.astype(np.float32) + c32).astype(dtype).astype(np.float64)
    np.testing.assert_array_equal(got, want)
    cpu = np.asarray(run_on("cpu", fn, a, b, c)).astype(np.float64)
    finite = np.isfinite(cpu)
    np.testing.assert_array_equal(got[~finite], cpu[~finite])
    u = 2.0 ** -(jnp.finfo(dtype).nmant + 1)
    with np.errstate(invalid="ignore"):
        ab = a32.astype(np.float64) * b32.astype(np.float64)
    bound = u * (np.abs(ab) + np.abs(ab + c32) + np.abs(product.astype(np.float64) + c32)) * 1.01
    assert np.all(np.abs(got - cpu)[finite] <= bound[finite])
    assert "MultiplyAdd(" not in jax_metal_plugin.mps_graph(fn, a, b, c)


def test_float64_rounds_once_too(x64):
    a, b, c = (x.astype(np.float64) for x in operands(np.float32, seed=5))
    a[0] = b[0] = 1 + 2.0**-27  # (1 + 2^-27)^2 = 1 + 2^-26 + 2^-54: a float64 tie
    c[0] = -(1 + 2.0**-26)
    out = check(lambda a, b, c: a * b + c, a, b, c, exact=True)
    assert out[0] == 2.0**-54
    assert "MultiplyAdd(" in jax_metal_plugin.mps_graph(lambda a, b, c: a * b + c, a, b, c)

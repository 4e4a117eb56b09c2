"""complex64 on metal against JAX's CPU backend: arithmetic, elementwise math (MPSGraph's complex ops
and the real-arithmetic decompositions), special values, compare/select, dot, reductions, scans, sort,
conversions, grads and vmap (complex128: test_x64.py and test_placement.py)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from jaxcompare import check, check_reduction, random_array

RNG = np.random.default_rng(11)
TOL = {"rtol": 1e-4, "atol": 1e-5}


def cgrid(values):
    """Every re + i*im over `values`: zeros of both signs, tiny, moderate, large and beyond overflow."""
    re, im = np.meshgrid(np.asarray(values, np.float32), np.asarray(values, np.float32))
    z = np.empty(re.shape, np.complex64)  # re + 1j * im would make 1j * inf nan + inf j
    z.real, z.imag = re, im
    return z.ravel()


GRID = cgrid([0.0, -0.0, 1e-6, -1e-6, 0.3, -2.0, 5.0, 12.0, -15.0, 30.0, 100.0, -100.0])


def test_arithmetic_and_broadcasting():
    a = random_array(RNG, (4, 5), np.complex64)
    b = random_array(RNG, (5,), np.complex64)
    check(lambda a, b: (a + b, a - b, a * b, a / b, -a, a * 2.5, (1 - 2j) / a, a + 1), a, b, **TOL)


UNARY = {
    "exp": jnp.exp, "log": jnp.log, "sqrt": jnp.sqrt, "rsqrt": lax.rsqrt, "sin": jnp.sin, "cos": jnp.cos,
    "tan": jnp.tan, "tanh": jnp.tanh, "sinh": jnp.sinh, "cosh": jnp.cosh, "expm1": jnp.expm1,
    "log1p": jnp.log1p, "abs": jnp.abs, "sign": jnp.sign, "sigmoid": jax.nn.sigmoid, "square": jnp.square,
    "reciprocal": jnp.reciprocal, "angle": jnp.angle, "conj": jnp.conj, "real": jnp.real, "imag": jnp.imag,
    "arcsin": jnp.arcsin, "arccos": jnp.arccos, "arctan": jnp.arctan, "arcsinh": jnp.arcsinh,
    "arccosh": jnp.arccosh, "arctanh": jnp.arctanh, "log10": jnp.log10, "exp2": jnp.exp2,
    "isfinite": jnp.isfinite, "isnan": jnp.isnan, "isinf": jnp.isinf,
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_math(name):
    z = random_array(RNG, (64,), np.complex64)
    check(UNARY[name], z, **TOL)


@pytest.mark.parametrize("name", ["tanh", "tan", "expm1", "log1p", "rsqrt", "sin", "cos", "exp", "log", "sqrt",
                                  "abs", "sign", "sigmoid"])
def test_unary_math_special_values(name):
    # Zeros of both signs, values where tanh saturates, exp overflows and cancellation threatens.
    check(UNARY[name], GRID, **TOL)


def test_small_arguments_keep_precision():
    z = cgrid([1e-7, -3e-6, 2e-5, 0.0])
    check(lambda z: (jnp.expm1(z), jnp.log1p(z), jnp.tanh(z), jnp.tan(z), jnp.sin(z)), z, rtol=1e-5, atol=1e-12)


def test_power():
    z = random_array(RNG, (32,), np.complex64)
    w = random_array(RNG, (32,), np.complex64, -1, 1)
    check(lambda z, w: (z ** 3, z ** -2, z ** w, z ** 0.5, jnp.power(z, 2 + 1j)), z, w, **TOL)
    # 0^0 = 1, 0^y = 0 for real y > 0, NaN otherwise (XLA's rule).
    exps = np.array([0, 0.5, -0.5, 0.5 + 0.5j, 1j, 2, np.nan], np.complex64)
    zeros = np.array([0, -0.0, 0, 0, -0.0, 0, 0], np.complex64)
    check(lambda a, b: a ** b, zeros, exps)


def test_compare_select_and_where():
    a = random_array(RNG, (20,), np.complex64)
    b = np.where(RNG.random(20) < 0.4, a, random_array(RNG, (20,), np.complex64)).astype(np.complex64)
    b[3] = np.nan
    check(lambda a, b: (a == b, a != b, jnp.where(a == b, a, b * 2), lax.select(jnp.abs(a) > 1, a, b)), a, b)


def test_dot_general_and_einsum():
    a = random_array(RNG, (3, 4, 5), np.complex64)
    b = random_array(RNG, (3, 5, 2), np.complex64)
    # A complex product's terms each take two real products and a sum: twice the real length.
    check_reduction(lambda a, b: (a @ b, jnp.einsum("bij,bjk->ik", a, b), jnp.vdot(a, a)), a, b,
                    k=[2 * 5, 2 * 3 * 5, 2 * 3 * 4 * 5])
    r = random_array(RNG, (5, 2), np.float32)
    check_reduction(lambda a, r: a @ r.astype(jnp.complex64), a, r, k=2 * 5)


def test_reductions_and_scans():
    z = random_array(RNG, (6, 7), np.complex64)
    check_reduction(lambda z: (jnp.sum(z), jnp.sum(z, axis=0), jnp.mean(z, axis=1), jnp.linalg.norm(z)), z,
                    k=[42, 6, 7 + 1, 2 * 42 + 2])
    prefix = np.arange(1, 8)[None, :]
    check_reduction(lambda z: (jnp.cumsum(z, axis=1), jnp.cumprod(z * 0.5, axis=0), lax.cumsum(z, axis=1, reverse=True)), z,
                    k=[prefix, 2 * (np.arange(1, 7)[:, None] + 1), prefix[:, ::-1]])
    # Products (pairwise halves on metal, sequential on CPU): each complex product's relative error is a
    # few eps, so like cumprod twice the factor count.
    check_reduction(lambda z: (jnp.prod(z * 0.5, axis=0), jnp.prod(z * 0.5, axis=1), jnp.prod(z * 0.5)), z,
                    k=[2 * 6 + 2, 2 * 7 + 2, 2 * 42 + 2])


def test_max_and_min_order_by_real_then_imaginary():
    # Ties in the real part (small integers) so the imaginary part decides; the reduce body
    # (compare real, then imaginary, then select) runs on whole halves of the operand.
    re = RNG.integers(0, 3, (3, 4, 5)).astype(np.float32)
    im = RNG.integers(-4, 4, (3, 4, 5)).astype(np.float32)
    z = (re + 1j * im).astype(np.complex64)
    check(lambda z: (jnp.max(z), jnp.min(z, axis=0), jnp.max(z, axis=(1, 2)),
                     lax.reduce(z, np.complex64(np.inf), lax.min, (0, 2))), z, exact=True)
    check(jax.grad(lambda z: jnp.max(z, axis=1).real.sum()), z, exact=True)


def test_scans_stay_linear():
    from jax_metal_plugin import tools
    z = np.ones((4, 512), np.complex64)
    text = tools.mps_graph(lambda z: jnp.cumsum(z, axis=1), z)
    assert text.count("CumulativeSum(") == 2 and "Slice(" not in text
    assert text.count("\n") < 40, text  # no per-element ops: O(1) MPS ops for a sum, O(log n) for a product
    assert tools.mps_graph(lambda z: jnp.cumprod(z, axis=1), z).count("\n") < 200


def test_sort_orders_by_real_then_imaginary():
    re = (RNG.integers(0, 4, 40)).astype(np.float32)
    im = (RNG.integers(0, 3, 40)).astype(np.float32)
    re[::9] = np.nan
    im[5] = -0.0
    z = (re + 1j * im).astype(np.complex64)
    check(lambda z: (jnp.sort(z), jnp.argsort(z), jnp.argsort(z, descending=True)), z, exact=True)


def test_conversions():
    z = random_array(RNG, (10,), np.complex64, -300, 300)
    x = random_array(RNG, (10,), np.float32)
    i = random_array(RNG, (10,), np.int32) % 1000
    check(lambda z: (jnp.real(z).astype(jnp.float16), lax.convert_element_type(jnp.real(z), jnp.int32)), z)
    check(lambda x, i: (x.astype(jnp.complex64), i.astype(jnp.complex64), lax.complex(x, x * 2),
                        x.astype(jnp.bfloat16).astype(jnp.complex64)), x, i)


def test_grads():
    z = random_array(RNG, (8,), np.complex64)
    x = random_array(RNG, (8,), np.float32)
    # Real-valued functions of complex inputs (JAX returns the conjugate cotangent).
    check(jax.grad(lambda z: jnp.sum(jnp.abs(jnp.tanh(z)) ** 2)), z, **TOL)
    check(jax.grad(lambda z: jnp.real(jnp.sum(jnp.sin(z) * jnp.log(z) + jnp.expm1(z) / (z + 3)))), z, **TOL)
    # Holomorphic functions.
    check(jax.grad(lambda z: jnp.sum(jnp.exp(z) * z ** 2).real), z, **TOL)
    check(jax.vmap(jax.grad(lambda z: jnp.tan(z), holomorphic=True)), z * 0.3, **TOL)
    # Through complex intermediates from real inputs and back.
    check(jax.grad(lambda x: jnp.sum(jnp.abs(jnp.exp(x * (1 + 2j)) + jnp.sqrt(x + 0j)) ** 2)), x, **TOL)
    check(lambda x: jax.jvp(lambda x: jnp.angle(jnp.exp(1j * x) * (2 + x)), (x,), (jnp.ones_like(x),)), x, **TOL)


def test_vmap():
    z = random_array(RNG, (5, 6), np.complex64)
    check_reduction(jax.vmap(lambda r: jnp.outer(r, jnp.conj(r)) @ r), z, k=2 * (6 + 1))
    check(jax.vmap(lambda r: jnp.sort(r)), z, exact=True)


def test_complex_ops_stay_complex_or_decompose():
    from jax_metal_plugin import tools
    z = np.ones(8, np.complex64)
    assert "Exponent(" in tools.mps_graph(jnp.exp, z)
    text = tools.mps_graph(jnp.tanh, z)
    assert "RealPart(" in text and "ComplexFromParts(" in text and "Tanh(" not in text


def test_sign_with_infinite_and_nan_parts():
    # Part by part, as XLA: sign(-inf + 2j) is nan + 0j (a complex division by |z| would give nan + nanj).
    vals = [np.inf, -np.inf, np.nan, 0.0, -0.0, -2.0, 3e38]  # no subnormals: XLA:CPU flushes them
    check(jnp.sign, cgrid(vals))


@pytest.mark.parametrize("name", ["exp", "cosh", "sinh", "tanh", "tan"])
def test_infinite_and_nan_parts(name):
    # XLA's limits, part by part (a complex NaN check would pass nan + 1j for nan + nanj): tanh(x + i inf)
    # is NaN + iNaN for finite x, tanh(±inf + iy) = ±1 + i0; cosh and sinh reach the plugin as CHLO's
    # decompositions into complex exp, which at infinite parts is e^x (cos y + i sin y), not C's cexp.
    vals = [np.inf, -np.inf, np.nan, 0.0, -0.0, 1.0, -2.5, 20.0, 1e20, -3e38]  # no subnormals: XLA:CPU flushes them
    f = UNARY[name]
    check(lambda z: (jnp.real(f(z)), jnp.imag(f(z))), cgrid(vals), **TOL)


def test_product_with_infinite_and_nan_parts():
    # As XLA computes it, (ac - bd, ad + bc), compared part by part: C99 Annex G would make
    # (inf + inf j)(1 + 0j) inf + inf j where XLA gives nan + nan j.
    z = cgrid([np.inf, -np.inf, np.nan, 0.0, -0.0, 1.0, -2.5])
    check(lambda a, b: (jnp.real(a * b), jnp.imag(a * b)), z[:, None], z[None, :])

"""The multiply-add rule (docs/multiply-add.md) on random elementwise programs of add, subtract,
multiply, negate and constants, and on their gradients: swapping the operands of every add and
multiply gives bit-identical results. The rule decides which products are rounded, so it must not
depend on the order an expression happens to be written in; XLA:CPU itself does in a few programs
(LLVM contracts an add's first product), and there the rule keeps the order independence.
scripts/measure_multiply_add.py measures the same programs against XLA:CPU, over many more."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import arith_programs as ap
from jaxcompare import check, run_on

PROGRAMS = 80


def _batch(fns):
    return lambda all_args: [f(*a) for f, a in zip(fns, all_args)]


@pytest.mark.parametrize("kind", ["forward", "gradient"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_mirror_images_round_alike(kind, dtype, request):
    if dtype == np.float64:
        request.getfixturevalue("x64")
    make = ap.function if kind == "forward" else ap.gradient
    programs = [ap.random_program(np.random.default_rng([7, i])) for i in range(PROGRAMS)]
    args = [ap.inputs(np.random.default_rng([7, i, 1]), p, dtype) for i, p in enumerate(programs)]
    out = run_on("metal", _batch([make(p, dtype) for p in programs]), args)
    mirrored = run_on("metal", _batch([make(p.mirror(), dtype) for p in programs]), args)
    differ = [p.describe() for p, a, b in zip(programs, out, mirrored) if not ap.same(a, b)]
    assert not differ, f"{len(differ)} of {PROGRAMS} programs round otherwise mirrored: {differ[:3]}"
    # The programs are not trivial: their results are finite and not all alike.
    leaves = np.concatenate([np.ravel(x) for x in jax.tree.leaves(out)])
    assert np.isfinite(leaves).mean() > 0.9 and np.unique(leaves).size > PROGRAMS


def matyas(p):
    x, y = p
    return 0.26 * (x**2 + y**2) - 0.48 * x * y


def test_matyas_gradient_is_symmetric_and_equals_cpu():
    # A symmetric function: at (a, a) both partial derivatives are one expression, mirrored.
    for a in (6.0, 1.0 / 3.0, -2.5, 1e3):
        g = check(jax.grad(matyas), jnp.full(2, a, jnp.float32), exact=True)
        assert g[0] == g[1], (a, g)
    rng = np.random.default_rng(3)
    for x, y in rng.uniform(-10, 10, (20, 2)).astype(np.float32):
        g = check(jax.grad(matyas), np.array([x, y]), exact=True)
        swapped = check(jax.grad(matyas), np.array([y, x]), exact=True)
        np.testing.assert_array_equal(g, swapped[::-1])

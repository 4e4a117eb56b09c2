"""Two products neither of which reads the other's result run side by side on the host's threads
(exec/host/host_plan_matmul.cc, PairMatMuls; host_matmul.cc, RunMatMulPair): the backward pass of a dense layer
makes two such products from one gradient. A later product moves up to run beside an earlier one, and
what either reads or writes stays allocated until both are done. The same values as CPU in each form,
in float32, float64 and complex64, straight and inside a loop. Float64 runs on the host on every
executor; float32 and complex64 reach the host's pairs with JAX_METAL_EXECUTOR=placed."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from jaxcompare import check_reduction, jax_config, random_array

N = 64  # 64x64 by 64x64: each product is worth a thread of its own


def _mats(seed, dtype, count, n=N):
    # A generator per test: its inputs do not depend on which tests ran before it.
    rng = np.random.default_rng(seed)
    return [random_array(rng, (n, n), dtype, low=-1.0, high=1.0) for _ in range(count)]


def _squash(z):
    """An elementwise op between products whose error bound carries through: tanh on the reals and
    z / (1 + |z|) on the complex plane are both 1-Lipschitz and at most 1 in absolute value (complex
    tanh has poles, so an error in its argument has no bound there)."""
    return z / (1 + jnp.abs(z)) if jnp.iscomplexobj(z) else jnp.tanh(z)


# _squash's own roundings: a few eps of a value at most 1, per element, on each side.
SQUASH_ROUNDINGS = 4


DTYPES = [np.float32, np.float64, np.complex64]


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_dense_layers_two_gradient_products(dtype):
    # g @ w^T and x^T @ g read one gradient, and the second is added to the weights.
    with jax_config("jax_enable_x64", dtype == np.float64):
        x, g, w = _mats(1, dtype, 3)
        check_reduction(lambda x, g, w: (g @ w.T, w - 0.125 * (x.T @ g)), x, g, w, k=N + 1,
                        magnitude=lambda x, g, w: (np.abs(g) @ np.abs(w).T, np.abs(w) + 0.125 * np.abs(x).T @ np.abs(g)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_an_operand_last_read_by_the_first_product(dtype):
    # _squash(x) dies with the first product; the second's result, of the same size and kept in the
    # arena for the op after it, must not be given _squash(x)'s memory while the first still reads it.
    # Products long enough that the two overlap for a while.
    n = 256
    with jax_config("jax_enable_x64", dtype == np.float64):
        x, w, g, v = _mats(2, dtype, 4, n)

        def f(x, w, g, v):
            return _squash(x) @ w, _squash(g @ v.T)

        # |_squash| <= 1 and its roundings are a few eps of that; the second product's error passes
        # through a 1-Lipschitz op.
        check_reduction(f, x, w, g, v, k=n + SQUASH_ROUNDINGS,
                        magnitude=lambda x, w, g, v: (np.ones_like(np.abs(x)) @ np.abs(w), np.abs(g) @ np.abs(v).T + 1))


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_later_independent_product_moves_up(dtype):
    # _squash(x @ w) sits between the two products; g @ v moves before it, and the chain that reads the
    # first product's result stays after it.
    with jax_config("jax_enable_x64", dtype == np.float64):
        x, w, g, v = _mats(3, dtype, 4)

        def f(x, w, g, v):
            a = x @ w
            e = _squash(a) @ v
            return e, _squash(g @ v) + 1

        # e's error: the first product's (at most N eps |x| @ |w| per element) through the 1-Lipschitz
        # _squash and then summed against |v|, plus the second product's own over |_squash(a)| <= 1.
        check_reduction(f, x, w, g, v, k=N + SQUASH_ROUNDINGS,
                        magnitude=lambda x, w, g, v: ((np.abs(x) @ np.abs(w) + 1) @ np.abs(v), np.abs(g) @ np.abs(v) + 1))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_two_layer_training_loop(dtype):
    # Every iteration's backward pass pairs each layer's two products over buffers bound once.
    x, y, w1, w2 = _mats(4, dtype, 4)
    w1, w2 = w1 / 8, w2 / 8

    def train(w1, w2, x, y):
        def loss(ws):
            h = jnp.tanh(x @ ws[0])
            return 0.5 * jnp.sum((h @ ws[1] - y) ** 2) / N

        def step(_, ws):
            g = jax.grad(loss)(ws)
            return tuple(w - 0.05 * d for w, d in zip(ws, g))

        return lax.fori_loop(0, 10, step, (w1, w2))

    # Ten steps, each four products of N terms and the sums of the loss gradient.
    with jax_config("jax_enable_x64", dtype == np.float64):
        check_reduction(train, w1, w2, x, y, k=10 * 4 * (N + 1), magnitude="normwise")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pairs_with_vmap_and_grad_match_cpu(dtype):
    # The two products' gradient (paired), and the same two per example of a batch (vmap makes each
    # one batched product, which is not).
    with jax_config("jax_enable_x64", dtype == np.float64):
        rng = np.random.default_rng(5)
        x, g, w = _mats(6, dtype, 3)
        f = lambda w, x, g: jnp.sum(jnp.tanh(g @ w.T) * (x @ w))
        check_reduction(jax.grad(f, argnums=(0, 1, 2)), w, x, g, k=4 * (N + 1), magnitude="normwise")
        xb, gb = (random_array(rng, (3, N, N), dtype, -1.0, 1.0) for _ in range(2))
        check_reduction(jax.vmap(lambda x, g: (g @ w.T, x.T @ g)), xb, gb, k=N + 1, magnitude="normwise")

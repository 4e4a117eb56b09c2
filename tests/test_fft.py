"""FFT, IFFT, RFFT and IRFFT over 1-3 dims, any rank and axes, odd and prime sizes, against the CPU."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcompare import check, random_array

RNG = np.random.default_rng(9)
TOL = {"rtol": 2e-4, "atol": 2e-4}


@pytest.mark.parametrize("n", [1, 2, 7, 13, 64, 97])
def test_1d_transforms(n):
    z = random_array(RNG, (3, n), np.complex64)
    x = random_array(RNG, (3, n), np.float32)
    check(lambda z: (jnp.fft.fft(z), jnp.fft.ifft(z)), z, **TOL)
    check(lambda x: (jnp.fft.rfft(x), jnp.fft.irfft(jnp.fft.rfft(x), n=n)), x, **TOL)
    check(lambda x: jnp.fft.irfft(jnp.fft.rfft(x), n=max(n - 1, 1)), x, **TOL)  # odd/even output lengths


def test_multi_dim_and_axes():
    z = random_array(RNG, (2, 5, 6, 7), np.complex64)
    x = random_array(RNG, (2, 5, 6, 7), np.float32)
    check(lambda z: (jnp.fft.fft2(z), jnp.fft.ifftn(z, axes=(1, 2, 3)), jnp.fft.fft(z, axis=1)), z, **TOL)
    check(lambda x: (jnp.fft.rfft2(x), jnp.fft.irfftn(jnp.fft.rfftn(x, axes=(0, 2, 3)), s=(2, 6, 7), axes=(0, 2, 3))), x, **TOL)


def test_fft_grad_and_vmap():
    x = random_array(RNG, (4, 16), np.float32)
    check(jax.grad(lambda x: jnp.sum(jnp.abs(jnp.fft.rfft(x)) ** 2)), x, rtol=1e-3, atol=1e-3)
    check(jax.vmap(lambda r: jnp.fft.fft(r.astype(jnp.complex64))), x, **TOL)


def test_fft_lowers_to_mpsgraph_fft():
    from jax_metal_plugin import tools
    text = tools.mps_graph(jnp.fft.rfft, np.ones((3, 8), np.float32))
    assert "RealToHermiteanFFT(" in text

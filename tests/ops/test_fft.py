"""FFT, IFFT, RFFT and IRFFT over 1-3 dims, any rank and axes, odd and prime sizes, against the CPU."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcompare import check_fft, random_array

RNG = np.random.default_rng(9)


@pytest.mark.parametrize("n", [1, 2, 7, 13, 64, 97])
def test_1d_transforms(n):
    z = random_array(RNG, (3, n), np.complex64)
    x = random_array(RNG, (3, n), np.float32)
    check_fft(lambda z: (jnp.fft.fft(z), jnp.fft.ifft(z)), z)
    check_fft(jnp.fft.rfft, x)
    check_fft(lambda x: jnp.fft.irfft(jnp.fft.rfft(x), n=n), x, passes=2)
    check_fft(lambda x: jnp.fft.irfft(jnp.fft.rfft(x), n=max(n - 1, 1)), x, passes=2)  # odd/even output lengths


def test_multi_dim_and_axes():
    z = random_array(RNG, (2, 5, 6, 7), np.complex64)
    x = random_array(RNG, (2, 5, 6, 7), np.float32)
    check_fft(jnp.fft.fft2, z, axes=(2, 3))
    check_fft(lambda z: jnp.fft.ifftn(z, axes=(1, 2, 3)), z, axes=(1, 2, 3))
    check_fft(lambda z: jnp.fft.fft(z, axis=1), z, axes=(1,))
    check_fft(jnp.fft.rfft2, x, axes=(2, 3))
    check_fft(lambda x: jnp.fft.irfftn(jnp.fft.rfftn(x, axes=(0, 2, 3)), s=(2, 6, 7), axes=(0, 2, 3)), x, axes=(0, 2, 3), passes=2)


def test_fft_grad_and_vmap():
    x = random_array(RNG, (4, 16), np.float32)
    check_fft(jax.grad(lambda x: jnp.sum(jnp.abs(jnp.fft.rfft(x)) ** 2)), x, passes=2)
    check_fft(jax.vmap(lambda r: jnp.fft.fft(r.astype(jnp.complex64))), x)


def test_fft_lowers_to_mpsgraph_fft():
    from jax_metal_plugin import tools
    text = tools.mps_graph(jnp.fft.rfft, np.ones((3, 8), np.float32))
    assert "RealToHermiteanFFT(" in text


# ---- sizes, ranks, real transforms of every parity, special values, grads


@pytest.mark.parametrize("n", [3, 5, 16, 101, 128, 997, 4096, 65537, 1 << 17])
def test_1d_sizes_odd_prime_and_large(n):
    z = random_array(RNG, (n,), np.complex64, -1, 1)
    x = random_array(RNG, (n,), np.float32, -1, 1)
    check_fft(lambda z: (jnp.fft.fft(z), jnp.fft.ifft(z)), z)
    check_fft(jnp.fft.rfft, x)
    check_fft(lambda x: jnp.fft.irfft(jnp.fft.rfft(x), n=n), x, passes=2)


@pytest.mark.parametrize("batch, n", [((64,), 1024), ((3, 5, 7), 96), ((2, 70), 257)])
def test_large_batches_of_transforms(batch, n):
    # Enough independent transforms that the host splits them over its threads; each must land in its
    # own row, whatever range of the batch computed it.
    z = random_array(RNG, batch + (n,), np.complex64)
    x = random_array(RNG, batch + (n,), np.float32)
    check_fft(lambda z: (jnp.fft.fft(z), jnp.fft.ifft(z)), z)
    check_fft(jnp.fft.rfft, x)
    check_fft(lambda x: jnp.fft.irfft(jnp.fft.rfft(x) * 0.5, n=n), x, passes=2)
    check_fft(lambda z: jnp.fft.fft2(z.reshape(z.shape[:-1] + (-1, 2 if n % 2 == 0 else 1))), z, axes=(-2, -1))


def test_large_batches_of_float64_transforms(x64):
    z = random_array(RNG, (48, 512), np.complex128)
    x = random_array(RNG, (48, 512), np.float64)
    check_fft(lambda z: (jnp.fft.fft(z), jnp.fft.ifft(z)), z)
    check_fft(lambda x: jnp.fft.irfft(jnp.fft.rfft(x), n=512), x, passes=2)


@pytest.mark.parametrize("n", [1, 2, 7, 8, 15, 16])
def test_irfft_of_arbitrary_spectra(n):
    # Imaginary parts at the zero and Nyquist bins are not read by a C2R transform; a spectrum with
    # more or fewer bins than n needs is cut or zero-padded by jnp.
    bins = n // 2 + 1
    z = random_array(RNG, (3, bins), np.complex64)
    check_fft(lambda z: jnp.fft.irfft(z, n=n), z)
    check_fft(lambda z: (jnp.fft.irfft(z, n=2 * n + 1), jnp.fft.irfft(z, n=max(n - 3, 1))), z)
    z2 = random_array(RNG, (4, 5, bins), np.complex64)
    check_fft(lambda z: jnp.fft.irfft2(z, s=(5, n)), z2, axes=(1, 2))
    check_fft(lambda z: jnp.fft.irfftn(z, s=(4, 5, n)), z2, axes=(0, 1, 2))


@pytest.mark.parametrize("shape", [(7,), (3, 4), (2, 3, 5), (2, 2, 3, 4), (2, 1, 3, 2, 5), (1, 2, 1, 3, 4, 5)],
                         ids=lambda s: "x".join(map(str, s)))
def test_any_rank_and_axes(shape):
    z = random_array(RNG, shape, np.complex64)
    x = random_array(RNG, shape, np.float32)
    k = min(len(shape), 3)
    axes = tuple(range(len(shape) - k, len(shape)))
    check_fft(lambda z: (jnp.fft.fftn(z, axes=axes), jnp.fft.ifftn(z, axes=axes)), z, axes=axes)
    check_fft(lambda z: jnp.fft.fft(z, axis=0), z, axes=(0,))
    if len(shape) > 1:
        check_fft(lambda z: jnp.fft.ifft2(z, axes=(0, -1)), z, axes=(0, len(shape) - 1))
    check_fft(lambda x: jnp.fft.rfftn(x, axes=axes), x, axes=axes)
    check_fft(lambda x: jnp.fft.irfftn(jnp.fft.rfftn(x, axes=axes), s=[shape[a] for a in axes], axes=axes), x, axes=axes, passes=2)
    check_fft(lambda x: jnp.fft.rfft(x, axis=0), x, axes=(0,))


def test_more_than_three_axes_and_real_input_to_fft():
    z = random_array(RNG, (2, 3, 4, 5), np.complex64)
    x = random_array(RNG, (6, 10), np.float32)
    h = random_array(RNG, (6, 10), np.float16)
    check_fft(lambda z: (jnp.fft.fftn(z), jnp.fft.ifftn(z)), z, axes=(0, 1, 2, 3))
    check_fft(lambda x: (jnp.fft.fft(x), jnp.fft.hfft(x.astype(jnp.complex64)), jnp.fft.ihfft(x)), x)
    check_fft(jnp.fft.fft2, x, axes=(0, 1))
    check_fft(jnp.fft.fft, h)  # float16 input: transformed in complex64


def test_nan_spreads_to_its_row():
    x = random_array(RNG, (3, 16), np.float32)
    x[1, 4] = np.nan
    z = x.astype(np.complex64)
    check_fft(lambda z: jnp.fft.fft(z), z)
    check_fft(lambda x: jnp.fft.irfft(jnp.fft.rfft(x), n=16), x, passes=2)


def test_fft_grads_and_vmap_of_each_kind():
    z = random_array(RNG, (3, 8), np.complex64)
    x = random_array(RNG, (3, 8), np.float32)
    # Gradients: a transform, the cotangent's elementwise math, the transposed transform.
    check_fft(jax.grad(lambda z: jnp.sum(jnp.abs(jnp.fft.ifft(z) * jnp.arange(8)) ** 2)), z, passes=2)
    check_fft(jax.grad(lambda x: jnp.sum(jnp.fft.irfft(jnp.fft.rfft(x) * (1 + 1j), n=8) ** 3)), x, passes=4)
    check_fft(jax.grad(lambda x: jnp.sum(jnp.abs(jnp.fft.rfft2(x)))), x, axes=(0, 1), passes=2)
    check_fft(jax.grad(lambda z: jnp.sum(jnp.fft.irfft2(z, s=(3, 7)) ** 2)), z[:, :4], axes=(0, 1), passes=2)
    check_fft(jax.vmap(lambda r: jnp.fft.irfft(r, n=5)), z[:, :4])
    check_fft(jax.vmap(lambda r: jnp.fft.fft2(r.reshape(2, 2))), z[:, :4], axes=(1, 2))


def test_graphs_use_mpsgraph_ffts_within_rank_4():
    from jax_metal_plugin import tools
    x = np.ones((2, 3, 4, 5, 6), np.float32)
    z = x.astype(np.complex64)
    text = tools.mps_graph(lambda z: jnp.fft.fftn(z, axes=(2, 3, 4)), z)
    assert text.count("FFT(") == 1 and "complex<f32>[6,4,5,6]" in text
    text = tools.mps_graph(lambda x: jnp.fft.rfftn(x, axes=(2, 3, 4)), x)
    assert "RealToHermiteanFFT(" in text and "f32[6,4,5,6]" in text
    text = tools.mps_graph(lambda z: jnp.fft.irfft(z, n=11), z)
    assert "HermiteanToRealFFT(" in text and "f32[120,11]" in text
    assert "FFT(" in tools.mps_graph(jnp.fft.ifft, z)

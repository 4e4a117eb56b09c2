"""Convolutions: 1-D/2-D/3-D, any dimension numbers, strides, padding, dilations, groups, and the
gradients (which bring lhs dilation and batch groups), on metal against the CPU backend."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from jaxcompare import check, random_array

RNG = np.random.default_rng(12)
TOL = {"rtol": 1e-4, "atol": 1e-4}


def conv(x, w, strides, padding, dn, lhs=None, rhs=None, groups=1):
    return lax.conv_general_dilated(x, w, strides, padding, lhs_dilation=lhs, rhs_dilation=rhs,
                                    dimension_numbers=dn, feature_group_count=groups)


@pytest.mark.parametrize("strides,padding,rhs", [((1, 1), "SAME", None), ((2, 1), "VALID", None),
                                                 ((1, 2), ((2, 1), (0, -1)), (2, 1))], ids=str)
def test_conv2d_variants_and_grads(strides, padding, rhs):
    x = random_array(RNG, (2, 9, 8, 4), np.float32)
    w = random_array(RNG, (3, 3, 4, 6), np.float32)
    f = lambda x, w: conv(x, w, strides, padding, ("NHWC", "HWIO", "NHWC"), rhs=rhs)
    check(f, x, w, **TOL)
    check(jax.grad(lambda x, w: jnp.sum(f(x, w) ** 2), argnums=(0, 1)), x, w, rtol=1e-3, atol=1e-3)


def test_nchw_grouped_depthwise_and_transposed():
    x = random_array(RNG, (2, 6, 7, 7), np.float32)
    w = random_array(RNG, (6, 3, 3, 3), np.float32)  # OIHW, 2 groups of 3 channels
    check(lambda x, w: conv(x, w, (1, 1), "SAME", ("NCHW", "OIHW", "NCHW"), groups=2), x, w, **TOL)
    dw = random_array(RNG, (6, 1, 3, 3), np.float32)  # depthwise
    f = lambda x, w: conv(x, w, (2, 2), "SAME", ("NCHW", "OIHW", "NCHW"), groups=6)
    check(f, x, dw, **TOL)
    check(jax.grad(lambda x, w: jnp.sum(f(x, w) ** 2), argnums=(0, 1)), x, dw, rtol=1e-3, atol=1e-3)
    tw = random_array(RNG, (3, 3, 6, 4), np.float32)
    check(lambda x, w: lax.conv_transpose(x, w, (2, 2), "SAME", dimension_numbers=("NCHW", "HWIO", "NCHW")), x, tw, **TOL)


def test_conv1d_and_conv3d():
    x1 = random_array(RNG, (2, 11, 3), np.float32)
    w1 = random_array(RNG, (4, 3, 5), np.float32)
    check(lambda x, w: conv(x, w, (2,), "SAME", ("NWC", "WIO", "NWC"), rhs=(2,)), x1, w1, **TOL)
    x3 = random_array(RNG, (1, 5, 6, 6, 2), np.float32)
    w3 = random_array(RNG, (3, 2, 3, 2, 4), np.float32)
    f3 = lambda x, w: conv(x, w, (1, 2, 1), "SAME", ("NDHWC", "DHWIO", "NDHWC"))
    check(f3, x3, w3, **TOL)
    check(jax.grad(lambda x, w: jnp.sum(f3(x, w) ** 2), argnums=(0, 1)), x3, w3, rtol=1e-3, atol=1e-3)


def test_low_precision_conv():
    x = random_array(RNG, (1, 8, 8, 4), jnp.bfloat16)
    w = random_array(RNG, (3, 3, 4, 4), jnp.bfloat16)
    check(lambda x, w: conv(x, w, (1, 1), "SAME", ("NHWC", "HWIO", "NHWC")), x, w, rtol=3e-2, atol=1e-1)

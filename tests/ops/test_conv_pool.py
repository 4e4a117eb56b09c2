"""Convolutions (1-D/2-D/3-D, any dimension numbers, strides, padding, dilations, feature and batch
groups, and the gradients, which bring lhs dilation and batch groups) and pooling (reduce_window of
every kind, select_and_scatter for max/min-pool gradients), on metal against the CPU backend."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from jaxcompare import check, check_reduction, random_array, run_on

RNG = np.random.default_rng(12)


def conv(x, w, strides, padding, dn, lhs=None, rhs=None, groups=1, batch_groups=1, **kw):
    return lax.conv_general_dilated(x, w, strides, padding, lhs_dilation=lhs, rhs_dilation=rhs, dimension_numbers=dn,
                                    feature_group_count=groups, batch_group_count=batch_groups, **kw)


def grads(f):
    return jax.grad(lambda x, w: jnp.sum(f(x, w) ** 2), argnums=(0, 1))


def terms(f, x, w):
    """How many products each element of f(x, w) sums (f on all-ones operands counts them), and for
    grads(f) each gradient's chain of two such sums: the forward's count plus the transposed
    convolution's (the vjp of all-ones counts its terms)."""
    ones = lambda a: np.ones(a.shape, np.float32)  # noqa: E731

    def count(x, w):
        y, vjp = jax.vjp(f, x, w)
        dx, dw = vjp(jnp.ones_like(y))
        return jnp.max(y), jnp.max(dx), jnp.max(dw)

    fwd, dx, dw = (int(v) for v in run_on("cpu", count, ones(x), ones(w)))
    return fwd, [fwd + dx, fwd + dw]


def check_conv(f, x, w, **kw):
    """f and grads(f) on metal against the CPU within the rounding of their sums (check_reduction)."""
    fwd, bwd = terms(f, x, w)
    check_reduction(f, x, w, k=fwd, **kw)
    check_reduction(grads(f), x, w, k=bwd, **kw)


# ---- convolution


@pytest.mark.parametrize("strides,padding,rhs", [((1, 1), "SAME", None), ((2, 1), "VALID", None),
                                                 ((1, 2), ((2, 1), (0, -1)), (2, 1))], ids=str)
def test_conv2d_variants_and_grads(strides, padding, rhs):
    x = random_array(RNG, (2, 9, 8, 4), np.float32)
    w = random_array(RNG, (3, 3, 4, 6), np.float32)
    f = lambda x, w: conv(x, w, strides, padding, ("NHWC", "HWIO", "NHWC"), rhs=rhs)
    check_conv(f, x, w)


@pytest.mark.parametrize("dn", [("NCHW", "OIHW", "NCHW"), ("NHWC", "OHWI", "NHWC"), ("CHWN", "IHWO", "NCHW"),
                                ("HWNC", "HWOI", "CWHN")], ids=lambda d: "-".join(d))
def test_dimension_numbers(dn):
    shapes = {"N": 2, "C": 3, "H": 7, "W": 6}
    x = random_array(RNG, tuple(shapes[c] for c in dn[0]), np.float32)
    kshape = {"O": 5, "I": 3, "H": 3, "W": 2}
    w = random_array(RNG, tuple(kshape[c] for c in dn[1]), np.float32)
    f = lambda x, w: conv(x, w, (2, 1), ((1, 1), (0, 1)), dn)
    check_conv(f, x, w)


def test_nchw_grouped_depthwise_and_transposed():
    x = random_array(RNG, (2, 6, 7, 7), np.float32)
    w = random_array(RNG, (6, 3, 3, 3), np.float32)  # OIHW, 2 groups of 3 channels
    check_conv(lambda x, w: conv(x, w, (1, 1), "SAME", ("NCHW", "OIHW", "NCHW"), groups=2), x, w)
    dw = random_array(RNG, (6, 1, 3, 3), np.float32)  # depthwise
    check_conv(lambda x, w: conv(x, w, (2, 2), "SAME", ("NCHW", "OIHW", "NCHW"), groups=6), x, dw)
    tw = random_array(RNG, (3, 3, 6, 4), np.float32)
    check_conv(lambda x, w: lax.conv_transpose(x, w, (2, 2), "SAME", dimension_numbers=("NCHW", "HWIO", "NCHW")), x, tw)


def test_dilations_and_batch_groups():
    x = random_array(RNG, (2, 8, 8, 3), np.float32)
    w = random_array(RNG, (3, 3, 3, 4), np.float32)
    check_conv(lambda x, w: conv(x, w, (2, 1), ((1, 2), (0, 1)), ("NHWC", "HWIO", "NHWC"), lhs=(2, 3), rhs=(1, 2)), x, w)
    # batch_group_count directly: output features split into groups, each paired with a batch slice.
    wb = random_array(RNG, (3, 3, 3, 6), np.float32)
    check_conv(lambda x, w: conv(x, w, (1, 1), "VALID", ("NHWC", "HWIO", "NHWC"), batch_groups=2), x, wb)


def test_conv1d_and_conv3d():
    x1 = random_array(RNG, (2, 11, 3), np.float32)
    w1 = random_array(RNG, (4, 3, 5), np.float32)
    check_conv(lambda x, w: conv(x, w, (2,), "SAME", ("NWC", "WIO", "NWC"), rhs=(2,)), x1, w1)
    f1 = lambda x, w: conv(x, w, (2,), "SAME", ("NCH", "OIH", "NCH"), rhs=(2,))
    check_conv(f1, random_array(RNG, (3, 4, 13), np.float32), random_array(RNG, (6, 4, 3), np.float32))
    x3 = random_array(RNG, (1, 5, 6, 6, 2), np.float32)
    w3 = random_array(RNG, (3, 2, 3, 2, 4), np.float32)
    check_conv(lambda x, w: conv(x, w, (1, 2, 1), "SAME", ("NDHWC", "DHWIO", "NDHWC")), x3, w3)


def test_conv3d_strided_dilated_and_grouped_grads():
    x = random_array(RNG, (2, 3, 6, 5, 7), np.float32)
    w = random_array(RNG, (4, 3, 2, 3, 2), np.float32)
    f = lambda x, w: conv(x, w, (2, 1, 2), ((1, 0), (2, 1), (0, 0)), ("NCDHW", "OIDHW", "NCDHW"), lhs=(1, 1, 2), rhs=(2, 1, 1))
    check_conv(f, x, w)
    # Grouped 3-D: the weight gradient is a 3-D convolution with batch groups.
    g = lambda x, w: conv(x, w, (1, 1, 1), "SAME", ("NDHWC", "DHWIO", "NDHWC"), groups=2)
    check_conv(g, random_array(RNG, (2, 4, 5, 5, 4), np.float32), random_array(RNG, (2, 3, 3, 2, 4), np.float32))


def test_low_precision_and_vmapped_conv():
    x = random_array(RNG, (1, 8, 8, 4), jnp.bfloat16)
    w = random_array(RNG, (3, 3, 4, 4), jnp.bfloat16)
    dn = ("NHWC", "HWIO", "NHWC")
    k = 3 * 3 * 4
    # How wide MPSGraph accumulates a low-precision convolution is not specified: the bound is that of
    # a sum in the type itself. Into float32, the products of bfloat16 values are exact and only the
    # float32 sum rounds.
    check_reduction(lambda x, w: conv(x, w, (1, 1), "SAME", dn), x, w, k=k)
    check_reduction(lambda x, w: conv(x.astype(jnp.float16), w.astype(jnp.float16), (1, 1), "SAME", dn), x, w, k=k)
    check_reduction(lambda x, w: conv(x, w, (1, 1), "SAME", dn, preferred_element_type=jnp.float32), x, w, k=k)
    ws = random_array(RNG, (2, 3, 3, 4, 2), np.float32)
    check_reduction(jax.vmap(lambda w, x: conv(x, w, (1, 1), "SAME", dn), in_axes=(0, None)), ws, x.astype(np.float32), k=k)


def test_integer_convolutions():
    x = random_array(RNG, (2, 7, 6, 4), np.int32)  # full range: products and sums wrap around
    w = random_array(RNG, (3, 2, 2, 6), np.int32)
    dn = ("NHWC", "HWIO", "NHWC")
    check(lambda x, w: conv(x, w, (2, 1), ((1, 1), (0, 1)), dn, rhs=(1, 2), groups=2), x, w)
    x8 = random_array(RNG, (2, 4, 9), np.int8)
    w8 = random_array(RNG, (5, 4, 3), np.int8)
    check(lambda x, w: conv(x, w, (1,), "SAME", ("NCH", "OIH", "NCH"), preferred_element_type=jnp.int32), x8, w8)
    check(lambda x, w: conv(x, w, (2,), ((2, 1),), ("NCH", "OIH", "NCH"), lhs=(2,)), x8, w8)


def test_zero_dimensional_convolutions_are_grouped_matrix_products():
    # No spatial dimensions: [N, C] x [I, O] -> [N, O], with feature and batch groups and any layout.
    dn = lax.ConvDimensionNumbers(lhs_spec=(0, 1), rhs_spec=(1, 0), out_spec=(0, 1))
    x, w = random_array(RNG, (3, 6), np.float32), random_array(RNG, (3, 4), np.float32)
    check_reduction(lambda x, w: conv(x, w, (), (), dn, groups=2), x, w, k=3)
    check_reduction(lambda x, w: conv(x, w, (), (), dn), x, random_array(RNG, (6, 5), np.float32), k=6)
    xb = random_array(RNG, (4, 2), np.float32)
    check_reduction(lambda x, w: conv(x, w, (), (), dn, batch_groups=2), xb, random_array(RNG, (2, 6), np.float32), k=2)
    check_reduction(grads(lambda x, w: conv(x, w, (), (), dn)), x, random_array(RNG, (6, 5), np.float32), k=12,
                    magnitude="normwise")
    xi, wi = random_array(RNG, (3, 6), np.int8), random_array(RNG, (6, 4), np.int8)
    check(lambda x, w: conv(x, w, (), (), dn), xi, wi)
    check(lambda x, w: conv(x, w, (), (), dn), random_array(RNG, (3, 6), np.bool_), random_array(RNG, (6, 4), np.bool_))


def test_empty_convolutions():
    dn = ("NCHW", "OIHW", "NCHW")
    x, w = random_array(RNG, (4, 2, 9, 0), np.int8), random_array(RNG, (4, 2, 4, 5), np.int8)
    check(lambda x, w: conv(x, w, (1, 1), "SAME", dn), x, w)
    x2, w2 = random_array(RNG, (2, 3, 9, 10), np.float32), random_array(RNG, (5, 3, 4, 11), np.float32)
    check(lambda x, w: conv(x, w, (1, 1), "VALID", dn), x2, w2)  # the window is wider than the input


def test_bool_and_complex_convolutions():
    dn = ("NHWC", "HWIO", "NHWC")
    xb, wb = random_array(RNG, (2, 5, 4, 3), np.bool_), random_array(RNG, (2, 2, 3, 4), np.bool_)
    check(lambda x, w: conv(x, w, (1, 1), "SAME", dn), xb, wb)
    c = lambda shape: (random_array(RNG, shape, np.float32) + 1j * random_array(RNG, shape, np.float32)).astype(  # noqa: E731
        np.complex64)
    x, w = c((2, 6, 5, 4)), c((3, 2, 2, 6))
    mag = lambda x, w: 2 * conv(np.abs(x), np.abs(w), (1, 2), "SAME", dn, rhs=(1, 2), groups=2)  # noqa: E731
    check_reduction(lambda x, w: conv(x, w, (1, 2), "SAME", dn, rhs=(1, 2), groups=2), x, w, k=2 * 3 * 2 * 2,
                    magnitude=mag)
    x1, w1 = c((2, 3, 9)), c((4, 3, 3))
    check_reduction(lambda x, w: conv(x, w, (2,), "VALID", ("NCH", "OIH", "NCH")), x1, w1, k=2 * 9,
                    magnitude=lambda x, w: 2 * conv(np.abs(x), np.abs(w), (2,), "VALID", ("NCH", "OIH", "NCH")))


# ---- reduce_window


@pytest.mark.parametrize("padding", ["VALID", "SAME", ((1, 0), (0, 2), (1, 1), (0, 0))], ids=str)
def test_pools(padding):
    x = random_array(RNG, (2, 7, 6, 3), np.float32)
    check(lambda x: lax.reduce_window(x, -jnp.inf, lax.max, (1, 3, 2, 1), (1, 2, 2, 1), padding), x)
    check_reduction(lambda x: lax.reduce_window(x, 0.0, lax.add, (1, 2, 3, 1), (1, 1, 2, 1), padding), x, k=6)
    check(lambda x: lax.reduce_window(x, jnp.inf, lax.min, (1, 2, 2, 1), (1, 2, 1, 1), padding), x)
    check_reduction(lambda x: lax.reduce_window(x, 1.0, lax.mul, (1, 2, 2, 1), (1, 1, 1, 1), padding), x, k=4)


def test_average_pool_counts_only_real_elements():
    x = random_array(RNG, (2, 8, 8, 3), np.float32)
    window = lambda v: lax.reduce_window(v, 0.0, lax.add, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")
    check_reduction(lambda x: window(x) / window(jnp.ones_like(x)), x, k=9 + 1)


def test_dilated_windows_and_int_pools():
    x = random_array(RNG, (9, 8), np.float32)
    check_reduction(lambda x: lax.reduce_window(x, 0.0, lax.add, (2, 3), (1, 2), "VALID", window_dilation=(2, 1)), x, k=6)
    check_reduction(lambda x: lax.reduce_window(x, 0.0, lax.add, (2, 2), (1, 1), "VALID", base_dilation=(2, 1)), x, k=4)
    # The gradient sums, for each element, the windows (at most 4) holding it, of sums of 4 elements.
    check_reduction(jax.grad(lambda x: jnp.sum(lax.reduce_window(x, 0.0, lax.add, (2, 2), (1, 1), "VALID",
                                                                 window_dilation=(2, 1)) ** 2)), x, k=4 + 4)
    i = (random_array(RNG, (6, 6), np.int32) % 9).astype(np.int32)
    check(lambda i: lax.reduce_window(i, np.int32(-2**31), lax.max, (2, 2), (2, 2), "VALID"), i)
    # An init value that is not the identity is combined once per window, never for padded or dilated
    # positions (XLA's semantics); negative padding crops; a window longer than the input is empty.
    check(lambda i: lax.reduce_window(i, np.int32(5), lax.add, (2, 3), (2, 1), ((1, -1), (2, 1)), base_dilation=(2, 1)), i)
    check(lambda i: lax.reduce_window(i, np.int32(3), lax.max, (1, 2), (1, 1), ((0, 0), (-1, 2)), window_dilation=(1, 2)), i)
    check(lambda i: lax.reduce_window(i, np.int32(1), lax.mul, (7, 2), (1, 1), "VALID"), i)
    check(lambda i: lax.reduce_window(i, np.int32(0), lax.add, (3, 2), (1, 1), "SAME"), i)
    b = random_array(RNG, (2, 6, 6, 1), np.int8)
    check(lambda b: lax.reduce_window(b, np.int8(-128), lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "SAME"), b)


def test_large_windows():
    x = random_array(RNG, (1, 40, 33, 2), np.float32)
    check_reduction(lambda x: lax.reduce_window(x, 0.0, lax.add, (1, 40, 33, 1), (1, 1, 1, 1), "SAME"), x, k=40 * 33)
    check(lambda x: lax.reduce_window(x, -jnp.inf, lax.max, (1, 17, 9, 1), (1, 3, 2, 1), "SAME"), x)
    check(lambda x: lax.reduce_window(x, jnp.inf, lax.min, (1, 25, 1, 1), (1, 1, 1, 1), ((12, 12), (0, 0), (0, 0), (0, 0)),
                                      window_dilation=(1, 1, 1, 1)), x)
    check_reduction(lambda x: lax.reduce_window(x, 0.0, lax.add, (1, 13, 1, 1), (1, 2, 1, 1), "VALID",
                                                window_dilation=(1, 2, 1, 1)), x, k=13)


def test_nan_in_max_pool_and_its_grad():
    x = random_array(RNG, (2, 8, 8, 3), np.float32)
    x[0, 1, 1, 0] = np.nan
    pool = lambda x: lax.reduce_window(x, -jnp.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")
    check(pool, x)
    check(jax.grad(lambda x: jnp.sum(pool(x))), x)


# ---- pooling gradients


def test_avg_pool_grad():
    x = random_array(RNG, (1, 6, 6, 2), np.float32)
    pool = lambda x: lax.reduce_window(x, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") / 4.0
    check_reduction(jax.grad(lambda x: jnp.sum(pool(x) ** 2)), x, k=4 + 1)
    padded = lambda x: lax.reduce_window(x, 0.0, lax.add, (1, 3, 3, 1), (1, 2, 2, 1), ((0, 0), (1, 1), (1, 1), (0, 0)))
    check_reduction(jax.grad(lambda x: jnp.sum(padded(x) ** 2)), x, k=9 + 4)


@pytest.mark.parametrize("padding", ["VALID", "SAME"])
def test_max_pool_grad(padding):
    x = random_array(RNG, (2, 7, 6, 3), np.float32)
    x[0, 0, 0, 0] = x[0, 0, 1, 0]  # a tie: the first maximum gets the gradient
    pool = lambda x: lax.reduce_window(x, -jnp.inf, lax.max, (1, 3, 2, 1), (1, 2, 2, 1), padding)
    check(jax.grad(lambda x: jnp.sum(pool(x) ** 2)), x, rtol=1e-5)
    check(jax.vmap(jax.grad(lambda x: jnp.sum(pool(x[None])))), x, rtol=1e-5)


def test_min_and_low_precision_pool_grads():
    x = random_array(RNG, (2, 8, 8, 3), np.float32)
    minpool = lambda x: lax.reduce_window(x, jnp.inf, lax.min, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")
    check(jax.grad(lambda x: jnp.sum(minpool(x) ** 2)), x, rtol=1e-5)
    bf = lambda x: lax.reduce_window(x.astype(jnp.bfloat16), -jnp.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")
    check(jax.grad(lambda x: jnp.sum(bf(x).astype(jnp.float32))), x)
    x1 = random_array(RNG, (3, 20, 4), np.float32)  # a 1-D max pool over a sequence
    seq = lambda x: lax.reduce_window(x, -jnp.inf, lax.max, (1, 4, 1), (1, 3, 1), "SAME")
    check(jax.grad(lambda x: jnp.sum(jnp.sin(seq(x)))), x1, rtol=1e-5)


@pytest.mark.parametrize("window,strides,padding", [
    ((3,), (1,), ((1, 1),)),                       # overlapping, stride 1
    ((2, 3), (3, 2), ((0, 1), (2, 0))),            # stride past the window in one dim
    ((2, 3, 2), (2, 2, 1), ((1, 0), (1, 1), (0, 1))),
], ids=str)
def test_pool_grads_any_rank_and_stride(window, strides, padding):
    shape = (7, 9, 5)[:len(window)]
    x = np.round(random_array(RNG, shape, np.float32))  # many ties
    for init, op in ((-jnp.inf, lax.max), (jnp.inf, lax.min)):
        pool = lambda x: lax.reduce_window(x, init, op, window, strides, padding)
        ct = random_array(RNG, jax.eval_shape(pool, x).shape, np.float32)
        # Each element's gradient sums the cotangents of the windows (at most prod(window)) that chose it.
        grad = lambda x, ct: jax.vjp(pool, x)[1](ct)[0]
        check_reduction(grad, x, ct, k=int(np.prod(window)),
                        magnitude=lambda x, ct: run_on("cpu", grad, x, np.abs(ct)))


# ---- MPSGraph's pooling calls: where the lowering uses them, they agree with XLA


def test_pooling_calls_used_where_they_fit():
    import jax_metal_plugin

    x = random_array(RNG, (2, 8, 8, 3), np.float32)
    maxpool = lambda x: lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    sumpool = lambda x: lax.reduce_window(x, 0.0, lax.add, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")
    graph = jax_metal_plugin.mps_graph(lambda x: (maxpool(x), sumpool(x)), x)
    assert "MaxPool4D(" in graph and "AvgPool4D(" in graph, graph
    graph = jax_metal_plugin.mps_graph(jax.grad(lambda x: jnp.sum(maxpool(x) ** 2)), x)
    assert "MaxPool4DGradient(" in graph, graph
    # Windows MPSGraph's calls do not take stay on the general path.
    dilated = lambda x: lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 1, 1, 1), "VALID",
                                          window_dilation=(1, 2, 1, 1))
    assert "MaxPool4D(" not in jax_metal_plugin.mps_graph(dilated, x)
    assert "Pool4D" not in jax_metal_plugin.mps_graph(lambda i: lax.reduce_window(i, 0, lax.add, (2, 2), (1, 1), "VALID"),
                                                      np.ones((4, 4), np.int32))


@pytest.mark.parametrize("dtype", [np.float32, np.float16, "bfloat16"], ids=str)
def test_pool_calls_special_values(dtype):
    dtype = jnp.bfloat16 if dtype == "bfloat16" else dtype
    x = np.round(random_array(RNG, (2, 9, 8, 3), np.float32) * 2)  # ties
    x[0, 0, 0, 0], x[0, 0, 1, 0] = -0.0, 0.0
    x[1, 2, 2, 1] = np.nan
    x[1, 4, 4, 2] = -np.inf
    x = x.astype(dtype)
    for window, strides, padding in [((1, 2, 2, 1), (1, 2, 2, 1), "VALID"), ((1, 3, 3, 1), (1, 1, 2, 1), "SAME"),
                                     ((2, 3, 1, 3), (1, 2, 1, 1), ((1, 0), (2, 1), (0, 0), (0, 2)))]:
        pool = lambda x: lax.reduce_window(x, jnp.array(-jnp.inf, x.dtype), lax.max, window, strides, padding)
        check(pool, x, exact=True)
    f32 = x.astype(np.float32)
    finite = np.where(np.isfinite(f32), f32, 1.5).astype(np.float32)
    for window, strides in [((1, 2, 2, 1), (1, 2, 2, 1)), ((1, 3, 3, 1), (1, 1, 1, 1)), ((2, 2, 3, 1), (1, 2, 1, 1))]:
        pool = lambda x: lax.reduce_window(x, -jnp.inf, lax.max, window, strides, "VALID")
        check(jax.grad(lambda x: jnp.sum(jnp.sin(pool(x)))), finite, rtol=1e-5)
        check(jax.grad(lambda x: jnp.sum(jnp.sin(pool(x)))), f32, rtol=1e-5)  # NaN windows too
        check(lambda x: lax.reduce_window(x, 0.0, lax.add, window, strides, "SAME"), finite, rtol=1e-5, atol=1e-5)


def _argmax_pool(x, window, strides, padding):
    # (value, index) pairs pooled: the larger value wins, the smaller index on ties.
    def body(a, b):
        (av, ai), (bv, bi) = a, b
        take_b = (bv > av) | ((bv == av) & (bi < ai))
        return lax.select(take_b, bv, av), lax.select(take_b, bi, ai)

    idx = lax.broadcasted_iota(jnp.int32, x.shape, x.ndim - 1) + x.shape[-1] * lax.broadcasted_iota(
        jnp.int32, x.shape, x.ndim - 2)
    return lax.reduce_window((x, idx), (-jnp.inf, jnp.int32(-1)), body, window, strides, padding)


@pytest.mark.parametrize("padding", ["VALID", "SAME", ((1, 0), (0, 2), (1, 1), (2, 0))], ids=str)
def test_variadic_reduce_window_argmax_pooling(padding):
    x = np.round(random_array(RNG, (2, 5, 7, 3), np.float32))  # rounded: ties, broken by index
    check(lambda x: _argmax_pool(x, (1, 2, 3, 1), (1, 2, 1, 1), padding), x, exact=True)
    check(jax.vmap(lambda x: _argmax_pool(x, (2, 2, 1), (1, 1, 1), "SAME")), x, exact=True)


def test_non_monoid_reduce_window_bodies_fold_in_xlas_order():
    # Subtract is neither commutative nor associative: init first, then every real element (padding
    # and base-dilation holes skipped). a * 0.5 + b also shows the taps' order, row-major, which is
    # XLA:CPU's for unpadded windows (padded ones it may visit in another order).
    x = random_array(RNG, (4, 6), np.float32)
    sub = lambda x, **kw: lax.reduce_window(x, 1.5, lax.sub, (2, 3), (1, 2), **kw)  # noqa: E731
    check(lambda x: sub(x, padding="VALID"), x)
    check(lambda x: sub(x, padding=((1, 2), (0, 1))), x)
    check(lambda x: sub(x, padding=((1, 0), (2, 1)), base_dilation=(2, 1), window_dilation=(1, 2)), x)
    check(lambda x: lax.reduce_window(x, 0.5, lambda a, b: a * 0.5 + b, (3, 2), (1, 2), "VALID"), x)
    xi = random_array(RNG, (5, 4), np.int32)
    check(lambda x: lax.reduce_window(x, 0, lax.bitwise_xor, (2, 2), (1, 1), "SAME"), xi)
    check(lambda x: lax.reduce_window(x, np.int32(7), lax.sub, (5, 1), (1, 1), "VALID"), xi)
    check(lambda x: lax.reduce_window(x, 0.0, lax.sub, (2, 9), (1, 1), "VALID"), x)  # an empty result

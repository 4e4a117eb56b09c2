"""sort, argsort, lexsort and top_k on metal: bit-identical to the CPU backend, ties and NaNs included."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from jaxcompare import check, random_array, special_floats

RNG = np.random.default_rng(7)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float16, jnp.bfloat16, jnp.int32, jnp.uint8, jnp.int8, jnp.bool_],
                         ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("n", [1, 7, 13, 1000])
def test_sort_and_argsort(dtype, n):
    x = random_array(RNG, (3, n), dtype)
    if np.dtype(dtype).kind in "iu":
        x = (x % 5).astype(dtype)  # many ties
    check(lambda x: (jnp.sort(x, axis=-1), jnp.argsort(x, axis=-1), jnp.sort(x, axis=0)), x, exact=True)
    check(lambda x: (jnp.sort(x, axis=-1, descending=True), jnp.argsort(x, axis=-1, descending=True)), x, exact=True)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float16, jnp.bfloat16], ids=lambda d: np.dtype(d).name)
def test_sort_nans_infs_and_signed_zeros(dtype):
    x = np.concatenate([special_floats(dtype), special_floats(dtype)[::-1]])
    check(lambda x: (jnp.sort(x), jnp.argsort(x), jnp.argsort(x, descending=True)), x, exact=True)


def test_lexsort_and_multi_key_sort():
    a = (random_array(RNG, (50,), np.int32) % 4).astype(np.int32)
    b = random_array(RNG, (50,), np.float32)
    b[::7] = np.nan
    c = np.arange(50, dtype=np.float32)
    check(lambda a, b: jnp.lexsort((b, a)), a, b, exact=True)
    check(lambda a, b, c: lax.sort((a, b, c), num_keys=2), a, b, c, exact=True)
    check(lambda a, b, c: lax.sort((b, a, c), num_keys=1), a, b, c, exact=True)


def test_sort_grad_and_vmap():
    x = random_array(RNG, (4, 9), np.float32)
    check(jax.grad(lambda x: jnp.sum(jnp.sort(x, axis=-1) * jnp.arange(9.0))), x)
    check(jax.vmap(lambda r: jnp.argsort(r)), x, exact=True)


def test_random_permutation_uses_sort():
    check(lambda k: jax.random.permutation(jax.random.key(k), 100), np.uint32(3), exact=True)


def test_sort_lowers_to_argsort_and_gather():
    from jax_metal_plugin import tools
    text = tools.mps_graph(lambda x: jnp.sort(x), np.ones(8, np.float32))
    assert "ArgSort(" in text and "GatherAlongAxis(" in text
    assert "Sort(" in tools.mps_graph(lambda x: jnp.sort(x), np.ones(8, np.int32))


# ---- sizes, special values, stability and the comparator forms JAX emits


@pytest.mark.parametrize("n", [1, 2, 3, 17, 97, 4099])
def test_sizes_with_nans_infs_and_signed_zeros(n):
    x = random_array(RNG, (2, n), np.float32)
    pick = RNG.random((2, n))
    x[pick < 0.1] = np.nan
    x[(pick >= 0.1) & (pick < 0.15)] = -np.nan  # a NaN with its sign bit set
    x[(pick >= 0.15) & (pick < 0.2)] = np.inf
    x[(pick >= 0.2) & (pick < 0.25)] = -np.inf
    x[(pick >= 0.25) & (pick < 0.35)] = 0.0
    x[(pick >= 0.35) & (pick < 0.45)] = -0.0
    check(lambda x: (jnp.sort(x, axis=-1), jnp.argsort(x, axis=-1), jnp.argsort(x, axis=-1, descending=True),
                     jnp.sort(x, axis=-1, descending=True)), x, exact=True)


def test_large_sort():
    x = random_array(RNG, (100_000,), np.float32)
    x[::1000] = np.nan
    i = (random_array(RNG, (100_000,), np.int32) % 50).astype(np.int32)
    check(lambda x, i: (jnp.sort(x), jnp.argsort(x), jnp.argsort(i), jnp.sort(i)), x, i, exact=True)


@pytest.mark.parametrize("dtype", [jnp.int8, jnp.uint16, jnp.uint32, jnp.int16], ids=lambda d: np.dtype(d).name)
def test_integer_extremes_and_unsigned_order(dtype):
    info = np.iinfo(np.dtype(dtype))
    x = np.concatenate([np.array([info.min, info.max, 0, 1, info.max, info.min], dtype), random_array(RNG, (30,), dtype)])
    check(lambda x: (jnp.sort(x), jnp.argsort(x), jnp.argsort(x, descending=True)), x, exact=True)


def test_sort_along_any_axis_of_rank_3():
    x = random_array(RNG, (5, 6, 7), np.float32)
    x[1, :, 2] = x[1, :, 3]  # ties across the middle axis
    check(lambda x: (jnp.sort(x, axis=0), jnp.argsort(x, axis=1), jnp.sort(x, axis=2), jnp.sort(x, axis=None)),
          x, exact=True)


def test_unstable_sorts_give_the_same_values():
    x = (random_array(RNG, (3, 40), np.int32) % 5).astype(np.float32)
    check(lambda x: (jnp.sort(x, stable=False), lax.sort(x, is_stable=False)), x, exact=True)
    # Unstable argsort with distinct keys is still unique.
    y = RNG.permutation(64).astype(np.float32)
    check(lambda y: jnp.argsort(y, stable=False), y, exact=True)


def test_sort_key_val_and_many_operands():
    k = (random_array(RNG, (4, 30), np.int32) % 6).astype(np.int32)
    v = random_array(RNG, (4, 30), np.float32)
    b = RNG.random((4, 30)) < 0.5
    check(lambda k, v: lax.sort_key_val(k, v, dimension=1), k, v, exact=True)
    check(lambda k, v, b: lax.sort((v, k, b), dimension=1, num_keys=1), k, v, b, exact=True)
    check(lambda k, v, b: lax.sort((b, k, v), dimension=0, num_keys=3), k, v, b, exact=True)


def test_lexsort_with_float_and_bool_keys():
    a = (random_array(RNG, (60,), np.int32) % 3).astype(np.int32)
    b = np.round(random_array(RNG, (60,), np.float32)).astype(np.float32)
    b[::11] = np.nan
    b[1::13] = -0.0
    c = RNG.random(60) < 0.5
    check(lambda a, b, c: (jnp.lexsort((b, a)), jnp.lexsort((a, c, b)), jnp.lexsort((c,))), a, b, c, exact=True)


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16], ids=lambda d: np.dtype(d).name)
def test_low_precision_sort_with_ties(dtype):
    x = np.round(random_array(RNG, (3, 50), np.float32) * 4).astype(dtype)  # many exact ties
    x[0, ::7] = np.nan
    x[1, ::5] = -0.0
    check(lambda x: (jnp.sort(x, axis=1), jnp.argsort(x, axis=1), lax.top_k(x, 7)), x, exact=True)


def test_library_functions_built_on_sort():
    x = random_array(RNG, (41,), np.float32)
    i = (random_array(RNG, (41,), np.int32) % 7).astype(np.int32)
    check(lambda x: (jnp.median(x), jnp.quantile(x, 0.3), jnp.percentile(x, 90.0)), x, rtol=1e-6)
    check(lambda i: jnp.unique(i, size=7, fill_value=-1), i, exact=True)
    check(lambda x: (jnp.partition(x, 5)[5], jnp.argpartition(x, 5)[:5].sort()), x, exact=True)


# ---- top_k


@pytest.mark.parametrize("k", [1, 4, 31])
def test_top_k_nans_infs_zeros_and_ties(k):
    x = np.round(random_array(RNG, (3, 31), np.float32)).astype(np.float32)
    x[0, [2, 9]] = np.nan
    x[0, 5] = -np.nan
    x[1, [1, 4]] = [np.inf, -np.inf]
    x[2, [0, 3, 6]] = [0.0, -0.0, 0.0]
    check(lambda x: lax.top_k(x, k), x, exact=True)
    check(lambda x: lax.top_k(-x, k), x, exact=True)


@pytest.mark.parametrize("dtype", [jnp.uint8, jnp.int8, jnp.uint32, jnp.float16], ids=lambda d: np.dtype(d).name)
def test_top_k_dtypes_and_rank_3(dtype):
    x = random_array(RNG, (2, 3, 20), dtype)
    if np.dtype(dtype).kind in "iu":
        x = (x % 9).astype(dtype)
    check(lambda x: lax.top_k(x, 6), x, exact=True)


def test_top_k_grad_and_large():
    x = random_array(RNG, (4, 9), np.float32)
    check(jax.grad(lambda x: jnp.sum(lax.top_k(x, 3)[0] ** 2)), x)
    big = random_array(RNG, (100_000,), np.float32)
    check(lambda x: lax.top_k(x, 10), big, exact=True)


def test_top_k_is_one_topk_op():
    from jax_metal_plugin import tools
    text = tools.mps_graph(lambda x: lax.top_k(x, 3), np.ones((2, 8), np.float32))
    assert text.count("TopK(") == 1 and "ArgSort(" not in text


def test_argsort_sorts_one_key_and_reuses_the_permutation():
    from jax_metal_plugin import tools
    text = tools.mps_graph(lambda x: jnp.argsort(x), np.ones(16, np.float32))
    assert text.count("ArgSort(") == 1
    # The iota operand sorted is the permutation itself: ArgSort's result is returned, ungathered.
    argsort = re.search(r"(%\d+) = ArgSort\(", text).group(1)
    assert re.search(r"return " + argsort + r"\b", text), text
    text = tools.mps_graph(lambda a, b: jnp.lexsort((b, a)), np.ones(16, np.int32), np.ones(16, np.float32))
    assert text.count("ArgSort(") == 2


# ---- comparators that are not JAX's: an error naming them, never a wrong order

_SORT_TEMPLATE = """
func.func public @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {{
  %0 = "stablehlo.sort"(%arg0) <{{dimension = 0 : i64, is_stable = true}}> ({{
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
{body}
  }}) : (tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}}
"""

UNRECOGNISED = {
    # |a| < |b|: an order on a function of the keys
    "abs": """    %1 = stablehlo.abs %a : tensor<f32>
    %2 = stablehlo.abs %b : tensor<f32>
    %3 = stablehlo.compare LT, %1, %2, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %3 : tensor<i1>""",
    # relu(a) < relu(b): a select that is not JAX's canonicalisation
    "select": """    %z = stablehlo.constant dense<0.0> : tensor<f32>
    %p = stablehlo.compare GT, %a, %z, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %1 = stablehlo.select %p, %a, %z : tensor<i1>, tensor<f32>
    %q = stablehlo.compare GT, %b, %z, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %2 = stablehlo.select %q, %b, %z : tensor<i1>, tensor<f32>
    %3 = stablehlo.compare LT, %1, %2, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %3 : tensor<i1>""",
    # a <= b: not a strict order
    "le": """    %3 = stablehlo.compare LE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %3 : tensor<i1>""",
}


@pytest.mark.parametrize("name", sorted(UNRECOGNISED))
def test_unrecognised_comparator_is_an_error(name):
    from jax_metal_plugin import _native, tools
    text = _SORT_TEMPLATE.format(body=UNRECOGNISED[name])
    data = tools._serialize(text, tools.artifact_version())
    with pytest.raises(ValueError, match=r"sort comparator not recognised.*stablehlo\.sort"):
        _native.place_artifact(data)

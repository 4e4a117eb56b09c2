"""What reaches MPSGraph keeps the rules Apple's headers and Apple's PyTorch backend state, although the
program asks for more: the placed MPS op graph is read op by op (kind, dtypes, shapes, executor), and each
program's result is compared with JAX's CPU backend.
- GatherND / ScatterND: with rank 0 run as [1], their result or updates have rank (P - K) + Q - 1 only if
  none of data, indices, updates and result has rank 0.
- No zero-element operand, result or constant on Metal.
- Sorts and min/max reductions only on f16, f32, int32 and int64; no integer MatMul.
- No MatMul with M, N or K above 32768, nor a complex64 one with K above 2048."""

import re

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax

from jax_metal_plugin import tools
from jaxcompare import check

TYPE = re.compile(r"([\w<>]+)\[([\d,]*)\]")
OP = re.compile(r"^  ([%\d, ]+) = (\w+)\(([^)]*)\)[^:\n]* : (.*?)  @(metal|host)$", re.M)


def parse_type(text):
    dtype, dims = TYPE.fullmatch(text.strip()).groups()
    return dtype, tuple(int(d) for d in dims.split(",") if d)


def placed_ops(fn, *args):
    """[(kind, [operand types], [result types], executor)] of the placed graph's top-level ops."""
    text = tools.mps_graph(fn, *args)
    types = {}
    header = re.search(r"^graph\((.*)\) \{$", text, re.M).group(1)
    for m in re.finditer(r"%(\d+): ([\w<>]+\[[\d,]*\])", header):
        types[int(m.group(1))] = parse_type(m.group(2))
    ops = []
    for m in OP.finditer(text):
        outs = [int(v.strip().lstrip("%")) for v in m.group(1).split(",")]
        results = [parse_type(t) for t in re.findall(r"[\w<>]+\[[\d,]*\]", m.group(4))]
        for v, t in zip(outs, results):
            types[v] = t
        operands = [types[int(v.strip().lstrip("%"))] for v in m.group(3).split(",") if v.strip()]
        ops.append((m.group(2), operands, results, m.group(5)))
    assert ops, text
    return ops


def of_kind(ops, kind):
    found = [op for op in ops if op[0] == kind]
    assert found, f"no {kind} in {ops}"
    return found


# ---- GatherND / ScatterND ranks


def nd_rule_holds(ops):
    """Each GatherND / ScatterND keeps the headers' rule (result or updates shaped
    indices.shape[:-1] + data.shape[K:]) with every tensor of rank >= 1, so running rank 0 as [1]
    cannot break it."""
    found = False
    for kind, operands, results, _ in ops:
        if kind not in ("GatherND", "ScatterND"):
            continue
        found = True
        data, indices = operands[0][1], operands[-1][1]
        k = indices[-1]
        slices = indices[:-1] + data[k:]
        assert slices == (results[0][1] if kind == "GatherND" else operands[1][1]), (kind, operands, results)
        assert all(len(shape) >= 1 for _, shape in operands + results), (kind, operands, results)
    assert found, ops


def test_scalar_set_on_a_vector_scatters_rank_one_updates():
    x = np.arange(8, dtype=np.float32)
    f = lambda x, i, v: x.at[i].set(v)
    args = (x, np.int32(5), np.float32(-3))
    nd_rule_holds(placed_ops(f, *args))
    check(f, *args, exact=True)
    g = lambda x, i, v: x.at[i].add(v)
    nd_rule_holds(placed_ops(g, *args))
    check(g, *args, exact=True)


def test_scalar_gather_from_a_vector_has_rank_one_result():
    x = np.arange(8, dtype=np.int32) * 3
    f = lambda x, i: x[i]
    nd_rule_holds(placed_ops(f, x, np.int32(6)))
    check(f, x, np.int32(6), exact=True)
    check(f, x, np.int32(-2), exact=True)


def test_scalar_set_on_a_matrix_element():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    f = lambda x, i, j, v: x.at[i, j].set(v)
    args = (x, np.int32(2), np.int32(1), np.float32(7))
    nd_rule_holds(placed_ops(f, *args))
    check(f, *args, exact=True)


def test_dynamic_slice_and_update_keep_the_rule():
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    f = lambda x, i: lax.dynamic_slice(x, (i, 0), (1, 6))
    nd_rule_holds(placed_ops(f, x, np.int32(2)))
    check(f, x, np.int32(2), exact=True)
    g = lambda x, u, i: lax.dynamic_update_slice(x, u, (i, 0))
    u = np.ones((1, 6), np.float32)
    nd_rule_holds(placed_ops(g, x, u, np.int32(3)))
    check(g, x, u, np.int32(3), exact=True)


# ---- zero-element tensors


def no_empty_on_metal(ops):
    for kind, operands, results, where in ops:
        if where == "metal":
            assert all(0 not in shape for _, shape in operands + results), (kind, operands, results)


EMPTY_CASES = {
    "sum over an empty axis": (lambda e: jnp.sum(e, axis=0) + jnp.max(e, axis=0, initial=-1.0), (np.ones((0, 3), np.float32),)),
    "concat with an empty operand": (lambda x, e: jnp.concatenate([x, e, x]) * 2, (np.ones((2, 3), np.float32), np.ones((0, 3), np.float32))),
    "matmul over K = 0": (lambda a, b: (a @ b) + 1, (np.ones((3, 0), np.float32), np.ones((0, 4), np.float32))),
    "pad of an empty array": (lambda e: jnp.pad(e, ((1, 2), (0, 1)), constant_values=5.0), (np.ones((0, 2), np.float32),)),
    "scatter of no updates": (lambda x, i, u: x.at[i].add(u) * 3, (np.ones(5, np.float32), np.zeros((0,), np.int32), np.ones((0,), np.float32))),
    "elementwise of empties": (lambda e, x: (jnp.exp(e) + 1, x * 2), (np.ones((4, 0), np.float32), np.ones(3, np.float32))),
    "empty parameter returned": (lambda x, e: (x + 1, e), (np.ones(3, np.float32), np.ones((0, 2), np.float32))),
}


@pytest.mark.parametrize("name", sorted(EMPTY_CASES))
def test_no_zero_element_tensor_reaches_metal(name):
    fn, args = EMPTY_CASES[name]
    no_empty_on_metal(placed_ops(fn, *args))
    check(fn, *args, exact=True)


# ---- op domains: what MPSGraph's sorts, min/max reductions and matmul take

ORDERED = {"f16", "f32", "f64", "i32", "i64"}


def ordered_only(ops, kinds):
    for kind, operands, _, _ in ops:
        if kind in kinds:
            assert operands[0][0] in ORDERED, (kind, operands)


NARROW = [np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.uint32, ml_dtypes.bfloat16]


def values_of(dtype, n, seed):
    rng = np.random.default_rng(seed)
    if dtype == np.bool_:
        return rng.integers(0, 2, n).astype(np.bool_)
    if dtype == ml_dtypes.bfloat16:
        return rng.standard_normal(n).astype(ml_dtypes.bfloat16)
    info = np.iinfo(dtype)
    edges = np.array([info.min, info.max, 0, 1], dtype=dtype)
    return np.concatenate([edges, rng.integers(info.min, info.max, n - 4, dtype=dtype, endpoint=True)])


@pytest.mark.parametrize("dtype", NARROW, ids=lambda d: np.dtype(d).name)
def test_max_min_reductions_take_ordered_types(dtype):
    x = values_of(dtype, 24, 1).reshape(4, 6)
    f = lambda x: (jnp.max(x, axis=1), jnp.min(x, axis=0), jnp.argmax(x, axis=1), jnp.argmin(x, axis=0))
    ops = placed_ops(f, x)
    ordered_only(ops, {"ReductionMaximum", "ReductionMinimum"})
    check(f, x, exact=True)


@pytest.mark.parametrize("dtype", NARROW, ids=lambda d: np.dtype(d).name)
def test_sorts_take_ordered_types(dtype):
    x = values_of(dtype, 24, 2).reshape(3, 8)
    f = lambda x: (jnp.sort(x, axis=1), jnp.argsort(x, axis=0, stable=True), lax.sort(x, dimension=1))
    ordered_only(placed_ops(f, x), {"Sort", "ArgSort", "TopK"})
    check(f, x, exact=True)
    if dtype != np.bool_:
        g = lambda x: lax.top_k(x, 3)
        ordered_only(placed_ops(g, x), {"Sort", "ArgSort", "TopK"})
        check(g, x, exact=True)


@pytest.mark.usefixtures("x64")
def test_uint64_and_int64_keys_sort_exactly():
    u = np.array([0, 2**64 - 1, 2**63, 2**63 - 1, 1, 5, 2**63 + 7, 3], dtype=np.uint64)
    f = lambda x: (jnp.sort(x), jnp.argsort(x, stable=True), jnp.max(x), jnp.min(x), lax.top_k(x, 3))
    for x in (u, u.view(np.int64)):
        ordered_only(placed_ops(f, x), {"Sort", "ArgSort", "TopK", "ReductionMaximum", "ReductionMinimum"})
        check(f, x, exact=True)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.uint16, np.uint32], ids=lambda d: np.dtype(d).name)
def test_integer_matmul_is_not_an_mpsgraph_matmul(dtype):
    rng = np.random.default_rng(3)
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, (3, 5), dtype=dtype, endpoint=True)
    b = rng.integers(info.min, info.max, (5, 4), dtype=dtype, endpoint=True)
    f = lambda a, b: a @ b
    ops = placed_ops(f, a, b)
    assert not [op for op in ops if op[0] == "MatMul"]
    assert {op[3] for op in of_kind(ops, "IntegerMatMul")} == {"host"}
    check(f, a, b, exact=True)  # wraps around as on the CPU backend
    check(lambda a, b: jnp.matmul(a > 0, b > 0), a, b, exact=True)


# ---- MatMul size limits


def matmul_calls(ops):
    return [(operands[0], operands[1]) for kind, operands, _, _ in ops if kind == "MatMul"]


def within_limits(calls, max_k):
    for (dtype, a), (_, b) in calls:
        m, k, n = a[-2], a[-1], b[-1]
        assert m <= 32768 and n <= 32768 and k <= max_k, (dtype, a, b)


# Small integers as floats: every product and partial sum is exact in float32, so a tile or chunk lost,
# doubled or misplaced shows as an exact mismatch.
def small_integers(shape, seed, complex_=False):
    rng = np.random.default_rng(seed)
    x = rng.integers(-2, 3, shape).astype(np.float32)
    if complex_:
        x = (x + 1j * rng.integers(-2, 3, shape)).astype(np.complex64)
    return x


@pytest.mark.parametrize("shapes", [((2, 8), (8, 40000)), ((40000, 8), (8, 2)), ((2, 40000), (40000, 3))],
                         ids=["N", "M", "K"])
def test_matmul_is_split_past_32768(shapes):
    a, b = small_integers(shapes[0], 4), small_integers(shapes[1], 5)
    calls = matmul_calls(placed_ops(jnp.matmul, a, b))
    assert len(calls) >= 2
    within_limits(calls, 32768)
    check(jnp.matmul, a, b, exact=True)


def test_half_matmul_split_along_k_accumulates_in_float32():
    # 2048 + 32767 ones in the first 32768 columns and 48 more ones after: 34863, which float16 rounds to
    # 34848. Rounding the first chunk's sum to float16 (34816) before adding the second would give the
    # tie 34864, rounded to even: 34880.
    a = np.zeros((1, 40000), np.float16)
    a[0, : 32768 + 48] = 1
    a[0, 0] = 2048
    b = np.ones((40000, 1), np.float16)
    within_limits(matmul_calls(placed_ops(jnp.matmul, a, b)), 32768)
    got = np.asarray(jax.jit(jnp.matmul)(*jax.device_put((a, b), jax.devices("metal")[0])))
    assert got[0, 0] == np.float16(34863) == 34848


def test_complex_matmul_k_is_split_past_2048():
    a, b = small_integers((2, 3000), 6, True), small_integers((3000, 3), 7, True)
    calls = matmul_calls(placed_ops(jnp.matmul, a, b))
    assert len(calls) >= 2
    within_limits(calls, 2048)
    check(jnp.matmul, a, b, exact=True)

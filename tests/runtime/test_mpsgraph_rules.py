"""What reaches MPSGraph keeps the rules Apple's headers and Apple's PyTorch backend state, although the
program asks for more: the placed MPS op graph is read op by op (kind, dtypes, shapes, executor), and each
program's result is compared with JAX's CPU backend.
- GatherND / ScatterND: with rank 0 run as [1], their result or updates have rank (P - K) + Q - 1 only if
  none of data, indices, updates and result has rank 0."""

import re

import jax
import jax.numpy as jnp
import numpy as np
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

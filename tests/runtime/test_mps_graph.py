"""The MPS op graph the lowering makes: the right MPSGraph ops, and clear errors for what it can't do."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import jax_metal_plugin
from jax_metal_plugin import _native, tools
from jaxcompare import check, eps


def graph(fn, *args):
    return tools.mps_graph(fn, *args)


def test_op_table_is_exposed():
    kinds = {name for name, _, _ in _native.op_kinds()}
    assert {"MatMul", "Add", "While", "If", "FFT", "Sort", "GatherND", "Conv2D"} <= kinds


def test_mps_graph_is_exported_by_the_package():
    assert "MatMul(" in jax_metal_plugin.mps_graph(jnp.matmul, jnp.ones((2, 3)), jnp.ones((3, 4)))


def test_dot_general_is_one_batched_matmul():
    a = jnp.ones((2, 3, 4, 5))
    b = jnp.ones((2, 5, 4, 6))
    text = graph(lambda a, b: jnp.einsum("bijk,bkjl->bil", a, b), a, b)
    assert text.count("MatMul(") == 1
    assert "f32[2,3,20]" in text and "f32[2,20,6]" in text


def test_argmax_uses_the_arg_reduction():
    text = graph(lambda x: jnp.argmax(x, axis=1), jnp.ones((3, 4)))
    assert "ReductionArgMaximum(" in text and "axis=1" in text


def test_softmax_reductions():
    text = graph(jax.nn.softmax, jnp.ones((3, 4)))
    assert "ReductionMaximum(" in text and "ReductionSum(" in text


def test_scan_is_a_while_with_subgraphs():
    def f(xs):
        return lax.scan(lambda c, x: (c + x, c * x), 0.0, xs)

    text = graph(f, jnp.ones(5))
    assert "While(" in text
    assert text.count("graph(") >= 3  # the executable's, the condition's and the body's


def test_a_loop_keeps_its_scalar_constants_inside():
    # JAX's serializer may hoist a loop body's constants out of it; captured, each would be a loop
    # carry that no executor can fold, and its broadcast would run on every iteration.
    def f(x):
        return lax.fori_loop(0, 1000, lambda i, c: c * 0.999 + 1.0, x)

    text = graph(f, jnp.ones(8))
    whiles = [line for line in text.splitlines() if "While(" in line]
    assert len(whiles) == 1
    assert whiles[0].split(" = While(")[0].count("%") == 2  # the counter and the carry, nothing else
    # Each step rounds at most twice and damps earlier errors by 0.999: relative error below 2n eps.
    check(f, np.ones(8, np.float32), rtol=2 * 1000 * eps(np.float32))


def test_dynamic_update_slice_is_one_scatter_of_the_update():
    # No pass over the operand's shape besides the scatter itself: the cost follows the update.
    text = graph(lambda x, u, i: lax.dynamic_update_slice(x, u, (i, 0, 0)),
                 jnp.ones((8, 64, 32)), jnp.ones((1, 64, 32)), np.int32(3))
    assert text.count("ScatterND(") == 1 and "mode=set" in text
    ops = [line for line in text.splitlines() if " = " in line]
    assert [op for op in ops if "[8,64,32]" in op and "ScatterND(" not in op] == []
    text = graph(lambda x, u, i, j: lax.dynamic_update_slice(x, u, (i, j, 0)),
                 jnp.ones((8, 64, 32)), jnp.ones((8, 1, 32)), np.int32(3), np.int32(5))
    assert text.count("ScatterND(") == 1 and "i32[8,1,2]" in text
    assert "GatherAlongAxis(" not in text


def test_dynamic_slice_is_one_gather():
    text = graph(lambda x, i, j: lax.dynamic_slice(x, (i, j, 0), (1, 4, 32)),
                 jnp.ones((8, 64, 32)), np.int32(3), np.int32(5))
    assert text.count("GatherND(") == 1 and "i32[1,4,2]" in text
    assert "GatherAlongAxis(" not in text


def test_integer_division_is_guarded():
    text = graph(lax.div, jnp.ones(3, jnp.int32), jnp.ones(3, jnp.int32))
    assert "Divide(" in text and "Select(" in text and "Equal(" in text


def test_float_division_is_plain():
    text = graph(lambda a, b: a / b, jnp.ones(3), jnp.ones(3))
    assert "Divide(" in text and "Select(" not in text


def test_constant_splats_are_not_materialised():
    text = graph(lambda x: x + jnp.full((64, 64), 3.0), jnp.ones((64, 64)))
    assert "bytes=4 " in text and "bytes=16384" not in text


def test_unsupported_custom_call_names_the_target():

    def f(x):
        return jax.ffi.ffi_call("my_missing_kernel", jax.ShapeDtypeStruct(x.shape, x.dtype))(x)

    with pytest.raises(ValueError, match="my_missing_kernel"):
        graph(f, jnp.ones(3))


def test_errors_carry_the_source_location():
    def f(x):
        return jax.ffi.ffi_call("another_missing_kernel", jax.ShapeDtypeStruct(x.shape, x.dtype))(x)

    with pytest.raises(ValueError, match=r"test_mps_graph\.py:\d+"):
        graph(f, jnp.ones(3))

"""What the plugin cannot run fails as a Python exception through JAX, naming the op (or custom_call
target), its types and the user's source line; the process and the device stay usable afterwards."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from jaxcompare import check, device, scatter_extra_params

X = np.arange(6, dtype=np.float32)


def run_metal(fn, *args):
    dev = device("metal")
    return jax.jit(fn)(*jax.device_put(args, dev))


def still_alive():
    np.testing.assert_array_equal(np.asarray(run_metal(lambda x: x * 2 + 1, X)), X * 2 + 1)


def missing_kernel(x):
    return jax.ffi.ffi_call("my_missing_kernel", jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


def test_unsupported_custom_call_names_target_types_and_location():
    with pytest.raises(RuntimeError) as info:
        run_metal(missing_kernel, X)
    message = str(info.value)
    assert "custom_call target 'my_missing_kernel'" in message
    assert "tensor<6xf32>" in message
    assert "test_errors.py:" in message
    still_alive()
    # The failure is not cached as a success, nor does it poison later compiles.
    with pytest.raises(RuntimeError, match="my_missing_kernel"):
        run_metal(missing_kernel, X)
    still_alive()


@pytest.mark.parametrize("attribute", ["dict", "array", "none"])
def test_refused_custom_call_with_attributes_of_every_kind(attribute):
    # A target nobody registered, called with attributes JAX encodes as a dictionary, a dense array or
    # nothing: each is read and refused cleanly, naming the target.
    value = {"dict": {"a": 1, "b": np.float32(2.5)}, "array": np.arange(3), "none": None}[attribute]
    attrs = {} if value is None else {"non_hashable_arg": value}
    fn = lambda x: jax.ffi.ffi_call("test_ffi", jax.ShapeDtypeStruct(x.shape, x.dtype))(x, **attrs)  # noqa: E731
    with pytest.raises(RuntimeError, match="custom_call target 'test_ffi'"):
        run_metal(fn, X)
    still_alive()


def test_custom_call_inside_control_flow():
    def f(x):
        return lax.fori_loop(0, 3, lambda i, c: missing_kernel(c) + i, x)

    with pytest.raises(RuntimeError, match="my_missing_kernel"):
        run_metal(f, X)
    still_alive()


@pytest.mark.parametrize("case", ["reduce_window", "variadic_reduce_window", "scatter_combiner"])
def test_unsupported_op_forms_name_the_op(case):
    # Window bodies with control flow of their own cannot be applied to whole tensors.
    pick = lambda a, b: lax.cond(a > b, lambda: a * 2, lambda: b)  # noqa: E731
    if case == "reduce_window":
        fn, op = lambda x: lax.reduce_window(x, 0.0, pick, (2,), (1,), "VALID"), "stablehlo.reduce_window"
    elif case == "variadic_reduce_window":
        fn = lambda x: lax.reduce_window((x, x), (0.0, 1.0), lambda a, b: (pick(a[0], b[0]), a[1] * b[1]), (2,), (1,),
                                         "VALID")
        op = "stablehlo.reduce_window"
    else:  # an update computation that uses the update, with indices that may repeat
        from jax_metal_plugin._jax_internals import core, lax_internal, slicing

        jaxpr, consts = lax_internal._reduction_jaxpr(lambda a, b: a * b - jnp.sin(b), core.typeof(np.float32(0)))
        dn = lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))
        fn = lambda x: slicing.scatter_p.bind(x, jnp.array([[1], [1]]), jnp.ones(2), update_jaxpr=jaxpr, update_consts=consts,
                                              dimension_numbers=dn, indices_are_sorted=False, unique_indices=False,
                                              mode=slicing.GatherScatterMode.FILL_OR_DROP, **scatter_extra_params())
        op = "stablehlo.scatter"
    with pytest.raises(RuntimeError) as info:
        run_metal(fn, X)
    message = str(info.value)
    assert f"'{op}'" in message and "tensor<6xf32>" in message and "test_errors.py:" in message, message
    still_alive()


def test_float64_error_names_the_dtype():
    # float64 runs (tests/ops/test_x64.py); what is still refused under x64 names its float64 types.
    with jax.enable_x64(True):
        np.testing.assert_array_equal(np.asarray(run_metal(jnp.negative, np.arange(3.0))), -np.arange(3.0))
        pick = lambda a, b: lax.cond(a > b, lambda: a * 2, lambda: b)  # noqa: E731  control flow in a window body
        with pytest.raises(RuntimeError, match=r"'stablehlo.reduce_window' on tensor<3xf64>"):
            run_metal(lambda x: lax.reduce_window(x, 0.0, pick, (2,), (1,), "VALID"), np.arange(3, dtype=np.float64))
    still_alive()


def test_errors_leave_other_programs_and_buffers_intact():
    dev = device("metal")
    kept = jax.device_put(X, dev)
    for _ in range(3):
        with pytest.raises(RuntimeError):
            run_metal(missing_kernel, X)
    np.testing.assert_array_equal(np.asarray(kept), X)
    check(lambda x: jnp.cumsum(jnp.sin(x)), X)


def test_out_of_memory_is_resource_exhausted_and_the_process_lives():
    # An intermediate of 2^48 elements, larger than any address space: the run fails with the code a
    # caller handling out-of-memory looks for (as on XLA:CPU), not an internal error.
    huge = lambda x: jnp.cumsum(jnp.broadcast_to(x, (1 << 24, 1 << 24)), axis=0)[-1, :4]
    with pytest.raises(RuntimeError, match="RESOURCE_EXHAUSTED"):
        np.asarray(run_metal(huge, np.float32(1.0)))
    still_alive()

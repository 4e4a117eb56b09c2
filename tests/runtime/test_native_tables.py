"""The plugin library's tables, as Python reads them through ctypes (jax_metal_plugin/_native.py), agree
with JAX and NumPy, and every Python module that needs a dtype name or a custom-call target takes it
from there: Python keeps no copy of cpp/support/dtype.def or cpp/stablehlo/custom_calls.def."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax.interpreters import mlir

from jax_metal_plugin import _callbacks, _linalg_lowerings, _metal_kernel, _native

DTYPES = _native.dtypes()
NARROW = ("subbyte_signed", "subbyte_unsigned", "narrow_float")


def numpy_dtype(name):
    return np.dtype(getattr(ml_dtypes, name, None) or name)


def test_the_dtype_table_spells_each_dtype_as_jax_and_mlir_do():
    assert len({row.name for row in DTYPES}) == len({row.mlir for row in DTYPES}) == len(DTYPES)
    with mlir.make_ir_context():
        for row in DTYPES:
            dtype = numpy_dtype(row.name)
            assert dtype.name == row.name and dtype.itemsize == row.itemsize, row
            assert str(mlir.dtype_to_ir_type(dtype)) == row.mlir, row
            assert jnp.dtype(row.name) == dtype


def test_every_dtype_jax_has_is_in_the_table():
    names = {row.name for row in DTYPES}
    jax_dtypes = {np.dtype(t).name for t in (jnp.bool_, jnp.int8, jnp.int16, jnp.int32, jnp.int64, jnp.uint8,
                                             jnp.uint16, jnp.uint32, jnp.uint64, jnp.float16, jnp.bfloat16,
                                             jnp.float32, jnp.float64, jnp.complex64, jnp.complex128, jnp.int4,
                                             jnp.uint4, jnp.float8_e4m3fn, jnp.float8_e5m2)}
    assert jax_dtypes <= names, jax_dtypes - names


def test_the_callback_names_are_the_tables():
    computing = [row for row in DTYPES if row.kind not in NARROW]
    assert _callbacks._names() == {row.name: row.mlir for row in computing}
    for row in computing:
        assert _callbacks._numpy_dtype(row.mlir.encode()) == numpy_dtype(row.name)
        assert _callbacks._plugin_name(numpy_dtype(row.name)) == row.mlir


def test_the_metal_kernel_types_are_the_tables():
    for row in DTYPES:
        if row.msl:
            assert _metal_kernel.msl_type(numpy_dtype(row.name)) == row.msl
        else:
            with pytest.raises(TypeError, match="Metal has no type"):
                _metal_kernel.msl_type(numpy_dtype(row.name))


NEWER_OPS = {
    "jax_metal.fma": lambda x: jax.lax.fma(x, x, x),
    "jax_metal.exp2": jnp.exp2,
    "jax_metal.log2": jnp.log2,
}
LINALG = {
    "jax_metal.lapack.eig": lambda x: jnp.linalg.eig(x),
    "jax_metal.lapack.lu": lambda x: jax.lax.linalg.lu(x),
    "jax_metal.lapack.svd": lambda x: jnp.linalg.svd(x),
    "jax_metal.lapack.eigh": lambda x: jnp.linalg.eigh(x),
    "jax_metal.lapack.tridiagonal": lambda x: jax.lax.linalg.tridiagonal(x),
    "jax_metal.lapack.geqp3": lambda x: jax.scipy.linalg.qr(x, pivoting=True),
    "jax_metal.lapack.tridiagonal_solve": lambda x: jax.lax.linalg.tridiagonal_solve(x[0], x[1], x[2], x),
}


def test_python_emits_only_targets_the_table_declares():
    table = _native.custom_calls()
    assert table.formats[_callbacks.CALL_TARGET] == "named"
    ours = {t for t, f in table.formats.items() if f == "named"} - {_callbacks.CALL_TARGET}
    assert ours == set(LINALG) | set(NEWER_OPS)
    x = jax.device_put(np.eye(3, dtype=np.complex64) * 2, jax.devices("metal")[0])
    emitted = dict(LINALG)
    if hasattr(jax.lax, "fma"):  # JAX releases that lower these to StableHLO newer than the plugin reads
        emitted.update(NEWER_OPS)
    for target, fn in emitted.items():
        lowered = jax.jit(fn).lower(x if target in LINALG else x.real)
        assert f"custom_call @{target}(" in lowered.as_text(), target
        lowered.compile()  # the plugin reads the backend_config Python wrote


def test_the_config_encoder_checks_names_and_types():
    assert (_native.custom_call_config("jax_metal.lapack.svd", full_matrices=True, compute_uv=np.bool_(False))
            == "full_matrices=true,compute_uv=false")
    assert _native.custom_call_config(_callbacks.CALL_TARGET, callback_id=7) == "callback_id=7"
    with pytest.raises(ValueError, match="unknown \\['speed'\\]"):
        _native.custom_call_config("jax_metal.lapack.svd", full_matrices=True, compute_uv=True, speed=1)
    with pytest.raises(ValueError, match="missing \\['compute_uv'\\]"):
        _native.custom_call_config("jax_metal.lapack.svd", full_matrices=True)
    with pytest.raises(TypeError, match="attribute callback_id must be a int"):
        _native.custom_call_config(_callbacks.CALL_TARGET, callback_id="7")
    with pytest.raises(ValueError, match="not a target"):
        _native.custom_call_config("Eigh", lower=True)  # JAX's format, not one Python writes

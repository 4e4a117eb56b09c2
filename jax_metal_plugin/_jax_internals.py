"""What the plugin changes inside JAX for platform "metal": JAX internals, kept apart in this module.

Each patch is guarded: where a JAX release moves or renames what it touches, the feature stays off (an
error naming it when used) and importing or initialising the plugin is never broken.
"""

from __future__ import annotations


def enable_donation() -> None:
    """Lets JAX lower buffer donation for platform "metal".

    JAX marks donated arguments in the lowered module (tf.aliasing_output, jax.buffer_donor) only for the
    platforms listed in jax._src.interpreters.mlir._platforms_with_donation; for any other it warns "Some
    donated buffers were not usable" and keeps the arguments alive. The plugin honours both attributes
    (the runtime reuses or frees a donated buffer and reports it deleted). The list is JAX internals:
    when a JAX version has no such list, donation stays off and nothing else changes.
    """
    try:
        from jax._src.interpreters import mlir
    except ImportError:
        return
    platforms = getattr(mlir, "_platforms_with_donation", None)
    if isinstance(platforms, list):
        if "metal" not in platforms:
            platforms.append("metal")
    elif isinstance(platforms, set):
        platforms.add("metal")
    elif isinstance(platforms, tuple) and "metal" not in platforms:
        mlir._platforms_with_donation = (*platforms, "metal")


def eigh_rule():
    """The lowering of eigh (and what JAX builds on it: svd, pinv, lstsq, matrix 2-norms) for "metal",
    or None when this JAX release lacks what it uses.

    JAX lowers eigh only for cpu and gpu (LAPACK and cuSOLVER kernels) and for tpu. TPU's rule is JAX
    code apart from the "Eigh" custom call it emits for matrices up to 256 (it splits larger ones with
    QDWH first); the plugin lowers that custom call itself (Jacobi, cpp/lower/lower_eigh.cc), so the TPU
    rule serves "metal" as it is. Both names are JAX internals: when a JAX version moves them, eigh stays
    unsupported (an error naming it) and nothing else changes.
    """
    try:
        from jax._src.lax import linalg
        from jax._src.tpu.linalg import eigh as tpu_eigh
    except ImportError:
        return None
    tpu_rule = getattr(tpu_eigh, "_eigh_tpu_lowering", None)
    implementations = getattr(linalg, "EighImplementation", None)
    if tpu_rule is None:
        return None

    def rule(ctx, operand, **params):
        if implementations is not None and params.get("algorithm") == implementations.QR:
            raise NotImplementedError("eigh: the QR implementation is not supported on platform metal; "
                                      "use the default (Jacobi, QDWH above 256)")
        return tpu_rule(ctx, operand, **params)

    return rule


def enable_eigh() -> None:
    """Registers eigh_rule() for platform "metal" (_linalg_lowerings wraps it for LAPACK's dtypes)."""
    try:
        from jax._src.interpreters import mlir
        from jax._src.lax import linalg
    except ImportError:
        return
    primitive = getattr(linalg, "eigh_p", None)
    rule = eigh_rule()
    if primitive is None or rule is None:
        return
    mlir.register_lowering(primitive, rule, platform="metal")


class _CacheablePlatform:
    """What compilation_cache.is_cache_used reads of a backend, with a platform name it accepts."""

    platform = "gpu"
    supports_executable_serialization = True


def enable_persistent_cache() -> None:
    """Lets JAX's persistent compilation cache (jax_compilation_cache_dir) store and load "metal" programs.

    JAX 0.10's jax._src.compilation_cache.is_cache_used(backend) accepts only the platforms in a list
    local to the function (tpu, gpu, cpu, neuron); for any other it answers False and every process
    compiles everything again. The plugin serializes executables (PJRT_Executable_Serialize and
    DeserializeAndLoad, with the plugin build's hash in the platform version JAX puts in the key), so
    the check is wrapped: a "metal" backend is asked about as a supported one, every other backend as
    it is. The answer is still JAX's (the cache must be enabled and a directory set). Releases without
    the function have no such gate, and releases that rename it leave the cache off for "metal".
    """
    try:
        from jax._src import compilation_cache
    except ImportError:
        return
    check = getattr(compilation_cache, "is_cache_used", None)
    if check is None or getattr(check, "_jax_metal_plugin", False):
        return

    def is_cache_used(backend, *args, **kwargs):
        if getattr(backend, "platform", None) == "metal":
            return check(_CacheablePlatform(), *args, **kwargs)
        return check(backend, *args, **kwargs)

    is_cache_used._jax_metal_plugin = True
    compilation_cache.is_cache_used = is_cache_used

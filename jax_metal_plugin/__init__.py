"""jax-metal-plugin: a JAX backend for Apple GPUs through Metal Performance Shaders Graph.

JAX finds this package through the `jax_plugins` entry-point group and calls `initialize()`, which
registers the PJRT plugin library as platform "metal". Select it with JAX_PLATFORMS=metal (or
"metal,cpu" for both).
"""

from __future__ import annotations

import os
import sys

__version__ = "0.1.0"

_LIBRARY_NAME = "libjax_metal_pjrt.dylib" if sys.platform == "darwin" else "libjax_metal_pjrt.so"


def library_path() -> str:
    """Path of the PJRT plugin library shipped with this package."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), _LIBRARY_NAME)


def initialize() -> None:
    """Registers the plugin with JAX (called by JAX's plugin discovery)."""
    path = library_path()
    if not os.path.exists(path):
        raise RuntimeError(f"jax-metal-plugin: the plugin library is missing at {path}; reinstall the package")
    from jax._src import xla_bridge

    xla_bridge.register_plugin("metal", priority=500, library_path=path)
    _enable_donation()
    _enable_eigh()


def _enable_donation() -> None:
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


def _enable_eigh() -> None:
    """Gives eigh, and what JAX builds on it (svd, pinv, lstsq, matrix 2-norms), a lowering for "metal".

    JAX lowers eigh only for cpu and gpu (LAPACK and cuSOLVER kernels) and for tpu. TPU's rule is JAX
    code apart from the "Eigh" custom call it emits for matrices up to 256 (it splits larger ones with
    QDWH first); the plugin lowers that custom call itself (Jacobi, cpp/mps/lower_eigh.cc), so the TPU
    rule serves "metal" as it is. Both names are JAX internals: when a JAX version moves them, eigh stays
    unsupported (an error naming it) and nothing else changes.
    """
    try:
        from jax._src.interpreters import mlir
        from jax._src.lax import linalg
        from jax._src.tpu.linalg import eigh as tpu_eigh
    except ImportError:
        return
    primitive = getattr(linalg, "eigh_p", None)
    tpu_rule = getattr(tpu_eigh, "_eigh_tpu_lowering", None)
    implementations = getattr(linalg, "EighImplementation", None)
    if primitive is None or tpu_rule is None:
        return

    def rule(ctx, operand, **params):
        if implementations is not None and params.get("algorithm") == implementations.QR:
            raise NotImplementedError("eigh: the QR implementation is not supported on platform metal; "
                                      "use the default (Jacobi, QDWH above 256)")
        return tpu_rule(ctx, operand, **params)

    mlir.register_lowering(primitive, rule, platform="metal")


def mps_graph(fn, *args, **kwargs) -> str:
    """The MPS op graph of jax.jit(fn) for these arguments: one MPSGraph call a line."""
    from . import tools

    return tools.mps_graph(fn, *args, **kwargs)


__all__ = ["initialize", "library_path", "mps_graph", "__version__"]

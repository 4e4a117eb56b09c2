"""jax-metal-plugin: a JAX backend for Apple GPUs through Metal Performance Shaders Graph.

JAX finds this package through the `jax_plugins` entry-point group and calls `initialize()`, which
registers the PJRT plugin library as platform "metal". Select it with JAX_PLATFORMS=metal (or
"metal,cpu" for both).
"""

from __future__ import annotations

import os
import sys
import warnings

__version__ = "0.1.0"

_LIBRARY_NAME = "libjax_metal_pjrt.dylib" if sys.platform == "darwin" else "libjax_metal_pjrt.so"


def library_path() -> str:
    """Path of the PJRT plugin library shipped with this package."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), _LIBRARY_NAME)


_registered = False


def initialize() -> None:
    """Registers the plugin with JAX (called by JAX's plugin discovery; a second call does nothing)."""
    global _registered
    if _registered:
        return
    path = library_path()
    if not os.path.exists(path):
        raise RuntimeError(f"jax-metal-plugin: the plugin library is missing at {path}; reinstall the package")
    from jax._src import xla_bridge

    from . import _approx_top_k, _callbacks, _capabilities, _jax_internals, _linalg_lowerings, _platform_clash

    clashes = _platform_clash.others() or _platform_clash.registered_elsewhere(
        getattr(xla_bridge, "_backend_factories", {}))
    if clashes:
        warnings.warn(_platform_clash.message(clashes), PlatformClashWarning, stacklevel=2)
        return
    _capabilities.install()  # before any compile: placement reads JAX_METAL_AVOID then
    xla_bridge.register_plugin("metal", priority=500, library_path=path)
    _registered = True
    _jax_internals.enable_donation()
    _jax_internals.enable_eigh()
    _callbacks.install(path)
    _linalg_lowerings.enable()
    _approx_top_k.enable()


class PlatformClashWarning(UserWarning):
    """Another installed package registers a JAX platform named "metal"; this plugin stepped aside."""


def mps_graph(fn, *args, **kwargs) -> str:
    """The MPS op graph of jax.jit(fn) for these arguments: one MPSGraph call a line."""
    from . import tools

    return tools.mps_graph(fn, *args, **kwargs)


__all__ = ["PlatformClashWarning", "initialize", "library_path", "mps_graph", "__version__"]

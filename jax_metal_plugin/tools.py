"""Developer tools: look at what the plugin makes of a jitted function, without running it."""

from __future__ import annotations

import jax
from jaxlib.mlir.dialects import stablehlo as _stablehlo

try:  # what JAX's PJRT client itself runs: legalizes chlo (into composites) before serializing
    from jax._src.lib import _jax

    _serialize = _jax.mlir.serialize_portable_artifact
except (ImportError, AttributeError):  # older or newer jaxlib layouts: plain StableHLO only
    _serialize = _stablehlo.serialize_portable_artifact_str

from . import _native


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def artifact_version() -> str:
    """The StableHLO version JAX sends this plugin: the older of jaxlib's and ours."""
    ours = _native.stablehlo_newest_version()
    theirs = _version_tuple(_stablehlo.get_current_version())
    return ".".join(str(v) for v in min(ours, theirs))


def portable_artifact(fn, *args, version: str | None = None, **kwargs) -> bytes:
    """The VHLO portable artifact of jax.jit(fn) for these arguments, as JAX's PJRT client makes it."""
    lowered = jax.jit(fn).lower(*args, **kwargs)
    text = lowered.as_text(dialect="stablehlo", debug_info=True)  # with source locations, as JAX sends it
    return _serialize(text, version or artifact_version())


def stablehlo_ir(fn, *args, **kwargs) -> str:
    """Our reader's view of jax.jit(fn)'s program."""
    return _native.parse_artifact(portable_artifact(fn, *args, **kwargs))


def mps_graph(fn, *args, **kwargs) -> str:
    """The MPS op graph of jax.jit(fn) for these arguments: one MPSGraph call a line."""
    return _native.place_artifact(portable_artifact(fn, *args, **kwargs))

"""Buffer donation for platform "metal": a patch of one JAX internal list.

JAX marks donated arguments in the lowered module (tf.aliasing_output, jax.buffer_donor) only for the
platforms in jax._src.interpreters.mlir._platforms_with_donation; for any other it warns "Some donated
buffers were not usable" and keeps the arguments alive. The plugin honours both attributes (the runtime
reuses or frees a donated buffer and reports it deleted), so it adds "metal" to that list. Where a JAX
release has no such list, donation stays off (JAX's warning) and status() says why.
"""

from __future__ import annotations

from . import _jax_internals, _status

FEATURE = "buffer donation"


def enable() -> None:
    try:
        platforms = _jax_internals.get("mlir._platforms_with_donation")
    except _jax_internals.MissingInternal as exc:
        _status.record(FEATURE, "patch", False, str(exc))
        return
    if isinstance(platforms, list):
        if "metal" not in platforms:
            platforms.append("metal")
    elif isinstance(platforms, set):
        platforms.add("metal")
    elif isinstance(platforms, tuple):
        if "metal" not in platforms:
            _jax_internals.mlir._platforms_with_donation = (*platforms, "metal")
    else:
        _status.record(FEATURE, "patch", False, f"{_jax_internals.dotted('mlir._platforms_with_donation')} is a "
                       f"{type(platforms).__name__}, not the list of platforms it was")
        return
    _status.record(FEATURE, "patch", True, "donate_argnums consumes the donated arrays on metal, as on cpu")

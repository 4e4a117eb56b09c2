"""Seeing what the plugin runs.

`jax.profiler.trace(logdir)` (and TensorBoard / Perfetto on its output) shows the plugin's own work on a
device plane of its own: each execution, the segments it ran with their executor (metal or host) and
the MPS ops in each, compiles, waits in the queue and for arguments, copies between host and device,
and Python callbacks. Nothing here is needed for that: JAX collects it through the PJRT profiler
extension.

On a Mac the same intervals can also go to os_signpost, so that Instruments (Metal System Trace, or any
template with Points of Interest) shows them on the timeline beside the GPU's work:

    import jax_metal_plugin.profiler as mp
    mp.start()          # or JAX_METAL_SIGNPOSTS=1 in the environment
    ...                 # record with Instruments meanwhile
    mp.stop()
"""

from __future__ import annotations

import ctypes
import functools
import os

from . import library_path

ENV_VAR = "JAX_METAL_SIGNPOSTS"


@functools.lru_cache(maxsize=None)
def _library() -> ctypes.CDLL:
    lib = ctypes.CDLL(library_path())
    lib.jmp_set_signposts.argtypes = [ctypes.c_int32]
    lib.jmp_set_signposts.restype = ctypes.c_int32
    return lib


def start() -> bool:
    """Sends the plugin's intervals to os_signpost. False where the system has no signposts (not macOS)."""
    return bool(_library().jmp_set_signposts(1))


def stop() -> None:
    """Stops sending intervals to os_signpost."""
    _library().jmp_set_signposts(0)


def start_from_environment() -> bool:
    """start() when JAX_METAL_SIGNPOSTS is set to 1 (called by the plugin's initialize())."""
    return os.environ.get(ENV_VAR, "") == "1" and start()

"""jax-metal-plugin: a JAX backend for Apple GPUs through Metal Performance Shaders Graph.

JAX finds this package through the `jax_plugins` entry-point group and calls `initialize()`, which
registers the PJRT plugin library as platform "metal". Select it with JAX_PLATFORMS=metal (or
"metal,cpu" for both). `status()` says what the plugin installed in JAX and what is switched off.
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


def _record_executor() -> None:
    from . import _native, _status

    try:
        side = _native.metal_side()
    except (OSError, ValueError, RuntimeError) as e:  # a bad JAX_METAL_EXECUTOR: the backend says so too
        _status.record("executor", "platform", False, str(e))
        return
    _status.record("executor", "platform", True, f"{side}: {_native.METAL_SIDES.get(side, side)}")


def initialize() -> None:
    """Registers the plugin with JAX (called by JAX's plugin discovery; a second call does nothing)."""
    global _registered
    if _registered:
        return
    path = library_path()
    if not os.path.exists(path):
        raise RuntimeError(f"jax-metal-plugin: the plugin library is missing at {path}; reinstall the package")
    from . import (_approx_top_k, _callbacks, _capabilities, _donation, _jax_internals, _linalg_lowerings,
                   _mpi, _newer_ops, _platform_clash, _status)

    register_plugin = _jax_internals.get("xla_bridge.register_plugin")  # without it there is no platform
    try:
        earlier = _jax_internals.get("xla_bridge._backend_factories")
    except _jax_internals.MissingInternal:  # only the installed packages can be checked for a clash
        earlier = {}
    clashes = _platform_clash.others() or _platform_clash.registered_elsewhere(earlier)
    if clashes:
        message = _platform_clash.message(clashes)
        _status.record("metal", "platform", False, message)
        warnings.warn(message, PlatformClashWarning, stacklevel=2)
        return
    _capabilities.install()  # before any compile: placement reads JAX_METAL_AVOID then
    _mpi.point_at_wheel()  # before the client: one over several processes loads MPI
    register_plugin("metal", priority=500, library_path=path)
    _registered = True
    _status.record("metal", "platform", True, f"PJRT plugin {path}")
    _record_executor()
    _donation.enable()
    _jax_internals.enable_persistent_cache()
    _callbacks.install(path)
    _linalg_lowerings.enable()
    _approx_top_k.enable()
    _newer_ops.enable()
    from . import profiler

    profiler.start_from_environment()


def status():
    """What the plugin installed in JAX in this process: the platform, each patch of JAX and each lowering
    for metal, active or switched off and why. Printed (or shown in a REPL) it is a table; `.off` lists
    what is switched off, `.feature(name)` one entry, `.as_dict()` all of it for a report."""
    import jax

    from . import _status

    try:
        jax.devices()  # JAX loads its plugins with its backends
    except RuntimeError:  # no backend came up; the record says what the plugin got to, if anything
        pass
    return _status.snapshot()


def stats() -> dict:
    """The plugin's work counters so far in this process (they only grow; take differences):
    graph_runs (device graph executions: Metal segments run, in placed mode those a Mac would run),
    syncs (an execution's host segment waiting for the device's results), fresh_allocs (new backing
    memory, not memory a cache reused), copies (of buffer contents), programs_lowered (StableHLO read
    and lowered), programs_deserialized (rebuilt from a serialized executable: persistent-cache hits)
    inline_runs (runs the calling thread did inside the call: cheap programs, with the device idle),
    and over several processes process_part_runs (runs of this process's part of a program, its psums
    taken with the other processes) and argument_exchanges (runs that exchanged arguments and ran the
    whole program here).
    Empty when the plugin library lacks the entry points."""
    import ctypes

    try:
        lib = ctypes.CDLL(library_path())
        names, stat = lib.jmp_pjrt_stat_names, lib.jmp_pjrt_stat
    except (OSError, AttributeError):
        return {}
    names.restype = ctypes.c_char_p
    stat.restype = ctypes.c_int64
    stat.argtypes = [ctypes.c_char_p]
    return {n: int(stat(n.encode())) for n in names().decode().split(",")}


def host_isa() -> str:
    """The instruction-set level the host executor's vector loops run at in this process: "sse2",
    "sse4.2", "avx2" or "avx512" on x86-64 (the CPU's best, or a lower one JMP_HOST_ISA asks for),
    "neon" on Apple's CPUs; empty when the plugin library lacks the entry point."""
    import ctypes

    try:
        fn = ctypes.CDLL(library_path()).jmp_host_isa
    except (OSError, AttributeError):
        return ""
    fn.restype = ctypes.c_char_p
    return fn().decode()


class PlatformClashWarning(UserWarning):
    """Another installed package registers a JAX platform named "metal"; this plugin stepped aside."""


def mps_graph(fn, *args, **kwargs) -> str:
    """The MPS op graph of jax.jit(fn) for these arguments: one MPSGraph call a line."""
    from . import tools

    return tools.mps_graph(fn, *args, **kwargs)


def metal_kernel(name, input_names, output_names, source, **kwargs):
    """A user's own Metal compute kernel as a JAX operation, with a reference for where Metal cannot run
    it (jax_metal_plugin._metal_kernel says how; docs/metal-kernels.md shows an example)."""
    from ._metal_kernel import metal_kernel as make

    return make(name, input_names, output_names, source, **kwargs)


def trim_memory() -> int:
    """Gives back to the system the memory the metal device keeps for reuse (freed buffers the caching
    allocator holds); buffers in use are untouched. Returns the number of bytes released. `memory_stats()`
    reports what the pool holds as `bytes_reserved`."""
    import ctypes

    library = ctypes.CDLL(library_path())
    library.jmp_pjrt_trim_memory.restype = ctypes.c_int64
    return int(library.jmp_pjrt_trim_memory())


__all__ = [
    "PlatformClashWarning", "initialize", "library_path", "metal_kernel", "mps_graph", "stats", "status", "trim_memory",
    "__version__",
]

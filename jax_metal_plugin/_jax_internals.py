"""Every private JAX name (jax._src ...) the plugin and its tests use, reached through this module only.

JAX promises nothing about jax._src: any release may move or rename what is listed in NAMES. Code asks
for a module by its short name (``from jax_metal_plugin._jax_internals import mlir``) or for one name
(``get("mlir.custom_call")``); what the installed JAX lacks raises MissingInternal, naming the dotted
path and the JAX release, never an AttributeError deep inside a lowering. The plugin catches it where a
feature can stay off (``status()`` then says which and why); tests/tooling/test_jax_internals.py
imports every entry of NAMES, so CI at both ends of the supported JAX range names whatever JAX moved.
"""

from __future__ import annotations

import importlib
from types import ModuleType

# Short name -> the JAX module it stands for. When a JAX release moves a module, the value becomes a
# tuple of its places, newest first: the first that imports is used, so both ends of the supported
# range keep working.
MODULES: dict[str, str | tuple[str, ...]] = {
    "callback": "jax._src.callback",
    "checkify": "jax._src.checkify",
    "compiler": "jax._src.compiler",
    "compilation_cache": "jax._src.compilation_cache",
    "core": "jax._src.core",
    "debugging": "jax._src.debugging",
    "dtypes": "jax._src.dtypes",
    "effects": "jax._src.effects",
    "xla_bridge": "jax._src.xla_bridge",
    "mlir": "jax._src.interpreters.mlir",
    "ann": "jax._src.lax.ann",
    "lax_internal": "jax._src.lax.lax",
    "linalg": "jax._src.lax.linalg",
    "slicing": "jax._src.lax.slicing",
    "tpu_eigh": "jax._src.tpu.linalg.eigh",
    "tpu_svd": "jax._src.tpu.linalg.svd",
    "jaxlib_ext": "jax._src.lib._jax",
    "ir": "jax._src.lib.mlir.ir",
    "hlo": "jax._src.lib.mlir.dialects.hlo",
    # scripts/jax_test_dut.py only, beside JAX's own test files (it needs absl, which jax does not)
    "test_util": "jax._src.test_util",
}

# "<short module>.<attribute>" -> what relies on it. The plugin's entries first, then the tests'.
NAMES = {
    # registration (__init__.py, _platform_clash.py)
    "xla_bridge.register_plugin": "registering platform metal",
    "xla_bridge._backend_factories": "noticing another plugin that registered metal first",
    # donation (_donation.py)
    "mlir._platforms_with_donation": "buffer donation on metal",
    # lowerings (_linalg_lowerings.py, _approx_top_k.py, _callbacks.py)
    "mlir.register_lowering": "every lowering the plugin registers for metal",
    "mlir.custom_call": "the LAPACK and callback custom calls",
    "mlir.aval_to_ir_type": "the result types of those custom calls",
    "mlir.lower_fun": "lu's, approx_top_k's and fmuladd's lowerings for metal",
    "mlir.multi_broadcast_in_dim": "lax.fma's operands on metal",
    "mlir.TokenSet": "ordered callbacks (io_callback(ordered=True), ordered debug prints)",
    "core.ShapedArray": "eig's result types",
    "linalg.eig_p": "eig on metal (LAPACK)",
    "linalg.eigh_p": "eigh on metal",
    "linalg.lu_p": "lu on metal",
    "linalg._lu_python": "float32 lu on metal (JAX's blocked LU)",
    "linalg.svd_p": "svd on metal",
    "linalg.tridiagonal_p": "tridiagonal reduction on metal (LAPACK)",
    "linalg.geqp3_p": "pivoted QR on metal (LAPACK)",
    "linalg.tridiagonal_solve_p": "tridiagonal_solve on metal (LAPACK)",
    "tpu_eigh._eigh_tpu_lowering": "small float32 eigh on metal (Jacobi through JAX's TPU rule)",
    "tpu_svd._svd_tpu_lowering_rule": "float32 svd on metal (QDWH through JAX's TPU rule)",
    "ann.approx_top_k_p": "approx_max_k / approx_min_k on metal",
    "callback.pure_callback_p": "jax.pure_callback on metal",
    "callback.pure_callback_impl": "what a pure_callback runs",
    "callback.io_callback_p": "io_callback on metal",
    "callback.io_callback_impl": "what an io_callback runs",
    "callback._OrderedIOEffect": "io_callback(ordered=True) on metal",
    "checkify.check_p": "checkify.check staged without checkify on metal",
    "checkify.functionalization_error": "checkify.check staged without checkify on metal",
    "checkify.python_err": "checkify.check with runtime errors on metal",
    "checkify.config": "checkify.check with runtime errors on metal",
    "debugging.debug_callback_p": "jax.debug.callback on metal",
    "debugging.debug_callback_impl": "eager jax.debug.callback/print without a CPU device",
    "debugging.debug_print_p": "jax.debug.print on metal",
    "debugging.debug_effect": "jax.debug.print on metal",
    "debugging.ordered_debug_effect": "jax.debug.print(ordered=True) on metal",
    "debugging.logger": "logging a failed eager jax.debug.callback as JAX does",
    "effects.ordered_effects": "ordered jax.debug.callback on metal",
    "dtypes.canonicalize_dtype": "callback results in the dtype JAX would use (float64 -> float32 without x64)",
    "xla_bridge.local_devices": "callbacks: whether a CPU device is there to hand them",
    "hlo.TokenType": "ordered callbacks' token results",
    "jaxlib_ext.mlir": "mps_graph(): serializing as JAX's PJRT client does (chlo legalized)",
    # tests
    "xla_bridge.get_backend": "tests: compiling StableHLO text on one backend",
    "xla_bridge.xla_client": "tests: compiling StableHLO text on one backend",
    "compiler.get_compile_options": "tests: executables serialized through PJRT",
    "core.Primitive": "tests: primitives lowering to raw StableHLO linear algebra",
    "core.typeof": "tests: scatter with a body that uses the update",
    "lax_internal._reduction_jaxpr": "tests: scatter with a body that uses the update",
    "lax_internal._zero": "tests: scatter with a body that uses the update",
    "slicing.scatter_p": "tests: scatter with a body that uses the update",
    "slicing.GatherScatterMode": "tests: scatter with a body that uses the update",
    "linalg.geqrf": "tests: QR's raw factored form and taus",
    "ir.BoolAttr": "tests: raw stablehlo.cholesky",
    "hlo.cholesky": "tests: raw stablehlo.cholesky",
}


class MissingInternal(ImportError):
    """A JAX internal the plugin relies on is not where this JAX release keeps it."""


def _jax_version() -> str:
    try:
        import jax

        return jax.__version__
    except ImportError:
        return "(jax not importable)"


def module(short: str) -> ModuleType:
    """The JAX module listed in MODULES under `short`; MissingInternal when this JAX lacks it."""
    errors = []
    for dotted in _places(short):
        try:
            return importlib.import_module(dotted)
        except ImportError as exc:
            errors.append(f"{dotted}: {exc}")
        # Some are attributes of their package rather than modules (jax._src.lib._jax, the hlo dialect).
        package, _, attribute = dotted.rpartition(".")
        try:
            found = getattr(importlib.import_module(package), attribute)
        except (ImportError, AttributeError):
            continue
        if isinstance(found, ModuleType):
            return found
    raise MissingInternal(f"{' or '.join(_places(short))} is not importable in jax {_jax_version()} "
                          f"({'; '.join(errors)})")


def _places(short: str) -> tuple[str, ...]:
    places = MODULES[short]
    return (places,) if isinstance(places, str) else places


def get(name: str):
    """The JAX internal `name` ("<short module>.<attribute>", an entry of NAMES); MissingInternal, naming
    its dotted path, the JAX release and what needs it, when this JAX does not have it there."""
    short, _, attribute = name.partition(".")
    found = module(short)
    try:
        return getattr(found, attribute)
    except AttributeError:
        need = NAMES.get(name, "")
        raise MissingInternal(f"{dotted(name)} is not in jax {_jax_version()}" +
                              (f"; it is needed for {need}" if need else "")) from None


def dotted(name: str) -> str:
    """The full path of an entry of NAMES: "mlir.custom_call" -> "jax._src.interpreters.mlir.custom_call"."""
    short, _, attribute = name.partition(".")
    return f"{_places(short)[0]}.{attribute}"


def missing() -> list[str]:
    """The entries of NAMES this JAX release lacks, by their dotted paths (empty when all are there)."""
    absent = []
    for name in NAMES:
        try:
            get(name)
        except MissingInternal:
            absent.append(dotted(name))
    return absent


def __getattr__(short: str) -> ModuleType:
    """`from jax_metal_plugin._jax_internals import mlir` imports jax._src.interpreters.mlir."""
    if short in MODULES:
        return module(short)
    raise AttributeError(f"module {__name__!r} has no attribute {short!r}")


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
        compilation_cache = module("compilation_cache")
    except MissingInternal:
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

"""Host callbacks on platform "metal": jax.debug.print, jax.debug.callback, jax.pure_callback, io_callback.

JAX lowers its callback primitives only for cpu, gpu and tpu (mlir.emit_python_callback). Here each gets
a lowering for "metal": a custom call "jax_metal_python_callback" whose backend_config is an id in this
module's registry; the plugin lowers it to its host-only PythonCallback op (cpp/lower/lower_callback.cc).
At run time the op calls the trampoline installed below through the plugin library's C symbol
jmp_set_python_callback: the trampoline (ctypes takes the GIL for it, and only for it) builds NumPy
arrays of the operands, runs what JAX's own lowering would run, and hands each result back through
jmp_python_callback_result, which checks it against the declared type. An exception becomes the
execution's error, with its type and message.

What runs is JAX's own eager implementation of the primitive (debug_callback_impl, debug_print_impl,
pure_callback_impl, io_callback_impl): with a CPU backend present (JAX_PLATFORMS unset or
"metal,cpu") the callback sees the very values it sees on cpu. Without one (JAX_PLATFORMS=metal), JAX's
implementations refuse ("failed to find a local CPU device"); then the same implementation runs with the
default (metal) device in the CPU device's place, so the callback still gets jax.Arrays (PRNG keys
included), in jitted code and eagerly alike (debug_callback_impl is wrapped for the eager case).

Everything here touches JAX internals (through _jax_internals); a name a JAX release lacks leaves that
primitive without a metal lowering (JAX's error when used, `status()` says why) and never breaks
initialisation.
"""

from __future__ import annotations

import ctypes
import functools
import inspect
import itertools
import logging
import math
import threading
import traceback
from typing import Callable

import numpy as np

from . import _jax_internals, _native, _status

logger = logging.getLogger(__name__)

CALL_TARGET = "jax_metal_python_callback"

# Pointers travel as c_void_p (a Python int, or None): a POINTER argument costs ctypes an object per call.
_TRAMPOLINE_TYPE = ctypes.CFUNCTYPE(
    ctypes.c_int32,  # 0, or nonzero with the error text written
    ctypes.c_uint64,  # callback id
    ctypes.c_char_p,  # the operands' dtypes and dims: b"f32[];complex<f32>[2,3]" (cpp/exec/host_callback.h)
    ctypes.c_int32,  # operands
    ctypes.c_void_p,  # their data pointers
    ctypes.c_int32,  # results
    ctypes.c_void_p,  # the call's result sink
    ctypes.c_void_p,  # error buffer
    ctypes.c_int64,  # its capacity
)

_lock = threading.Lock()
_ids = itertools.count(1)
# id -> the function its PythonCallback ops call. An entry is retired once the executables lowered with
# it are gone (a _Lease among their lowering's keepalives is collected), and dropped at the next
# registration that finds no execution queued or running: a run JAX queued before dropping the
# executable may still call it. Without ModuleContext.add_keepalive entries are never retired.
_registry: dict[int, Callable] = {}
_retired: list[int] = []
_library = None
_trampoline = None  # the ctypes function object: must outlive every call


class _Lease:
    """Kept alive by the executables of one lowering; retires its callback when they are gone."""

    __slots__ = ("callback_id",)

    def __init__(self, callback_id):
        self.callback_id = callback_id

    def __del__(self):
        _retired.append(self.callback_id)  # list.append: safe from any thread, no lock taken in __del__


def _sweep() -> None:
    """Drops retired callbacks when no execution can still call them."""
    if not _retired or _library is None or _library.jmp_pjrt_runs_in_flight() != 0:
        return
    while _retired:
        _registry.pop(_retired.pop(), None)


# ---- dtypes as the plugin names them (the library's dtype table, cpp/support/dtype.def)


@functools.cache
def _names() -> dict[str, str]:
    """NumPy name -> the plugin's name, for the types a program computes on (narrow types reach a
    callback as their storage type, converted below)."""
    return {row.name: row.mlir for row in _native.dtypes() if row.kind not in _NARROW_KINDS}


_NARROW_KINDS = ("subbyte_signed", "subbyte_unsigned", "narrow_float")


def _numpy_dtype_named(name: str) -> np.dtype:
    try:
        return np.dtype(name)
    except TypeError:  # bfloat16 and the other ml_dtypes types
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, name))


@functools.lru_cache(maxsize=None)
def _numpy_dtype(name: bytes) -> np.dtype:
    name = name.decode()
    for numpy_name, plugin_name in _names().items():
        if plugin_name == name:
            return _numpy_dtype_named(numpy_name)
    raise TypeError(f"Python callback: operand dtype {name} has no NumPy equivalent")


def _plugin_name(dtype: np.dtype) -> str:
    return _names().get(dtype.name, dtype.name)


# ---- the trampoline


@functools.lru_cache(maxsize=1024)
def _layout(operands: bytes) -> tuple:
    """(dtype, shape, bytes) per operand, from the runtime's description of them (the same text for every
    call of an op, so decoded once)."""
    layout = []
    for text in operands.decode().split(";") if operands else ():
        name, dims = text[:-1].split("[")
        dtype = _numpy_dtype(name.encode())
        shape = tuple(int(d) for d in dims.split(",")) if dims else ()
        layout.append((dtype, shape, dtype.itemsize * math.prod(shape)))
    return tuple(layout)


def _operands(layout, n, data):
    if len(layout) != n:
        raise RuntimeError(f"Python callback: {n} operands, described as {len(layout)}")
    if not n:
        return []
    addresses = (ctypes.c_void_p * n).from_address(data)
    arrays = []
    for (dtype, shape, size), address in zip(layout, addresses):
        if size and address:
            # One copy out of the executor's memory, which later ops reuse: a callback may keep its
            # arguments (appending them to a list is common). Viewing the memory through a ctypes array
            # and copying that costs a third of an empty array's `.ctypes.data` plus a memmove.
            array = np.frombuffer((ctypes.c_char * size).from_address(address), dtype).copy().reshape(shape)
        else:
            array = np.zeros(shape, dtype)
        arrays.append(array)
    return arrays


def _canonical(value) -> np.ndarray:
    """A result as JAX's own callback lowering makes it (emit_python_callback): np.asarray, then the
    dtype JAX would use for it (float64 -> float32 without jax_enable_x64)."""
    array = np.asarray(value)
    try:
        canonical = _jax_internals.get("dtypes.canonicalize_dtype")(array.dtype)
    except (_jax_internals.MissingInternal, TypeError):  # TypeError: a dtype JAX has no canonical form for
        canonical = array.dtype
    if canonical != array.dtype:
        array = array.astype(canonical)
    return array if array.flags.c_contiguous else array.copy(order="C")  # ascontiguousarray makes 0-d 1-d


class _ResultError(RuntimeError):
    pass


def _deliver(outs, n_results, sink):
    outs = tuple(outs) if outs is not None else ()
    if len(outs) != n_results:
        raise RuntimeError(
            f"Mismatched number of outputs from callback. Expected: {n_results}, Actual: {len(outs)}")
    if not outs:
        return
    error = ctypes.create_string_buffer(4096)
    for i, value in enumerate(outs):
        array = _canonical(value)
        dims = (ctypes.c_int64 * max(array.ndim, 1))(*array.shape)
        rc = _library.jmp_python_callback_result(
            sink, i, ctypes.c_void_p(array.ctypes.data), _plugin_name(array.dtype).encode(), array.ndim, dims, error,
            len(error))
        if rc != 0:
            raise _ResultError(error.value.decode(errors="replace"))


def _error_text(exc: BaseException) -> str:
    if isinstance(exc, _ResultError):
        return str(exc)
    head = f"Python callback raised {type(exc).__name__}: {exc}"
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return head + "\n" + tb


def _call(callback_id, operands, n, data, n_results, sink, error, capacity):
    try:
        fn = _registry.get(callback_id)
        if fn is None:
            raise RuntimeError(f"callback {callback_id} no longer exists (its jitted function was discarded)")
        outs = fn(*_operands(_layout(operands), n, data))
        _deliver(outs, n_results, sink)
        return 0
    except BaseException as exc:  # noqa: BLE001 - nothing may escape into C
        try:
            text = _error_text(exc).encode("utf-8", errors="replace")[: max(capacity - 1, 0)]
            ctypes.memmove(error, text + b"\0", len(text) + 1)
        except BaseException:  # noqa: BLE001
            pass
        return 1


# ---- what runs at call time


_has_cpu: list[bool] = []  # once known: JAX's backends do not change once initialised


def _cpu_available() -> bool:
    if _has_cpu:
        return _has_cpu[0]
    try:
        found = bool(_jax_internals.xla_bridge.local_devices(backend="cpu"))
    except RuntimeError:  # no CPU backend: JAX_PLATFORMS leaves it out, or it failed to initialise
        found = False
    _has_cpu.append(found)
    return found


def _host_device():
    """Where a callback's arguments live without a CPU backend: the default device (metal), which on
    unified memory is host memory too."""
    import jax

    return jax.local_devices()[0]


def _metal_impl(*args, callback, kind, **_):
    """JAX's pure/io callback implementation with the CPU device replaced by the default one: the
    callback gets jax.Arrays, as on cpu, and its results go back as NumPy arrays."""
    import jax

    device = _host_device()
    args = jax.device_put(args, device)
    with jax.default_device(device):
        try:
            return jax.tree_util.tree_map(np.asarray, callback(*args))
        except BaseException:
            logger.exception("jax.%s failed", kind)
            raise


def _runner(jax_impl, kind, params):
    def run(*args):
        if _cpu_available():
            return tuple(jax_impl(*args, **params))
        return tuple(_metal_impl(*args, kind=kind, **params))

    return run


# ---- lowering


def _ir_type(ctx, aval):
    mlir = _jax_internals.mlir
    try:
        return mlir.aval_to_ir_type(ctx.module_context, aval)
    except TypeError:
        return mlir.aval_to_ir_type(aval)


# ---- sub-byte and 8-bit float types: the program computes on a storage type (int4 as int8, uint4 as
# uint8, a float8/float4 as uint8 holding its bits; stablehlo/passes/narrow_types.cc), the callback
# sees the type JAX declared.

_SIGNED_STORAGE = {"int2": np.int8, "int4": np.int8}


def _narrow_dtype(aval):
    try:
        dtype = np.dtype(aval.dtype)
    except TypeError:  # extended dtypes (PRNG keys) travel as their physical type
        return None
    if dtype.itemsize != 1 or dtype.kind in "biu" and dtype.name not in ("int2", "uint2", "int4", "uint4"):
        return None
    if dtype.name in ("bool", "int8", "uint8"):
        return None
    return dtype


def _from_storage(array, dtype):
    array = np.asarray(array)
    if dtype.kind == "V" or dtype.name.startswith("float"):
        return array.view(np.uint8).view(dtype)  # the bit pattern
    return array.astype(dtype)  # a value of the narrow integer type, exact


def _to_storage(value, dtype):
    array = np.asarray(value)
    if array.dtype != dtype:
        return value  # not what the program declared: the runtime's check names both types
    if dtype.name in _SIGNED_STORAGE:
        return array.astype(np.int8)
    if dtype.name.startswith("uint"):
        return array.astype(np.uint8)
    return array.view(np.uint8)


def _narrow_adapter(fn, operand_avals, result_avals):
    ins = [_narrow_dtype(a) for a in operand_avals]
    outs = [_narrow_dtype(a) for a in result_avals]
    if not any(d is not None for d in ins + outs):
        return fn

    def run(*args):
        args = [a if d is None else _from_storage(a, d) for a, d in zip(args, ins)]
        results = tuple(fn(*args))
        if len(results) != len(outs):
            return results
        return tuple(r if d is None else _to_storage(r, d) for r, d in zip(results, outs))

    return run


def _emit(ctx, operands, fn, *, result_avals, token=None, has_side_effect):
    """The custom call for one callback; returns (results, the new token or None)."""
    mlir = _jax_internals.mlir
    hlo = _jax_internals.hlo
    fn = _narrow_adapter(fn, list(ctx.avals_in), list(result_avals))
    with _lock:
        _sweep()
        callback_id = next(_ids)
        _registry[callback_id] = fn
    add_keepalive = getattr(ctx.module_context, "add_keepalive", None)
    if add_keepalive is not None:
        add_keepalive(_Lease(callback_id))
    operands = list(operands)
    result_types = [_ir_type(ctx, aval) for aval in result_avals]
    if token is not None:
        operands = [token, *operands]
        result_types = [hlo.TokenType.get(), *result_types]
    op = mlir.custom_call(CALL_TARGET, result_types=result_types, operands=operands,
                          backend_config=_native.custom_call_config(CALL_TARGET, callback_id=callback_id),
                          has_side_effect=has_side_effect, api_version=2)
    results = list(op.results)
    new_token = results.pop(0) if token is not None else None
    return results, new_token


def _with_token(ctx, effect, emit):
    """Threads the token of an ordered effect through `emit(token) -> (results, token)`."""
    token_set = _jax_internals.get("mlir.TokenSet")
    token = ctx.tokens_in.get(effect)
    results, token = emit(token)
    ctx.set_tokens_out(ctx.tokens_in.update_tokens(token_set({effect: token})))
    return results


def _pure_callback_rule(ctx, *args, callback, sharding=None, **params):
    cb = _jax_internals.callback
    run = _runner(cb.pure_callback_impl, "pure_callback", dict(callback=callback, sharding=None, **params))
    results, _ = _emit(ctx, args, run, result_avals=ctx.avals_out, has_side_effect=False)
    return results


def _io_callback_rule(ctx, *args, callback, sharding=None, ordered=False, **params):
    cb = _jax_internals.callback
    run = _runner(cb.io_callback_impl, "io_callback", dict(callback=callback, sharding=None, ordered=ordered, **params))
    if ordered:
        return _with_token(ctx, cb._OrderedIOEffect, lambda token: _emit(
            ctx, args, run, result_avals=ctx.avals_out, token=token, has_side_effect=True))
    results, _ = _emit(ctx, args, run, result_avals=ctx.avals_out, has_side_effect=True)
    return results


def _debug_rule(ctx, args, run, effect):
    if _jax_internals.get("effects.ordered_effects").contains(effect):
        return _with_token(ctx, effect, lambda token: _emit(
            ctx, args, run, result_avals=(), token=token, has_side_effect=True))
    results, _ = _emit(ctx, args, run, result_avals=(), has_side_effect=True)
    return results


def _debug_callback_rule(ctx, *args, effect, **params):
    primitive = _jax_internals.get("debugging.debug_callback_p")

    def run(*flat_args):
        primitive.impl(*flat_args, effect=effect, **params)
        return ()

    return _debug_rule(ctx, args, run, effect)


def _debug_print_rule(ctx, *args, ordered, **params):
    debugging = _jax_internals.debugging
    primitive = debugging.debug_print_p
    effect = debugging.ordered_debug_effect if ordered else debugging.debug_effect

    def run(*flat_args):
        primitive.impl(*flat_args, ordered=ordered, **params)
        return ()

    return _debug_rule(ctx, args, run, effect)


def _check_rule(ctx, *args, err_tree, debug):
    """checkify.check / debug_check staged without checkify.checkify, as JAX lowers them for cpu: a
    debug_check does nothing, a check is refused unless runtime errors are enabled, and then raises
    from a callback when its predicate fails."""
    checkify = _jax_internals.checkify
    if debug:
        return []
    if not checkify.config.xla_runtime_errors.value:
        raise checkify.functionalization_error
    raise_if_failed = functools.partial(checkify.python_err, err_tree)
    results, _ = _emit(ctx, args, lambda *flat: tuple(raise_if_failed(*flat)), result_avals=ctx.avals_out,
                       has_side_effect=True)
    return results


def _wrap_debug_callback_impl(debugging) -> None:
    """Eager jax.debug.callback/print with JAX_PLATFORMS=metal: JAX's implementation wants a CPU device
    to put the arguments on; without one they go to the default (metal) device instead (with one, JAX's
    implementation runs unchanged)."""
    original = debugging.debug_callback_impl
    if getattr(original, "_jax_metal_wrapped", False):
        return

    @functools.wraps(original)
    def impl(*args, callback, **params):
        if _cpu_available():
            return original(*args, callback=callback, **params)
        import jax

        device = _host_device()
        args = jax.device_put(args, device)
        with jax.default_device(device):
            try:
                callback(*args)
            except BaseException:
                debugging.logger.exception("jax.debug.callback failed")
                raise
        return ()

    impl._jax_metal_wrapped = True
    debugging.debug_callback_impl = impl  # debug_print_impl looks it up here at call time
    debugging.debug_callback_p.def_impl(impl)


# feature -> (the primitive, the JAX internals its rule uses, the rule)
LOWERINGS = {
    "pure_callback": ("callback.pure_callback_p", ("callback.pure_callback_impl",), _pure_callback_rule),
    "io_callback": ("callback.io_callback_p", ("callback.io_callback_impl", "callback._OrderedIOEffect",
                                               "mlir.TokenSet"), _io_callback_rule),
    "debug_callback": ("debugging.debug_callback_p", ("effects.ordered_effects", "mlir.TokenSet"),
                       _debug_callback_rule),
    "debug_print": ("debugging.debug_print_p", ("debugging.ordered_debug_effect", "debugging.debug_effect",
                                                "effects.ordered_effects", "mlir.TokenSet"), _debug_print_rule),
    "check": ("checkify.check_p", ("checkify.functionalization_error", "checkify.python_err", "checkify.config"),
              _check_rule),
}
EAGER_PATCH = "eager debug callbacks"


def _off(reason: str) -> None:
    for feature in LOWERINGS:
        _status.record(feature, "lowering", False, reason)
    _status.record(EAGER_PATCH, "patch", False, reason)


def install(library_path: str) -> None:
    """Installs the trampoline in the plugin library and the metal lowerings (called by initialize())."""
    global _library, _trampoline
    try:
        mlir = _jax_internals.mlir
        for needed in ("mlir.register_lowering", "mlir.custom_call", "mlir.aval_to_ir_type", "hlo.TokenType"):
            _jax_internals.get(needed)
    except _jax_internals.MissingInternal as exc:
        _off(str(exc))
        return
    try:
        library = ctypes.CDLL(library_path)
        library.jmp_set_python_callback.argtypes = [_TRAMPOLINE_TYPE]
        library.jmp_set_python_callback.restype = None
        library.jmp_python_callback_result.argtypes = [
            ctypes.c_void_p, ctypes.c_int32, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int32,
            ctypes.POINTER(ctypes.c_int64), ctypes.c_char_p, ctypes.c_int64]
        library.jmp_python_callback_result.restype = ctypes.c_int32
        library.jmp_pjrt_runs_in_flight.argtypes = []
        library.jmp_pjrt_runs_in_flight.restype = ctypes.c_int64
    except (OSError, AttributeError) as exc:
        _off(f"the plugin library has no callback entry points ({exc})")
        return
    _library = library
    _trampoline = _TRAMPOLINE_TYPE(_call)
    library.jmp_set_python_callback(_trampoline)

    params = inspect.signature(mlir.register_lowering).parameters
    # Each lowering registers its own callback: a cached rule would share one between modules.
    extra = {"cacheable": False} if "cacheable" in params else {}
    for feature, (primitive_name, needed, rule) in LOWERINGS.items():
        try:
            primitive = _jax_internals.get(primitive_name)
            for name in needed:
                _jax_internals.get(name)
        except _jax_internals.MissingInternal as exc:
            _status.record(feature, "lowering", False, str(exc))
            continue
        mlir.register_lowering(primitive, rule, platform="metal", **extra)
        _status.record(feature, "lowering", True, "calls back into Python from a host op, as on cpu")
    try:
        debugging = _jax_internals.debugging
        _jax_internals.get("debugging.debug_callback_impl")
        _jax_internals.get("debugging.logger")
    except _jax_internals.MissingInternal as exc:
        _status.record(EAGER_PATCH, "patch", False, str(exc))
        return
    _wrap_debug_callback_impl(debugging)
    _status.record(EAGER_PATCH, "patch", True, "eager jax.debug.callback/print work without a CPU device")

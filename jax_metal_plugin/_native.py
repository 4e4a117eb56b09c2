"""The plugin library's tool functions (cpp/plugin/tool_api.cc) through ctypes.

Python reaches C++ only through the plugin library's C symbols, never through a Python extension module:
the one library then serves every Python version (the macOS wheel is py3-none). Each call returns a
status code and a text the library allocated, the result or the error message; it is copied here and
freed with jmp_tool_free. ctypes releases the GIL for the duration of each call.
"""

from __future__ import annotations

import ctypes
import functools
from typing import NamedTuple

_OK, _BAD_INPUT = 0, 1
_TEXT = ctypes.POINTER(ctypes.c_char)  # not c_char_p: ctypes would copy it and lose the pointer to free


@functools.cache
def _library() -> ctypes.CDLL:
    from . import library_path

    lib = ctypes.CDLL(library_path())
    for name in ("jmp_tool_parse_artifact", "jmp_tool_lower_artifact", "jmp_tool_place_artifact"):
        fn = getattr(lib, name)
        fn.argtypes = [ctypes.c_char_p, ctypes.c_int64, ctypes.POINTER(_TEXT)]
        fn.restype = ctypes.c_int32
    for name in ("jmp_tool_op_kinds", "jmp_tool_dtypes", "jmp_tool_custom_calls", "jmp_tool_metal_side"):
        getattr(lib, name).argtypes = [ctypes.POINTER(_TEXT)]
        getattr(lib, name).restype = ctypes.c_int32
    lib.jmp_tool_free.argtypes = [_TEXT]
    lib.jmp_tool_free.restype = None
    lib.jmp_tool_stablehlo_newest_version.argtypes = [ctypes.POINTER(ctypes.c_int64)] * 3
    lib.jmp_tool_stablehlo_newest_version.restype = None
    return lib


def _text_call(fn, *args) -> str:
    out = _TEXT()
    code = fn(*args, ctypes.byref(out))
    if not out:
        raise MemoryError("jax-metal-plugin: the plugin library could not allocate its answer")
    try:
        text = ctypes.string_at(out).decode("utf-8", errors="replace")
    finally:
        _library().jmp_tool_free(out)
    if code == _OK:
        return text
    raise (ValueError if code == _BAD_INPUT else RuntimeError)(text)


def stablehlo_newest_version() -> tuple[int, int, int]:
    """The newest StableHLO version the plugin's reader accepts."""
    parts = [ctypes.c_int64() for _ in range(3)]
    _library().jmp_tool_stablehlo_newest_version(*(ctypes.byref(p) for p in parts))
    return tuple(p.value for p in parts)


def parse_artifact(data: bytes) -> str:
    """Reads a VHLO portable artifact; returns our StableHLO IR as text. ValueError on bad input."""
    data = bytes(data)
    return _text_call(_library().jmp_tool_parse_artifact, data, len(data))


def lower_artifact(data: bytes) -> str:
    """Reads and lowers a VHLO portable artifact; returns the MPS op graph as text, one op a line."""
    data = bytes(data)
    return _text_call(_library().jmp_tool_lower_artifact, data, len(data))


def place_artifact(data: bytes) -> str:
    """As lower_artifact, segment by segment, each op marked with its executor (@metal or @host)."""
    data = bytes(data)
    return _text_call(_library().jmp_tool_place_artifact, data, len(data))


def op_kinds() -> list[tuple[str, str, int]]:
    """The MPS op table: (name, MPSGraph selector, macOS version as 1100 for 11.0) per op kind."""
    rows = _text_call(_library().jmp_tool_op_kinds).splitlines()
    return [(name, selector, int(macos)) for name, selector, macos in (row.split("\t") for row in rows)]


class DType(NamedTuple):
    """A row of the plugin's dtype table (cpp/support/dtype.def)."""

    name: str  # NumPy's (or ml_dtypes') name: "float32", "bfloat16"
    mlir: str  # the plugin's (MLIR's) name: "f32", "bf16", "complex<f32>"
    itemsize: int
    kind: str  # bool, signed, unsigned, float, complex, subbyte_signed, subbyte_unsigned, narrow_float
    msl: str  # the Metal Shading Language type of a kernel's buffer element; "" where Metal has none


@functools.cache
def dtypes() -> tuple[DType, ...]:
    """The plugin's dtype table, as the library has it."""
    rows = _text_call(_library().jmp_tool_dtypes).splitlines()
    return tuple(DType(name, mlir, int(size), kind, msl)
                 for name, mlir, size, kind, msl in (row.split("\t") for row in rows))


METAL_SIDES = {
    "metal": "Metal segments on the GPU through MPSGraph",
    "standin": "Metal segments through the Metal executor over the strict stand-in of MPSGraph and Metal",
    "placed": "Metal segments on the host executor, as a Mac would place them",
    "host": "whole programs on the host executor",
}


def metal_side() -> str:
    """What Metal segments run on in this process ("metal", "standin", "placed" or "host")."""
    return _text_call(_library().jmp_tool_metal_side)


class CustomCalls(NamedTuple):
    """The custom-call targets the plugin lowers (cpp/stablehlo/custom_calls.def)."""

    pass_through: tuple[str, ...]  # results are the operands
    formats: dict[str, str]  # target -> "named" or "positional", the spelling of its backend_config
    attrs: dict[str, dict[str, str]]  # target -> attribute -> "bool", "int" or "float"


@functools.cache
def custom_calls() -> CustomCalls:
    """The plugin library's custom-call table."""
    pass_through, formats, attrs = [], {}, {}
    for row in _text_call(_library().jmp_tool_custom_calls).splitlines():
        kind, target, *rest = row.split("\t")
        if kind == "pass_through":
            pass_through.append(target)
        elif kind == "call":
            formats[target] = rest[0]
            attrs[target] = {}
        elif kind == "attr":
            attrs[target][rest[0]] = rest[1]
    return CustomCalls(tuple(pass_through), formats, attrs)


def _format_value(target: str, name: str, kind: str, value) -> str:
    import numbers

    import numpy as np

    if kind == "bool" and isinstance(value, (bool, np.bool_, numbers.Integral)) and value in (0, 1):
        return "true" if value else "false"
    if kind == "int" and isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return str(int(value))
    if kind == "float" and isinstance(value, numbers.Real) and not isinstance(value, bool):
        return repr(float(value))
    raise TypeError(f"custom call {target}: attribute {name} must be a {kind}, not {value!r}")


def custom_call_config(target: str, **attrs) -> str:
    """The backend_config of a custom call to `target` carrying `attrs` ("name=value,..."), checked against
    the attributes the plugin's table declares for it: the one encoding the C++ side parses."""
    table = custom_calls()
    if table.formats.get(target) != "named":
        raise ValueError(f"custom call {target}: not a target the plugin takes named attributes for")
    declared = table.attrs[target]
    unknown = sorted(set(attrs) - set(declared))
    missing = sorted(set(declared) - set(attrs))
    if unknown or missing:
        raise ValueError(f"custom call {target}: attributes {sorted(declared)} expected; unknown {unknown}, "
                         f"missing {missing}")
    return ",".join(f"{name}={_format_value(target, name, declared[name], value)}" for name, value in attrs.items())

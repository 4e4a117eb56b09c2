"""The plugin library's tool functions (cpp/plugin/tool_api.cc) through ctypes.

Python reaches C++ only through the plugin library's C symbols, never through a Python extension module:
the one library then serves every Python version (the macOS wheel is py3-none). Each call returns a
status code and a text the library allocated, the result or the error message; it is copied here and
freed with jmp_tool_free. ctypes releases the GIL for the duration of each call.
"""

from __future__ import annotations

import ctypes
import functools

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
    lib.jmp_tool_op_kinds.argtypes = [ctypes.POINTER(_TEXT)]
    lib.jmp_tool_op_kinds.restype = ctypes.c_int32
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

"""The PJRT C API called directly through ctypes: every entry point given bad arguments returns a
PJRT_Error with a message, and the process lives."""

import ctypes

import pytest

import jax_metal_plugin

HEADER = 40  # struct_size, extension_start, PJRT_Api_Version{struct_size, extension_start, major, minor}
ERROR_DESTROY, ERROR_MESSAGE, CLIENT_CREATE, CLIENT_DESTROY, BUFFER_FROM_HOST = 0, 1, 10, 11, 22

Fn = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)


@pytest.fixture(scope="module")
def api():
    lib = ctypes.CDLL(jax_metal_plugin.library_path())
    lib.GetPjrtApi.restype = ctypes.c_void_p
    base = lib.GetPjrtApi()
    assert base
    size = ctypes.c_size_t.from_address(base).value
    count = (size - HEADER) // 8
    fns = [ctypes.c_void_p.from_address(base + HEADER + 8 * i).value for i in range(count)]
    major = ctypes.c_int.from_address(base + 32).value
    minor = ctypes.c_int.from_address(base + 36).value
    return fns, (major, minor)


def call(fn_ptr, args):
    return Fn(fn_ptr)(args)


def message(fns, error):
    args = (ctypes.c_uint8 * 64)()
    ctypes.c_size_t.from_buffer(args, 0).value = 40
    ctypes.c_void_p.from_buffer(args, 16).value = error
    Fn(fns[ERROR_MESSAGE])(ctypes.addressof(args))
    text = ctypes.string_at(ctypes.c_void_p.from_buffer(args, 24).value, ctypes.c_size_t.from_buffer(args, 32).value)
    destroy = (ctypes.c_uint8 * 32)()
    ctypes.c_size_t.from_buffer(destroy, 0).value = 24
    ctypes.c_void_p.from_buffer(destroy, 16).value = error
    Fn(fns[ERROR_DESTROY])(ctypes.addressof(destroy))
    return text.decode()


def test_api_version(api):
    _, version = api
    assert version[0] == 0 and version[1] >= 90


def test_every_entry_point_rejects_null_args(api):
    fns, _ = api
    for i, fn in enumerate(fns):
        assert fn, f"entry {i} is missing"
        if i in (ERROR_DESTROY, ERROR_MESSAGE):
            call(fn, None)  # void: must simply not crash
            continue
        error = call(fn, None)
        assert error, f"entry {i} accepted null args"
        assert message(fns, error), f"entry {i}: empty error message"


def test_every_entry_point_rejects_a_too_small_struct(api):
    fns, _ = api
    args = (ctypes.c_uint8 * 1024)()  # struct_size 0 and null everything
    for i, fn in enumerate(fns):
        if i in (ERROR_DESTROY, ERROR_MESSAGE):
            continue
        error = call(fn, ctypes.addressof(args))
        assert error, f"entry {i} accepted struct_size 0"
        assert message(fns, error), f"entry {i}: empty error message"


def test_unknown_buffer_type_is_an_error(api):
    fns, _ = api
    create = (ctypes.c_uint8 * 256)()
    ctypes.c_size_t.from_buffer(create, 0).value = 88
    assert call(fns[CLIENT_CREATE], ctypes.addressof(create)) is None
    client = ctypes.c_void_p.from_buffer(create, 64).value
    assert client
    try:
        args = (ctypes.c_uint8 * 256)()
        ctypes.c_size_t.from_buffer(args, 0).value = 120
        ctypes.c_void_p.from_buffer(args, 16).value = client
        ctypes.c_int.from_buffer(args, 32).value = 9999  # no such PJRT_Buffer_Type
        error = call(fns[BUFFER_FROM_HOST], ctypes.addressof(args))
        assert error
        assert "not supported" in message(fns, error)
    finally:
        destroy = (ctypes.c_uint8 * 32)()
        ctypes.c_size_t.from_buffer(destroy, 0).value = 24
        ctypes.c_void_p.from_buffer(destroy, 16).value = client
        assert call(fns[CLIENT_DESTROY], ctypes.addressof(destroy)) is None

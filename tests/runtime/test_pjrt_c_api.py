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


# ---- donation through the C API: non_donatable_input_indices keeps a donated argument alive

EVENT_DESTROY, EVENT_AWAIT, CLIENT_COMPILE, EXEC_DESTROY, EXECUTE = 5, 8, 20, 50, 55
BUFFER_DESTROY, BUFFER_IS_DELETED, BUFFER_TO_HOST = 58, 68, 70
F32 = 11  # PJRT_Buffer_Type_F32
P, S = ctypes.c_void_p, ctypes.c_size_t


def _struct(name, fields):
    return type(name, (ctypes.Structure,), {"_fields_": [("struct_size", S), ("extension_start", P)] + fields})


ClientCreate = _struct("ClientCreate", [("create_options", P), ("num_options", S), ("kv_get", P), ("kv_get_arg", P),
                                        ("kv_put", P), ("kv_put_arg", P), ("client", P), ("kv_try_get", P),
                                        ("kv_try_get_arg", P)])
Program = _struct("Program", [("code", P), ("code_size", S), ("format", ctypes.c_char_p), ("format_size", S)])
Compile = _struct("Compile", [("client", P), ("program", P), ("compile_options", P), ("compile_options_size", S),
                              ("executable", P)])
FromHost = _struct("FromHost", [("client", P), ("data", P), ("type", ctypes.c_int), ("dims", P), ("num_dims", S),
                                ("byte_strides", P), ("num_byte_strides", S), ("semantics", ctypes.c_int),
                                ("device", P), ("memory", P), ("device_layout", P), ("done_with_host_buffer", P),
                                ("buffer", P)])
ExecuteOptions = _struct("ExecuteOptions", [("send_callbacks", P), ("recv_callbacks", P), ("num_send_ops", S),
                                            ("num_recv_ops", S), ("launch_id", ctypes.c_int),
                                            ("non_donatable_input_indices", P), ("num_non_donatable_input_indices", S),
                                            ("context", P), ("call_location", P), ("num_tasks", S), ("task_ids", P),
                                            ("incarnation_ids", P)])
Execute = _struct("Execute", [("executable", P), ("options", P), ("argument_lists", P), ("num_devices", S),
                              ("num_args", S), ("output_lists", P), ("device_complete_events", P),
                              ("execute_device", P)])
OneHandle = _struct("OneHandle", [("handle", P)])  # *_Destroy, Event_Await
IsDeleted = _struct("IsDeleted", [("buffer", P), ("is_deleted", ctypes.c_bool)])
ToHost = _struct("ToHost", [("src", P), ("host_layout", P), ("dst", P), ("dst_size", S), ("event", P)])


def _call(fns, index, args):
    args.struct_size = ctypes.sizeof(args)
    error = call(fns[index], ctypes.addressof(args))
    assert error is None, message(fns, error)
    return args


def test_non_donatable_input_indices_keep_a_donated_argument(api):
    import jax
    import jax.numpy as jnp
    import numpy as np

    from jax_metal_plugin import tools

    fns, _ = api
    x = np.arange(4, dtype=np.float32)
    lowered = jax.jit(lambda a: a * 2, donate_argnums=0).lower(jnp.asarray(x))
    text = lowered.as_text(dialect="stablehlo")
    assert "tf.aliasing_output = 0" in text
    code = ctypes.create_string_buffer(tools._serialize(text, tools.artifact_version()))
    client = _call(fns, CLIENT_CREATE, ClientCreate()).client
    try:
        program = Program(code=ctypes.addressof(code), code_size=len(code.raw) - 1, format=b"mlir", format_size=4)
        program.struct_size = ctypes.sizeof(program)
        executable = _call(fns, CLIENT_COMPILE, Compile(client=client, program=ctypes.addressof(program))).executable
        dims = (ctypes.c_int64 * 1)(4)

        def run(non_donatable):
            made = _call(fns, BUFFER_FROM_HOST, FromHost(client=client, data=x.ctypes.data, type=F32,
                                                         dims=ctypes.addressof(dims), num_dims=1))
            _call(fns, EVENT_DESTROY, OneHandle(handle=made.done_with_host_buffer))
            buffer = made.buffer
            indices = (ctypes.c_int64 * max(1, len(non_donatable)))(*non_donatable)
            options = ExecuteOptions(non_donatable_input_indices=ctypes.addressof(indices),
                                     num_non_donatable_input_indices=len(non_donatable))
            options.struct_size = ctypes.sizeof(options)
            arg_list = (P * 1)(buffer)
            arg_lists = (P * 1)(ctypes.addressof(arg_list))
            out_list = (P * 1)()
            out_lists = (P * 1)(ctypes.addressof(out_list))
            _call(fns, EXECUTE, Execute(executable=executable, options=ctypes.addressof(options),
                                        argument_lists=ctypes.addressof(arg_lists), num_devices=1, num_args=1,
                                        output_lists=ctypes.addressof(out_lists)))
            deleted = _call(fns, BUFFER_IS_DELETED, IsDeleted(buffer=buffer)).is_deleted
            result = np.zeros(4, np.float32)
            copied = _call(fns, BUFFER_TO_HOST, ToHost(src=out_list[0], dst=result.ctypes.data, dst_size=16))
            _call(fns, EVENT_AWAIT, OneHandle(handle=copied.event))
            _call(fns, EVENT_DESTROY, OneHandle(handle=copied.event))
            kept = None
            if not deleted:
                kept = np.zeros(4, np.float32)
                copied = _call(fns, BUFFER_TO_HOST, ToHost(src=buffer, dst=kept.ctypes.data, dst_size=16))
                _call(fns, EVENT_AWAIT, OneHandle(handle=copied.event))
                _call(fns, EVENT_DESTROY, OneHandle(handle=copied.event))
            for b in (buffer, out_list[0]):
                _call(fns, BUFFER_DESTROY, OneHandle(handle=b))
            return deleted, result, kept

        deleted, result, _ = run([])
        assert deleted
        np.testing.assert_array_equal(result, x * 2)
        deleted, result, kept = run([0])
        assert not deleted
        np.testing.assert_array_equal(result, x * 2)
        np.testing.assert_array_equal(kept, x)
        deleted, _, _ = run([7, -1])  # indices past the arguments are ignored
        assert deleted
        _call(fns, EXEC_DESTROY, OneHandle(handle=executable))
    finally:
        _call(fns, CLIENT_DESTROY, OneHandle(handle=client))


# ---- empty argument and output lists

ERROR_GET_CODE, INVALID_ARGUMENT = 2, 3
GetCode = _struct("GetCode", [("error", P), ("code", ctypes.c_int)])


def _compile(fns, client, fn, *example):
    import jax

    from jax_metal_plugin import tools

    text = jax.jit(fn).lower(*example).as_text(dialect="stablehlo")
    code = ctypes.create_string_buffer(tools._serialize(text, tools.artifact_version()))
    program = Program(code=ctypes.addressof(code), code_size=len(code.raw) - 1, format=b"mlir", format_size=4)
    program.struct_size = ctypes.sizeof(program)
    return _call(fns, CLIENT_COMPILE, Compile(client=client, program=ctypes.addressof(program))).executable


def _execute(fns, executable, output_lists, num_args=0, argument_lists=None):
    args = Execute(executable=executable, argument_lists=argument_lists, num_devices=1, num_args=num_args,
                   output_lists=output_lists)
    args.struct_size = ctypes.sizeof(args)
    return call(fns[EXECUTE], ctypes.addressof(args))


def test_no_arguments_and_no_outputs_run_with_null_lists(api):
    fns, _ = api
    client = _call(fns, CLIENT_CREATE, ClientCreate()).client
    try:
        nothing = _compile(fns, client, lambda: ())
        assert _execute(fns, nothing, None) is None  # no output list at all
        empty = (P * 1)(None)
        assert _execute(fns, nothing, ctypes.addressof(empty)) is None  # a list whose first entry is null
        _call(fns, EXEC_DESTROY, OneHandle(handle=nothing))

        # Results exist but there is nowhere to put them: INVALID_ARGUMENT, and the process lives.
        one = _compile(fns, client, lambda: 1.0)
        for output_lists in (None, ctypes.addressof(empty)):
            error = _execute(fns, one, output_lists)
            assert error
            code = GetCode(error=error)
            code.struct_size = ctypes.sizeof(code)
            assert call(fns[ERROR_GET_CODE], ctypes.addressof(code)) is None
            assert code.code == INVALID_ARGUMENT
            assert "output_lists is null but the executable has 1 outputs" in message(fns, error)
        _call(fns, EXEC_DESTROY, OneHandle(handle=one))
    finally:
        _call(fns, CLIENT_DESTROY, OneHandle(handle=client))

"""Executable serialization (PJRT_Executable_Serialize / DeserializeAndLoad), what JAX's persistent
compilation cache stores and loads: a loaded executable computes what the original does, and bytes that
are not ours are refused with an error, the process alive."""

import os
import pathlib
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax_metal_plugin._jax_internals import compiler, xla_bridge


def serialize(fn, *args):
    compiled = jax.jit(fn).lower(*args).compile()
    backend = xla_bridge.get_backend("metal")
    executable = compiled.runtime_executable()
    return backend, executable, backend.serialize_executable(executable)


def load(backend, data):
    options = compiler.get_compile_options(num_replicas=1, num_partitions=1)
    return backend.deserialize_executable(data, jax.devices("metal")[:1], options)


def run(loaded, *args):
    arrays = jax.device_put(args, jax.devices("metal")[0])
    results = loaded.execute_sharded(list(arrays)).disassemble_into_single_device_arrays()
    return [np.asarray(r[0]) for r in results]


def test_a_loaded_executable_computes_what_the_original_does():
    def fn(x, w):
        return jnp.tanh(x @ w), jnp.cumsum(x, axis=0)

    x = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    w = np.linspace(-1, 1, 6, dtype=np.float32).reshape(3, 2)
    backend, executable, data = serialize(fn, x, w)
    loaded = load(backend, data)
    assert loaded.fingerprint == executable.fingerprint
    want = jax.jit(fn)(*jax.device_put((x, w), jax.devices("metal")[0]))
    for got, expected in zip(run(loaded, x, w), want):
        np.testing.assert_array_equal(got, np.asarray(expected))


def corrupt(data, offset, replacement):
    """JAX wraps our bytes in a container of its own; change ours inside it, keeping its length."""
    start = data.index(b"JMPXEC06") + offset
    return data[:start] + replacement + data[start + len(replacement):]


def graph_offset(data):
    """Where the op graph starts in our bytes: after the header's magic, platform version, program name
    and fingerprint, each string after its 8-byte little-endian length."""
    at = data.index(b"JMPXEC06") + 8
    for _ in range(3):
        at += 8 + int.from_bytes(data[at:at + 8], "little")
    return at - data.index(b"JMPXEC06")


@pytest.mark.parametrize("offset,replacement,message", [
    (0, b"JMPXEC99", "not an executable serialized by this version"),  # another format version
    (16, b"X", "another build of jax-metal-plugin"),  # another build's platform version
    (8, b"\xff" * 7 + b"\x7f", "truncated or malformed"),  # a length running past the end
    ("graph", b"\xff" * 7 + b"\x7f", "truncated or malformed"),  # the graph's value count
    ("graph+8", b"\xc8", "unknown element type"),  # the first value's dtype
])
def test_foreign_or_damaged_bytes_are_refused(offset, replacement, message):
    backend, _, good = serialize(lambda x: x + 1, np.ones(2, np.float32))
    if isinstance(offset, str):
        offset = graph_offset(good) + (8 if offset.endswith("+8") else 0)
    with pytest.raises(Exception, match=message):
        load(backend, corrupt(good, offset, replacement))
    np.testing.assert_array_equal(run(load(backend, good), np.ones(2, np.float32))[0], [2, 2])


LOAD_WITH_FAULTS = """
import jax, jax.numpy as jnp, numpy as np, sys
sys.path.insert(0, {here!r})
from test_serialization import serialize, load, run
x = np.linspace(-2, 2, 8, dtype=np.float32)
backend, executable, data = serialize(lambda x: jnp.sin(x) + x, x)
fresh = run(load(backend, data), x)[0]
print("SAME" if np.array_equal(fresh, np.sin(x) + x) else "FAULTED")
"""


def test_a_cached_program_loads_with_injected_faults(tmp_path):
    # The self-check's fault injection wraps the Metal side: a cached program must load there as a
    # fresh compile does, faults included (it used to be refused as unexpected bytes).
    here = str(pathlib.Path(__file__).parent)
    env = dict(os.environ, JAX_PLATFORMS="metal", JAX_METAL_INJECT_FAULTS="Add:float32",
               JAX_METAL_CAPABILITIES="ignore", JAX_METAL_PLUGIN_CACHE=str(tmp_path))
    proc = subprocess.run([sys.executable, "-c", LOAD_WITH_FAULTS.format(here=here)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == "FAULTED", proc.stdout + proc.stderr[-2000:]

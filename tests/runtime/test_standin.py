"""The Metal executor's own logic, run over the strict stand-in of MPSGraph and Metal (JAX_METAL_EXECUTOR=
standin, the default off macOS): the executor is named where a user looks, programs whose Metal segments
take several inputs of different types bind each to its placeholder, a donated buffer of any byte size is
written over, a GPU error in any command buffer of a run fails that run, and a compiled program cached by
a process with another placement (JAX_METAL_AVOID) is compiled again rather than trusted."""

import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxcompare import check

import jax_metal_plugin


def run_child(code, **env):
    full = {k: v for k, v in os.environ.items() if k not in ("JAX_METAL_EXECUTOR", "JAX_METAL_AVOID")}
    full.update(JAX_PLATFORMS="metal,cpu", **env)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_stand_in_is_what_metal_segments_run_on_off_macos():
    out = run_child(
        "import json, jax, jax_metal_plugin\n"
        "jax.devices('metal')\n"
        "print(json.dumps(jax_metal_plugin.status().feature('executor').detail))")
    expected = "metal" if sys.platform == "darwin" else "standin"
    assert out.startswith(expected + ":"), out


def test_a_metal_segment_takes_inputs_of_several_types_in_its_executables_order():
    def f(p, x, y, n):
        return jnp.where(p, x, -y), x * y + 1, n * 3, jnp.tanh(y)

    rng = np.random.default_rng(0)
    args = (rng.random(7) < 0.5, rng.normal(size=7).astype(np.float32), rng.normal(size=7).astype(np.float32),
            np.arange(5, dtype=np.int32))
    check(f, *args)


@pytest.mark.parametrize("n", [1, 3, 5, 6])
def test_a_donated_buffer_of_any_byte_size_is_written_over(metal_device, n):
    x = jax.device_put(np.arange(n, dtype=np.uint8), metal_device)
    y = jax.jit(lambda v: v * 2 + 1, donate_argnums=0)(x)
    np.testing.assert_array_equal(np.asarray(y), (np.arange(n) * 2 + 1).astype(np.uint8))


GPU_ERROR = r'''
import json, jax, jax.numpy as jnp, numpy as np
from jax import lax
x = jnp.arange(4, dtype=jnp.float32)
f = jax.jit(lambda x: lax.fori_loop(0, 5, lambda i, c: c * 2 + 1, x))
try:
    r = np.asarray(f(jax.device_put(x, jax.devices("metal")[0]))).tolist()
    print(json.dumps({"result": r}))
except Exception as e:
    print(json.dumps({"error": str(e)}))
'''


@pytest.mark.skipif(sys.platform == "darwin", reason="injects errors into the stand-in's command buffers")
def test_a_gpu_error_in_a_command_buffer_the_encode_committed_early_fails_the_run():
    out = run_child(GPU_ERROR, JAX_METAL_EXECUTOR="standin", JAX_METAL_STANDIN_GPU_ERROR="split")
    assert "error" in out and "command buffer failed" in out["error"], out
    clean = run_child(GPU_ERROR, JAX_METAL_EXECUTOR="standin")
    assert clean == {"result": [31.0, 63.0, 95.0, 127.0]}, clean


CACHED = r'''
import json, sys
import jax, jax.numpy as jnp, numpy as np
import jax_metal_plugin
jax.config.update("jax_compilation_cache_dir", sys.argv[1])
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)

def f(x, y):
    return x * y - y
x = np.linspace(-2, 2, 6, dtype=np.float32)
y = np.linspace(1, 3, 6, dtype=np.float32)
import warnings
before = jax_metal_plugin.stats()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    r = np.asarray(jax.jit(f)(*jax.device_put((x, y), jax.devices("metal")[0])))
after = jax_metal_plugin.stats()
expected = np.asarray(jax.jit(f)(*jax.device_put((x, y), jax.devices("cpu")[0])))
print(json.dumps({"result": r.tolist(), "expected": expected.tolist(),
                  "graph": jax_metal_plugin.mps_graph(f, x, y), "warnings": [str(w.message) for w in caught],
                  "stats": {k: after[k] - before[k] for k in after}}))
'''


def test_a_program_cached_under_another_placement_is_compiled_again(tmp_path):
    first = run_child(CACHED.replace("sys.argv[1]", repr(str(tmp_path))))
    assert first["result"] == first["expected"]
    assert "@metal" in first["graph"]
    # The same program, its multiply-add now kept off Metal: its cached bytes were made for a Metal segment.
    second = run_child(CACHED.replace("sys.argv[1]", repr(str(tmp_path))), JAX_METAL_AVOID="MultiplyAdd:float32")
    assert second["result"] == second["expected"], second
    # Loaded from the cache without a complaint: the plugin compiled the segments its placement has now.
    assert second["stats"]["programs_deserialized"] == 1 and not second["warnings"], second
    line = next(l for l in second["graph"].splitlines() if "MultiplyAdd(" in l)
    assert line.endswith("@host"), second["graph"]


STAGED_OUTPUT = r'''
import json, jax, jax.numpy as jnp, numpy as np
jax.config.update("jax_enable_x64", True)

def f(x):
    y = (x.astype(jnp.float64) * 2 + 1).astype(jnp.float32)  # a host segment writes result 0 ...
    return y, jnp.sin(x) * y                                  # ... before a metal segment reads x

def run(dev):
    g, h = jax.jit(f, donate_argnums=0), jax.jit(lambda y: y * 0.5 - 0.25)
    x = jax.device_put(np.linspace(-1, 1, 64 * 64, dtype=np.float32).reshape(64, 64), dev)
    zs = []
    for _ in range(8):
        y, z = g(x)   # y is made apart and copied over x's memory once the run is done
        x = h(y)      # read at once by the device
        zs.append(np.asarray(z))
    return np.asarray(x), np.stack(zs)

m, c = run(jax.devices("metal")[0]), run(jax.devices("cpu")[0])
print(json.dumps({"diff": max(float(np.max(np.abs(a - b))) for a, b in zip(m, c))}))
'''


@pytest.mark.skipif(sys.platform == "darwin", reason="delays the stand-in's completion handlers")
def test_a_result_copied_over_its_donated_input_is_there_before_the_next_run_reads_it():
    # Metal runs the next command buffers without waiting for an earlier buffer's completion handlers;
    # so does the stand-in, whose handlers run on a thread of their own (here 0 and 2000 us late). A run whose donated input is written through a
    # staged copy must have made that copy before a later run's device work can read the memory.
    for late_us in ("0", "2000"):
        out = run_child(STAGED_OUTPUT, JAX_METAL_EXECUTOR="standin", JAX_METAL_STANDIN_LATE_HANDLERS=late_us)
        # Values of size ~1 through a few float32 roundings each; the old bytes differ by ~1.
        assert out["diff"] < 1e-5, (late_us, out)

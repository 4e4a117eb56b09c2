"""JAX's persistent compilation cache on platform "metal": a second process that compiles the same
programs with jax_compilation_cache_dir set loads them from the cache (the plugin's counters show no
StableHLO read or lowered, only serialized programs rebuilt) and computes the same results; cache
entries that are damaged or not ours are refused with a clear error and the process lives."""

import json
import os
import subprocess
import sys
import zlib

import numpy as np
import pytest

CHILD = r'''
import json, sys, warnings
import jax, jax.numpy as jnp, numpy as np
import jax_metal_plugin

jax.config.update("jax_compilation_cache_dir", sys.argv[1])
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
jax.config.update("jax_raise_persistent_cache_errors", sys.argv[2] == "raise")


def step(params, x, y):
    def loss(params):
        h = jnp.tanh(x @ params[0])
        return jnp.mean((h @ params[1] - y) ** 2)
    l, g = jax.value_and_grad(loss)(params)
    return [p - 0.1 * d for p, d in zip(params, g)], l


def clipped(x):  # float64 in the middle: a host segment between two Metal segments
    n = jnp.sqrt(jnp.sum(x.astype(jnp.float64) ** 2))
    return jnp.exp(x) / jnp.maximum(n, 1.0).astype(jnp.float32)


def run(platform):
    dev = jax.devices(platform)[0]
    rng = np.random.default_rng(0)
    params = [rng.normal(size=(8, 16)).astype(np.float32), rng.normal(size=(16, 4)).astype(np.float32)]
    x, y = rng.normal(size=(32, 8)).astype(np.float32), rng.normal(size=(32, 4)).astype(np.float32)
    params, x, y = jax.device_put((params, x, y), dev)
    for _ in range(3):
        params, l = jax.jit(step)(params, x, y)
    with jax.enable_x64(True):
        c = jax.jit(clipped)(jax.device_put(np.linspace(-1, 1, 16, dtype=np.float32), dev))
    return [np.asarray(p).tolist() for p in params] + [float(l), np.asarray(c).tolist()]


before = jax_metal_plugin.stats()
out = {}
try:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out["metal"] = run("metal")
    out["warnings"] = [str(w.message) for w in caught]
except Exception as e:
    out["error"] = str(e)
    jax.config.update("jax_raise_persistent_cache_errors", False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out["metal"] = run("metal")  # the process lives and, told to warn instead, compiles
after = jax_metal_plugin.stats()
out["stats"] = {k: after[k] - before[k] for k in after}
out["cpu"] = run("cpu")
print(json.dumps(out))
'''


def child(cache_dir, errors="warn"):
    env = dict(os.environ, JAX_PLATFORMS="metal,cpu")
    proc = subprocess.run([sys.executable, "-c", CHILD, str(cache_dir), errors], capture_output=True, text=True,
                          env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def entries(cache_dir):
    return [os.path.join(cache_dir, f) for f in os.listdir(cache_dir) if f.endswith("-cache")]


MAGIC = b"JMPXEC06"


def read_entries(cache_dir):
    return {path: open(path, "rb").read() for path in entries(cache_dir)}


def rewrite_entries(pristine, damage):
    """Writes back every cache entry from `pristine` (path -> bytes), the plugin's serialized executable
    inside each metal entry damaged (JAX keeps it in a container of its own, compressed, with the
    compile time in front): `damage` maps our bytes to as many others, so JAX's container still parses.
    In place: JAX's keys depend on the cache directory's path, so a copied cache would only miss."""
    try:
        import zstandard
    except ImportError:
        zstandard = None
    for path, raw in pristine.items():
        try:
            data, compress = zlib.decompress(raw), zlib.compress
        except zlib.error:
            assert zstandard is not None, "an entry neither zlib nor zstd"
            data = zstandard.ZstdDecompressor().decompress(raw)
            compress = zstandard.ZstdCompressor().compress
        if MAGIC in data:
            start = data.index(MAGIC)
            bad = damage(data[start:])
            assert len(bad) == len(data) - start
            raw = compress(data[:start] + bad)
        with open(path, "wb") as f:
            f.write(raw)


def close(a, b):
    for x, y in zip(a, b):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=2e-5, atol=2e-5)


@pytest.fixture(scope="module")
def first(tmp_path_factory):
    cache = tmp_path_factory.mktemp("jax-cache")
    return cache, child(cache)


def test_a_second_process_loads_what_the_first_compiled(first):
    cache, one = first
    assert one["stats"]["programs_lowered"] >= 2 and one["stats"]["programs_deserialized"] == 0, one["stats"]
    assert entries(cache), "the first process wrote no cache entry"
    two = child(cache)
    assert two["stats"]["programs_lowered"] == 0, two["stats"]
    assert two["stats"]["programs_deserialized"] >= 2, two["stats"]
    assert two["metal"] == one["metal"]  # the same executables: the same bits
    close(two["metal"], two["cpu"])


def test_a_cache_of_another_build_or_damaged_entries_are_refused_and_the_process_lives(first):
    cache, one = first
    pristine = read_entries(cache)
    def other_build(b):
        at = b.index(b"; build ") + len(b"; build ")
        return b[:at] + bytes(b"0123456789abcdef"[(c + 1) % 16] for c in range(16)) + b[at + 16:]

    def huge_count(b):  # the graph's value count, after the header's three length-prefixed strings
        at = len(MAGIC)
        for _ in range(3):
            at += 8 + int.from_bytes(b[at:at + 8], "little")
        return b[:at] + b"\xff" * 7 + b"\x7f" + b[at + 8:]

    for name, damage, message in [
        ("foreign", lambda b: bytes(len(b)), "not an executable serialized by this version"),
        ("other-build", other_build, "another build of jax-metal-plugin"),
        ("truncated", huge_count, "truncated or malformed"),
    ]:
        rewrite_entries(pristine, damage)
        warned = child(cache)
        assert warned["stats"]["programs_lowered"] >= 2, (name, warned["stats"])  # compiled afresh
        assert warned["metal"] == one["metal"], name
        assert any(message in w for w in warned["warnings"]), (name, warned["warnings"])
        rewrite_entries(pristine, damage)  # the process above wrote good entries over the damaged ones
        raised = child(cache, errors="raise")
        assert message in raised.get("error", ""), (name, raised)
        assert raised["metal"] == one["metal"], name
    rewrite_entries(pristine, lambda b: b)

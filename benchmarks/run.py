"""Benchmarks: the same jitted programs on the `metal` plugin and on JAX's CPU backend, in one process.

    python benchmarks/run.py --quick            # a few minutes; writes results.json and ratios.png
    python benchmarks/run.py --suite mlp fft    # chosen suites, full length

For each suite and platform: compile time, then median and min step time after warm-up, and peak
device memory where the backend reports it. Ratios are metal/cpu: below 1 is faster for times.
The "copies" column counts host<->device copies of device-resident buffers the plugin made during the
timed steps (0 is the target: parameters stay on the device between steps).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import sys
import time

os.environ.setdefault("JAX_PLATFORMS", "metal,cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402
from tqdm import tqdm  # noqa: E402

# ---- suites: each returns (step, state, data); step(state, *data) -> (state, out)


def mlp_suite(quick):
    sizes = [256, 512, 512, 10]
    batch = 128

    def init(key):
        keys = jax.random.split(key, len(sizes) - 1)
        return [(jax.random.normal(k, (m, n)) * np.sqrt(2 / m), jnp.zeros(n)) for k, m, n in zip(keys, sizes[:-1], sizes[1:])]

    def loss(params, x, y):
        h = x
        for w, b in params[:-1]:
            h = jax.nn.relu(h @ w + b)
        w, b = params[-1]
        return -jnp.mean(jnp.sum(jax.nn.log_softmax(h @ w + b) * jax.nn.one_hot(y, 10), axis=-1))

    def step(params, x, y):
        l, g = jax.value_and_grad(loss)(params, x, y)
        return jax.tree.map(lambda p, d: p - 0.01 * d, params, g), l

    rng = np.random.default_rng(0)
    data = (rng.normal(size=(batch, sizes[0])).astype(np.float32), rng.integers(0, 10, batch).astype(np.int32))
    return step, init(jax.random.key(0)), data


def cnn_suite(quick):
    def init(key):
        k1, k2, k3 = jax.random.split(key, 3)
        return {"c1": jax.random.normal(k1, (3, 3, 1, 16)) * 0.3, "c2": jax.random.normal(k2, (3, 3, 16, 32)) * 0.1,
                "d": jax.random.normal(k3, (32 * 7 * 7, 10)) * 0.02}

    def forward(p, x):
        dn = ("NHWC", "HWIO", "NHWC")
        h = jax.nn.relu(lax.conv_general_dilated(x, p["c1"], (1, 1), "SAME", dimension_numbers=dn))
        h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        h = jax.nn.relu(lax.conv_general_dilated(h, p["c2"], (1, 1), "SAME", dimension_numbers=dn))
        h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        return h.reshape(h.shape[0], -1) @ p["d"]

    def step(p, x, y):
        def loss(p):
            return -jnp.mean(jnp.sum(jax.nn.log_softmax(forward(p, x)) * jax.nn.one_hot(y, 10), axis=-1))
        l, g = jax.value_and_grad(loss)(p)
        return jax.tree.map(lambda a, b: a - 0.01 * b, p, g), l

    rng = np.random.default_rng(1)
    data = (rng.normal(size=(32, 28, 28, 1)).astype(np.float32), rng.integers(0, 10, 32).astype(np.int32))
    return step, init(jax.random.key(1)), data


def transformer_suite(quick):
    vocab, seq, dim, heads = 64, 64, 64, 4

    def init(key):
        ks = jax.random.split(key, 6)
        n = lambda k, s: jax.random.normal(k, s) * 0.05
        return {"emb": n(ks[0], (vocab, dim)), "qkv": n(ks[1], (dim, 3 * dim)), "o": n(ks[2], (dim, dim)),
                "f1": n(ks[3], (dim, 4 * dim)), "f2": n(ks[4], (4 * dim, dim)), "out": n(ks[5], (dim, vocab))}

    def layer_norm(h):
        return (h - h.mean(-1, keepdims=True)) / jnp.sqrt(h.var(-1, keepdims=True) + 1e-5)

    def forward(p, tokens):
        h = p["emb"][tokens]
        b, t, _ = h.shape
        q, k, v = jnp.split(layer_norm(h) @ p["qkv"], 3, axis=-1)
        split = lambda a: a.reshape(b, t, heads, dim // heads).transpose(0, 2, 1, 3)
        q, k, v = split(q), split(k), split(v)
        att = q @ k.transpose(0, 1, 3, 2) / np.sqrt(dim // heads)
        att = jnp.where(jnp.tril(jnp.ones((t, t), bool)), att, -1e9)
        h = h + (jax.nn.softmax(att) @ v).transpose(0, 2, 1, 3).reshape(b, t, dim) @ p["o"]
        h = h + jax.nn.gelu(layer_norm(h) @ p["f1"]) @ p["f2"]
        return layer_norm(h) @ p["out"]

    def step(p, tokens):
        def loss(p):
            logits = forward(p, tokens[:, :-1])
            return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), tokens[:, 1:, None], axis=-1))
        l, g = jax.value_and_grad(loss)(p)
        return jax.tree.map(lambda a, b: a - 0.01 * b, p, g), l

    rng = np.random.default_rng(2)
    return step, init(jax.random.key(2)), (rng.integers(0, vocab, (16, seq + 1)).astype(np.int32),)


def scan_layers_suite(quick):
    """A residual MLP whose 8 layers (256 wide) are a lax.scan over stacked parameters: the backward
    scan reads each layer with dynamic_slice and writes its gradient with dynamic_update_slice."""
    layers, dim, batch = 8, 256, 64

    def init(key):
        k1, k2 = jax.random.split(key)
        return {"w1": jax.random.normal(k1, (layers, dim, dim)) / np.sqrt(dim), "b1": jnp.zeros((layers, dim)),
                "w2": jax.random.normal(k2, (layers, dim, dim)) / np.sqrt(dim), "b2": jnp.zeros((layers, dim))}

    def loss(p, x, y):
        def layer(h, lp):
            return h + jax.nn.gelu(h @ lp["w1"] + lp["b1"]) @ lp["w2"] + lp["b2"], None

        h, _ = lax.scan(layer, x, p)
        return jnp.mean((h - y) ** 2)

    def step(p, x, y):
        l, g = jax.value_and_grad(loss)(p, x, y)
        return jax.tree.map(lambda a, b: a - 0.01 * b, p, g), l

    rng = np.random.default_rng(6)
    data = (rng.normal(size=(batch, dim)).astype(np.float32), rng.normal(size=(batch, dim)).astype(np.float32))
    return step, init(jax.random.key(6)), data


def stateless(fn):
    """A suite whose step has no state to carry."""
    return lambda state, *data: (state, fn(*data))


def fft_suite(quick):
    x = np.random.default_rng(3).normal(size=(64, 1024)).astype(np.float32)
    return stateless(lambda x: jnp.abs(jnp.fft.irfft(jnp.fft.rfft(x) * 0.5, n=1024)).sum()), 0, (x,)


def sort_suite(quick):
    x = np.random.default_rng(4).normal(size=(16, 4096)).astype(np.float32)
    return stateless(lambda x: (jnp.sort(x, axis=-1), jnp.argsort(x, axis=-1))), 0, (x,)


def cumsum_suite(quick):
    x = np.random.default_rng(5).normal(size=(8, 100_000)).astype(np.float32)
    return stateless(lambda x: jnp.cumsum(x, axis=-1)[:, -1]), 0, (x,)


def tiny_dispatch_suite(quick):
    x = np.ones((8,), np.float32)
    return stateless(lambda x: jnp.sin(x) * 2.0 + 1.0), 0, (x,)


SUITES = {
    "mlp": (mlp_suite, 30),
    "cnn": (cnn_suite, 10),
    "transformer": (transformer_suite, 10),
    "scan-layers": (scan_layers_suite, 10),
    "fft": (fft_suite, 20),
    "sort": (sort_suite, 20),
    "cumsum": (cumsum_suite, 20),
    "tiny-dispatch": (tiny_dispatch_suite, 10_000),
}


def plugin_copy_count():
    """Host<->device copies the plugin has made, when the plugin exposes the counter."""
    try:
        import jax_metal_plugin
        lib = ctypes.CDLL(jax_metal_plugin.library_path())
        fn = lib.jmp_pjrt_copy_count
        fn.restype = ctypes.c_int64
        return int(fn())
    except (AttributeError, OSError, ImportError):
        return None


def peak_memory(device):
    try:
        stats = device.memory_stats() or {}
    except Exception:  # noqa: BLE001 - a backend may not implement it
        return None
    return stats.get("peak_bytes_in_use", stats.get("bytes_in_use"))


def measure(name, platform, steps, quick):
    build, _ = SUITES[name]
    step_fn, state, data = build(quick)
    device = jax.devices(platform)[0]
    state, data = jax.device_put((state, data), device)
    # JAX's own tracing and lowering is the same work for both platforms: only the backend compile
    # (what the plugin or XLA:CPU does with the program) is compared: the median of three compiles,
    # each of a fresh jit wrapper so that no compilation cache answers.
    compile_times = []
    for _ in range(3):
        lowered = jax.jit(lambda *args: step_fn(*args)).lower(state, *data)
        t0 = time.perf_counter()
        compiled = lowered.compile()
        compile_times.append(time.perf_counter() - t0)
    compile_s = statistics.median(compile_times)
    for _ in range(3):  # warm-up
        state, out = compiled(state, *data)
    jax.block_until_ready((state, out))
    copies_before = plugin_copy_count() if platform == "metal" else None
    times = []
    if name == "tiny-dispatch":  # dispatch cost: many calls, timed as a whole
        t0 = time.perf_counter()
        for _ in range(steps):
            state, out = compiled(state, *data)
        jax.block_until_ready(out)
        times = [(time.perf_counter() - t0) / steps]
    else:
        for _ in range(steps):
            t0 = time.perf_counter()
            state, out = compiled(state, *data)
            jax.block_until_ready((state, out))
            times.append(time.perf_counter() - t0)
    copies = None
    if copies_before is not None:
        after = plugin_copy_count()
        copies = None if after is None else after - copies_before
    return {"compile_s": compile_s, "median_s": statistics.median(times), "min_s": min(times),
            "peak_bytes": peak_memory(device), "copies": copies}


def main():
    p = argparse.ArgumentParser(description="metal vs cpu benchmarks")
    p.add_argument("--quick", action="store_true", help="fewer steps (a few minutes in all)")
    p.add_argument("--suite", nargs="*", choices=sorted(SUITES), default=None)
    p.add_argument("--out", default="results.json")
    p.add_argument("--plot", default="ratios.png")
    args = p.parse_args()
    names = args.suite or list(SUITES)
    results = {"jax": jax.__version__, "quick": args.quick, "suites": {}}
    work = [(n, plat) for n in names for plat in ("metal", "cpu")]
    for name, platform in tqdm(work, desc="benchmarks", file=sys.stderr):
        steps = SUITES[name][1]
        if args.quick:
            steps = max(3, steps // 5) if name != "tiny-dispatch" else 2000
        try:
            r = measure(name, platform, steps, args.quick)
        except Exception as e:  # noqa: BLE001 - an unsupported op is a result, not a crash
            r = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"}
        results["suites"].setdefault(name, {})[platform] = r
    for name, r in results["suites"].items():
        m, c = r.get("metal", {}), r.get("cpu", {})
        if "median_s" in m and "median_s" in c:
            r["step_ratio"] = m["median_s"] / c["median_s"]          # metal time / cpu time
            r["throughput_ratio"] = c["median_s"] / m["median_s"]    # metal speed / cpu speed
            r["compile_ratio"] = m["compile_s"] / c["compile_s"]
    with open(args.out, "w") as f:
        json.dump(results, f, indent=2)
    print(f"{'suite':<14}{'metal step':>12}{'cpu step':>12}{'time ratio':>11}{'compile ratio':>14}{'copies':>8}")
    for name, r in results["suites"].items():
        m, c = r.get("metal", {}), r.get("cpu", {})
        if "step_ratio" in r:
            print(f"{name:<14}{m['median_s'] * 1e3:>10.3f}ms{c['median_s'] * 1e3:>10.3f}ms{r['step_ratio']:>11.2f}"
                  f"{r['compile_ratio']:>14.3f}{str(m.get('copies')):>8}")
        else:
            print(f"{name:<14} error: {m.get('error') or c.get('error')}")
    plot(results, args.plot)
    print(f"wrote {args.out} and {args.plot}")


def plot(results, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = [n for n, r in results["suites"].items() if "step_ratio" in r]
    fig, ax = plt.subplots(figsize=(8, 4))
    x = np.arange(len(names))
    ax.bar(x - 0.2, [results["suites"][n]["step_ratio"] for n in names], 0.4, label="step time metal/cpu")
    ax.bar(x + 0.2, [results["suites"][n]["compile_ratio"] for n in names], 0.4, label="compile time metal/cpu")
    ax.axhline(1.0, color="gray", linewidth=0.8)
    ax.set_xticks(x, names)
    ax.set_yscale("log")
    ax.set_ylabel("ratio (lower is better)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()

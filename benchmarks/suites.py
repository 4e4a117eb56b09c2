"""The benchmark suites: the same jitted programs run on `metal` and on `cpu` (see run.py).

Each builder takes `quick` and returns (step, state, data) with step(state, *data) -> (state, out).
Only the Bernoulli suite changes with `quick` (a smaller array); every other program is the same in
quick and full runs, so their ratios are comparable and quick runs differ only in how many rounds and
steps they time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax


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


# ---- per-op overheads: a large elementwise chain, a loop of cheap iterations, a host callback

# JAX's own Bernoulli test draws 1e8 elements (XLA:CPU peaks near 1.8 GB RSS on it, the host executor's fused
# groups near 0.5 GB); --quick uses 1e7, `run.py --bernoulli-size N` any other size.
BERNOULLI_SIZE = {"full": int(1e8), "quick": int(1e7)}


def bernoulli_suite(quick):
    """`jax.random.bernoulli(key, p=1e-10, shape=n, mode='low')`: threefry over every element, then a
    compare; XLA:CPU fuses the chain, and so does the host executor (tile by tile, host_fused.cc)."""
    n = BERNOULLI_SIZE["quick" if quick else "full"]
    return stateless(lambda key: jax.random.bernoulli(key, p=1e-10, shape=(n,), mode="low")), 0, (jax.random.key(7),)


LOOP_ITERATIONS = 1000


def fori_loop_suite(quick):
    """A fori_loop of LOOP_ITERATIONS cheap iterations on 8 floats: the step time is the per-iteration
    overhead of the loop machinery times LOOP_ITERATIONS."""
    x = np.ones((8,), np.float32)
    return stateless(lambda x: lax.fori_loop(0, LOOP_ITERATIONS, lambda i, c: c * 0.999 + 1.0, x)), 0, (x,)


def host_callback_suite(quick):
    """A jitted step with one host callback (`jax.debug.callback`) between two cheap device computations."""
    calls = [0]

    def record(total):
        calls[0] += 1

    def f(x):
        y = jnp.sin(x) * 2.0 + 1.0
        jax.debug.callback(record, y.sum())
        return y * 0.5

    return stateless(f), 0, (np.ones((1024,), np.float32),)


# ---- a program with host segments between Metal ones


def host_segment_suite(quick):
    """An MLP training step (float32) whose gradient-norm clipping is computed in float64: under x64 the
    float64 ops run on the host between two Metal segments of the same executable, over the same memory
    (the copies column must read 0)."""
    sizes = [256, 512, 10]
    batch = 128

    def init(key):
        k1, k2 = jax.random.split(key)
        return [jax.random.normal(k1, (sizes[0], sizes[1]), jnp.float32) * 0.06,
                jax.random.normal(k2, (sizes[1], sizes[2]), jnp.float32) * 0.04]

    def loss(params, x, y):
        logits = jax.nn.relu(x @ params[0]) @ params[1]
        return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * jax.nn.one_hot(y, sizes[-1]), axis=-1))

    def step(params, x, y):
        l, g = jax.value_and_grad(loss)(params, x, y)
        norm = jnp.sqrt(sum(jnp.sum(d.astype(jnp.float64) ** 2) for d in g))
        scale = jnp.minimum(1.0, 1.0 / norm).astype(jnp.float32)
        return [p - 0.01 * scale * d for p, d in zip(params, g)], l

    rng = np.random.default_rng(0)
    data = (rng.normal(size=(batch, sizes[0])).astype(np.float32), rng.integers(0, 10, batch).astype(np.int32))
    return step, init(jax.random.key(0)), data


def matmul_f64_suite(quick):
    """One float64 1024x1024 matrix product under jax_enable_x64: MPSGraph has no float64, so on a Mac it
    is a host step (BLAS dgemm), compared with XLA:CPU's."""
    rng = np.random.default_rng(8)
    a, b = (rng.normal(size=(1024, 1024)) for _ in range(2))
    return stateless(lambda a, b: a @ b), 0, (a, b)


def eigh_f32_suite(n):
    """float32 eigh of an n x n symmetric matrix (LAPACK's syevd on both platforms from 64 rows on)."""
    def build(quick):
        a = np.random.default_rng(9).normal(size=(n, n)).astype(np.float32)
        return stateless(lambda a: jnp.linalg.eigh(a)), 0, ((a + a.T) / 2,)
    return build


def svd_f32_suite(n):
    """float32 svd (u, s, vt) of an n x n matrix (LAPACK's gesdd on both platforms from 64 on)."""
    def build(quick):
        return stateless(lambda a: jnp.linalg.svd(a)), 0, (np.random.default_rng(10).normal(size=(n, n)).astype(np.float32),)
    return build


def random_normal_f64_suite(quick):
    """`jax.random.normal` of 4M float64 values under jax_enable_x64: threefry bits, then erf_inv's
    polynomials (each coefficient a splat of the full shape in the program JAX emits)."""
    return stateless(lambda key: jax.random.normal(key, (4_000_000,), dtype=jnp.float64)), 0, (jax.random.key(11),)


def resnet18_init_f64_suite(quick):
    """A float64 ResNet-18 initialisation as haiku writes it, in plain jax: truncated-normal variance
    scaling for every convolution (fan-in), batch-norm scales and offsets, a zero-initialised classifier bias."""
    def conv(key, k, cin, cout):
        std = np.sqrt(1.0 / (k * k * cin)) / 0.87962566103423978  # haiku's VarianceScaling(1, fan_in, truncated)
        return std * jax.random.truncated_normal(key, -2.0, 2.0, (k, k, cin, cout), jnp.float64)

    def init(key):
        keys = iter(jax.random.split(key, 32))
        params = {"conv1": conv(next(keys), 7, 3, 64), "bn1": (jnp.ones(64), jnp.zeros(64))}
        cin = 64
        for stage, cout in enumerate((64, 128, 256, 512)):
            for block in range(2):
                name = f"layer{stage}_{block}"
                stride = 2 if stage and not block else 1
                params[name] = {"conv_a": conv(next(keys), 3, cin, cout), "conv_b": conv(next(keys), 3, cout, cout),
                                "bn_a": (jnp.ones(cout), jnp.zeros(cout)), "bn_b": (jnp.ones(cout), jnp.zeros(cout))}
                if stride != 1 or cin != cout:
                    params[name]["proj"] = conv(next(keys), 1, cin, cout)
                cin = cout
        w = jax.random.truncated_normal(next(keys), -2.0, 2.0, (512, 1000), jnp.float64) / np.sqrt(512)
        params["fc"] = (w, jnp.zeros(1000))
        return params

    return stateless(init), 0, (jax.random.key(12),)


@dataclass(frozen=True)
class Suite:
    build: Callable
    batched: bool = False       # time a batch of calls as a whole (dispatch cost: one call is too short to time)
    fresh_rss: bool = False     # also measure peak RSS in a fresh process per platform
    iterations: int = 0         # loop iterations per step, to report the per-iteration time
    x64: bool = False           # built, compiled and run with jax_enable_x64 on (float64 programs)
    callbacks: int = 0          # host callbacks per step: the step time is mostly their round trips


SUITES = {
    "mlp": Suite(mlp_suite),
    "cnn": Suite(cnn_suite),
    "transformer": Suite(transformer_suite),
    "scan-layers": Suite(scan_layers_suite),
    "fft": Suite(fft_suite),
    "sort": Suite(sort_suite),
    "cumsum": Suite(cumsum_suite),
    "tiny-dispatch": Suite(tiny_dispatch_suite, batched=True),
    "bernoulli": Suite(bernoulli_suite, fresh_rss=True),
    "fori-loop": Suite(fori_loop_suite, iterations=LOOP_ITERATIONS),
    "host-callback": Suite(host_callback_suite, callbacks=1),
    "host-segment": Suite(host_segment_suite, x64=True),
    "matmul-f64": Suite(matmul_f64_suite, x64=True),
    "random-normal-f64": Suite(random_normal_f64_suite, x64=True, fresh_rss=True),
    "resnet18-init-f64": Suite(resnet18_init_f64_suite, x64=True, fresh_rss=True),
    **{f"eigh-f32-{n}": Suite(eigh_f32_suite(n)) for n in (256, 1024)},
    **{f"svd-f32-{n}": Suite(svd_f32_suite(n)) for n in (256, 1024)},
}

"""Train a small character-level transformer language model on the Zen of Python (the text of the
standard library's `this` module), jitted, with a causal mask, embeddings and momentum updates.

Control flow as real training code has it: the layers run as a lax.scan over stacked parameters, the
learning rate comes from a lax.switch over schedule phases, gradients are clipped under a lax.cond,
and sampling is a lax.fori_loop (dynamic slices and updates, a cond between greedy and sampled
tokens) around the scanned model.

    JAX_PLATFORMS=metal python examples/train_transformer.py
    python examples/train_transformer.py --platform cpu
"""

import argparse
import codecs
import os
import sys
from functools import partial

if __name__ == "__main__":
    _p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    _p.add_argument("--platform", choices=["metal", "cpu"], default=None)
    _p.add_argument("--steps", type=int, default=300)
    _p.add_argument("--seed", type=int, default=0)
    _p.add_argument("--sample", type=int, default=120, help="characters to sample after training")
    ARGS = _p.parse_args()
    os.environ["JAX_PLATFORMS"] = ARGS.platform or os.environ.get("JAX_PLATFORMS", "metal")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

SEQ, DIM, HEADS, LAYERS = 64, 64, 4, 2


def corpus():
    import this  # noqa: F401 - its text is the corpus (the import prints it once)
    text = codecs.decode(this.s, "rot13")
    chars = sorted(set(text))
    return np.array([chars.index(c) for c in text], np.int32), chars


def init_params(key, vocab):
    keys = iter(jax.random.split(key, 8))
    n = lambda shape, s=0.05: jax.random.normal(next(keys), shape) * s
    # Per-layer weights stacked along a leading axis: the layers are one lax.scan.
    layers = {"qkv": n((LAYERS, DIM, 3 * DIM)), "o": n((LAYERS, DIM, DIM)), "f1": n((LAYERS, DIM, 4 * DIM)),
              "f2": n((LAYERS, 4 * DIM, DIM)), "g1": jnp.ones((LAYERS, DIM)), "g2": jnp.ones((LAYERS, DIM))}
    return {"emb": n((vocab, DIM), 0.1), "pos": n((SEQ, DIM), 0.1), "layers": layers, "gf": jnp.ones(DIM),
            "out": n((DIM, vocab))}


def layer_norm(h, g):
    return g * (h - h.mean(-1, keepdims=True)) / jnp.sqrt(h.var(-1, keepdims=True) + 1e-5)


def forward(p, tokens):
    b, t = tokens.shape
    h = p["emb"][tokens] + p["pos"][:t]
    mask = jnp.tril(jnp.ones((t, t), bool))
    heads = lambda a: a.reshape(b, t, HEADS, DIM // HEADS).transpose(0, 2, 1, 3)

    def block(h, layer):
        q, k, v = jnp.split(layer_norm(h, layer["g1"]) @ layer["qkv"], 3, axis=-1)
        att = heads(q) @ heads(k).transpose(0, 1, 3, 2) / np.sqrt(DIM // HEADS)
        att = jax.nn.softmax(jnp.where(mask, att, -1e9), axis=-1)
        h = h + (att @ heads(v)).transpose(0, 2, 1, 3).reshape(b, t, DIM) @ layer["o"]
        h = h + jax.nn.gelu(layer_norm(h, layer["g2"]) @ layer["f1"]) @ layer["f2"]
        return h, None

    h, _ = jax.lax.scan(block, h, p["layers"])
    return layer_norm(h, p["gf"]) @ p["out"]


def loss_fn(p, batch):
    logits = forward(p, batch[:, :-1])
    logp = jax.nn.log_softmax(logits)
    return -jnp.mean(jnp.take_along_axis(logp, batch[:, 1:, None], axis=-1))


WARMUP, DECAY_START, TOTAL = 20, 200, 400


def learning_rate(step, peak):
    phase = jnp.searchsorted(jnp.array([WARMUP, DECAY_START]), step, side="right")
    return jax.lax.switch(phase, [
        lambda s: peak * (s + 1) / WARMUP,                                               # warm-up
        lambda s: peak,                                                                  # constant
        lambda s: peak * (0.1 + 0.45 * (1 + jnp.cos(jnp.pi * jnp.minimum(s - DECAY_START, TOTAL) / TOTAL))),  # cosine
    ], step.astype(jnp.float32))


def clip_by_global_norm(g, limit=1.0):
    norm = jnp.sqrt(sum(jnp.sum(x * x) for x in jax.tree.leaves(g)))
    return jax.lax.cond(norm > limit, lambda g: jax.tree.map(lambda x: x * (limit / norm), g), lambda g: g, g), norm


@jax.jit
def train_step(p, m, step, batch, peak_lr):
    loss, g = jax.value_and_grad(loss_fn)(p, batch)
    g, norm = clip_by_global_norm(g)
    lr = learning_rate(step, peak_lr)
    m = jax.tree.map(lambda m, g: 0.9 * m + 0.1 * g, m, g)                 # momentum
    p = jax.tree.map(lambda p, m: p - lr * (m + 1e-4 * p), p, m)           # decoupled weight decay
    return p, m, step + 1, loss


@partial(jax.jit, static_argnums=(3,))
def sample(p, prompt, key, length, temperature=0.8):
    """Extends `prompt` ([SEQ] ints, its first SEQ // 2 filled) by `length` characters, sliding the window."""
    start = SEQ // 2

    def step(i, carry):
        window, out, key = carry
        pos = jnp.minimum(start + i, SEQ) - 1                     # the last filled position
        logits = jax.lax.dynamic_slice(forward(p, window[None])[0], (pos, 0), (1, p["out"].shape[1]))[0]
        key, sub = jax.random.split(key)
        token = jax.lax.cond(temperature > 0, lambda: jax.random.categorical(sub, logits / temperature),
                             lambda: jnp.argmax(logits)).astype(window.dtype)
        # While the window has room, write after the prompt; then shift it left by one.
        window = jax.lax.cond(start + i < SEQ,
                              lambda w: jax.lax.dynamic_update_slice(w, token[None], (start + i,)),
                              lambda w: jnp.concatenate([w[1:], token[None]]), window)
        return window, out.at[i].set(token), key

    out = jnp.zeros(length, prompt.dtype)
    _, out, _ = jax.lax.fori_loop(0, length, step, (prompt, out, key))
    return out


def batches(data, rng, size=16):
    starts = rng.integers(0, len(data) - SEQ - 1, size=size)
    return np.stack([data[s:s + SEQ + 1] for s in starts])


def train(platform, steps, seed=0, peak_lr=0.3):
    """Runs `steps` training steps on `platform`; returns the losses (used by the tests too)."""
    device = jax.devices(platform)[0]
    data, chars = corpus()
    rng = np.random.default_rng(seed)
    p = jax.device_put(init_params(jax.random.key(seed), len(chars)), device)
    m = jax.tree.map(jnp.zeros_like, p)
    step = jax.device_put(jnp.int32(0), device)
    losses = []
    for _ in range(steps):
        p, m, step, loss = train_step(p, m, step, jax.device_put(batches(data, rng), device), peak_lr)
        losses.append(float(loss))
    return np.array(losses), p


def main():
    from tqdm import tqdm
    device = jax.devices()[0]
    print(f"platform {device.platform}, device {device.device_kind}")
    data, chars = corpus()
    rng = np.random.default_rng(ARGS.seed)
    p = jax.device_put(init_params(jax.random.key(ARGS.seed), len(chars)), device)
    m = jax.tree.map(jnp.zeros_like, p)
    step = jnp.int32(0)
    bar = tqdm(range(ARGS.steps), file=sys.stdout)
    for i in bar:
        p, m, step, loss = train_step(p, m, step, batches(data, rng), 0.3)
        if i % 10 == 0:
            bar.set_postfix(loss=f"{float(loss):.4f}")
        if i % 100 == 0:
            bar.write(f"step {i}: loss {float(loss):.4f}")
    print(f"final loss {float(loss):.4f}")
    if ARGS.sample > 0:
        prompt = np.zeros(SEQ, np.int32)
        prompt[:SEQ // 2] = data[:SEQ // 2]
        text = sample(p, prompt, jax.random.key(ARGS.seed), ARGS.sample)
        print("sample:", repr("".join(chars[c] for c in data[:SEQ // 2]) + "".join(chars[int(c)] for c in text)))


if __name__ == "__main__":
    main()

"""Train a small character-level transformer language model on the Zen of Python (the text of the
standard library's `this` module), jitted, with a causal mask, embeddings and AdamW-style updates.

    JAX_PLATFORMS=metal python examples/train_transformer.py
    python examples/train_transformer.py --platform cpu
"""

import argparse
import codecs
import os
import sys

if __name__ == "__main__":
    _p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    _p.add_argument("--platform", choices=["metal", "cpu"], default=None)
    _p.add_argument("--steps", type=int, default=300)
    _p.add_argument("--seed", type=int, default=0)
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
    keys = iter(jax.random.split(key, 4 + 6 * LAYERS))
    n = lambda shape, s=0.05: jax.random.normal(next(keys), shape) * s
    layers = [{"qkv": n((DIM, 3 * DIM)), "o": n((DIM, DIM)), "f1": n((DIM, 4 * DIM)), "f2": n((4 * DIM, DIM)),
               "g1": jnp.ones(DIM), "g2": jnp.ones(DIM)} for _ in range(LAYERS)]
    return {"emb": n((vocab, DIM), 0.1), "pos": n((SEQ, DIM), 0.1), "layers": layers, "gf": jnp.ones(DIM),
            "out": n((DIM, vocab))}


def layer_norm(h, g):
    return g * (h - h.mean(-1, keepdims=True)) / jnp.sqrt(h.var(-1, keepdims=True) + 1e-5)


def forward(p, tokens):
    b, t = tokens.shape
    h = p["emb"][tokens] + p["pos"][:t]
    mask = jnp.tril(jnp.ones((t, t), bool))
    for layer in p["layers"]:
        q, k, v = jnp.split(layer_norm(h, layer["g1"]) @ layer["qkv"], 3, axis=-1)
        heads = lambda a: a.reshape(b, t, HEADS, DIM // HEADS).transpose(0, 2, 1, 3)
        att = heads(q) @ heads(k).transpose(0, 1, 3, 2) / np.sqrt(DIM // HEADS)
        att = jax.nn.softmax(jnp.where(mask, att, -1e9), axis=-1)
        h = h + (att @ heads(v)).transpose(0, 2, 1, 3).reshape(b, t, DIM) @ layer["o"]
        h = h + jax.nn.gelu(layer_norm(h, layer["g2"]) @ layer["f1"]) @ layer["f2"]
    return layer_norm(h, p["gf"]) @ p["out"]


def loss_fn(p, batch):
    logits = forward(p, batch[:, :-1])
    logp = jax.nn.log_softmax(logits)
    return -jnp.mean(jnp.take_along_axis(logp, batch[:, 1:, None], axis=-1))


@jax.jit
def train_step(p, m, batch, lr):
    loss, g = jax.value_and_grad(loss_fn)(p, batch)
    m = jax.tree.map(lambda m, g: 0.9 * m + 0.1 * g, m, g)                 # momentum
    p = jax.tree.map(lambda p, m: p - lr * (m + 1e-4 * p), p, m)           # decoupled weight decay
    return p, m, loss


def batches(data, rng, size=16):
    starts = rng.integers(0, len(data) - SEQ - 1, size=size)
    return np.stack([data[s:s + SEQ + 1] for s in starts])


def train(platform, steps, seed=0):
    """Runs `steps` training steps on `platform`; returns the losses (used by the tests too)."""
    device = jax.devices(platform)[0]
    data, chars = corpus()
    rng = np.random.default_rng(seed)
    p = jax.device_put(init_params(jax.random.key(seed), len(chars)), device)
    m = jax.tree.map(jnp.zeros_like, p)
    losses = []
    for _ in range(steps):
        p, m, loss = train_step(p, m, jax.device_put(batches(data, rng), device), 0.3)
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
    bar = tqdm(range(ARGS.steps), file=sys.stdout)
    for step in bar:
        p, m, loss = train_step(p, m, batches(data, rng), 0.3)
        if step % 10 == 0:
            bar.set_postfix(loss=f"{float(loss):.4f}")
        if step % 100 == 0:
            print(f"step {step}: loss {float(loss):.4f}")
    print(f"final loss {float(loss):.4f}")


if __name__ == "__main__":
    main()

"""Train a small CNN (conv + max-pool + dropout) on scikit-learn's bundled digits (no download).

Control flow as real training code has it: each batch is augmented by a lax.switch over random shifts,
gradients are clipped under a lax.cond, and evaluation is a lax.scan over test chunks carrying a
(correct, loss) tuple.

    JAX_PLATFORMS=metal python examples/train_cnn.py
    python examples/train_cnn.py --platform cpu      # the same run on JAX's CPU backend
"""

import argparse
import os
import sys

if __name__ == "__main__":
    _p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    _p.add_argument("--platform", choices=["metal", "cpu"], default=None)
    _p.add_argument("--epochs", type=int, default=5)
    _p.add_argument("--steps", type=int, default=None, help="steps per epoch (default: one pass over the data)")
    _p.add_argument("--batch-size", type=int, default=64)
    _p.add_argument("--seed", type=int, default=0)
    ARGS = _p.parse_args()
    os.environ["JAX_PLATFORMS"] = ARGS.platform or os.environ.get("JAX_PLATFORMS", "metal")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402

DN = ("NHWC", "HWIO", "NHWC")


def init_params(key):
    k1, k2, k3 = jax.random.split(key, 3)
    return {"c1": jax.random.normal(k1, (3, 3, 1, 16)) * 0.3, "b1": jnp.zeros(16),
            "c2": jax.random.normal(k2, (3, 3, 16, 32)) * 0.1, "b2": jnp.zeros(32),
            "d": jax.random.normal(k3, (2 * 2 * 32, 10)) * 0.05, "bd": jnp.zeros(10)}


def forward(p, x, key=None, rate=0.25):
    h = jax.nn.relu(lax.conv_general_dilated(x, p["c1"], (1, 1), "SAME", dimension_numbers=DN) + p["b1"])
    h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")   # 8x8 -> 4x4
    h = jax.nn.relu(lax.conv_general_dilated(h, p["c2"], (1, 1), "SAME", dimension_numbers=DN) + p["b2"])
    h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")   # 4x4 -> 2x2
    h = h.reshape(h.shape[0], -1)
    if key is not None:  # dropout while training
        keep = jax.random.bernoulli(key, 1 - rate, h.shape)
        h = jnp.where(keep, h / (1 - rate), 0.0)
    return h @ p["d"] + p["bd"]


def loss_fn(p, x, y, key):
    logp = jax.nn.log_softmax(forward(p, x, key))
    return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))


def augment(x, key):
    """One of: unchanged, shifted one pixel right (zero fill), shifted one pixel down (zero fill)."""
    choice = jax.random.randint(key, (), 0, 3)
    return lax.switch(choice, [
        lambda x: x,
        lambda x: jnp.pad(x, ((0, 0), (0, 0), (1, 0), (0, 0)))[:, :, :-1],
        lambda x: jnp.pad(x, ((0, 0), (1, 0), (0, 0), (0, 0)))[:, :-1],
    ], x)


def clip_by_global_norm(g, limit=5.0):
    norm = jnp.sqrt(sum(jnp.sum(a * a) for a in jax.tree.leaves(g)))
    return lax.cond(norm > limit, lambda g: jax.tree.map(lambda a: a * (limit / norm), g), lambda g: g, g)


@jax.jit
def train_step(p, x, y, key):
    k_aug, k_drop = jax.random.split(key)
    loss, grads = jax.value_and_grad(loss_fn)(p, augment(x, k_aug), y, k_drop)
    grads = clip_by_global_norm(grads)
    return jax.tree.map(lambda a, g: a - 0.2 * g, p, grads), loss


@jax.jit
def evaluate(p, x, y):
    """(accuracy, mean loss) over chunks of 32 (x, y padded by the caller to a multiple of 32)."""
    valid = y >= 0

    def chunk(carry, batch):
        correct, total = carry
        xb, yb, vb = batch
        logp = jax.nn.log_softmax(forward(p, xb))
        nll = -jnp.take_along_axis(logp, jnp.maximum(yb, 0)[:, None], axis=1)[:, 0]
        correct += jnp.sum((jnp.argmax(logp, axis=-1) == yb) & vb)
        return (correct, total + jnp.sum(jnp.where(vb, nll, 0.0))), None

    chunks = lambda a: a.reshape(-1, 32, *a.shape[1:])
    (correct, total), _ = lax.scan(chunk, (jnp.int32(0), jnp.float32(0)), (chunks(x), chunks(y), chunks(valid)))
    n = jnp.sum(valid)
    return correct / n, total / n


def pad_to_chunks(x, y, size=32):
    extra = -len(x) % size
    return np.concatenate([x, np.zeros((extra, *x.shape[1:]), x.dtype)]), np.concatenate([y, -np.ones(extra, y.dtype)])


def load_digits_nhwc():
    from sklearn.datasets import load_digits
    d = load_digits()
    return (d.images[..., None] / 16.0).astype(np.float32), d.target.astype(np.int32)


def train(platform, steps, batch_size=64, seed=0):
    """Runs `steps` training steps on `platform`; returns the losses (used by the tests too)."""
    device = jax.devices(platform)[0]
    x, y = load_digits_nhwc()
    rng = np.random.default_rng(seed)
    params = jax.device_put(init_params(jax.random.key(seed)), device)
    key = jax.device_put(jax.random.key(seed + 1), device)
    losses = []
    for step in range(steps):
        idx = rng.choice(len(x), batch_size, replace=False)
        key, sub = jax.random.split(key)
        params, loss = train_step(params, jax.device_put(x[idx], device), jax.device_put(y[idx], device), sub)
        losses.append(float(loss))
    return np.array(losses), params


def main():
    from tqdm import tqdm
    device = jax.devices()[0]
    print(f"platform {device.platform}, device {device.device_kind}")
    x, y = load_digits_nhwc()
    rng = np.random.default_rng(ARGS.seed)
    order = rng.permutation(len(x))
    split = int(0.8 * len(x))
    tr, te = order[:split], order[split:]
    params = jax.device_put(init_params(jax.random.key(ARGS.seed)), device)
    key = jax.device_put(jax.random.key(ARGS.seed + 1), device)
    x_test, y_test = jax.device_put(pad_to_chunks(x[te], y[te]), device)
    steps = min(split // ARGS.batch_size, ARGS.steps or split)
    for epoch in range(ARGS.epochs):
        perm = rng.permutation(tr)
        bar = tqdm(range(steps), desc=f"epoch {epoch + 1}/{ARGS.epochs}", leave=False, file=sys.stdout)
        losses = []
        for i in bar:
            idx = perm[i * ARGS.batch_size:(i + 1) * ARGS.batch_size]
            key, sub = jax.random.split(key)
            params, loss = train_step(params, x[idx], y[idx], sub)
            losses.append(loss)
            bar.set_postfix(loss=f"{float(loss):.4f}")
        acc, test_loss = evaluate(params, x_test, y_test)
        print(f"epoch {epoch + 1}: train loss {float(np.mean(jax.device_get(losses))):.4f}  "
              f"test loss {float(test_loss):.4f}  test accuracy {float(acc):.3f}")


if __name__ == "__main__":
    main()

"""Train a small CNN (conv + max-pool + dropout) on scikit-learn's bundled digits (no download).

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


@jax.jit
def train_step(p, x, y, key):
    loss, grads = jax.value_and_grad(loss_fn)(p, x, y, key)
    return jax.tree.map(lambda a, g: a - 0.2 * g, p, grads), loss


@jax.jit
def accuracy(p, x, y):
    return jnp.mean(jnp.argmax(forward(p, x), axis=-1) == y)


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
    x_test, y_test = jax.device_put((x[te], y[te]), device)
    steps = split // ARGS.batch_size
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
        acc = float(accuracy(params, x_test, y_test))
        print(f"epoch {epoch + 1}: loss {float(np.mean(jax.device_get(losses))):.4f}  test accuracy {acc:.3f}")


if __name__ == "__main__":
    main()

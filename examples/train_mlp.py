"""Train a small MLP classifier on scikit-learn's bundled digits (8x8 images, no download).

    JAX_PLATFORMS=metal python examples/train_mlp.py
    python examples/train_mlp.py --platform cpu      # the same run on JAX's CPU backend
"""

import argparse
import os
import sys


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--platform", choices=["metal", "cpu"], default=None,
                   help="JAX platform (default: JAX_PLATFORMS, else metal)")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args()


args = parse_args()
if args.platform:
    os.environ["JAX_PLATFORMS"] = args.platform
else:
    os.environ.setdefault("JAX_PLATFORMS", "metal")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from tqdm import tqdm  # noqa: E402


def init_params(key, sizes):
    keys = jax.random.split(key, len(sizes) - 1)
    return [(jax.random.normal(k, (m, n)) * jnp.sqrt(2.0 / m), jnp.zeros(n))
            for k, m, n in zip(keys, sizes[:-1], sizes[1:])]


def logits_fn(params, x):
    for w, b in params[:-1]:
        x = jax.nn.relu(x @ w + b)
    w, b = params[-1]
    return x @ w + b


def loss_fn(params, x, y):
    logp = jax.nn.log_softmax(logits_fn(params, x))
    return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))


@jax.jit
def train_step(params, x, y, lr):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    return jax.tree.map(lambda p, g: p - lr * g, params, grads), loss


@jax.jit
def accuracy(params, x, y):
    # vmap over examples: the per-example prediction, batched.
    predict = jax.vmap(lambda xi: jnp.argmax(logits_fn(params, xi[None])[0]))
    return jnp.mean(predict(x) == y)


def main():
    device = jax.devices()[0]
    print(f"platform {device.platform}, device {device.device_kind}")
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int32)
    rng = np.random.default_rng(args.seed)
    order = rng.permutation(len(x))
    split = int(0.8 * len(x))
    train_idx, test_idx = order[:split], order[split:]
    x_test, y_test = jax.device_put((x[test_idx], y[test_idx]), device)

    params = jax.device_put(init_params(jax.random.key(args.seed), [64, 128, 64, 10]), device)
    steps = split // args.batch_size
    for epoch in range(args.epochs):
        perm = rng.permutation(train_idx)
        losses = []
        bar = tqdm(range(steps), desc=f"epoch {epoch + 1}/{args.epochs}", leave=False, file=sys.stdout)
        for i in bar:
            idx = perm[i * args.batch_size:(i + 1) * args.batch_size]
            params, loss = train_step(params, x[idx], y[idx], args.lr)
            losses.append(loss)
            bar.set_postfix(loss=f"{float(loss):.4f}")
        acc = float(accuracy(params, x_test, y_test))
        print(f"epoch {epoch + 1}: loss {float(np.mean(jax.device_get(losses))):.4f}  test accuracy {acc:.3f}")


if __name__ == "__main__":
    main()

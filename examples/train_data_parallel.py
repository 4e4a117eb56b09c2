"""Data-parallel training on several devices of one Mac: every batch is split across the devices, the
parameters are replicated on each, and the gradients are averaged over the devices.

    python examples/train_data_parallel.py --devices 4                  # jit with shardings
    python examples/train_data_parallel.py --devices 4 --style shard_map # the per-device program, with pmean
    python examples/train_data_parallel.py --devices 1                  # the same losses on one device
    python examples/train_data_parallel.py --devices 4 --platform cpu   # XLA's CPU backend, 4 host devices
    mpiexec -n 2 python examples/train_data_parallel.py --devices 4     # 2 processes with 2 devices each

With `--style jit` JAX compiles one global program and the shardings say where each piece lives; with
`--style shard_map` the step is written per device and the devices' gradients are summed across them. The metal
platform makes JAX_METAL_NUM_DEVICES devices (set here from --devices before JAX starts). Started by
mpiexec, each process joins the others with jax.distributed.initialize() and brings its share of the
devices; the losses are those of one process with all of them (docs/distributed.md).
"""

import argparse
import os


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--devices", type=int, default=4)
    p.add_argument("--style", choices=["jit", "shard_map"], default="jit")
    p.add_argument("--platform", choices=["metal", "cpu"], default="metal")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--batch-size", type=int, default=128, help="the global batch, split across the devices")
    return p.parse_args()


def mpi_processes():
    """How many processes mpiexec started (MPICH's or Open MPI's launcher), 1 without one."""
    for name in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE"):
        if os.environ.get(name):
            return int(os.environ[name])
    return 1


if __name__ == "__main__":
    ARGS = parse_args()
    PROCESSES = mpi_processes()
    if ARGS.devices % PROCESSES:
        raise SystemExit(f"{ARGS.devices} devices cannot be shared evenly by {PROCESSES} processes")
    # JAX fixes its device count when it starts: ask for enough devices first.
    os.environ["JAX_PLATFORMS"] = ARGS.platform
    os.environ.setdefault("JAX_METAL_NUM_DEVICES", str(ARGS.devices // PROCESSES))
    flag = f"--xla_force_host_platform_device_count={ARGS.devices}"
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + flag).strip()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

SIZES = [64, 128, 64, 10]


def digits():
    """scikit-learn's bundled 8x8 digits (no download), scaled to [0, 1]."""
    from sklearn.datasets import load_digits
    d = load_digits()
    return (d.data / 16.0).astype(np.float32), d.target.astype(np.int32)


def init_params(key):
    keys = jax.random.split(key, len(SIZES) - 1)
    return [(np.asarray(jax.random.normal(k, (m, n))) * np.sqrt(2.0 / m), np.zeros(n, np.float32))
            for k, m, n in zip(keys, SIZES[:-1], SIZES[1:])]


def loss_fn(params, x, y):
    for w, b in params[:-1]:
        x = jax.nn.relu(x @ w + b)
    w, b = params[-1]
    logp = jax.nn.log_softmax(x @ w + b)
    return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))


def make_step(mesh, style, lr):
    replicated, split = NamedSharding(mesh, P()), NamedSharding(mesh, P("batch"))
    if style == "jit":
        def step(params, x, y):
            loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
            return jax.tree.map(lambda p, g: p - lr * g, params, grads), loss

        return jax.jit(step, in_shardings=(replicated, split, split), out_shardings=(replicated, replicated),
                       donate_argnums=0)

    def local_step(params, x, y):  # one device's slice of the batch
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        # The gradient of parameters replicated over "batch" arrives summed over the devices (shard_map
        # transposes a replicated input into a psum): the global batch's mean divides by their number.
        n = jax.lax.psum(1, "batch")
        return jax.tree.map(lambda p, g: p - lr * g / n, params, grads), jax.lax.pmean(loss, "batch")

    shard_map = getattr(jax, "shard_map", None)
    if shard_map is None:  # JAX releases before jax.shard_map
        from jax.experimental.shard_map import shard_map
    return jax.jit(shard_map(local_step, mesh=mesh, in_specs=(P(), P("batch"), P("batch")), out_specs=(P(), P())),
                   donate_argnums=0)


def put(tree, sharding):
    """Host arrays onto `sharding`, each process giving its own devices' pieces (every process holds the
    same host data), which also serves devices of other processes."""
    return jax.tree.map(lambda a: jax.make_array_from_callback(a.shape, sharding, lambda index: a[index]), tree)


def fetch(tree):
    """Replicated arrays to the host, from a device of this process."""
    return jax.tree.map(lambda a: np.asarray(a.addressable_shards[0].data), tree)


def train(devices=4, style="jit", platform="metal", steps=40, batch_size=128, lr=0.2, seed=0):
    """Trains on the first `devices` devices of `platform` (of every process); returns the losses and
    the parameters."""
    mesh = Mesh(np.array(jax.devices(platform)[:devices]), ("batch",))
    step = make_step(mesh, style, lr)
    x, y = digits()
    rng = np.random.default_rng(seed)
    params = put(init_params(jax.random.key(seed)), NamedSharding(mesh, P()))
    split = NamedSharding(mesh, P("batch"))
    losses = []
    for _ in range(steps):
        idx = rng.choice(len(x), batch_size, replace=False)
        params, loss = step(params, put(x[idx], split), put(y[idx], split))
        losses.append(loss)
    return np.array(fetch(losses)), fetch(params)


def main():
    if PROCESSES > 1:
        jax.distributed.initialize(cluster_detection_method="mpi4py")
    devices = jax.devices(ARGS.platform)
    if len(devices) < ARGS.devices:
        raise SystemExit(f"{len(devices)} {ARGS.platform} devices, {ARGS.devices} asked for")
    losses, _ = train(ARGS.devices, ARGS.style, ARGS.platform, ARGS.steps, ARGS.batch_size)
    if jax.process_index() != 0:
        return
    print(f"platform {ARGS.platform}, {ARGS.devices} devices in {PROCESSES} process(es), step as {ARGS.style}")
    for k in range(0, len(losses), 10):
        print(f"step {k:3d}: loss {losses[k]:.5f}")
    print(f"step {len(losses) - 1:3d}: loss {losses[-1]:.5f}")


if __name__ == "__main__":
    main()

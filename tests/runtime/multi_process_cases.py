"""Run by test_multi_process.py: the same programs as 2 processes with 2 metal devices each (started by
mpiexec, joined by jax.distributed) or as 1 process with 4. Usage: multi_process_cases.py MODE OUT_DIR.

  agree     every collective of shard_map, jit with shardings and a data-parallel training step; process 0
            saves the global results (and numpy's) to OUT_DIR/agree.npz
  kill      process 1 ends abruptly after a first step; process 0's next step must fail naming it
  mismatch  the processes run different programs: an error in each, then the same program runs again
  subset    3 processes with 1 device each: a program over the first two processes' devices runs in
            those two only, then one over all three; process 0 saves both results to OUT_DIR/subset.npz
"""

import os
import pathlib
import sys
import time

MODE, OUT = sys.argv[1], pathlib.Path(sys.argv[2])
PROCESSES = int(os.environ.get("PMI_SIZE") or os.environ.get("OMPI_COMM_WORLD_SIZE") or 1)

import jax  # noqa: E402

if PROCESSES > 1:
    jax.distributed.initialize(cluster_detection_method="mpi4py")

import jax.numpy as jnp  # noqa: E402
import jax_metal_plugin  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import multihost_utils  # noqa: E402
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

shard_map = getattr(jax, "shard_map", None)
if shard_map is None:  # JAX releases before jax.shard_map
    from jax.experimental.shard_map import shard_map

if MODE == "subset":
    assert jax.device_count() == 3 and jax.local_device_count() == 1, jax.devices()
else:
    assert jax.device_count() == 4 and jax.local_device_count() == 4 // PROCESSES, jax.devices()
    MESH = Mesh(np.array(jax.devices()), ("x",))
    MESH2 = Mesh(np.array(jax.devices()).reshape(2, 2), ("a", "b"))


def put(a, sharding):
    return jax.make_array_from_callback(a.shape, sharding, lambda index: a[index])


def gather(a):
    return np.asarray(multihost_utils.process_allgather(a, tiled=True))


def collectives(results, reference):
    x = np.arange(8 * 6, dtype=np.float32).reshape(8, 6) / 7
    xs = put(x, NamedSharding(MESH, P("x")))
    blocks = x.reshape(4, 2, 6)

    def per_device(f, out_specs=P("x")):
        return jax.jit(shard_map(f, mesh=MESH, in_specs=P("x"), out_specs=out_specs))

    def counted(name, f, *args):
        """f(*args), and how it ran over the processes: as each process's part, its all-reduces taken
        with the other process, or with the arguments exchanged and the whole program run in each."""
        before = jax_metal_plugin.stats()
        out = f(*args)
        out.block_until_ready()
        after = jax_metal_plugin.stats()
        results[f"{name}_runs"] = np.array([after[k] - before[k] for k in ("process_part_runs", "argument_exchanges")])
        return out

    results["psum"] = gather(counted("psum", per_device(lambda b: jax.lax.psum(b, "x"), P()), xs))
    reference["psum"] = blocks.sum(0)
    results["pmax"] = gather(per_device(lambda b: jax.lax.pmax(b, "x"), P())(xs))
    reference["pmax"] = blocks.max(0)
    # Each device's gathered copy, side by side.
    results["all_gather"] = gather(per_device(lambda b: jax.lax.all_gather(b, "x", tiled=True))(xs))
    reference["all_gather"] = np.tile(x, (4, 1))
    y = np.arange(16 * 3, dtype=np.float32).reshape(16, 3)
    ys = put(y, NamedSharding(MESH, P("x")))
    results["psum_scatter"] = gather(
        counted("psum_scatter", per_device(lambda b: jax.lax.psum_scatter(b, "x", tiled=True)), ys))
    reference["psum_scatter"] = y.reshape(4, 4, 3).sum(0)
    results["all_to_all"] = gather(per_device(lambda b: jax.lax.all_to_all(b, "x", 0, 0, tiled=True))(ys))
    reference["all_to_all"] = y.reshape(4, 4, 3).transpose(1, 0, 2).reshape(16, 3)
    shift = [(i, (i + 1) % 4) for i in range(4)]
    results["ppermute"] = gather(per_device(lambda b: jax.lax.ppermute(b, "x", shift))(xs))
    reference["ppermute"] = np.roll(blocks, 1, axis=0).reshape(8, 6)
    results["axis_index"] = gather(per_device(lambda b: b * 0 + jax.lax.axis_index("x"))(xs))
    reference["axis_index"] = np.repeat(np.arange(4, dtype=np.float32), 2)[:, None] * np.ones((1, 6), np.float32)
    ints = np.arange(4 * 5, dtype=np.int32).reshape(4, 5)
    results["psum_int32"] = gather(per_device(lambda b: jax.lax.psum(b, "x"), P())(
        put(ints, NamedSharding(MESH, P("x")))))
    reference["psum_int32"] = ints.sum(0, keepdims=True, dtype=np.int32)
    # Over one axis of a 2-D mesh whose other axis spans the processes.
    sum_b = jax.jit(shard_map(lambda b: jax.lax.psum(b, "b"), mesh=MESH2, in_specs=P("a", "b"), out_specs=P("a")))
    results["psum_2d"] = gather(sum_b(put(x, NamedSharding(MESH2, P("a", "b")))))
    reference["psum_2d"] = x.reshape(8, 2, 3).sum(1)


def jit_with_shardings(results, reference):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((8, 16)).astype(np.float32)
    w = rng.standard_normal((16, 12)).astype(np.float32)
    f = jax.jit(lambda a, w: jnp.tanh(a @ w), in_shardings=(NamedSharding(MESH, P("x")), NamedSharding(MESH, P(None, "x"))),
                out_shardings=NamedSharding(MESH, P(None, "x")))
    results["matmul"] = gather(f(put(a, NamedSharding(MESH, P("x"))), put(w, NamedSharding(MESH, P(None, "x")))))
    reference["matmul"] = np.tanh(a.astype(np.float64) @ w).astype(np.float32)
    # Resharding between two meshes, and a donated argument.
    moved = jax.jit(lambda v: v * 2, out_shardings=NamedSharding(MESH2, P("b", "a")), donate_argnums=0)(
        put(a, NamedSharding(MESH, P(None, "x"))))
    results["reshard"] = gather(moved)
    reference["reshard"] = a * 2


def training(results, reference):
    import importlib.util
    path = pathlib.Path(__file__).resolve().parents[2] / "examples" / "train_data_parallel.py"
    spec = importlib.util.spec_from_file_location("train_data_parallel", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    for style in ("jit", "shard_map"):
        before = jax_metal_plugin.stats()
        losses, params = example.train(devices=4, style=style, steps=4, batch_size=64)
        after = jax_metal_plugin.stats()
        results[f"runs_{style}"] = np.array([after[k] - before[k] for k in ("process_part_runs", "argument_exchanges")])
        results[f"losses_{style}"] = losses
        results[f"weights_{style}"] = params[0][0]


def agree():
    results, reference = {}, {}
    collectives(results, reference)
    jit_with_shardings(results, reference)
    training(results, reference)
    if jax.process_index() == 0:
        np.savez(OUT / "agree.npz", **results, **{f"reference/{k}": v for k, v in reference.items()})


def kill():
    xs = put(np.arange(8, dtype=np.float32), NamedSharding(MESH, P("x")))
    step = jax.jit(lambda v: v + 1, out_shardings=NamedSharding(MESH, P()))
    gather(step(xs))
    if jax.process_index() == 1:
        os._exit(3)  # as a crash would: no shutdown, no goodbye
    time.sleep(1)
    start = time.monotonic()
    try:
        gather(step(xs))
        outcome = "no error"
    except Exception as e:  # noqa: BLE001 - the error is the outcome
        outcome = f"{type(e).__name__}: {e}"
    (OUT / "kill.txt").write_text(f"{time.monotonic() - start:.3f}\n{outcome}")
    sys.stdout.flush()
    os._exit(0)  # JAX's shutdown would wait for the dead process


def mismatch():
    xs = put(np.arange(8, dtype=np.float32), NamedSharding(MESH, P("x")))
    factor = 2.0 + jax.process_index()
    try:
        jax.jit(lambda v: v * factor, out_shardings=NamedSharding(MESH, P()))(xs).block_until_ready()
        first = "no error"
    except Exception as e:  # noqa: BLE001 - the error is the outcome
        first = f"{type(e).__name__}: {e}"
    again = gather(jax.jit(lambda v: v * 2, out_shardings=NamedSharding(MESH, P()))(xs))
    (OUT / f"mismatch-{jax.process_index()}.txt").write_text(f"{first}\n{again.tolist()}")


def subset():
    x = np.arange(12, dtype=np.float32).reshape(6, 2)
    total = per_device_sum = None
    pair = Mesh(np.array(jax.devices()[:2]), ("x",))
    if jax.process_index() < 2:
        xs = put(x[:4], NamedSharding(pair, P("x")))
        summed = jax.jit(shard_map(lambda b: jax.lax.psum(b, "x"), mesh=pair, in_specs=P("x"), out_specs=P()))(xs)
        per_device_sum = np.asarray(summed.addressable_shards[0].data)
    everyone = Mesh(np.array(jax.devices()), ("x",))
    total = gather(jax.jit(lambda v: v * 2, out_shardings=NamedSharding(everyone, P()))(
        put(x, NamedSharding(everyone, P("x")))))
    if jax.process_index() == 0:
        np.savez(OUT / "subset.npz", pair=per_device_sum, everyone=total)


{"agree": agree, "kill": kill, "mismatch": mismatch, "subset": subset}[MODE]()

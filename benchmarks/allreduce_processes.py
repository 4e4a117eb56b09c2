"""An all-reduce between two processes: JAX's psum over 2 metal devices, one in each process (joined by
jax.distributed under mpiexec), against MPI's own MPI_Allreduce through mpi4py on buffers of the same
size, in the same processes.

    python benchmarks/allreduce_processes.py                 # writes allreduce_processes.json
    python benchmarks/allreduce_processes.py --sizes-mb 1 16 --rounds 20

The figure is the psum's bandwidth (bytes of one process's buffer per second) over MPI's (target: at
least 0.8 from 1 MB up). Each size runs in its own pair of processes; a time is the 10th percentile of
its rounds (what disturbs a round on a shared machine only adds time; rounds.py's tenth_percentile).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def child(size_mb, rounds, reps):
    sys.path.insert(0, HERE)
    os.environ["JAX_PLATFORMS"] = "metal"
    os.environ["JAX_METAL_NUM_DEVICES"] = "1"
    import bench_env
    bench_env.settle(sys.argv)
    import jax
    jax.distributed.initialize(cluster_detection_method="mpi4py")
    import numpy as np
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P
    from mpi4py import MPI

    from rounds import tenth_percentile

    shard_map = getattr(jax, "shard_map", None)
    if shard_map is None:  # JAX releases before jax.shard_map
        from jax.experimental.shard_map import shard_map
    comm = MPI.COMM_WORLD
    n = size_mb * (1 << 20) // 4
    mesh = Mesh(np.array(jax.devices()), ("x",))
    local = np.random.default_rng(jax.process_index()).standard_normal(n).astype(np.float32)
    sharding = NamedSharding(mesh, P("x"))
    x = jax.make_array_from_single_device_arrays((2 * n,), sharding, [jax.device_put(local, jax.local_devices()[0])])
    psum = jax.jit(shard_map(lambda b: jax.lax.psum(b, "x"), mesh=mesh, in_specs=P("x"), out_specs=P("x")))
    summed = np.empty_like(local)

    def run_jax():
        psum(x).block_until_ready()

    def run_mpi():
        comm.Allreduce(local, summed, op=MPI.SUM)

    # The two agree before either is timed.
    run_mpi()
    got = np.asarray(psum(x).addressable_shards[0].data)
    assert np.array_equal(got, summed) or np.allclose(got, summed, rtol=0, atol=4e-7 * np.abs(summed).max())
    times = {"jax": [], "mpi": []}
    for _ in range(rounds):
        for name, f in (("jax", run_jax), ("mpi", run_mpi)):
            f()
            comm.Barrier()
            start = time.perf_counter()
            for _ in range(reps):
                f()
            times[name].append((time.perf_counter() - start) / reps)
    if jax.process_index() == 0:
        t = {k: tenth_percentile(v) for k, v in times.items()}
        print(json.dumps({"size_mb": size_mb, "jax_s": t["jax"], "mpi_s": t["mpi"]}), flush=True)


def measure(size_mb, args):
    mpiexec = os.path.join(sys.prefix, "bin", "mpiexec")
    env = dict(os.environ, JAX_COORDINATOR_PORT=str(args.port))
    cmd = [mpiexec, "-n", "2", sys.executable, os.path.abspath(__file__), "--child", str(size_mb),
           "--rounds", str(args.rounds), "--reps", str(args.reps)]
    from child_process import child_json

    return child_json(cmd, env)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes-mb", type=int, nargs="+", default=[1, 4, 16, 64])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--reps", type=int, default=10, help="all-reduces per round")
    ap.add_argument("--port", type=int, default=24011, help="the coordinator's port on this machine")
    ap.add_argument("--out", default="allreduce_processes.json")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.rounds, args.reps)
        return
    sys.path.insert(0, HERE)
    from machine import machine_facts, versions

    results = {"machine": machine_facts(), "versions": versions(), "sizes": []}
    print(f"{'size':>6} {'psum':>10} {'MPI':>10} {'psum/MPI bandwidth':>19}")
    for size in args.sizes_mb:
        r = measure(size, args)
        r["ratio"] = r["mpi_s"] / r["jax_s"]
        results["sizes"].append(r)
        gbs = lambda s: size * (1 << 20) / s / 1e9  # noqa: E731
        print(f"{size:4d}MB {gbs(r['jax_s']):7.2f}GB/s {gbs(r['mpi_s']):7.2f}GB/s {r['ratio']:18.2f}x", flush=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()

"""Data-parallel training on several metal devices: the same global batch stepped on 1 device and split
over 2, as examples/train_data_parallel.py does it (a jit with shardings, and a shard_map step).

    python benchmarks/data_parallel.py                  # writes data_parallel.json
    python benchmarks/data_parallel.py --processes 6 --rounds 20

The figure is the time of a step on 2 devices over the time on 1 (target: at most 1.2; here both devices
share the machine's cores, on a Mac its one GPU). JAX fixes its device count when it starts, so every
measurement runs in a fresh process with JAX_METAL_NUM_DEVICES set; the 1- and 2-device processes
alternate, and each pair of processes gives one ratio. A process's step time is the 10th percentile of
its rounds (what disturbs a round on a shared machine only adds time; rounds.py's tenth_percentile).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(os.path.dirname(HERE), "examples", "train_data_parallel.py")
SIZES = [512, 1024, 1024, 10]
GLOBAL_BATCH = 512


def child(devices, style, rounds, steps):
    sys.path.insert(0, HERE)
    import bench_env
    bench_env.settle(sys.argv)
    os.environ["JAX_PLATFORMS"] = "metal"
    os.environ["JAX_METAL_NUM_DEVICES"] = str(devices)
    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    from rounds import tenth_percentile

    spec = importlib.util.spec_from_file_location("train_data_parallel", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    mesh = Mesh(np.array(jax.devices("metal")[:devices]), ("batch",))
    step = example.make_step(mesh, style, lr=0.01)
    rng = np.random.default_rng(0)
    params = [(rng.normal(size=(m, n)).astype(np.float32) * np.sqrt(2 / m), np.zeros(n, np.float32))
              for m, n in zip(SIZES[:-1], SIZES[1:])]
    params = jax.device_put(params, NamedSharding(mesh, P()))
    split = NamedSharding(mesh, P("batch"))
    x = jax.device_put(rng.normal(size=(GLOBAL_BATCH, SIZES[0])).astype(np.float32), split)
    y = jax.device_put(rng.integers(0, SIZES[-1], GLOBAL_BATCH).astype(np.int32), split)
    for _ in range(3):
        params, loss = step(params, x, y)
    loss.block_until_ready()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(steps):
            params, loss = step(params, x, y)
        loss.block_until_ready()
        times.append((time.perf_counter() - start) / steps)
    print(json.dumps({"step_s": tenth_percentile(times), "median_s": statistics.median(times)}))


def measure(devices, style, args):
    cmd = [sys.executable, os.path.abspath(__file__), "--child", str(devices), "--style", style,
           "--rounds", str(args.rounds), "--steps", str(args.steps)]
    from child_process import child_json

    return child_json(cmd)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--processes", type=int, default=4, help="process pairs per style")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--steps", type=int, default=10, help="steps per round")
    ap.add_argument("--style", choices=["jit", "shard_map"], action="append")
    ap.add_argument("--out", default="data_parallel.json")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    styles = args.style or ["jit", "shard_map"]
    if args.child:
        child(args.child, styles[0], args.rounds, args.steps)
        return

    sys.path.insert(0, HERE)
    import bench_env
    bench_env.settle(sys.argv)
    from machine import machine_facts, versions

    results = {"machine": machine_facts(), "versions": versions(), "model": {"sizes": SIZES, "global_batch": GLOBAL_BATCH},
               "styles": {}}
    print(f"{'style':10} {'1 device':>10} {'2 devices':>10} {'ratio':>7}  per process pair")
    for style in styles:
        pairs = []
        for k in range(args.processes):
            order = (1, 2) if k % 2 == 0 else (2, 1)
            t = {n: measure(n, style, args) for n in order}
            pairs.append({"one_s": t[1]["step_s"], "two_s": t[2]["step_s"], "ratio": t[2]["step_s"] / t[1]["step_s"]})
        ratios = [p["ratio"] for p in pairs]
        one = statistics.median(p["one_s"] for p in pairs)
        two = statistics.median(p["two_s"] for p in pairs)
        results["styles"][style] = {"pairs": pairs, "ratio_median": statistics.median(ratios),
                                    "ratio_min": min(ratios), "ratio_max": max(ratios)}
        print(f"{style:10} {one * 1e3:8.2f}ms {two * 1e3:8.2f}ms {statistics.median(ratios):6.2f}x  "
              + " ".join(f"{r:.2f}" for r in ratios), flush=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""JAX's own multi-device test files, run on N metal devices and on N XLA:CPU devices: the measure of
several devices is how much of what CPU passes metal passes too.

    python scripts/jax_multi_device.py --jax-tree JAX_SRC [FILE ...] [--devices 8] [--json OUT]

JAX_SRC is a JAX source tree at the installed jax's version (as for jax_conformance.py); FILEs are names in
its tests/ folder (default: pmap_test, shard_map_test, pjit_test, array_test, api_test). Each file runs
twice, each time in its own process: with JAX_PLATFORMS=metal and JAX_METAL_NUM_DEVICES=N, and with
JAX_PLATFORMS=cpu and --xla_force_host_platform_device_count=N. Nothing is excluded: per file it prints what
each side passes, how many of CPU's passes metal passes too (the rate), and with --list the tests CPU passes
and metal does not. A skip counts as not passing on either side. Exit status 1 when the rate over every file
is below --require (percent; default 0: only report).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from jax_conformance import run_file, tree_version  # noqa: E402

FILES = ["pmap_test", "shard_map_test", "pjit_test", "array_test", "api_test"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*", default=FILES)
    ap.add_argument("--jax-tree", required=True, help="a JAX source tree at the installed jax's version")
    ap.add_argument("--devices", type=int, default=8)
    ap.add_argument("--timeout", type=float, default=5400, help="seconds per file and side")
    ap.add_argument("--json", help="write every test's outcome on both sides here")
    ap.add_argument("--list", action="store_true", help="print the tests cpu passes and metal does not")
    ap.add_argument("--require", type=float, default=0.0, help="percent of cpu's passes metal must pass")
    ap.add_argument("--any-version", action="store_true", help="run even if the tree's version differs")
    args = ap.parse_args()

    import jax
    version = tree_version(args.jax_tree)
    if version != jax.__version__ and not args.any_version:
        sys.exit(f"the tree is jax {version}, the installed jax is {jax.__version__}: use the matching tag")
    out_dir = tempfile.mkdtemp(prefix="jax-multi-device-")
    tests_dir = os.path.join(out_dir, "tests")
    shutil.copytree(os.path.join(args.jax_tree, "tests"), tests_dir)
    n = str(args.devices)
    flags = (os.environ.get("XLA_FLAGS", "") + f" --xla_force_host_platform_device_count={n}").strip()
    sides = {"metal": {"JAX_METAL_NUM_DEVICES": n}, "cpu": {"XLA_FLAGS": flags}}

    print(f"jax {jax.__version__}, {n} devices a side, {len(args.files)} files, logs in {out_dir}")
    print(f"{'file':16} {'cpu passed':>10} {'metal passed':>12} {'both':>6} {'rate':>8} {'time cpu/metal':>15}")
    outcomes = {side: {} for side in sides}
    total_cpu = total_both = 0
    missing = []
    for name in args.files:
        passed, seconds, notes = {}, {}, []
        for side, env in sides.items():
            side_dir = os.path.join(out_dir, side)
            os.makedirs(side_dir, exist_ok=True)
            results, _, secs, note = run_file(tests_dir, name, args.timeout, side_dir, platform=side, env_extra=env)
            outcomes[side].update(results)
            passed[side] = {t for t, (state, _) in results.items() if state == "passed"}
            seconds[side] = secs
            if note:
                notes.append(f"{side}: {note}")
        both = passed["cpu"] & passed["metal"]
        total_cpu += len(passed["cpu"])
        total_both += len(both)
        missing += sorted(passed["cpu"] - passed["metal"])
        rate = f"{100 * len(both) / len(passed['cpu']):.2f}%" if passed["cpu"] else "-"
        print(f"{name:16} {len(passed['cpu']):10} {len(passed['metal']):12} {len(both):6} {rate:>8} "
              f"{seconds['cpu']:7.0f}/{seconds['metal']:.0f}s" + (f"  {'; '.join(notes)}" if notes else ""),
              flush=True)
    overall = 100 * total_both / total_cpu if total_cpu else 0.0
    print(f"{'all':16} {total_cpu:10} {'':12} {total_both:6} {overall:7.2f}%")
    if args.list:
        for test in missing:
            print(f"cpu passes, metal does not: {test}: {outcomes['metal'].get(test, ('missing', ''))}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"jax": jax.__version__, "devices": args.devices, "results": outcomes}, f, indent=1)
    sys.exit(1 if overall < args.require else 0)


if __name__ == "__main__":
    main()

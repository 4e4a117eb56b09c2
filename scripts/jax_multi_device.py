#!/usr/bin/env python3
"""JAX's own multi-device test files, run on N metal devices and on N XLA:CPU devices: the measure of
several devices is how much of what CPU passes metal passes too.

    python scripts/jax_multi_device.py --jax-tree JAX_SRC [FILE ...] [--devices 8] [--json OUT]

JAX_SRC is a JAX source tree at the installed jax's version (as for jax_conformance.py); FILEs are names in
its tests/ folder (default: pmap_test, shard_map_test, pjit_test, array_test, api_test). Each file runs
twice, each time in its own process: with JAX_PLATFORMS=metal,cpu and JAX_METAL_NUM_DEVICES=N (metal the
default backend, JAX's CPU backend beside it, as a Mac user has it without JAX_PLATFORMS and as JAX's own
GPU runs have it; --metal-alone leaves cpu out), and with JAX_PLATFORMS=cpu and
--xla_force_host_platform_device_count=N. JAX's device tags (run_on_devices("cpu"), skip_on_devices)
skip some tests on every platform but CPU; those CPU passes run once more on metal with JAX's
device-under-test flag set to "cpu" (scripts/jax_test_dut.py), so they are measured too, against CPU's
expectations (--tags-skip leaves them skipped). Per file it prints what each side passes and how many of
CPU's passes metal passes too: the rate over all of them (nothing excluded; a skip counts as not
passing), how many tests the tags keep to CPU and how many of those pass on metal, and the rate over
the tests JAX runs on metal untagged. --list prints the tests CPU passes and metal does not. Exit status
1 when the rate over every file and every test is below --require (percent; default 0: only report).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from jax_conformance import run_file, tree_version  # noqa: E402

FILES = ["pmap_test", "shard_map_test", "pjit_test", "array_test", "api_test"]
# JAX's own device tagging: a test that runs on CPU (or on CPU and GPU/TPU) only, skipped on any plugin.
DEVICE_TAGS = re.compile(r"Skipped (unless running )?on devices with tags|run_on_devices|skip_on_devices")


def tally(cpu, metal):
    """One file's outcomes on both sides ({test: (state, why)}): the tests cpu passes, those metal passes
    too, those JAX's device tags skip on metal, and the rest cpu passes and metal does not."""
    cpu_passed = {t for t, (state, _) in cpu.items() if state == "passed"}
    metal_passed = {t for t, (state, _) in metal.items() if state == "passed"}
    both = cpu_passed & metal_passed
    tagged = {t for t in cpu_passed - metal_passed if DEVICE_TAGS.search(metal.get(t, ("", ""))[1])}
    return cpu_passed, both, tagged, sorted(cpu_passed - metal_passed - tagged)


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
    ap.add_argument("--metal-alone", action="store_true",
                    help="load metal alone (JAX_PLATFORMS=metal): tests that also use JAX's CPU backend fail")
    ap.add_argument("--tags-skip", action="store_true",
                    help="leave the tests JAX's device tags keep off metal skipped, instead of running them "
                         "on metal as on the device under test 'cpu'")
    ap.add_argument("--cpu-from", help="the --json of an earlier run (same jax, same device count): its cpu "
                    "outcomes stand for the files it ran, and only metal runs again")
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
    platforms = {"metal": "metal" if args.metal_alone else "metal,cpu", "cpu": "cpu"}
    earlier_cpu = {}
    if args.cpu_from:
        with open(args.cpu_from, encoding="utf-8") as f:
            earlier = json.load(f)
        if earlier.get("jax") != jax.__version__ or earlier.get("devices") != args.devices:
            sys.exit(f"{args.cpu_from} is of jax {earlier.get('jax')} with {earlier.get('devices')} devices")
        earlier_cpu = {test: tuple(outcome) for test, outcome in earlier["results"]["cpu"].items()}

    print(f"jax {jax.__version__}, {n} devices a side, {len(args.files)} files, logs in {out_dir}")
    print(f"{'file':16} {'cpu passed':>10} {'metal passed':>12} {'both':>6} {'rate':>8} {'tagged':>7} "
          f"{'as cpu':>9} {'rate run':>9} {'time cpu/metal':>15}")
    outcomes = {side: {} for side in sides}
    total_cpu = total_both = total_tagged = total_tagged_passed = 0
    missing = []
    for name in args.files:
        results, seconds, notes = {}, {}, []
        for side, env in sides.items():
            reused = {test: o for test, o in earlier_cpu.items() if test.startswith(name + "::")}
            if side == "cpu" and reused:
                results[side], seconds[side] = reused, 0.0
                outcomes[side].update(reused)
                notes.append(f"cpu from {args.cpu_from}")
                continue
            side_dir = os.path.join(out_dir, side)
            os.makedirs(side_dir, exist_ok=True)
            results[side], _, seconds[side], note = run_file(tests_dir, name, args.timeout, side_dir, platform=platforms[side],
                                                             env_extra=env)
            outcomes[side].update(results[side])
            if note:
                notes.append(f"{side}: {note}")
        cpu_passed, both, tagged, not_passed = tally(results["cpu"], results["metal"])
        tagged_passed = set()
        if tagged and not args.tags_skip:
            # The tests JAX's tags skip on metal, run on metal as on the device under test "cpu".
            side_dir = os.path.join(out_dir, "metal-as-cpu")
            os.makedirs(side_dir, exist_ok=True)
            rerun, _, seconds_tagged, note = run_file(
                tests_dir, name, args.timeout, side_dir, platform=platforms["metal"],
                env_extra=dict(sides["metal"], JAX_CONFORMANCE_TEST_DUT="cpu"), tests=sorted(tagged),
                plugins=("jax_test_dut",))
            seconds["metal"] += seconds_tagged
            if note:
                notes.append(f"metal as cpu: {note}")
            for test in tagged:
                state, why = rerun.get(test, ("missing", "not in the run as cpu"))
                results["metal"][test] = outcomes["metal"][test] = (state, "as cpu: " + why if why else "")
                if state == "passed":
                    tagged_passed.add(test)
                else:
                    not_passed.append(test)
            both |= tagged_passed
        metal_passed = sum(1 for state, _ in results["metal"].values() if state == "passed")
        total_cpu += len(cpu_passed)
        total_both += len(both)
        total_tagged += len(tagged)
        total_tagged_passed += len(tagged_passed)
        missing += sorted(not_passed)
        rate = f"{100 * len(both) / len(cpu_passed):.2f}%" if cpu_passed else "-"
        run = len(cpu_passed) - len(tagged)
        rate_run = f"{100 * (len(both) - len(tagged_passed)) / run:.2f}%" if run else "-"
        print(f"{name:16} {len(cpu_passed):10} {metal_passed:12} {len(both):6} {rate:>8} {len(tagged):7} "
              f"{len(tagged_passed):9} {rate_run:>9} {seconds['cpu']:7.0f}/{seconds['metal']:.0f}s"
              + (f"  {'; '.join(notes)}" if notes else ""), flush=True)
    overall = 100 * total_both / total_cpu if total_cpu else 0.0
    untagged = total_cpu - total_tagged
    overall_run = 100 * (total_both - total_tagged_passed) / untagged if untagged else 0.0
    print(f"{'all':16} {total_cpu:10} {'':12} {total_both:6} {overall:7.2f}% {total_tagged:7} "
          f"{total_tagged_passed:9} {overall_run:8.2f}%")
    if args.list:
        for test in missing:
            print(f"cpu passes, metal does not: {test}: {outcomes['metal'].get(test, ('missing', ''))}")
        if args.tags_skip:
            print(f"(and {total_tagged} tests cpu passes that JAX's device tags skip on metal)")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"jax": jax.__version__, "devices": args.devices, "results": outcomes}, f, indent=1)
    sys.exit(1 if overall < args.require else 0)


if __name__ == "__main__":
    main()

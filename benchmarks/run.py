"""Benchmarks: the same jitted programs on the `metal` plugin and on JAX's CPU backend, in one process.

    python benchmarks/run.py                     # full run, a few minutes; writes results.json and ratios.png
    python benchmarks/run.py --quick             # under a minute, noisier
    python benchmarks/run.py --suite mlp fft     # chosen suites
    python benchmarks/run.py --repeat 30 --seconds 30    # more rounds, longer per suite: tighter spreads
    python benchmarks/compare.py a.json b.json   # do two runs agree?
    python benchmarks/report.py results.json     # docs/benchmarks.md's markdown table from a saved run

Why rounds: a machine's load drifts over seconds, so two platforms timed one after the other see different
machines. Each suite is timed in `--repeat` rounds; a round times a few steps on metal and then on cpu
(the next round cpu first, then metal, so neither platform always runs right after the switch); a round's
figure for a platform is its median step. A platform's step time is the 10th percentile of its rounds
(see tenth_percentile), and a suite's ratio is metal's step time / cpu's (`step_ratio.tenth_percentiles`).
Each round's own ratio, metal's and cpu's figures measured seconds apart, is kept too: their median and
interquartile range show how the two compare round by round. Steps per round are chosen so that a suite
takes about `--seconds`.

Per suite: the compile-time ratio (backend compile only: JAX's tracing and lowering is the same work on
both platforms; three compiles per platform, interleaved, each of a fresh jit wrapper so no cache answers),
the "copies" the plugin made of device-resident buffers during the timed metal steps (0 is the target),
for fori-loop the time per loop iteration, and for bernoulli the peak RSS of a fresh process per platform
(RSS never goes down within a process). A suite a platform cannot run is reported with its error, and
measured as soon as the platform can run it. A suite whose steps are so slow that --repeat rounds would
overrun --seconds runs fewer rounds, but at least MIN_ROUNDS.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import datetime, timezone

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    # The environment is set before jax, the plugin or OpenBLAS load, so the measuring modules are
    # imported only after it; importing this file sets nothing.
    sys.path.insert(0, HERE)  # its sibling modules, also when Python leaves the script's folder off sys.path
    import bench_env
    blas_coretype_lifted = bench_env.settle(sys.argv)

    from tqdm import tqdm

    import suites
    from machine import machine_facts, versions
    from processes import (fix_malloc_thresholds, measure_fresh_rss, measure_in_passes, pool_processes, rss_child,
                           suite_child)
    from report import plot, print_table, stability
    from rounds import COMPILES, MIN_ROUNDS, PLATFORMS, measure_suite
    from suites import SUITES

    p = argparse.ArgumentParser(description="metal vs cpu benchmarks, timed in interleaved rounds")
    p.add_argument("--quick", action="store_true", help="5 rounds of ~0.3 s per suite, a small Bernoulli array")
    p.add_argument("--repeat", type=int, default=None, help="rounds per suite (default 15; 5 with --quick)")
    p.add_argument("--seconds", type=float, default=None,
                   help="timed seconds per suite, both platforms together (default 12; 1.5 with --quick)")
    p.add_argument("--suite", nargs="*", choices=list(SUITES), default=None)
    p.add_argument("--bernoulli-size", type=float, default=None,
                   help=f"elements in the bernoulli suite (default {suites.BERNOULLI_SIZE['full']:.0e}; "
                        f"{suites.BERNOULLI_SIZE['quick']:.0e} with --quick; JAX's own test draws 1e8)")
    p.add_argument("--out", default="results.json")
    p.add_argument("--plot", default="ratios.png")
    p.add_argument("--same-process", action="store_true",
                   help="measure every suite in this process (default: each suite in a fresh one)")
    p.add_argument("--processes", type=int, default=3,
                   help="fresh processes per suite, its rounds spread over them and pooled (default 3)")
    p.add_argument("--keep-blas-coretype", action="store_true",
                   help="keep an OPENBLAS_CORETYPE set in the environment (default: OpenBLAS picks the kernel "
                        "for this CPU, as XLA:CPU does; the lifted value is recorded in results.json)")
    p.add_argument("--isa", choices=list(bench_env.ISA_LEVELS), default=None,
                   help="hold both sides to one x86-64 level: the host executor's loops and XLA:CPU's generated "
                        "code; matrix products stay at this CPU's best on both sides (default: everything "
                        "at this CPU's best)")
    p.add_argument("--default-malloc", action="store_true",
                   help="leave glibc's malloc thresholds adaptive (default: fixed while timing, see docs/benchmarks.md)")
    p.add_argument("--rss-child", nargs=2, metavar=("SUITE", "PLATFORM"), help=argparse.SUPPRESS)
    p.add_argument("--suite-child", metavar="SUITE", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.bernoulli_size:
        suites.BERNOULLI_SIZE.update(full=int(args.bernoulli_size), quick=int(args.bernoulli_size))
    if args.rss_child:
        return rss_child(*args.rss_child, args.quick)
    args.repeat = args.repeat or (5 if args.quick else 15)
    args.seconds = args.seconds or (1.5 if args.quick else 12.0)
    # Timing only: the peak-RSS processes keep glibc's defaults, the memory a user's process would hold.
    malloc = None if args.default_malloc else fix_malloc_thresholds()
    if args.suite_child:
        return suite_child(args.suite_child, args)
    if args.repeat < 1 or args.seconds <= 0 or args.processes < 1:
        p.error("--repeat, --seconds and --processes must be positive")
    names = args.suite or list(SUITES)
    facts = machine_facts(blas_coretype_lifted)
    if facts["load_avg_start"][0] > 0.5 * (facts.get("cores_usable") or facts["cores"] or 1):
        print(f"warning: load average {facts['load_avg_start'][0]:.1f} on {facts['cores']} cores: the machine "
              "is busy, so the ratios' spreads will be wide", file=sys.stderr)
    results = {"versions": versions(), "machine": facts, "started": datetime.now(timezone.utc).isoformat(),
               "settings": {"quick": args.quick, "repeat": args.repeat, "seconds": args.seconds, "compiles": COMPILES,
                            "min_rounds": MIN_ROUNDS,
                            "bernoulli_size": suites.BERNOULLI_SIZE["quick" if args.quick else "full"],
                            "platform_order": "alternating per round (metal, cpu / cpu, metal)"},
               "suites": {}}
    results["settings"]["process_per_suite"] = not args.same_process
    results["settings"]["processes_per_suite"] = 1 if args.same_process else min(args.processes, args.repeat)
    results["settings"]["malloc_thresholds"] = malloc
    results["settings"]["isa"] = bench_env.isa_settings(args.isa)
    results["settings"]["metal_executor"] = os.environ.get("JAX_METAL_EXECUTOR")
    t_start = time.perf_counter()
    with tqdm(total=len(names) * args.repeat, desc="rounds", file=sys.stderr) as progress:
        parts = {} if args.same_process else measure_in_passes(names, args, progress)
        for name in names:
            progress.set_postfix_str(name)
            r = {}
            if SUITES[name].fresh_rss:
                r["fresh_rss"] = measure_fresh_rss(name, args.quick, 1 if args.same_process else args.processes)
            if args.same_process:
                r.update(measure_suite(name, args, progress))
                r["load_avg"] = os.getloadavg()
            else:
                r.update(pool_processes(name, parts[name]))
                r["load_avg"] = [p.get("load_avg") for p in parts[name]]
            if "step_ratio" in r:
                r["stability"] = stability(r)
            results["suites"][name] = r
    tiny = results["suites"].get("tiny-dispatch", {}).get("platforms", {})
    results["tiny_call_us"] = {plat: tiny[plat]["step_s"] * 1e6 for plat in PLATFORMS if "step_s" in tiny.get(plat, {})}
    facts["load_avg_end"] = os.getloadavg()
    results["wall_s"] = time.perf_counter() - t_start
    with open(args.out, "w") as f:
        json.dump(results, f, indent=2)
    print_table(results)
    plot(results, args.plot)
    print(f"wrote {args.out} and {args.plot} ({results['wall_s']:.0f} s; load average "
          f"{facts['load_avg_start'][0]:.1f} at the start, {facts['load_avg_end'][0]:.1f} at the end)")


if __name__ == "__main__":
    main()

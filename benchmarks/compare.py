"""Do two benchmark runs agree? Prints each ratio of both runs and how far apart they are.

    python benchmarks/compare.py run1.json run2.json [--tolerance 0.10]

Two ratios a and b differ by max(a, b) / min(a, b) - 1. Exits 1 when a step-time or peak-RSS ratio
present in both runs differs by more than the tolerance (default 10%), so it can gate the table in
docs/benchmarks.md on reproducibility. Compile ratios are printed too but gate only with --all: they come from three compiles
per platform, and the plugin's compiles take milliseconds, where scheduler jitter is a large share.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

# Its sibling module, also when Python leaves the script's folder off sys.path (PYTHONSAFEPATH).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report import stability, step_figure  # noqa: E402


def ratios(results):
    """{(suite, kind): ratio} for every ratio a run measured."""
    out = {}
    for name, r in results["suites"].items():
        if "step_ratio" in r:
            out[(name, "step")] = step_figure(r["step_ratio"])
        if "compile_ratio" in r:
            out[(name, "compile")] = r["compile_ratio"]["median"]
        if "ratio" in r.get("fresh_rss", {}):
            out[(name, "peak RSS")] = r["fresh_rss"]["ratio"]
    return out


def flagged(suite):
    """Whether the run's own report called this suite's step ratio unstable."""
    st = suite.get("stability") or stability(suite)
    return bool(st and st["unstable"])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--tolerance", type=float, default=0.10)
    p.add_argument("--all", action="store_true", help="compile ratios gate too")
    args = p.parse_args()
    runs = []
    for path in (args.a, args.b):
        with open(path) as f:
            runs.append(json.load(f))
    for path, run in zip((args.a, args.b), runs):
        m = run.get("machine", {})
        print(f"{path}: {m.get('cores')} cores, load {m.get('load_avg_start')} -> {m.get('load_avg_end')}, "
              f"settings {run.get('settings')}")
    if runs[0].get("settings") != runs[1].get("settings"):
        print("note: the runs' settings differ, so their ratios need not agree")
    ra, rb = ratios(runs[0]), ratios(runs[1])
    worst = 0.0
    print(f"{'suite':<15}{'ratio':<9}{'run a':>8}{'run b':>8}{'differ':>9}")
    for key in ra:
        if key not in rb:
            continue
        a, b = ra[key], rb[key]
        differ = max(a, b) / min(a, b) - 1 if min(a, b) > 0 else float("inf")
        gated = args.all or key[1] != "compile"
        if gated:
            worst = max(worst, differ)
        flag = ("  <-- over tolerance" if gated else "  (not gated)") if differ > args.tolerance else ""
        if key[1] == "step" and differ > args.tolerance:
            said = [tag for tag, run in zip("ab", runs) if flagged(run["suites"][key[0]])]
            flag += f" (flagged unstable by run {' and '.join(said)})" if said else " (neither run flagged it)"
        print(f"{key[0]:<15}{key[1]:<9}{a:>8.3f}{b:>8.3f}{differ:>8.1%}{flag}")
    print(f"largest gated difference {worst:.1%} (tolerance {args.tolerance:.0%})")
    return 1 if worst > args.tolerance else 0


if __name__ == "__main__":
    sys.exit(main())

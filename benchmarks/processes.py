"""Suites measured in fresh processes (run.py started again as a child), their rounds pooled; and the
C allocator's state a timing process fixes."""

from __future__ import annotations

import ctypes
import json
import os
import resource
import statistics
import subprocess
import sys

import jax

import suites
from rounds import PLATFORMS, SUITE_ERRORS, Program, error_text, measure_suite, spread, step_ratio, step_times
from suites import SUITES

# The script the child processes run.
RUN_PY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "run.py")


# ---- peak RSS in a fresh process per platform


def max_rss_bytes():
    """This process's peak RSS. On Linux getrusage's ru_maxrss survives exec, so a child started by a big
    parent would report the parent's size: VmHWM belongs to the new process image alone."""
    try:
        with open("/proc/self/status") as f:
            return next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmHWM:"))
    except (OSError, StopIteration):
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return rss if sys.platform == "darwin" else rss * 1024  # macOS reports bytes, Linux kilobytes


def rss_child(name, plat, quick):
    """Runs in a fresh process: peak RSS before and after compiling and running the suite on one platform."""
    try:
        program = Program(name, plat, quick)
        jax.block_until_ready((program.state0, program.data))
        baseline = max_rss_bytes()
        program.compile()
        program.run(2)  # two steps: the first step's output is alive while the second runs
        out = {"baseline_rss": baseline, "peak_rss": max_rss_bytes()}
    except SUITE_ERRORS as e:
        out = {"error": error_text(e)}
    print(json.dumps(out))


def measure_fresh_rss(name, quick, processes):
    """Peak RSS in `processes` fresh processes per platform (interleaved); a platform's figure is the
    process with the median growth, since one process's figure moves with where the allocator's
    thresholds stood when the program ran."""
    runs = {plat: [] for plat in PLATFORMS}
    for _ in range(processes):
        for plat in PLATFORMS:
            cmd = [sys.executable, RUN_PY, "--rss-child", name, plat,
                   "--bernoulli-size", str(suites.BERNOULLI_SIZE["quick" if quick else "full"])]
            cmd += ["--quick"] if quick else []
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
                lines = proc.stdout.strip().splitlines()
                runs[plat].append(json.loads(lines[-1]) if proc.returncode == 0 and lines else {
                    "error": f"exit {proc.returncode}: {(proc.stderr.strip().splitlines() or [''])[-1][:300]}"})
            except subprocess.TimeoutExpired:
                runs[plat].append({"error": "timed out"})
    result = {}
    for plat, outs in runs.items():
        ok = sorted((o for o in outs if "peak_rss" in o), key=lambda o: o["peak_rss"] - o["baseline_rss"])
        result[plat] = dict(ok[(len(ok) - 1) // 2], processes=len(ok)) if ok else next(o for o in outs if "error" in o)
        result[plat]["growth_per_process"] = [o["peak_rss"] - o["baseline_rss"] for o in ok]
    m, c = result["metal"], result["cpu"]
    if "peak_rss" in m and "peak_rss" in c:
        # the program's own memory: peak minus the process's footprint before compiling (JAX, plugin, inputs)
        result["ratio"] = (m["peak_rss"] - m["baseline_rss"]) / max(1, c["peak_rss"] - c["baseline_rss"])
    return result


# ---- the C allocator's state


# glibc's malloc adapts as a process runs: a freed mmapped block raises the threshold above which
# allocations are mmapped (up to 32 MB on 64-bit), and the trim threshold with it (twice the mmap
# threshold), so whether a step's buffers come from the heap or from fresh pages (a page fault per
# 4 KB) depends on what the process allocated and freed before, and on which thread's arena did. XLA:CPU
# allocates its buffers with malloc: the same cpu step (host-segment) measured from 0 to 47,000 page
# faults per round of 300 steps, changing between processes and within one, and its rounds took 0.7 to
# 1.5 ms per step; with the thresholds fixed, no faults after warm-up and 0.75 to 1.05 ms, on the same
# busy machine. Fixed at the values
# glibc's own adjustment moves towards, every suite process measures the state a long-running process
# settles in. The plugin's buffers come from its own pool, so this changes the cpu side only, and
# towards its faster state.
MALLOC_THRESHOLDS = {"mmap_threshold": 32 << 20, "trim_threshold": 64 << 20}


def fix_malloc_thresholds():
    """Fixes glibc's mmap and trim thresholds (mallopt, which also stops their adjustment); returns the
    values, or None where the C library is not glibc."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return None
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
    ok = mallopt(M_MMAP_THRESHOLD, MALLOC_THRESHOLDS["mmap_threshold"]) == 1
    ok = ok and mallopt(M_TRIM_THRESHOLD, MALLOC_THRESHOLDS["trim_threshold"]) == 1
    return dict(MALLOC_THRESHOLDS) if ok else None


# ---- each suite in a fresh process


def suite_child(name, args):
    """Runs in a fresh process: one suite's results as JSON on the last line of stdout."""
    class Quiet:
        total = 0

        def update(self, n):
            pass

        def refresh(self):
            pass

    print(json.dumps(measure_suite(name, args, Quiet())))


def measure_in_fresh_process(name, args, repeat=None, seconds=None):
    """One suite measured in a process of its own: what earlier suites leave behind (allocator caches,
    resident pages, thread pools that keep spinning, the BLAS state) cannot change its figures, and a
    suite measures the same alone as in a full run."""
    cmd = [sys.executable, RUN_PY, "--suite-child", name, "--repeat", str(repeat or args.repeat),
           "--seconds", str(seconds or args.seconds),
           "--bernoulli-size", str(suites.BERNOULLI_SIZE["quick" if args.quick else "full"])]
    cmd += ["--quick"] if args.quick else []
    cmd += ["--default-malloc"] if args.default_malloc else []
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    except subprocess.TimeoutExpired:
        return {"platforms": {}, "error": "timed out"}
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or [""])[-1][:300]
        return {"platforms": {}, "error": f"exit {proc.returncode}: {tail}"}
    return json.loads(lines[-1])


ROUND_KEYS = ("round_step_s", "round_cpu_s", "round_voluntary_switches", "round_involuntary_switches",
              "round_page_faults", "compile_times_s")


def process_shares(args):
    """Rounds per fresh process: `--repeat` rounds over `--processes` processes. A process has state that
    stays with it for its whole life and that no round-to-round interleaving cancels: where its buffers
    landed relative to each other (cache-set and 4K aliasing), which pages the allocator's thresholds
    gave it, where the scheduler put its threads. Measured in one process, a suite's ratio moved by up
    to 12% between two full runs whose rounds each agreed within a few percent (cnn's cpu step at 4.3
    and at 5.3 ms); pooled over processes, such a state is one sample of several, not the whole figure."""
    n = max(1, min(args.processes, args.repeat))
    return [args.repeat // n + (1 if i < args.repeat % n else 0) for i in range(n)]


def measure_in_passes(names, args, progress):
    """{suite: [one result per process]}: pass k runs every suite's k-th process, so a suite's processes
    lie minutes apart. The host of a shared VM slows it for seconds at a time, on both platforms but not
    by the same factor (cnn's steps 40-55% slower for one run's 12 seconds of cnn); back to back, a
    suite's processes all fall inside such a stretch, spread over the run at most one does, and the
    10th percentile of the pooled rounds leaves it out."""
    parts = {name: [] for name in names}
    for k in process_shares(args):
        for name in names:
            progress.set_postfix_str(name)
            parts[name].append(measure_in_fresh_process(name, args, repeat=k, seconds=args.seconds * k / args.repeat))
            parts[name][-1]["load_avg"] = os.getloadavg()
            progress.update(k)
    return parts


def pool_processes(name, parts):
    """One suite's results from its processes' (measure_in_passes): every round pooled."""
    good = [p for p in parts if "step_ratio" in p or p.get("platforms")]
    pooled = dict(good[0]) if good else dict(parts[0])
    pooled["processes"] = len(parts)
    errors = [p["error"] for p in parts if "error" in p]
    if errors:
        pooled["error"] = errors[0]
    if not good:
        return pooled
    platforms = {}
    for plat, first in good[0]["platforms"].items():
        runs = [p["platforms"][plat] for p in good if "step_s" in p["platforms"].get(plat, {})]
        if "step_s" not in first or len(runs) != len(good):
            platforms[plat] = next((p["platforms"][plat] for p in good if "error" in p["platforms"].get(plat, {})),
                                   first)
            continue
        merged = dict(first)
        for key in ROUND_KEYS:
            merged[key] = [x for r in runs for x in r[key]]
        merged.update(step_times(merged["round_step_s"]))
        merged["compile_s"] = statistics.median(merged["compile_times_s"])
        merged["rounds"] = len(merged["round_step_s"])
        merged["steps_per_round_per_process"] = [r["steps_per_round"] for r in runs]
        merged["peak_bytes"] = max((r["peak_bytes"] for r in runs if r.get("peak_bytes") is not None), default=None)
        if "copies" in first:
            merged["copies"] = None if any(r.get("copies") is None for r in runs) else sum(r["copies"] for r in runs)
        if "iteration_s" in first:
            merged["iteration_s"] = merged["step_s"] / SUITES[name].iterations
        platforms[plat] = merged
    pooled["platforms"] = platforms
    if all("step_ratio" in p for p in good):
        ratios = [x for p in good for x in p["step_ratio"]["rounds"]]
        pooled["step_ratio"] = step_ratio(ratios, platforms,
                                          process_medians=[p["step_ratio"]["median"] for p in good])
        m, c = platforms["metal"]["compile_times_s"], platforms["cpu"]["compile_times_s"]
        pooled["compile_ratio"] = spread([a / b for a, b in zip(m, c)])
    return pooled

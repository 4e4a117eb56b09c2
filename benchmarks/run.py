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
import contextlib
import ctypes
import gc
import json
import math
import os
import platform as platform_module
import resource
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone

# Its sibling modules, also when Python leaves the script's folder off sys.path (PYTHONSAFEPATH).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_env  # noqa: E402  (sets the environment before jax, the plugin or OpenBLAS load)

BLAS_CORETYPE_LIFTED = bench_env.settle(sys.argv)
ISA_LEVELS = bench_env.ISA_LEVELS

import jax  # noqa: E402
import numpy as np  # noqa: E402
from tqdm import tqdm  # noqa: E402

from report import plot, print_table, stability  # noqa: E402
import suites  # noqa: E402
from suites import SUITES  # noqa: E402

PLATFORMS = ("metal", "cpu")
COMPILES = 3
WARM_SEGMENT_BELOW_S = 0.05   # steps shorter than this get one untimed step after each platform switch
MAX_STEPS_PER_ROUND = 100_000
MIN_ROUNDS = 5


def plugin_copy_count():
    """Host<->device copies the plugin has made, when the plugin exposes the counter."""
    try:
        import jax_metal_plugin
        lib = ctypes.CDLL(jax_metal_plugin.library_path())
        fn = lib.jmp_pjrt_copy_count
        fn.restype = ctypes.c_int64
        return int(fn())
    except (AttributeError, OSError, ImportError):
        return None


# What JAX raises when a backend refuses a program: its runtime errors (JaxRuntimeError and
# NotImplementedError are RuntimeErrors) and the type and value errors of an unsupported dtype or shape.
# Anything else is a bug in the benchmark and surfaces.
SUITE_ERRORS = (RuntimeError, TypeError, ValueError)


def plugin_stats():
    """The plugin's work counters (jax_metal_plugin.stats()), or None when it lacks them."""
    try:
        import jax_metal_plugin
        return jax_metal_plugin.stats() or None
    except (ImportError, AttributeError):
        return None


def peak_memory(device):
    try:
        stats = device.memory_stats() or {}
    except RuntimeError:  # a backend may not implement it
        return None
    return stats.get("peak_bytes_in_use", stats.get("bytes_in_use"))


def error_text(e):
    lines = str(e).strip().splitlines() or [""]
    return f"{type(e).__name__}: {lines[0][:300]}"


def spread(values):
    """Median, quartiles, min and max of a list of numbers."""
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive") if len(values) > 1 else [values[0]] * 3
    return {"median": statistics.median(values), "q1": q1, "q3": q3, "min": min(values), "max": max(values)}


def tenth_percentile(values):
    """A platform's step time from its rounds. What disturbs a round on a shared machine only ever adds
    time, and on this 2-core VM XLA:CPU's parallel loops run in one of two regimes lasting seconds (both
    cores, or in effect one: cumsum's step 0.75 or 1.4 ms), so the median lands in whichever regime held
    most of the rounds and two runs disagreed by up to 44%. The low end of a platform's rounds is what
    repeats; the 10th percentile rather than the minimum, so that no single round decides it."""
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=10, method="inclusive")[0]


def step_times(round_step_s):
    """A platform's step-time figures from its rounds, in one process or pooled over several."""
    return {"step_s": tenth_percentile(round_step_s), "step_s_median": statistics.median(round_step_s)}


def step_ratio(round_ratios, platforms, **more):
    """The suite's step ratio (metal's step time over cpu's) and the spread of the rounds' own ratios."""
    return dict(spread(round_ratios), rounds=round_ratios, **more,
                tenth_percentiles=platforms["metal"]["step_s"] / platforms["cpu"]["step_s"])


class Program:
    """One suite compiled for one platform, with the state every timed segment starts from."""

    def __init__(self, name, platform, quick):
        self.suite = SUITES[name]
        with self.flags():
            step_fn, state, data = self.suite.build(quick)
            self.step_fn = step_fn
            self.device = jax.devices(platform)[0]
            self.state0, self.data = jax.device_put((state, data), self.device)
        self.compiled = None
        self.compile_times = []

    def flags(self):
        """The JAX flags the suite runs under (jax_enable_x64 for float64 suites), as a context."""
        return jax.enable_x64(True) if self.suite.x64 else contextlib.nullcontext()

    def compile(self):
        with self.flags():
            lowered = jax.jit(lambda *args: self.step_fn(*args)).lower(self.state0, *self.data)
            t0 = time.perf_counter()
            self.compiled = lowered.compile()
            self.compile_times.append(time.perf_counter() - t0)

    def run(self, steps):
        """`steps` steps from the initial state; the last state and output, blocked on."""
        with self.flags():
            state, out = self.state0, None
            for _ in range(steps):
                state, out = self.compiled(state, *self.data)
            jax.block_until_ready((state, out))
            return state, out

    def count_work(self, steps):
        """The plugin's work per step over `steps` steps dispatched without a sync (one read at the end):
        device graph runs, syncs inside the steps, fresh backing allocations, copies. The same pattern
        runs once untimed first: the warm-up a training loop has (its first steps fill the caches)."""
        if plugin_stats() is None:
            return None
        with self.flags():
            for counted in (False, True):
                before = plugin_stats() if counted else None
                state = self.state0
                for _ in range(steps):
                    state, out = self.compiled(state, *self.data)
                jax.block_until_ready((state, out))
        after = plugin_stats()
        return {"graph_runs_per_step": (after["graph_runs"] - before["graph_runs"]) / steps,
                "syncs_per_step": (after["syncs"] - before["syncs"]) / steps,
                "fresh_allocs_after_warmup": after["fresh_allocs"] - before["fresh_allocs"],
                "copies": after["copies"] - before["copies"], "counted_steps": steps}

    def estimate_step(self, min_seconds=0.1):
        """Seconds per step, from as many steps as fit in min_seconds (at least 2)."""
        n, elapsed = 1, 0.0
        while True:
            t0 = time.perf_counter()
            self.run(n)
            elapsed = time.perf_counter() - t0
            if elapsed >= min_seconds or n >= MAX_STEPS_PER_ROUND:
                return elapsed / n
            n = max(2 * n, min(MAX_STEPS_PER_ROUND, int(n * min_seconds / max(elapsed, 1e-6)) + 1))

    def segment(self, steps, warm):
        """Median seconds per step over `steps` steps (one timed batch when the suite is batched), and
        what the process did meanwhile, per step: CPU seconds (all threads), context switches, page faults."""
        with self.flags():
            before = resource.getrusage(resource.RUSAGE_SELF)
            step_s = self._segment(steps, warm)
            after = resource.getrusage(resource.RUSAGE_SELF)
        n = steps + (1 if warm else 0)
        cpu = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) / n
        return step_s, {"cpu_s": cpu, "voluntary_switches": (after.ru_nvcsw - before.ru_nvcsw) / n,
                        "involuntary_switches": (after.ru_nivcsw - before.ru_nivcsw) / n,
                        "page_faults": (after.ru_minflt - before.ru_minflt) / n}

    def _segment(self, steps, warm):
        gc.collect()
        gc.disable()
        try:
            state = self.state0
            if warm:
                state, out = self.compiled(state, *self.data)
                jax.block_until_ready((state, out))
            state = self.state0
            if self.suite.batched:
                t0 = time.perf_counter()
                for _ in range(steps):
                    state, out = self.compiled(state, *self.data)
                jax.block_until_ready((state, out))
                return (time.perf_counter() - t0) / steps
            times = []
            for _ in range(steps):
                t0 = time.perf_counter()
                state, out = self.compiled(state, *self.data)
                jax.block_until_ready((state, out))
                times.append(time.perf_counter() - t0)
            return statistics.median(times)
        finally:
            gc.enable()


def measure_suite(name, args, progress):
    """Compile on both platforms (interleaved), then time interleaved rounds; returns the suite's results."""
    with jax.enable_x64(True) if SUITES[name].x64 else contextlib.nullcontext():
        return _measure_suite(name, args, progress)


def _measure_suite(name, args, progress):
    result = {"platforms": {}}
    programs = {}
    for plat in PLATFORMS:
        try:
            programs[plat] = Program(name, plat, args.quick)
        except SUITE_ERRORS as e:  # an unsupported op is a result, not a crash
            result["platforms"][plat] = {"error": error_text(e)}
    for _ in range(COMPILES):
        for plat in list(programs):
            try:
                programs[plat].compile()
            except SUITE_ERRORS as e:
                result["platforms"][plat] = {"error": error_text(e)}
                del programs[plat]
    estimates = {}
    for plat in list(programs):
        try:
            programs[plat].run(1)  # warm-up: first executions allocate and fill caches
            estimates[plat] = programs[plat].estimate_step()
        except SUITE_ERRORS as e:  # e.g. an op that fails only when executed
            result["platforms"][plat] = {"error": error_text(e)}
            del programs[plat]
    if not programs:
        progress.update(args.repeat)
        return result
    per_step = sum(estimates.values())
    n_rounds = max(min(args.repeat, MIN_ROUNDS), min(args.repeat, int(args.seconds / per_step)))
    steps = max(1, min(MAX_STEPS_PER_ROUND, round(args.seconds / n_rounds / per_step)))
    progress.total += n_rounds - args.repeat
    progress.refresh()
    warm = {plat: est < WARM_SEGMENT_BELOW_S for plat, est in estimates.items()}
    rounds = {plat: [] for plat in programs}
    activity = {plat: [] for plat in programs}
    copies = 0 if "metal" in programs and plugin_copy_count() is not None else None
    for r in range(n_rounds):
        order = list(programs) if r % 2 == 0 else list(reversed(programs))
        for plat in order:
            if plat not in programs:
                continue
            before = plugin_copy_count() if plat == "metal" and copies is not None else None
            try:
                step_s, did = programs[plat].segment(steps, warm[plat])
            except SUITE_ERRORS as e:  # a failure in a later step is a result too
                result["platforms"][plat] = {"error": error_text(e)}
                del programs[plat], rounds[plat], activity[plat]
                continue
            rounds[plat].append(step_s)
            activity[plat].append(did)
            if before is not None:
                copies += plugin_copy_count() - before
        progress.update(1)
    for plat, program in programs.items():
        times = rounds[plat]
        result["platforms"][plat] = {
            "compile_s": statistics.median(program.compile_times), "compile_times_s": program.compile_times,
            **step_times(times), "round_step_s": times, "rounds": n_rounds, "steps_per_round": steps,
            "peak_bytes": peak_memory(program.device)}
        # Per round and step: the process's CPU seconds (every thread), context switches, minor page
        # faults. A round slower than the others with as much CPU time waited (for a thread, the
        # scheduler, the machine); voluntary switches per step count thread handoffs; page faults,
        # fresh memory touched.
        for key in ("cpu_s", "voluntary_switches", "involuntary_switches", "page_faults"):
            result["platforms"][plat]["round_" + key] = [a[key] for a in activity[plat]]
    if "metal" in programs:
        result["platforms"]["metal"]["copies"] = copies
        # After the timed rounds, so everything is warm: what one step costs in device work.
        result["platforms"]["metal"]["work"] = programs["metal"].count_work(
            max(2, min(20, int(1.0 / max(estimates["metal"], 1e-6)))))
    if "cpu" in programs:
        # XLA:CPU exposes no such counters to JAX: what cannot be measured is null.
        result["platforms"]["cpu"]["work"] = {"graph_runs_per_step": None, "syncs_per_step": None,
                                             "fresh_allocs_after_warmup": None, "copies": None}
    if len(programs) == len(PLATFORMS):
        m, c = programs["metal"], programs["cpu"]
        round_ratios = [a / b for a, b in zip(rounds["metal"], rounds["cpu"])]
        result["step_ratio"] = step_ratio(round_ratios, result["platforms"])
        result["compile_ratio"] = spread([a / b for a, b in zip(m.compile_times, c.compile_times)])
    if SUITES[name].callbacks:
        for plat in programs:
            result["platforms"][plat]["callbacks_per_step"] = SUITES[name].callbacks
    if SUITES[name].iterations:
        for plat in programs:
            result["platforms"][plat]["iteration_s"] = result["platforms"][plat]["step_s"] / SUITES[name].iterations
    del programs
    gc.collect()
    return result


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
            cmd = [sys.executable, os.path.abspath(__file__), "--rss-child", name, plat,
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
    cmd = [sys.executable, os.path.abspath(__file__), "--suite-child", name, "--repeat", str(repeat or args.repeat),
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


# ---- the machine


def machine_facts():
    facts = {"platform": platform_module.platform(), "machine": platform_module.machine(),
             "python": platform_module.python_version(), "cores": os.cpu_count(), "load_avg_start": os.getloadavg()}
    if hasattr(os, "sched_getaffinity"):
        facts["cores_usable"] = len(os.sched_getaffinity(0))
    try:
        facts["memory_bytes"] = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        pass
    try:
        if sys.platform == "darwin":
            facts["cpu"] = subprocess.run(["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True,
                                          text=True).stdout.strip()
        else:
            with open("/proc/cpuinfo") as f:
                facts["cpu"] = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), None)
    except OSError:
        pass
    facts["vector_isa"] = vector_isa()
    facts["blas"] = blas_facts()
    facts["env"] = {k: v for k, v in os.environ.items() if k.startswith(("JMP_", "JAX_", "XLA_", "OPENBLAS_", "OMP_"))}
    if BLAS_CORETYPE_LIFTED is not None:
        facts["env_lifted"] = {"OPENBLAS_CORETYPE": BLAS_CORETYPE_LIFTED}
    return facts


def vector_isa():
    """The widest vector extensions the CPU has (what BLAS kernels and XLA:CPU's code pick from)."""
    if sys.platform == "darwin":
        feats = []
        for name in ("hw.optional.neon", "hw.optional.arm.FEAT_BF16", "hw.optional.arm.FEAT_I8MM",
                     "hw.optional.arm.FEAT_SME"):
            out = subprocess.run(["sysctl", "-n", name], capture_output=True, text=True).stdout.strip()
            if out == "1":
                feats.append(name.rsplit(".", 1)[-1])
        return feats
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((l.split(":", 1)[1].split() for l in f if l.startswith(("flags", "Features"))), [])
    except OSError:
        return None
    wanted = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_bf16", "avx512_vnni",
              "amx_tile", "asimd", "sve")
    return [f for f in wanted if f in flags]


def blas_facts():
    """The BLAS libraries loaded in this process (the plugin's host matmuls, numpy's), their kernel
    (OpenBLAS's core type) and threads, from threadpoolctl when it is installed."""
    try:
        import jax_metal_plugin
        ctypes.CDLL(jax_metal_plugin.library_path())  # load the plugin's BLAS before looking
        from threadpoolctl import threadpool_info
    except (ImportError, OSError):
        return None
    keep = ("internal_api", "prefix", "version", "architecture", "threading_layer", "num_threads", "filepath")
    return [{k: info.get(k) for k in keep} for info in threadpool_info()]


def versions():
    out = {"jax": jax.__version__}
    try:
        import jaxlib
        import jax_metal_plugin
        out["jaxlib"] = jaxlib.__version__
        out["jax_metal_plugin"] = jax_metal_plugin.__version__
    except ImportError:
        pass
    try:
        here = os.path.dirname(os.path.abspath(__file__))
        out["git_commit"] = subprocess.run(["git", "-C", here, "rev-parse", "HEAD"], capture_output=True,
                                           text=True).stdout.strip() or None
    except OSError:
        pass
    return out


def main():
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
    p.add_argument("--isa", choices=list(ISA_LEVELS), default=None,
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
    facts = machine_facts()
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

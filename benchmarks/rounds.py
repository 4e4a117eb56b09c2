"""One suite measured in this process: compiled on both platforms, then timed in interleaved rounds
(run.py's docstring says how); and the statistics a platform's rounds are summed up with."""

from __future__ import annotations

import contextlib
import ctypes
import gc
import resource
import statistics
import time

import jax

from suites import SUITES

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

#!/usr/bin/env python3
"""JAX's own test files as the measure of the plugin's breadth: every file of a JAX tree's tests/, run on
platform "metal", each failure checked against JAX's cpu backend on the same test.

    python scripts/jax_conformance.py --jax-tree JAX_SRC [FILE ...] [--core] [-j N] [--timeout S]
                                      [--json OUT]

JAX_SRC is a JAX source tree (e.g. jax-ml/jax at tag jax-vX.Y.Z) whose version matches the installed jax
(--any-version runs another). By default every tests/*_test.py of it runs (top level only); FILEs name
some of them (lax_test or lax_test.py), and --core runs the 19 files of CORE, the set the numbers in
docs/conformance.md were taken on. Each file runs in its own pytest process (N files at a time with -j N,
largest first) with JAX_PLATFORMS=metal, so that no test quietly runs on CPU, from a temporary copy of
tests/ (the tree's jax sources never shadow the installed package; nothing of JAX's is copied into this
repository), under --timeout seconds. Logs and progress files stay in the printed folder.

Per test, metal's outcome is one of: passed; skipped (JAX's own device tagging, such as
run_on_devices("cpu"), which skips on every accelerator, and skips that happen on JAX's CPU backend too:
NOT_OURS below; every other skip counts as a failure); failed; crashed (the process died by a signal in
it); timeout (in progress at the time limit). Then:
  * a failure whose text says the test asked for the cpu backend (CPU_BACKEND), which JAX_PLATFORMS=metal
    alone lacks, runs again with JAX_PLATFORMS=metal,cpu, and that outcome counts;
  * every failure left runs again on JAX's cpu backend (JAX_PLATFORMS=cpu, the same file, only those
    tests; with --cpu-skips metal's skips too, to count what cpu passes that metal skips). A failure that
    fails or skips on cpu too is "shared", not the plugin's; one cpu passes, or does not have, is
    "metal-only". Crashed and timed-out tests are not excused by cpu: they count as metal-only failures.
  * after a crash the rest of the file runs again without the finished tests and the one it died in
    (scripts/_conformance_run.py), at most --max-crashes times, all within the file's --timeout.
Per file and in total it prints passed, metal-only, shared, skipped, crashed (timeouts included), the
metal-only failure rate F / (passed + F) with F the metal-only failures (crashes and timeouts included),
the same F as a fraction of cpu's passes (metal's passes, crashes and timeouts taken as cpu's, plus what
cpu passes of the tests it ran again), peak RSS of metal's processes, time, and the file's status
(CRASHED in a test, TIMEOUT in a test, a collection error). --json OUT
holds all of it: per file, every test's category and outcome on each platform, the crashes with the
test each died in, and the versions of jax, jaxlib and Python and the Metal executor.

JAX's in-memory caches of compiled programs are emptied after any test that leaves the process above
--rss-limit GiB (scripts/jax_conformance_caches.py), so that peak RSS is that limit plus the largest
test's working set, not the sum of every program JAX compiled and kept; --keep-caches runs the files as
plain pytest does. Known failures live in scripts/jax_conformance_known.txt, one test id a line with its
root cause. An entry that holds only from (or only before) a JAX release carries a marker after its test
id, `[>=0.11.0]` or `[<0.11.0]`, and is ignored for other installed versions; one that holds only with
Metal segments on one side (JAX_METAL_EXECUTOR: `metal`, `standin`, `placed`, `host`) carries that
side, `[placed]`. Exit status 1 when a file crashed or timed out, a metal-only failure is not listed, or
a listed test passes (or skips as JAX's own): so the list only ever shrinks on purpose. Shared failures
need no entry.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _conformance_run import COLLECTION, LIVE, run_file_raw  # noqa: E402

KNOWN = os.path.join(HERE, "jax_conformance_known.txt")
CORE = ["lax_test", "lax_numpy_test", "lax_control_flow_test", "fft_test", "random_lax_test", "linalg_test",
        "lax_autodiff_test", "lax_vmap_test", "lax_vmap_op_test", "nn_test", "lax_scipy_test",
        "lax_numpy_operators_test", "lax_numpy_einsum_test", "lax_numpy_vectorize_test", "ann_test",
        "polynomial_test", "random_test", "batching_test", "api_test"]
FILES = CORE  # the name the 19 files had before every file ran by default

# Skips that are not the plugin's, since they happen on CPU too: JAX's own device tagging (on every
# accelerator), as a decorator or inline for GPU-only (CUDA) tests; configuration flags (x64 off, an
# upgrade flag off, threefry partitionable on, simplified jaxpr constants off); the environment (the
# installed scipy's version, the Python version, a docs/ folder the extracted tree lacks); and skips a
# test makes unconditionally on every platform (a bare @unittest.skip, TODO(owner) skips,
# lax_vmap_op_test's float64 and rank > 2 cases, linalg_test's non-square full-matrices SVD JVP).
# Skips for want of devices (a test that needs two or more) happen on JAX's CPU backend in its default
# configuration too, which has one device, as metal has (a file that asks JAX for more CPU devices,
# jtu.request_cpu_devices, gets them on cpu only: scripts/jax_multi_device.py measures several metal
# devices). Every other skip counts as a failure: JAX's skips of every platform but CPU and GPU, or of
# every PJRT C API plugin, among them.
NOT_OURS = re.compile(r"Skipped (unless running )?on devices with tags|"
                      r"([Tt](his|est) r|^R)equires (multiple|>= ?\d+) devices|"
                      r"number of devices is a multiple of \d|"
                      r"Only for CPU|[Tt]est enabled only for (CPU|cpu)|run_on_devices|skip_on_devices|"
                      r"requires jax_enable_x64|not supported when FLAGS\.|Test requires GPU(?! or CPU)|"
                      r"Tests only for GPU|"
                      r"compute capability \d+\.\d+ or higher|only applies when upgrade flag enabled|"
                      r"Skipping big tests under sanitizers due to slowdown|this test has failures in some cases|"
                      r"changed random bit values|relies on typed key upgrade flag|"
                      r"scipy\.special\.\w+ has been removed|^Skipped$|^not implemented$|^Expected failure\.$|"
                      r"^TODO\(\w+\): re-enable|broken by convert_element_type change|Cannot locate autodidax\.py|"
                      r"Works only with simplified Jaxpr consts|new-remat-of-scan doesn't convert numpy\.ndarray|"
                      r"JVP for SVD not implemented for full matrices|differs from jnp in 32 bit mode|"
                      # lax_test's complex-plane accuracy tests report what they expect per region by
                      # skipping (an expected inaccuracy, or an unexpected success): on CPU too
                      r"^no problematic regions$|^xfail: problematic regions|^detected success in regions|"
                      # lax_test's skips by flag (x64 off), by platform (ROCm, GPU or TPU only) and JAX's
                      # own unconditional ones, on CPU too
                      r"64-bit mode disabled|x64 mode is disabled|RngBitGenerator requires 64bit key|"
                      r"float8_e4m3fnuz and float8_e5m2fnuz types are only supported on ROCm|"
                      r"unsupported dtype for ragged_dot: <class 'numpy\.float16'>|^Only supported on GPU\.$|"
                      r"^Test only runs on TPU$|jax-ml/jax/issues/12066$|^removed split_transpose$|"
                      # lax_numpy_test's skips by parameter or by the installed NumPy, on CPU too
                      r"NumPy doesn't correctly handle bfloat16 arrays|requires https://github\.com/seberg/"
                      r"numpy-dispatch|XLA support for int1/int2 is incomplete|Too many indices to be unique|"
                      r"^too many indices$|Test fails on CI, perhaps due to JIT caching|Only run float64 testcase "
                      r"when float64 is enabled|NumPy 2\.3\.0 now throws warnings|dtype=object requires "
                      r"allow_pickle=True|gets promoted to <class 'numpy\.float16'>, which is not supported|"
                      r"Integer rounding with decimals < 0 not implemented|Known failure for complex inputs; "
                      r"see #9107|np\.arctanh & jnp\.arctanh have mismatched NaNs|"
                      # random_lax_test's: x64 off, untyped keys, and unconditional skips
                      r"Expected failure: Python int too large|^relies on typed key arrays$|"
                      r"sensitive to random key - https://github\.com/jax-ml/jax/issues/|"
                      r"skip test except on X64|8-bit types not supported with RBG PRNG")


# A test that asks for JAX's cpu backend (jax.devices("cpu"), backend="cpu", device_put to a cpu device),
# which JAX_PLATFORMS=metal alone lacks: JAX's errors for a platform it did not load. Matched against the
# whole failure text, since the error may be the cause of the one raised.
CPU_BACKEND = re.compile(r"Unknown backend:? '?cpu\b|Backend 'cpu' (failed to initialize|is not in the list of "
                         r"known backends|provides no devices)|Could not initialize backend 'cpu'|"
                         r"no platforms that are instances of cpu|[Nn]o (visible )?cpu devices|"
                         r"Unable to initialize backend 'cpu'")


def tree_version(tree):
    with open(os.path.join(tree, "jax", "version.py"), encoding="utf-8") as f:
        m = re.search(r'^_version(?:: str)? = "([^"]+)"', f.read(), re.M)
    return m.group(1) if m else None


def _version_tuple(v):
    return tuple(int(p) for p in re.findall(r"\d+", v)[:3])


SIDES = ("metal", "standin", "placed", "host")


def load_known(path, version, side=None):
    """The entries that hold for jax `version` with Metal segments on `side`: `test_id [>=X.Y.Z] [placed]
    # cause` (markers optional: a version bound, and the one Metal side the entry holds on)."""
    known = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                test, _, cause = line.partition("#")
                if not test.strip():
                    continue
                m = re.fullmatch(r"(\S+)((?:\s+\[[^\]]*\])*)", test.strip())
                if not m:
                    sys.exit(f"{path}: malformed entry: {line.strip()}")
                holds = True
                for marker in re.findall(r"\[([^\]]*)\]", m.group(2)):
                    bound = re.fullmatch(r"(>=|<)\s*([\d.]+)", marker.strip())
                    if bound:
                        newer = _version_tuple(version) >= _version_tuple(bound.group(2))
                        holds = holds and newer == (bound.group(1) == ">=")
                    elif marker.strip() in SIDES:
                        holds = holds and marker.strip() == side
                    else:
                        sys.exit(f"{path}: malformed marker [{marker}]: {line.strip()}")
                if holds:
                    known[m.group(1)] = cause.strip()
    return known


def metal_state(outcome, why):
    """passed, skipped (not the plugin's), failed, crashed or timeout."""
    if outcome == "skipped":
        return "skipped" if NOT_OURS.search(why) else "failed"
    return outcome


def _legacy(outcome, why):
    state = metal_state(outcome, why)
    if state in ("crashed", "timeout"):
        return "failed", why
    return state, ("skip: " + why if outcome == "skipped" else why)


def run_file(tests_dir, name, timeout, out_dir, keep_caches=False, rss_limit=1.0, platform="metal", env_extra=None,
             tests=None, plugins=(), max_crashes=10):
    """Runs one test file (or only `tests` of it, ids as in the results) on `platform` with `env_extra` set
    and the pytest `plugins` loaded, past any crash; returns ({test: (state, why)} with state passed,
    failed or skipped, peak RSS in bytes, seconds, note), the note naming crashes and a time limit."""
    run = run_file_raw(tests_dir, name, out_dir, timeout, platform, env_extra, tests, plugins, keep_caches,
                       rss_limit, max_crashes)
    notes = [f"crashed ({sig}) in {t}" for t, sig in run.crashes] + run.notes
    if run.timed_out:
        notes.append(f"killed after {timeout:g} s" + (f" in {run.timeout}" if run.timeout else ""))
    results = {t: _legacy(o, why) for t, (o, why, _) in run.results.items()}
    return results, run.rss, run.seconds, "; ".join(notes)


COUNTS = ("passed", "metal_only", "shared", "skipped", "crashed", "timeout", "cpu_passes_metal_fails",
          "cpu_passes_metal_skips")


def measure(name, args, tests_dir, out_dir):
    """One file through metal, metal,cpu for the tests that ask for cpu, and cpu for metal's failures."""
    start = time.monotonic()
    common = dict(keep_caches=args.keep_caches, rss_limit=args.rss_limit, max_crashes=args.max_crashes)
    rec = {"crashes": [], "timeout": None, "notes": [], "cpu_crashes": [], "seconds": {}}

    def account(run, platform):
        mine = platform != "cpu"  # a crash or time limit on cpu alone is JAX's, not the plugin's
        for t, sig in run.crashes:
            rec["crashes" if mine else "cpu_crashes"].append({"test": t, "signal": sig, "platform": platform})
        if run.timed_out:
            if mine:
                rec["timeout"] = {"test": run.timeout, "platform": platform}
            else:
                rec["notes"].append(f"cpu run timed out in {run.timeout}: failures after it count as metal-only")
        rec["notes"] += [f"{platform}: {n}" for n in run.notes]
        rec["seconds"][platform] = run.seconds

    metal = run_file_raw(tests_dir, name, os.path.join(out_dir, "metal"), args.timeout, "metal", **common)
    account(metal, "metal")
    rec["peak_rss"] = metal.rss
    tests = {t: {"metal": list(r[:2])} for t, r in metal.results.items()}
    final = dict(metal.results)

    asks = sorted(t for t, (o, why, text) in metal.results.items()
                  if o == "failed" and CPU_BACKEND.search(why + "\n" + text))
    if asks:
        # A collection error can only be run again as the whole file, which then counts as a whole.
        whole = any(t.endswith("::" + COLLECTION) for t in asks)
        both = run_file_raw(tests_dir, name, os.path.join(out_dir, "metal+cpu"), args.timeout, "metal,cpu",
                            select=None if whole else asks, **common)
        account(both, "metal,cpu")
        rec["peak_rss"] = max(rec["peak_rss"], both.rss)
        if whole:
            final, tests = {}, {t: {} for t in both.results}
        for t, r in both.results.items():
            if whole or t in final:
                tests.setdefault(t, {})["metal,cpu"] = list(r[:2])
                final[t] = r

    states = {t: metal_state(o, why) for t, (o, why, _) in final.items()}
    again = sorted(t for t, s in states.items() if s == "failed" or (s == "skipped" and args.cpu_skips))
    cpu = {}
    if again:
        run = run_file_raw(tests_dir, name, os.path.join(out_dir, "cpu"), args.timeout, "cpu", select=again,
                           **common)
        account(run, "cpu")
        cpu = run.results
        for t in again:
            tests[t]["cpu"] = list(cpu[t][:2]) if t in cpu else None

    counts = dict.fromkeys(COUNTS, 0)
    for t, s in states.items():
        on_cpu = cpu.get(t, ("absent",))[0]
        if s == "failed":
            s = "shared" if on_cpu in ("failed", "skipped", "crashed", "timeout") else "metal_only"
            counts["cpu_passes_metal_fails"] += on_cpu == "passed"
        elif s == "skipped":
            counts["cpu_passes_metal_skips"] += on_cpu == "passed"
        tests[t]["category"] = s
        counts[s] += 1
    rec.update(counts=counts, tests=tests, wall=time.monotonic() - start,
               status="crashed" if rec["crashes"] else "timeout" if rec["timeout"] else "ok")
    return rec


def rates(c):
    """The metal-only failures F (crashes and timeouts included) over passed + F, and over cpu's passes."""
    f = c["metal_only"] + c["crashed"] + c["timeout"]
    cpu_passes = c["passed"] + c["crashed"] + c["timeout"] + c["cpu_passes_metal_fails"] + c["cpu_passes_metal_skips"]
    return f, (f / (c["passed"] + f) if c["passed"] + f else None), cpu_passes, (f / cpu_passes if cpu_passes else None)


def _pct(x):
    return "-" if x is None else f"{100 * x:.2f}%"


HEADER = (f"{'file':32} {'passed':>7} {'metal-only':>10} {'shared':>7} {'skipped':>8} {'crashed':>8} "
          f"{'fail rate':>9} {'of cpu':>7} {'peak RSS':>9} {'time':>6}  status")


def row(name, c, rss=None, seconds=None, status=""):
    _, rate, _, rate_cpu = rates(c)
    tail = f" {rss / 2**30:8.2f}G {seconds:5.0f}s" if rss is not None else f" {'':9} {'':6}"
    return (f"{name:32} {c['passed']:7} {c['metal_only']:10} {c['shared']:7} {c['skipped']:8} "
            f"{c['crashed'] + c['timeout']:8} {_pct(rate):>9} {_pct(rate_cpu):>7}{tail}  {status}").rstrip()


def status_text(rec):
    parts = [f"CRASHED in {c['test']} ({c['signal']}{', ' + c['platform'] if c['platform'] != 'metal' else ''})"
             for c in rec["crashes"]]
    if rec["timeout"]:
        parts.append(f"TIMEOUT in {rec['timeout']['test'] or '(between tests)'}")
    parts += [f"cpu crashed in {c['test']} ({c['signal']})" for c in rec["cpu_crashes"]]
    parts += [f"collection {o['category']}: {(o.get('metal,cpu') or o['metal'])[1][:100]}"
              for t, o in rec["tests"].items() if t.endswith("::" + COLLECTION)]
    return "; ".join(parts + rec["notes"]) or "ok"


def problems_of(name, rec, known):
    out = [f"{name}: CRASHED in {c['test']} ({c['signal']}, JAX_PLATFORMS={c['platform']})" for c in rec["crashes"]]
    if rec["timeout"]:
        out.append(f"{name}: TIMEOUT in {rec['timeout']['test']} (JAX_PLATFORMS={rec['timeout']['platform']})")
    out += [f"{name}: {n}" for n in rec["notes"] if not n.startswith("cpu")]  # ERROR, metal exit status
    for t, o in sorted(rec["tests"].items()):
        last = o.get("metal,cpu") or o.get("metal") or ["", ""]
        if o["category"] == "metal_only" and t not in known:
            out.append(f"new metal-only failure: {t}: {' '.join(last[1].split())[:200]}")
        elif o["category"] == "passed" and t in known:
            out.append(f"passes now, remove from the known list: {t}")
        elif o["category"] == "skipped" and t in known:
            out.append(f"skips as JAX's own now, remove from the known list: {t}")
    return out


def all_files(tree):
    tests = os.path.join(tree, "tests")
    return sorted(f[:-3] for f in os.listdir(tests)
                  if f.endswith("_test.py") and os.path.isfile(os.path.join(tests, f)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*", help="test files of the tree's tests/ (default: all *_test.py)")
    ap.add_argument("--jax-tree", required=True, help="a JAX source tree at the installed jax's version")
    ap.add_argument("--core", action="store_true", help="only the 19 files of CORE")
    ap.add_argument("-j", "--jobs", type=int, default=1, help="files run at a time")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per file and platform")
    ap.add_argument("--max-crashes", type=int, default=10, help="crashes in a file before its rest is dropped")
    ap.add_argument("--cpu-skips", action="store_true",
                    help="run metal's skips on cpu too, to count what cpu passes that metal skips")
    ap.add_argument("--json", help="write everything here")
    ap.add_argument("--known", default=KNOWN, help="the known-failures list")
    ap.add_argument("--any-version", action="store_true", help="run even if the tree's version differs")
    ap.add_argument("--keep-caches", action="store_true",
                    help="keep JAX's caches of compiled programs for the whole file, as plain pytest does")
    ap.add_argument("--rss-limit", type=float, default=1.0,
                    help="GiB: JAX's caches are emptied after a test that leaves the process above this "
                         "(0: after every test)")
    args = ap.parse_args()

    import jax
    import jaxlib
    version = tree_version(args.jax_tree)
    if version != jax.__version__ and not args.any_version:
        sys.exit(f"the tree is jax {version}, the installed jax is {jax.__version__}: use the matching tag")
    from jax_metal_plugin import _native
    side = _native.metal_side()  # what the files' processes will run Metal segments on (same environment)
    known = load_known(args.known, jax.__version__, side)
    names = [f.removesuffix(".py") for f in args.files] or (CORE if args.core else all_files(args.jax_tree))
    missing = [n for n in names if not os.path.isfile(os.path.join(args.jax_tree, "tests", n + ".py"))]
    if missing:
        sys.exit(f"not in {args.jax_tree}/tests: {', '.join(missing)}")
    out_dir = tempfile.mkdtemp(prefix="jax-conformance-")
    tests_dir = os.path.join(out_dir, "tests")
    shutil.copytree(os.path.join(args.jax_tree, "tests"), tests_dir)
    # Largest first, so that with -j the long files do not start last and run alone at the end.
    order = sorted(names, key=lambda n: -os.path.getsize(os.path.join(tests_dir, n + ".py")))

    caches = "kept" if args.keep_caches else f"emptied above {args.rss_limit:g} GiB"
    print(f"jax {jax.__version__} (tree {version}), JAX_PLATFORMS=metal, Metal segments on {side}, JAX's caches "
          f"{caches}, {len(names)} files, {args.jobs} at a time, logs in {out_dir}")
    print(HEADER, flush=True)
    records, lock = {}, threading.Lock()
    pool = concurrent.futures.ThreadPoolExecutor(max(1, args.jobs))
    try:
        futures = {pool.submit(measure, n, args, tests_dir, out_dir): n for n in order}
        for done in concurrent.futures.as_completed(futures):
            n = futures[done]
            try:
                rec = records[n] = done.result()
            except Exception as e:  # one file's trouble (a bug here) costs that file, not the whole run
                rec = records[n] = {"crashes": [], "timeout": None, "cpu_crashes": [], "seconds": {}, "tests": {},
                                    "notes": [f"ERROR {type(e).__name__}: {e}"], "peak_rss": 0, "wall": 0.0,
                                    "status": "error", "counts": dict.fromkeys(COUNTS, 0)}
            with lock:
                print(row(n, rec["counts"], rec["peak_rss"], rec["wall"], status_text(rec)), flush=True)
    except KeyboardInterrupt:
        for pid in list(LIVE):
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
        print(f"interrupted; logs in {out_dir}", flush=True)
        os._exit(130)
    pool.shutdown()

    total = {k: sum(r["counts"][k] for r in records.values()) for k in COUNTS} if records else {}
    problems = [p for n in names if n in records for p in problems_of(n, records[n], known)]
    crashed = [n for n in names if records[n]["crashes"]]
    timed_out = [n for n in names if records[n]["timeout"]]
    if total:
        print(row(f"all ({len(names)} files)", total))
        f, rate, cpu_passes, rate_cpu = rates(total)
        print(f"metal-only failures {f} (crashed and timed out {total['crashed'] + total['timeout']}): "
              f"{_pct(rate)} of passed + metal-only ({total['passed'] + f}), {_pct(rate_cpu)} of cpu's passes "
              f"({cpu_passes}); {total['shared']} failures shared with cpu")
        print(f"files crashed: {len(crashed)}{': ' + ', '.join(crashed) if crashed else ''}; "
              f"timed out: {len(timed_out)}{': ' + ', '.join(timed_out) if timed_out else ''}")
    if args.json:
        legacy = {t: _legacy(*(o.get("metal,cpu") or o["metal"])) for r in records.values()
                  for t, o in r["tests"].items()}
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"jax": jax.__version__, "jaxlib": jaxlib.__version__, "python": sys.version.split()[0],
                       "tree": version, "executor": side, "platform": "metal", "logs": out_dir,
                       "options": {"timeout": args.timeout, "jobs": args.jobs, "keep_caches": args.keep_caches,
                                   "rss_limit": args.rss_limit, "cpu_skips": args.cpu_skips},
                       "files": records, "totals": total, "crashed": crashed, "timed_out": timed_out,
                       "problems": problems, "results": legacy}, f, indent=1)
    for p in problems:
        print(p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()

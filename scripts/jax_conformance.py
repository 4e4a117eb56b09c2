#!/usr/bin/env python3
"""JAX's own test files as the measure of the plugin's breadth: run them on platform "metal" alone.

    python scripts/jax_conformance.py --jax-tree JAX_SRC [FILE ...] [--timeout S] [--json OUT]

JAX_SRC is a JAX source tree (e.g. a checkout of jax-ml/jax at tag jax-vX.Y.Z) whose version matches the
installed jax; FILEs are names in its tests/ folder (lax_test, fft_test, ...; default: the 19 files of
FILES below). Each file runs in its own process with JAX_PLATFORMS=metal (no CPU device, so no test quietly
runs on CPU), under a time limit, from a temporary copy of tests/ so that the tree's jax sources never
shadow the installed package. Nothing of JAX's is copied into this repository.

Per file it prints passed, failed, skipped (JAX's own device tagging, such as run_on_devices("cpu"),
which skip on every accelerator, and skips that happen on JAX's CPU backend too, such as x64-only tests
and tests needing two or more devices; every other skip counts as a failure); peak RSS; and the pass
rate passed / (passed + failed). JAX's in-memory caches of compiled programs are emptied after any test
that leaves the process above --rss-limit GiB (scripts/jax_conformance_caches.py), so that peak RSS is
that limit plus the largest test's working set, not the sum of every program JAX compiled and kept;
--keep-caches runs the files as plain pytest does. Known failures live in
scripts/jax_conformance_known.txt, one test id a line with its root cause; a test that fails and is not
listed, or is listed and passes, makes the script exit 1, so the list only ever shrinks on purpose. An
entry that holds only from (or only before) a JAX release carries a marker after its test id,
`[>=0.11.0]` or `[<0.11.0]`, and is ignored for other installed versions; an entry without a marker
holds for every version. An entry that holds only with Metal segments on one side (JAX_METAL_EXECUTOR:
`metal`, `standin`, `placed`, `host`) carries that side as a marker, `[placed]`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
KNOWN = os.path.join(HERE, "jax_conformance_known.txt")
FILES = ["lax_test", "lax_numpy_test", "lax_control_flow_test", "fft_test", "random_lax_test", "linalg_test",
         "lax_autodiff_test", "lax_vmap_test", "lax_vmap_op_test", "nn_test", "lax_scipy_test",
         "lax_numpy_operators_test", "lax_numpy_einsum_test", "lax_numpy_vectorize_test", "ann_test",
         "polynomial_test", "random_test", "batching_test", "api_test"]
# Skips that are not the plugin's, since they happen on CPU too: JAX's own device tagging (on every
# accelerator), as a decorator or inline for GPU-only (CUDA) tests; configuration flags (x64 off, an
# upgrade flag off, threefry partitionable on, simplified jaxpr constants off); the environment (the
# installed scipy's version, the Python version, a docs/ folder the extracted tree lacks); and skips a
# test makes unconditionally on every platform (a bare @unittest.skip, TODO(owner) skips,
# lax_vmap_op_test's float64 and rank > 2 cases, linalg_test's non-square full-matrices SVD JVP).
# Skips for want of devices (a test that needs two or more) happen on JAX's CPU backend in its default
# configuration too, which has one device, as metal has. Every other skip counts as a failure: JAX's skips
# of every platform but CPU and GPU, or of every PJRT C API plugin, among them.
NOT_OURS = re.compile(r"Skipped (unless running )?on devices with tags|"
                      r"[Tt](his|est) requires (multiple|>= ?\d+) devices|number of devices is a multiple of \d|"
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


def run_file(tests_dir, name, timeout, out_dir, keep_caches=False, rss_limit=1.0, platform="metal", env_extra=None,
             tests=None, plugins=()):
    """Runs one test file (or only `tests` of it, names as in the results) in its own process group, on
    `platform` with `env_extra` set and the pytest `plugins` loaded; returns (results, peak RSS in bytes,
    seconds, note)."""
    report = os.path.join(out_dir, name + ".xml")
    # Sibling imports (lax_vmap_op_test imports lax_test) resolve in the copy, never in the tree's jax.
    env = dict(os.environ, JAX_PLATFORMS=platform, JAX_CONFORMANCE_RSS_LIMIT=str(int(rss_limit * 2**30)),
               PYTHONPATH=os.pathsep.join(filter(None, [tests_dir, HERE, os.environ.get("PYTHONPATH")])),
               **(env_extra or {}))
    path = os.path.join(tests_dir, name + ".py")
    selected = [path]
    if tests is not None:
        selected = []
        for test in tests:  # "file::Class::test", or "file::file::test" for a test outside a class
            _, owner, function = test.split("::", 2)
            selected.append(f"{path}::{function}" if owner == name else f"{path}::{owner}::{function}")
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--import-mode=importlib",
           f"--junitxml={report}", "-o", "junit_family=xunit1", *selected]
    for plugin in plugins:
        cmd[3:3] = ["-p", plugin]
    if not keep_caches:
        cmd[3:3] = ["-p", "jax_conformance_caches"]
    start = time.monotonic()
    with open(os.path.join(out_dir, name + ".log"), "wb") as log:
        proc = subprocess.Popen(cmd, cwd=out_dir, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        note = ""
        deadline = start + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                os.killpg(proc.pid, signal.SIGKILL)
                pid, status, usage = os.wait4(proc.pid, 0)
                note = f"killed after {timeout} s"
                break
            time.sleep(0.5)
    rss = usage.ru_maxrss * (1 if sys.platform == "darwin" else 1024)
    results = {}
    if os.path.exists(report):
        for case in ET.parse(report).getroot().iter("testcase"):
            test = f"{name}::{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"
            if case.find("failure") is not None or case.find("error") is not None:
                results[test] = ("failed", (case.find("failure") if case.find("failure") is not None
                                            else case.find("error")).get("message", "")[:300])
            elif case.find("skipped") is not None:
                reason = case.find("skipped").get("message", "")
                results[test] = ("skipped" if NOT_OURS.search(reason) else "failed", "skip: " + reason[:300])
            else:
                results[test] = ("passed", "")
    elif not note:
        note = f"no report (exit status {os.waitstatus_to_exitcode(status)})"
    return results, rss, time.monotonic() - start, note


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*", default=FILES)
    ap.add_argument("--jax-tree", required=True, help="a JAX source tree at the installed jax's version")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per file")
    ap.add_argument("--json", help="write every test's outcome here")
    ap.add_argument("--known", default=KNOWN, help="the known-failures list")
    ap.add_argument("--any-version", action="store_true", help="run even if the tree's version differs")
    ap.add_argument("--keep-caches", action="store_true",
                    help="keep JAX's caches of compiled programs for the whole file, as plain pytest does")
    ap.add_argument("--rss-limit", type=float, default=1.0,
                    help="GiB: JAX's caches are emptied after a test that leaves the process above this "
                         "(0: after every test)")
    args = ap.parse_args()

    import jax
    version = tree_version(args.jax_tree)
    if version != jax.__version__ and not args.any_version:
        sys.exit(f"the tree is jax {version}, the installed jax is {jax.__version__}: use the matching tag")
    from jax_metal_plugin import _native
    side = _native.metal_side()  # what the files' processes will run Metal segments on (same environment)
    known = load_known(args.known, jax.__version__, side)
    out_dir = tempfile.mkdtemp(prefix="jax-conformance-")
    tests_dir = os.path.join(out_dir, "tests")
    shutil.copytree(os.path.join(args.jax_tree, "tests"), tests_dir)

    caches = "kept" if args.keep_caches else f"emptied above {args.rss_limit:g} GiB"
    print(f"jax {jax.__version__}, JAX_PLATFORMS=metal, Metal segments on {side}, JAX's caches {caches}, "
          f"{len(args.files)} files, "
          f"logs in {out_dir}")
    print(f"{'file':28} {'passed':>7} {'failed':>7} {'skipped':>8} {'rate':>8} {'peak RSS':>9} {'time':>7}")
    everything, problems = {}, []
    for name in args.files:
        results, rss, seconds, note = run_file(tests_dir, name, args.timeout, out_dir, args.keep_caches,
                                               args.rss_limit)
        everything.update(results)
        passed = sum(1 for s, _ in results.values() if s == "passed")
        failed = sum(1 for s, _ in results.values() if s == "failed")
        skipped = sum(1 for s, _ in results.values() if s == "skipped")
        rate = f"{100 * passed / (passed + failed):.2f}%" if passed + failed else "-"
        print(f"{name:28} {passed:7} {failed:7} {skipped:8} {rate:>8} {rss / 2**30:8.2f}G {seconds:6.0f}s"
              + (f"  {note}" if note else ""), flush=True)
        if note:
            problems.append(f"{name}: {note}")
        for test, (state, why) in sorted(results.items()):
            if state == "failed" and test not in known:
                problems.append(f"new failure: {test}: {why}")
            elif state == "passed" and test in known:
                problems.append(f"passes now, remove from the known list: {test}")
            elif state == "skipped" and test in known:
                problems.append(f"skips as JAX's own now, remove from the known list: {test}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"jax": jax.__version__, "results": everything}, f, indent=1)
    for p in problems:
        print(p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()

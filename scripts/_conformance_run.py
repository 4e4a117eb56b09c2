"""Runs one JAX test file under pytest so that a crash or a time limit never loses its results (for
scripts/jax_conformance.py and scripts/jax_multi_device.py); also the pytest plugin that makes this
possible, loaded into the test process as `-p _conformance_run`.

The plugin appends one JSON line per event to the file named by JAX_CONFORMANCE_PROGRESS: `start` when a
test begins, each phase's report, `finish` when its teardown is over, each collection error or
module-level skip, and `end` when the session ends. junitxml writes its report only at the end of the
session, so a process that dies by a signal leaves none; the lines written so far hold every finished
test's outcome, and the last `start` without its `finish` names the test the process died in. The plugin
also keeps only the tests named in JAX_CONFORMANCE_SELECT and drops those in JAX_CONFORMANCE_DESELECT
(files of test ids, one a line), matched exactly: pytest's own --deselect matches node id prefixes, so
dropping testFoo1 would drop testFoo10 to testFoo19 too.

A test id is FILE::CLASS::TEST (FILE::FILE::TEST for a test outside a class), as the known-failures list
writes them. This module imports nothing but the standard library: it is imported into every test process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
COLLECTION = "<collection>"  # the test name a file's collection error or module-level skip is recorded under

# ---------------------------------------------------------------------------------------------- plugin

_FD = None


def _emit(record):
    global _FD
    path = os.environ.get("JAX_CONFORMANCE_PROGRESS")
    if not path:
        return
    if _FD is None:
        _FD = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    # One unbuffered write a line: it is in the kernel's hands once write returns, so it survives the
    # process dying by a signal (only a machine crash would lose it, which fsync per test would not be
    # worth guarding against: thousands of tests a file).
    os.write(_FD, (json.dumps(record) + "\n").encode())


def test_id(item):
    stem = os.path.splitext(os.path.basename(str(item.fspath)))[0]
    cls = getattr(item, "cls", None)
    return f"{stem}::{cls.__name__ if cls is not None else stem}::{item.name}"


def _ids(variable):
    path = os.environ.get(variable)
    if not path:
        return None
    with open(path, encoding="utf-8") as f:
        return {line.strip() for line in f if line.strip()}


def pytest_collection_modifyitems(session, config, items):
    select, deselect = _ids("JAX_CONFORMANCE_SELECT"), _ids("JAX_CONFORMANCE_DESELECT")
    if select is None and deselect is None:
        return
    kept, dropped = [], []
    for item in items:
        t = test_id(item)
        (dropped if (select is not None and t not in select) or (deselect and t in deselect) else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def _text(report):
    # Enough of the failure's text to recognise its cause: the start (an exception chain's first error)
    # and the end (the error raised).
    text = getattr(report, "longreprtext", "") or ""
    return text if len(text) <= 8000 else text[:2000] + "\n...\n" + text[-6000:]


def _why(report):
    """What junitxml would give as the message, so the skip rules match the same strings."""
    if report.passed:
        return ""
    if report.skipped:
        if hasattr(report, "wasxfail"):
            return report.wasxfail.removeprefix("reason: ")
        if isinstance(report.longrepr, tuple):
            return report.longrepr[2].removeprefix("Skipped: ")
        return str(report.longrepr)
    crash = getattr(report.longrepr, "reprcrash", None)
    message = crash.message if crash is not None else str(report.longrepr)
    when = getattr(report, "when", "collect")
    if when == "collect":  # an import error's message is a page of hints: its last error line says it
        errors = [line[1:].strip() for line in report.longreprtext.splitlines() if line.startswith("E ")]
        message = errors[-1] if errors else message
    return message if when == "call" else f"failed on {when} with {message}"


def pytest_runtest_logstart(nodeid, location):
    _emit({"start": nodeid})


def pytest_runtest_logfinish(nodeid, location):
    _emit({"finish": nodeid})


def pytest_itemcollected(item):
    _emit({"item": item.nodeid, "id": test_id(item)})


def pytest_runtest_logreport(report):
    if report.passed and report.when != "call" and not hasattr(report, "wasxfail"):
        return
    _emit({"report": report.nodeid, "when": report.when, "outcome": report.outcome,
           "why": _why(report)[:300], "text": _text(report) if report.failed else ""})


def pytest_collectreport(report):
    if report.passed or not report.nodeid:
        return
    stem = os.path.splitext(os.path.basename(report.nodeid.split("::")[0]))[0]
    _emit({"collect": f"{stem}::{stem}::{COLLECTION}", "outcome": report.outcome,
           "why": _why(report)[:300], "text": _text(report) if report.failed else ""})


def pytest_sessionfinish(session, exitstatus):
    _emit({"end": int(exitstatus)})


# ---------------------------------------------------------------------------------------------- runner

LIVE = set()  # process groups running now, so that an interrupted script ends them


class Attempt:
    """One pytest process: {test id: (outcome, why, text)} with outcome passed, failed or skipped; the
    test in progress when it ended (None if none); the signal it died by; whether it was killed at its
    time limit; its exit status; peak RSS; seconds."""

    def __init__(self):
        self.results, self.in_progress, self.signal, self.timed_out = {}, None, None, False
        self.status, self.rss, self.seconds, self.collected, self.ended = None, 0, 0.0, False, False


def _read(path, attempt):
    node_to_id, started = {}, None
    phases = {}
    if not os.path.exists(path):
        return
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                r = json.loads(line)
            except ValueError:  # a line cut short by the process dying mid-write
                continue
            if "item" in r:
                node_to_id[r["item"]] = r["id"]
                attempt.collected = True
            elif "start" in r:
                started = r["start"]
            elif "finish" in r:
                started = None
            elif "report" in r:
                phases.setdefault(r["report"], []).append(r)
            elif "collect" in r:
                attempt.results[r["collect"]] = (r["outcome"], r["why"], r["text"])
            elif "end" in r:
                attempt.ended = True
    for node, reports in phases.items():
        t = node_to_id.get(node, node)
        failed = [r for r in reports if r["outcome"] == "failed"]
        skipped = [r for r in reports if r["outcome"] == "skipped"]
        r = failed[0] if failed else skipped[0] if skipped else reports[0]
        attempt.results[t] = (r["outcome"], r["why"], r["text"])
    if started is not None:
        attempt.in_progress = node_to_id.get(started, started)


def _write_ids(path, ids):
    if ids is None:
        return None
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(t + "\n" for t in sorted(ids))
    return path


def run_pytest(tests_dir, name, work, timeout, platform, tag, env_extra=None, select=None, deselect=None,
               plugins=(), keep_caches=False, rss_limit=1.0):
    """Runs tests/NAME.py (only the ids in `select` if given, never those in `deselect`) once, in its
    own process group with JAX_PLATFORMS=platform; its output is appended to WORK/NAME.log."""
    os.makedirs(work, exist_ok=True)
    progress = os.path.join(work, f"{name}.{tag}.jsonl")
    if os.path.exists(progress):
        os.remove(progress)
    # Sibling imports (lax_vmap_op_test imports lax_test) resolve in the copy, never in the tree's jax.
    env = dict(os.environ, JAX_PLATFORMS=platform, JAX_CONFORMANCE_RSS_LIMIT=str(int(rss_limit * 2**30)),
               PYTHONPATH=os.pathsep.join(filter(None, [tests_dir, HERE, os.environ.get("PYTHONPATH")])),
               PYTHONFAULTHANDLER="1", JAX_CONFORMANCE_PROGRESS=progress, **(env_extra or {}))
    for variable, ids, suffix in (("JAX_CONFORMANCE_SELECT", select, "select"),
                                  ("JAX_CONFORMANCE_DESELECT", deselect, "deselect")):
        path = _write_ids(os.path.join(work, f"{name}.{tag}.{suffix}"), ids)
        if path:
            env[variable] = path
        else:
            env.pop(variable, None)
    cmd = [sys.executable, "-m", "pytest", "-q", "--tb=short", "-p", "no:cacheprovider", "-p", "_conformance_run",
           "--import-mode=importlib"]
    if not keep_caches:
        cmd += ["-p", "jax_conformance_caches"]
    for plugin in plugins:
        cmd += ["-p", plugin]
    cmd.append(os.path.join(tests_dir, name + ".py"))
    attempt = Attempt()
    start = time.monotonic()
    with open(os.path.join(work, name + ".log"), "ab") as log:
        log.write(f"==== {tag}: JAX_PLATFORMS={platform} {' '.join(cmd)}\n".encode())
        log.flush()
        proc = subprocess.Popen(cmd, cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        LIVE.add(proc.pid)
        try:
            while True:
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    break
                if time.monotonic() > start + timeout:
                    os.killpg(proc.pid, signal.SIGKILL)
                    pid, status, usage = os.wait4(proc.pid, 0)
                    attempt.timed_out = True
                    break
                time.sleep(0.2)
        finally:
            try:  # whatever the tests started and left behind
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            LIVE.discard(proc.pid)
            proc.returncode = 0  # reaped above: keeps Popen from waiting on a pid that is gone
    attempt.seconds = time.monotonic() - start
    attempt.rss = usage.ru_maxrss * (1 if sys.platform == "darwin" else 1024)
    attempt.status = os.waitstatus_to_exitcode(status)
    if attempt.status < 0 and not attempt.timed_out:
        attempt.signal = signal.Signals(-attempt.status).name if -attempt.status in signal.valid_signals() \
            else f"signal {-attempt.status}"
    _read(progress, attempt)
    return attempt


class FileRun:
    """A test file's run on one platform, rerun past each crash: {test id: (outcome, why, text)} with
    outcome passed, failed, skipped, crashed or timeout; the crashes as (test, signal); the test in
    progress at the time limit (None if none, or not timed out); notes; peak RSS; seconds."""

    def __init__(self):
        self.results, self.crashes, self.timeout, self.notes = {}, [], None, []
        self.timed_out, self.rss, self.seconds = False, 0, 0.0


def run_file_raw(tests_dir, name, work, timeout, platform="metal", env_extra=None, select=None, plugins=(),
                 keep_caches=False, rss_limit=1.0, max_crashes=10):
    """Runs NAME on `platform` within `timeout` seconds in all. After a crash, runs the rest of the file
    again without the tests that have an outcome and the one it died in, so that one crash hides none of
    the file's other outcomes."""
    run = FileRun()
    deadline = time.monotonic() + timeout
    n = 0
    while True:
        n += 1
        left = deadline - time.monotonic()
        if left <= 0:
            run.timed_out = True
            run.notes.append(f"no time left to run the rest after {len(run.crashes)} crashes")
            break
        a = run_pytest(tests_dir, name, work, left, platform, f"{platform}.{n}", env_extra, select,
                       set(run.results) if run.results else None, plugins, keep_caches, rss_limit)
        run.results.update(a.results)
        run.rss, run.seconds = max(run.rss, a.rss), run.seconds + a.seconds
        if a.timed_out:
            run.timed_out, run.timeout = True, a.in_progress
            if a.in_progress:
                run.results[a.in_progress] = ("timeout", f"in progress at the {timeout:g} s limit", "")
            break
        if a.signal is None:
            if a.status not in (0, 1, 5) and not any(t.endswith("::" + COLLECTION) for t in a.results):
                run.notes.append(f"pytest exit status {a.status}")
            break
        where = a.in_progress or ("<exit>" if a.ended or a.collected else COLLECTION)
        run.crashes.append((where, a.signal))
        if not a.in_progress:  # at collection (it would die again) or after the last test: nothing to rerun
            break
        run.results[a.in_progress] = ("crashed", f"crashed ({a.signal})", "")
        if len(run.crashes) >= max_crashes:
            run.notes.append(f"gave up after {max_crashes} crashes")
            break
    return run

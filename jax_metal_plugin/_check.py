"""`python -m jax_metal_plugin check`: the environment, then every op kind and dtype the Metal side
runs, compared with the host executor (docs/self-check.md).

The cases are C++ in the plugin library (cpp/check), reached through ctypes: the library is all a
wheel carries for every Python. _check_runner.py runs them in child processes, so that a case that
aborts or hangs costs only itself. This module prints the table and keeps the JSON report and the
record placement reads (_capabilities.py) up to date as the cases finish, so that a check that is
itself stopped leaves what it learned.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import time

from . import __version__, _capabilities, _check_runner

STATUSES = ("ok", "mismatch", "error", "crash", "hang")


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _metal_support() -> str:
    """What macOS says of the GPU's Metal support (system_profiler), or why there is none."""
    if sys.platform != "darwin":
        return (f"none: {platform.system()} has no Metal (the Metal executor runs over its stand-in, or placed "
                f"mode runs Metal's segments on the host executor)")
    try:
        out = subprocess.run(["system_profiler", "SPDisplaysDataType", "-json"], capture_output=True,
                             text=True, timeout=20)
        for gpu in json.loads(out.stdout).get("SPDisplaysDataType", []):
            support = gpu.get("spdisplays_mtlgpufamilysupport") or gpu.get("spdisplays_metal")
            if support:
                return f"{gpu.get('sppci_model', 'GPU')}: {support.replace('spdisplays_', '')}"
    except (OSError, ValueError, subprocess.SubprocessError):
        pass
    return "unknown (system_profiler said nothing)"


def environment(build_commit: str) -> dict:
    """What the report says of this machine; what depends on how the cases ran is updated from
    executed_on once they have."""
    from . import _platform_clash

    return {
        "os": platform.platform(),
        "macos_version": platform.mac_ver()[0] or None,
        "os_build": _capabilities.os_build(),
        "chip": _capabilities.chip(),
        "gpu_family": _capabilities.gpu_family(),
        "metal_support": _metal_support(),
        "metal_device": False,
        "mpsgraph_usable": False,
        "plugin_version": __version__,
        "build_commit": build_commit,
        "jax_version": _version("jax"),
        "jaxlib_version": _version("jaxlib"),
        "numpy_version": _version("numpy"),
        "python_version": platform.python_version(),
        "executor": executed_on(None, [])["executor"],
        "other_metal_packages": [text for _, text in _platform_clash.others()],
        "capabilities": os.environ.get("JAX_METAL_CAPABILITIES", "use"),
        "injected_faults": os.environ.get("JAX_METAL_INJECT_FAULTS", ""),
        "record": _capabilities.record_path(),
    }


def executed_on(side: str | None, cases: list[dict]) -> dict:
    """What the report says of how the cases ran: on which Metal side (as the children named it, or as
    JAX_METAL_EXECUTOR chose it before any has run)."""
    side = side or os.environ.get("JAX_METAL_EXECUTOR") or "unknown"
    metal = side == "metal"
    return {"metal_device": metal, "mpsgraph_usable": metal and any(c.get("status") == "ok" for c in cases),
            "executor": side}


def _table(cases: list[dict]) -> str:
    rows = [("op", "dtype", "status", "worst error", "bound")]
    for c in cases:
        bound = c.get("bound", "") + (f"  (probe: {c['probe']})" if c.get("probe") else "")
        rows.append((c["op"], c["dtype"], c["status"], f"{c.get('worst_error', '')}", bound))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(r[i].ljust(widths[i]) for i in range(4)) + "  " + r[4] for r in rows]
    for c in cases:
        shape = f" (only {c['shape']} shapes)" if c.get("shape", "any") != "any" else ""
        for detail in ([c["message"]] if c.get("message") else []) + c.get("failures", []):
            lines.append(f"  {c['op']} {c['dtype']}{shape}: {detail}")
    return "\n".join(lines)


class _Progress:
    """The check's results so far, with the report and the record kept up to date as cases finish:
    at once after a failure, at most every couple of seconds otherwise, and at the end."""

    def __init__(self, args, build_commit: str):
        self.args, self.build_commit = args, build_commit
        self.cases: list[dict] = []
        self.pairs: dict[str, tuple[str, str]] = {}  # "Op:dtype" -> (status, shape class or "")
        self.env: dict = {}
        self.record: str | None = None
        self.start = time.monotonic()
        self._saved = 0.0

    def add(self, case: dict) -> None:
        self.cases.append(case)
        pair = f"{case['op']}:{case['dtype']}"
        status, shape = case["status"], "" if case.get("shape", "any") == "any" else case["shape"]
        before = self.pairs.get(pair)
        if before is None or before[0] == "ok":
            self.pairs[pair] = (status, shape)
        elif status != "ok" and before[1] != shape:  # failing in two ways: every shape
            self.pairs[pair] = (before[0], "")
        if status != "ok" or time.monotonic() - self._saved > 2:
            self.save()

    def failing(self) -> list[str]:
        return sorted(p for p, (s, _) in self.pairs.items() if s != "ok")

    def summary(self) -> dict:
        counts = {s: sum(c["status"] == s for c in self.cases) for s in STATUSES}
        return {"pairs": len(self.pairs), "cases": len(self.cases),
                "probes": sum(1 for c in self.cases if c.get("probe")), **counts, "failing": self.failing(),
                "seconds": round(time.monotonic() - self.start, 2), "record": self.record}

    def save(self, complete: bool = False) -> None:
        self._saved = time.monotonic()
        if not self.args.no_record and self.pairs:
            self.record = _capabilities.write_record(self.pairs, self.build_commit)
        if self.args.json:
            tmp = f"{self.args.json}.{os.getpid()}.tmp"
            with open(tmp, "w") as f:
                json.dump({"environment": self.env, "summary": dict(self.summary(), complete=complete),
                           "cases": self.cases}, f, indent=1)
            os.replace(tmp, self.args.json)


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m jax_metal_plugin check",
                                     description="Compare every op the Metal side runs with the host executor.")
    parser.add_argument("--quick", action="store_true", help="a subset in seconds (no large shapes, fewer dtypes)")
    parser.add_argument("--json", metavar="PATH", help="write the report as JSON to PATH")
    parser.add_argument("--only", default="", metavar="OP:DTYPE,...", help="check only these pairs")
    parser.add_argument("--no-record", action="store_true",
                        help="do not record the failing pairs for placement (the cache directory)")
    parser.add_argument("--case-seconds", type=float, metavar="S",
                        help="a case still running after S seconds is stopped and marked hang (default: "
                             f"${_check_runner.CASE_SECONDS_ENV} or {_check_runner.DEFAULT_CASE_SECONDS:g})")
    args = parser.parse_args(argv)

    lib = _check_runner.library()
    build_commit = _capabilities.build_commit()
    progress = _Progress(args, build_commit)
    progress.env = env = environment(build_commit)
    try:
        listed = _check_runner.list_cases(lib, args.quick, args.only)
        side = _check_runner.run_cases(listed, args.quick, args.only, _check_runner.case_seconds(args.case_seconds),
                                       progress.add)
    except _check_runner.CheckError as e:
        print(f"check: {e}", file=sys.stderr)
        return 2
    cases = progress.cases
    env.update(executed_on(side, cases))
    progress.save(complete=True)
    if not args.no_record:  # what this check ran again no longer needs a crash note to keep it off Metal
        _capabilities.clear_note(set(progress.pairs))
    print("jax-metal-plugin self-check")
    for name, value in env.items():
        print(f"  {name}: {value}")
    print()
    print(_table(cases))

    summary = progress.summary()
    bad, record = summary["failing"], summary["record"]
    line = (f"check: {summary['pairs']} (op kind, dtype) pairs in {summary['cases']} cases "
            f"({summary['probes']} assumption probes): "
            + ", ".join(f"{summary[s]} {s}" for s in STATUSES)
            + f" in {summary['seconds']} s on the {env['executor']} executor")
    if bad:
        line += f"; FAILED: {','.join(bad)}"
        if record:
            line += f" (recorded in {record}: placement runs them on the host executor)"
    print()
    print(line)
    return 0 if not bad else 1

"""`python -m jax_metal_plugin check`: the environment, then every op kind and dtype the Metal side
runs, compared with the host executor (docs/self-check.md).

The sweep itself is C++ in the plugin library (cpp/check), reached through ctypes: the library is all
a wheel carries for every Python. This module prints the table, writes the JSON report and keeps the
record placement reads (_capabilities.py).
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import json
import os
import platform
import subprocess
import sys

from . import __version__, _capabilities, library_path


def _library() -> ctypes.CDLL:
    lib = ctypes.CDLL(library_path())
    lib.jmp_check_run.restype = ctypes.c_void_p
    lib.jmp_check_run.argtypes = [ctypes.c_int32, ctypes.c_char_p]
    lib.jmp_check_free.argtypes = [ctypes.c_void_p]
    lib.jmp_build_commit.restype = ctypes.c_char_p
    return lib


def _run(lib: ctypes.CDLL, quick: bool, only: str) -> dict:
    pointer = lib.jmp_check_run(1 if quick else 0, only.encode())
    if not pointer:
        raise RuntimeError("the plugin library's self-check returned nothing")
    try:
        return json.loads(ctypes.string_at(pointer).decode())
    finally:
        lib.jmp_check_free(pointer)


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


def environment(lib: ctypes.CDLL, report: dict) -> dict:
    from . import _platform_clash

    metal = bool(report.get("metal"))
    executor = report.get("executor") or ("metal" if metal else "unknown")
    ok = [c for c in report.get("cases", []) if c.get("status") == "ok"]
    return {
        "os": platform.platform(),
        "macos_version": platform.mac_ver()[0] or None,
        "os_build": _capabilities.os_build(),
        "chip": _capabilities.chip(),
        "gpu_family": _capabilities.gpu_family(),
        "metal_support": _metal_support(),
        "metal_device": metal,
        "mpsgraph_usable": metal and bool(ok),
        "plugin_version": __version__,
        "build_commit": lib.jmp_build_commit().decode(),
        "jax_version": _version("jax"),
        "jaxlib_version": _version("jaxlib"),
        "numpy_version": _version("numpy"),
        "python_version": platform.python_version(),
        "executor": executor,
        "other_metal_packages": [text for _, text in _platform_clash.others()],
        "capabilities": os.environ.get("JAX_METAL_CAPABILITIES", "use"),
        "injected_faults": os.environ.get("JAX_METAL_INJECT_FAULTS", ""),
        "record": _capabilities.record_path(),
    }


def _table(cases: list[dict]) -> str:
    rows = [("op", "dtype", "status", "worst error", "bound")]
    for c in cases:
        bound = c.get("bound", "") + (f"  (probe: {c['probe']})" if c.get("probe") else "")
        rows.append((c["op"], c["dtype"], c["status"], f"{c.get('worst_error', '')}", bound))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(r[i].ljust(widths[i]) for i in range(4)) + "  " + r[4] for r in rows]
    for c in cases:
        for detail in ([c["message"]] if c.get("message") else []) + c.get("failures", []):
            lines.append(f"  {c['op']} {c['dtype']}: {detail}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m jax_metal_plugin check",
                                     description="Compare every op the Metal side runs with the host executor.")
    parser.add_argument("--quick", action="store_true", help="a subset in seconds (no large shapes, fewer dtypes)")
    parser.add_argument("--json", metavar="PATH", help="write the report as JSON to PATH")
    parser.add_argument("--only", default="", metavar="OP:DTYPE,...", help="check only these pairs")
    parser.add_argument("--no-record", action="store_true",
                        help="do not record the failing pairs for placement (the cache directory)")
    args = parser.parse_args(argv)

    lib = _library()
    report = _run(lib, args.quick, args.only)
    if "error" in report:
        print(f"check: {report['error']}", file=sys.stderr)
        return 2
    env = environment(lib, report)
    cases = report["cases"]
    print("jax-metal-plugin self-check")
    for name, value in env.items():
        print(f"  {name}: {value}")
    print()
    print(_table(cases))

    statuses: dict[str, str] = {}
    for c in cases:
        pair = f"{c['op']}:{c['dtype']}"
        if statuses.get(pair, "ok") == "ok":
            statuses[pair] = c["status"]
    bad = sorted(p for p, s in statuses.items() if s != "ok")
    record = None if args.no_record else _capabilities.write_record(statuses, env["build_commit"])
    counts = {s: sum(c["status"] == s for c in cases) for s in ("ok", "mismatch", "error")}
    summary = {
        "pairs": len(statuses), "cases": len(cases), "probes": sum(1 for c in cases if c.get("probe")),
        **counts, "failing": bad, "seconds": report.get("seconds"), "record": record,
    }
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"environment": env, "summary": summary, "cases": cases}, f, indent=1)
    line = (f"check: {summary['pairs']} (op kind, dtype) pairs in {summary['cases']} cases "
            f"({summary['probes']} assumption probes): {counts['ok']} ok, {counts['mismatch']} mismatch, "
            f"{counts['error']} error in {report.get('seconds')} s on the {env['executor']} executor")
    if bad:
        line += f"; FAILED: {','.join(bad)}"
        if record:
            line += f" (recorded in {record}: placement runs them on the host executor)"
    print()
    print(line)
    return 0 if not bad else 1

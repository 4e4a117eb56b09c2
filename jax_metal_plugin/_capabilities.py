"""What this machine's Metal side gets wrong, as the self-check found it, and placement's use of it.

`python -m jax_metal_plugin check` records the (op kind, dtype) pairs whose Metal results disagreed
with the host executor's, one record per (plugin version, OS build, GPU family), in the cache
directory: JAX_METAL_CACHE_DIR, else ~/Library/Caches/jax-metal-plugin on macOS and
$XDG_CACHE_HOME/jax-metal-plugin (default ~/.cache/jax-metal-plugin) elsewhere. When the plugin
registers, `install()` reads the record for this machine and hands its failing pairs to placement in
the environment variable JAX_METAL_AVOID ("Add:float16,Sort:float16", which a user may also set by
hand); placement runs those ops on the host executor, and one warning per process says so.
JAX_METAL_CAPABILITIES=ignore turns all of this off (placement then ignores JAX_METAL_AVOID too).
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import re
import subprocess
import sys
import warnings

from . import __version__

AVOID_ENV = "JAX_METAL_AVOID"


class MetalCapabilityWarning(UserWarning):
    """Ops the self-check found wrong on this machine's Metal run on the host executor instead."""


def cache_dir() -> str:
    explicit = os.environ.get("JAX_METAL_CACHE_DIR")
    if explicit:
        return explicit
    if sys.platform == "darwin":
        return os.path.expanduser("~/Library/Caches/jax-metal-plugin")
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return os.path.join(base, "jax-metal-plugin")


def _sysctl(name: str) -> str:
    try:
        out = subprocess.run(["sysctl", "-n", name], capture_output=True, text=True, timeout=5)
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def chip() -> str:
    if sys.platform == "darwin":
        return _sysctl("machdep.cpu.brand_string") or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


# Apple's GPU families by chip generation (Metal feature set tables): M1 is Apple7, M2 Apple8, M3 and
# M4 Apple9. An unknown chip keys the record by its own name.
_FAMILIES = {"M1": "apple7", "M2": "apple8", "M3": "apple9", "M4": "apple9"}


def gpu_family() -> str:
    if sys.platform != "darwin":
        return "none"
    name = chip()
    match = re.search(r"\bM(\d+)\b", name)
    if match and f"M{match.group(1)}" in _FAMILIES:
        return _FAMILIES[f"M{match.group(1)}"]
    return re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-").lower() or "unknown"


def os_build() -> str:
    """macOS's build (e.g. 23E224); elsewhere the system and kernel release."""
    if sys.platform == "darwin":
        return _sysctl("kern.osversion") or platform.mac_ver()[0]
    return f"{platform.system()}-{platform.release()}"


def key() -> dict:
    return {"plugin_version": __version__, "os_build": os_build(), "gpu_family": gpu_family()}


def record_path(k: dict | None = None) -> str:
    k = k or key()
    name = "-".join(re.sub(r"[^A-Za-z0-9.]+", "_", str(k[f])) for f in ("plugin_version", "os_build", "gpu_family"))
    return os.path.join(cache_dir(), f"capabilities-{name}.json")


def read_record(path: str | None = None) -> dict:
    try:
        with open(path or record_path()) as f:
            record = json.load(f)
        return record if isinstance(record, dict) else {}
    except (OSError, ValueError):
        return {}


def failing(record: dict) -> list[str]:
    """The record's failing pairs, as "Op:dtype"."""
    checked = record.get("checked", {})
    return sorted(pair for pair, status in checked.items() if status != "ok") if isinstance(checked, dict) else []


def write_record(statuses: dict[str, str], build_commit: str) -> str:
    """Merges this run's per-pair statuses into the record (pairs a quick run left out stay as they
    were) and returns its path."""
    k = key()
    path = record_path(k)
    record = read_record(path)
    checked = record.get("checked") if isinstance(record.get("checked"), dict) else {}
    checked.update(statuses)
    record = dict(k, build_commit=build_commit, checked=checked,
                  updated=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(record, f, indent=1, sort_keys=True)
    os.replace(tmp, path)
    return path


def install() -> list[str]:
    """Hands this machine's failing pairs to placement (JAX_METAL_AVOID) and warns once; returns them."""
    if os.environ.get("JAX_METAL_CAPABILITIES") == "ignore":
        return []
    try:  # no record at all (the check never ran): nothing to ask the system about
        if not any(n.startswith("capabilities-") for n in os.listdir(cache_dir())):
            return []
    except OSError:
        return []
    pairs = failing(read_record())
    if not pairs:
        return []
    mine = [p for p in os.environ.get(AVOID_ENV, "").split(",") if p.strip()]
    os.environ[AVOID_ENV] = ",".join(dict.fromkeys(mine + pairs))
    k = key()
    warnings.warn(
        f"jax-metal-plugin: the self-check found these ops wrong on this machine's Metal (plugin "
        f"{k['plugin_version']}, OS build {k['os_build']}, GPU family {k['gpu_family']}): "
        + ", ".join(p.replace(":", " on ") for p in pairs)
        + ". They run on the CPU (the host executor) instead. Re-run `python -m jax_metal_plugin check` "
        "after updating macOS or the plugin; JAX_METAL_CAPABILITIES=ignore runs them on Metal anyway.",
        MetalCapabilityWarning, stacklevel=3)
    return pairs

"""What this machine's Metal side gets wrong, as the self-check found it or a crash showed it, and
placement's use of it.

`python -m jax_metal_plugin check` records the (op kind, dtype) pairs whose Metal results disagreed
with the host executor's, or whose case crashed or hung, one record per (plugin version, OS build, GPU
family), in the cache directory: JAX_METAL_CACHE_DIR, else ~/Library/Caches/jax-metal-plugin on macOS
and $XDG_CACHE_HOME/jax-metal-plugin (default ~/.cache/jax-metal-plugin) elsewhere. A pair whose
failure is confined to one shape class (empty, rank0, large: exec/capabilities.h) is recorded with it.

A user's process that dies inside the Metal side leaves a crash note beside the record, naming the ops
of the segment it was compiling or encoding (exec/crash_note.h writes it, at the path this module puts
in JAX_METAL_CRASH_NOTE, keyed by plugin build and OS build so that no note outlives an update of
either). The next check clears what it checks again.

When the plugin registers, `install()` hands the record's failing pairs and the note's to placement in
the environment variable JAX_METAL_AVOID ("Add:float16,Sort:float16:empty", which a user may also set
by hand); placement runs those ops on the host executor, and one warning per process says so.
JAX_METAL_CAPABILITIES=ignore turns all of this off (placement then ignores JAX_METAL_AVOID too).
"""

from __future__ import annotations

import ctypes
import datetime
import glob
import json
import os
import platform
import re
import subprocess
import sys
import warnings

from . import __version__, library_path

AVOID_ENV = "JAX_METAL_AVOID"
NOTE_ENV = "JAX_METAL_CRASH_NOTE"


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
    """The record's failing pairs, as "Op:dtype", or "Op:dtype:shape" when the failure is confined to a
    shape class."""
    checked = record.get("checked", {})
    if not isinstance(checked, dict):
        return []
    shapes = record.get("shapes") if isinstance(record.get("shapes"), dict) else {}
    return sorted(pair + (f":{shapes[pair]}" if shapes.get(pair) else "")
                  for pair, status in checked.items() if status != "ok")


def write_record(statuses: dict[str, tuple[str, str]], build_commit: str) -> str:
    """Merges this run's per-pair (status, shape class or "") into the record (pairs a quick run left
    out stay as they were) and returns its path."""
    k = key()
    path = record_path(k)
    record = read_record(path)
    checked = record.get("checked") if isinstance(record.get("checked"), dict) else {}
    shapes = record.get("shapes") if isinstance(record.get("shapes"), dict) else {}
    for pair, (status, shape) in statuses.items():
        checked[pair] = status
        shapes.pop(pair, None)
        if status != "ok" and shape:
            shapes[pair] = shape
    record = dict(k, build_commit=build_commit, checked=checked, shapes=shapes,
                  updated=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
    _write_atomically(path, json.dumps(record, indent=1, sort_keys=True))
    return path


def _write_atomically(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def build_commit() -> str:
    """The commit the plugin library was built from ("unknown" outside a git checkout)."""
    lib = ctypes.CDLL(library_path())
    lib.jmp_build_commit.restype = ctypes.c_char_p
    return lib.jmp_build_commit().decode()


def note_path() -> str:
    """Where a process that dies inside the Metal side leaves its note: keyed by the plugin's build and
    the OS build, so that a note is never read after either changes."""
    parts = (__version__, build_commit()[:12], os_build())
    name = "-".join(re.sub(r"[^A-Za-z0-9.]+", "_", p) for p in parts)
    return os.path.join(cache_dir(), f"crash-note-{name}.txt")


def read_note(path: str) -> tuple[list[str], list[str]]:
    """The note's pairs ("Op:dtype") and the signals that left them ("SIGABRT"), each once."""
    try:
        with open(path) as f:
            lines = [line.strip() for line in f]
    except OSError:
        return [], []
    signals = [line[1:].strip() for line in lines if line.startswith("#")]
    pairs = [line for line in lines if line and not line.startswith("#")]
    return list(dict.fromkeys(pairs)), list(dict.fromkeys(signals))


def clear_note(checked: set[str]) -> list[str]:
    """After a check: drops the pairs it checked from this build's note (deleting the note when none is
    left) and deletes the notes of other builds. Returns the pairs the note still holds."""
    path = note_path()
    for other in glob.glob(os.path.join(cache_dir(), "crash-note-*.txt")):
        if other != path:
            try:
                os.remove(other)
            except OSError:
                pass
    pairs, signals = read_note(path)
    left = [p for p in pairs if p not in checked]
    try:
        if not left:
            os.remove(path)
        elif len(left) < len(pairs):
            _write_atomically(path, "".join(f"# {s}\n" for s in signals) + "".join(f"{p}\n" for p in left))
    except OSError:
        pass
    return left


def _spelled(pairs: list[str]) -> str:
    """"Add:float16:empty" as "Add on float16 (empty shapes)"."""
    out = []
    for pair in pairs:
        op, dtype, *shape = pair.split(":")
        out.append(f"{op} on {dtype}" + (f" ({shape[0]} shapes)" if shape else ""))
    return ", ".join(out)


def install() -> list[str]:
    """Hands this machine's failing pairs and its crash note's to placement (JAX_METAL_AVOID), tells the
    plugin where to leave a crash note, and warns once; returns the pairs."""
    if os.environ.get("JAX_METAL_CAPABILITIES") == "ignore":
        return []
    note = note_path()
    try:  # the note's directory must exist before a signal handler can create the note in it
        os.makedirs(os.path.dirname(note), exist_ok=True)
        os.environ[NOTE_ENV] = note
    except OSError:
        pass
    recorded = failing(read_record()) if glob.glob(os.path.join(cache_dir(), "capabilities-*.json")) else []
    noted, signals = read_note(note)
    if not recorded and not noted:
        return []
    mine = [p for p in os.environ.get(AVOID_ENV, "").split(",") if p.strip()]
    pairs = list(dict.fromkeys(recorded + noted))
    os.environ[AVOID_ENV] = ",".join(dict.fromkeys(mine + pairs))
    k = key()
    parts = []
    if recorded:
        parts.append(f"the self-check found these ops wrong on this machine's Metal (plugin {k['plugin_version']}, "
                     f"OS build {k['os_build']}, GPU family {k['gpu_family']}): {_spelled(recorded)}")
    if noted:
        parts.append(f"an earlier process died ({', '.join(signals) or 'a fatal signal'}) inside the Metal side while it "
                     f"compiled or ran a segment holding these ops: {_spelled(noted)} (note {note})")
    warnings.warn(
        "jax-metal-plugin: " + "; ".join(parts) + ". They run on the CPU (the host executor) instead. Run "
        "`python -m jax_metal_plugin check` (again after updating macOS or the plugin) to find which ops fail; "
        "JAX_METAL_CAPABILITIES=ignore runs them on Metal anyway.",
        MetalCapabilityWarning, stacklevel=3)
    return pairs

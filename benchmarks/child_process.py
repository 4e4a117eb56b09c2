"""The side of a benchmark that starts its measuring processes: JAX fixes its devices (and, across
processes, its distributed state) when it starts, so each measurement runs in a process of its own and
reports one line of JSON."""

from __future__ import annotations

import json
import subprocess


def child_json(cmd, env=None):
    """Runs a measuring child process; its result is the last line of its output that is JSON."""
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, env=env)
    lines = [l for l in proc.stdout.splitlines() if l.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    return json.loads(lines[-1])

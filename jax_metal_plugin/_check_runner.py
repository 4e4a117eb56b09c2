"""The self-check's cases, each run in a child process that may die or block without taking the check
with it (docs/self-check.md).

MPSGraph stops the process with a failed assertion for much of what it rejects, and a GPU fault can
block the caller forever. So the parent never touches Metal: it lists the cases, then starts a fresh
child (a new interpreter, never a fork of a process that has started Metal) for a batch of them. Before
each case and each of its programs the child appends a line to a journal file; the parent reads it as
it grows. A child that dies in a case marks that case `crash` (with the signal or exit status and the
end of its stderr), one that runs a case past the time limit is killed and marks it `hang`; either way
the parent goes on with the rest of the batch in a new child.

Journal lines, each written with one write(2) before what it announces:
    executor {"side": "standin"}   the child made its executors, on this Metal side ("metal",
                                   "standin", "placed", "host"; or {"error": ...}: it cannot)
    start 17                       case 17 begins
    program 2 rank0 "scalar"       its program 2 begins (shape class or "-", and what it is)
    done 17 {...}                  case 17's result (one line of JSON)

Run as `python -m jax_metal_plugin._check_runner JOURNAL QUICK ONLY INDEX,INDEX,...` for a child.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from typing import Callable

DEFAULT_CASE_SECONDS = 60.0
CASE_SECONDS_ENV = "JAX_METAL_CHECK_CASE_SECONDS"
BATCH = 120  # cases per child: a new child costs an interpreter and the library's start


class CheckError(RuntimeError):
    """The check cannot run at all (bad arguments, no Metal side, a child that fails before any case)."""


def library() -> ctypes.CDLL:
    from . import library_path

    lib = ctypes.CDLL(library_path())
    lib.jmp_check_cases.restype = ctypes.c_void_p
    lib.jmp_check_cases.argtypes = [ctypes.c_int32, ctypes.c_char_p]
    lib.jmp_check_case.restype = ctypes.c_void_p
    lib.jmp_check_case.argtypes = [ctypes.c_int32, ctypes.c_char_p, ctypes.c_int32, ctypes.c_int32]
    lib.jmp_check_free.argtypes = [ctypes.c_void_p]
    return lib


def _json_call(lib: ctypes.CDLL, fn, *args) -> dict:
    pointer = fn(*args)
    if not pointer:
        raise CheckError("the plugin library's self-check returned nothing")
    try:
        return json.loads(ctypes.string_at(pointer).decode())
    finally:
        lib.jmp_check_free(pointer)


def list_cases(lib: ctypes.CDLL, quick: bool, only: str) -> list[dict]:
    listed = _json_call(lib, lib.jmp_check_cases, 1 if quick else 0, only.encode())
    if "error" in listed:
        raise CheckError(listed["error"])
    return listed["cases"]


def case_seconds(flag: float | None) -> float:
    if flag:
        return flag
    try:
        return float(os.environ.get(CASE_SECONDS_ENV, "")) or DEFAULT_CASE_SECONDS
    except ValueError:
        return DEFAULT_CASE_SECONDS


def failure_shape(case: dict) -> str:
    """The shape class a failing case's failure is confined to, or "any": every failing program of that
    one class, and some program of the case outside it passed (of those that ran)."""
    shapes, failed = case.get("program_shapes") or [], case.get("failed_programs") or []
    if case.get("status") == "ok" or not failed or any(k >= len(shapes) for k in failed):
        return "any"
    classes = {shapes[k] for k in failed}
    if len(classes) != 1 or "" in classes:
        return "any"
    shape = classes.pop()
    ran = len(shapes) if case["status"] == "mismatch" else max(failed)
    return shape if any(shapes[k] != shape for k in range(ran) if k not in failed) else "any"


class _Journal:
    """What a child has written to its journal so far."""

    def __init__(self, path: str):
        self._file = open(path, "rb")
        self._rest = b""
        self.side: str | None = None  # the Metal side the child runs cases on
        self.error: str | None = None
        self.current: int | None = None  # the case started and not done
        self.since = 0.0  # when the parent saw it start
        self.programs: list[tuple[str, str]] = []  # its programs so far: (shape class, what)
        self.started = 0
        self.done: list[tuple[int, dict]] = []  # finished cases not yet handed on

    def read(self) -> None:
        data = self._rest + self._file.read()
        *lines, self._rest = data.split(b"\n")
        for line in lines:
            word, _, rest = line.decode(errors="replace").partition(" ")
            if word == "executor":
                executor = json.loads(rest)
                self.side, self.error = executor.get("side"), executor.get("error")
            elif word == "start":
                self.current, self.since, self.programs = int(rest), time.monotonic(), []
                self.started += 1
            elif word == "program":
                _, shape, what = rest.split(" ", 2)
                self.programs.append(("" if shape == "-" else shape, json.loads(what)))
            elif word == "done":
                index, _, result = rest.partition(" ")
                self.done.append((int(index), json.loads(result)))
                self.current = None

    def close(self) -> None:
        self._file.close()


def _tail(path: str, lines: int = 6) -> str:
    try:
        with open(path, "rb") as f:
            text = f.read()[-4000:].decode(errors="replace")
    except OSError:
        return ""
    return " | ".join(line.strip() for line in text.strip().splitlines()[-lines:] if line.strip())


def _pass_on(path: str, seen: set[str]) -> None:
    """What a child wrote to stderr, on the check's own stderr: each distinct line once per check (every
    child says the same of a malformed environment variable)."""
    try:
        with open(path, "rb") as f:
            lines = f.read().decode(errors="replace").splitlines()
    except OSError:
        return
    for line in lines:
        if line.strip() and line not in seen:
            seen.add(line)
            print(line, file=sys.stderr)


def _lost_case(listed: dict, journal: _Journal, status: str, why: str, stderr_path: str) -> dict:
    """The result of a case its child did not finish: where it was, and what the child said last."""
    programs = journal.programs
    where = f" in program {len(programs) - 1} ({programs[-1][1]})" if programs else ""
    said = _tail(stderr_path)
    return dict(listed, status=status, worst_error="", bound="", programs=len(programs),
                seconds=round(time.monotonic() - journal.since, 3),
                message=f"{why}{where}" + (f"; its stderr ends: {said}" if said else ""), failures=[],
                program_shapes=[shape for shape, _ in programs],
                failed_programs=[len(programs) - 1] if programs else [])


def _died(code: int) -> str:
    if code < 0:
        try:
            return f"the process died of {signal.Signals(-code).name}"
        except ValueError:
            return f"the process died of signal {-code}"
    return f"the process exited with status {code}"


def run_cases(cases: list[dict], quick: bool, only: str, limit: float, on_case: Callable[[dict], None],
              batch: int = BATCH) -> str | None:
    """Runs every listed case in child processes, calling on_case with each result (with its "shape") as
    it comes; returns the Metal side the children ran them on ("metal", "standin", "placed", "host"; None
    when no case ran)."""
    remaining = list(range(len(cases)))
    side = None
    said: set[str] = set()
    with tempfile.TemporaryDirectory(prefix="jax-metal-check-") as tmp:
        child = 0
        while remaining:
            chunk, remaining = remaining[:batch], remaining[batch:]
            journal_path = os.path.join(tmp, f"journal-{child}.txt")
            stderr_path = os.path.join(tmp, f"stderr-{child}.txt")
            child += 1
            open(journal_path, "wb").close()
            with open(stderr_path, "wb") as err:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "jax_metal_plugin._check_runner", journal_path, "1" if quick else "0", only,
                     ",".join(map(str, chunk))], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
            journal = _Journal(journal_path)
            finished: set[int] = set()
            lost = None

            def hand_on() -> None:
                for index, result in journal.done:
                    result["shape"] = failure_shape(result)
                    finished.add(index)
                    on_case(result)
                journal.done.clear()

            try:
                while True:
                    journal.read()
                    hand_on()
                    code = proc.poll()
                    if code is not None:
                        journal.read()
                        hand_on()
                        if journal.current is not None:
                            lost = _lost_case(cases[journal.current], journal, "crash", _died(code), stderr_path)
                        break
                    if journal.current is not None and time.monotonic() - journal.since > limit:
                        proc.kill()
                        proc.wait()
                        journal.read()
                        hand_on()
                        if journal.current is not None:
                            lost = _lost_case(cases[journal.current], journal, "hang",
                                              f"no result after {limit:g} s, so the process was stopped", stderr_path)
                        break
                    time.sleep(0.02)
            finally:
                if proc.poll() is None:  # the parent itself is being stopped: take the child with it
                    proc.kill()
                    proc.wait()
                journal.close()
                _pass_on(stderr_path, said)
            if journal.error:
                raise CheckError(journal.error)
            side = journal.side or side
            if lost is not None:
                lost["shape"] = failure_shape(lost)
                finished.add(journal.current)
                on_case(lost)
            if journal.started == 0:
                raise CheckError(f"the self-check's child process ran no case ({_died(proc.returncode)}): "
                                 f"{_tail(stderr_path) or 'it said nothing'}")
            remaining = [i for i in chunk if i not in finished] + remaining
    return side


def _child(argv: list[str]) -> int:
    journal_path, quick, only, indices = argv
    fd = os.open(journal_path, os.O_WRONLY | os.O_APPEND)
    lib = library()

    def case(index: int) -> str:
        result = _json_call(lib, lib.jmp_check_case, int(quick), only.encode(), index, fd)
        return json.dumps(result, separators=(",", ":"))

    executor = case(-1)
    os.write(fd, f"executor {executor}\n".encode())
    if "error" in json.loads(executor):
        return 1
    for index in (int(i) for i in indices.split(",") if i):
        os.write(fd, f"start {index}\n".encode())
        os.write(fd, f"done {index} {case(index)}\n".encode())
    os.close(fd)
    return 0


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1:]))

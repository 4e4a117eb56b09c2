"""The self-check (`python -m jax_metal_plugin check`) and placement learning from it, through
subprocesses as a user runs them: a clean run agrees everywhere; injected faults on the Metal side are
found, exactly; the next process routes the failing ops to the host executor, and
JAX_METAL_CAPABILITIES=ignore brings them (and their wrong results) back to Metal. Injected aborts and
hangs are survived by the check case by case, and a user's program that dies inside the Metal side
leaves a note that routes its ops to the host in the next process."""

import json
import os
import pathlib
import re
import signal
import subprocess
import sys

import pytest

# The lowering sorts float keys through integer ones (op_kinds.def's Sort row), so no jitted program
# runs Sort on float16: Sort:int32 is the pair a jitted jnp.sort shows the routing with.
FAULTS = "Add:float16,Sort:float16,Sort:int32"
INJECTED = {("Add", "float16"), ("Sort", "float16"), ("Sort", "int32")}
ENV_FIELDS = {"os_build", "chip", "gpu_family", "metal_device", "mpsgraph_usable", "plugin_version", "build_commit",
              "jax_version", "jaxlib_version", "numpy_version", "python_version", "executor", "other_metal_packages"}


OP_TABLE = pathlib.Path(__file__).resolve().parents[2] / "cpp" / "mps" / "op_kinds.def"


def assumption_rows():
    """Per ASSUMPTION note of the op table: the rows it speaks for (those after it, up to the next note
    or section)."""
    groups, current = [], None
    for line in OP_TABLE.read_text().splitlines():
        if line.startswith("// ----") or line.startswith("// ASSUMPTION;"):
            current = None
        if line.startswith("//") and "ASSUMPTION" in line and not line.startswith("// ASSUMPTION;"):
            current = set()
            groups.append((line, current))
        row = re.match(r"JMP_(?:MPS_OP|MPS_UNARY|MPS_BINARY)\((\w+),", line)
        if row and current is not None:
            current.add(row.group(1))
    return groups


def run(args, cache, **extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("JAX_METAL_INJECT_FAULTS", "JAX_METAL_CAPABILITIES", "JAX_METAL_AVOID", "JAX_METAL_CRASH_NOTE",
                        "JAX_METAL_CHECK_CASE_SECONDS")}
    env.update(JAX_METAL_CACHE_DIR=str(cache), JAX_METAL_EXECUTOR="placed")
    env.update(extra)
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, timeout=600)


def check(tmp_path, cache, *flags, **extra):
    report = tmp_path / "report.json"
    proc = run(["-m", "jax_metal_plugin", "check", *flags, "--json", str(report)], cache, **extra)
    return proc, json.loads(report.read_text())


def flagged(report):
    return {(c["op"], c["dtype"]) for c in report["cases"] if c["status"] != "ok"}


def test_quick_check_agrees_everywhere_and_reports_the_environment(tmp_path):
    proc, report = check(tmp_path, tmp_path / "cache", "--quick")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    assert flagged(report) == set()
    pairs = {(c["op"], c["dtype"]) for c in report["cases"]}
    assert len(pairs) >= 200
    assert ENV_FIELDS <= set(report["environment"])
    env = report["environment"]
    assert env["executor"] == "placed" and env["metal_device"] is False
    assert env["plugin_version"] and env["jax_version"] != "not installed"
    # A probe for every ASSUMPTION note of the op table.
    probed = {c["op"] for c in report["cases"] if c.get("probe")}
    groups = assumption_rows()
    assert len(groups) >= 17
    unprobed = [note for note, rows in groups if not rows & probed]
    assert not unprobed, unprobed
    assert " 0 mismatch, 0 error" in proc.stdout.strip().splitlines()[-1]


def test_full_sweep_agrees_and_covers_large_shapes(tmp_path):
    proc, report = check(tmp_path, tmp_path / "cache")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    assert flagged(report) == set()
    assert len({(c["op"], c["dtype"]) for c in report["cases"]}) >= 700
    # The full sweep adds the large shapes (past 2^16 elements) the quick one leaves out.
    _, quick = check(tmp_path, tmp_path / "cache", "--quick", "--only", "Add:float32,Sort:int32,ReductionSum:float32")
    programs = {(c["op"], c["dtype"]): c["programs"] for c in report["cases"] if not c.get("probe")}
    for c in quick["cases"]:
        assert programs[(c["op"], c["dtype"])] == c["programs"] + 1


PROGRAM = r"""
import json, warnings
warnings.simplefilter("always")
import jax, jax.numpy as jnp, numpy as np
import jax_metal_plugin

def f(x, y):
    return x + y

def g(x):
    return jnp.sort(x)

x = (np.arange(12, dtype=np.float32) / 4 - 1).astype(jnp.float16)
y = (np.arange(12, dtype=np.float32)[::-1] / 8).astype(jnp.float16)
z = (np.cos(np.arange(40, dtype=np.float32)) * 1000).astype(np.int32)
metal, cpu = jax.devices("metal")[0], jax.devices("cpu")[0]
out = {}
for name, fn, args in (("add", f, (x, y)), ("sort", g, (z,))):
    on_metal = np.asarray(jax.jit(fn)(*[jax.device_put(a, metal) for a in args])).astype(np.float32)
    on_cpu = np.asarray(jax.jit(fn)(*[jax.device_put(a, cpu) for a in args])).astype(np.float32)
    out[name] = {"same": bool(np.array_equal(on_metal, on_cpu)),
                 "graph": jax_metal_plugin.mps_graph(fn, *args)}
print(json.dumps(out))
"""


def jit_in_new_process(cache, **extra):
    proc = run(["-c", PROGRAM], cache, JAX_PLATFORMS="metal,cpu", **extra)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


def op_lines(graph, op):
    return [line for line in graph.splitlines() if f"= {op}(" in line]


def test_injected_faults_are_found_exactly_and_placement_routes_around_them(tmp_path):
    cache = tmp_path / "cache"
    proc, report = check(tmp_path, cache, "--quick", JAX_METAL_INJECT_FAULTS=FAULTS)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr
    assert flagged(report) == INJECTED
    assert all(c["status"] == "mismatch" for c in report["cases"] if (c["op"], c["dtype"]) in flagged(report))
    table = [line.split() for line in proc.stdout.splitlines()]
    assert {(r[0], r[1]) for r in table if len(r) >= 3 and r[2] in ("mismatch", "error")} == INJECTED
    assert "FAILED: Add:float16,Sort:float16,Sort:int32" in proc.stdout

    # The next process reads the record: both ops run on the host executor and give cpu's results,
    # with one warning naming them and the check.
    routed, stderr = jit_in_new_process(cache, JAX_METAL_INJECT_FAULTS=FAULTS)
    assert routed["add"]["same"] and routed["sort"]["same"]
    assert op_lines(routed["add"]["graph"], "Add") and all("@host" in l for l in op_lines(routed["add"]["graph"], "Add"))
    assert all("@host" in l for l in op_lines(routed["sort"]["graph"], "Sort"))
    assert op_lines(routed["sort"]["graph"], "Sort")
    assert stderr.count("MetalCapabilityWarning") == 1
    assert all(f"{op} on {dtype}" in stderr for op, dtype in INJECTED) and "jax_metal_plugin check" in stderr

    # Ignoring the record puts them back on Metal, where the faults are real.
    ignored, stderr = jit_in_new_process(cache, JAX_METAL_INJECT_FAULTS=FAULTS, JAX_METAL_CAPABILITIES="ignore")
    assert not ignored["add"]["same"] and not ignored["sort"]["same"]
    assert all("@metal" in l for l in op_lines(ignored["add"]["graph"], "Add"))
    assert all("@metal" in l for l in op_lines(ignored["sort"]["graph"], "Sort"))
    assert "MetalCapabilityWarning" not in stderr

    # A clean check afterwards clears the record, and the ops go back to Metal.
    proc, report = check(tmp_path, cache, "--quick")
    assert proc.returncode == 0 and flagged(report) == set()
    clean, stderr = jit_in_new_process(cache)
    assert clean["add"]["same"] and all("@metal" in l for l in op_lines(clean["add"]["graph"], "Add"))
    assert "MetalCapabilityWarning" not in stderr


def test_a_malformed_fault_list_is_reported_not_fatal(tmp_path):
    proc, report = check(tmp_path, tmp_path / "cache", "--quick", "--only", "Add:float32",
                         JAX_METAL_INJECT_FAULTS="Add:float99")
    assert proc.returncode == 0
    assert "float99" in proc.stderr
    assert [(c["op"], c["dtype"]) for c in report["cases"]] == [("Add", "float32")]


@pytest.mark.parametrize("flags", [["--only", "Nope:float32"]])
def test_bad_arguments_exit_2_with_a_message(tmp_path, flags):
    proc = run(["-m", "jax_metal_plugin", "check", *flags], tmp_path / "cache")
    assert proc.returncode == 2 and "Nope" in proc.stderr


# An abort, a hang and a corruption at once. The hang's time limit is short (a quick case takes
# milliseconds) but not so short that a loaded machine turns a slow case into a hang.
MIXED = "Add:float16,Multiply:float32:abort,Negative:float32:hang"
MIXED_STATUS = {("Add", "float16"): "mismatch", ("Multiply", "float32"): "crash", ("Negative", "float32"): "hang"}
CASE_SECONDS = "8"

MIXED_PROGRAM = r"""
import json, warnings
warnings.simplefilter("always")
import jax, jax.numpy as jnp, numpy as np
import jax_metal_plugin

def f(x, y, a, b):
    return x + y, a * b, -a

x = (np.arange(12, dtype=np.float32) / 4 - 1).astype(jnp.float16)
y = (np.arange(12, dtype=np.float32)[::-1] / 8).astype(jnp.float16)
a = np.linspace(-2, 3, 12, dtype=np.float32)
b = np.cos(np.arange(12, dtype=np.float32))
args = (x, y, a, b)
metal, cpu = jax.devices("metal")[0], jax.devices("cpu")[0]
on_metal = jax.jit(f)(*[jax.device_put(v, metal) for v in args])
on_cpu = jax.jit(f)(*[jax.device_put(v, cpu) for v in args])
same = [bool(np.array_equal(np.asarray(m), np.asarray(c))) for m, c in zip(on_metal, on_cpu)]
print(json.dumps({"same": same, "graph": jax_metal_plugin.mps_graph(f, *args)}))
"""


def run_mixed(cache, **extra):
    proc = run(["-c", MIXED_PROGRAM], cache, JAX_PLATFORMS="metal,cpu", **extra)
    lines = proc.stdout.strip().splitlines()
    return proc, (json.loads(lines[-1]) if proc.returncode == 0 and lines else None)


def placed_on(graph, op):
    """Where the program's `op` lines run: "host", "metal", or "both"."""
    lines = op_lines(graph, op)
    assert lines, graph
    places = {"host" if "@host" in line else "metal" for line in lines}
    return places.pop() if len(places) == 1 else "both"


# The faults strike on the Metal side whatever stands in for it here: the Metal executor over the
# stand-in of MPSGraph (the default off macOS) and placed mode's host executor.
METAL_SIDES = ["standin", "placed"]


@pytest.mark.parametrize("side", METAL_SIDES)
def test_the_check_survives_an_abort_and_a_hang_and_placement_routes_around_all_three(tmp_path, side):
    cache = tmp_path / "cache"
    proc, report = check(tmp_path, cache, "--quick", JAX_METAL_INJECT_FAULTS=MIXED,
                         JAX_METAL_CHECK_CASE_SECONDS=CASE_SECONDS, JAX_METAL_EXECUTOR=side)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr
    statuses = {}
    for c in report["cases"]:
        statuses.setdefault((c["op"], c["dtype"]), set()).add(c["status"])
    failing = {pair: s for pair, s in statuses.items() if s != {"ok"}}
    assert failing == {pair: {status} for pair, status in MIXED_STATUS.items()}, failing
    assert report["summary"]["complete"] and report["summary"]["crash"] >= 1 and report["summary"]["hang"] >= 1
    assert len(statuses) >= 200  # the cases after the crash and the hang ran too
    by_pair = {(c["op"], c["dtype"]): c for c in report["cases"]}
    crash, hang = by_pair[("Multiply", "float32")], by_pair[("Negative", "float32")]
    assert "SIGABRT" in crash["message"] and "injected fault" in crash["message"]
    assert f"after {CASE_SECONDS} s" in hang["message"]
    assert crash["shape"] == hang["shape"] == "any"
    assert "FAILED: Add:float16,Multiply:float32,Negative:float32" in proc.stdout
    assert report["environment"]["executor"] == side

    # The next process, with the same faults: cpu's results, each of the three ops on the host.
    routed, result = run_mixed(cache, JAX_METAL_INJECT_FAULTS=MIXED, JAX_METAL_EXECUTOR=side)
    assert result is not None, routed.stderr[-3000:]
    assert result["same"] == [True, True, True]
    for op in ("Add", "Multiply", "Negative"):
        assert placed_on(result["graph"], op) == "host", result["graph"]
    assert routed.stderr.count("MetalCapabilityWarning") == 1


@pytest.mark.parametrize("side", METAL_SIDES)
def test_a_program_that_dies_inside_the_metal_side_dies_once(tmp_path, side):
    cache = tmp_path / "cache"
    cache.mkdir()
    # A note of another plugin or OS build is never read.
    (cache / "crash-note-0.0.0-0000000-OtherOS-1.txt").write_text("# SIGABRT\nSort:int32\n")
    faults = {"JAX_METAL_INJECT_FAULTS": "Multiply:float32:abort", "JAX_METAL_EXECUTOR": side}
    died, result = run_mixed(cache, **faults)
    assert result is None and died.returncode == -signal.SIGABRT, died.stdout[-2000:] + died.stderr[-3000:]
    assert "injected fault" in died.stderr
    [note] = [p for p in cache.glob("crash-note-*.txt") if "OtherOS" not in p.name]
    lines = note.read_text().splitlines()
    noted = [line for line in lines if not line.startswith("#")]
    assert lines[0] == "# SIGABRT" and "Multiply:float32" in noted, lines

    # The next process: the noted ops run on the host, with cpu's results and one warning.
    again, result = run_mixed(cache, **faults)
    assert result is not None, again.stderr[-3000:]
    assert result["same"] == [True, True, True]
    assert placed_on(result["graph"], "Multiply") == "host", result["graph"]
    assert again.stderr.count("MetalCapabilityWarning") == 1
    assert "Multiply on float32" in again.stderr and "jax_metal_plugin check" in again.stderr
    assert "SIGABRT" in again.stderr and "Sort" not in again.stderr

    # Until the check runs again: a check of part of the noted ops leaves the rest noted (and deletes
    # the stale note); once it has checked them all, it has found the fault itself and the note is gone.
    proc, report = check(tmp_path, cache, "--quick", "--only", "Negative:float32", **faults)
    assert proc.returncode == 0
    assert [p.name for p in cache.glob("crash-note-*.txt")] == [note.name]
    assert "Negative:float32" not in note.read_text() and "Multiply:float32" in note.read_text()
    proc, report = check(tmp_path, cache, "--quick", "--only", ",".join(noted), **faults,
                         JAX_METAL_CHECK_CASE_SECONDS=CASE_SECONDS)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr
    assert {(c["op"], c["dtype"]) for c in report["cases"] if c["status"] != "ok"} == {("Multiply", "float32")}
    assert {c["status"] for c in report["cases"] if c["op"] == "Multiply"} == {"crash"}
    assert not list(cache.glob("crash-note-*.txt"))
    # Without the fault, a clean check clears the record too, and Multiply is back on Metal.
    proc, _ = check(tmp_path, cache, "--quick", "--only", "Multiply:float32", JAX_METAL_EXECUTOR=side)
    assert proc.returncode == 0, proc.stdout[-3000:]
    clean, result = run_mixed(cache, JAX_METAL_EXECUTOR=side)
    assert result is not None and result["same"] == [True, True, True]
    assert placed_on(result["graph"], "Multiply") == "metal"
    assert "MetalCapabilityWarning" not in clean.stderr


def test_a_failure_confined_to_a_shape_class_routes_only_that_class(tmp_path):
    cache = tmp_path / "cache"
    proc, report = check(tmp_path, cache, "--quick", "--only", "Add:float32",
                         JAX_METAL_INJECT_FAULTS="Add:float32:rank0")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr
    [case] = [c for c in report["cases"] if not c.get("probe")]
    assert case["status"] == "mismatch" and case["shape"] == "rank0"
    assert {case["program_shapes"][k] for k in case["failed_programs"]} == {"rank0"}
    assert "" in case["program_shapes"]  # a program of ordinary shape passed
    program = r"""
import json, warnings
import jax, jax.numpy as jnp, numpy as np
import jax_metal_plugin
scalar = lambda s, t: s + t
vector = lambda v, w: v + w
s, v = np.float32(1.5), np.arange(4, dtype=np.float32)
metal, cpu = jax.devices("metal")[0], jax.devices("cpu")[0]
out = {}
for name, fn, args in (("scalar", scalar, (s, s)), ("vector", vector, (v, v))):
    got = jax.jit(fn)(*[jax.device_put(a, metal) for a in args])
    want = jax.jit(fn)(*[jax.device_put(a, cpu) for a in args])
    out[name] = {"same": bool(np.array_equal(np.asarray(got), np.asarray(want))),
                 "graph": jax_metal_plugin.mps_graph(fn, *args)}
print(json.dumps(out))
"""
    routed = run(["-c", program], cache, JAX_PLATFORMS="metal,cpu", JAX_METAL_INJECT_FAULTS="Add:float32:rank0")
    assert routed.returncode == 0, routed.stderr[-3000:]
    out = json.loads(routed.stdout.strip().splitlines()[-1])
    assert out["scalar"]["same"] and out["vector"]["same"]
    assert placed_on(out["scalar"]["graph"], "Add") == "host"
    assert placed_on(out["vector"]["graph"], "Add") == "metal"
    assert "Add on float32 (rank0 shapes)" in routed.stderr

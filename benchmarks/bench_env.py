"""The process environment a benchmark run measures in, set before jax, the plugin or OpenBLAS load (the
suite processes run.py starts inherit it)."""

from __future__ import annotations

import os
import sys

# --isa holds both sides to one x86-64 level, so that a figure does not depend on what this CPU has beyond
# it (Apple's CPUs have 128-bit NEON: SSE4.2 is the nearest level here). Set before either side loads:
# the host executor's vector loops (JMP_HOST_ISA) and XLA:CPU's generated code (--xla_cpu_max_isa).
# Matrix products are left at the CPU's best on both sides: XLA:CPU's run in YNNPACK, which picks its
# kernels from the CPU at run time whatever --xla_cpu_max_isa says (jaxlib 0.10 and 0.12 alike), so
# OpenBLAS, the host executor's, picks its own too; holding it lower would compare two levels again.
ISA_LEVELS = {  # level: (JMP_HOST_ISA, --xla_cpu_max_isa)
    "sse4.2": ("sse4.2", "SSE4_2"),
    "avx2": ("avx2", "AVX2"),
    "avx512": ("avx512", "AVX512"),
}


def asked_isa(argv):
    for i, a in enumerate(argv):
        if a == "--isa" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--isa="):
            return a.split("=", 1)[1]
    return None


def settle(argv):
    """Sets the run's environment; returns the OPENBLAS_CORETYPE pin it lifted, if any."""
    os.environ.setdefault("JAX_PLATFORMS", "metal,cpu")
    # Off macOS the plugin's default Metal side is the stand-in, a model of MPSGraph that checks every call
    # and computes nothing fast; what a benchmark here measures is the host executor, which on a Mac runs
    # the host segments (float64, LAPACK, loops kept on the CPU).
    if sys.platform != "darwin":
        os.environ.setdefault("JAX_METAL_EXECUTOR", "placed")

    # XLA:CPU generates code for the CPU it runs on (AVX-512 where there is AVX-512); OpenBLAS, which does
    # the host executor's matrix products on Linux, picks its kernel for the CPU too, unless
    # OPENBLAS_CORETYPE pins one. A machine image that pins an older kernel (Haswell's AVX2 on an AVX-512
    # CPU) would make every matmul-bound ratio a comparison of two instruction sets, not of two backends,
    # and ratios from machines with and without the pin would disagree. So the pin is lifted before
    # OpenBLAS loads and recorded; --keep-blas-coretype keeps it.
    lifted = None
    if "--keep-blas-coretype" not in argv and "JMP_BENCH_KEEP_BLAS_CORETYPE" not in os.environ:
        lifted = os.environ.pop("OPENBLAS_CORETYPE", None)
    else:
        os.environ["JMP_BENCH_KEEP_BLAS_CORETYPE"] = "1"  # the suite processes keep it too

    isa = asked_isa(argv)
    if isa in ISA_LEVELS:
        host_isa, xla_isa = ISA_LEVELS[isa]
        os.environ["JMP_HOST_ISA"] = host_isa
        flags = [f for f in os.environ.get("XLA_FLAGS", "").split() if not f.startswith("--xla_cpu_max_isa")]
        os.environ["XLA_FLAGS"] = " ".join(flags + [f"--xla_cpu_max_isa={xla_isa}"])
    return lifted


def isa_settings(asked):
    """The level each side ran at: what --isa asked, the host executor's level as the plugin reports it,
    XLA:CPU's cap and OpenBLAS's kernel (None: the CPU's best)."""
    try:
        import jax_metal_plugin
        host = jax_metal_plugin.host_isa() or None
    except ImportError:
        host = None
    xla = next((f.split("=", 1)[1] for f in os.environ.get("XLA_FLAGS", "").split()
                if f.startswith("--xla_cpu_max_isa=")), None)
    return {"asked": asked, "host_executor": host, "xla_cpu_max_isa": xla,
            "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE")}

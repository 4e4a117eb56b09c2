"""The machine and the versions a benchmark run measured on, for its results."""

from __future__ import annotations

import ctypes
import os
import platform as platform_module
import subprocess
import sys

import jax


def machine_facts(blas_coretype_lifted=None):
    """What the run measured on; `blas_coretype_lifted`: the OPENBLAS_CORETYPE pin bench_env.settle lifted."""
    facts = {"platform": platform_module.platform(), "machine": platform_module.machine(),
             "python": platform_module.python_version(), "cores": os.cpu_count(), "load_avg_start": os.getloadavg()}
    if hasattr(os, "sched_getaffinity"):
        facts["cores_usable"] = len(os.sched_getaffinity(0))
    try:
        facts["memory_bytes"] = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        pass
    try:
        if sys.platform == "darwin":
            facts["cpu"] = subprocess.run(["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True,
                                          text=True).stdout.strip()
        else:
            with open("/proc/cpuinfo") as f:
                facts["cpu"] = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), None)
    except OSError:
        pass
    facts["vector_isa"] = vector_isa()
    facts["blas"] = blas_facts()
    facts["env"] = {k: v for k, v in os.environ.items() if k.startswith(("JMP_", "JAX_", "XLA_", "OPENBLAS_", "OMP_"))}
    if blas_coretype_lifted is not None:
        facts["env_lifted"] = {"OPENBLAS_CORETYPE": blas_coretype_lifted}
    return facts


def vector_isa():
    """The widest vector extensions the CPU has (what BLAS kernels and XLA:CPU's code pick from)."""
    if sys.platform == "darwin":
        feats = []
        for name in ("hw.optional.neon", "hw.optional.arm.FEAT_BF16", "hw.optional.arm.FEAT_I8MM",
                     "hw.optional.arm.FEAT_SME"):
            out = subprocess.run(["sysctl", "-n", name], capture_output=True, text=True).stdout.strip()
            if out == "1":
                feats.append(name.rsplit(".", 1)[-1])
        return feats
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((l.split(":", 1)[1].split() for l in f if l.startswith(("flags", "Features"))), [])
    except OSError:
        return None
    wanted = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_bf16", "avx512_vnni",
              "amx_tile", "asimd", "sve")
    return [f for f in wanted if f in flags]


def blas_facts():
    """The BLAS libraries loaded in this process (the plugin's host matmuls, numpy's), their kernel
    (OpenBLAS's core type) and threads, from threadpoolctl when it is installed."""
    try:
        import jax_metal_plugin
        ctypes.CDLL(jax_metal_plugin.library_path())  # load the plugin's BLAS before looking
        from threadpoolctl import threadpool_info
    except (ImportError, OSError):
        return None
    keep = ("internal_api", "prefix", "version", "architecture", "threading_layer", "num_threads", "filepath")
    return [{k: info.get(k) for k in keep} for info in threadpool_info()]


def versions():
    out = {"jax": jax.__version__}
    try:
        import jaxlib
        import jax_metal_plugin
        out["jaxlib"] = jaxlib.__version__
        out["jax_metal_plugin"] = jax_metal_plugin.__version__
    except ImportError:
        pass
    try:
        here = os.path.dirname(os.path.abspath(__file__))
        out["git_commit"] = subprocess.run(["git", "-C", here, "rev-parse", "HEAD"], capture_output=True,
                                           text=True).stdout.strip() or None
    except OSError:
        pass
    return out

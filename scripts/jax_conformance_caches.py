"""pytest plugin of scripts/jax_conformance.py: JAX's in-memory caches are emptied when the process grows.

A JAX test file compiles a few thousand programs and JAX keeps every one of them (its jit, lowering and
executable caches) until the process ends, on any backend: the process's peak RSS then grows with the
file's length (on XLA:CPU alone too) and says nothing of the backend's own memory. Emptied after any
test that leaves the resident set above JAX_CONFORMANCE_RSS_LIMIT bytes (default 1 GiB; 0: after every
test), the peak is that limit plus the largest test's working set, where a backend that leaks or holds
too much shows; below the limit, later tests reuse what earlier ones compiled, as in a plain run.
Nothing a test checks within itself changes: the caches are emptied between tests only.
"""

import gc
import os

_LIMIT = int(os.environ.get("JAX_CONFORMANCE_RSS_LIMIT", str(2**30)))
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _resident_bytes():
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * _PAGE
    except OSError:  # no /proc (macOS): empty them after every test
        return None


def pytest_runtest_teardown(item, nextitem):
    rss = _resident_bytes()
    if _LIMIT and rss is not None and rss <= _LIMIT:
        return
    import jax

    jax.clear_caches()
    gc.collect()

"""pytest plugin of scripts/jax_conformance.py: JAX's in-memory caches are emptied after every test.

A JAX test file compiles a few thousand programs and JAX keeps every one of them (its jit, lowering and
executable caches) until the process ends, on any backend: the process's peak RSS then grows with the
file's length (on XLA:CPU alone too) and says nothing of the backend's own memory. Emptied after each
test, the peak is the largest single test's working set, where a backend that leaks or holds too much
shows. Nothing a test checks within itself changes: the caches are emptied between tests only.
"""

import gc


def pytest_runtest_teardown(item, nextitem):
    import jax

    jax.clear_caches()
    gc.collect()

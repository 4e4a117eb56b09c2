"""pytest plugin of scripts/jax_multi_device.py: JAX's device-under-test flag (`jax_test_dut`) from
JAX_CONFORMANCE_TEST_DUT.

JAX's device tags (`run_on_devices("cpu")` and the like) name the platforms a test runs on, and skip it
on every other, a plugin included: mostly for a test's cost, sometimes for what only one platform does.
With the flag set to `cpu`, the tags let the test run while its arrays still live on the default
backend, so a test JAX keeps to CPU is measured on the plugin against CPU's own expectations: where it
checks what only CPU does, it fails, and counts as a failure.
"""

import os

_DUT = os.environ.get("JAX_CONFORMANCE_TEST_DUT")


def pytest_runtest_setup(item):
    # Set once the test files have imported JAX's test_util (which defines the flag), never earlier:
    # test_util binds sys.stdout when it is imported, and pytest's capture must already be in place then.
    global _DUT
    if not _DUT:
        return
    import jax
    from jax_metal_plugin._jax_internals import module

    module("test_util")  # defines the flag
    jax.config.update("jax_test_dut", _DUT)
    _DUT = None

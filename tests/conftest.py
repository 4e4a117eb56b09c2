"""Test set-up: run JAX with both the metal plugin and the CPU backend, so every test can compare.

Tests live in folders by layer (ops/, runtime/, programs/, tooling/); the shared helpers beside this
file (jaxcompare.py, artifacts.py) are imported by name from any of them, so this folder goes on
sys.path first.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# Tests that start Python processes (`python -c ...`, `python -m jax_metal_plugin ...`) must get the
# installed package, as pytest itself does, not the source folder they are started in: a checkout has
# no built plugin library there. Python 3.11+ then leaves the working directory off sys.path.
os.environ["PYTHONSAFEPATH"] = "1"

# Before jax is imported anywhere: both platforms, metal first. A plugin that fails to load must fail
# the tests, never skip them.
os.environ.setdefault("JAX_PLATFORMS", "metal,cpu")
os.environ.setdefault("JAX_ENABLE_X64", "0")

import jax  # noqa: E402
import pytest  # noqa: E402
from jaxcompare import jax_config  # noqa: E402


def pytest_configure(config):
    platforms = {d.platform for d in jax.devices("metal")} | {d.platform for d in jax.devices("cpu")}
    assert platforms == {"metal", "cpu"}, f"expected metal and cpu devices, got {platforms}"


@pytest.fixture(scope="session")
def metal_device():
    return jax.devices("metal")[0]


@pytest.fixture(scope="session")
def cpu_device():
    return jax.devices("cpu")[0]


@pytest.fixture
def x64():
    """jax_enable_x64 on for one test, restored after it."""
    with jax_config("jax_enable_x64", True):
        yield


@pytest.fixture(scope="module")
def x64_module():
    """jax_enable_x64 on for a whole module (`pytestmark = pytest.mark.usefixtures("x64_module")`), for
    modules whose every test runs 64-bit programs: set once, restored after the module's last test."""
    with jax_config("jax_enable_x64", True):
        yield

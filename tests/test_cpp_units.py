"""The C++ unit tests (cpp/unit_tests: host kernels on hand-built MPS graphs for the op table's
ASSUMPTION rows, VerifyGraph's rejections, element conversions, the host plan), one pytest item each."""

import pytest

# A developer build's module (pip install . builds it); an installed wheel has none.
_core = pytest.importorskip("jax_metal_plugin._core", reason="the C++ unit tests need a developer build "
                            "(pip install . builds jax_metal_plugin._core; the wheel carries no Python extension)")

NAMES = _core.unit_tests()


def test_the_unit_tests_are_built_in():
    assert len(NAMES) >= 20, NAMES
    assert len(set(NAMES)) == len(NAMES), "two C++ tests share a name"


@pytest.mark.parametrize("name", NAMES)
def test_cpp(name):
    passed, failures = _core.run_unit_test(name)
    assert passed, failures


def test_an_unknown_name_fails_rather_than_passes():
    passed, failures = _core.run_unit_test("NoSuch.Test")
    assert not passed and "no unit test named" in failures

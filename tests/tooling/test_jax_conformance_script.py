"""scripts/jax_conformance.py's own bookkeeping: version-marked known failures and skip classification."""

import importlib.util
import os

import pytest

_SCRIPT = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "scripts", "jax_conformance.py")
_spec = importlib.util.spec_from_file_location("jax_conformance", _SCRIPT)
jc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(jc)


def test_known_list_version_markers(tmp_path):
    path = tmp_path / "known.txt"
    path.write_text("# comment\n\n"
                    "a_test::T::always  # cause a\n"
                    "a_test::T::from_011 [>=0.11.0]  # cause b\n"
                    "a_test::T::before_011 [<0.11.0]  # cause c\n")
    assert jc.load_known(str(path), "0.10.2") == {"a_test::T::always": "cause a", "a_test::T::before_011": "cause c"}
    assert jc.load_known(str(path), "0.11.0") == {"a_test::T::always": "cause a", "a_test::T::from_011": "cause b"}
    assert set(jc.load_known(str(path), "0.12.1")) == {"a_test::T::always", "a_test::T::from_011"}


def test_known_list_side_markers(tmp_path):
    path = tmp_path / "known.txt"
    path.write_text("a_test::T::always  # cause a\n"
                    "a_test::T::placed_only [placed]  # cause b\n"
                    "a_test::T::both [>=0.11.0] [standin]  # cause c\n")
    assert set(jc.load_known(str(path), "0.11.0", "placed")) == {"a_test::T::always", "a_test::T::placed_only"}
    assert set(jc.load_known(str(path), "0.11.0", "standin")) == {"a_test::T::always", "a_test::T::both"}
    assert set(jc.load_known(str(path), "0.10.2", "standin")) == {"a_test::T::always"}
    path.write_text("a_test::T::x [gpu]  # no such side\n")
    with pytest.raises(SystemExit):
        jc.load_known(str(path), "0.11.0", "placed")


def test_known_list_rejects_malformed_entry(tmp_path):
    path = tmp_path / "known.txt"
    path.write_text("a_test::T::x [=0.11.0]  # bad marker\n")
    with pytest.raises(SystemExit):
        jc.load_known(str(path), "0.11.0")


def test_the_repository_known_list_parses_for_both_versions():
    old, new = jc.load_known(jc.KNOWN, "0.10.2"), jc.load_known(jc.KNOWN, "0.11.0")
    assert old and new
    assert not any(t.startswith("nn_test::NNFunctionsTest::testScaledMatmul") for t in old)
    assert "nn_test::NNFunctionsTest::testScaledMatmul0" in new


@pytest.mark.parametrize("reason,ours", [
    ("Test requires GPU.", False),  # GPU only: skips on CPU too
    ("Test requires GPU or CPU.", True),  # runs on CPU: a skip on metal is a failure
    ("Test requires >= 2 devices", False),  # one device, as JAX's CPU backend by default: skips there too
    ("Works only when number of devices is a multiple of 2.", False),
    ("Pivoting is only supported on CPU and GPU.", True),  # runs on CPU
    ("Skipped on devices with tags: ['cpu']", False),
])
def test_skip_classification(reason, ours):
    assert (jc.NOT_OURS.search(reason) is None) == ours


@pytest.mark.parametrize("keep_caches", [False, True])
def test_caches_emptied_between_tests_unless_kept(tmp_path, keep_caches):
    # With a limit of 0 GiB the caches are emptied after every test: test_b sees test_a's compiled
    # program only when the script keeps JAX's caches.
    tests_dir = tmp_path / "tests"
    tests_dir.mkdir()
    (tests_dir / "two_test.py").write_text(
        "import jax\n"
        "f = jax.jit(lambda x: x + 1)\n"
        "def test_a():\n"
        "    f(1.0)\n"
        "    assert f._cache_size() == 1\n"
        "def test_b():\n"
        "    assert f._cache_size() == 0\n")
    results, rss, _, note = jc.run_file(str(tests_dir), "two_test", 300, str(tmp_path), keep_caches, rss_limit=0)
    assert note == "" and rss > 0
    assert results["two_test::two_test::test_a"][0] == "passed"
    assert results["two_test::two_test::test_b"][0] == ("failed" if keep_caches else "passed")


def test_caches_kept_below_the_limit(tmp_path):
    tests_dir = tmp_path / "tests"
    tests_dir.mkdir()
    (tests_dir / "two_test.py").write_text(
        "import jax\n"
        "f = jax.jit(lambda x: x + 1)\n"
        "def test_a():\n"
        "    f(1.0)\n"
        "def test_b():\n"
        "    assert f._cache_size() == 1\n")
    results, _, _, note = jc.run_file(str(tests_dir), "two_test", 300, str(tmp_path), rss_limit=64.0)
    assert note == "" and results["two_test::two_test::test_b"][0] == "passed"


def test_multi_device_tally():
    spec = importlib.util.spec_from_file_location(
        "jax_multi_device", os.path.join(os.path.dirname(_SCRIPT), "jax_multi_device.py"))
    jm = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(jm)
    cpu = {"f::T::a": ("passed", ""), "f::T::b": ("passed", ""), "f::T::c": ("passed", ""), "f::T::d": ("failed", "x")}
    metal = {"f::T::a": ("passed", ""), "f::T::b": ("failed", "skip: Skipped unless running on devices with tags: cpu"),
             "f::T::c": ("failed", "boom"), "f::T::d": ("passed", "")}
    cpu_passed, both, tagged, missing = jm.tally(cpu, metal)
    assert cpu_passed == {"f::T::a", "f::T::b", "f::T::c"}
    assert both == {"f::T::a"} and tagged == {"f::T::b"} and missing == ["f::T::c"]


def test_run_file_runs_the_tests_named_with_the_plugins_given(tmp_path):
    # The multi-device script runs the tests JAX's tags skip once more, alone, with a plugin loaded.
    tests_dir = tmp_path / "tests"
    tests_dir.mkdir()
    (tests_dir / "mark_plugin.py").write_text(
        "import os\n"
        "def pytest_configure(config):\n"
        "    os.environ['MARKED'] = 'yes'\n")
    (tests_dir / "three_test.py").write_text(
        "import os\n"
        "def test_a():\n"
        "    pass\n"
        "def test_b():\n"
        "    assert os.environ.get('MARKED') == 'yes'\n"
        "class TestC:\n"
        "    def test_c(self):\n"
        "        assert os.environ.get('MARKED') == 'yes'\n")
    wanted = ["three_test::three_test::test_b", "three_test::TestC::test_c"]
    results, _, _, note = jc.run_file(str(tests_dir), "three_test", 300, str(tmp_path), tests=wanted,
                                      plugins=("mark_plugin",))
    assert note == ""
    assert results == {test: ("passed", "") for test in wanted}
    results, _, _, _ = jc.run_file(str(tests_dir), "three_test", 300, str(tmp_path), tests=wanted[:1])
    assert results == {wanted[0]: ("failed", results[wanted[0]][1])}

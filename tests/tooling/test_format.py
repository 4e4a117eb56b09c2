"""The C++ sources are formatted by .clang-format, with the clang-format release the test extra pins."""

import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PINNED = "21.1.8"  # pyproject.toml's test extra


def sources():
    files = subprocess.run(["git", "ls-files", "cpp", "fuzz"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    return [f for f in files if f.endswith((".cc", ".h", ".mm"))]


def test_cpp_sources_are_formatted():
    beside = pathlib.Path(sys.executable).parent / "clang-format"  # the venv's, activated or not
    tool = str(beside) if beside.exists() else shutil.which("clang-format")
    assert tool, "clang-format is missing: pip install \".[test]\" installs the pinned one"
    version = subprocess.run([tool, "--version"], capture_output=True, text=True).stdout
    if PINNED not in version:
        pytest.fail(f"clang-format {PINNED} formats this tree; found: {version.strip()}")
    files = sources()
    assert len(files) > 50
    r = subprocess.run([tool, "--dry-run", "--Werror", *files], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, "run clang-format -i on these:\n" + r.stderr[-4000:]

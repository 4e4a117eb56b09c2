"""Several devices: multi_device_cases.py run in a process with JAX_METAL_NUM_DEVICES=4 and four XLA:CPU
devices (JAX fixes its device count when it starts), one pytest run for the whole file; each case here
reports that case's outcome."""

import ast
import os
import pathlib
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

CASES_FILE = pathlib.Path(__file__).with_name("multi_device_cases.py")


def _case_names():
    tree = ast.parse(CASES_FILE.read_text())
    return [node.name for node in tree.body if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")]


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    report = tmp_path_factory.mktemp("multi") / "report.xml"
    env = dict(os.environ, JAX_METAL_NUM_DEVICES="4", JAX_PLATFORMS="metal,cpu",
               XLA_FLAGS=(os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4").strip())
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", str(CASES_FILE),
                          f"--junitxml={report}"], env=env, capture_output=True, text=True, timeout=1800,
                         cwd=CASES_FILE.parents[2])
    assert report.exists(), run.stdout[-4000:] + run.stderr[-4000:]
    results = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        name = case.get("name")
        # An expected failure (a strict xfail mark in the cases file) is reported as skipped with type
        # pytest.xfail; any other skip is a problem.
        problems = [child for child in case if child.tag in ("failure", "error") or
                    (child.tag == "skipped" and child.get("type") != "pytest.xfail")]
        results.setdefault(name.split("[")[0], []).append(
            (name, [(p.tag, (p.get("message") or "") + "\n" + (p.text or "")) for p in problems]))
    return results


@pytest.mark.parametrize("case", _case_names())
def test_case(outcomes, case):
    assert case in outcomes, f"{case} did not run"
    bad = [(name, problems) for name, problems in outcomes[case] if problems]
    assert not bad, "\n\n".join(f"{name}: {tag}: {text[-3000:]}" for name, problems in bad for tag, text in problems)

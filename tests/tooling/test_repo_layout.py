"""The tree as a newcomer reads it: a README for users within its budget, with the two commands CI runs;
links in the docs that lead somewhere; comments that say why rather than which work item; tests in
their layer's folder; C++ and Python files of at most 600 lines."""

import pathlib
import re
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = [README, *sorted((ROOT / "docs").glob("*.md"))]
LAYERS = {"ops", "runtime", "programs", "tooling"}


def _tracked(*patterns):
    out = subprocess.run(["git", "ls-files", *patterns], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [ROOT / p for p in out.split()]


def test_readme_is_short_and_keeps_the_two_commands():
    text = README.read_text()
    assert len(text.splitlines()) <= 250
    # .ci/run runs exactly these, as a new user would.
    assert '```sh\npip install ".[test]"\npytest\n```' in text


def test_doc_links_lead_to_files():
    broken = []
    for doc in DOCS:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", doc.read_text()):
            if "://" not in target and not (doc.parent / target).exists():
                broken.append(f"{doc.relative_to(ROOT)} -> {target}")
    assert not broken, broken


def test_no_comment_cites_a_numbered_work_item():
    # Our tracker's numbers mean nothing to a reader; JAX's own test names (testForiLoopIssue8152) may stay.
    pattern = re.compile(r"\b(issue|session|work item) ?#?[0-9]+", re.IGNORECASE)
    files = [p for p in _tracked("cpp", "jax_metal_plugin", "tests", "scripts", "benchmarks", "docs", "examples",
                                 "fuzz", "README.md", "CMakeLists.txt", "pyproject.toml")
             if p.is_file() and p.suffix not in (".png", ".whl")]
    assert len(files) > 50
    hits = [f"{p.relative_to(ROOT)}:{n}: {line.strip()}" for p in files
            for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1) if pattern.search(line)]
    assert not hits, "\n".join(hits)


def test_tests_live_in_their_layer():
    tests = ROOT / "tests"
    top = sorted(p.name for p in tests.iterdir() if p.is_file() and p.suffix == ".py")
    assert not [name for name in top if name.startswith("test_")], top
    assert len(top) <= 12, top
    folders = {p.name for p in tests.iterdir() if p.is_dir() and not p.name.startswith((".", "__"))}
    assert folders <= LAYERS, folders - LAYERS
    names = [p.name for p in tests.rglob("test_*.py")]
    assert len(names) == len(set(names)), "two test files share a basename (the folders are not packages)"


def test_source_files_stay_small():
    # Small files with one job each: a file past this is split along its seams, each part named for its job.
    files = [p for p in _tracked("*.cc", "*.h", "*.mm", "*.py") if p.is_file()]
    assert len(files) > 50
    sizes = {str(p.relative_to(ROOT)): len(p.read_text().splitlines()) for p in files}
    assert not {name: n for name, n in sizes.items() if n > 600}

#!/usr/bin/env python3
"""Checks a macOS wheel of jax_metal_plugin before it ships:

    scripts/check_wheel.py dist/jax_metal_plugin-<version>-py3-none-macosx_14_0_arm64.whl

- the archive: file name, WHEEL tags, every file listed in RECORD with the right hash, the package's
  Python files all there, no Python extension module (the tag says py3-none);
- the plugin library (our own Mach-O reader, scripts/macho.py): arm64, a dylib, built for macOS no newer
  than the tag's version (LC_BUILD_VERSION), linking only system frameworks and libraries, exporting
  GetPjrtApi and every jmp_* symbol the package's Python calls through ctypes, with a code signature
  that matches its bytes (arm64 macOS loads nothing unsigned);
- the metadata: the `jax_plugins` entry point, Requires-Python and the jax/jaxlib requirements exactly as
  pyproject.toml states them;
- pip's tag matching: pip accepts the wheel for the tag's macOS and a newer one, and refuses it for an
  older macOS and for x86_64 (so the acceptance means something).

Prints one line per check and exits 1 when any fails.
"""

from __future__ import annotations

import argparse
import base64
import email.parser
import hashlib
import importlib.metadata
import pathlib
import re
import subprocess
import sys
import tempfile
import tomllib
import zipfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import macho  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
SYSTEM_PREFIXES = ("/System/Library/", "/usr/lib/")
REQUIRED_EXPORTS = {"GetPjrtApi"}
WHEEL_NAME = re.compile(r"^(?P<name>[A-Za-z0-9_.]+)-(?P<version>[^-]+)-(?P<python>[^-]+)-(?P<abi>[^-]+)-"
                        r"(?P<platform>[^-]+)\.whl$")
PLATFORM_TAG = re.compile(r"^macosx_(?P<major>\d+)_(?P<minor>\d+)_(?P<arch>arm64|x86_64|universal2)$")


class Report:
    def __init__(self) -> None:
        self.failures: list[str] = []

    def check(self, ok: bool, what: str, why: str = "") -> bool:
        print(("ok    " if ok else "FAIL  ") + what + ("" if ok or not why else f": {why}"))
        if not ok:
            self.failures.append(f"{what}: {why}" if why else what)
        return ok


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _requirement_key(text: str) -> tuple[str, str]:
    """(normalized name, specifier and marker without spaces): two spellings of one requirement agree."""
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)(.*)", text)
    if not match:
        return text, ""
    return re.sub(r"[-_.]+", "-", match.group(1)).lower(), re.sub(r"\s+", "", match.group(2)).replace("'", '"')


def called_symbols(python_sources: dict[str, str]) -> set[str]:
    """The plugin library's C symbols the package reaches through ctypes (attribute access `.jmp_...`)."""
    return {name for text in python_sources.values() for name in re.findall(r"\.(jmp_[A-Za-z0-9_]+)\b", text)}


def check_library(report: Report, data: bytes, platform: str, needed: set[str]) -> None:
    tag = PLATFORM_TAG.match(platform)
    if not report.check(tag is not None and tag["arch"] == "arm64", f"platform tag {platform} is macOS arm64"):
        return
    try:
        lib = macho.parse(data)
    except macho.MachOError as e:
        report.check(False, "the plugin library is a 64-bit Mach-O", str(e))
        return
    report.check(lib.cputype == macho.CPU_TYPE_ARM64, "library architecture is arm64", lib.arch)
    report.check(lib.filetype == macho.MH_DYLIB, "library is a dylib", f"file type {lib.filetype}")
    tag_version = (int(tag["major"]), int(tag["minor"]), 0)
    report.check(lib.platform == macho.PLATFORM_MACOS and lib.minos is not None,
                 "library says its platform and minimum OS (LC_BUILD_VERSION)",
                 f"platform {lib.platform}, minimum {lib.minos}")
    if lib.minos is not None:
        shown = ".".join(map(str, lib.minos))
        report.check(lib.minos <= tag_version, f"library's minimum macOS {shown} is no newer than the tag's "
                     f"{tag['major']}.{tag['minor']}", "pip would install it where it cannot load")
    foreign = [name for name in lib.linked if not name.startswith(SYSTEM_PREFIXES)]
    report.check(bool(lib.linked) and not foreign, f"library links only system libraries ({len(lib.linked)})",
                 f"links {', '.join(foreign) or 'nothing'}")
    missing = sorted(name for name in REQUIRED_EXPORTS | needed if "_" + name not in lib.exports)
    report.check(not missing, f"library exports {', '.join(sorted(REQUIRED_EXPORTS | needed))}",
                 f"missing {', '.join(missing)}")
    report.check(lib.signature == "ok", "library's code signature matches its bytes",
                 lib.signature or "unsigned: macOS on arm64 refuses to load it")


def check_installed(report: Report, target: pathlib.Path) -> None:
    """What pip installed: JAX finds plugins through importlib.metadata's `jax_plugins` entry points."""
    plugins = [ep for dist in importlib.metadata.distributions(path=[str(target)]) for ep in dist.entry_points
               if ep.group == "jax_plugins"]
    found = {ep.name: ep.value for ep in plugins}
    package = found.get("metal", "")
    report.check(bool(package) and (target / package.replace(".", "/") / "libjax_metal_pjrt.dylib").is_file(),
                 "installed by pip, importlib.metadata finds the metal plugin and its library", str(found))


def check_pip(report: Report, wheel: pathlib.Path, platform: str, requires_python: str | None) -> None:
    tag = PLATFORM_TAG.match(platform)
    if tag is None:
        return
    major, minor, arch = int(tag["major"]), int(tag["minor"]), tag["arch"]
    python = re.search(r">=\s*(\d+\.\d+)", requires_python or "")
    version = python.group(1) if python else f"{sys.version_info[0]}.{sys.version_info[1]}"
    cases = [(platform, True), (f"macosx_{major + 1}_0_{arch}", True),
             (f"macosx_{major - 1}_0_{arch}", False), (f"macosx_{major}_{minor}_x86_64", False)]
    for index, (target_platform, accept) in enumerate(cases):
        with tempfile.TemporaryDirectory() as target:
            # The tag's own platform is installed for real, and looked at as JAX's plugin discovery will.
            dry_run = ["--dry-run"] if index else []
            r = subprocess.run([sys.executable, "-m", "pip", "install", *dry_run, "--no-deps", "--no-index",
                                "--disable-pip-version-check", "--only-binary=:all:", "--platform", target_platform,
                                "--python-version", version, "--target", target, str(wheel)],
                               capture_output=True, text=True)
            if index == 0 and r.returncode == 0:
                check_installed(report, pathlib.Path(target))
        output = r.stdout + r.stderr
        # A refusal counts only when it is over the tags: a wheel pip cannot read is refused everywhere.
        if accept:
            agrees = r.returncode == 0 and ("Would install" in output or not dry_run)
        else:
            agrees = r.returncode != 0 and "is not a supported wheel" in output
        lines = output.strip().splitlines()
        report.check(agrees, f"pip {'accepts' if accept else 'refuses'} it for {target_platform} (Python {version})",
                     lines[-1] if lines else f"exit {r.returncode}")


def check_wheel(wheel: pathlib.Path, root: pathlib.Path = ROOT, run_pip: bool = True) -> list[str]:
    report = Report()
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    name = re.sub(r"[-_.]+", "_", project["name"]).lower()
    parts = WHEEL_NAME.match(wheel.name)
    if not report.check(parts is not None, f"file name {wheel.name} is a wheel's"):
        return report.failures
    report.check((parts["name"], parts["version"]) == (name, project["version"]),
                 f"file name says {name} {project['version']}", f"{parts['name']} {parts['version']}")
    report.check((parts["python"], parts["abi"]) == ("py3", "none"), "tagged py3-none (no Python-ABI-specific code)",
                 f"{parts['python']}-{parts['abi']}")
    platform = parts["platform"]
    with zipfile.ZipFile(wheel) as archive:
        files = {info.filename: archive.read(info) for info in archive.infolist() if not info.is_dir()}
    dist_info = f"{name}-{project['version']}.dist-info"

    record_text = files.get(f"{dist_info}/RECORD", b"").decode()
    rows = [line.rsplit(",", 2) for line in record_text.splitlines() if line]
    recorded = {row[0]: row for row in rows if len(row) == 3}
    bad = [path for path, data in files.items() if path != f"{dist_info}/RECORD" and
           (path not in recorded or recorded[path][1:] != [_record_hash(data), str(len(data))])]
    report.check(bool(rows) and not bad, f"RECORD lists every file with its sha256 and size ({len(rows)} rows)",
                 f"wrong or missing for {', '.join(sorted(bad)[:5]) or 'RECORD itself'}")
    report.check(set(recorded) <= set(files), "RECORD lists no file the wheel lacks",
                 ", ".join(sorted(set(recorded) - set(files))[:5]))

    wheel_meta = email.parser.Parser().parsestr(files.get(f"{dist_info}/WHEEL", b"").decode())
    report.check(wheel_meta.get_all("Tag") == [f"py3-none-{platform}"], f"WHEEL's Tag is py3-none-{platform}",
                 str(wheel_meta.get_all("Tag")))
    report.check(wheel_meta.get("Root-Is-Purelib", "").strip().lower() == "false", "WHEEL says Root-Is-Purelib: false")

    package = project["name"].replace("-", "_")
    sources = sorted(p.relative_to(root).as_posix() for p in (root / package).rglob("*.py")
                     if "__pycache__" not in p.parts)
    missing = [p for p in sources if p not in files]
    report.check(bool(sources) and not missing, f"the package's {len(sources)} Python files are in it",
                 ", ".join(missing[:5]))
    extensions = [p for p in files if p.endswith((".so", ".pyd")) or "/_core." in p]
    report.check(not extensions, "no Python extension module in it", ", ".join(extensions))
    libraries = [p for p in files if p.endswith(".dylib")]
    if report.check(libraries == [f"{package}/libjax_metal_pjrt.dylib"], "one plugin library, where the package "
                    "looks for it", ", ".join(libraries) or "none"):
        python = {p: data.decode("utf-8", errors="replace") for p, data in files.items() if p.endswith(".py")}
        check_library(report, files[libraries[0]], platform, called_symbols(python))

    meta = email.parser.Parser().parsestr(files.get(f"{dist_info}/METADATA", b"").decode("utf-8"))
    report.check((meta.get("Name"), meta.get("Version")) == (project["name"], project["version"]),
                 "METADATA's name and version are pyproject.toml's", f"{meta.get('Name')} {meta.get('Version')}")
    report.check(meta.get("Requires-Python") == project.get("requires-python"),
                 f"Requires-Python is {project.get('requires-python')}", str(meta.get("Requires-Python")))
    declared = {_requirement_key(r) for r in meta.get_all("Requires-Dist") or []}
    for dep in project["dependencies"]:
        key = _requirement_key(dep)
        if key[0] in ("jax", "jaxlib"):
            bounded = re.search(r">=?\d", key[1]) is not None
            report.check(key in declared and bounded, f"Requires-Dist {dep} (the supported range, with its floor)",
                         "absent or different" if bounded else "no lower bound")
    entry = files.get(f"{dist_info}/entry_points.txt", b"").decode()
    group = re.search(r"^\[jax_plugins\]\s*\n((?:[^\[\n].*\n?)*)", entry, re.M)
    targets = dict(re.findall(r"^\s*(\S+)\s*=\s*(\S+)", group.group(1), re.M)) if group else {}
    module = targets.get("metal", "")
    report.check(module.replace(".", "/") + "/__init__.py" in files,
                 "entry point jax_plugins: metal names a package in the wheel", module or "no such entry point")
    if run_pip:
        check_pip(report, wheel, platform, project.get("requires-python"))
    print(f"{wheel.name}: " + ("all checks passed" if not report.failures else f"{len(report.failures)} failed"))
    return report.failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wheel", type=pathlib.Path)
    parser.add_argument("--no-pip", action="store_true", help="skip asking pip whether it accepts the tags")
    args = parser.parse_args(argv)
    return 1 if check_wheel(args.wheel, run_pip=not args.no_pip) else 0


if __name__ == "__main__":
    sys.exit(main())

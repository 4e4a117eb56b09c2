#!/usr/bin/env python3
"""Packs a binary wheel of jax_metal_plugin around an already built plugin library:

    scripts/build_wheel.py --library OUTDIR/libjax_metal_pjrt.dylib --out OUTDIR

Name, version, dependencies, entry points and the rest of the metadata come from pyproject.toml, so that
nothing is restated here. The wheel holds the package's files and the one library; it is tagged py3-none
because nothing in it depends on the Python ABI (Python reaches C++ through the library's C symbols with
ctypes). The archive is reproducible: sorted entries, fixed timestamps (SOURCE_DATE_EPOCH when set).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import pathlib
import re
import sys
import time
import tomllib
import zipfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
DEFAULT_PLATFORM = "macosx_14_0_arm64"
# Build products and caches a developer tree holds beside the sources; the library is added explicitly.
_SKIP_SUFFIXES = (".so", ".dylib", ".pyc", ".pyo", ".pyd")


def normalized(name: str) -> str:
    """A distribution name as wheel file names spell it (PEP 427 / PEP 503)."""
    return re.sub(r"[-_.]+", "_", name).lower()


def record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _requirement(text: str, extra: str | None = None) -> str:
    """A pyproject dependency as a Requires-Dist value, with the extra's marker added."""
    if extra is None:
        return text
    req, sep, marker = text.partition(";")
    extra_marker = f'extra == "{extra}"'
    return f"{req.strip()}; ({marker.strip()}) and {extra_marker}" if sep else f"{req.strip()}; {extra_marker}"


def metadata(project: dict, root: pathlib.Path) -> str:
    lines = ["Metadata-Version: 2.1", f"Name: {project['name']}", f"Version: {project['version']}"]
    if "description" in project:
        lines.append(f"Summary: {project['description']}")
    license_ = project.get("license")
    if isinstance(license_, dict) and "text" in license_:
        lines.append(f"License: {license_['text']}")
    if "requires-python" in project:
        lines.append(f"Requires-Python: {project['requires-python']}")
    for label, url in project.get("urls", {}).items():
        lines.append(f"Project-URL: {label}, {url}")
    for dep in project.get("dependencies", []):
        lines.append(f"Requires-Dist: {_requirement(dep)}")
    for extra, deps in project.get("optional-dependencies", {}).items():
        lines.append(f"Provides-Extra: {extra}")
        lines.extend(f"Requires-Dist: {_requirement(dep, extra)}" for dep in deps)
    body = ""
    readme = project.get("readme")
    if isinstance(readme, str):
        lines.append("Description-Content-Type: " + ("text/markdown" if readme.endswith(".md") else "text/plain"))
        body = (root / readme).read_text(encoding="utf-8")
    return "\n".join(lines) + "\n\n" + body


def entry_points(project: dict) -> str:
    groups = dict(project.get("entry-points", {}))
    if project.get("scripts"):
        groups["console_scripts"] = project["scripts"]
    if project.get("gui-scripts"):
        groups["gui_scripts"] = project["gui-scripts"]
    return "".join(f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in entries.items()) + "\n"
                   for group, entries in groups.items())


def package_files(root: pathlib.Path, packages: list[str]) -> list[tuple[str, pathlib.Path]]:
    files = []
    for package in packages:
        for path in sorted((root / package).rglob("*")):
            if path.is_dir() or "__pycache__" in path.parts or path.name.startswith("_core."):
                continue
            if path.suffix in _SKIP_SUFFIXES:
                continue
            files.append((path.relative_to(root).as_posix(), path))
    return files


def _check_version_agrees(root: pathlib.Path, package: str, version: str) -> None:
    init = (root / package / "__init__.py").read_text(encoding="utf-8")
    found = re.search(r'^__version__\s*=\s*["\']([^"\']+)["\']', init, re.M)
    if found and found.group(1) != version:
        sys.exit(f"build_wheel: {package}/__init__.py says version {found.group(1)}, pyproject.toml {version}")


def build(library: pathlib.Path, out: pathlib.Path, root: pathlib.Path = ROOT,
          platform: str = DEFAULT_PLATFORM) -> pathlib.Path:
    config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    project = config["project"]
    packages = config.get("tool", {}).get("scikit-build", {}).get("wheel", {}).get("packages") or \
        [normalized(project["name"])]
    name, version = normalized(project["name"]), project["version"]
    _check_version_agrees(root, packages[0], version)
    tag = f"py3-none-{platform}"
    dist_info = f"{name}-{version}.dist-info"

    entries: list[tuple[str, bytes, int]] = []  # (archive path, contents, unix mode)
    for arcname, path in package_files(root, packages):
        entries.append((arcname, path.read_bytes(), 0o644))
    entries.append((f"{packages[0]}/{library.name}", library.read_bytes(), 0o755))
    entries.append((f"{dist_info}/METADATA", metadata(project, root).encode(), 0o644))
    wheel = f"Wheel-Version: 1.0\nGenerator: jax-metal-plugin scripts/build_wheel.py\nRoot-Is-Purelib: false\nTag: {tag}\n"
    entries.append((f"{dist_info}/WHEEL", wheel.encode(), 0o644))
    entries.append((f"{dist_info}/entry_points.txt", entry_points(project).encode(), 0o644))
    record = "".join(f"{arc},{record_hash(data)},{len(data)}\n" for arc, data, _ in entries)
    record += f"{dist_info}/RECORD,,\n"
    entries.append((f"{dist_info}/RECORD", record.encode(), 0o644))

    epoch = max(int(os.environ.get("SOURCE_DATE_EPOCH", "315532800")), 315532800)
    stamp = time.gmtime(epoch)[:6]
    out.mkdir(parents=True, exist_ok=True)
    target = out / f"{name}-{version}-{tag}.whl"
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for arcname, data, mode in entries:  # RECORD last, as the wheel spec recommends
            info = zipfile.ZipInfo(arcname, date_time=stamp)
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--library", required=True, type=pathlib.Path, help="the built libjax_metal_pjrt")
    parser.add_argument("--out", required=True, type=pathlib.Path, help="directory for the wheel")
    parser.add_argument("--platform", default=DEFAULT_PLATFORM, help=f"platform tag (default {DEFAULT_PLATFORM})")
    args = parser.parse_args(argv)
    print(build(args.library, args.out, platform=args.platform))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Extract pocketfft's header-only C++ FFT library from numpy's pinned, hash-checked sdist on PyPI.

    fetch_fft_header.py OUT_INCLUDE_DIR [CACHE_DIR]

numpy vendors pocketfft (BSD-3-Clause) in its source distribution; the sdist is downloaded once into
CACHE_DIR (default ~/.cache/jax-metal-plugin), its sha256 checked, and only pocketfft_hdronly.h and
its licence are extracted into the build tree. Nothing from it is ever committed.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _fetchutil import sha256  # noqa: E402
import tarfile
import urllib.request

SDIST = "numpy-2.3.5.tar.gz"
SHA256 = "784db1dcdab56bf0517743e746dfb0f885fc68d948aba86eeec2cba234bdf1c0"
MEMBERS = {"numpy-2.3.5/numpy/fft/pocketfft/pocketfft_hdronly.h": "pocketfft_hdronly.h",
           "numpy-2.3.5/numpy/fft/pocketfft/LICENSE.md": "pocketfft_LICENSE.md"}
INDEX = os.environ.get("JMP_PYPI_SIMPLE", "https://pypi.org/simple")


def sdist_url():
    req = urllib.request.Request(f"{INDEX}/numpy/", headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        files = json.load(r)["files"]
    for f in files:
        if f["filename"] == SDIST:
            return f["url"]
    sys.exit(f"fetch_fft_header: {SDIST} is not on {INDEX}")


def main():
    out_dir = sys.argv[1]
    cache = sys.argv[2] if len(sys.argv) > 2 else os.path.expanduser("~/.cache/jax-metal-plugin")
    os.makedirs(cache, exist_ok=True)
    path = os.path.join(cache, SDIST)
    if not os.path.exists(path) or sha256(path) != SHA256:
        with urllib.request.urlopen(sdist_url(), timeout=300) as r, open(path + ".tmp", "wb") as f:
            f.write(r.read())
        os.replace(path + ".tmp", path)
    digest = sha256(path)
    if digest != SHA256:
        os.remove(path)
        sys.exit(f"fetch_fft_header: {SDIST} has sha256 {digest}, expected {SHA256}")
    os.makedirs(out_dir, exist_ok=True)
    with tarfile.open(path) as t:
        for member, name in MEMBERS.items():
            data = t.extractfile(member).read()
            with open(os.path.join(out_dir, name + ".tmp"), "wb") as f:
                f.write(data)
            os.replace(os.path.join(out_dir, name + ".tmp"), os.path.join(out_dir, name))
    print(os.path.join(out_dir, "pocketfft_hdronly.h"))


if __name__ == "__main__":
    main()

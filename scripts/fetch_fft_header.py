#!/usr/bin/env python3
"""Puts pocketfft's header-only C++ FFT library (BSD-3-Clause) and its licence into a build's include
directory.

    fetch_fft_header.py OUT_INCLUDE_DIR

numpy vendors pocketfft in its source distribution; the pinned sdist is downloaded once, and the header
and licence, each checked against its own pinned sha256, are cached (see _fetchutil.py). Nothing from it
is ever committed.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _fetchutil import Artifact, Member, main  # noqa: E402

ARTIFACT = Artifact(
    project="numpy",
    filename="numpy-2.3.5.tar.gz",
    sha256="784db1dcdab56bf0517743e746dfb0f885fc68d948aba86eeec2cba234bdf1c0",
    members=(Member("numpy-2.3.5/numpy/fft/pocketfft/pocketfft_hdronly.h", "pocketfft_hdronly.h",
                    "50f4ddbe60432325f560c706b6f1c49f9e0949fc7f20ae6499f2299e37d9790c"),
             Member("numpy-2.3.5/numpy/fft/pocketfft/LICENSE.md", "pocketfft_LICENSE.md",
                    "a85ca13fdf90160b64a0698215868c13b74d835ad0a4e2ba44713b8c5058a056")))

if __name__ == "__main__":
    main(ARTIFACT, "pocketfft_include")

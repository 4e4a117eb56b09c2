#!/usr/bin/env python3
"""Extract XLA's PJRT C API header from a pinned, hash-checked PyPI wheel into a build directory.

    fetch_pjrt_header.py OUT_INCLUDE_DIR [CACHE_DIR]

The wheel is fetched once with pip into CACHE_DIR (default ~/.cache/jax-metal-plugin) and reused by
later builds; only xla/pjrt/c/pjrt_c_api.h is extracted. Nothing from the wheel is ever committed.
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _fetchutil import sha256  # noqa: E402
import zipfile

PACKAGE = "tensorflow-cpu==2.21.0"
WHEEL = "tensorflow_cpu-2.21.0-cp311-cp311-manylinux_2_27_x86_64.whl"
SHA256 = "2b847d217b02ee7731ed91431daf3250daa0196c3c94614d23be27232e6e5b6c"
MEMBER = "tensorflow/include/xla/pjrt/c/pjrt_c_api.h"


def main():
    out_dir = sys.argv[1]
    cache = sys.argv[2] if len(sys.argv) > 2 else os.path.expanduser("~/.cache/jax-metal-plugin")
    os.makedirs(cache, exist_ok=True)
    wheel = os.path.join(cache, WHEEL)
    if not os.path.exists(wheel) or sha256(wheel) != SHA256:
        # The header is platform-independent, so the same Linux wheel serves every build host.
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                        "--platform", "manylinux_2_27_x86_64", "--python-version", "3.11",
                        "--implementation", "cp", "--abi", "cp311", "-d", cache, PACKAGE], check=True)
    digest = sha256(wheel)
    if digest != SHA256:
        os.remove(wheel)
        sys.exit(f"fetch_pjrt_header: {WHEEL} has sha256 {digest}, expected {SHA256}")
    target = os.path.join(out_dir, "xla", "pjrt", "c", "pjrt_c_api.h")
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with zipfile.ZipFile(wheel) as z, open(target + ".tmp", "wb") as f:
        f.write(z.read(MEMBER))
    os.replace(target + ".tmp", target)
    print(target)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Puts XLA's PJRT C API header (xla/pjrt/c/pjrt_c_api.h, PJRT API 0.90) and its profiler extension's two headers into a build's include directory.

    fetch_pjrt_header.py OUT_INCLUDE_DIR

No small package on the index ships this header: jaxlib ships only XLA's FFI headers, the PJRT plugin
wheels only binaries, and the smallest TensorFlow 2.21.0 wheel that has it is 223 MB. So the header is
read out of one pinned TensorFlow wheel, with range requests (about 2 MB of it) where the index allows
them, else by downloading it whole; either way the header is checked against its own pinned sha256 and
cached (see _fetchutil.py). Nothing from the wheel is ever committed.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _fetchutil import Artifact, Member, main  # noqa: E402

ARTIFACT = Artifact(
    project="tensorflow-cpu",
    filename="tensorflow_cpu-2.21.0-cp311-cp311-manylinux_2_27_x86_64.whl",
    sha256="2b847d217b02ee7731ed91431daf3250daa0196c3c94614d23be27232e6e5b6c",
    members=(Member("tensorflow/include/xla/pjrt/c/pjrt_c_api.h", "xla/pjrt/c/pjrt_c_api.h",
                    "b5cdbd8289178466b9e695985fe065fe57c9b57f816c8e02b5f6bcf61c7aec4b"),
             # The profiler extension: how jax.profiler collects the plugin's own trace events.
             Member("tensorflow/include/xla/pjrt/c/pjrt_c_api_profiler_extension.h",
                    "xla/pjrt/c/pjrt_c_api_profiler_extension.h",
                    "9ae899234c03c1a117ef88481f8a242bdfa6adf0014c88c1485aee3ffd26c70b"),
             Member("tensorflow/include/xla/backends/profiler/plugin/profiler_c_api.h",
                    "xla/backends/profiler/plugin/profiler_c_api.h",
                    "ad15b638c6d7820b52ae1aa8ff71f64f692c118ef7e7debe6a9f4aa9e7727732")))

if __name__ == "__main__":
    main(ARTIFACT, "pjrt_include")

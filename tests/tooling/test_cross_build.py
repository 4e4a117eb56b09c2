"""The macOS plugin (PJRT, reader, lowering, host and Metal executors) cross-builds from Linux against
Apple's SDK, with every warning an error. Skips, saying why, where no SDK is set up (as in CI)."""

import os
import pathlib
import shutil
import struct
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SDK_TOOL = ROOT.parent / "shared" / "tools" / "macos-sdk"


def macos_sdk():
    sdk = os.environ.get("MACOS_SDK")
    if sdk and os.path.isdir(sdk):
        return sdk
    if SDK_TOOL.exists():
        r = subprocess.run([str(SDK_TOOL), "path"], capture_output=True, text=True)
        if r.returncode == 0 and os.path.isdir(r.stdout.strip()):
            return r.stdout.strip()
    return None


SDK = macos_sdk()
needs_sdk = pytest.mark.skipif(
    SDK is None or shutil.which(os.environ.get("CXX", "clang++-16")) is None,
    reason="no macOS SDK and clang here (set MACOS_SDK, or run ../shared/tools/macos-sdk setup)")


@needs_sdk
def test_plugin_cross_builds_for_arm64_macos(tmp_path):
    env = dict(os.environ, MACOS_SDK=SDK)
    r = subprocess.run([str(ROOT / "scripts" / "build-macos.sh"), str(tmp_path)], capture_output=True, text=True,
                       env=env, timeout=1500)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    # build-macos.sh ran scripts/check_neon.py: every hot loop of the host executor is NEON vector code
    assert "TanhF32: " in r.stderr and "FmaF64: " in r.stderr, r.stderr[-4000:]
    dylib = tmp_path / "libjax_metal_pjrt.dylib"
    data = dylib.read_bytes()
    magic, cputype = struct.unpack("<II", data[:8])
    assert magic == 0xFEEDFACF, "not a 64-bit Mach-O"
    assert cputype == 0x0100000C, "not arm64"
    nm = shutil.which("llvm-nm-16") or shutil.which("llvm-nm")
    if nm:
        symbols = subprocess.run([nm, "-gU", str(dylib)], capture_output=True, text=True).stdout
        assert "_GetPjrtApi" in symbols
    else:
        assert b"_GetPjrtApi" in data

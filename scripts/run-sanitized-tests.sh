#!/usr/bin/env bash
# Builds the plugin and _core with AddressSanitizer + UndefinedBehaviorSanitizer (-DJMP_SANITIZE=ON)
# and runs the whole test suite against that build (the macOS cross-build test aside: it runs no plugin code).
#
#     scripts/run-sanitized-tests.sh [BUILD_DIR]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build/sanitize}"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DJMP_SANITIZE=ON > /dev/null
ninja -C "$build" -j"${JOBS:-2}" _core jax_metal_pjrt jmp_read_artifact
pkg="$build/pkg/jax_metal_plugin"
mkdir -p "$pkg"
ln -sf "$root"/jax_metal_plugin/*.py "$pkg/"
ln -sf "$build"/_core*.so "$build"/libjax_metal_pjrt.so "$pkg/"
runtime="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)"
cd "$build"
LD_PRELOAD="$runtime" ASAN_OPTIONS="detect_leaks=0:abort_on_error=1" UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" \
  PYTHONPATH="$build/pkg" python3 -m pytest -q -p no:cacheprovider "$root/tests" \
  --ignore="$root/tests/tooling/test_cross_build.py"

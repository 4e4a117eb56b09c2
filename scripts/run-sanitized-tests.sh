#!/usr/bin/env bash
# Builds the plugin and _core with AddressSanitizer + UndefinedBehaviorSanitizer (-DJMP_SANITIZE=ON)
# and runs the reader, malformed-input, executor and runtime tests against that build.
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
  PYTHONPATH="$build/pkg" python3 -m pytest -q -p no:cacheprovider \
  "$root/tests/test_reader.py" "$root/tests/test_malformed_input.py" "$root/tests/test_elementwise.py" \
  "$root/tests/test_shape_ops.py" "$root/tests/test_gather_scatter.py" "$root/tests/test_dot_and_reduce.py" \
  "$root/tests/test_conv_pool.py" "$root/tests/test_linalg.py" "$root/tests/test_control_flow.py" \
  "$root/tests/test_runtime.py" "$root/tests/test_donation.py" \
  "$root/tests/test_pjrt_c_api.py"

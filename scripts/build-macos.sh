#!/usr/bin/env bash
# Cross-builds the complete macOS plugin (PJRT, reader, lowering, host and Metal executors) for
# arm64-apple-macos14 from Linux with clang and ld64.lld, against Apple's SDK:
#
#     MACOS_SDK=/path/to/MacOSX14.0.sdk scripts/build-macos.sh OUTDIR
#
# Without MACOS_SDK it asks ../shared/tools/macos-sdk (a machine where the SDK was set up). Every
# warning is an error, unguarded use of an API newer than macOS 14.0 included. OUTDIR gets
# libjax_metal_pjrt.dylib and the wheel jax_metal_plugin-<version>-py3-none-macosx_14_0_arm64.whl
# (scripts/build_wheel.py), which scripts/check_wheel.py checks; the last line printed is the wheel's path.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:?usage: build-macos.sh OUTDIR}"
mkdir -p "$out/obj"
out="$(cd "$out" && pwd)"

if [[ -z "${MACOS_SDK:-}" ]]; then
  tool="$root/../shared/tools/macos-sdk"
  [[ -x "$tool" ]] && MACOS_SDK="$("$tool" path 2>/dev/null || true)"
fi
if [[ -z "${MACOS_SDK:-}" || ! -d "$MACOS_SDK" ]]; then
  echo "build-macos.sh: no macOS SDK (set MACOS_SDK)" >&2
  exit 2
fi
CXX="${CXX:-clang++-16}"
LLD="${LLD:-$(command -v ld64.lld-16 || command -v ld64.lld || echo /usr/lib/llvm-16/bin/ld64.lld)}"

# The fetched headers sit at one place per checkout, and compiles run from the checkout with ccache (when
# installed) rooted there: a rebuild into another OUTDIR, or from another checkout, hits the cache.
include="$root/build/macos-include"
python3 "$root/scripts/fetch_pjrt_header.py" "$include" > /dev/null
python3 "$root/scripts/fetch_fft_header.py" "$include" > /dev/null
launcher=()
if [[ "${JMP_CCACHE:-1}" != 0 ]] && command -v ccache > /dev/null; then
  launcher=(ccache)
  export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=1
fi
cd "$root"

common=(-target arm64-apple-macos14.0 -isysroot "$MACOS_SDK" -stdlib=libc++ -std=c++17 -O2 -fPIC
        -fvisibility=hidden -fvisibility-inlines-hidden
        -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers -Werror -Werror=switch
        -Werror=unguarded-availability-new -I"$root/cpp" -isystem "$include"
        -DJMP_HAVE_METAL -DJMP_BLAS_ACCELERATE -DACCELERATE_NEW_LAPACK -DPOCKETFFT_NO_MULTITHREADING
        -D__ENVIRONMENT_OS_VERSION_MIN_REQUIRED__=140000)
# Only the file that reports it sees the commit: every other compile stays the same across commits.
commit_flag="-DJMP_BUILD_COMMIT=\"$(git -C "$root" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)\""

sources=()
for dir in support stablehlo stablehlo/passes mps lower exec exec/metal exec/host exec/standin check pjrt; do
  for f in "$root"/cpp/$dir/*.cc; do [[ -e "$f" ]] && sources+=("$f"); done
done
sources+=("$root"/cpp/plugin/*.cc)
metal_sources=("$root"/cpp/exec/metal/*.mm)

compile() {
  local src="$1" obj="$out/obj/$(echo "${1#$root/}" | tr '/' '_').o"
  if [[ "$src" == *.mm ]]; then
    "${launcher[@]}" "$CXX" "${common[@]}" -x objective-c++ -fobjc-arc -c "$src" -o "$obj"
  elif [[ "$src" == */plugin/check_api.cc ]]; then
    "${launcher[@]}" "$CXX" "${common[@]}" "$commit_flag" -c "$src" -o "$obj"
  else
    "${launcher[@]}" "$CXX" "${common[@]}" -c "$src" -o "$obj"
  fi
  echo "$obj"
}
export -f compile
export CXX out root
export COMMON_FLAGS="${common[*]}"

jobs="${JOBS:-2}"
objs=()
pids=()
for src in "${sources[@]}" "${metal_sources[@]}"; do
  compile "$src" > /dev/null &
  pids+=($!)
  if (( ${#pids[@]} >= jobs )); then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
done
for pid in "${pids[@]}"; do wait "$pid"; done
for src in "${sources[@]}" "${metal_sources[@]}"; do objs+=("$out/obj/$(echo "${src#$root/}" | tr '/' '_').o"); done

"$CXX" -target arm64-apple-macos14.0 -isysroot "$MACOS_SDK" -stdlib=libc++ -fuse-ld=lld --ld-path="$LLD" \
  -dynamiclib -install_name @rpath/libjax_metal_pjrt.dylib -o "$out/libjax_metal_pjrt.dylib" "${objs[@]}" \
  -framework Foundation -framework Metal -framework MetalPerformanceShaders -framework MetalPerformanceShadersGraph \
  -framework Accelerate -lobjc
echo "$out/libjax_metal_pjrt.dylib"

# The host executor's hot loops must come out as NEON vector code (a Mac runs float64 and LAPACK-side
# work there); a loop left scalar fails the build, naming it.
"${PYTHON:-python3}" "$root/scripts/check_neon.py" "$out/obj" >&2

# The wheel a Mac user installs without a compiler, checked as it will be installed and loaded.
python="${PYTHON:-python3}"
wheel="$("$python" "$root/scripts/build_wheel.py" --library "$out/libjax_metal_pjrt.dylib" --out "$out")"
"$python" "$root/scripts/check_wheel.py" "$wheel" >&2
echo "$wheel"

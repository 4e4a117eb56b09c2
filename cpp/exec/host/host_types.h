// Element types as the host executor computes them: f16 and bf16 are stored as bits and computed
// in float (rounded back per op, as MPSGraph does); bool is one byte; complex64 is std::complex<float>.
#pragma once

#include <complex>
#include <cstdint>
#include <type_traits>

#include "support/dtype.h"
#include "support/float16.h"
#include "support/status.h"

namespace jmp::exec::host {

struct f16 {
  uint16_t bits;
};
struct bf16 {
  uint16_t bits;
};
struct boolean {
  uint8_t v;
};
using c64 = std::complex<float>;
using c128 = std::complex<double>;

// Compute<T>: the type arithmetic happens in; Load/Store convert.
template <typename T>
struct Num {
  using C = T;
  static C Load(T v) { return v; }
  static T Store(C v) { return v; }
};
template <>
struct Num<f16> {
  using C = float;
  static float Load(f16 v) { return HalfToFloat(v.bits); }
  static f16 Store(float v) { return f16{FloatToHalf(v)}; }
};
template <>
struct Num<bf16> {
  using C = float;
  static float Load(bf16 v) { return BFloat16ToFloat(v.bits); }
  static bf16 Store(float v) { return bf16{FloatToBFloat16(v)}; }
};
template <>
struct Num<boolean> {
  using C = bool;
  static bool Load(boolean v) { return v.v != 0; }
  static boolean Store(bool v) { return boolean{static_cast<uint8_t>(v)}; }
};

template <typename T>
constexpr bool kIsFloat =
    std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, f16> || std::is_same_v<T, bf16>;
template <typename T>
constexpr bool kIsComplex = std::is_same_v<T, c64> || std::is_same_v<T, std::complex<double>>;
template <typename T>
constexpr bool kIsInt = std::is_integral_v<T>;
template <typename T>
constexpr bool kIsBool = std::is_same_v<T, boolean>;

template <typename T>
struct Tag {
  using type = T;
};

// Calls f(Tag<T>{}) with the C++ type of `dtype` (support/dtype.def's host column; narrow types never
// reach an MPS op graph, verify.cc refuses them: their storage types, for completeness).
template <typename F>
auto Dispatch(DType dtype, F&& f) {
  switch (dtype) {
#define JMP_DTYPE(name, mlir, jax, bytes, bits, cls, pjrt, vhlo, metal, msl, host) \
  case DType::k##name: return f(Tag<host>{});
#include "support/dtype.def"
  }
  return f(Tag<float>{});
}

}  // namespace jmp::exec::host

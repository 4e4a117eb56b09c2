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

// Calls f(Tag<T>{}) with the C++ type of `dtype`.
template <typename F>
auto Dispatch(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kBool: return f(Tag<boolean>{});
    case DType::kI8: return f(Tag<int8_t>{});
    case DType::kI16: return f(Tag<int16_t>{});
    case DType::kI32: return f(Tag<int32_t>{});
    case DType::kI64: return f(Tag<int64_t>{});
    case DType::kU8: return f(Tag<uint8_t>{});
    case DType::kU16: return f(Tag<uint16_t>{});
    case DType::kU32: return f(Tag<uint32_t>{});
    case DType::kU64: return f(Tag<uint64_t>{});
    case DType::kF16: return f(Tag<f16>{});
    case DType::kBF16: return f(Tag<bf16>{});
    case DType::kF32: return f(Tag<float>{});
    case DType::kF64: return f(Tag<double>{});
    case DType::kC64: return f(Tag<c64>{});
    case DType::kC128: return f(Tag<std::complex<double>>{});
    // Never in an MPS op graph (verify.cc refuses them); their storage types, for completeness.
    case DType::kI4:
    case DType::kI2: return f(Tag<int8_t>{});
    case DType::kU4:
    case DType::kU2:
    JMP_NARROW_FLOAT_CASES:
      return f(Tag<uint8_t>{});
  }
  return f(Tag<float>{});
}

}  // namespace jmp::exec::host

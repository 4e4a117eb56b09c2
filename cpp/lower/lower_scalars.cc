// Scalars as a dtype's bytes and back, and each dtype's lowest and highest values (lower_context.h).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "lower/lower_context.h"
#include "support/dtype.h"
#include "support/float16.h"

namespace jmp::mps {

namespace {

template <typename T>
std::vector<uint8_t> Bytes(T v) {
  std::vector<uint8_t> out(sizeof(T));
  std::memcpy(out.data(), &v, sizeof(T));
  return out;
}

// Saturating double -> integer (a NaN becomes 0), so no out-of-range conversion is UB.
template <typename T>
T SaturateTo(double v) {
  if (std::isnan(v)) return 0;
  if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
  if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return static_cast<T>(v);
}

}  // namespace

std::vector<uint8_t> EncodeScalar(DType dtype, double v) {
  switch (dtype) {
    case DType::kBool: return {static_cast<uint8_t>(v != 0)};
    case DType::kI8: return Bytes(SaturateTo<int8_t>(v));
    case DType::kI16: return Bytes(SaturateTo<int16_t>(v));
    case DType::kI32: return Bytes(SaturateTo<int32_t>(v));
    case DType::kI64: return Bytes(SaturateTo<int64_t>(v));
    case DType::kU8: return Bytes(SaturateTo<uint8_t>(v));
    case DType::kU16: return Bytes(SaturateTo<uint16_t>(v));
    case DType::kU32: return Bytes(SaturateTo<uint32_t>(v));
    case DType::kU64: return Bytes(SaturateTo<uint64_t>(v));
    case DType::kF16: return Bytes(FloatToHalf(static_cast<float>(v)));
    case DType::kBF16: return Bytes(FloatToBFloat16(static_cast<float>(v)));
    case DType::kF32: return Bytes(static_cast<float>(v));
    case DType::kF64: return Bytes(v);
    case DType::kC64: {
      float parts[2] = {static_cast<float>(v), 0.0f};
      std::vector<uint8_t> out(8);
      std::memcpy(out.data(), parts, 8);
      return out;
    }
    case DType::kC128: {
      double parts[2] = {v, 0.0};
      std::vector<uint8_t> out(16);
      std::memcpy(out.data(), parts, 16);
      return out;
    }
    // Narrow types never reach the lowering proper (stablehlo/passes/narrow_types.cc rewrites them to their storage).
    case DType::kI4:
    case DType::kI2:
      return Bytes(static_cast<int8_t>(std::clamp(SaturateTo<int8_t>(v), static_cast<int8_t>(SubByteMin(dtype)),
                                                  static_cast<int8_t>(SubByteMax(dtype)))));
    case DType::kU4:
    case DType::kU2:
      return Bytes(static_cast<uint8_t>(std::min(SaturateTo<uint8_t>(v), static_cast<uint8_t>(SubByteMax(dtype)))));
    JMP_NARROW_FLOAT_CASES:
      return Bytes(uint8_t{0x7f});  // unused: no narrow scalar reaches the lowering proper
  }
  return {};
}

double DecodeScalar(DType dtype, const uint8_t* p) {
  auto load = [p](auto v) {
    std::memcpy(&v, p, sizeof(v));
    return v;
  };
  switch (dtype) {
    case DType::kBool: return p[0] != 0;
    case DType::kI8: return load(int8_t{});
    case DType::kI16: return load(int16_t{});
    case DType::kI32: return load(int32_t{});
    case DType::kI64: return static_cast<double>(load(int64_t{}));
    case DType::kU8: return load(uint8_t{});
    case DType::kU16: return load(uint16_t{});
    case DType::kU32: return load(uint32_t{});
    case DType::kU64: return static_cast<double>(load(uint64_t{}));
    case DType::kF16: return HalfToFloat(load(uint16_t{}));
    case DType::kBF16: return BFloat16ToFloat(load(uint16_t{}));
    case DType::kF32: return load(float{});
    case DType::kF64: return load(double{});
    case DType::kC64: return load(float{});  // real part; only identity checks use this
    case DType::kC128: return load(double{});
    case DType::kI4:
    case DType::kI2: return load(int8_t{});
    case DType::kU4:
    case DType::kU2:
      return load(uint8_t{});
    JMP_NARROW_FLOAT_CASES:
      return std::numeric_limits<double>::quiet_NaN();  // not decoded here (stablehlo/passes/narrow_types.cc)
  }
  return 0;
}

std::vector<uint8_t> EncodeBits(DType dtype, uint64_t bits) {
  std::vector<uint8_t> out(ByteSize(dtype));
  for (size_t i = 0; i < out.size() && i < 8; ++i) out[i] = static_cast<uint8_t>(bits >> (8 * i));
  return out;
}

// Integers' bounds from their bits (exact in double up to 53 bits; int64's and uint64's round to the
// powers of two beyond them, as std::numeric_limits' do when converted), floats' the infinities.
double LowestValue(DType dtype) {
  switch (ClassOf(dtype)) {
    case DTypeClass::kBool:
    case DTypeClass::kUnsignedInt:
    case DTypeClass::kSubByteUnsigned: return 0;
    case DTypeClass::kSignedInt:
    case DTypeClass::kSubByteSigned: return -std::ldexp(1.0, BitWidth(dtype) - 1);
    case DTypeClass::kFloat:
    case DTypeClass::kComplex:
    case DTypeClass::kNarrowFloat: return -std::numeric_limits<double>::infinity();
  }
  return 0;
}

double HighestValue(DType dtype) {
  switch (ClassOf(dtype)) {
    case DTypeClass::kBool: return 1;
    case DTypeClass::kUnsignedInt:
    case DTypeClass::kSubByteUnsigned: return std::ldexp(1.0, BitWidth(dtype)) - 1;
    case DTypeClass::kSignedInt:
    case DTypeClass::kSubByteSigned: return std::ldexp(1.0, BitWidth(dtype) - 1) - 1;
    case DTypeClass::kFloat:
    case DTypeClass::kComplex:
    case DTypeClass::kNarrowFloat: return std::numeric_limits<double>::infinity();
  }
  return 0;
}

}  // namespace jmp::mps

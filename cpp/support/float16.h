// IEEE half and bfloat16 conversions, round to nearest even, NaN kept a (quiet) NaN. Shared by the
// lowering (constants) and the host executor (arithmetic), so both round the same way.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace jmp {

inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float BitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t FloatToBFloat16(float f) {
  uint32_t u = FloatBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
inline float BFloat16ToFloat(uint16_t h) { return BitsToFloat(static_cast<uint32_t>(h) << 16); }

inline uint16_t FloatToHalf(float f) {
  uint32_t u = FloatBits(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (abs < 0x38800000u) {                                               // below the smallest normal half
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);           // below half the smallest subnormal
    uint32_t exp = abs >> 23;
    uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - exp;  // 14..24
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}

// float64 -> float16 rounded once, to nearest even, as a direct conversion does (ARM's fcvt on Apple
// Silicon, x86 with AVX512-FP16; XLA:CPU uses it where the CPU has it): to float32 rounding to odd
// (truncate, and set the last bit if anything was cut), whose 13 extra bits keep the second rounding
// from ever seeing a false tie.
inline uint16_t DoubleToHalf(double d) {
  float f = static_cast<float>(d);
  if (std::isfinite(f) && static_cast<double>(f) != d) {
    if (std::fabs(static_cast<double>(f)) > std::fabs(d)) f = std::nextafter(f, 0.0f);
    f = BitsToFloat(FloatBits(f) | 1u);
  }
  return FloatToHalf(f);
}

inline float HalfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return BitsToFloat(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    if (mant == 0) return BitsToFloat(sign);
    float v = static_cast<float>(mant) * (1.0f / 16777216.0f);  // mant * 2^-24
    return sign ? -v : v;
  }
  return BitsToFloat(sign | ((exp + 112) << 23) | (mant << 13));
}

}  // namespace jmp

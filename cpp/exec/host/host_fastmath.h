// Float exp, tanh and sigmoid written without branches so the compiler vectorises the loops that
// call them (libm's scalar expf/tanhf cost 3-17 ns an element and dominate attention and GELU on the
// host). Accuracy: within 3 ulp of the true value over the whole float range (NaN, ±inf, overflow
// to inf, underflow through subnormals to 0 all as libm gives them); tests/ops/test_elementwise.py compares
// them with XLA:CPU's. The loops vectorise only without -ftrapping-math (CMakeLists.txt sets
// -fno-trapping-math for the host executor; it never reads floating-point exception flags).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "exec/host/host_isa.h"

// Always inlined: the loops calling them are built once per instruction-set level (JMP_VECTOR_LOOP,
// exec/host/host_isa.h), and GCC will not inline a plain function into a build for another level on its
// own; called out of line, they run one element at a time.
#if defined(__GNUC__)
#define JMP_FASTMATH inline __attribute__((always_inline))
#else
#define JMP_FASTMATH inline
#endif

namespace jmp::exec::host::fastmath {

// Maximum and minimum as the generic kernels define them (NaN propagates, -0 orders below +0), written
// so that vector loops compile them to blends; one definition for the float32 and float64 loops and the
// small kernels.
template <typename T>
JMP_FASTMATH T Maximum(T x, T y) {
  T m = x > y ? x : y;
  m = x == y ? (std::signbit(x) ? y : x) : m;
  return x != x || y != y ? std::numeric_limits<T>::quiet_NaN() : m;
}
template <typename T>
JMP_FASTMATH T Minimum(T x, T y) {
  T m = x < y ? x : y;
  m = x == y ? (std::signbit(x) ? x : y) : m;
  return x != x || y != y ? std::numeric_limits<T>::quiet_NaN() : m;
}

// Integer shifts by amounts outside [0, bits) give 0, or the sign fill for a signed right shift.
template <typename T>
JMP_FASTMATH T ShiftLeft(T x, T y) {
  using U = std::make_unsigned_t<T>;
  const U s = static_cast<U>(y);
  return s >= U(sizeof(T) * 8) ? T(0) : static_cast<T>(static_cast<U>(static_cast<U>(x) << s));
}
template <typename T>
JMP_FASTMATH T ShiftRight(T x, T y) {
  using U = std::make_unsigned_t<T>;
  const U s = static_cast<U>(y);
  if constexpr (std::is_signed_v<T>) {
    if (s >= U(sizeof(T) * 8)) return x < 0 ? T(-1) : T(0);
    return static_cast<T>(x >> s);
  } else {
    return s >= U(sizeof(T) * 8) ? T(0) : static_cast<T>(x >> s);
  }
}

// A value's bits as another type of the same size.
template <typename To, typename From>
JMP_FASTMATH To BitCast(From x) {
  static_assert(sizeof(To) == sizeof(From));
  To y;
  std::memcpy(&y, &x, sizeof y);
  return y;
}

// A select's mask from a bool: all ones or all zeros, as wide as W. Made as a byte and then
// sign-extended, which vectorises as a byte compare and one widening per vector; widening the bool
// first took a chain of shuffles and a subtract.
template <typename W>
JMP_FASTMATH W SelectMask(uint8_t p) {
  const int8_t byte = p != 0 ? int8_t(-1) : int8_t(0);
  return static_cast<W>(static_cast<std::make_signed_t<W>>(byte));
}

JMP_FASTMATH float BitsToFloat(int32_t i) { return BitCast<float>(i); }

// Round to the nearest integer (ties to even) for |v| < 2^22, as a float: adding and removing
// 1.5 * 2^23 leaves no fraction bits.
JMP_FASTMATH float RoundSmall(float v) { return (v + 12582912.0f) - 12582912.0f; }

constexpr float kLog2E = 1.44269504088896341f;
// ln 2 split so that n * kLn2Hi is exact for |n| < 2^8 (kLn2Hi has 16 significant bits).
constexpr float kLn2Hi = 0.693145751953125f;
constexpr float kLn2Lo = 1.42860676533018e-06f;

// x = n ln 2 + r with n = round(x / ln 2), |r| <= ln(2)/2 (|x| < 2^22 ln 2).
JMP_FASTMATH float ReduceLn2(float x, float* n) {
  *n = RoundSmall(x * kLog2E);
  return (x - *n * kLn2Hi) - *n * kLn2Lo;
}

// expm1(r) for |r| <= ln(2)/2 from its Taylor series to r^8 (truncation below 1e-9 relative).
JMP_FASTMATH float Expm1Reduced(float r) {
  float p = 1.0f / 40320;
  p = p * r + 1.0f / 5040;
  p = p * r + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  return p * r;
}

// exp(x) = 2^n (1 + expm1(r)); 2^n is applied as two factors so subnormal results round once.
JMP_FASTMATH float Exp(float x) {
  float xc = x == x ? x : 0.0f;
  xc = xc < -104.0f ? -104.0f : xc;
  xc = xc > 89.0f ? 89.0f : xc;
  float n;
  float p = 1.0f + Expm1Reduced(ReduceLn2(xc, &n));
  int32_t i = static_cast<int32_t>(n);
  int32_t i1 = i / 2, i2 = i - i1;
  float y = p * BitsToFloat((i1 + 127) << 23) * BitsToFloat((i2 + 127) << 23);
  return x == x ? y : x;
}

// expm1(y) for 0 <= y <= 18: 2^n expm1(r) + (2^n - 1), both terms exact or nearly so (no
// cancellation: for n >= 1, 2^n expm1(r) >= -0.3 * 2^n while 2^n - 1 >= 2^(n-1)).
JMP_FASTMATH float Expm1Small(float y) {
  float n;
  float p = Expm1Reduced(ReduceLn2(y, &n));
  float s = BitsToFloat((static_cast<int32_t>(n) + 127) << 23);
  return s * p + (s - 1.0f);
}

// tanh(x) = sign(x) e / (e + 2) with e = expm1(2|x|); |x| >= 9 rounds to ±1 in float.
JMP_FASTMATH float Tanh(float x) {
  float a = x < 0 ? -x : x;
  a = a == a ? a : 0.0f;
  a = a > 9.0f ? 9.0f : a;
  float e = Expm1Small(2.0f * a);
  float t = std::copysign(e / (e + 2.0f), x);
  return x == x ? t : x;
}

JMP_FASTMATH float Sigmoid(float x) { return 1.0f / (1.0f + Exp(-x)); }

JMP_FASTMATH double BitsToDouble(uint64_t i) { return BitCast<double>(i); }
JMP_FASTMATH uint64_t DoubleToBits(double d) { return BitCast<uint64_t>(d); }

// Float64 natural log without branches (libm's scalar log is the largest single cost of a float64
// jax.random.normal, whose erf_inv takes a log of every element). x = 2^k m with m in [sqrt(1/2),
// sqrt(2)), f = m - 1 (exact), s = f / (2 + f), and log(m) = 2 atanh(s) = f - f^2/2 + s (f^2/2 + R(s^2))
// with R(z) = 2z/3 + 2z^2/5 + ... (the atanh series; |s| <= 0.1716, so z <= 0.0295 and the terms after
// z^10 are below 1e-18 relative). ln 2 is split so k ln2_hi is exact (21 significant bits, |k| < 1100).
// Error: below 1 ulp; subnormals are scaled by 2^54 first; 0 gives -inf, x < 0 NaN, inf inf, NaN NaN,
// as libm. The integer steps avoid arithmetic 64-bit shifts and int64 -> double conversions, which
// AVX2 lacks, so the loop still vectorises there.
JMP_FASTMATH double Log(double x) {
  constexpr double kLn2Hi = 0x1.62e42p-1;
  constexpr double kLn2Lo = 0x1.fdf473de6af28p-22;
  constexpr uint64_t kSqrtHalf = 0x3fe6a09e667f3bcdull;
  const bool small = x < std::numeric_limits<double>::min();
  const uint64_t ix = DoubleToBits(small ? x * 0x1p54 : x);
  // Biased by 1024 so the shift is logical: e in [0, 2048) for every positive finite input.
  const uint64_t e = (ix - kSqrtHalf + (uint64_t(1024) << 52)) >> 52;
  const double m = BitsToDouble(ix - ((e - 1024) << 52));
  // e as a double through the bits of 2^52 + e: exact for e < 2^52.
  const double k = (BitsToDouble(0x4330000000000000ull | e) - (0x1p52 + 1024.0)) - (small ? 54.0 : 0.0);
  const double f = m - 1.0;
  const double s = f / (2.0 + f);
  const double z = s * s;
  double r = 2.0 / 21;
  r = r * z + 2.0 / 19;
  r = r * z + 2.0 / 17;
  r = r * z + 2.0 / 15;
  r = r * z + 2.0 / 13;
  r = r * z + 2.0 / 11;
  r = r * z + 2.0 / 9;
  r = r * z + 2.0 / 7;
  r = r * z + 2.0 / 5;
  r = r * z + 2.0 / 3;
  r = r * z;
  const double hfsq = 0.5 * f * f;
  double y = k * kLn2Hi + (f - (hfsq - (s * (hfsq + r) + k * kLn2Lo)));
  y = x == std::numeric_limits<double>::infinity() ? x : y;
  y = x == 0.0 ? -std::numeric_limits<double>::infinity() : y;
  y = x < 0.0 ? std::numeric_limits<double>::quiet_NaN() : y;
  return x != x ? x : y;
}

}  // namespace jmp::exec::host::fastmath

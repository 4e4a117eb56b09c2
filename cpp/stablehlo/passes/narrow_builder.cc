#include "stablehlo/passes/narrow_builder.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace jmp::shlo::narrow {

namespace {

constexpr NarrowFloat kNarrowFloats[] = {
    {DType::kF8E4M3FN, 8, 4, 3, 7, true, Specials::kAllOnesNan},
    {DType::kF8E5M2, 8, 5, 2, 15, true, Specials::kIeee},
    {DType::kF8E4M3FNUZ, 8, 4, 3, 8, true, Specials::kFnuz},
    {DType::kF8E5M2FNUZ, 8, 5, 2, 16, true, Specials::kFnuz},
    {DType::kF8E4M3B11FNUZ, 8, 4, 3, 11, true, Specials::kFnuz},
    {DType::kF8E4M3, 8, 4, 3, 7, true, Specials::kIeee},
    {DType::kF8E3M4, 8, 3, 4, 3, true, Specials::kIeee},
    {DType::kF8E8M0FNU, 8, 8, 0, 127, false, Specials::kAllOnesNan},
    {DType::kF4E2M1FN, 4, 2, 1, 1, true, Specials::kNone},
    {DType::kF6E2M3FN, 6, 2, 3, 1, true, Specials::kNone},
    {DType::kF6E3M2FN, 6, 3, 2, 3, true, Specials::kNone},
};

}  // namespace

const NarrowFloat& FormatOf(DType t) {
  for (const NarrowFloat& f : kNarrowFloats)
    if (f.type == t) return f;
  return kNarrowFloats[0];  // unreachable: callers pass IsNarrowFloat types, all in the table
}
uint32_t SignMask(const NarrowFloat& f) { return f.has_sign ? 1u << (f.width - 1) : 0; }
uint32_t MagnitudeMask(const NarrowFloat& f) { return (1u << (f.has_sign ? f.width - 1 : f.width)) - 1; }

float DecodeNarrowFloat(uint8_t b, DType t) {
  const NarrowFloat& f = FormatOf(t);
  const uint32_t mag = b & MagnitudeMask(f);
  const int e = static_cast<int>(mag >> f.man_bits), m = static_cast<int>(mag & ((1u << f.man_bits) - 1));
  const bool negative = (b & SignMask(f)) != 0;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  switch (f.specials) {
    case Specials::kIeee:
      if (e == (1 << f.exp_bits) - 1) return m ? (negative ? -nan : nan) : (negative ? -1.0f : 1.0f) * INFINITY;
      break;
    case Specials::kAllOnesNan:
      if (mag == MagnitudeMask(f)) return negative ? -nan : nan;
      break;
    case Specials::kFnuz:
      if (b == 0x80) return nan;
      break;
    case Specials::kNone: break;
  }
  const float v = e == 0 && f.man_bits == 0 ? std::ldexp(1.0f, -f.bias)
                  : e == 0                  ? std::ldexp(static_cast<float>(m), 1 - f.bias - f.man_bits)
                           : std::ldexp(static_cast<float>((1 << f.man_bits) | m), e - f.bias - f.man_bits);
  return negative ? -v : v;
}

int Builder::Decode(int x, DType fmt_type, int result) {
  const NarrowFloat& f = FormatOf(fmt_type);
  const int M = f.man_bits, emax = (1 << f.exp_bits) - 1;
  int c = Convert(x, DType::kU32);
  int mag = Binary("stablehlo.and", c, Like(c, MagnitudeMask(f)));
  int e = Binary("stablehlo.shift_right_logical", mag, Like(mag, M));
  int m = Binary("stablehlo.and", mag, Like(mag, (1u << M) - 1));
  int normal = Binary("stablehlo.add", Binary("stablehlo.shift_left", mag, Like(mag, 23 - M)),
                      Like(mag, static_cast<uint64_t>(127 - f.bias) << 23));
  // Exponent 0: a subnormal m * 2^(1 - bias - M), exact in float32; with no mantissa (e8m0fnu),
  // 2^-bias, float32's subnormal 2^-127.
  int small = M == 0 ? Like(mag, 0x00400000u)
                     : Bitcast(Binary("stablehlo.multiply", Convert(m, DType::kF32),
                                      FloatLike(m, std::ldexp(1.0f, 1 - f.bias - M))),
                               DType::kU32);
  int bits = Select(Compare("EQ", e, Like(e, 0), "UNSIGNED"), small, normal);
  // Specials as float32's quiet NaN and infinity, as XLA:CPU gives them; the sign goes on after.
  switch (f.specials) {
    case Specials::kIeee: {
      int special = Select(Compare("EQ", m, Like(m, 0), "UNSIGNED"), Like(m, 0x7f800000u), Like(m, 0x7fc00000u));
      bits = Select(Compare("EQ", e, Like(e, static_cast<uint64_t>(emax)), "UNSIGNED"), special, bits);
      break;
    }
    case Specials::kAllOnesNan:
      bits = Select(Compare("EQ", mag, Like(mag, MagnitudeMask(f)), "UNSIGNED"), Like(mag, 0x7fc00000u), bits);
      break;
    case Specials::kFnuz:  // 0x80 is the NaN: its "sign" bit is no sign, and zero is its magnitude
    case Specials::kNone: break;
  }
  if (f.has_sign) {
    int sign = Binary("stablehlo.shift_left", Binary("stablehlo.and", c, Like(c, SignMask(f))),
                      Like(c, static_cast<uint64_t>(32 - f.width)));
    bits = Binary("stablehlo.or", bits, sign);
  }
  if (f.specials == Specials::kFnuz)
    bits = Select(Compare("EQ", c, Like(c, 0x80), "UNSIGNED"), Like(c, 0x7fc00000u), bits);
  return Bitcast(bits, DType::kF32, result);
}

int Builder::Encode(int y, DType fmt_type, int result, bool plain_nan) {
  const NarrowFloat& f = FormatOf(fmt_type);
  const int M = f.man_bits;
  int b = Bitcast(y, DType::kU32);
  int a = Binary("stablehlo.and", b, Like(b, 0x7fffffffu));
  int is_nan = Compare("GT", a, Like(a, 0x7f800000u), "UNSIGNED");
  // Normal results: round the float32 mantissa to M bits (a carry moves into the exponent, as it
  // should), then rebias. Wraps for tiny a, which the select below discards.
  int bias =
      M == 0 ? Like(a, 1u << 22)
             : Binary("stablehlo.add", Like(a, (1u << (22 - M)) - 1),
                      Binary("stablehlo.and", Binary("stablehlo.shift_right_logical", a, Like(a, 23 - M)), Like(a, 1)));
  int rounded = Binary("stablehlo.add", a, bias);
  int normal = Binary("stablehlo.subtract", Binary("stablehlo.shift_right_logical", rounded, Like(rounded, 23 - M)),
                      Like(rounded, static_cast<uint64_t>(127 - f.bias) << M));
  int code;
  if (M == 0) {  // no subnormals: below float32's normals (2^-126), to the nearer of 2^-127 and 2^-126,
                 // ties (1.5 * 2^-127) up, as the normal range rounds
    int tiny = Convert(Compare("GE", a, Like(a, 0x00600000u), "UNSIGNED"), DType::kU32);
    code = Select(Compare("LT", a, Like(a, 0x00800000u), "UNSIGNED"), tiny, normal);
  } else {
    // Subnormal results: adding 2^(23 + 1 - bias - M) makes float32's own rounding (nearest-even)
    // quantize |y| to the subnormal step; the sum's low bits are the code (2^M: the smallest normal).
    const float magic = std::ldexp(1.0f, 23 + 1 - f.bias - M);
    uint32_t magic_bits;
    std::memcpy(&magic_bits, &magic, 4);
    int sum = Binary("stablehlo.add", Bitcast(a, DType::kF32), FloatLike(a, magic));
    int sub = Binary("stablehlo.subtract", Bitcast(sum, DType::kU32), Like(a, magic_bits));
    int is_sub = Compare("LT", a, Like(a, static_cast<uint64_t>(127 - f.bias + 1) << 23), "UNSIGNED");
    code = Select(is_sub, sub, normal);
  }
  const uint32_t top = MagnitudeMask(f);
  int sign = f.has_sign
                 ? Binary("stablehlo.and",
                          Binary("stablehlo.shift_right_logical", b, Like(b, static_cast<uint64_t>(32 - f.width))),
                          Like(b, SignMask(f)))
                 : -1;
  switch (f.specials) {
    case Specials::kIeee: {  // beyond the largest finite value: infinity; NaN: the quiet NaN
      const uint32_t inf = static_cast<uint32_t>((1 << f.exp_bits) - 1) << M;
      code = Select(Compare("GT", code, Like(code, inf), "UNSIGNED"), Like(code, inf), code);
      code = Select(is_nan, Like(code, inf | (1u << (M - 1))), code);
      code = Binary("stablehlo.or", code, sign);
      break;
    }
    case Specials::kAllOnesNan: {  // beyond the largest finite value, infinity and NaN: NaN
      int bad = Binary("stablehlo.or", is_nan, Compare("GT", code, Like(code, top - 1), "UNSIGNED"));
      if (!f.has_sign) {  // zero and negative numbers have no code but NaN
        bad = Binary("stablehlo.or", bad, Compare("EQ", a, Like(a, 0), "UNSIGNED"));
        bad = Binary("stablehlo.or", bad, Compare("NE", b, a, "UNSIGNED"));
      }
      code = Select(bad, Like(code, top), code);
      if (f.has_sign) code = Binary("stablehlo.or", code, sign);
      break;
    }
    case Specials::kFnuz: {  // overflow, infinity and NaN: 0x80; zero is unsigned
      int bad = Binary("stablehlo.or", is_nan, Compare("GT", code, Like(code, top), "UNSIGNED"));
      code = Binary("stablehlo.or", code, Select(Compare("EQ", code, Like(code, 0), "UNSIGNED"), Like(code, 0), sign));
      code = Select(bad, Like(code, 0x80), code);
      break;
    }
    case Specials::kNone: {  // overflow and infinity saturate; NaN: 0b1000
      code = Select(Compare("GT", code, Like(code, top), "UNSIGNED"), Like(code, top), code);
      code = Binary("stablehlo.or", code, sign);
      code = Select(is_nan, Like(code, SignMask(f)), code);
      break;
    }
  }
  if (plain_nan) code = Select(is_nan, Like(code, 0x7f), code);
  return Convert(code, DType::kU8, result);
}

}  // namespace jmp::shlo::narrow

// Element conversions the runtime and the host kernels share: float16 and bfloat16 against float32,
// exhaustively over every 16-bit pattern, and the dtype table's sizes.
#include <cmath>
#include <cstdint>
#include <limits>

#include "support/dtype.h"
#include "support/float16.h"
#include "unit_tests/unit_test.h"

namespace jmp::unit {
namespace {

JMP_TEST(Conversions, EveryHalfSurvivesARoundTripThroughFloat) {
  int failures = 0;
  for (uint32_t h = 0; h <= 0xFFFF; ++h) {
    float f = HalfToFloat(static_cast<uint16_t>(h));
    bool nan = (h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0;
    if (nan ? !std::isnan(f) : FloatToHalf(f) != h) ++failures;
  }
  EXPECT_SAME(failures, 0);
}

JMP_TEST(Conversions, EveryBFloat16SurvivesARoundTripThroughFloat) {
  int failures = 0;
  for (uint32_t h = 0; h <= 0xFFFF; ++h) {
    float f = BFloat16ToFloat(static_cast<uint16_t>(h));
    bool nan = (h & 0x7F80) == 0x7F80 && (h & 0x7F) != 0;
    if (nan ? !std::isnan(f) : FloatToBFloat16(f) != h) ++failures;
  }
  EXPECT_SAME(failures, 0);
}

JMP_TEST(Conversions, FloatToHalfRoundsToNearestEvenAndOverflowsToInfinity) {
  EXPECT_SAME(HalfToFloat(FloatToHalf(1.0f + 0x1p-11f)), 1.0f);                // tie: down to even
  EXPECT_SAME(HalfToFloat(FloatToHalf(1.0f + 3 * 0x1p-11f)), 1.0f + 0x1p-9f);  // tie: up to even
  EXPECT_SAME(HalfToFloat(FloatToHalf(1.0f + 0x1p-11f + 0x1p-20f)), 1.0f + 0x1p-10f);
  EXPECT_SAME(HalfToFloat(FloatToHalf(65520.0f)), std::numeric_limits<float>::infinity());
  EXPECT_SAME(HalfToFloat(FloatToHalf(65519.0f)), 65504.0f);
  EXPECT_SAME(HalfToFloat(FloatToHalf(0x1p-25f)), 0.0f);      // half the smallest subnormal: even
  EXPECT_SAME(HalfToFloat(FloatToHalf(0x1p-24f)), 0x1p-24f);  // the smallest subnormal
  EXPECT_SAME(HalfToFloat(FloatToHalf(-0.0f)), -0.0f);
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(std::numeric_limits<float>::quiet_NaN()))));
}

JMP_TEST(Conversions, FloatToBFloat16RoundsToNearestEvenAndKeepsNaN) {
  EXPECT_SAME(BFloat16ToFloat(FloatToBFloat16(1.0f + 0x1p-8f)), 1.0f);
  EXPECT_SAME(BFloat16ToFloat(FloatToBFloat16(1.0f + 3 * 0x1p-8f)), 1.0f + 0x1p-6f);
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_SAME(BFloat16ToFloat(FloatToBFloat16(std::numeric_limits<float>::max())),
              std::numeric_limits<float>::infinity());
}

JMP_TEST(Conversions, DTypeSizesAndWidths) {
  EXPECT_SAME(ByteSize(DType::kBool), size_t{1});
  EXPECT_SAME(ByteSize(DType::kBF16), size_t{2});
  EXPECT_SAME(ByteSize(DType::kC64), size_t{8});
  EXPECT_SAME(ByteSize(DType::kC128), size_t{16});
  EXPECT_SAME(BitWidth(DType::kBool), 1);
  EXPECT_SAME(BitWidth(DType::kU64), 64);
  for (DType t : kAllDTypes) EXPECT_TRUE(ByteSize(t) > 0);
}

}  // namespace
}  // namespace jmp::unit

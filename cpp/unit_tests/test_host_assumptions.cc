// The host executor implements each ASSUMPTION row of cpp/mps/op_kinds.def as written there: these
// tests pin those semantics on hand-built graphs, so a host kernel change that drifts from the
// documented contract (and so from what the lowering relies on for MPSGraph) fails here by name.
#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>
#include <vector>

#include "support/float16.h"
#include "unit_tests/host_graph.h"
#include "unit_tests/unit_test.h"

namespace jmp::unit {
namespace {

using mps::OpKind;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

JMP_TEST(HostAssumptions, SignGivesZeroForNaNAndKeepsSignedZeros) {
  auto r = Unary<float>(OpKind::kSign, DType::kF32, DType::kF32, std::vector<float>{kNaN, -0.0f, 0.0f, -3.5f, 2.0f});
  ASSERT_OK(r);
  EXPECT_SAME(r.value(), (std::vector<float>{0.0f, -0.0f, 0.0f, -1.0f, 1.0f}));
}

JMP_TEST(HostAssumptions, RoundBreaksTiesAwayFromZero) {
  auto r =
      Unary<float>(OpKind::kRound, DType::kF32, DType::kF32, std::vector<float>{0.5f, 1.5f, 2.5f, -0.5f, -2.5f, 2.4f});
  ASSERT_OK(r);
  EXPECT_SAME(r.value(), (std::vector<float>{1.0f, 2.0f, 3.0f, -1.0f, -3.0f, 2.0f}));
}

JMP_TEST(HostAssumptions, RintBreaksTiesToEven) {
  auto r = Unary<float>(OpKind::kRint, DType::kF32, DType::kF32, std::vector<float>{0.5f, 1.5f, 2.5f, -2.5f});
  ASSERT_OK(r);
  EXPECT_SAME(r.value(), (std::vector<float>{0.0f, 2.0f, 2.0f, -2.0f}));
}

JMP_TEST(HostAssumptions, IntegerDivisionTruncatesTowardZero) {
  auto r = Binary<int32_t>(OpKind::kDivide, DType::kI32, DType::kI32, std::vector<int32_t>{7, -7, 7, -7},
                           std::vector<int32_t>{2, 2, -2, -2});
  ASSERT_OK(r);
  EXPECT_SAME(r.value(), (std::vector<int32_t>{3, -3, -3, 3}));
}

JMP_TEST(HostAssumptions, ModuloTakesTheDividendsSign) {
  auto i = Binary<int32_t>(OpKind::kModulo, DType::kI32, DType::kI32, std::vector<int32_t>{7, -7, 7, -7},
                           std::vector<int32_t>{3, 3, -3, -3});
  ASSERT_OK(i);
  EXPECT_SAME(i.value(), (std::vector<int32_t>{1, -1, 1, -1}));
  auto f = Binary<float>(OpKind::kModulo, DType::kF32, DType::kF32, std::vector<float>{5.5f, -5.5f, -4.0f},
                         std::vector<float>{2.0f, 2.0f, 2.0f});
  ASSERT_OK(f);
  EXPECT_SAME(f.value(), (std::vector<float>{1.5f, -1.5f, -0.0f}));
}

JMP_TEST(HostAssumptions, RightShiftIsArithmeticForSignedAndLogicalForUnsigned) {
  auto s = Binary<int8_t>(OpKind::kBitwiseRightShift, DType::kI8, DType::kI8, std::vector<int8_t>{-128, -1, 64},
                          std::vector<int8_t>{1, 3, 2});
  ASSERT_OK(s);
  EXPECT_SAME(s.value(), (std::vector<int8_t>{-64, -1, 16}));
  auto u = Binary<uint8_t>(OpKind::kBitwiseRightShift, DType::kU8, DType::kU8, std::vector<uint8_t>{200, 255},
                           std::vector<uint8_t>{1, 7});
  ASSERT_OK(u);
  EXPECT_SAME(u.value(), (std::vector<uint8_t>{100, 1}));
}

JMP_TEST(HostAssumptions, ShiftsPastTheBitWidthGiveZeroOnTheHost) {
  auto l = Binary<int8_t>(OpKind::kBitwiseLeftShift, DType::kI8, DType::kI8, std::vector<int8_t>{1, 1, 1},
                          std::vector<int8_t>{8, 9, -1});
  ASSERT_OK(l);
  EXPECT_SAME(l.value(), (std::vector<int8_t>{0, 0, 0}));
  auto r = Binary<uint16_t>(OpKind::kBitwiseRightShift, DType::kU16, DType::kU16, std::vector<uint16_t>{65535},
                            std::vector<uint16_t>{16});
  ASSERT_OK(r);
  EXPECT_SAME(r.value(), (std::vector<uint16_t>{0}));
}

JMP_TEST(HostAssumptions, FloatToIntCastTruncatesSaturatesAndMapsNaNToZero) {
  auto r = Unary<int32_t>(OpKind::kCast, DType::kF32, DType::kI32,
                          std::vector<float>{2.7f, -2.7f, 1e10f, -1e10f, kNaN, -0.0f});
  ASSERT_OK(r);
  EXPECT_SAME(r.value(), (std::vector<int32_t>{2, -2, std::numeric_limits<int32_t>::max(),
                                               std::numeric_limits<int32_t>::min(), 0, 0}));
  auto u = Unary<uint8_t>(OpKind::kCast, DType::kF32, DType::kU8, std::vector<float>{-3.0f, 300.0f, 254.9f});
  ASSERT_OK(u);
  EXPECT_SAME(u.value(), (std::vector<uint8_t>{0, 255, 254}));
}

JMP_TEST(HostAssumptions, CastToBoolIsNonZeroAndBoolToNumberIsZeroOrOne) {
  auto b = Unary<uint8_t>(OpKind::kCast, DType::kF32, DType::kBool, std::vector<float>{0.0f, -0.0f, 0.5f, kNaN});
  ASSERT_OK(b);
  EXPECT_SAME(b.value(), (std::vector<uint8_t>{0, 0, 1, 1}));
  auto f = Unary<float>(OpKind::kCast, DType::kBool, DType::kF32, std::vector<uint8_t>{0, 1});
  ASSERT_OK(f);
  EXPECT_SAME(f.value(), (std::vector<float>{0.0f, 1.0f}));
}

JMP_TEST(HostAssumptions, NarrowingFloatCastsRoundToNearestEven) {
  // 1 + 2^-11 lies halfway between the halfs 1 and 1 + 2^-10: even is 1. 1 + 3 * 2^-11 rounds up to even.
  auto h = Unary<uint16_t>(OpKind::kCast, DType::kF32, DType::kF16,
                           std::vector<float>{1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 70000.0f});
  ASSERT_OK(h);
  std::vector<float> back;
  for (uint16_t bits : h.value()) back.push_back(HalfToFloat(bits));
  EXPECT_SAME(back, (std::vector<float>{1.0f, 1.0f + 0x1p-9f, std::numeric_limits<float>::infinity()}));
  auto bf =
      Unary<uint16_t>(OpKind::kCast, DType::kF32, DType::kBF16, std::vector<float>{1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f});
  ASSERT_OK(bf);
  EXPECT_SAME(BFloat16ToFloat(bf.value()[0]), 1.0f);
  EXPECT_SAME(BFloat16ToFloat(bf.value()[1]), 1.0f + 0x1p-6f);
}

JMP_TEST(HostAssumptions, HalfMatMulAccumulatesInFloat32) {
  // 2048 + 1 + 1 in f16 steps stays 2048 (1 is half a unit there, ties go to even); in f32 it is 2050,
  // which f16 holds exactly.
  GraphBuilder b;
  int x = b.Input(DType::kF16, {1, 4});
  int y = b.Input(DType::kF16, {4, 1});
  b.Output(b.Apply(OpKind::kMatMul, {x, y}, DType::kF16, {1, 1}));
  std::vector<uint16_t> xs{FloatToHalf(2048.0f), FloatToHalf(1.0f), FloatToHalf(1.0f), FloatToHalf(0.0f)};
  std::vector<uint16_t> ys(4, FloatToHalf(1.0f));
  auto r = RunOnHost(b.graph(), {Bytes(xs), Bytes(ys)});
  ASSERT_OK(r);
  EXPECT_SAME(HalfToFloat(Values<uint16_t>(r.value()[0])[0]), 2050.0f);
}

JMP_TEST(HostAssumptions, IntegerMatMulWrapsAround) {
  GraphBuilder b;
  int x = b.Input(DType::kI32, {1, 2});
  int y = b.Input(DType::kI32, {2, 1});
  b.Output(b.Apply(OpKind::kIntegerMatMul, {x, y}, DType::kI32, {1, 1}));
  auto r = RunOnHost(b.graph(), {Bytes(std::vector<int32_t>{1 << 30, 1 << 30}), Bytes(std::vector<int32_t>{2, 3})});
  ASSERT_OK(r);
  // 2^31 + 3 * 2^30 = 5 * 2^30, which is 2^30 modulo 2^32.
  EXPECT_SAME(Values<int32_t>(r.value()[0]), (std::vector<int32_t>{1 << 30}));
}

JMP_TEST(HostAssumptions, MaximumAndMinimumPropagateNaN) {
  auto mx = Binary<float>(OpKind::kMaximum, DType::kF32, DType::kF32, std::vector<float>{kNaN, 1.0f, -0.0f},
                          std::vector<float>{1.0f, kNaN, 0.0f});
  ASSERT_OK(mx);
  EXPECT_TRUE(std::isnan(mx.value()[0]) && std::isnan(mx.value()[1]));
  EXPECT_SAME(mx.value()[2] == 0.0f, true);
  auto mn = Binary<float>(OpKind::kMinimum, DType::kF32, DType::kF32, std::vector<float>{kNaN, 1.0f},
                          std::vector<float>{1.0f, kNaN});
  ASSERT_OK(mn);
  EXPECT_TRUE(std::isnan(mn.value()[0]) && std::isnan(mn.value()[1]));
}

JMP_TEST(HostAssumptions, ComplexProductHasNoAnnexGRecovery) {
  using c64 = std::complex<float>;
  constexpr float inf = std::numeric_limits<float>::infinity();
  auto r = Binary<c64>(OpKind::kMultiply, DType::kC64, DType::kC64, std::vector<c64>{{inf, inf}, {inf, 0}, {1, 2}},
                       std::vector<c64>{{1, 0}, {0, 1}, {3, -1}});
  ASSERT_OK(r);
  const auto& v = r.value();
  EXPECT_TRUE(std::isnan(v[0].real()) && std::isnan(v[0].imag()));
  EXPECT_TRUE(std::isnan(v[1].real()) && v[1].imag() == inf);
  EXPECT_TRUE(v[2] == c64(5, 5));
}

JMP_TEST(HostAssumptions, ComparisonsTreatNaNAsUnequal) {
  std::vector<float> x{kNaN, 1.0f, kNaN}, y{kNaN, kNaN, 1.0f};
  auto eq = Binary<uint8_t>(OpKind::kEqual, DType::kF32, DType::kBool, x, y);
  auto ne = Binary<uint8_t>(OpKind::kNotEqual, DType::kF32, DType::kBool, x, y);
  auto lt = Binary<uint8_t>(OpKind::kLessThan, DType::kF32, DType::kBool, x, y);
  ASSERT_OK(eq);
  ASSERT_OK(ne);
  ASSERT_OK(lt);
  EXPECT_SAME(eq.value(), (std::vector<uint8_t>{0, 0, 0}));
  EXPECT_SAME(ne.value(), (std::vector<uint8_t>{1, 1, 1}));
  EXPECT_SAME(lt.value(), (std::vector<uint8_t>{0, 0, 0}));
}

JMP_TEST(HostAssumptions, ArgMaxTiesGiveTheSmallestIndexAndNaNCountsAsMaximum) {
  auto argmax = [](std::vector<float> x, OpKind kind) -> StatusOr<int32_t> {
    GraphBuilder b;
    int64_t n = static_cast<int64_t>(x.size());
    b.Output(b.Apply(kind, {b.Input(DType::kF32, {n})}, DType::kI32, {1},
                     [](mps::Op& op) { op.attrs = mps::AxisAttrs{0}; }));
    auto r = RunOnHost(b.graph(), {Bytes(x)});
    if (!r.ok()) return r.status();
    return Values<int32_t>(r.value()[0])[0];
  };
  auto ties = argmax({1.0f, 3.0f, 3.0f, 2.0f}, OpKind::kReductionArgMaximum);
  auto nan_max = argmax({1.0f, kNaN, 5.0f, kNaN}, OpKind::kReductionArgMaximum);
  auto nan_min = argmax({1.0f, -5.0f, kNaN, kNaN}, OpKind::kReductionArgMinimum);
  auto min_ties = argmax({2.0f, 0.5f, 0.5f}, OpKind::kReductionArgMinimum);
  ASSERT_OK(ties);
  ASSERT_OK(nan_max);
  ASSERT_OK(nan_min);
  ASSERT_OK(min_ties);
  EXPECT_SAME(ties.value(), 1);
  EXPECT_SAME(nan_max.value(), 1);
  EXPECT_SAME(nan_min.value(), 2);
  EXPECT_SAME(min_ties.value(), 1);
}

}  // namespace
}  // namespace jmp::unit

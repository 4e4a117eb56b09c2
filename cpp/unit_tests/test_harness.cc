// The harness itself: a failed expectation is reported (a harness that cannot fail proves nothing).
#include <limits>
#include <vector>

#include "unit_tests/unit_test.h"

namespace jmp::unit {
namespace {

JMP_TEST(Harness, FailedExpectationsAreReported) {
  Context inner;
  {
    Context& jmp_test_ = inner;  // the macros below report into `inner`
    EXPECT_SAME(1, 2);
    EXPECT_SAME(0.0f, -0.0f);  // bitwise: the sign of zero counts
    EXPECT_SAME((std::vector<int>{1, 2}), (std::vector<int>{1}));
    EXPECT_TRUE(false);
    EXPECT_ERROR(Status::Ok(), "anything");
    EXPECT_ERROR(InvalidArgument("other words"), "anything");
  }
  EXPECT_TRUE(inner.failed());
  int lines = 0;
  for (char c : inner.failures()) lines += c == '\n';
  EXPECT_SAME(lines, 6);
  Context nan_ok;
  {
    Context& jmp_test_ = nan_ok;
    float nan = std::numeric_limits<float>::quiet_NaN();
    EXPECT_SAME(nan, nan);  // the same NaN bits are the same result
  }
  EXPECT_TRUE(!nan_ok.failed());
}

}  // namespace
}  // namespace jmp::unit

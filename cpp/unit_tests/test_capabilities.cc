// exec/capabilities.h: the "Op:dtype" lists, placement keeping JAX_METAL_AVOID's pairs off Metal (and
// JAX_METAL_CAPABILITIES=ignore), and the fault rewrite the Metal side applies for the self-check.
#include <cstdlib>
#include <string>
#include <vector>

#include "exec/capabilities.h"
#include "exec/placement.h"
#include "support/float16.h"
#include "unit_tests/host_graph.h"
#include "unit_tests/unit_test.h"

namespace jmp::unit {
namespace {

using mps::OpKind;

// Sets an environment variable for one test and restores it after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (had_)
      setenv(name_, old_.c_str(), 1);
    else
      unsetenv(name_);
  }

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

// x f16 -> Add(x, x) and Multiply(x, x), both returned.
mps::Graph AddAndMultiply(DType t) {
  GraphBuilder b;
  int x = b.Input(t, {2});
  b.Output(b.Apply(OpKind::kAdd, {x, x}, t, {2}));
  b.Output(b.Apply(OpKind::kMultiply, {x, x}, t, {2}));
  return b.graph();
}

JMP_TEST(Capabilities, PairsParseAndFormat) {
  auto pairs = exec::ParsePairs(" Add:float16, Sort:bfloat16,,");
  ASSERT_OK(pairs);
  EXPECT_SAME(exec::FormatPairs(pairs.value()), std::string("Add:float16,Sort:bfloat16"));
  EXPECT_TRUE(!exec::ParsePairs("Add:float99").ok());
  EXPECT_TRUE(!exec::ParsePairs("Plus:float16").ok());
  EXPECT_TRUE(!exec::ParsePairs("Add").ok());
}

JMP_TEST(Capabilities, AvoidedPairsRunOnTheHost) {
  ScopedEnv ignore("JAX_METAL_CAPABILITIES", nullptr);
  ScopedEnv avoid("JAX_METAL_AVOID", "Add:float16");
  mps::Placement p = mps::PlaceGraph(AddAndMultiply(DType::kF16));
  EXPECT_TRUE(p.op_where[0] == mps::Where::kHost);
  EXPECT_TRUE(p.op_where[1] == mps::Where::kMetal);
  // Another dtype of the same op stays on Metal.
  mps::Placement f32 = mps::PlaceGraph(AddAndMultiply(DType::kF32));
  EXPECT_TRUE(f32.op_where[0] == mps::Where::kMetal);
  ScopedEnv off("JAX_METAL_CAPABILITIES", "ignore");
  EXPECT_TRUE(mps::PlaceGraph(AddAndMultiply(DType::kF16)).op_where[0] == mps::Where::kMetal);
}

JMP_TEST(Capabilities, FaultsCorruptExactlyTheirPairs) {
  auto faults = exec::ParsePairs("Add:float16,Not:bool");
  ASSERT_OK(faults);
  mps::Graph g = exec::WithFaults(AddAndMultiply(DType::kF16), faults.value());
  const std::vector<uint16_t> x = {FloatToHalf(1.5f), FloatToHalf(-2.0f)};
  auto r = RunOnHost(g, {Bytes(x)});
  ASSERT_OK(r);
  std::vector<uint16_t> sum = Values<uint16_t>(r.value()[0]), product = Values<uint16_t>(r.value()[1]);
  EXPECT_SAME(HalfToFloat(sum[0]), 4.0f);   // 3 + 1
  EXPECT_SAME(HalfToFloat(sum[1]), -3.0f);  // -4 + 1
  EXPECT_SAME(HalfToFloat(product[0]), 2.25f);
  // A bool result is negated.
  GraphBuilder b;
  int p = b.Input(DType::kBool, {2});
  b.Output(b.Apply(OpKind::kNot, {p}, DType::kBool, {2}));
  auto n = RunOnHost(exec::WithFaults(b.graph(), faults.value()), {std::vector<uint8_t>{0, 1}});
  ASSERT_OK(n);
  EXPECT_TRUE(n.value()[0] == (std::vector<uint8_t>{0, 1}));
}

}  // namespace
}  // namespace jmp::unit

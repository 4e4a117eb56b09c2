// exec/capabilities.h: the "Op:dtype" lists and their shape classes and fault modes, placement keeping
// JAX_METAL_AVOID's pairs off Metal (and JAX_METAL_CAPABILITIES=ignore), and the fault rewrite the Metal
// side applies for the self-check; exec/crash_note.h's text of what a segment holds.
#include <cstdlib>
#include <string>
#include <vector>

#include "exec/capabilities.h"
#include "exec/crash_note.h"
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
  EXPECT_TRUE(!exec::ParsePairs("Add:float16:empty").ok());  // --only names pairs, nothing more
}

JMP_TEST(Capabilities, RulesParseShapeClassesAndModes) {
  auto rules = exec::ParseRules("Add:float16, Multiply:float32:abort,Negative:float32:large:hang,Sort:int32:rank0");
  ASSERT_OK(rules);
  const std::vector<exec::PairRule>& r = rules.value();
  EXPECT_SAME(r.size(), size_t{4});
  EXPECT_TRUE(r[0].kind == OpKind::kAdd && r[0].shape == exec::ShapeClass::kOther &&
              r[0].mode == exec::FaultMode::kCorrupt);
  EXPECT_TRUE(r[1].kind == OpKind::kMultiply && r[1].dtype == DType::kF32 && r[1].mode == exec::FaultMode::kAbort);
  EXPECT_TRUE(r[2].shape == exec::ShapeClass::kLarge && r[2].mode == exec::FaultMode::kHang);
  EXPECT_TRUE(r[3].shape == exec::ShapeClass::kRank0 && r[3].mode == exec::FaultMode::kCorrupt);
  EXPECT_TRUE(!exec::ParseRules("Add:float16:sometimes").ok());
  EXPECT_TRUE(!exec::ParseRules("Add:float16:abort:empty").ok());  // shape class first, then mode
  EXPECT_TRUE(!exec::ParseRules("Add:float16:empty:rank0").ok());
}

// x -> Add(x, x) for x of `shape`.
mps::Graph AddOf(const std::vector<int64_t>& shape) {
  GraphBuilder b;
  int x = b.Input(DType::kF32, shape);
  b.Output(b.Apply(OpKind::kAdd, {x, x}, DType::kF32, shape));
  return b.graph();
}

JMP_TEST(Capabilities, ShapeClassesOfOps) {
  auto of = [](const std::vector<int64_t>& shape) {
    mps::Graph g = AddOf(shape);
    return exec::ShapeClassOf(g, g.ops[0]);
  };
  EXPECT_TRUE(of({3, 4}) == exec::ShapeClass::kOther);
  EXPECT_TRUE(of({}) == exec::ShapeClass::kRank0);
  EXPECT_TRUE(of({3, 0}) == exec::ShapeClass::kEmpty);
  EXPECT_TRUE(of({2, exec::kLargeDimension + 1}) == exec::ShapeClass::kLarge);
  EXPECT_TRUE(of({0, exec::kLargeDimension + 1}) == exec::ShapeClass::kEmpty);  // empty takes precedence
  EXPECT_TRUE(of({exec::kLargeDimension}) == exec::ShapeClass::kOther);
}

JMP_TEST(Capabilities, AShapeClassRoutesOnlyItsOps) {
  ScopedEnv ignore("JAX_METAL_CAPABILITIES", nullptr);
  ScopedEnv avoid("JAX_METAL_AVOID", "Add:float32:rank0");
  EXPECT_TRUE(mps::PlaceGraph(AddOf({})).op_where[0] == mps::Where::kHost);
  EXPECT_TRUE(mps::PlaceGraph(AddOf({5})).op_where[0] == mps::Where::kMetal);
  // Another class stays on Metal (an empty Add would run on the host whatever the rule: MPSGraph never
  // takes a zero-element tensor).
  EXPECT_TRUE(mps::PlaceGraph(AddOf({2, exec::kLargeDimension + 1})).op_where[0] == mps::Where::kMetal);
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
  // An abort or hang rule does not corrupt: it acts when the executable starts (WithInjectedFaults).
  auto faults = exec::ParseRules("Add:float16,Not:bool,Multiply:float16:abort");
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
  // Corruption confined to a shape class leaves other shapes alone.
  auto rank0 = exec::ParseRules("Add:float32:rank0");
  ASSERT_OK(rank0);
  auto scalar = RunOnHost(exec::WithFaults(AddOf({}), rank0.value()), {Bytes(std::vector<float>{2.0f})});
  auto vector = RunOnHost(exec::WithFaults(AddOf({1}), rank0.value()), {Bytes(std::vector<float>{2.0f})});
  ASSERT_OK(scalar);
  ASSERT_OK(vector);
  const std::vector<float> doubled_scalar = Values<float>(scalar.value()[0]),
                           doubled_vector = Values<float>(vector.value()[0]);
  EXPECT_SAME(doubled_scalar[0], 5.0f);  // 4 + 1
  EXPECT_SAME(doubled_vector[0], 4.0f);
}

JMP_TEST(Capabilities, CrashNoteNamesEveryPairTheGraphHolds) {
  EXPECT_SAME(exec::CrashNoteText(AddAndMultiply(DType::kF16)), std::string("Add:float16\nMultiply:float16\n"));
}

}  // namespace
}  // namespace jmp::unit

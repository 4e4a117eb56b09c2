// The lowering's common-subexpression elimination (lower/lower_cse.h): which ops are one, and that a
// merged graph still computes what the written one did.
#include <vector>

#include "lower/lower_cse.h"
#include "unit_tests/host_graph.h"
#include "unit_tests/unit_test.h"

namespace jmp::unit {
namespace {

using mps::OpKind;

JMP_TEST(CommonOps, AnOpOnTheSameOperandsIsOne) {
  GraphBuilder b;
  const int x = b.Input(DType::kF32, {3});
  const int l1 = b.Apply(OpKind::kLogarithm, {x}, DType::kF32, {3});
  const int l2 = b.Apply(OpKind::kLogarithm, {x}, DType::kF32, {3});
  const int sum = b.Apply(OpKind::kAdd, {l1, l2}, DType::kF32, {3});
  b.Output(sum);
  b.Output(l2);
  mps::Graph g = b.graph();
  mps::EliminateCommonOps(g);
  EXPECT_SAME(CountOps(g, OpKind::kLogarithm), 1);
  EXPECT_SAME(g.outputs[1], l1);
  const std::vector<std::vector<uint8_t>> in = {Bytes(std::vector<float>{0.5f, 2.0f, 3.0f})};
  auto merged = RunOnHost(g, in);
  auto written = RunOnHost(b.graph(), in);
  ASSERT_OK(merged);
  ASSERT_OK(written);
  EXPECT_TRUE(merged.value() == written.value());
}

JMP_TEST(CommonOps, OtherResultTypesAndParametersStayApart) {
  GraphBuilder b;
  const int x = b.Input(DType::kF32, {2, 3});
  b.Output(b.Apply(OpKind::kCast, {x}, DType::kI32, {2, 3}));
  b.Output(b.Apply(OpKind::kCast, {x}, DType::kF16, {2, 3}));
  auto transpose = [](mps::Op& op) { op.attrs = mps::PermutationAttrs{{1, 0}}; };
  b.Output(b.Apply(OpKind::kTranspose, {x}, DType::kF32, {3, 2}, transpose));
  b.Output(b.Apply(OpKind::kTranspose, {x}, DType::kF32, {3, 2}, transpose));
  mps::Graph g = b.graph();
  mps::EliminateCommonOps(g);
  EXPECT_SAME(CountOps(g, OpKind::kCast), 2);
  EXPECT_SAME(CountOps(g, OpKind::kTranspose), 2);
}

}  // namespace
}  // namespace jmp::unit

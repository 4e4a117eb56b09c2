// VerifyGraph is what keeps a malformed program from making an executor read or write past a buffer:
// each rejection here is one the executors rely on, and a consistent graph passes.
#include <vector>

#include "mps/verify.h"
#include "unit_tests/host_graph.h"
#include "unit_tests/unit_test.h"

namespace jmp::unit {
namespace {

using mps::OpKind;

JMP_TEST(VerifyGraph, AcceptsAConsistentGraph) {
  GraphBuilder b;
  int x = b.Input(DType::kF32, {2, 3});
  int t = b.Apply(OpKind::kTranspose, {x}, DType::kF32, {3, 2},
                  [](mps::Op& op) { op.attrs = mps::PermutationAttrs{{1, 0}}; });
  int s = b.Apply(OpKind::kReductionSum, {t}, DType::kF32, {3, 1}, [](mps::Op& op) { op.attrs = mps::AxesAttrs{{1}}; });
  b.Output(b.Apply(OpKind::kNegative, {s}, DType::kF32, {3, 1}));
  ASSERT_OK(mps::VerifyGraph(b.graph()));
}

JMP_TEST(VerifyGraph, RejectsValueIdsOutOfRange) {
  GraphBuilder b;
  int x = b.Input(DType::kF32, {4});
  b.Output(b.Apply(OpKind::kNegative, {x + 7}, DType::kF32, {4}));
  EXPECT_ERROR(mps::VerifyGraph(b.graph()), "value id out of range");
  GraphBuilder c;
  c.Input(DType::kF32, {4});
  c.Output(42);
  EXPECT_ERROR(mps::VerifyGraph(c.graph()), "bad output");
}

// MPSGraph types a predicate's result bool (the lowering once typed a NaN test like its operand).
JMP_TEST(VerifyGraph, RejectsAPredicateWhoseResultIsNotBool) {
  for (OpKind kind : {OpKind::kIsNaN, OpKind::kIsFinite}) {
    GraphBuilder b;
    int x = b.Input(DType::kF32, {4});
    b.Output(b.Apply(kind, {x}, DType::kF32, {4}));
    EXPECT_ERROR(mps::VerifyGraph(b.graph()), "must be bool");
  }
  GraphBuilder c;
  int x = c.Input(DType::kI32, {4});
  c.Output(c.Apply(OpKind::kLessThan, {x, x}, DType::kI32, {4}));
  EXPECT_ERROR(mps::VerifyGraph(c.graph()), "must be bool");
  GraphBuilder ok;
  int y = ok.Input(DType::kF32, {4});
  ok.Output(ok.Apply(OpKind::kIsNaN, {y}, DType::kBool, {4}));
  ASSERT_OK(mps::VerifyGraph(ok.graph()));
}

JMP_TEST(VerifyGraph, RejectsAnOpWithoutOutputs) {
  GraphBuilder b;
  int x = b.Input(DType::kF32, {4});
  b.Apply(OpKind::kNegative, {x}, DType::kF32, {4}, [](mps::Op& op) { op.outputs.clear(); });
  EXPECT_ERROR(mps::VerifyGraph(b.graph()), "op without outputs");
}

JMP_TEST(VerifyGraph, RejectsAConstantOfTheWrongSize) {
  GraphBuilder b;
  b.Output(b.Apply(OpKind::kConstant, {}, DType::kF32, {4},
                   [](mps::Op& op) { op.attrs = mps::ConstantAttrs{std::vector<uint8_t>(12)}; }));
  EXPECT_ERROR(mps::VerifyGraph(b.graph()), "constant size mismatch");
}

JMP_TEST(VerifyGraph, RejectsElementwiseShapeMismatches) {
  GraphBuilder b;
  int x = b.Input(DType::kF32, {4});
  int y = b.Input(DType::kF32, {5});
  b.Output(b.Apply(OpKind::kAdd, {x, y}, DType::kF32, {4}));
  EXPECT_ERROR(mps::VerifyGraph(b.graph()), "operand shapes differ");
  GraphBuilder c;
  c.Output(c.Apply(OpKind::kExponent, {c.Input(DType::kF32, {4})}, DType::kF32, {8}));
  EXPECT_ERROR(mps::VerifyGraph(c.graph()), "operand shape differs");
}

JMP_TEST(VerifyGraph, RejectsBadPermutationsAndBroadcasts) {
  GraphBuilder b;
  int x = b.Input(DType::kF32, {2, 3});
  b.Output(b.Apply(OpKind::kTranspose, {x}, DType::kF32, {3, 2},
                   [](mps::Op& op) { op.attrs = mps::PermutationAttrs{{0, 2}}; }));
  EXPECT_ERROR(mps::VerifyGraph(b.graph()), "bad permutation");
  GraphBuilder c;
  int y = c.Input(DType::kF32, {3});
  c.Output(c.Apply(OpKind::kBroadcast, {y}, DType::kF32, {2, 4}));
  EXPECT_ERROR(mps::VerifyGraph(c.graph()), "bad broadcast");
}

JMP_TEST(VerifyGraph, RejectsSlicesOutOfBoundsAndWrongReductionShapes) {
  GraphBuilder b;
  int x = b.Input(DType::kF32, {4});
  b.Output(
      b.Apply(OpKind::kSlice, {x}, DType::kF32, {3}, [](mps::Op& op) { op.attrs = mps::SliceAttrs{{2}, {5}, {1}}; }));
  EXPECT_ERROR(mps::VerifyGraph(b.graph()), "slice out of bounds");
  GraphBuilder c;
  int y = c.Input(DType::kF32, {4, 3});
  c.Output(c.Apply(OpKind::kReductionSum, {y}, DType::kF32, {4}, [](mps::Op& op) { op.attrs = mps::AxesAttrs{{1}}; }));
  EXPECT_ERROR(mps::VerifyGraph(c.graph()), "bad reduction");
}

JMP_TEST(VerifyGraph, NamesTheOpAndItsSourceLocation) {
  GraphBuilder b;
  int x = b.Input(DType::kF32, {4});
  b.Output(b.Apply(OpKind::kExponent, {x}, DType::kF32, {8}, [](mps::Op& op) { op.location = "model.py:12:3"; }));
  EXPECT_ERROR(mps::VerifyGraph(b.graph()), "Exponent");
  EXPECT_ERROR(mps::VerifyGraph(b.graph()), "model.py:12:3");
}

}  // namespace
}  // namespace jmp::unit

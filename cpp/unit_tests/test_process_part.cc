// A process's part of a program over several processes (lower/process_part.h) and the AllReduce op it
// runs (op_kinds.def): the fold in group order, what a part keeps and drops, and when there is none.
#include <vector>

#include "lower/process_part.h"
#include "mps/verify.h"
#include "unit_tests/host_graph.h"
#include "unit_tests/unit_test.h"

namespace jmp::unit {
namespace {

using mps::OpKind;

std::function<void(mps::Op&)> SumOver(std::vector<int64_t> devices) {
  return [devices](mps::Op& op) { op.attrs = mps::AllReduceAttrs{OpKind::kAdd, devices, {}}; };
}

JMP_TEST(AllReduce, FoldsInGroupOrderAsTheChainOfItsOp) {
  // (1 + 1e8) - 1e8 is 0 in float32, 1 + (1e8 - 1e8) is 1: only the left fold gives the chain's bits.
  GraphBuilder b;
  const int x = b.Input(DType::kF32, {2}), y = b.Input(DType::kF32, {2}), z = b.Input(DType::kF32, {2});
  b.Output(b.Apply(OpKind::kAllReduce, {x, y, z}, DType::kF32, {2}, SumOver({0, 1, 2})));
  GraphBuilder chain;
  const int cx = chain.Input(DType::kF32, {2}), cy = chain.Input(DType::kF32, {2}), cz = chain.Input(DType::kF32, {2});
  chain.Output(
      chain.Apply(OpKind::kAdd, {chain.Apply(OpKind::kAdd, {cx, cy}, DType::kF32, {2}), cz}, DType::kF32, {2}));
  const std::vector<std::vector<uint8_t>> in = {Bytes(std::vector<float>{1.0f, 2.0f}),
                                                Bytes(std::vector<float>{1e8f, 3.0f}),
                                                Bytes(std::vector<float>{-1e8f, 4.0f})};
  ASSERT_OK(mps::VerifyGraph(b.graph()));
  auto folded = RunOnHost(b.graph(), in);
  auto chained = RunOnHost(chain.graph(), in);
  ASSERT_OK(folded);
  ASSERT_OK(chained);
  EXPECT_TRUE(folded.value() == chained.value());
  EXPECT_TRUE(Values<float>(folded.value()[0]) == (std::vector<float>{0.0f, 9.0f}));
}

// Two devices in two processes: each squares its tile, the squares are summed across the devices, and
// each device returns the sum plus its tile.
struct TwoDevices {
  GraphBuilder b;
  int t0, t1, sum;
  TwoDevices() {
    t0 = b.Input(DType::kF32, {4});
    t1 = b.Input(DType::kF32, {4});
    const int s0 = b.Apply(OpKind::kMultiply, {t0, t0}, DType::kF32, {4});
    const int s1 = b.Apply(OpKind::kMultiply, {t1, t1}, DType::kF32, {4});
    sum = b.Apply(OpKind::kAllReduce, {s0, s1}, DType::kF32, {4}, SumOver({0, 1}));
    b.Output(b.Apply(OpKind::kAdd, {sum, t0}, DType::kF32, {4}));
    b.Output(b.Apply(OpKind::kAdd, {sum, t1}, DType::kF32, {4}));
  }
  static mps::ProcessLayout Layout(int process) {
    mps::ProcessLayout layout;
    layout.process = process;
    layout.process_of = {0, 1};
    layout.holds = {process == 0, process == 1};
    layout.returns = {process == 0, process == 1};
    return layout;
  }
};

JMP_TEST(ProcessPart, EachProcessComputesItsOwnMembersOnly) {
  TwoDevices two;
  for (int process : {0, 1}) {
    mps::Graph part;
    EXPECT_TRUE(mps::ProcessPart(two.b.graph(), TwoDevices::Layout(process), &part));
    if (!(mps::ProcessPart(two.b.graph(), TwoDevices::Layout(process), &part))) return;
    ASSERT_OK(mps::VerifyGraph(part));
    EXPECT_SAME(part.inputs.size(), size_t{1});
    EXPECT_SAME(part.inputs[0], process == 0 ? two.t0 : two.t1);
    EXPECT_SAME(part.outputs.size(), size_t{1});
    EXPECT_SAME(CountOps(part, OpKind::kMultiply), 1);
    EXPECT_SAME(CountOps(part, OpKind::kAllReduce), 1);
    for (const mps::Op& op : part.ops) {
      if (op.kind != OpKind::kAllReduce) continue;
      EXPECT_SAME(op.inputs.size(), size_t{1});
      EXPECT_TRUE(op.Attrs<mps::AllReduceAttrs>().processes == (std::vector<int64_t>{0, 1}));
      EXPECT_TRUE(mps::HasEffects(op));
    }
  }
}

JMP_TEST(ProcessPart, AnAllReduceSharedWithOthersRunsEvenWhenNothingReturnedNeedsIt) {
  TwoDevices two;
  mps::ProcessLayout layout = TwoDevices::Layout(0);
  layout.returns = {false, false};
  mps::Graph part;
  EXPECT_TRUE(mps::ProcessPart(two.b.graph(), layout, &part));
  if (!(mps::ProcessPart(two.b.graph(), layout, &part))) return;
  EXPECT_SAME(CountOps(part, OpKind::kAllReduce), 1);
  EXPECT_SAME(CountOps(part, OpKind::kAdd), 0);
}

JMP_TEST(ProcessPart, NoneWhereAResultNeedsAnotherProcessesTile) {
  GraphBuilder b;
  const int t0 = b.Input(DType::kF32, {4}), t1 = b.Input(DType::kF32, {4});
  b.Output(b.Apply(OpKind::kAdd, {t0, t1}, DType::kF32, {4}));
  mps::ProcessLayout layout;
  layout.process = 0;
  layout.process_of = {0, 1};
  layout.holds = {true, false};
  layout.returns = {true};
  mps::Graph part;
  EXPECT_TRUE(!mps::ProcessPart(b.graph(), layout, &part));
  // Nor where the needed all-reduce has no member here to take part with.
  TwoDevices two;
  layout = TwoDevices::Layout(0);
  layout.process_of = {1, 1};
  layout.holds = {true, true};
  EXPECT_TRUE(!mps::ProcessPart(two.b.graph(), layout, &part));
}

JMP_TEST(ProcessPart, RunWithoutOtherProcessesIsAnErrorNotAHang) {
  TwoDevices two;
  mps::Graph part;
  EXPECT_TRUE(mps::ProcessPart(two.b.graph(), TwoDevices::Layout(0), &part));
  if (!(mps::ProcessPart(two.b.graph(), TwoDevices::Layout(0), &part))) return;
  auto run = RunOnHost(part, {Bytes(std::vector<float>{1, 2, 3, 4})});
  EXPECT_ERROR(run.status(), "joined no others");
}

}  // namespace
}  // namespace jmp::unit

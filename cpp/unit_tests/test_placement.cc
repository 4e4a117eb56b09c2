// Placement (exec/placement.h) and the segment runner (exec/segment_runner.cc) on hand-built graphs:
// which ops go where, how few cuts the schedule makes, what crosses a cut, and that a segmented run
// (host executors standing in for both sides, as on Linux) gives the bytes a single host run gives,
// also when a donated input is overwritten by an output.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "exec/executor.h"
#include "exec/placement.h"
#include "unit_tests/host_graph.h"
#include "unit_tests/unit_test.h"

namespace jmp::unit {
namespace {

using mps::OpKind;
using mps::Where;

using Names = std::vector<std::string>;

Names Segments(const mps::Placement& p) {
  Names out;
  for (const mps::Segment& s : p.segments) out.emplace_back(mps::WhereName(s.where));
  return out;
}

mps::Op MakeOp(OpKind kind, int input, int output) {
  mps::Op op;
  op.kind = kind;
  op.inputs = {input};
  op.outputs = {output};
  return op;
}

// f32 x -> a = x*x (metal); d = f64(x) + f64(x) (host); c = exp(x) (metal, independent of d);
// result: a + c (f32) and d (f64).
mps::Graph Mixed() {
  GraphBuilder b;
  int x = b.Input(DType::kF32, {4});
  int a = b.Apply(OpKind::kMultiply, {x, x}, DType::kF32, {4});
  int xd = b.Apply(OpKind::kCast, {x}, DType::kF64, {4});
  int d = b.Apply(OpKind::kAdd, {xd, xd}, DType::kF64, {4});
  int c = b.Apply(OpKind::kExponent, {x}, DType::kF32, {4});
  b.Output(b.Apply(OpKind::kAdd, {a, c}, DType::kF32, {4}));
  b.Output(d);
  return b.graph();
}

JMP_TEST(Placement, Float32StaysOnMetalInOneSegment) {
  GraphBuilder b;
  int x = b.Input(DType::kF32, {2, 2});
  b.Output(b.Apply(OpKind::kMatMul, {x, x}, DType::kF32, {2, 2}));
  mps::Placement p = mps::PlaceGraph(b.graph());
  EXPECT_SAME(Segments(p), Names{"metal"});
}

JMP_TEST(Placement, Float64GoesToTheHost) {
  GraphBuilder b;
  int x = b.Input(DType::kF64, {2, 2});
  b.Output(b.Apply(OpKind::kMatMul, {x, x}, DType::kF64, {2, 2}));
  EXPECT_SAME(Segments(mps::PlaceGraph(b.graph())), Names{"host"});
}

JMP_TEST(Placement, IndependentOpsJoinTheirExecutorsSegment) {
  // Program order metal, host, metal, metal: the schedule runs both metal ops before handing over.
  mps::Placement p = mps::PlaceGraph(Mixed());
  EXPECT_SAME(Segments(p), (Names{"metal", "host"}));
  EXPECT_SAME(p.segments[0].ops, (std::vector<size_t>{0, 3, 4}));
  EXPECT_SAME(p.segments[1].ops, (std::vector<size_t>{1, 2}));
  // The host segment reads only the parameter; each segment writes its own result.
  EXPECT_SAME(p.segments[1].inputs, std::vector<int>{0});
  EXPECT_SAME(p.segments[0].returns, std::vector<int>{0});
  EXPECT_SAME(p.segments[1].returns, std::vector<int>{1});
}

JMP_TEST(Placement, ALoopWithAHostOpInItsBodyRunsOnTheHostWhole) {
  mps::Graph body;
  int i = body.AddValue(DType::kF32, {});
  body.inputs = {i};
  int wide = body.AddValue(DType::kF64, {});
  body.ops.push_back(MakeOp(OpKind::kCast, i, wide));
  int back = body.AddValue(DType::kF32, {});
  body.ops.push_back(MakeOp(OpKind::kCast, wide, back));
  body.outputs = {back};
  mps::Graph cond;
  int c = cond.AddValue(DType::kF32, {});
  cond.inputs = {c};
  int flag = cond.AddValue(DType::kBool, {});
  cond.ops.push_back(MakeOp(OpKind::kIsNaN, c, flag));
  cond.outputs = {flag};

  GraphBuilder b;
  int x = b.Input(DType::kF32, {});
  int y = b.Apply(OpKind::kWhile, {x}, DType::kF32, {}, [&](mps::Op& op) { op.subgraphs = {cond, body}; });
  b.Output(b.Apply(OpKind::kNegative, {y}, DType::kF32, {}));
  mps::Placement p = mps::PlaceGraph(b.graph());
  EXPECT_TRUE(p.op_where == (std::vector<Where>{Where::kHost, Where::kMetal}));
  EXPECT_SAME(Segments(p), (Names{"host", "metal"}));
}

JMP_TEST(Placement, ConstantsAreRecomputedInEachSegmentThatReadsThem) {
  GraphBuilder b;
  int x = b.Input(DType::kF32, {2});
  int k = b.Apply(OpKind::kConstant, {}, DType::kF32, {2},
                  [](mps::Op& op) { op.attrs = mps::ConstantAttrs{Bytes(std::vector<float>{1, 2})}; });
  int a = b.Apply(OpKind::kAdd, {x, k}, DType::kF32, {2});
  int wide = b.Apply(OpKind::kCast, {a}, DType::kF64, {2});
  int back = b.Apply(OpKind::kCast, {wide}, DType::kF32, {2});
  b.Output(b.Apply(OpKind::kMultiply, {back, k}, DType::kF32, {2}));
  mps::Placement p = mps::PlaceGraph(b.graph());
  EXPECT_SAME(Segments(p), (Names{"metal", "host", "metal"}));
  // The last segment reads the host's result, not the constant: it makes its own.
  EXPECT_SAME(p.segments[2].inputs, std::vector<int>{back});
  EXPECT_TRUE(p.segments[2].graph.ops.front().kind == OpKind::kConstant);
}

// Runs `graph` through the segment runner (host executors on both sides) on `inputs`; outputs[j] may
// be given as an input index whose memory output j takes (a donated buffer reused).
StatusOr<std::vector<std::vector<uint8_t>>> RunSegmented(const mps::Graph& graph,
                                                         const std::vector<std::vector<uint8_t>>& inputs,
                                                         const std::vector<int>& reuse = {}) {
  auto executor = exec::CreateSegmentedExecutor(exec::CreateHostExecutor(), exec::CreateHostExecutor());
  JMP_ASSIGN_OR_RETURN(auto exe, executor->Compile(graph));
  std::vector<std::shared_ptr<exec::DeviceMemory>> in, out;
  for (const auto& bytes : inputs) {
    JMP_ASSIGN_OR_RETURN(auto m, executor->Allocate(bytes.size()));
    if (!bytes.empty()) std::memcpy(m->data(), bytes.data(), bytes.size());
    in.push_back(std::move(m));
  }
  for (size_t j = 0; j < graph.outputs.size(); ++j) {
    if (j < reuse.size() && reuse[j] >= 0) {
      if (!exe->OutputsMayAliasInputs()) return Internal("the runner refuses outputs over inputs");
      out.push_back(in[static_cast<size_t>(reuse[j])]);
      continue;
    }
    JMP_ASSIGN_OR_RETURN(auto m, executor->Allocate(graph.type(graph.outputs[j]).ByteSize()));
    out.push_back(std::move(m));
  }
  std::vector<exec::DeviceMemory*> in_ptrs, out_ptrs;
  for (auto& m : in) in_ptrs.push_back(m.get());
  for (auto& m : out) out_ptrs.push_back(m.get());
  JMP_RETURN_IF_ERROR(exe->Run(in_ptrs, out_ptrs));
  std::vector<std::vector<uint8_t>> results;
  for (auto& m : out) {
    auto* p = static_cast<const uint8_t*>(m->data());
    results.emplace_back(p, p + m->size());
  }
  return results;
}

JMP_TEST(SegmentRunner, MatchesOneHostRun) {
  std::vector<std::vector<uint8_t>> in{Bytes(std::vector<float>{0.5f, -1, 2, 3})};
  auto want = RunOnHost(Mixed(), in);
  auto got = RunSegmented(Mixed(), in);
  ASSERT_OK(want);
  ASSERT_OK(got);
  EXPECT_SAME(*got, *want);
}

JMP_TEST(SegmentRunner, ADonatedInputAHostSegmentStillReadsIsNotOverwrittenEarly) {
  // Output 0 (metal segment 0) takes parameter 0's memory, which the host segment reads afterwards:
  // the runner makes output 0 apart and copies it over at the end (and counts that copy).
  GraphBuilder b;
  int x = b.Input(DType::kF32, {2});
  int sq = b.Apply(OpKind::kMultiply, {x, x}, DType::kF32, {2});
  int wide = b.Apply(OpKind::kCast, {x}, DType::kF64, {2});
  b.Output(sq);
  b.Output(b.Apply(OpKind::kAdd, {wide, wide}, DType::kF64, {2}));
  mps::Placement p = mps::PlaceGraph(b.graph());
  EXPECT_SAME(Segments(p), (Names{"metal", "host"}));
  int64_t staged = exec::StagedOutputCount();
  auto got = RunSegmented(b.graph(), {Bytes(std::vector<float>{3, -2})}, {0, -1});
  ASSERT_OK(got);
  EXPECT_SAME(Values<float>((*got)[0]), (std::vector<float>{9, 4}));
  EXPECT_SAME(Values<double>((*got)[1]), (std::vector<double>{6, -4}));
  EXPECT_SAME(exec::StagedOutputCount(), staged + 1);
}

JMP_TEST(SegmentRunner, ValuesReturnedTwiceAndParametersReturnedAsTheyAre) {
  GraphBuilder b;
  int x = b.Input(DType::kF32, {2});
  int wide = b.Apply(OpKind::kCast, {x}, DType::kF64, {2});
  int back = b.Apply(OpKind::kCast, {wide}, DType::kF32, {2});
  int y = b.Apply(OpKind::kNegative, {back}, DType::kF32, {2});
  b.Output(y);
  b.Output(wide);
  b.Output(y);
  b.Output(x);
  std::vector<std::vector<uint8_t>> in{Bytes(std::vector<float>{1.5f, -4})};
  auto want = RunOnHost(b.graph(), in);
  auto got = RunSegmented(b.graph(), in);
  ASSERT_OK(want);
  ASSERT_OK(got);
  EXPECT_SAME(*got, *want);
}

}  // namespace
}  // namespace jmp::unit

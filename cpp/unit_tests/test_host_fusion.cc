// Elementwise fusion in the host plan (exec/host/host_fused.cc): which ops form a group, that values
// made and read only inside a group take no arena memory, and that a fused run gives the values plain
// C++ computes here, for sizes that are not a multiple of the tile and with splats, a one-element
// select predicate, an iota and a cast inside the group.
#include <cmath>
#include <cstdint>
#include <vector>

#include "exec/host/host_plan.h"
#include "unit_tests/host_graph.h"
#include "unit_tests/unit_test.h"

namespace jmp::unit {
namespace {

using mps::OpKind;

// x (f32[n]), p (bool[1]), s (f32[1]) -> select(p, x * 3 + iota, x) as i32, s + 1, and (when asked) the
// sum of x * 3, which makes x * 3 a value read outside the group.
struct Chain {
  mps::Graph graph;
  int scaled = -1;  // x * 3
};

Chain MakeChain(int64_t n, bool read_scaled_outside) {
  GraphBuilder b;
  int x = b.Input(DType::kF32, {n});
  int p = b.Input(DType::kBool, {1});
  int s = b.Input(DType::kF32, {1});
  int three = b.Apply(OpKind::kConstant, {}, DType::kF32, {1},
                      [](mps::Op& op) { op.attrs = mps::ConstantAttrs{Bytes<float>({3.0f})}; });
  int splat = b.Apply(OpKind::kBroadcast, {three}, DType::kF32, {n});
  int scaled = b.Apply(OpKind::kMultiply, {x, splat}, DType::kF32, {n});
  // A scalar op between the chain's ops: it reads nothing the chain makes, so it must not cut the group.
  int one = b.Apply(OpKind::kConstant, {}, DType::kF32, {1},
                    [](mps::Op& op) { op.attrs = mps::ConstantAttrs{Bytes<float>({1.0f})}; });
  int bumped = b.Apply(OpKind::kAdd, {s, one}, DType::kF32, {1});
  int iota =
      b.Apply(OpKind::kCoordinateAlongAxis, {}, DType::kI32, {n}, [](mps::Op& op) { op.attrs = mps::AxisAttrs{0}; });
  int iota_f = b.Apply(OpKind::kCast, {iota}, DType::kF32, {n});
  int sum = b.Apply(OpKind::kAdd, {scaled, iota_f}, DType::kF32, {n});
  int chosen = b.Apply(OpKind::kSelect, {p, sum, x}, DType::kF32, {n});
  b.Output(b.Apply(OpKind::kCast, {chosen}, DType::kI32, {n}));
  b.Output(bumped);
  if (read_scaled_outside)
    b.Output(b.Apply(OpKind::kReductionSum, {scaled}, DType::kF32, {1},
                     [](mps::Op& op) { op.attrs = mps::AxesAttrs{{0}}; }));
  return {b.graph(), scaled};
}

size_t FusedGroups(const exec::host::Plan& plan) { return plan.fused.size(); }

JMP_TEST(HostFusion, AChainWithScalarBookkeepingIsOneGroup) {
  Chain c = MakeChain(10000, false);
  auto plan = exec::host::MakePlan(c.graph);
  EXPECT_SAME(FusedGroups(*plan), size_t{1});
  // The splat, Multiply, the iota and its Cast, Add, Select and the final Cast: large splats and iotas
  // are not folded at compile time, they are made tile by tile.
  EXPECT_SAME(plan->fused[0].ops.size(), size_t{7});
  // Only the chain's result needs the arena (i32[10000]) besides the scalar; no intermediate does.
  EXPECT_TRUE(plan->arena_bytes <= 10000 * sizeof(int32_t) + 2 * 64);
  EXPECT_SAME(plan->tile_slot[static_cast<size_t>(c.scaled)] >= 0, true);
}

JMP_TEST(HostFusion, AValueReadOutsideTheGroupGetsMemory) {
  Chain c = MakeChain(10000, true);
  auto plan = exec::host::MakePlan(c.graph);
  EXPECT_SAME(plan->tile_slot[static_cast<size_t>(c.scaled)], -1);
  EXPECT_TRUE(plan->arena_offset[static_cast<size_t>(c.scaled)] >= 0);
}

JMP_TEST(HostFusion, SmallArraysAreNotFused) {
  Chain c = MakeChain(8, false);
  auto plan = exec::host::MakePlan(c.graph);
  EXPECT_SAME(FusedGroups(*plan), size_t{0});
}

void CheckChainValues(Context& jmp_test_, int64_t n, bool pred) {
  Chain c = MakeChain(n, true);
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = static_cast<float>((i * 7919) % 1000) * 0.25f - 100.0f;
  auto r = RunOnHost(c.graph, {Bytes(x), Bytes<uint8_t>({pred ? uint8_t{1} : uint8_t{0}}), Bytes<float>({3.0f})});
  EXPECT_TRUE(r.ok());
  if (!r.ok()) return;
  std::vector<int32_t> got = Values<int32_t>(r.value()[0]);
  EXPECT_SAME(got.size(), static_cast<size_t>(n));
  double want_sum = 0;
  size_t wrong = 0;
  for (int64_t i = 0; i < n && static_cast<size_t>(i) < got.size(); ++i) {
    float xi = x[static_cast<size_t>(i)];
    float want = pred ? xi * 3.0f + static_cast<float>(i) : xi;
    wrong += got[static_cast<size_t>(i)] != static_cast<int32_t>(want);
    want_sum += static_cast<double>(xi) * 3.0;
  }
  EXPECT_SAME(wrong, size_t{0});
  EXPECT_SAME(Values<float>(r.value()[1]), std::vector<float>{4.0f});
  // The reduction's own rounding: a bound scaled by the length and the operands' magnitudes.
  float sum = Values<float>(r.value()[2])[0];
  EXPECT_TRUE(std::fabs(sum - want_sum) <= 1e-6 * static_cast<double>(n) * 300.0 * static_cast<double>(n));
}

JMP_TEST(HostFusion, FusedRunsGiveThePlainValues) {
  for (int64_t n : {1024, 2047, 2048, 2049, 10001, 100003}) {
    CheckChainValues(jmp_test_, n, true);
    CheckChainValues(jmp_test_, n, false);
  }
}

// Two chains of different sizes, interleaved as a training step's weight and bias updates are, and a
// bias row broadcast over a batch: two groups, and the values plain C++ gives.
JMP_TEST(HostFusion, InterleavedChainsOfTwoSizesAndABiasRow) {
  GraphBuilder b;
  int x = b.Input(DType::kF32, {64, 256});
  int bias = b.Input(DType::kF32, {256});
  int y = b.Input(DType::kF32, {8, 256});
  int two = b.Apply(OpKind::kConstant, {}, DType::kF32, {1, 1},
                    [](mps::Op& op) { op.attrs = mps::ConstantAttrs{Bytes<float>({2.0f})}; });
  int two_big = b.Apply(OpKind::kBroadcast, {two}, DType::kF32, {64, 256});
  int two_small = b.Apply(OpKind::kBroadcast, {two}, DType::kF32, {8, 256});
  int xs = b.Apply(OpKind::kMultiply, {x, two_big}, DType::kF32, {64, 256});
  int ys = b.Apply(OpKind::kMultiply, {y, two_small}, DType::kF32, {8, 256});
  int rows = b.Apply(OpKind::kBroadcast, {bias}, DType::kF32, {64, 256});
  int xb = b.Apply(OpKind::kAdd, {xs, rows}, DType::kF32, {64, 256});
  int yy = b.Apply(OpKind::kAdd, {ys, y}, DType::kF32, {8, 256});
  b.Output(b.Apply(OpKind::kTanh, {xb}, DType::kF32, {64, 256}));
  b.Output(yy);
  auto plan = exec::host::MakePlan(b.graph());
  EXPECT_SAME(FusedGroups(*plan), size_t{2});
  std::vector<float> xv(64 * 256), bv(256), yv(8 * 256);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>(i % 97) * 0.01f - 0.4f;
  for (size_t i = 0; i < bv.size(); ++i) bv[i] = static_cast<float>(i) * 0.001f;
  for (size_t i = 0; i < yv.size(); ++i) yv[i] = static_cast<float>(i % 13);
  auto r = RunOnHost(b.graph(), {Bytes(xv), Bytes(bv), Bytes(yv)});
  EXPECT_TRUE(r.ok());
  if (!r.ok()) return;
  std::vector<float> t = Values<float>(r.value()[0]), u = Values<float>(r.value()[1]);
  size_t wrong = 0;
  for (size_t i = 0; i < xv.size(); ++i) wrong += std::fabs(t[i] - std::tanh(xv[i] * 2.0f + bv[i % 256])) > 4e-7f * 4;
  for (size_t i = 0; i < yv.size(); ++i) wrong += u[i] != yv[i] * 3.0f;
  EXPECT_SAME(wrong, size_t{0});
}

// A keepdims row statistic broadcast back over its row (softmax, layer norm): the leading-dims form.
JMP_TEST(HostFusion, ARowStatisticBroadcastBackOverItsRow) {
  GraphBuilder b;
  int x = b.Input(DType::kF32, {48, 100});
  int m = b.Input(DType::kF32, {48, 1});
  int rows = b.Apply(OpKind::kBroadcast, {m}, DType::kF32, {48, 100});
  int d = b.Apply(OpKind::kSubtract, {x, rows}, DType::kF32, {48, 100});
  b.Output(b.Apply(OpKind::kMultiply, {d, d}, DType::kF32, {48, 100}));
  auto plan = exec::host::MakePlan(b.graph());
  EXPECT_SAME(FusedGroups(*plan), size_t{1});
  std::vector<float> xv(4800), mv(48);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>(i % 31) * 0.5f;
  for (size_t i = 0; i < mv.size(); ++i) mv[i] = static_cast<float>(i);
  auto r = RunOnHost(b.graph(), {Bytes(xv), Bytes(mv)});
  EXPECT_TRUE(r.ok());
  if (!r.ok()) return;
  std::vector<float> got = Values<float>(r.value()[0]);
  size_t wrong = 0;
  for (size_t i = 0; i < xv.size(); ++i) {
    float dd = xv[i] - mv[i / 100];
    wrong += got[i] != dd * dd;
  }
  EXPECT_SAME(wrong, size_t{0});
}

}  // namespace
}  // namespace jmp::unit

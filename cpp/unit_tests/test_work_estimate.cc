// The work estimate that decides which runs the caller's thread may do (exec/work_estimate.h): a loop's
// trip count from its counter, and an unknown one making the work unbounded.
#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

#include "exec/work_estimate.h"
#include "unit_tests/host_graph.h"
#include "unit_tests/unit_test.h"

namespace jmp::unit {

namespace {

using mps::OpKind;

int Constant(GraphBuilder& b, int32_t v) {
  return b.Apply(OpKind::kConstant, {}, DType::kI32, {},
                 [&](mps::Op& op) { op.attrs = mps::ConstantAttrs{Bytes(std::vector<int32_t>{v})}; });
}

// How the lowering gives a fori_loop: carries (counter, x, bound, step), the bound and the step passed
// through unchanged; `cmp` tests counter against bound (or bound against counter when `mirrored`); the
// body adds (or subtracts) the step and applies `work` to x. `bound_from_input`: the bound is the
// program's parameter rather than a constant; `bound_changes`: the body adds one to the bound too.
struct Loop {
  int32_t start = 0, bound = 1000, step = 1;
  OpKind cmp = OpKind::kLessThan, next = OpKind::kAdd;
  bool mirrored = false, bound_from_input = false, bound_changes = false;
  OpKind work = OpKind::kNegative;
  int64_t n = 8;
};

mps::Graph Program(const Loop& l) {
  const std::vector<int64_t> x_shape =
      l.work == OpKind::kMatMul ? std::vector<int64_t>{l.n, l.n} : std::vector<int64_t>{l.n};
  GraphBuilder cond;
  int ci = cond.Input(DType::kI32, {});
  cond.Input(DType::kF32, x_shape);
  int cb = cond.Input(DType::kI32, {});
  cond.Input(DType::kI32, {});
  cond.Output(cond.Apply(l.cmp, l.mirrored ? std::vector<int>{cb, ci} : std::vector<int>{ci, cb}, DType::kBool, {}));
  GraphBuilder body;
  int bi = body.Input(DType::kI32, {});
  int bx = body.Input(DType::kF32, x_shape);
  int bb = body.Input(DType::kI32, {});
  int bs = body.Input(DType::kI32, {});
  body.Output(body.Apply(l.next, {bi, bs}, DType::kI32, {}));
  body.Output(l.work == OpKind::kMatMul ? body.Apply(OpKind::kMatMul, {bx, bx}, DType::kF32, x_shape)
                                        : body.Apply(l.work, {bx}, DType::kF32, x_shape));
  body.Output(l.bound_changes ? body.Apply(OpKind::kAdd, {bb, bs}, DType::kI32, {}) : bb);
  body.Output(bs);
  GraphBuilder b;
  int x = b.Input(DType::kF32, x_shape);
  int bound = l.bound_from_input ? b.Input(DType::kI32, {}) : Constant(b, l.bound);
  int y = b.Apply(OpKind::kWhile, {Constant(b, l.start), x, bound, Constant(b, l.step)}, DType::kF32, x_shape,
                  [&](mps::Op& op) { op.subgraphs = {cond.graph(), body.graph()}; });
  b.Output(y);
  return b.graph();
}

std::optional<int64_t> Trips(const Loop& l) {
  mps::Graph g = Program(l);
  for (const mps::Op& op : g.ops)
    if (op.kind == OpKind::kWhile) return exec::StaticTripCount(g, op);
  return std::nullopt;
}

}  // namespace

JMP_TEST(WorkEstimate, ACountedLoopsTripCount) {
  EXPECT_SAME(Trips(Loop{}).value_or(-1), int64_t{1000});
  EXPECT_SAME(Trips(Loop{3, 10, 2}).value_or(-1), int64_t{4});  // 3 5 7 9
  Loop le{3, 9, 2, OpKind::kLessThanOrEqualTo};
  EXPECT_SAME(Trips(le).value_or(-1), int64_t{4});  // 3 5 7 9
  Loop mirrored{0, 10, 1, OpKind::kGreaterThan};
  mirrored.mirrored = true;  // 10 > i
  EXPECT_SAME(Trips(mirrored).value_or(-1), int64_t{10});
  Loop down{10, 0, 1, OpKind::kGreaterThan, OpKind::kSubtract};  // i > 0, i -= 1
  EXPECT_SAME(Trips(down).value_or(-1), int64_t{10});
  EXPECT_SAME(Trips(Loop{5, 5, 1}).value_or(-1), int64_t{0});
}

JMP_TEST(WorkEstimate, ALoopThatNeverEndsOrDependsOnDataHasNoTripCount) {
  EXPECT_TRUE(!Trips(Loop{0, 10, -1}));  // counts away from its bound
  Loop from_input;
  from_input.bound_from_input = true;
  EXPECT_TRUE(!Trips(from_input));
  EXPECT_TRUE(std::isinf(exec::EstimateWork(Program(from_input))));
  Loop moving;
  moving.bound_changes = true;
  EXPECT_TRUE(!Trips(moving));
}

JMP_TEST(WorkEstimate, ALoopCountsItsBodyOncePerIteration) {
  Loop cheap;  // the fori-loop benchmark's size: a thousand iterations on 8 floats
  Loop products{0, 20000};
  products.work = OpKind::kMatMul;
  products.n = 64;
  const double small = exec::EstimateWork(Program(cheap));
  const double large = exec::EstimateWork(Program(products));
  EXPECT_TRUE(small < 1e6);
  EXPECT_TRUE(large > 20000.0 * 64 * 64 * 64);
  Loop once = products;
  once.bound = 1;
  EXPECT_TRUE(exec::EstimateWork(Program(once)) < 64.0 * 64 * 64 * 4);
}

}  // namespace jmp::unit

// Operands the host plan reads in place (exec/host/host_plan_*.cc): a GatherND of one index row is a view
// of its data at an offset read at run time, a Slice of one contiguous block a view at a fixed offset, results are made
// straight in their outputs or in their loop carry's block, and a MatMul reads a transposed operand's source through
// BLAS's transpose flag, for a swap of the last two dims behind a batch-regrouping reshape and for a
// rotation of the dims (a matrix transpose of the source seen whole), or as strided matrices when the
// transpose keeps one matrix dim contiguous (attention's per-head matrices). Each plan decision is checked,
// and the run against plain C++.
#include <cstdint>
#include <vector>

#include "exec/host/host_plan.h"
#include "unit_tests/host_graph.h"
#include "unit_tests/unit_test.h"

namespace jmp::unit {
namespace {

using mps::OpKind;

std::vector<float> Ramp(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>((i * 37) % 101) * scale - 1.0f;
  return v;
}

// data f32[5,6,7], start i32[1,1] -> data[start] * 2 (f32[1,6,7]).
JMP_TEST(HostViews, OneRowGatherIsAViewAtItsRunTimeOffset) {
  GraphBuilder b;
  int data = b.Input(DType::kF32, {5, 6, 7});
  int start = b.Input(DType::kI32, {1, 1});
  int block = b.Apply(OpKind::kGatherND, {data, start}, DType::kF32, {1, 6, 7});
  int two = b.Apply(OpKind::kConstant, {}, DType::kF32, {1, 1, 1},
                    [](mps::Op& op) { op.attrs = mps::ConstantAttrs{Bytes<float>({2.0f})}; });
  int twos = b.Apply(OpKind::kBroadcast, {two}, DType::kF32, {1, 6, 7});
  b.Output(b.Apply(OpKind::kMultiply, {block, twos}, DType::kF32, {1, 6, 7}));
  auto plan = exec::host::MakePlan(b.graph());
  EXPECT_TRUE(plan->slice_view[static_cast<size_t>(block)] >= 0);
  EXPECT_SAME(plan->arena_offset[static_cast<size_t>(block)], int64_t{-1});
  std::vector<float> x = Ramp(5 * 6 * 7, 0.03f);
  // Starts out of range clamp, as the lowering's own clamp of dynamic_slice starts would.
  for (int32_t s : {0, 3, 4, -2, 11}) {
    auto r = RunOnHost(b.graph(), {Bytes(x), Bytes<int32_t>({s})});
    EXPECT_TRUE(r.ok());
    if (!r.ok()) return;
    size_t row = static_cast<size_t>(s < 0 ? 0 : s > 4 ? 4 : s);
    std::vector<float> got = Values<float>(r.value()[0]), want(42);
    for (size_t i = 0; i < 42; ++i) want[i] = x[row * 42 + i] * 2.0f;
    EXPECT_SAME(got, want);
  }
}

JMP_TEST(HostViews, AGatherThatIsAGraphOutputIsCopied) {
  GraphBuilder b;
  int data = b.Input(DType::kF32, {3, 4});
  int start = b.Input(DType::kI32, {1});
  int row = b.Apply(OpKind::kGatherND, {data, start}, DType::kF32, {4});
  b.Output(row);
  auto plan = exec::host::MakePlan(b.graph());
  EXPECT_SAME(plan->slice_view[static_cast<size_t>(row)], -1);
  EXPECT_SAME(plan->direct_output[static_cast<size_t>(row)], 0);  // made straight in the output
  EXPECT_SAME(plan->direct_output[static_cast<size_t>(data)], -1);
  std::vector<float> x = Ramp(12, 0.5f);
  auto r = RunOnHost(b.graph(), {Bytes(x), Bytes<int32_t>({2})});
  EXPECT_TRUE(r.ok());
  if (r.ok()) EXPECT_SAME(Values<float>(r.value()[0]), (std::vector<float>(x.begin() + 8, x.end())));
}

// data f32[2, 3, 4]: Slices that read one contiguous block are views at a fixed offset (a row, a run of
// rows inside one leading index); a strided or trailing-partial one is made, as is one that is an output.
JMP_TEST(HostViews, AContiguousStaticSliceIsAViewAtAFixedOffset) {
  GraphBuilder b;
  int data = b.Input(DType::kF32, {2, 3, 4});
  auto slice = [&](std::vector<int64_t> starts, std::vector<int64_t> ends, std::vector<int64_t> strides,
                   std::vector<int64_t> shape) {
    return b.Apply(OpKind::kSlice, {data}, DType::kF32, shape,
                   [&](mps::Op& op) { op.attrs = mps::SliceAttrs{starts, ends, strides}; });
  };
  int second = slice({1, 0, 0}, {2, 3, 4}, {1, 1, 1}, {1, 3, 4});   // data[1]
  int rows = slice({1, 1, 0}, {2, 3, 4}, {1, 1, 1}, {1, 2, 4});     // data[1, 1:3]
  int strided = slice({0, 0, 0}, {2, 3, 4}, {1, 2, 1}, {2, 2, 4});  // data[:, ::2]
  int columns = slice({0, 0, 1}, {2, 3, 3}, {1, 1, 1}, {2, 3, 2});  // data[..., 1:3]
  int kept = slice({0, 2, 0}, {1, 3, 4}, {1, 1, 1}, {1, 1, 4});     // data[0, 2], itself an output
  int sum = b.Apply(OpKind::kAdd, {rows, slice({0, 1, 0}, {1, 3, 4}, {1, 1, 1}, {1, 2, 4})}, DType::kF32, {1, 2, 4});
  b.Output(b.Apply(OpKind::kNegative, {second}, DType::kF32, {1, 3, 4}));
  b.Output(sum);
  b.Output(b.Apply(OpKind::kNegative, {strided}, DType::kF32, {2, 2, 4}));
  b.Output(b.Apply(OpKind::kNegative, {columns}, DType::kF32, {2, 3, 2}));
  b.Output(kept);
  auto plan = exec::host::MakePlan(b.graph());
  for (int v : {second, rows}) {
    int s = plan->slice_view[static_cast<size_t>(v)];
    EXPECT_TRUE(s >= 0);
    if (s >= 0) EXPECT_SAME(plan->slice_views[static_cast<size_t>(s)].indices, -1);
  }
  EXPECT_SAME(plan->slice_views[static_cast<size_t>(plan->slice_view[static_cast<size_t>(rows)])].fixed_offset,
              int64_t{(12 + 4) * 4});
  for (int v : {strided, columns, kept}) EXPECT_SAME(plan->slice_view[static_cast<size_t>(v)], -1);
  std::vector<float> x = Ramp(24, 0.25f);
  auto r = RunOnHost(b.graph(), {Bytes(x)});
  EXPECT_TRUE(r.ok());
  if (!r.ok()) return;
  auto at = [&](size_t i, size_t j, size_t k) { return x[i * 12 + j * 4 + k]; };
  std::vector<float> want_second, want_sum, want_strided, want_columns, want_kept;
  for (size_t j = 0; j < 3; ++j)
    for (size_t k = 0; k < 4; ++k) want_second.push_back(-at(1, j, k));
  for (size_t j = 1; j < 3; ++j)
    for (size_t k = 0; k < 4; ++k) want_sum.push_back(at(1, j, k) + at(0, j, k));
  for (size_t i = 0; i < 2; ++i)
    for (size_t j = 0; j < 3; j += 2)
      for (size_t k = 0; k < 4; ++k) want_strided.push_back(-at(i, j, k));
  for (size_t i = 0; i < 2; ++i)
    for (size_t j = 0; j < 3; ++j)
      for (size_t k = 1; k < 3; ++k) want_columns.push_back(-at(i, j, k));
  for (size_t k = 0; k < 4; ++k) want_kept.push_back(at(0, 2, k));
  EXPECT_SAME(Values<float>(r.value()[0]), want_second);
  EXPECT_SAME(Values<float>(r.value()[1]), want_sum);
  EXPECT_SAME(Values<float>(r.value()[2]), want_strided);
  EXPECT_SAME(Values<float>(r.value()[3]), want_columns);
  EXPECT_SAME(Values<float>(r.value()[4]), want_kept);
}

// x f32[rows..., k] viewed through `perm` and a reshape as the MatMul's left operand [m, k'] (batch
// `batch`), times y: the plan must read x untransposed and skip the Transpose.
void CheckFoldedTranspose(Context& jmp_test_, std::vector<int64_t> xs, std::vector<int64_t> perm,
                          std::vector<int64_t> lhs, int64_t n) {
  GraphBuilder b;
  int x = b.Input(DType::kF32, xs);
  std::vector<int64_t> ts;
  for (int64_t p : perm) ts.push_back(xs[static_cast<size_t>(p)]);
  int t =
      b.Apply(OpKind::kTranspose, {x}, DType::kF32, ts, [&](mps::Op& op) { op.attrs = mps::PermutationAttrs{perm}; });
  int a = b.Apply(OpKind::kReshape, {t}, DType::kF32, lhs);
  const size_t r = lhs.size();
  std::vector<int64_t> ys = lhs, os = lhs;
  ys[r - 2] = lhs[r - 1];
  ys[r - 1] = n;
  os[r - 1] = n;
  int y = b.Input(DType::kF32, ys);
  b.Output(b.Apply(OpKind::kMatMul, {a, y}, DType::kF32, os));
  auto plan = exec::host::MakePlan(b.graph());
  EXPECT_SAME(plan->skipped_op[0], uint8_t{1});
  EXPECT_SAME(plan->matmul_source[2][0], x);
  int64_t batch = 1, xn = 1;
  for (size_t d = 0; d + 2 < r; ++d) batch *= lhs[d];
  for (int64_t d : xs) xn *= d;
  const int64_t m = lhs[r - 2], k = lhs[r - 1];
  std::vector<float> xv = Ramp(static_cast<size_t>(xn), 0.02f), yv = Ramp(static_cast<size_t>(batch * k * n), 0.05f);
  auto run = RunOnHost(b.graph(), {Bytes(xv), Bytes(yv)});
  EXPECT_TRUE(run.ok());
  if (!run.ok()) return;
  // The transposed x by its strides, then the product, in double.
  std::vector<int64_t> strides(xs.size(), 1);
  for (size_t d = xs.size() - 1; d-- > 0;) strides[d] = strides[d + 1] * xs[d + 1];
  std::vector<float> tv(static_cast<size_t>(xn));
  for (int64_t i = 0; i < xn; ++i) {
    int64_t rest = i, src = 0;
    for (size_t d = ts.size(); d-- > 0;) {
      src += (rest % ts[d]) * strides[static_cast<size_t>(perm[d])];
      rest /= ts[d];
    }
    tv[static_cast<size_t>(i)] = xv[static_cast<size_t>(src)];
  }
  std::vector<float> got = Values<float>(run.value()[0]);
  size_t wrong = 0;
  for (int64_t bb = 0; bb < batch; ++bb)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double want = 0, mag = 0;
        for (int64_t l = 0; l < k; ++l) {
          double p = static_cast<double>(tv[static_cast<size_t>((bb * m + i) * k + l)]) *
                     yv[static_cast<size_t>((bb * k + l) * n + j)];
          want += p;
          mag += p < 0 ? -p : p;
        }
        double diff = got[static_cast<size_t>((bb * m + i) * n + j)] - want;
        wrong += (diff < 0 ? -diff : diff) > 2.0 * static_cast<double>(k) * 6e-8 * mag + 1e-30;
      }
  EXPECT_SAME(wrong, size_t{0});
}

JMP_TEST(HostViews, MatMulReadsATransposeOfTheLastTwoDimsBehindAReshape) {
  CheckFoldedTranspose(jmp_test_, {2, 3, 4, 5}, {0, 1, 3, 2}, {6, 5, 4}, 3);
}

JMP_TEST(HostViews, MatMulReadsARotationAsOneTransposedMatrix) {
  // [b, t, d] -> [d, b, t] -> [d, b*t]: dot_general's weight gradient x^T g.
  CheckFoldedTranspose(jmp_test_, {3, 4, 5}, {2, 0, 1}, {5, 12}, 2);
  // [b, t, h, d] -> [h, d, b, t] -> [h*d, b*t].
  CheckFoldedTranspose(jmp_test_, {2, 3, 2, 4}, {2, 3, 0, 1}, {8, 6}, 3);
}

JMP_TEST(HostViews, MatMulReadsPerHeadMatricesStrided) {
  // [b, t, h, d] -> [b, h, t, d] (rows strided, columns contiguous) and -> [b, h, d, t] (transposed).
  CheckFoldedTranspose(jmp_test_, {2, 3, 4, 5}, {0, 2, 1, 3}, {8, 3, 5}, 3);
  CheckFoldedTranspose(jmp_test_, {2, 3, 4, 5}, {0, 2, 3, 1}, {8, 5, 3}, 2);
  CheckFoldedTranspose(jmp_test_, {3, 2, 4}, {1, 0, 2}, {2, 3, 4}, 5);
}

// A while body that sets row i of its carry `stack` to x * x (dynamic_update_slice in a scan), with the
// row's index computed after the update: the update is made straight in the carry's row (the index
// arithmetic moves before it) and the scatter is skipped when the run lets carries be written.
JMP_TEST(HostViews, AnUpdateIsMadeInItsCarrysBlock) {
  GraphBuilder b;
  int stack = b.Input(DType::kF32, {4, 8});
  int i = b.Input(DType::kI32, {});
  int x = b.Input(DType::kF32, {8});
  int y = b.Apply(OpKind::kMultiply, {x, x}, DType::kF32, {8});
  int row = b.Apply(OpKind::kReshape, {y}, DType::kF32, {1, 8});
  int zero = b.Apply(OpKind::kConstant, {}, DType::kI32, {},
                     [](mps::Op& op) { op.attrs = mps::ConstantAttrs{Bytes<int32_t>({0})}; });
  int start = b.Apply(OpKind::kMaximum, {i, zero}, DType::kI32, {});
  int index = b.Apply(OpKind::kReshape, {start}, DType::kI32, {1, 1});
  int set = b.Apply(OpKind::kScatterND, {stack, row, index}, DType::kF32, {4, 8},
                    [](mps::Op& op) { op.attrs = mps::ScatterAttrs{mps::ScatterMode::kSet}; });
  b.Output(set);
  b.Output(i);
  b.Output(x);
  auto plan = exec::host::MakePlan(b.graph());
  const size_t scatter = b.graph().ops.size() - 1;
  EXPECT_SAME(plan->in_place_op_input[scatter], 0);
  EXPECT_SAME(plan->skipped_scatter[scatter], uint8_t{1});
  EXPECT_TRUE(plan->made_in_carry[static_cast<size_t>(y)] >= 0);
  std::vector<float> rows(32, -1.0f), xv = Ramp(8, 0.25f), x_out(8);
  for (int32_t at : {2, 0, 3}) {
    int32_t i_out = 0;
    Status s =
        exec::host::ExecutePlan(*plan,
                                {reinterpret_cast<const uint8_t*>(rows.data()), reinterpret_cast<const uint8_t*>(&at),
                                 reinterpret_cast<const uint8_t*>(xv.data())},
                                {reinterpret_cast<uint8_t*>(rows.data()), reinterpret_cast<uint8_t*>(&i_out),
                                 reinterpret_cast<uint8_t*>(x_out.data())},
                                false, /*writable_carries=*/true);
    EXPECT_TRUE(s.ok());
    EXPECT_SAME(i_out, at);
  }
  std::vector<float> want(32, -1.0f);
  for (size_t r : {0, 2, 3})
    for (size_t c = 0; c < 8; ++c) want[r * 8 + c] = xv[c] * xv[c];
  EXPECT_SAME(rows, want);
}

}  // namespace
}  // namespace jmp::unit

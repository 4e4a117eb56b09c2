// The small kernels a bound plan calls straight (exec/host/host_small_kernels.cc) against the kernels
// RunOp runs (for float64 and 32/64-bit integers those are host_vector_loops.cc's), for every op and type
// they cover, on edge values (NaN, ±0, ±inf, the integer limits, shift amounts past the width and negative
// ones) and on counts below, at and past a chunk: either set of loops losing a rule fails it.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "exec/host/host_kernels.h"
#include "exec/host/host_plan.h"
#include "unit_tests/host_graph.h"
#include "unit_tests/unit_test.h"

namespace jmp::unit {
namespace {

using mps::OpKind;

// Edge values first, then random ones, `n` in all.
template <typename T>
std::vector<T> EdgeValues(int64_t n, uint32_t seed) {
  std::vector<T> v;
  if constexpr (std::is_floating_point_v<T>) {
    using L = std::numeric_limits<T>;
    v = {L::quiet_NaN(),  T(-0.0), T(0.0),  L::infinity(), -L::infinity(), L::max(), L::lowest(),
         L::denorm_min(), T(1.5),  T(-2.5), T(3)};
  } else {
    using L = std::numeric_limits<T>;
    v = {L::min(), L::max(), T(0), T(1), T(sizeof(T) * 8 - 1), T(sizeof(T) * 8), T(sizeof(T) * 8 + 3)};
    if constexpr (std::is_signed_v<T>) v.push_back(T(-1));
  }
  std::mt19937 rng(seed);
  while (static_cast<int64_t>(v.size()) < n) {
    if constexpr (std::is_floating_point_v<T>)
      v.push_back(static_cast<T>(std::uniform_real_distribution<double>(-4, 4)(rng)));
    else
      v.push_back(static_cast<T>(rng() % 97) - (std::is_signed_v<T> ? T(40) : T(0)));
  }
  v.resize(static_cast<size_t>(n));
  return v;
}

// Equal bytes, or NaN in both (a NaN's payload is the hardware's, in either kernel).
template <typename T>
bool SameElements(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i + sizeof(T) <= a.size(); i += sizeof(T)) {
    if (std::memcmp(a.data() + i, b.data() + i, sizeof(T)) == 0) continue;
    if constexpr (std::is_floating_point_v<T>) {
      T x, y;
      std::memcpy(&x, a.data() + i, sizeof(T));
      std::memcpy(&y, b.data() + i, sizeof(T));
      if (std::isnan(x) && std::isnan(y)) continue;
    }
    return false;
  }
  return true;
}

// Runs op 0 of `g` (inputs `in`) through its generic kernel and through its small kernel; false when
// there is no small kernel. Fails the test when they differ.
template <typename Out>
bool Agree(Context& jmp_test_, const mps::Graph& g, const std::vector<std::vector<uint8_t>>& in,
           const std::string& what) {
  int64_t count = 0;
  exec::host::SmallKernel kernel = exec::host::SmallKernelFor(g, g.ops[0], &count);
  if (!kernel) return false;
  const size_t bytes = g.type(g.ops[0].outputs[0]).ByteSize();
  std::vector<uint8_t> generic(bytes, 0xAB), small(bytes, 0xCD);
  exec::host::OpArgs a{g.ops[0], g, {}, {}};
  for (const auto& x : in) a.in.push_back(x.data());
  a.out.push_back(generic.data());
  auto plan = exec::host::MakePlan(g);
  Status s = exec::host::RunOp(a, *plan, 0);
  if (!s.ok()) {
    jmp_test_.Fail(__FILE__, __LINE__, "the generic kernel failed where a small kernel exists: " + what);
    return true;
  }
  const uint8_t* ptrs[3] = {nullptr, nullptr, nullptr};
  for (size_t j = 0; j < in.size(); ++j) ptrs[j] = in[j].data();
  kernel(ptrs, small.data(), count);
  if (!SameElements<Out>(generic, small))
    jmp_test_.Fail(__FILE__, __LINE__, "the small kernel differs from the generic one: " + what);
  return true;
}

template <typename T>
void CheckType(Context& jmp_test_, DType dt, int* covered) {
  const OpKind binary[] = {
      OpKind::kAdd,        OpKind::kSubtract,         OpKind::kMultiply,         OpKind::kDivide,
      OpKind::kMaximum,    OpKind::kMinimum,          OpKind::kBitwiseAnd,       OpKind::kBitwiseOr,
      OpKind::kBitwiseXor, OpKind::kBitwiseLeftShift, OpKind::kBitwiseRightShift};
  const OpKind compare[] = {OpKind::kEqual,       OpKind::kNotEqual,
                            OpKind::kLessThan,    OpKind::kLessThanOrEqualTo,
                            OpKind::kGreaterThan, OpKind::kGreaterThanOrEqualTo};
  for (int64_t n : {1, 7, 8, 19}) {
    const std::vector<T> x = EdgeValues<T>(n, 1), y = EdgeValues<T>(n, 2);
    // y reversed: every edge value meets every other at some element
    std::vector<T> yr(y.rbegin(), y.rend());
    // x rotated by one: neighbouring edge values meet (-0 and +0, NaN and -0, inf and max)
    std::vector<T> xs(x.begin() + 1, x.end());
    xs.push_back(x[0]);
    for (OpKind k : binary) {
      GraphBuilder b;
      b.Output(b.Apply(k, {b.Input(dt, {n}), b.Input(dt, {n})}, dt, {n}));
      const std::string what =
          std::string(mps::OpKindName(k)) + " " + std::string(DTypeName(dt)) + " n=" + std::to_string(n);
      *covered += Agree<T>(jmp_test_, b.graph(), {Bytes(x), Bytes(yr)}, what);
      *covered += Agree<T>(jmp_test_, b.graph(), {Bytes(x), Bytes(x)}, what + " (x, x)");
      *covered += Agree<T>(jmp_test_, b.graph(), {Bytes(x), Bytes(xs)}, what + " (x, x rotated)");
      *covered += Agree<T>(jmp_test_, b.graph(), {Bytes(xs), Bytes(x)}, what + " (x rotated, x)");
    }
    for (OpKind k : compare) {
      GraphBuilder b;
      b.Output(b.Apply(k, {b.Input(dt, {n}), b.Input(dt, {n})}, DType::kBool, {n}));
      const std::string what = std::string(mps::OpKindName(k)) + " " + std::string(DTypeName(dt));
      *covered += Agree<uint8_t>(jmp_test_, b.graph(), {Bytes(x), Bytes(yr)}, what);
      *covered += Agree<uint8_t>(jmp_test_, b.graph(), {Bytes(x), Bytes(xs)}, what + " (x, x rotated)");
    }
    for (OpKind k : {OpKind::kNegative, OpKind::kBitwiseNot}) {
      GraphBuilder b;
      b.Output(b.Apply(k, {b.Input(dt, {n})}, dt, {n}));
      *covered += Agree<T>(jmp_test_, b.graph(), {Bytes(x)},
                           std::string(mps::OpKindName(k)) + " " + std::string(DTypeName(dt)));
    }
    if constexpr (std::is_floating_point_v<T>) {
      GraphBuilder b;
      b.Output(b.Apply(OpKind::kMultiplyAdd, {b.Input(dt, {n}), b.Input(dt, {n}), b.Input(dt, {n})}, dt, {n}));
      *covered +=
          Agree<T>(jmp_test_, b.graph(), {Bytes(x), Bytes(yr), Bytes(xs)}, "MultiplyAdd " + std::string(DTypeName(dt)));
    }
    std::vector<uint8_t> pred(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) pred[static_cast<size_t>(i)] = static_cast<uint8_t>((i * 7) % 3 == 0 ? 0 : i % 5);
    for (int64_t pn : {n, int64_t{1}}) {
      GraphBuilder b;
      int p = b.Input(DType::kBool, {pn});
      b.Output(b.Apply(OpKind::kSelect, {p, b.Input(dt, {n}), b.Input(dt, {n})}, dt, {n}));
      for (uint8_t first : {0, 1, 2}) {
        pred[0] = first;
        std::vector<uint8_t> pbytes(pred.begin(), pred.begin() + pn);
        *covered += Agree<T>(jmp_test_, b.graph(), {pbytes, Bytes(x), Bytes(yr)},
                             std::string("Select ") + std::string(DTypeName(dt)));
      }
    }
  }
}

JMP_TEST(HostSmallKernels, AgreeWithTheGenericKernels) {
  int covered = 0;
  CheckType<int8_t>(jmp_test_, DType::kI8, &covered);
  CheckType<int16_t>(jmp_test_, DType::kI16, &covered);
  CheckType<int32_t>(jmp_test_, DType::kI32, &covered);
  CheckType<int64_t>(jmp_test_, DType::kI64, &covered);
  CheckType<uint8_t>(jmp_test_, DType::kU8, &covered);
  CheckType<uint16_t>(jmp_test_, DType::kU16, &covered);
  CheckType<uint32_t>(jmp_test_, DType::kU32, &covered);
  CheckType<uint64_t>(jmp_test_, DType::kU64, &covered);
  CheckType<float>(jmp_test_, DType::kF32, &covered);
  CheckType<double>(jmp_test_, DType::kF64, &covered);
  // bool: logic, comparisons, Not, Select
  for (int64_t n : {1, 9}) {
    std::vector<uint8_t> x(static_cast<size_t>(n)), y(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      x[static_cast<size_t>(i)] = static_cast<uint8_t>(i % 2);
      y[static_cast<size_t>(i)] = static_cast<uint8_t>((i / 2) % 2);
    }
    for (OpKind k : {OpKind::kLogicalAnd, OpKind::kLogicalOr, OpKind::kLogicalXor, OpKind::kEqual, OpKind::kNotEqual,
                     OpKind::kLessThan, OpKind::kGreaterThanOrEqualTo}) {
      GraphBuilder b;
      b.Output(b.Apply(k, {b.Input(DType::kBool, {n}), b.Input(DType::kBool, {n})}, DType::kBool, {n}));
      covered += Agree<uint8_t>(jmp_test_, b.graph(), {x, y}, std::string(mps::OpKindName(k)) + " bool");
    }
    GraphBuilder b;
    b.Output(b.Apply(OpKind::kNot, {b.Input(DType::kBool, {n})}, DType::kBool, {n}));
    covered += Agree<uint8_t>(jmp_test_, b.graph(), {x}, "Not bool");
  }
  // Every type has its arithmetic, comparisons and selects covered (a kernel lost would pass silently).
  EXPECT_TRUE(covered > 10 * 4 * (5 + 6 + 1 + 6));
}

JMP_TEST(HostSmallKernels, LeaveOtherOpsToTheGenericKernels) {
  int64_t count = 0;
  GraphBuilder b;
  int x = b.Input(DType::kF32, {4});
  int y = b.Input(DType::kF32, {1});
  int h = b.Input(DType::kF16, {4});
  b.Output(b.Apply(OpKind::kExponent, {x}, DType::kF32, {4}));
  b.Output(b.Apply(OpKind::kAdd, {x, y}, DType::kF32, {4}));  // shapes differ: RunBinary's error
  b.Output(b.Apply(OpKind::kAdd, {h, h}, DType::kF16, {4}));  // computed in float, rounded per op
  b.Output(b.Apply(OpKind::kBitwiseAnd, {x, x}, DType::kF32, {4}));
  const mps::Graph& g = b.graph();
  for (const mps::Op& op : g.ops) EXPECT_TRUE(exec::host::SmallKernelFor(g, op, &count) == nullptr);
}

}  // namespace
}  // namespace jmp::unit

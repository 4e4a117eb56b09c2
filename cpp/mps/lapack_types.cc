#include "mps/lapack_types.h"

#include <algorithm>
#include <string>

namespace jmp::mps {

namespace {

bool Floating(DType t) { return IsComplex(t) || t == DType::kF32 || t == DType::kF64; }

// The rows and their operand counts, from the table (a table rather than a switch: every other op
// kind is not a row).
struct Row {
  OpKind kind;
  size_t inputs;
};
constexpr Row kRows[] = {
#define JMP_LAPACK_OP(name, inputs, domain) {OpKind::k##name, inputs},
#include "mps/op_kinds.def"
};

size_t InputsOf(OpKind kind) {
  for (const Row& row : kRows)
    if (row.kind == kind) return row.inputs;
  return 0;
}

// LapackTridiagonalSolve: diagonals [..., n] and b [..., n, k] of one floating type; x like b.
StatusOr<std::vector<TensorType>> TridiagonalSolve(const std::vector<TensorType>& in) {
  const TensorType& b = in[3];
  if (b.shape.size() < 2 || !Floating(b.dtype)) return InvalidArgument("needs b, a floating matrix of rank >= 2");
  const std::vector<int64_t> diagonal(b.shape.begin(), b.shape.end() - 1);
  for (size_t i = 0; i < 3; ++i)
    if (in[i].dtype != b.dtype || in[i].shape != diagonal)
      return InvalidArgument("needs diagonals [..., n] of b's type for b [..., n, k]");
  return std::vector<TensorType>{b};
}

}  // namespace

StatusOr<std::vector<TensorType>> LapackResultTypes(OpKind kind, const std::vector<TensorType>& inputs,
                                                    const LapackAttrs& flags) {
  using K = OpKind;
  const size_t want_in = InputsOf(kind);
  if (want_in == 0) return Internal(std::string(OpKindName(kind)) + " is not a LAPACK op");
  if (inputs.size() != want_in)
    return InvalidArgument("has " + std::to_string(inputs.size()) + " operands, expected " + std::to_string(want_in));
  if (kind == K::kLapackTridiagonalSolve) return TridiagonalSolve(inputs);
  const TensorType& a = inputs[0];
  const size_t r = a.shape.size();
  if (r < 2 || !Floating(a.dtype)) return InvalidArgument("needs a floating matrix of rank >= 2");
  const std::vector<int64_t> batch(a.shape.begin(), a.shape.end() - 2);
  const int64_t m = a.shape[r - 2], n = a.shape[r - 1], k = std::min(m, n);
  auto with = [&](std::initializer_list<int64_t> tail) {
    std::vector<int64_t> s = batch;
    s.insert(s.end(), tail);
    return s;
  };
  const DType real = RealOf(a.dtype), cplx = ComplexOf(a.dtype);
  if ((kind == K::kLapackCholesky || kind == K::kLapackEigh || kind == K::kLapackEig || kind == K::kLapackTridiagonal ||
       kind == K::kLapackTriangularSolve) &&
      m != n)
    return InvalidArgument("needs square matrices");
  if (kind == K::kLapackCholesky) return std::vector<TensorType>{a};
  if (kind == K::kLapackTriangularSolve) {
    const TensorType& b = inputs[1];
    if (b.dtype != a.dtype || b.shape.size() != r || !std::equal(batch.begin(), batch.end(), b.shape.begin()) ||
        b.shape[flags.left_side ? r - 2 : r - 1] != n)
      return InvalidArgument("needs b of a's type and batch, matching a");
    return std::vector<TensorType>{b};
  }
  if (kind == K::kLapackLu) return std::vector<TensorType>{a, {DType::kI32, with({k})}, {DType::kI32, with({m})}};
  if (kind == K::kLapackQr) return std::vector<TensorType>{a, {a.dtype, with({k})}};
  if (kind == K::kLapackPivotedQr) {
    const TensorType& jpvt = inputs[1];
    if (jpvt.dtype != DType::kI32 || jpvt.shape != with({n}))
      return InvalidArgument("needs jpvt int32 [..., n] for a [..., m, n]");
    return std::vector<TensorType>{a, jpvt, {a.dtype, with({k})}};
  }
  if (kind == K::kLapackHouseholderProduct) {
    const TensorType& taus = inputs[1];
    if (taus.dtype != a.dtype || taus.shape.size() != r - 1 || n > m || taus.shape.back() > n ||
        !std::equal(batch.begin(), batch.end(), taus.shape.begin()))
      return InvalidArgument("needs a [..., m, n] with m >= n and taus [..., k], k <= n, of a's type");
    return std::vector<TensorType>{a};
  }
  if (kind == K::kLapackEigh) return std::vector<TensorType>{a, {real, with({n})}};
  if (kind == K::kLapackSvd) {
    std::vector<TensorType> out = {{real, with({k})}};
    if (flags.compute_uv) {
      out.push_back({a.dtype, with({m, flags.full_matrices ? m : k})});
      out.push_back({a.dtype, with({flags.full_matrices ? n : k, n})});
    }
    return out;
  }
  if (kind == K::kLapackEig) return std::vector<TensorType>{{cplx, with({n})}, {cplx, a.shape}, {cplx, a.shape}};
  if (kind == K::kLapackTridiagonal) {
    if (n == 0) return InvalidArgument("needs matrices of at least 1x1");
    return std::vector<TensorType>{a, {real, with({n})}, {real, with({n - 1})}, {a.dtype, with({n - 1})}};
  }
  return Internal(std::string(OpKindName(kind)) + " is not a LAPACK op");
}

}  // namespace jmp::mps

#include "lower/lower_matrix.h"

#include <string>
#include <utility>

#include "lower/lower_families.h"

namespace jmp::mps {

int PickAlong(LowerContext& cx, int x, int i, size_t axis) {
  Shape shape = cx.ShapeOf(x);
  shape[axis] = 1;
  return GatherAlongAxis(cx, x, cx.BroadcastTo(i, shape), static_cast<int64_t>(axis));
}

int CoordinateIs(LowerContext& cx, OpKind kind, const Shape& shape, size_t axis, int i) {
  int coordinates = cx.Iota(shape, static_cast<int64_t>(axis));
  return cx.Compare(kind, coordinates, cx.BroadcastTo(i, shape));
}

int Identity(LowerContext& cx, const Shape& mat, DType t) {
  const int64_t rows = static_cast<int64_t>(mat.size()) - 2, cols = rows + 1;
  return cx.Cast(cx.Compare(OpKind::kEqual, cx.Iota(mat, rows), cx.Iota(mat, cols)), t);
}

int SumOver(LowerContext& cx, int x, std::vector<int64_t> axes) {
  Shape s = cx.ShapeOf(x);
  for (int64_t a : axes) s[static_cast<size_t>(a)] = 1;
  return cx.Emit(OpKind::kReductionSum, {x}, cx.DTypeOf(x), s, AxesAttrs{std::move(axes)});
}

int AnyNaNPerMatrix(LowerContext& cx, int x) {
  Shape shape = cx.ShapeOf(x);
  const int64_t rows = static_cast<int64_t>(shape.size()) - 2, cols = rows + 1;
  int nan = cx.Emit(OpKind::kIsNaN, {x}, DType::kBool, shape);
  shape[static_cast<size_t>(rows)] = shape[static_cast<size_t>(cols)] = 1;
  return cx.Emit(OpKind::kReductionOr, {nan}, DType::kBool, shape, AxesAttrs{{rows, cols}});
}

int SwapLastTwo(LowerContext& cx, int x) {
  std::vector<int64_t> perm;
  size_t rank = cx.ShapeOf(x).size();
  for (size_t d = 0; d < rank; ++d) perm.push_back(static_cast<int64_t>(d));
  std::swap(perm[rank - 1], perm[rank - 2]);
  return cx.Transpose(x, perm);
}

StatusOr<DType> FactorisationType(LowerContext& cx, DType t) {
  if (t == DType::kF32 || t == DType::kF16 || t == DType::kBF16) return DType::kF32;
  return cx.Unsupported("is supported for float32, float16 and bfloat16, not " + std::string(DTypeName(t)));
}

StatusOr<std::vector<int>> WhileLoop(LowerContext& cx, const std::vector<int>& carries, const LoopCondition& cond,
                                     const LoopStep& step) {
  std::vector<TensorType> types;
  for (int v : carries) types.push_back(cx.Type(v));
  std::vector<int> captures;
  JMP_ASSIGN_OR_RETURN(
      Graph before,
      cx.BuildSubgraph(
          types, [&](const std::vector<int>& p) -> StatusOr<std::vector<int>> { return std::vector<int>{cond(p)}; },
          &captures));
  if (!captures.empty()) return cx.Unsupported("loop condition captured outer values");
  JMP_ASSIGN_OR_RETURN(
      Graph after,
      cx.BuildSubgraph(
          types, [&](const std::vector<int>& p) -> StatusOr<std::vector<int>> { return step(p); }, &captures));
  if (!captures.empty()) return cx.Unsupported("loop body captured outer values");
  Op w = cx.NewOp(OpKind::kWhile, carries);
  w.subgraphs.push_back(std::move(before));
  w.subgraphs.push_back(std::move(after));
  return cx.EmitOp(std::move(w), types);
}

StatusOr<std::vector<int>> CountedLoop(LowerContext& cx, int64_t n, const std::vector<int>& carries,
                                       const CountedBody& body) {
  std::vector<int> init = {cx.Scalar(DType::kI32, 0)};
  init.insert(init.end(), carries.begin(), carries.end());
  JMP_ASSIGN_OR_RETURN(std::vector<int> done,
                       WhileLoop(
                           cx, init,
                           [&](const std::vector<int>& c) {
                             return cx.Compare(OpKind::kLessThan, c[0], cx.Scalar(DType::kI32, static_cast<double>(n)));
                           },
                           [&](const std::vector<int>& c) -> StatusOr<std::vector<int>> {
                             JMP_ASSIGN_OR_RETURN(std::vector<int> next,
                                                  body(c[0], std::vector<int>(c.begin() + 1, c.end())));
                             next.insert(next.begin(), cx.Binary(OpKind::kAdd, c[0], cx.Scalar(DType::kI32, 1)));
                             return next;
                           }));
  return std::vector<int>(done.begin() + 1, done.end());
}

}  // namespace jmp::mps

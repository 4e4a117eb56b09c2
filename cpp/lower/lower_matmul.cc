#include "lower/lower_matmul.h"

#include <algorithm>

namespace jmp::mps {

namespace {

// x's elements [begin, end) along `axis`.
int SliceAxis(LowerContext& cx, int x, size_t axis, int64_t begin, int64_t end) {
  const Shape shape = cx.ShapeOf(x);
  Shape starts(shape.size(), 0), ends = shape;
  starts[axis] = begin;
  ends[axis] = end;
  return cx.Slice(x, starts, ends);
}

// The output shape of a x b.
Shape ProductShape(LowerContext& cx, int a, int b) {
  Shape out = cx.ShapeOf(a);
  out.back() = cx.ShapeOf(b).back();
  return out;
}

// a x b with M and N within the limit (K already is): tiles of M, then of N, concatenated.
int Tiled(LowerContext& cx, int a, int b) {
  const Shape as = cx.ShapeOf(a), bs = cx.ShapeOf(b);
  const size_t r = as.size();
  const DType t = cx.DTypeOf(a);
  for (size_t side = 0; side < 2; ++side) {
    const int64_t n = side == 0 ? as[r - 2] : bs[r - 1];
    if (n <= kMatMulMaxDim) continue;
    std::vector<int> tiles;
    for (int64_t i = 0; i < n; i += kMatMulMaxDim) {
      const int64_t end = std::min(n, i + kMatMulMaxDim);
      tiles.push_back(side == 0 ? Tiled(cx, SliceAxis(cx, a, r - 2, i, end), b)
                                : Tiled(cx, a, SliceAxis(cx, b, r - 1, i, end)));
    }
    const int64_t axis = static_cast<int64_t>(side == 0 ? r - 2 : r - 1);
    return cx.Emit(OpKind::kConcat, tiles, t, ProductShape(cx, a, b), AxisAttrs{axis});
  }
  return cx.Emit(OpKind::kMatMul, {a, b}, t, ProductShape(cx, a, b));
}

}  // namespace

int MatMul(LowerContext& cx, int a, int b) {
  const DType t = cx.DTypeOf(a);
  const Shape as = cx.ShapeOf(a);
  const Shape out = ProductShape(cx, a, b);
  const size_t r = as.size();
  const int64_t k = as[r - 1];
  if (k == 0) return cx.Splat(t, out, 0);
  if (IsInteger(t)) return cx.Emit(OpKind::kIntegerMatMul, {a, b}, t, out);
  // float64 and complex128 run on the host (BLAS), which has no such limits.
  if (t == DType::kF64 || t == DType::kC128) return cx.Emit(OpKind::kMatMul, {a, b}, t, out);
  const int64_t max_k = IsComplex(t) ? kMatMulMaxComplexK : kMatMulMaxDim;
  if (k <= max_k) return Tiled(cx, a, b);
  const DType acc = t == DType::kF16 || t == DType::kBF16 ? DType::kF32 : t;
  int sum = -1;
  for (int64_t i = 0; i < k; i += max_k) {
    const int64_t end = std::min(k, i + max_k);
    int part = Tiled(cx, cx.Cast(SliceAxis(cx, a, r - 1, i, end), acc), cx.Cast(SliceAxis(cx, b, r - 2, i, end), acc));
    sum = sum < 0 ? part : cx.Binary(OpKind::kAdd, sum, part);
  }
  return cx.Cast(sum, t);
}

}  // namespace jmp::mps

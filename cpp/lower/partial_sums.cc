#include "lower/partial_sums.h"

#include "lower/lower_matmul.h"

#include <vector>

namespace jmp::mps {

int SumOfParts(LowerContext& cx, int stack) {
  Shape shape = cx.ShapeOf(stack);
  const int64_t parts = shape.at(0);
  Shape ends = shape;
  Shape starts(shape.size(), 0);
  const Shape value_shape(shape.begin() + 1, shape.end());
  // Bools have no sum; XLA adds them as their "or".
  const OpKind add = cx.DTypeOf(stack) == DType::kBool ? OpKind::kLogicalOr : OpKind::kAdd;
  int sum = -1;
  for (int64_t p = 0; p < parts; ++p) {
    starts[0] = p;
    ends[0] = p + 1;
    const int part = cx.Reshape(cx.Slice(stack, starts, ends), value_shape);
    sum = sum < 0 ? part : cx.Binary(add, sum, part);
  }
  cx.MarkPartsOf(sum, stack);
  return sum;
}

int PartsOf(LowerContext& cx, int value, int64_t parts) {
  const int stack = cx.PartsStack(value);
  if (stack >= 0 && cx.ShapeOf(stack).at(0) == parts) return stack;
  const TensorType type = cx.Type(value);
  Shape one = type.shape, rest = type.shape;
  one.insert(one.begin(), 1);
  rest.insert(rest.begin(), parts - 1);
  Shape stacked = type.shape;
  stacked.insert(stacked.begin(), parts);
  return cx.Emit(OpKind::kConcat, {cx.Reshape(value, one), cx.Splat(type.dtype, rest, 0.0)}, type.dtype, stacked,
                 AxisAttrs{0});
}

void SplitDotIntoParts(LowerContext& cx, int value, int64_t parts) {
  const LowerContext::DotOperands* dot = cx.DotOf(value);
  if (!dot || cx.PartsStack(value) >= 0 || dot->lc.size() != 1 || dot->rc.size() != 1) return;
  const LowerContext::DotOperands operands = *dot;  // the record may move as the parts are emitted
  const size_t lk = static_cast<size_t>(operands.lc[0]), rk = static_cast<size_t>(operands.rc[0]);
  const Shape ls = cx.ShapeOf(operands.lhs), rs = cx.ShapeOf(operands.rhs);
  if (ls.at(lk) % parts != 0 || rs.at(rk) != ls[lk]) return;
  const int64_t block = ls[lk] / parts;
  std::vector<int> pieces;
  Shape one = cx.ShapeOf(value);
  one.insert(one.begin(), 1);
  for (int64_t p = 0; p < parts; ++p) {
    Shape lstart(ls.size(), 0), lend = ls, rstart(rs.size(), 0), rend = rs;
    lstart[lk] = rstart[rk] = p * block;
    lend[lk] = rend[rk] = (p + 1) * block;
    StatusOr<int> part = DotValue(cx, cx.Slice(operands.lhs, lstart, lend), cx.Slice(operands.rhs, rstart, rend),
                                  operands.lb, operands.rb, operands.lc, operands.rc, cx.DTypeOf(value));
    if (!part.ok()) return;
    pieces.push_back(cx.Reshape(*part, one));
  }
  Shape stacked = cx.ShapeOf(value);
  stacked.insert(stacked.begin(), parts);
  cx.MarkPartsOf(value, cx.Emit(OpKind::kConcat, pieces, cx.DTypeOf(value), stacked, AxisAttrs{0}));
}

}  // namespace jmp::mps

#include "lower/partial_sums.h"

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

}  // namespace jmp::mps

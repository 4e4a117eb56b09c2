#include "lower/partial_sums.h"

#include "lower/lower_matmul.h"

#include <algorithm>
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

int PartsByOwner(LowerContext& cx, int value, const TileSharding& in, const TileSharding& out) {
  const int64_t parts = out.parts, per_part = TileCount(out) / parts, tiles = TileCount(in);
  std::vector<int64_t> owner(static_cast<size_t>(tiles), parts);
  for (size_t d = 0; d < in.device_tile.size() && d < out.device_tile.size(); ++d) {
    int64_t& o = owner.at(static_cast<size_t>(in.device_tile[d]));
    o = std::min(o, out.device_tile[d] / per_part);
  }
  // Each element's tile, row-major over the value.
  const Shape shape = cx.ShapeOf(value);
  int64_t count = 1;
  for (int64_t n : shape) count *= n;
  std::vector<int64_t> tile_of(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    int64_t rest = i, tile = 0, stride = 1;
    for (size_t k = shape.size(); k-- > 0;) {
      const int64_t coord = rest % shape[k];
      rest /= shape[k];
      tile += coord / (shape[k] / in.tiles[k]) * stride;
      stride *= in.tiles[k];
    }
    tile_of[static_cast<size_t>(i)] = tile;
  }
  const TensorType type = cx.Type(value);
  const int zeros = cx.Splat(type.dtype, shape, 0.0);
  Shape one = shape;
  one.insert(one.begin(), 1);
  std::vector<int> pieces;
  for (int64_t p = 0; p < parts; ++p) {
    std::vector<int32_t> mine(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) mine[static_cast<size_t>(i)] = owner[static_cast<size_t>(tile_of[i])] == p;
    const int keep = cx.Compare(OpKind::kNotEqual, cx.Int32Constant(shape, mine), cx.Splat(DType::kI32, shape, 0));
    pieces.push_back(cx.Reshape(cx.Select(keep, value, zeros), one));
  }
  Shape stacked = shape;
  stacked.insert(stacked.begin(), parts);
  return cx.Emit(OpKind::kConcat, pieces, type.dtype, stacked, AxisAttrs{0});
}

void SplitDotIntoParts(LowerContext& cx, int value, int64_t parts) {
  const LowerContext::DotOperands* dot = cx.DotOf(value);
  if (!dot || cx.PartsStack(value) >= 0 || dot->lc.size() != 1 || dot->rc.size() != 1) return;
  const LowerContext::DotOperands operands = *dot;
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

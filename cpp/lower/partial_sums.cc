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

namespace {

// The pieces, each of the value's shape, as one stack along a new leading dimension.
int Stack(LowerContext& cx, const std::vector<int>& pieces, DType dtype, const Shape& shape) {
  Shape one = shape, stacked = shape;
  one.insert(one.begin(), 1);
  stacked.insert(stacked.begin(), static_cast<int64_t>(pieces.size()));
  std::vector<int> rows;
  for (int piece : pieces) rows.push_back(cx.Reshape(piece, one));
  return cx.Emit(OpKind::kConcat, rows, dtype, stacked, AxisAttrs{0});
}

}  // namespace

int PartsOf(LowerContext& cx, int value, int64_t parts) {
  const int stack = cx.PartsStack(value);
  if (stack >= 0 && cx.ShapeOf(stack).at(0) == parts) return stack;
  const TensorType type = cx.Type(value);
  std::vector<int> pieces(static_cast<size_t>(parts), cx.Splat(type.dtype, type.shape, 0.0));
  pieces[0] = value;
  return Stack(cx, pieces, type.dtype, type.shape);
}

int PartsByOwner(LowerContext& cx, int value, const TileSharding& in, const TileSharding& out) {
  const int64_t parts = out.parts, per_part = TileCount(out) / parts, tiles = TileCount(in);
  std::vector<int64_t> owner(static_cast<size_t>(tiles), parts);
  for (size_t d = 0; d < in.device_tile.size() && d < out.device_tile.size(); ++d) {
    int64_t& o = owner.at(static_cast<size_t>(in.device_tile[d]));
    o = std::min(o, out.device_tile[d] / per_part);
  }
  // Each element's tile (row-major over the tile grid), from its coordinates: a few ops whatever the
  // value's size, where a mask per part would be a constant as large as the value.
  const TensorType type = cx.Type(value);
  const Shape& shape = type.shape;
  int tile_of = -1;
  int64_t stride = 1;
  for (size_t k = shape.size(); k-- > 0;) {
    if (in.tiles[k] == 1) continue;
    int t = cx.Binary(OpKind::kDivide, cx.Iota(shape, static_cast<int64_t>(k)),
                      cx.Splat(DType::kI32, shape, static_cast<double>(shape[k] / in.tiles[k])));
    if (stride != 1) t = cx.Binary(OpKind::kMultiply, t, cx.Splat(DType::kI32, shape, static_cast<double>(stride)));
    tile_of = tile_of < 0 ? t : cx.Binary(OpKind::kAdd, tile_of, t);
    stride *= in.tiles[k];
  }
  const int zeros = cx.Splat(type.dtype, shape, 0.0);
  std::vector<int> pieces(static_cast<size_t>(parts), zeros);
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t p = owner[static_cast<size_t>(t)];
    if (p >= parts) continue;  // a tile no device of the result holds
    int& piece = pieces[static_cast<size_t>(p)];
    if (tile_of < 0) {
      piece = value;
      continue;
    }
    const int mine = cx.Compare(OpKind::kEqual, tile_of, cx.Splat(DType::kI32, shape, static_cast<double>(t)));
    piece = cx.Select(mine, value, piece);
  }
  return Stack(cx, pieces, type.dtype, shape);
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
  for (int64_t p = 0; p < parts; ++p) {
    Shape lstart(ls.size(), 0), lend = ls, rstart(rs.size(), 0), rend = rs;
    lstart[lk] = rstart[rk] = p * block;
    lend[lk] = rend[rk] = (p + 1) * block;
    StatusOr<int> part = DotValue(cx, cx.Slice(operands.lhs, lstart, lend), cx.Slice(operands.rhs, rstart, rend),
                                  operands.lb, operands.rb, operands.lc, operands.rc, cx.DTypeOf(value));
    if (!part.ok()) return;
    pieces.push_back(*part);
  }
  cx.MarkPartsOf(value, Stack(cx, pieces, cx.DTypeOf(value), cx.ShapeOf(value)));
}

void SplitSumIntoParts(LowerContext& cx, int value, int64_t parts) {
  const LowerContext::SumOperands* sum = cx.SumOf(value);
  if (!sum || cx.PartsStack(value) >= 0) return;
  const LowerContext::SumOperands operands = *sum;
  // A sum of a value in as many parts has the sums of its parts as its own (each device sums its part).
  const int operand_stack = cx.PartsStack(operands.operand);
  if (operand_stack >= 0) {
    const Shape stack_shape = cx.ShapeOf(operand_stack);
    if (stack_shape.at(0) != parts) return;
    std::vector<int64_t> axes;
    for (int64_t a : operands.axes) axes.push_back(a + 1);
    Shape kept = stack_shape;
    for (int64_t a : axes) kept[static_cast<size_t>(a)] = 1;
    Shape stacked = cx.ShapeOf(value);
    stacked.insert(stacked.begin(), parts);
    const int reduced = cx.Emit(OpKind::kReductionSum, {operand_stack}, cx.DTypeOf(value), kept, AxesAttrs{axes});
    cx.MarkPartsOf(value, cx.Reshape(reduced, stacked));
    return;
  }
  const Shape in = cx.ShapeOf(operands.operand);
  for (int64_t a : operands.axes) {
    const size_t k = static_cast<size_t>(a);
    if (in.at(k) % parts != 0) continue;
    const int64_t block = in[k] / parts;
    Shape kept = in;
    for (int64_t b : operands.axes) kept[static_cast<size_t>(b)] = 1;
    std::vector<int> pieces;
    for (int64_t p = 0; p < parts; ++p) {
      Shape start(in.size(), 0), end = in;
      start[k] = p * block;
      end[k] = (p + 1) * block;
      const int reduced = cx.Emit(OpKind::kReductionSum, {cx.Slice(operands.operand, start, end)}, cx.DTypeOf(value),
                                  kept, AxesAttrs{operands.axes});
      pieces.push_back(cx.Reshape(reduced, cx.ShapeOf(value)));
    }
    cx.MarkPartsOf(value, Stack(cx, pieces, cx.DTypeOf(value), cx.ShapeOf(value)));
    return;
  }
}

}  // namespace jmp::mps

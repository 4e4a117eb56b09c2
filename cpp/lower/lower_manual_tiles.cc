// Tile movement at a manual computation's edge: each copy's piece of an operand, and a result
// assembled from the copies' pieces.
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "lower/lower_context.h"
#include "lower/lower_manual.h"
#include "lower/partial_sums.h"
#include "lower/sharding.h"

namespace jmp::mps::manual {

namespace {

// Device d's tile of a global value.
int Slice(LowerContext& cx, int global, const TileSharding& s, int64_t device) {
  if (s.tiles.empty()) return global;
  Shape shape = cx.ShapeOf(global);
  Shape starts(shape.size()), ends(shape.size());
  int64_t tile = s.device_tile.at(static_cast<size_t>(device));
  for (size_t k = shape.size(); k-- > 0;) {
    const int64_t size = shape[k] / s.tiles[k];
    starts[k] = (tile % s.tiles[k]) * size;
    ends[k] = starts[k] + size;
    tile /= s.tiles[k];
  }
  return cx.Slice(global, starts, ends);
}

// The global value from the copies' tiles: each tile from the first copy holding it.
StatusOr<int> Assemble(LowerContext& cx, const std::vector<int>& local, const TileSharding& s, const Copies& copies) {
  if (s.tiles.empty()) return local[0];
  int64_t count = 1;
  for (int64_t t : s.tiles) {
    if (t <= 0) return cx.Unsupported("a manual computation's result sharding splits a dimension into no pieces");
    count *= t;
  }
  std::vector<int> tile_value(static_cast<size_t>(count), -1);
  for (size_t c = 0; c < copies.device.size(); ++c) {
    const int64_t tile = s.device_tile.at(static_cast<size_t>(copies.device[c]));
    if (tile < 0 || tile >= count) return cx.Unsupported("a manual computation's result sharding names no such piece");
    if (tile_value[static_cast<size_t>(tile)] < 0) tile_value[static_cast<size_t>(tile)] = local[c];
  }
  for (int v : tile_value)
    if (v < 0) return cx.Unsupported("a manual computation's result sharding leaves a piece on no device");
  // Concatenated along the last dimension first, then outwards.
  const size_t rank = s.tiles.size();
  std::vector<int> level = tile_value;
  for (size_t k = rank; k-- > 0;) {
    const size_t t = static_cast<size_t>(s.tiles[k]);
    std::vector<int> next;
    for (size_t g = 0; g < level.size() / t; ++g) {
      std::vector<int> parts(level.begin() + static_cast<std::ptrdiff_t>(g * t),
                             level.begin() + static_cast<std::ptrdiff_t>((g + 1) * t));
      if (parts.size() == 1) {
        next.push_back(parts[0]);
        continue;
      }
      TensorType type = cx.Type(parts[0]);
      type.shape[k] *= static_cast<int64_t>(t);
      next.push_back(cx.Emit(OpKind::kConcat, parts, type.dtype, type.shape, AxisAttrs{static_cast<int64_t>(k)}));
    }
    level = std::move(next);
  }
  return level[0];
}

}  // namespace

StatusOr<int> OperandPiece(LowerContext& cx, const ManualOp& m, size_t i, int global, int64_t device) {
  const shlo::Op& op = cx.op();
  // A token carries no data: every copy orders after the one token (its sharding has rank 0).
  if (cx.ShloType(op.operands.at(i)).kind == shlo::Type::Kind::kToken) return global;
  const Shape shape = cx.ShapeOf(global);
  StatusOr<TileSharding> s = TilesOf(OverAxes(m.ins[i], m.manual_axes), shape.size(), cx.partitioning().num_devices());
  if (!s.ok()) return cx.Unsupported("operand " + std::to_string(i) + ": " + s.status().message());
  const shlo::Type& local = m.body ? cx.InType(i) : cx.ShloType(op.regions[0].blocks[0].args.at(i));
  const size_t part_dims = s->parts > 1 ? 1 : 0;
  for (size_t k = 0; k < shape.size(); ++k) {
    const int64_t t = s->tiles.empty() ? 1 : s->tiles[k + part_dims];
    if (k >= local.shape.size() || shape[k] % t != 0 || shape[k] / t != local.shape[k])
      return cx.Unsupported("operand " + std::to_string(i) + " of global shape " + cx.Type(global).ToString() +
                            " does not split into the body's argument " + local.ToString());
  }
  // An operand in parts: each device its tile of its part.
  const int sliced = part_dims ? PartsOf(cx, global, s->parts) : global;
  return cx.Reshape(Slice(cx, sliced, *s, device), local.shape);
}

StatusOr<int> ResultFromPieces(LowerContext& cx, const ManualOp& m, size_t j, std::vector<int> local,
                               const Copies& copies) {
  if (cx.ShloType(cx.op().results.at(j)).kind == shlo::Type::Kind::kToken) return local.at(0);
  Shape local_shape = cx.ShapeOf(local.at(0));
  StatusOr<TileSharding> s =
      TilesOf(OverAxes(m.outs[j], m.manual_axes), local_shape.size(), cx.partitioning().num_devices());
  if (!s.ok()) return cx.Unsupported("result " + std::to_string(j) + ": " + s.status().message());
  if (s->parts == 1) return Assemble(cx, local, *s, copies);
  // A result in parts: the devices' pieces make the stack of parts, and the value is their sum.
  local_shape.insert(local_shape.begin(), 1);
  for (int& v : local) v = cx.Reshape(v, local_shape);
  JMP_ASSIGN_OR_RETURN(int stack, Assemble(cx, local, *s, copies));
  return SumOfParts(cx, stack);
}

}  // namespace jmp::mps::manual

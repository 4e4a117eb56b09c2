// The program over tiles (lower/tile_signature.h): what ExecuteSharded runs for several devices. Each
// case runs the global graph on global inputs and the tiled graph on their tiles, and the tiled graph's
// outputs must be the tiles of the global outputs; the manual computation's own shape of graph (slices
// of an input, a concatenation of pieces) must lose its slices and concatenations.
#include <vector>

#include "lower/tile_signature.h"
#include "unit_tests/host_graph.h"
#include "unit_tests/unit_test.h"

namespace jmp::unit {
namespace {

using mps::OpKind;
using Shape = std::vector<int64_t>;

// Tile `tile` (row-major among `tiles`) of a row-major float array of `shape`.
std::vector<float> Tile(const std::vector<float>& global, const Shape& shape, const Shape& tiles, int64_t tile) {
  const size_t rank = shape.size();
  Shape size(rank), start(rank);
  for (size_t k = rank; k-- > 0;) {
    const int64_t t = tiles.empty() ? 1 : tiles[k];
    size[k] = shape[k] / t;
    start[k] = (tile % t) * size[k];
    tile /= t;
  }
  std::vector<float> out;
  Shape index(rank, 0);
  int64_t count = 1;
  for (int64_t s : size) count *= s;
  for (int64_t e = 0; e < count; ++e) {
    int64_t rest = e, flat = 0;
    for (size_t k = rank; k-- > 0;) {
      index[k] = rest % size[k];
      rest /= size[k];
    }
    for (size_t k = 0; k < rank; ++k) flat = flat * shape[k] + start[k] + index[k];
    out.push_back(global[static_cast<size_t>(flat)]);
  }
  return out;
}

int64_t Tiles(const mps::TileSharding& s) { return mps::TileCount(s); }

// Runs both graphs and compares tile by tile; returns the tiled graph.
mps::Graph CheckTiles(Context& jmp_test_, const mps::Graph& g, const mps::Signature& sig,
                      const std::vector<std::vector<float>>& inputs) {
  StatusOr<mps::Graph> tiled = mps::TileSignature(g, sig);
  EXPECT_TRUE(tiled.ok());
  if (!tiled.ok()) {
    jmp_test_.Fail(__FILE__, __LINE__, tiled.status().message());
    return {};
  }
  std::vector<std::vector<uint8_t>> global_bytes, tile_bytes;
  for (size_t i = 0; i < inputs.size(); ++i) {
    global_bytes.push_back(Bytes(inputs[i]));
    const mps::TileSharding& s = sig.input_shardings[i];
    for (int64_t t = 0; t < Tiles(s); ++t)
      tile_bytes.push_back(Bytes(Tile(inputs[i], g.type(g.inputs[i]).shape, s.tiles, t)));
  }
  auto want = RunOnHost(g, global_bytes);
  auto got = RunOnHost(*tiled, tile_bytes);
  EXPECT_TRUE(want.ok() && got.ok());
  if (!want.ok() || !got.ok()) return *tiled;
  size_t at = 0;
  for (size_t j = 0; j < g.outputs.size(); ++j) {
    const mps::TileSharding& s = sig.output_shardings[j];
    const std::vector<float> whole = Values<float>((*want)[j]);
    for (int64_t t = 0; t < Tiles(s); ++t, ++at) {
      EXPECT_TRUE(at < got->size());
      if (at >= got->size()) return *tiled;
      EXPECT_TRUE(Values<float>((*got)[at]) == Tile(whole, g.type(g.outputs[j]).shape, s.tiles, t));
    }
  }
  EXPECT_TRUE(at == tiled->outputs.size());
  return *tiled;
}

mps::Signature Signature(std::vector<mps::TileSharding> in, std::vector<mps::TileSharding> out) {
  mps::Signature sig;
  sig.input_dtypes.assign(in.size(), DType::kF32);
  sig.output_dtypes.assign(out.size(), DType::kF32);
  sig.input_shardings = std::move(in);
  sig.output_shardings = std::move(out);
  return sig;
}

std::vector<float> Iota(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i) * 0.5f - 3.0f;
  return v;
}

int SliceOf(GraphBuilder& b, int x, Shape starts, Shape ends, Shape shape) {
  return b.Apply(OpKind::kSlice, {x}, DType::kF32, shape,
                 [&](mps::Op& op) { op.attrs = mps::SliceAttrs{starts, ends, Shape(starts.size(), 1)}; });
}

int ConcatOf(GraphBuilder& b, std::vector<int> parts, int64_t axis, Shape shape) {
  return b.Apply(OpKind::kConcat, parts, DType::kF32, shape, [&](mps::Op& op) { op.attrs = mps::AxisAttrs{axis}; });
}

JMP_TEST(TileSignature, AManualComputationsSlicesAndPiecesDisappear) {
  // A psum over two devices as the lowering unrolls it: each device's slice, the sum, the pieces joined.
  GraphBuilder b;
  int x = b.Input(DType::kF32, {8});
  int sum = b.Apply(OpKind::kAdd, {SliceOf(b, x, {0}, {4}, {4}), SliceOf(b, x, {4}, {8}, {4})}, DType::kF32, {4});
  b.Output(ConcatOf(b, {sum, sum}, 0, {8}));
  const mps::TileSharding halves{{2}, {0, 1}};
  mps::Graph tiled = CheckTiles(jmp_test_, b.graph(), Signature({halves}, {halves}), {Iota(8)});
  EXPECT_TRUE(tiled.inputs.size() == 2 && tiled.outputs.size() == 2);
  EXPECT_TRUE(tiled.ops.size() == 1 && CountOps(tiled, OpKind::kAdd) == 1);
}

JMP_TEST(TileSignature, AGlobalReaderGetsTheTilesConcatenated) {
  // Tiles along both dimensions; the graph reads the whole argument and returns it whole.
  GraphBuilder b;
  int x = b.Input(DType::kF32, {4, 6});
  b.Output(b.Apply(OpKind::kNegative, {x}, DType::kF32, {4, 6}));
  const mps::TileSharding grid{{2, 3}, {0, 1, 2, 3, 4, 5}};
  mps::Graph tiled = CheckTiles(jmp_test_, b.graph(), Signature({grid}, {mps::TileSharding{}}), {Iota(24)});
  EXPECT_TRUE(tiled.inputs.size() == 6 && tiled.outputs.size() == 1);
  EXPECT_TRUE(CountOps(tiled, OpKind::kConcat) == 3);  // each row of tiles, then the rows
}

JMP_TEST(TileSignature, AResultNotBuiltFromPiecesIsSliced) {
  GraphBuilder b;
  int x = b.Input(DType::kF32, {4, 6});
  b.Output(b.Apply(OpKind::kNegative, {x}, DType::kF32, {4, 6}));
  const mps::TileSharding columns{{1, 2}, {0, 1}};
  mps::Graph tiled = CheckTiles(jmp_test_, b.graph(), Signature({mps::TileSharding{}}, {columns}), {Iota(24)});
  EXPECT_TRUE(tiled.outputs.size() == 2 && CountOps(tiled, OpKind::kSlice) == 2);
}

JMP_TEST(TileSignature, NestedPiecesAndAnInputReturnedAsItIs) {
  // Pieces joined along columns, then rows (a 2x2 mesh's assembly), and an argument passed through.
  GraphBuilder b;
  int x = b.Input(DType::kF32, {4, 4});
  std::vector<int> piece;
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t c = 0; c < 2; ++c)
      piece.push_back(b.Apply(OpKind::kNegative, {SliceOf(b, x, {2 * r, 2 * c}, {2 * r + 2, 2 * c + 2}, {2, 2})},
                              DType::kF32, {2, 2}));
  int top = ConcatOf(b, {piece[0], piece[1]}, 1, {2, 4});
  int bottom = ConcatOf(b, {piece[2], piece[3]}, 1, {2, 4});
  b.Output(ConcatOf(b, {top, bottom}, 0, {4, 4}));
  b.Output(x);
  const mps::TileSharding grid{{2, 2}, {0, 1, 2, 3}};
  mps::Graph tiled = CheckTiles(jmp_test_, b.graph(), Signature({grid}, {grid, grid}), {Iota(16)});
  EXPECT_TRUE(CountOps(tiled, OpKind::kSlice) == 0 && CountOps(tiled, OpKind::kConcat) == 0);
  EXPECT_TRUE(CountOps(tiled, OpKind::kNegative) == 4);
}

JMP_TEST(TileSignature, AReductionOverSplitDimensionsCombinesEachTilesOwn) {
  // A 2x3 grid of tiles: summed over rows (the split of 2 combined, the split of 3 kept), and the maximum
  // over everything. Neither assembles the argument; the text XLA reads names the combines.
  GraphBuilder b;
  int x = b.Input(DType::kF32, {4, 6});
  b.Output(
      b.Apply(OpKind::kReductionSum, {x}, DType::kF32, {1, 6}, [](mps::Op& op) { op.attrs = mps::AxesAttrs{{0}}; }));
  b.Output(b.Apply(OpKind::kReductionMaximum, {x}, DType::kF32, {1, 1},
                   [](mps::Op& op) { op.attrs = mps::AxesAttrs{{0, 1}}; }));
  const mps::TileSharding grid{{2, 3}, {0, 1, 2, 3, 4, 5}};
  const mps::Signature sig = Signature({grid}, {mps::TileSharding{{1, 3}, {0, 1, 2, 0, 1, 2}}, mps::TileSharding{}});
  mps::Graph tiled = CheckTiles(jmp_test_, b.graph(), sig, {Iota(24)});
  EXPECT_TRUE(CountOps(tiled, OpKind::kConcat) == 0);
  EXPECT_TRUE(CountOps(tiled, OpKind::kReductionSum) == 6 && CountOps(tiled, OpKind::kReductionMaximum) == 6);
  EXPECT_TRUE(CountOps(tiled, OpKind::kAdd) == 3 && CountOps(tiled, OpKind::kMaximum) == 5);
  mps::TileTraffic traffic;
  EXPECT_TRUE(mps::TileSignature(b.graph(), sig, &traffic).ok());
  EXPECT_TRUE(traffic.all_reduces > 0 && traffic.all_gathers == 0);
}

JMP_TEST(TileSignature, AnArgumentReadWholeIsOneGather) {
  GraphBuilder b;
  int x = b.Input(DType::kF32, {4, 6});
  b.Output(b.Apply(OpKind::kNegative, {x}, DType::kF32, {4, 6}));
  const mps::TileSharding grid{{2, 3}, {0, 1, 2, 3, 4, 5}};
  mps::TileTraffic traffic;
  EXPECT_TRUE(mps::TileSignature(b.graph(), Signature({grid}, {mps::TileSharding{}}), &traffic).ok());
  EXPECT_TRUE(traffic.all_gathers == 1 && traffic.all_reduces == 0);
}

}  // namespace
}  // namespace jmp::unit

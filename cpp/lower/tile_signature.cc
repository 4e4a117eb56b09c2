#include "lower/tile_signature.h"

#include <cstddef>
#include <map>
#include <utility>
#include <vector>

#include "mps/verify.h"

namespace jmp::mps {

namespace {

using Shape = std::vector<int64_t>;

// Where tile `tile` of a value of `shape` cut as `tiles` starts, and its extent.
void TileRegion(const Shape& shape, const std::vector<int64_t>& tiles, int64_t tile, Shape& starts, Shape& sizes) {
  starts.assign(shape.size(), 0);
  sizes = shape;
  for (size_t k = shape.size(); k-- > 0;) {
    const int64_t t = tiles.empty() ? 1 : tiles[k];
    sizes[k] = shape[k] / t;
    starts[k] = (tile % t) * sizes[k];
    tile /= t;
  }
}

class Tiler {
 public:
  explicit Tiler(Graph& g) : g_(g) {
    for (size_t i = 0; i < g_.ops.size(); ++i)
      for (int v : g_.ops[i].outputs) producer_[v] = i;
  }

  // The value holding region (starts, sizes) of `value`: an operand of the Concats that built it when
  // the region lies within one, else a new Slice (appended after every op).
  int Region(int value, const Shape& starts, const Shape& sizes) {
    const Shape& shape = g_.type(value).shape;
    bool whole = true;
    for (size_t k = 0; k < shape.size(); ++k) whole &= starts[k] == 0 && sizes[k] == shape[k];
    if (whole) return value;
    auto p = producer_.find(value);
    if (p != producer_.end() && g_.ops[p->second].kind == OpKind::kConcat) {
      const Op& concat = g_.ops[p->second];
      const size_t axis = static_cast<size_t>(concat.Attrs<AxisAttrs>().axis);
      int64_t at = 0;
      for (int operand : concat.inputs) {
        const int64_t length = g_.type(operand).shape.at(axis);
        if (starts[axis] >= at && starts[axis] + sizes[axis] <= at + length) {
          Shape inner = starts;
          inner[axis] -= at;
          return Region(operand, inner, sizes);
        }
        at += length;
      }
    }
    Shape ends(shape.size()), strides(shape.size(), 1);
    for (size_t k = 0; k < shape.size(); ++k) ends[k] = starts[k] + sizes[k];
    const int out = g_.AddValue(g_.type(value).dtype, sizes);
    Op slice;
    slice.kind = OpKind::kSlice;
    slice.inputs = {value};
    slice.outputs = {out};
    slice.attrs = SliceAttrs{starts, ends, strides};
    g_.ops.push_back(std::move(slice));
    producer_[out] = g_.ops.size() - 1;
    return out;
  }

 private:
  Graph& g_;
  std::map<int, size_t> producer_;
};

// The op that gives `out` the elements of `in` (of another shape).
Op Reshaped(int in, int out) {
  Op reshape;
  reshape.kind = OpKind::kReshape;
  reshape.inputs = {in};
  reshape.outputs = {out};
  return reshape;
}

bool CallsPython(const Op& op) {
  if (op.kind == OpKind::kPythonCallback) return true;
  for (const Graph& sub : op.subgraphs)
    for (const Op& inner : sub.ops)
      if (CallsPython(inner)) return true;
  return false;
}

// Drops the ops nothing reads, but those that call into Python (their effects are the point).
void DropDeadOps(Graph& g) {
  std::vector<bool> used(g.values.size(), false);
  for (int v : g.outputs) used[static_cast<size_t>(v)] = true;
  std::vector<bool> keep(g.ops.size(), false);
  for (size_t i = g.ops.size(); i-- > 0;) {
    const Op& op = g.ops[i];
    bool needed = CallsPython(op);
    for (int v : op.outputs) needed |= used[static_cast<size_t>(v)];
    if (!needed) continue;
    keep[i] = true;
    for (int v : op.inputs) used[static_cast<size_t>(v)] = true;
  }
  std::vector<Op> kept;
  for (size_t i = 0; i < g.ops.size(); ++i)
    if (keep[i]) kept.push_back(std::move(g.ops[i]));
  g.ops = std::move(kept);
}

}  // namespace

StatusOr<Graph> TileSignature(const Graph& graph, const Signature& signature) {
  if (signature.input_shardings.size() != graph.inputs.size() ||
      signature.output_shardings.size() != graph.outputs.size())
    return Internal("a program over several devices without a sharding per argument and result");
  Graph g = graph;
  // Inputs: each sharded one becomes its tiles. A Slice that reads exactly one tile reads the tile
  // input instead; any other reader gets the global value, concatenated from the tiles up front.
  std::vector<int> inputs;
  std::map<int, int> replaced;  // value -> its replacement
  std::vector<Op> prologue;
  for (size_t i = 0; i < graph.inputs.size(); ++i) {
    const int global = graph.inputs[i];
    const TileSharding& s = signature.input_shardings[i];
    const int64_t count = TileCount(s);
    if (count == 1) {
      inputs.push_back(global);
      continue;
    }
    const TensorType type = g.type(global);
    std::vector<int> tile_inputs;
    std::map<std::pair<Shape, Shape>, int> by_region;
    for (int64_t t = 0; t < count; ++t) {
      Shape starts, sizes;
      TileRegion(type.shape, s.tiles, t, starts, sizes);
      if (s.parts > 1) {
        // A tile of a stack of parts is a device's shard with a leading dimension of 1.
        inputs.push_back(g.AddValue(type.dtype, Shape(sizes.begin() + 1, sizes.end())));
        tile_inputs.push_back(g.AddValue(type.dtype, sizes));
        prologue.push_back(Reshaped(inputs.back(), tile_inputs.back()));
      } else {
        tile_inputs.push_back(g.AddValue(type.dtype, sizes));
        inputs.push_back(tile_inputs.back());
      }
      Shape ends(starts.size());
      for (size_t k = 0; k < starts.size(); ++k) ends[k] = starts[k] + sizes[k];
      by_region[{starts, ends}] = tile_inputs.back();
    }
    bool needs_global = false;
    for (const int out : graph.outputs) needs_global |= out == global;
    for (Op& op : g.ops) {
      bool reads = false;
      for (int v : op.inputs) reads |= v == global;
      if (!reads) continue;
      if (op.kind == OpKind::kSlice) {
        const SliceAttrs& a = op.Attrs<SliceAttrs>();
        bool unit = true;
        for (int64_t stride : a.strides) unit &= stride == 1;
        auto tile = by_region.find({a.starts, a.ends});
        if (unit && tile != by_region.end()) {
          replaced[op.outputs.at(0)] = tile->second;
          continue;
        }
      }
      needs_global = true;
    }
    if (!needs_global) continue;
    // The global value again: concatenated along the last dimension first, then outwards.
    std::vector<int> level = tile_inputs;
    for (size_t k = s.tiles.size(); k-- > 0;) {
      const size_t t = static_cast<size_t>(s.tiles[k]);
      if (t == 1) continue;
      std::vector<int> next;
      for (size_t group = 0; group < level.size() / t; ++group) {
        std::vector<int> parts(level.begin() + static_cast<std::ptrdiff_t>(group * t),
                               level.begin() + static_cast<std::ptrdiff_t>((group + 1) * t));
        Shape shape = g.type(parts[0]).shape;
        shape[k] *= static_cast<int64_t>(t);
        Op concat;
        concat.kind = OpKind::kConcat;
        concat.inputs = parts;
        concat.outputs = {level.size() / t == 1 && k == 0 ? global : g.AddValue(type.dtype, shape)};
        concat.attrs = AxisAttrs{static_cast<int64_t>(k)};
        next.push_back(concat.outputs[0]);
        prologue.push_back(std::move(concat));
      }
      level = std::move(next);
    }
    // The outermost concatenation defines the old input value itself; when the tiles split only inner
    // dimensions it ends at a lower k, so rename its result.
    if (level.size() == 1 && level[0] != global) replaced[global] = level[0];
  }
  auto resolve = [&](int v) {
    for (auto r = replaced.find(v); r != replaced.end(); r = replaced.find(v)) v = r->second;
    return v;
  };
  for (Op& op : g.ops)
    for (int& v : op.inputs) v = resolve(v);
  for (Op& op : prologue)
    for (int& v : op.inputs) v = resolve(v);
  std::vector<Op> ops = std::move(prologue);
  for (Op& op : g.ops) ops.push_back(std::move(op));
  g.ops = std::move(ops);
  g.inputs = std::move(inputs);

  // Outputs: each sharded one becomes its tiles, each the piece a manual computation concatenated, or
  // a slice of the global result.
  Tiler tiler(g);
  std::vector<int> outputs;
  for (size_t j = 0; j < graph.outputs.size(); ++j) {
    const int global = resolve(graph.outputs[j]);
    const TileSharding& s = signature.output_shardings[j];
    const int64_t count = TileCount(s);
    for (int64_t t = 0; t < count; ++t) {
      Shape starts, sizes;
      TileRegion(g.type(global).shape, s.tiles, t, starts, sizes);
      const int tile = tiler.Region(global, starts, sizes);
      if (s.parts == 1) {
        outputs.push_back(tile);
        continue;
      }
      outputs.push_back(g.AddValue(g.type(tile).dtype, Shape(sizes.begin() + 1, sizes.end())));
      g.ops.push_back(Reshaped(tile, outputs.back()));
    }
  }
  g.outputs = std::move(outputs);
  DropDeadOps(g);
  JMP_RETURN_IF_ERROR(VerifyGraph(g).WithContext("the program over tiles"));
  return g;
}

Graph KeepOutputs(const Graph& graph, const std::vector<bool>& keep) {
  Graph g = graph;
  g.outputs.clear();
  for (size_t j = 0; j < graph.outputs.size(); ++j)
    if (j < keep.size() && keep[j]) g.outputs.push_back(graph.outputs[j]);
  DropDeadOps(g);
  return g;
}

}  // namespace jmp::mps

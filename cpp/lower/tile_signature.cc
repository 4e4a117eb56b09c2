#include "lower/tile_signature.h"

#include <algorithm>
#include <cstddef>
#include <map>
#include <set>
#include <string>
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

// The elementwise op that combines two partial results of a reduction of kind `reduction`.
bool CombineOf(OpKind reduction, OpKind* combine) {
  static const std::map<OpKind, OpKind> kCombine = {
      {OpKind::kReductionSum, OpKind::kAdd},         {OpKind::kReductionProduct, OpKind::kMultiply},
      {OpKind::kReductionMaximum, OpKind::kMaximum}, {OpKind::kReductionMinimum, OpKind::kMinimum},
      {OpKind::kReductionAnd, OpKind::kLogicalAnd},  {OpKind::kReductionOr, OpKind::kLogicalOr}};
  auto it = kCombine.find(reduction);
  if (it == kCombine.end()) return false;
  *combine = it->second;
  return true;
}

// A reduction of a value concatenated from tiles becomes reductions of its pieces: pieces along a reduced
// axis are combined elementwise (reductions keep reduced axes as size 1, so all have one shape), pieces
// along a kept axis stay pieces, joined once at the end (where a result's tiles are those pieces, the
// join goes unread). Nothing then assembles the whole value, and each device reduces only its own
// shards, as XLA's partitioner does. `joins` are the concatenations of tiles.
class ReductionSplitter {
 public:
  ReductionSplitter(Graph& g, std::set<int> joins) : g_(g), joins_(std::move(joins)) {
    for (size_t i = 0; i < g_.ops.size(); ++i)
      for (int v : g_.ops[i].outputs) producer_[v] = i;
  }

  // Rewrites g's ops; returns the results of the reductions it split with combines (all-reduces).
  std::vector<int> Run() {
    std::vector<Op> ops;
    ops.reserve(g_.ops.size());
    for (const Op& op : g_.ops) {  // copied: the splits read the concatenations, which stay in g_.ops
      OpKind combine;
      if (op.inputs.size() != 1 || !CombineOf(op.kind, &combine) || !IsJoin(op.inputs[0])) {
        ops.push_back(op);
        continue;
      }
      ops_ = &ops;
      combined_ = false;
      Piece p = Reduce(op.kind, op.Attrs<AxesAttrs>().axes, op.inputs[0], op.location);
      Materialize(p, op.outputs[0], op.location);
      if (combined_) combined_results_.push_back(op.outputs[0]);
    }
    g_.ops = std::move(ops);
    return combined_results_;
  }

 private:
  // A value, or the pieces along `axis` that make it.
  struct Piece {
    int value = -1;
    int64_t axis = -1;
    std::vector<Piece> parts;
  };

  bool IsJoin(int v) const {
    auto p = producer_.find(v);
    return joins_.count(v) && p != producer_.end() && g_.ops[p->second].kind == OpKind::kConcat;
  }

  int Emit(OpKind kind, std::vector<int> inputs, const TensorType& type, OpAttrs attrs, const std::string& location) {
    Op op;
    op.kind = kind;
    op.inputs = std::move(inputs);
    op.outputs = {g_.AddValue(type.dtype, type.shape)};
    op.attrs = std::move(attrs);
    op.location = location;
    ops_->push_back(std::move(op));
    return ops_->back().outputs[0];
  }

  Piece Reduce(OpKind kind, const std::vector<int64_t>& axes, int in, const std::string& location) {
    TensorType type = g_.type(in);
    for (int64_t a : axes) type.shape.at(static_cast<size_t>(a)) = 1;
    if (!IsJoin(in)) return Piece{Emit(kind, {in}, type, AxesAttrs{axes}, location), -1, {}};
    const Op& concat = g_.ops[producer_.at(in)];
    const int64_t axis = concat.Attrs<AxisAttrs>().axis;
    std::vector<Piece> parts;
    for (int operand : concat.inputs) parts.push_back(Reduce(kind, axes, operand, location));
    if (std::find(axes.begin(), axes.end(), axis) == axes.end()) return Piece{-1, axis, std::move(parts)};
    OpKind combine = OpKind::kAdd;
    CombineOf(kind, &combine);
    Piece acc = std::move(parts[0]);
    for (size_t i = 1; i < parts.size(); ++i) acc = Combine(combine, acc, parts[i], location);
    combined_ = true;
    return acc;
  }

  // a o b elementwise: piece by piece where both are cut alike.
  Piece Combine(OpKind combine, const Piece& a, const Piece& b, const std::string& location) {
    if (!a.parts.empty() && !b.parts.empty() && a.axis == b.axis && a.parts.size() == b.parts.size()) {
      bool alike = true;
      for (size_t i = 0; i < a.parts.size(); ++i) alike &= Type(a.parts[i]).shape == Type(b.parts[i]).shape;
      if (alike) {
        Piece out{-1, a.axis, {}};
        for (size_t i = 0; i < a.parts.size(); ++i)
          out.parts.push_back(Combine(combine, a.parts[i], b.parts[i], location));
        return out;
      }
    }
    const int x = Materialize(a, -1, location), y = Materialize(b, -1, location);
    return Piece{Emit(combine, {x, y}, g_.type(x), NoAttrs{}, location), -1, {}};
  }

  TensorType Type(const Piece& p) const {
    if (p.parts.empty()) return g_.type(p.value);
    TensorType t = Type(p.parts[0]);
    t.shape.at(static_cast<size_t>(p.axis)) = 0;
    for (const Piece& part : p.parts)
      t.shape.at(static_cast<size_t>(p.axis)) += Type(part).shape.at(static_cast<size_t>(p.axis));
    return t;
  }

  // The value of `p`; named `out` when given (the reduction's own result, which later ops read).
  int Materialize(const Piece& p, int out, const std::string& location) {
    int v = p.value;
    if (!p.parts.empty()) {
      std::vector<int> values;
      for (const Piece& part : p.parts) values.push_back(Materialize(part, -1, location));
      v = Emit(OpKind::kConcat, values, Type(p), AxisAttrs{p.axis}, location);
    }
    if (out < 0) return v;
    // The op just made for this piece defines `out` instead (no one else reads it).
    for (auto it = ops_->rbegin(); it != ops_->rend(); ++it)
      if (it->outputs.size() == 1 && it->outputs[0] == v) {
        it->outputs[0] = out;
        return out;
      }
    return v;
  }

  Graph& g_;
  std::set<int> joins_;
  std::map<int, size_t> producer_;  // value -> index of its op in g_.ops
  std::vector<Op>* ops_ = nullptr;
  bool combined_ = false;
  std::vector<int> combined_results_;
};

}  // namespace

StatusOr<Graph> TileSignature(const Graph& graph, const Signature& signature, TileTraffic* traffic) {
  if (signature.input_shardings.size() != graph.inputs.size() ||
      signature.output_shardings.size() != graph.outputs.size())
    return Internal("a program over several devices without a sharding per argument and result");
  Graph g = graph;
  // Inputs: each sharded one becomes its tiles. A Slice that reads exactly one tile reads the tile
  // input instead; any other reader gets the global value, concatenated from the tiles up front.
  std::vector<int> inputs;
  std::map<int, int> replaced;  // value -> its replacement
  std::set<int> joins;          // the values concatenated from tiles
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
        joins.insert(concat.outputs[0]);
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
  // A renamed outermost concatenation's readers now read the new value, which is in `joins` already.
  const std::vector<int> combined = ReductionSplitter(g, joins).Run();

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
  if (traffic) {
    // An argument is gathered where the outermost concatenation of its tiles (one no other joins
    // further) is still read; a split reduction counts where its result is still computed (a value
    // handed on in parts may leave it unread).
    std::set<int> read(g.outputs.begin(), g.outputs.end()), made, joined_further;
    for (const Op& op : g.ops) {
      read.insert(op.inputs.begin(), op.inputs.end());
      made.insert(op.outputs.begin(), op.outputs.end());
      if (op.kind == OpKind::kConcat && joins.count(op.outputs[0]))
        joined_further.insert(op.inputs.begin(), op.inputs.end());
    }
    *traffic = TileTraffic{};
    for (const Op& op : g.ops)
      if (op.kind == OpKind::kConcat && joins.count(op.outputs[0]) && read.count(op.outputs[0]) &&
          !joined_further.count(op.outputs[0]))
        ++traffic->all_gathers;
    for (int v : combined) traffic->all_reduces += made.count(v) ? 1 : 0;
  }
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

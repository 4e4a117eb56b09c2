#include "exec/placement.h"

#include "exec/capabilities.h"

#include <algorithm>
#include <functional>
#include <iterator>
#include <set>
#include <sstream>
#include <unordered_map>
#include <utility>

namespace jmp::mps {

std::string_view WhereName(Where where) { return where == Where::kMetal ? "metal" : "host"; }

bool MetalHasDType(DType dtype) {
  switch (dtype) {
#define JMP_DTYPE(name, mlir, jax, bytes, bits, cls, pjrt, vhlo, metal, msl, host) \
  case DType::k##name: return std::string_view(#metal) != "Invalid";
#include "support/dtype.def"
  }
  return false;
}

bool AnyEmpty(const Graph& graph, const std::vector<int>& values) {
  for (int v : values)
    if (graph.type(v).NumElements() == 0) return true;
  return false;
}

bool MetalRuns(const Graph& graph, const Op& op) {
  if (OpKindHostOnly(op.kind)) return false;
  if (AnyEmpty(graph, op.inputs) || AnyEmpty(graph, op.outputs)) return false;
  if (!op.inputs.empty() || !op.outputs.empty())
    if (exec::MetalAvoids(graph, op)) return false;
  for (const auto* ids : {&op.inputs, &op.outputs})
    for (int v : *ids)
      if (!MetalHasDType(graph.type(v).dtype)) return false;
  // A user's kernel replaces its reference on Metal, so only its own operands count.
  if (op.kind == OpKind::kMetalKernel) return true;
  for (const Graph& sub : op.subgraphs) {
    if (AnyEmpty(sub, sub.inputs)) return false;
    for (int v : sub.inputs)
      if (!MetalHasDType(sub.type(v).dtype)) return false;
    // A user's kernel is a pipeline of its own between graphs, never a call inside one: a loop or
    // branch holding one runs on the host (the kernel as its reference implementation).
    for (const Op& inner : sub.ops)
      if (inner.kind == OpKind::kMetalKernel || !MetalRuns(sub, inner)) return false;
  }
  return true;
}

namespace {

// Ops that only make a value from their attributes: cheap to repeat in every segment that reads them.
bool IsSource(const Op& op) {
  return op.inputs.empty() && op.subgraphs.empty() &&
         (op.kind == OpKind::kConstant || op.kind == OpKind::kCoordinateAlongAxis);
}

// The elementwise rows of the op table.
bool IsElementwiseRow(OpKind kind) {
  static const OpKind kRows[] = {
#define JMP_MPS_UNARY(name, macos, selector, domain) OpKind::k##name,
#define JMP_MPS_BINARY(name, macos, primary, secondary, domain) OpKind::k##name,
#include "mps/op_kinds.def"
  };
  return std::find(std::begin(kRows), std::end(kRows), kind) != std::end(kRows);
}

// Per op: whether segments recompute it rather than read it from the segment that made it. Sources are,
// and so is a reshape, broadcast, cast or elementwise op of values recomputed that way (a splat of a
// constant, the coefficients of a polynomial): passed between segments, such a splat would be a
// buffer of the full shape made and kept alive per constant (hundreds of MB for a polynomial over
// millions of float64 elements), where the segment reading it makes it tile by tile or folds it. An op
// Metal cannot run is repeated only when no Metal op could read its result (its dtypes are all
// host-only), so every segment that copies it can run it.
std::vector<uint8_t> Recomputed(const Graph& g, const std::vector<int>& producer) {
  std::vector<uint8_t> recomputed(g.ops.size(), 0);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    if (IsSource(op)) {
      recomputed[i] = 1;
      continue;
    }
    const bool kind = op.kind == OpKind::kReshape || op.kind == OpKind::kBroadcast ||
                      op.kind == OpKind::kReinterpretCast || op.kind == OpKind::kCast || IsElementwiseRow(op.kind);
    if (!kind || op.inputs.empty() || !op.subgraphs.empty()) continue;
    bool from_sources = true, any_metal_dtype = false;
    for (int v : op.inputs) {
      int p = producer[static_cast<size_t>(v)];
      from_sources = from_sources && p >= 0 && recomputed[static_cast<size_t>(p)];
      any_metal_dtype = any_metal_dtype || MetalHasDType(g.type(v).dtype);
    }
    for (int v : op.outputs) any_metal_dtype = any_metal_dtype || MetalHasDType(g.type(v).dtype);
    recomputed[i] = from_sources && (MetalRuns(g, op) || !any_metal_dtype);
  }
  return recomputed;
}

// Elementwise glue between host work (a mask of two host comparisons, integer bookkeeping between two
// float64 chains) goes to the host: on Metal it would cut the host work into two segments with a round
// trip through the GPU between them, for ops the host does in one pass over data it just made. The glue
// is the largest set of Metal elementwise ops whose inputs are each made on the host, recomputed
// (constants, splats) or made by the set, and whose readers are each on the host or in the set.
void KeepGlueOnHost(const Graph& g, const std::vector<int>& producer, const std::vector<uint8_t>& recomputed,
                    std::vector<Where>& where) {
  const size_t n = g.ops.size();
  std::vector<std::vector<size_t>> readers(g.values.size());
  for (size_t i = 0; i < n; ++i)
    for (int v : g.ops[i].inputs) readers[static_cast<size_t>(v)].push_back(i);
  std::vector<uint8_t> returned(g.values.size(), 0);
  for (int v : g.outputs) returned[static_cast<size_t>(v)] = 1;
  std::vector<uint8_t> glue(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const Op& op = g.ops[i];
    const bool kind = op.kind == OpKind::kReshape || op.kind == OpKind::kBroadcast || op.kind == OpKind::kCast ||
                      op.kind == OpKind::kSelect || IsElementwiseRow(op.kind);
    glue[i] = where[i] == Where::kMetal && !recomputed[i] && kind && op.subgraphs.empty() && !op.inputs.empty();
  }
  auto stays = [&](size_t i) {  // whether op i touches Metal work outside the set
    for (int v : g.ops[i].inputs) {
      const int p = producer[static_cast<size_t>(v)];
      if (p < 0) return true;  // a parameter
      const size_t q = static_cast<size_t>(p);
      if (!recomputed[q] && where[q] == Where::kMetal && !glue[q]) return true;
    }
    for (int v : g.ops[i].outputs) {
      if (returned[static_cast<size_t>(v)] || readers[static_cast<size_t>(v)].empty()) return true;
      for (size_t r : readers[static_cast<size_t>(v)])
        if (where[r] == Where::kMetal && !glue[r]) return true;
    }
    return false;
  };
  for (bool dropped = true; dropped;) {
    dropped = false;
    for (size_t i = 0; i < n; ++i)
      if (glue[i] && stays(i)) {
        glue[i] = 0;
        dropped = true;
      }
  }
  for (size_t i = 0; i < n; ++i)
    if (glue[i]) where[i] = Where::kHost;
}

// A Metal kernel is a compute pipeline, not part of an MPSGraph: on Metal it runs as a segment of its
// own, and what it reads is made by other segments (a recomputed value it reads is scheduled as an
// ordinary op instead).
bool OwnSegment(const Op& op, Where where) { return where == Where::kMetal && op.kind == OpKind::kMetalKernel; }

void ScheduleKernelOperands(const Graph& g, const std::vector<int>& producer, const std::vector<Where>& where,
                            std::vector<uint8_t>& recomputed) {
  for (size_t i = 0; i < g.ops.size(); ++i)
    if (OwnSegment(g.ops[i], where[i]))
      for (int v : g.ops[i].inputs)
        if (int p = producer[static_cast<size_t>(v)]; p >= 0) recomputed[static_cast<size_t>(p)] = 0;
}

// List scheduling: stay on one executor while it has ready ops, taking them in program order.
std::vector<size_t> Schedule(const Graph& g, const std::vector<Where>& where, const std::vector<int>& producer,
                             const std::vector<uint8_t>& recomputed) {
  const size_t n = g.ops.size();
  std::vector<size_t> waiting(n, 0);
  std::vector<std::vector<size_t>> consumers(n);
  auto depend = [&](size_t before, size_t after) {
    consumers[before].push_back(after);
    ++waiting[after];
  };
  size_t previous_host_only = n;
  for (size_t i = 0; i < n; ++i) {
    const Op& op = g.ops[i];
    std::set<size_t> from;
    for (int v : op.inputs)
      if (int p = producer[static_cast<size_t>(v)]; p >= 0 && !recomputed[static_cast<size_t>(p)])
        from.insert(static_cast<size_t>(p));
    for (size_t p : from) depend(p, i);
    if (OpKindHostOnly(op.kind)) {
      if (previous_host_only < n && !from.count(previous_host_only)) depend(previous_host_only, i);
      previous_host_only = i;
    }
  }
  // Among ready ops, those the other executor reads go first: the other side then finds them done on
  // its next turn instead of handing back early for them. (A float64 constant's bits read by integer
  // ops on Metal and turned back into the float64 bound a host clip reads would otherwise cut the host's
  // elementwise chain in two.)
  std::vector<uint8_t> feeds_other(n, 0);
  for (size_t i = 0; i < n; ++i)
    for (size_t c : consumers[i]) feeds_other[i] |= where[c] != where[i];
  auto key = [&](size_t i) { return std::pair<int, size_t>{feeds_other[i] ? 0 : 1, i}; };
  std::set<std::pair<int, size_t>> ready[2];
  for (size_t i = 0; i < n; ++i)
    if (!recomputed[i] && waiting[i] == 0) ready[static_cast<size_t>(where[i])].insert(key(i));
  std::vector<size_t> order;
  size_t current = 0;
  if (ready[1].size() && (ready[0].empty() || *ready[1].begin() < *ready[0].begin())) current = 1;
  while (!ready[0].empty() || !ready[1].empty()) {
    if (ready[current].empty()) current ^= 1;
    size_t i = ready[current].begin()->second;
    ready[current].erase(ready[current].begin());
    order.push_back(i);
    for (size_t c : consumers[i])
      if (--waiting[c] == 0) ready[static_cast<size_t>(where[c])].insert(key(c));
  }
  return order;
}

// Builds the segment's own graph from its ops, returning the outer values `outputs`; what it reads
// from outside becomes its parameters, except what it recomputes (Recomputed).
void BuildSegmentGraph(const Graph& g, const std::vector<int>& producer, const std::vector<uint8_t>& recomputed,
                       Segment& s, const std::vector<int>& outputs) {
  std::unordered_map<int, int> local;  // outer value -> segment value
  std::vector<size_t> ops;
  std::function<int(int)> value;
  // Op i of the outer graph into the segment, reading its inputs' segment values, with fresh outputs.
  auto emit = [&](size_t i) {
    Op op = g.ops[i];
    for (int& v : op.inputs) v = value(v);
    for (int& v : op.outputs) {
      const TensorType& t = g.type(v);
      int inner = s.graph.AddValue(t.dtype, t.shape);
      local.emplace(v, inner);
      v = inner;
    }
    s.graph.ops.push_back(std::move(op));
    ops.push_back(i);
  };
  value = [&](int outer) -> int {
    auto it = local.find(outer);
    if (it != local.end()) return it->second;
    int p = producer[static_cast<size_t>(outer)];
    if (p >= 0 && recomputed[static_cast<size_t>(p)]) {
      emit(static_cast<size_t>(p));  // its inputs recomputed too, ahead of it
      return local.at(outer);
    }
    const TensorType& t = g.type(outer);
    int v = s.graph.AddValue(t.dtype, t.shape);
    local.emplace(outer, v);
    s.inputs.push_back(outer);
    s.graph.inputs.push_back(v);
    return v;
  };
  for (size_t i : s.ops) emit(i);
  for (int outer : outputs) {
    s.outputs.push_back(outer);
    s.graph.outputs.push_back(value(outer));
  }
  s.ops = std::move(ops);
}

}  // namespace

Placement PlaceGraph(const Graph& g) {
  Placement p;
  const size_t n = g.ops.size();
  std::vector<int> producer(g.values.size(), -1);
  for (size_t i = 0; i < n; ++i)
    for (int v : g.ops[i].outputs) producer[static_cast<size_t>(v)] = static_cast<int>(i);
  p.op_where.resize(n);
  for (size_t i = 0; i < n; ++i) p.op_where[i] = MetalRuns(g, g.ops[i]) ? Where::kMetal : Where::kHost;

  // Cut the schedule where the executor changes.
  std::vector<uint8_t> recomputed = Recomputed(g, producer);
  KeepGlueOnHost(g, producer, recomputed, p.op_where);
  ScheduleKernelOperands(g, producer, p.op_where, recomputed);
  std::vector<size_t> order = Schedule(g, p.op_where, producer, recomputed);
  bool after_kernel = false;
  for (size_t i : order) {
    const bool kernel = OwnSegment(g.ops[i], p.op_where[i]);
    if (p.segments.empty() || p.segments.back().where != p.op_where[i] || kernel || after_kernel) {
      p.segments.emplace_back();
      p.segments.back().where = p.op_where[i];
    }
    p.segments.back().ops.push_back(i);
    after_kernel = kernel;
  }
  if (p.segments.empty()) {  // nothing but constants and parameters: one segment returns them
    p.segments.emplace_back();
    Where where = Where::kMetal;
    for (int v : g.outputs)
      if (!MetalHasDType(g.type(v).dtype)) where = Where::kHost;
    if (AnyEmpty(g, g.outputs)) where = Where::kHost;
    p.segments.back().where = where;
  }
  // Parameters and constants returned as they are go to the last segment; an empty one must not make
  // a Metal segment's parameter or constant, so a host segment of no ops returns it.
  for (int v : g.outputs) {
    const int producer_op = producer[static_cast<size_t>(v)];
    const bool scheduled = producer_op >= 0 && !recomputed[static_cast<size_t>(producer_op)];
    if (!scheduled && g.type(v).NumElements() == 0 && p.segments.back().where == Where::kMetal) {
      p.segments.emplace_back();
      p.segments.back().where = Where::kHost;
      break;
    }
  }

  // Which segment makes each value, and which later segments (or the result) need it.
  std::vector<int> made_in(g.values.size(), -1);
  for (size_t s = 0; s < p.segments.size(); ++s)
    for (size_t i : p.segments[s].ops)
      for (int v : g.ops[i].outputs) made_in[static_cast<size_t>(v)] = static_cast<int>(s);
  std::vector<std::vector<int>> exports(p.segments.size());
  std::vector<uint8_t> exported(g.values.size(), 0);
  auto export_from = [&](size_t s, int v) {
    if (exported[static_cast<size_t>(v)]) return;
    exported[static_cast<size_t>(v)] = 1;
    exports[s].push_back(v);
  };
  for (size_t s = 0; s < p.segments.size(); ++s)
    for (size_t i : p.segments[s].ops)
      for (int v : g.ops[i].inputs)
        if (int m = made_in[static_cast<size_t>(v)]; m >= 0 && static_cast<size_t>(m) != s)
          export_from(static_cast<size_t>(m), v);
  // Results: each output index is written once, by the segment that makes its value (a value returned
  // twice is written twice); parameters and constants returned as they are go to the last segment.
  // A value both exported and returned is written once, to its first result's memory, which later
  // segments then read; so a segment's results come first and exports not also returned follow.
  const size_t last = p.segments.size() - 1;
  std::vector<std::vector<int>> returned(p.segments.size());
  for (size_t j = 0; j < g.outputs.size(); ++j) {
    int m = made_in[static_cast<size_t>(g.outputs[j])];
    returned[m >= 0 ? static_cast<size_t>(m) : last].push_back(static_cast<int>(j));
  }
  for (size_t s = 0; s < p.segments.size(); ++s) {
    Segment& seg = p.segments[s];
    std::vector<int> outs;
    for (int j : returned[s]) {
      outs.push_back(g.outputs[static_cast<size_t>(j)]);
      seg.returns.push_back(j);
    }
    for (int v : exports[s])  // distinct values, so only the results can already hold one
      if (std::find(outs.begin(), outs.end(), v) == outs.end()) {
        outs.push_back(v);
        seg.returns.push_back(-1);
      }
    BuildSegmentGraph(g, producer, recomputed, seg, outs);
  }
  return p;
}

std::string PlacementToString(const Graph& g, const Placement& p) {
  // The graph as it runs: ops in segment order, each marked with its executor, each segment opened by a
  // line saying what crosses into and out of it.
  Graph view;
  view.values = g.values;
  view.inputs = g.inputs;
  view.outputs = g.outputs;
  std::vector<std::string> before, after;
  for (size_t s = 0; s < p.segments.size(); ++s) {
    const Segment& seg = p.segments[s];
    std::ostringstream h;
    h << "-- segment " << s << " on " << WhereName(seg.where) << ": reads (";
    for (size_t i = 0; i < seg.inputs.size(); ++i) h << (i ? ", " : "") << '%' << seg.inputs[i];
    h << "), writes (";
    for (size_t i = 0; i < seg.outputs.size(); ++i) h << (i ? ", " : "") << '%' << seg.outputs[i];
    h << ")";
    before.resize(view.ops.size() + 1);
    before.back() += (before.back().empty() ? "" : "\n  ") + h.str();
    for (size_t i : seg.ops) {
      view.ops.push_back(g.ops[i]);
      after.push_back("  @" + std::string(WhereName(seg.where)));
    }
  }
  return view.ToString(before, after);
}

}  // namespace jmp::mps

#include "exec/work_estimate.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace jmp::exec {

namespace {

using mps::Graph;
using mps::Op;
using mps::OpKind;

// What running one op costs beyond its elements (dispatch, binding, a pass over a small tensor): the
// host executor runs a tiny op in about the time an elementwise op takes over this many elements.
constexpr double kOpCost = 64;

const Op* Producer(const Graph& g, int value) {
  for (const Op& op : g.ops)
    for (int out : op.outputs)
      if (out == value) return &op;
  return nullptr;
}

// The value `value` is a reshape of (a counter is often compared as a [1] or [] tensor).
int ThroughReshapes(const Graph& g, int value) {
  for (const Op* op = Producer(g, value); op && op->kind == OpKind::kReshape && op->inputs.size() == 1;
       op = Producer(g, value))
    value = op->inputs[0];
  return value;
}

// The one integer a constant holds, read as its dtype stores it.
std::optional<int64_t> IntegerConstant(const Graph& g, int value) {
  value = ThroughReshapes(g, value);
  const Op* op = Producer(g, value);
  if (!op || op->kind != OpKind::kConstant) return std::nullopt;
  const mps::TensorType& t = g.type(value);
  if (!IsInteger(t.dtype) || t.NumElements() != 1) return std::nullopt;
  const std::vector<uint8_t>& data = op->Attrs<mps::ConstantAttrs>().data;
  const size_t bytes = ByteSize(t.dtype);
  if (data.size() != bytes || bytes > 8) return std::nullopt;
  uint64_t raw = 0;
  for (size_t k = 0; k < bytes; ++k) raw |= static_cast<uint64_t>(data[k]) << (8 * k);
  if (IsSignedInt(t.dtype) && bytes < 8 && (raw >> (8 * bytes - 1)) & 1) raw |= ~uint64_t{0} << (8 * bytes);
  return static_cast<int64_t>(raw);
}

// Which parameter of `g` `value` is (through reshapes), or -1.
int ParameterIndex(const Graph& g, int value) {
  value = ThroughReshapes(g, value);
  for (size_t i = 0; i < g.inputs.size(); ++i)
    if (g.inputs[i] == value) return static_cast<int>(i);
  return -1;
}

// Iterations of `counter cmp limit` from `start` by `step` (cmp one of <, <=, >, >=).
std::optional<int64_t> Iterations(OpKind cmp, int64_t start, int64_t step, int64_t limit) {
  const double span = static_cast<double>(limit) - static_cast<double>(start);
  double n;
  if (step > 0 && (cmp == OpKind::kLessThan || cmp == OpKind::kLessThanOrEqualTo)) {
    const double last = cmp == OpKind::kLessThan ? span - 1 : span;  // the last counter value that passes
    n = last < 0 ? 0 : std::floor(last / static_cast<double>(step)) + 1;
  } else if (step < 0 && (cmp == OpKind::kGreaterThan || cmp == OpKind::kGreaterThanOrEqualTo)) {
    const double last = cmp == OpKind::kGreaterThan ? -span - 1 : -span;
    n = last < 0 ? 0 : std::floor(last / -static_cast<double>(step)) + 1;
  } else {
    return std::nullopt;  // never ends, or ends on wrap-around: not a counted loop
  }
  if (n > 9e18) return std::nullopt;
  return static_cast<int64_t>(n);
}

double OpWork(const Graph& g, const Op& op);

double GraphWork(const Graph& g) {
  double work = 0;
  for (const Op& op : g.ops) work += OpWork(g, op);
  return work;
}

double Elements(const Graph& g, int value) { return static_cast<double>(g.type(value).NumElements()); }

double OpWork(const Graph& g, const Op& op) {
  if (op.kind == OpKind::kConstant) return 0;  // made once, when the executable is built
  if (op.kind == OpKind::kWhile) {
    if (op.subgraphs.size() != 2) return std::numeric_limits<double>::infinity();
    const std::optional<int64_t> trips = StaticTripCount(g, op);
    if (!trips) return std::numeric_limits<double>::infinity();
    const double n = static_cast<double>(*trips);
    return kOpCost + (n + 1) * GraphWork(op.subgraphs[0]) + n * GraphWork(op.subgraphs[1]);
  }
  if (op.kind == OpKind::kIf) {
    double branch = 0;
    for (const Graph& sub : op.subgraphs) branch = std::max(branch, GraphWork(sub));
    return kOpCost + branch;
  }
  if (op.kind == OpKind::kMetalKernel && !op.subgraphs.empty()) return kOpCost + GraphWork(op.subgraphs[0]);
  double elements = 0;
  for (int v : op.inputs) elements = std::max(elements, Elements(g, v));
  for (int v : op.outputs) elements = std::max(elements, Elements(g, v));
  // A product's multiply-adds: each result element sums over the contracted dimension.
  if (op.kind == OpKind::kMatMul && !op.inputs.empty() && !op.outputs.empty()) {
    const std::vector<int64_t>& a = g.type(op.inputs[0]).shape;
    if (!a.empty()) return kOpCost + Elements(g, op.outputs[0]) * static_cast<double>(a.back());
  }
  if (op.kind == OpKind::kConv2D && op.inputs.size() == 2 && !op.outputs.empty()) {
    const std::vector<int64_t>& w = g.type(op.inputs[1]).shape;  // HWIO: each result sums over H W I
    if (w.size() == 4) return kOpCost + Elements(g, op.outputs[0]) * static_cast<double>(w[0] * w[1] * w[2]);
  }
  // A factorisation of [..., m, n] matrices takes about min(m, n) passes over each.
  if (mps::OpKindHostOnly(op.kind) && !op.inputs.empty()) {
    const std::vector<int64_t>& a = g.type(op.inputs[0]).shape;
    if (a.size() >= 2) return kOpCost + elements * static_cast<double>(std::min(a[a.size() - 2], a.back()));
  }
  return kOpCost + elements;
}

}  // namespace

std::optional<int64_t> StaticTripCount(const Graph& g, const Op& loop) {
  if (loop.kind != OpKind::kWhile || loop.subgraphs.size() != 2) return std::nullopt;
  const Graph& cond = loop.subgraphs[0];
  const Graph& body = loop.subgraphs[1];
  if (cond.outputs.size() != 1 || body.outputs.size() != body.inputs.size() ||
      cond.inputs.size() != loop.inputs.size() || body.inputs.size() != loop.inputs.size())
    return std::nullopt;
  // A constant inside the condition or the body, or a loop-invariant carry (the body returns it as it
  // came) that starts as a constant: the lowering passes a loop's bound and step in as such carries.
  auto invariant = [&](const Graph& sub, int value) -> std::optional<int64_t> {
    if (std::optional<int64_t> c = IntegerConstant(sub, value)) return c;
    const int j = ParameterIndex(sub, value);
    if (j < 0 || body.outputs[static_cast<size_t>(j)] != body.inputs[static_cast<size_t>(j)]) return std::nullopt;
    return IntegerConstant(g, loop.inputs[static_cast<size_t>(j)]);
  };
  const Op* test = Producer(cond, ThroughReshapes(cond, cond.outputs[0]));
  if (!test || test->inputs.size() != 2) return std::nullopt;
  OpKind cmp = test->kind;
  int counter = ParameterIndex(cond, test->inputs[0]);
  std::optional<int64_t> limit = invariant(cond, test->inputs[1]);
  if (counter < 0 || !limit) {  // `limit cmp counter`: the mirrored comparison of the counter
    counter = ParameterIndex(cond, test->inputs[1]);
    limit = invariant(cond, test->inputs[0]);
    cmp = cmp == OpKind::kLessThan               ? OpKind::kGreaterThan
          : cmp == OpKind::kLessThanOrEqualTo    ? OpKind::kGreaterThanOrEqualTo
          : cmp == OpKind::kGreaterThan          ? OpKind::kLessThan
          : cmp == OpKind::kGreaterThanOrEqualTo ? OpKind::kLessThanOrEqualTo
                                                 : cmp;
  }
  if (counter < 0 || !limit) return std::nullopt;
  const size_t k = static_cast<size_t>(counter);
  const std::optional<int64_t> start = IntegerConstant(g, loop.inputs[k]);
  if (!start) return std::nullopt;
  // The body's next counter: the counter plus (or minus) a constant.
  const Op* next = Producer(body, ThroughReshapes(body, body.outputs[k]));
  if (!next || next->inputs.size() != 2 || (next->kind != OpKind::kAdd && next->kind != OpKind::kSubtract))
    return std::nullopt;
  std::optional<int64_t> step;
  if (ParameterIndex(body, next->inputs[0]) == counter) step = invariant(body, next->inputs[1]);
  if (!step && next->kind == OpKind::kAdd && ParameterIndex(body, next->inputs[1]) == counter)
    step = invariant(body, next->inputs[0]);
  if (!step) return std::nullopt;
  if (next->kind == OpKind::kSubtract) {
    if (*step == std::numeric_limits<int64_t>::min()) return std::nullopt;
    step = -*step;
  }
  return Iterations(cmp, *start, *step, *limit);
}

double EstimateWork(const Graph& graph) { return GraphWork(graph); }

}  // namespace jmp::exec

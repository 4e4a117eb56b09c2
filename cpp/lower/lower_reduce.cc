// reduce: MPSGraph has no reduction with an arbitrary body, so the body is recognised: each result
// combined by one of add/multiply/maximum/minimum/and/or, or the (value, index) pair argmax/argmin
// JAX emits; other bodies are applied to halves of the operands, log2(n) times (TreeReduce). Complex
// products, which MPSGraph's product reduction does not take, are pairwise products of halves too.
#include <algorithm>
#include <set>

#include "lower/lower_context.h"
#include "lower/lower_order.h"

namespace jmp::mps {

namespace {

struct Monoid {
  OpKind reduction;
  OpKind combine;
  double identity;
};

bool MonoidFor(const std::string& name, DType t, Monoid* m) {
  bool b = t == DType::kBool;
  if (name == "stablehlo.add") {
    *m = b ? Monoid{OpKind::kReductionOr, OpKind::kLogicalOr, 0} : Monoid{OpKind::kReductionSum, OpKind::kAdd, 0};
  } else if (name == "stablehlo.multiply") {
    *m = b ? Monoid{OpKind::kReductionAnd, OpKind::kLogicalAnd, 1}
           : Monoid{OpKind::kReductionProduct, OpKind::kMultiply, 1};
  } else if (name == "stablehlo.maximum") {
    *m = b ? Monoid{OpKind::kReductionOr, OpKind::kLogicalOr, 0}
           : Monoid{OpKind::kReductionMaximum, OpKind::kMaximum, LowestValue(t)};
  } else if (name == "stablehlo.minimum") {
    *m = b ? Monoid{OpKind::kReductionAnd, OpKind::kLogicalAnd, 1}
           : Monoid{OpKind::kReductionMinimum, OpKind::kMinimum, HighestValue(t)};
  } else if (name == "stablehlo.and" && b) {
    *m = Monoid{OpKind::kReductionAnd, OpKind::kLogicalAnd, 1};
  } else if (name == "stablehlo.or" && b) {
    *m = Monoid{OpKind::kReductionOr, OpKind::kLogicalOr, 0};
  } else {
    return false;
  }
  if (IsComplex(t) && m->reduction != OpKind::kReductionSum && m->reduction != OpKind::kReductionProduct) return false;
  return true;
}

Shape KeptShape(const Shape& in, const std::vector<int64_t>& axes) {
  Shape kept = in;
  for (int64_t a : axes) kept[static_cast<size_t>(a)] = 1;
  return kept;
}

// The product of complex x over axes, as [kept, reduced] halved log2(n) times (an odd length first
// gets a factor 1): Multiply is listed for complex types, ReductionProduct is not.
int ComplexProduct(LowerContext& cx, int x, const std::vector<int64_t>& axes, const Shape& out) {
  const Shape in = cx.ShapeOf(x);
  const DType t = cx.DTypeOf(x);
  std::vector<int64_t> perm;
  int64_t kept = 1, n = 1;
  for (int64_t d = 0; d < static_cast<int64_t>(in.size()); ++d)
    if (std::find(axes.begin(), axes.end(), d) == axes.end()) {
      perm.push_back(d);
      kept *= in[static_cast<size_t>(d)];
    }
  for (int64_t a : axes) {
    perm.push_back(a);
    n *= in[static_cast<size_t>(a)];
  }
  int y = cx.Reshape(cx.Transpose(x, perm), {kept, n});
  while (n > 1) {
    if (n % 2) {
      y = cx.Emit(OpKind::kConcat, {y, cx.Splat(t, {kept, 1}, 1)}, t, {kept, n + 1}, AxisAttrs{1});
      ++n;
    }
    int64_t half = n / 2;
    y = cx.Binary(OpKind::kMultiply, cx.Slice(y, {0, 0}, {kept, half}), cx.Slice(y, {0, half}, {kept, n}));
    n = half;
  }
  return cx.Reshape(y, out);
}

// Reduces x over axes with the monoid and folds in init (skipped when init is the identity).
int ReduceWith(LowerContext& cx, int x, int init, const Monoid& m, const std::vector<int64_t>& axes, const Shape& out) {
  const Shape in = cx.ShapeOf(x);
  DType t = cx.DTypeOf(x);
  bool empty = false;
  for (int64_t a : axes) empty |= in[static_cast<size_t>(a)] == 0;
  if (empty) return cx.BroadcastTo(init, out);
  int r = x;
  if (!axes.empty() && IsComplex(t) && m.reduction == OpKind::kReductionProduct) {
    r = ComplexProduct(cx, x, axes, out);
  } else if (!axes.empty() && (m.reduction == OpKind::kReductionMaximum || m.reduction == OpKind::kReductionMinimum)) {
    int ordered = ToOrdered(cx, x);
    int reduced = cx.Emit(m.reduction, {ordered}, cx.DTypeOf(ordered), KeptShape(in, axes), AxesAttrs{axes});
    r = FromOrdered(cx, cx.Reshape(reduced, out), t);
  } else if (!axes.empty()) {
    r = cx.Reshape(cx.Emit(m.reduction, {x}, t, KeptShape(in, axes), AxesAttrs{axes}), out);
  }
  double init_value;
  if (cx.KnownSplat(init, &init_value) && init_value == m.identity && !IsComplex(t)) {
    if (m.reduction == OpKind::kReductionSum && !axes.empty() && cx.partitioning().num_devices() > 1)
      cx.RecordSum(r, {x, axes});
    return r;
  }
  return cx.Binary(m.combine, r, cx.BroadcastTo(init, out));
}

const shlo::Op* Producer(const shlo::Block& body, int value) {
  for (const shlo::Op& op : body.ops)
    for (int r : op.results)
      if (r == value) return &op;
  return nullptr;
}

std::string BodyOps(const shlo::Block& body) {
  std::string s;
  for (const shlo::Op& op : body.ops) s += (s.empty() ? "" : ", ") + op.name;
  return s;
}

// JAX's argmax/argmin body over (value, index) pairs: it picks by a GT (argmax) or LT (argmin)
// compare of the two values, prefers NaN and breaks ties by the smaller index — exactly
// ReductionArgMaximum/Minimum's rule (op_kinds.def).
bool MatchArgReduce(const shlo::Block& body, OpKind* arg_kind, OpKind* value_kind) {
  if (body.args.size() != 4) return false;
  for (const shlo::Op& op : body.ops) {
    if (op.name != "stablehlo.compare" || op.operands.size() != 2) continue;
    if (op.operands[0] != body.args[0] || op.operands[1] != body.args[2]) continue;
    const shlo::Attr* dir = op.Find("comparison_direction");
    if (!dir) continue;
    if (dir->s == "GT") {
      *arg_kind = OpKind::kReductionArgMaximum;
      *value_kind = OpKind::kReductionMaximum;
      return true;
    }
    if (dir->s == "LT") {
      *arg_kind = OpKind::kReductionArgMinimum;
      *value_kind = OpKind::kReductionMinimum;
      return true;
    }
  }
  return false;
}

// Any other body of plain scalar code (bitwise and/or/xor on integers, complex products, the
// compare-and-select bodies of complex max/min): the reduced axes moved last and flattened, then
// halved log2(K) times by the body applied to the two halves (an odd element carried along), and the
// init value folded in last, as the accumulator XLA starts from. Exact for associative and
// commutative bodies; others get a valid schedule that XLA may not share.
StatusOr<std::vector<int>> TreeReduce(LowerContext& cx, const shlo::Block& body, const std::vector<int>& inputs,
                                      const std::vector<int>& inits, const std::vector<int64_t>& axes) {
  const size_t n = inputs.size();
  for (const shlo::Op& op : body.ops)
    if (!op.regions.empty()) return cx.Unsupported("reduce body with nested regions");
  const Shape in = cx.ShapeOf(inputs[0]);
  std::vector<int64_t> perm;
  Shape kept;
  int64_t k = 1;
  for (size_t d = 0; d < in.size(); ++d)
    if (!std::binary_search(axes.begin(), axes.end(), static_cast<int64_t>(d))) {
      perm.push_back(static_cast<int64_t>(d));
      kept.push_back(in[d]);
    }
  for (int64_t a : axes) {
    perm.push_back(a);
    k *= in[static_cast<size_t>(a)];
  }
  std::vector<int> acc(n);
  for (size_t i = 0; i < n; ++i) acc[i] = cx.BroadcastTo(inits[i], kept);
  if (k == 0) return acc;
  Shape flat = kept;
  flat.push_back(k);
  std::vector<int> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = cx.Reshape(cx.Transpose(inputs[i], perm), flat);
  const size_t last = kept.size();
  auto part = [&](int x, int64_t begin, int64_t end) {
    Shape starts(flat.size(), 0), ends = cx.ShapeOf(x);
    starts[last] = begin;
    ends[last] = end;
    return cx.Slice(x, starts, ends);
  };
  for (int64_t len = k; len > 1; len = (len + 1) / 2) {
    int64_t half = len / 2;
    std::vector<int> args;
    for (size_t i = 0; i < n; ++i) args.push_back(part(v[i], 0, half));
    for (size_t i = 0; i < n; ++i) args.push_back(part(v[i], half, 2 * half));
    JMP_ASSIGN_OR_RETURN(std::vector<int> r, cx.LowerBlockInline(body, args));
    if (r.size() != n) return cx.Unsupported("reduce body returns the wrong number of values");
    for (size_t i = 0; i < n; ++i) {
      if (len % 2) {
        int tail = part(v[i], 2 * half, len);
        Shape joined = cx.ShapeOf(r[i]);
        joined[last] += 1;
        r[i] = cx.Emit(OpKind::kConcat, {r[i], tail}, cx.DTypeOf(r[i]), joined, AxisAttrs{static_cast<int64_t>(last)});
      }
      v[i] = r[i];
    }
  }
  std::vector<int> args = acc;
  for (size_t i = 0; i < n; ++i) args.push_back(cx.Reshape(v[i], kept));
  return cx.LowerBlockInline(body, args);
}

Status Reduce(LowerContext& cx) {
  const shlo::Op& op = cx.op();
  size_t n = op.operands.size() / 2;
  if (n == 0 || op.operands.size() != 2 * n || op.results.size() != n) return cx.Unsupported("malformed reduce");
  JMP_ASSIGN_OR_RETURN(std::vector<int64_t> axes, cx.IntsAttr("dimensions"));
  std::sort(axes.begin(), axes.end());
  if (op.regions.size() != 1 || op.regions[0].blocks.size() != 1) return cx.Unsupported("reduce without a body");
  const shlo::Block& body = op.regions[0].blocks[0];
  if (body.ops.empty() || body.args.size() != 2 * n) return cx.Unsupported("malformed reduce body");
  const shlo::Op& ret = body.ops.back();
  std::vector<int> inputs(n), inits(n);
  for (size_t i = 0; i < n; ++i) {
    JMP_ASSIGN_OR_RETURN(inputs[i], cx.In(i));
    JMP_ASSIGN_OR_RETURN(inits[i], cx.In(n + i));
  }
  for (int64_t a : axes)
    if (a < 0 || a >= static_cast<int64_t>(cx.ShapeOf(inputs[0]).size()))
      return cx.Unsupported("reduce dimension out of range");

  // Each result combined on its own by one elementwise op.
  bool independent = ret.operands.size() == n;
  std::vector<Monoid> monoids(n);
  for (size_t i = 0; i < n && independent; ++i) {
    const shlo::Op* p = Producer(body, ret.operands[i]);
    independent = p && p->operands.size() == 2 &&
                  ((p->operands[0] == body.args[i] && p->operands[1] == body.args[n + i]) ||
                   (p->operands[0] == body.args[n + i] && p->operands[1] == body.args[i])) &&
                  MonoidFor(p->name, cx.DTypeOf(inputs[i]), &monoids[i]);
  }
  if (independent) {
    for (size_t i = 0; i < n; ++i)
      cx.Bind(i, ReduceWith(cx, inputs[i], inits[i], monoids[i], axes, cx.OutType(i).shape));
    return Status::Ok();
  }

  OpKind arg_kind, value_kind;
  if (n == 2 && axes.size() == 1 && MatchArgReduce(body, &arg_kind, &value_kind) &&
      cx.IsIotaAlong(inputs[1], axes[0]) && !IsComplex(cx.DTypeOf(inputs[0]))) {
    // Ranked as an Ordered type (bools, as in jnp.argmax of a mask, as 0/1 integers: false < true).
    const DType value_type = cx.DTypeOf(inputs[0]);
    int ranked = ToOrdered(cx, inputs[0]);
    const Shape in = cx.ShapeOf(inputs[0]);
    const Shape& out = cx.OutType(0).shape;
    if (in[static_cast<size_t>(axes[0])] == 0) {
      cx.Bind(0, cx.BroadcastTo(inits[0], out));
      cx.Bind(1, cx.BroadcastTo(inits[1], out));
      return Status::Ok();
    }
    Shape kept = KeptShape(in, axes);
    int values = cx.Emit(value_kind, {ranked}, cx.DTypeOf(ranked), kept, AxesAttrs{axes});
    int value = FromOrdered(cx, cx.Reshape(values, out), value_type);
    int indices = cx.Emit(arg_kind, {ranked}, DType::kI32, kept, AxisAttrs{axes[0]});
    int index = cx.Cast(cx.Reshape(indices, out), cx.OutType(1).dtype);
    cx.Bind(0, value);
    cx.Bind(1, index);
    return Status::Ok();
  }
  JMP_ASSIGN_OR_RETURN(std::vector<int> results, TreeReduce(cx, body, inputs, inits, axes));
  for (size_t i = 0; i < n; ++i) {
    if (cx.ShapeOf(results[i]) != cx.OutType(i).shape)
      return cx.Unsupported("reduce body not recognised (" + BodyOps(body) + ")");
    cx.Bind(i, results[i]);
  }
  return Status::Ok();
}

}  // namespace

void RegisterReduceRules(std::map<std::string, LowerRule>& r) { RegisterRule(r, "stablehlo.reduce", &Reduce); }

}  // namespace jmp::mps

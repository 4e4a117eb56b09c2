// The stand-in's recording core: tensors and scopes, the rules every call shares (usable operands,
// accepted and well-formed types) and the ops a call emits into the current scope.
#include "exec/standin/standin_graph.h"

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "exec/standin/standin_dtypes.h"
#include "support/dtype.h"

namespace jmp::exec::standin {

mps::TensorType MpsType(const ShapedType& t) {
  auto d = HostDType(t.dataType);
  return mps::TensorType{d.ok() ? *d : DType::kF32, t.shape};
}

int64_t WrapAxis(int64_t axis, size_t rank) {
  const int64_t r = static_cast<int64_t>(rank);
  if (axis < 0) axis += r;
  return axis >= 0 && axis < r ? axis : -1;
}

bool BroadcastShapes(const Shape& a, const Shape& b, Shape* out) {
  const size_t rank = std::max(a.size(), b.size());
  Shape r(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t x = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t y = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (x != y && x != 1 && y != 1) return false;
    r[i] = x == 1 ? y : x;
  }
  *out = std::move(r);
  return true;
}

std::string Join(const Shape& v) { return ShapeString(v); }

Tensor* StandinGraph::NewTensor(Scope* scope, int value, const ShapedType& type) {
  tensors_.push_back(std::make_unique<Tensor>());
  Tensor* t = tensors_.back().get();
  t->scope = scope;
  t->value = value;
  t->type = type;
  return t;
}

Tensor* StandinGraph::Poison(const ShapedType& type) {
  Scope* s = stack_.back();
  Tensor* t = NewTensor(s, s->graph.AddValue(MpsType(type).dtype, type.shape), type);
  t->poisoned = true;
  return t;
}

std::string StandinGraph::Describe(const std::string& call, const Tensors& operands) const {
  std::string s = call + " on (";
  for (size_t i = 0; i < operands.size(); ++i)
    s += (i ? ", " : "") + (operands[i] ? TypeString(operands[i]->type) : std::string("nil"));
  return s + ")";
}

void StandinGraph::Record(Status s) {
  if (first_error_.ok()) first_error_ = std::move(s);
}

Tensor* StandinGraph::Reject(const std::string& call, const Tensors& operands, const std::string& rule,
                             const ShapedType& type) {
  Record(Violation(Describe(call, operands) + ": " + rule));
  return Poison(type);
}

Tensor* StandinGraph::Unsupport(const std::string& call, const Tensors& operands, const std::string& what,
                                const ShapedType& type) {
  Record(Unsupported(Describe(call, operands) + ": " + what));
  return Poison(type);
}

bool StandinGraph::Usable(const std::string& call, const Tensors& operands) {
  for (Tensor* t : operands) {
    if (!t) {
      Record(Violation(Describe(call, operands) + ": a nil tensor"));
      return false;
    }
    if (t->poisoned) return false;
    if (!owned_.count(t->scope) && !OwnsScope(t->scope)) {
      Record(Violation(Describe(call, operands) + ": a tensor of another graph"));
      return false;
    }
    if (!t->scope->open) {
      Record(Violation(Describe(call, operands) + ": a tensor of a block that has returned"));
      return false;
    }
  }
  return true;
}

bool StandinGraph::OwnsScope(const Scope* s) {
  for (const auto& p : scopes_)
    if (p.get() == s) {
      owned_.insert(s);
      return true;
    }
  return false;
}

bool StandinGraph::CheckNewType(const std::string& call, const Tensors& operands, const ShapedType& type) {
  auto d = HostDType(type.dataType);
  if (!d.ok()) {
    Record(Status(d.status().code(), d.status().message() + " (" + Describe(call, operands) + ")"));
    return false;
  }
  const int64_t n = ElementCount(type.shape);
  if (n <= 0) {
    Record(Violation(Describe(call, operands) + ": a " + (n == 0 ? "zero-element" : "negative-dimension") + " tensor " +
                     TypeString(type) + " (MPSGraph never takes or makes one)"));
    return false;
  }
  return true;
}

bool StandinGraph::CheckAccepted(const std::string& selector, const std::string& call, const Tensors& operands) {
  const AcceptedTypes* row = AcceptedTypesOf(selector);
  if (!row) return true;
  for (Tensor* t : operands)
    if (std::find(row->types.begin(), row->types.end(), t->type.dataType) == row->types.end()) {
      std::string list;
      for (DataType a : row->types) list += (list.empty() ? "" : ", ") + DataTypeName(a);
      Record(Violation(Describe(call, operands) + ": data type " + DataTypeName(t->type.dataType) + " is not one of " +
                       list + " (" + std::string(row->source) + ")"));
      return false;
    }
  return true;
}

bool StandinGraph::CheckIndices(const std::string& call, const Tensors& operands, Tensor* indices,
                                const AcceptedTypes& accepted) {
  if (std::find(accepted.types.begin(), accepted.types.end(), indices->type.dataType) != accepted.types.end())
    return true;
  Record(Violation(Describe(call, operands) + ": indices of data type " + DataTypeName(indices->type.dataType) + " (" +
                   std::string(accepted.source) + ")"));
  return false;
}

bool StandinGraph::SameExceptAxis(const Shape& a, const Shape& b, int64_t axis) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (static_cast<int64_t>(i) != axis && a[i] != b[i]) return false;
  return true;
}

std::optional<mps::ScatterMode> StandinGraph::ScatterModeOf(metal::ScatterMode m) {
  const auto v = static_cast<int64_t>(m);
  if (v < 0 || v > static_cast<int64_t>(metal::ScatterMode::kSet)) return std::nullopt;
  return static_cast<mps::ScatterMode>(v);  // both enums follow MPSGraphScatterMode's order
}

std::optional<std::vector<int64_t>> StandinGraph::WrapAxes(const std::string& call, Tensor* t, const Shape& axes) {
  std::set<int64_t> wrapped;
  for (int64_t a : axes) {
    const int64_t w = WrapAxis(a, t->type.shape.size());
    if (w < 0) {
      Record(Violation(Describe(call, {t}) + ": axis " + std::to_string(a) + " outside the rank"));
      return std::nullopt;
    }
    wrapped.insert(w);
  }
  return std::vector<int64_t>(wrapped.begin(), wrapped.end());
}

StatusOr<int> StandinGraph::Capture(Scope* s, Tensor* t) {
  if (t->scope == s) return t->value;
  if (!s->parent) return Violation("a tensor of a block used outside it");
  if (!s->captures_allowed)
    return Unsupported("a while block reads a tensor made outside it (only its arguments are supported)");
  JMP_ASSIGN_OR_RETURN(int outer, Capture(s->parent, t));
  for (const auto& [o, local] : s->captures)
    if (o == outer) return local;
  const int local = s->graph.AddValue(MpsType(t->type).dtype, t->type.shape);
  s->captures.emplace_back(outer, local);
  return local;
}

std::optional<std::vector<int>> StandinGraph::Locals(const std::string& call, const Tensors& operands) {
  std::vector<int> ids;
  for (Tensor* t : operands) {
    auto v = Capture(stack_.back(), t);
    if (!v.ok()) {
      Record(Status(v.status().code(), v.status().message() + " (" + Describe(call, operands) + ")"));
      return std::nullopt;
    }
    ids.push_back(*v);
  }
  return ids;
}

int StandinGraph::EmitLocal(OpKind kind, std::vector<int> inputs, mps::OpAttrs attrs, const mps::TensorType& out) {
  mps::Graph& g = stack_.back()->graph;
  const int v = g.AddValue(out.dtype, out.shape);
  mps::Op op{kind, std::move(inputs), {v}, std::move(attrs), {}, "stand-in"};
  g.ops.push_back(std::move(op));
  return v;
}

int StandinGraph::BroadcastLocal(int value, const ShapedType& from, const Shape& to) {
  if (from.shape == to) return value;
  const DType d = MpsType(from).dtype;
  if (from.shape.size() < to.size()) {
    Shape padded(to.size() - from.shape.size(), 1);
    padded.insert(padded.end(), from.shape.begin(), from.shape.end());
    value = EmitLocal(OpKind::kReshape, {value}, mps::NoAttrs{}, {d, padded});
    if (padded == to) return value;
  }
  return EmitLocal(OpKind::kBroadcast, {value}, mps::NoAttrs{}, {d, to});
}

int StandinGraph::Int32Indices(int value, const ShapedType& type) {
  if (type.dataType == DataType::kInt32) return value;
  return EmitLocal(OpKind::kCast, {value}, mps::NoAttrs{}, {DType::kI32, type.shape});
}

Tensors StandinGraph::Emit(const std::string& call, OpKind kind, const std::vector<int>& inputs, mps::OpAttrs attrs,
                           const std::vector<ShapedType>& outs) {
  for (const ShapedType& o : outs)
    if (!CheckNewType(call, {}, o)) {
      Tensors r;
      for (const ShapedType& p : outs) r.push_back(Poison(p));
      return r;
    }
  mps::Graph& g = stack_.back()->graph;
  mps::Op op{kind, inputs, {}, std::move(attrs), {}, "stand-in"};
  Tensors r;
  for (const ShapedType& o : outs) {
    op.outputs.push_back(g.AddValue(MpsType(o).dtype, o.shape));
    r.push_back(NewTensor(stack_.back(), op.outputs.back(), o));
  }
  g.ops.push_back(std::move(op));
  return r;
}

Tensor* StandinGraph::EmitOne(const std::string& call, OpKind kind, const Tensors& operands, mps::OpAttrs attrs,
                              const ShapedType& out) {
  auto in = Locals(call, operands);
  if (!in) return Poison(out);
  return Emit(call, kind, *in, std::move(attrs), {out})[0];
}

Tensor* StandinGraph::EmitBroadcast(const std::string& call, OpKind kind, const Tensors& operands,
                                    const ShapedType& out) {
  if (!CheckNewType(call, operands, out)) return Poison(out);
  auto in = Locals(call, operands);
  if (!in) return Poison(out);
  std::vector<int> ids;
  for (size_t i = 0; i < operands.size(); ++i) ids.push_back(BroadcastLocal((*in)[i], operands[i]->type, out.shape));
  return Emit(call, kind, ids, mps::NoAttrs{}, {out})[0];
}

Scope* StandinGraph::OpenScope(bool captures_allowed) {
  scopes_.push_back(std::make_unique<Scope>());
  Scope* s = scopes_.back().get();
  s->parent = stack_.back();
  s->captures_allowed = captures_allowed;
  return s;
}

std::unique_ptr<metal::Graph> NewStandinGraph() { return std::make_unique<StandinGraph>(); }

}  // namespace jmp::exec::standin

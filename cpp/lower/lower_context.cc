#include "lower/lower_context.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace jmp::mps {

namespace {

constexpr int kMaxInlineDepth = 64;
// Constants up to this size are copied into a region that reads them (scalars, a few lanes of shifts).
constexpr size_t kCopiedConstantBytes = 64;

}  // namespace

void RegisterRule(std::map<std::string, LowerRule>& rules, const char* name, LowerRule rule) { rules[name] = rule; }

// ---- scopes and values

StatusOr<int> LowerContext::LookupIn(Scope* s, int shlo_id) {
  JMP_ASSIGN_OR_RETURN(int v, LookupUnbroadcast(s, shlo_id));
  if (!s->broadcast_scalars || s->lanes.empty() || !s->graph->type(v).shape.empty()) return v;
  // A scalar read by a block lowered on lanes: broadcast once, in the block's graph, and remembered
  // (only in this scope: the parent keeps its scalar).
  Scope* outer = SwapScope(s);
  int lanes = BroadcastTo(v, s->lanes);
  SwapScope(outer);
  s->env[shlo_id] = lanes;
  return lanes;
}

StatusOr<int> LowerContext::LookupUnbroadcast(Scope* s, int shlo_id) {
  auto it = s->env.find(shlo_id);
  if (it != s->env.end()) return it->second;
  if (!s->parent) return InvalidArgument("value %" + std::to_string(shlo_id) + " is used before it is defined");
  JMP_ASSIGN_OR_RETURN(int outer, LookupIn(s->parent, shlo_id));
  if (s->shares_parent_graph) return outer;
  TensorType type = s->parent->graph->type(outer);
  // A small constant is copied into the region rather than captured: JAX's serializer hoists a loop
  // body's constants out of it, and a captured one is a parameter no executor can fold, so a loop
  // broadcast its scalar factors again on every iteration.
  int inner;
  const Op* constant = ConstantOp(s->parent->graph, outer);
  if (constant && type.ByteSize() <= kCopiedConstantBytes) {
    Scope* saved = SwapScope(s);
    inner = ConstantData(type.dtype, type.shape, constant->Attrs<ConstantAttrs>().data);
    SwapScope(saved);
  } else {
    inner = s->graph->AddValue(type.dtype, type.shape);
    s->graph->inputs.push_back(inner);
    s->captures.push_back({outer, inner});
  }
  s->env[shlo_id] = inner;
  auto splat = splats_.find({s->parent->graph, outer});
  if (splat != splats_.end()) splats_[{s->graph, inner}] = splat->second;
  return inner;
}

StatusOr<int> LowerContext::Value(int shlo_id) { return LookupIn(scope_, shlo_id); }

StatusOr<std::vector<int>> LowerContext::Values(const std::vector<int>& shlo_ids) {
  std::vector<int> values;
  values.reserve(shlo_ids.size());
  for (int id : shlo_ids) {
    JMP_ASSIGN_OR_RETURN(int v, Value(id));
    values.push_back(v);
  }
  return values;
}

const shlo::Type& LowerContext::ShloType(int shlo_id) const {
  return scope_->func->value_types.at(static_cast<size_t>(shlo_id));
}

void LowerContext::Bind(size_t result_index, int mps_value) { scope_->env[op_->results.at(result_index)] = mps_value; }

Status LowerContext::Unsupported(const std::string& what) const {
  std::ostringstream os;
  os << what;
  if (op_) {
    os << ": '" << op_->name << "'";
    if (!op_->operands.empty()) {
      os << " on ";
      for (size_t i = 0; i < op_->operands.size(); ++i) os << (i ? ", " : "") << ShloType(op_->operands[i]).ToString();
    }
    if (!op_->results.empty()) {
      os << " -> ";
      for (size_t i = 0; i < op_->results.size(); ++i) os << (i ? ", " : "") << ShloType(op_->results[i]).ToString();
    }
    if (!op_->location.empty()) os << " at " << op_->location;
  }
  return Unimplemented(os.str());
}

StatusOr<const shlo::Op*> LowerContext::LowerBlock(const shlo::Block& block) {
  for (const shlo::Op& op : block.ops) {
    if (op.name == "func.return" || op.name == "stablehlo.return") return &op;
    JMP_RETURN_IF_ERROR(LowerOp(op));
  }
  return InvalidArgument("a block ends without a terminator");
}

StatusOr<Graph> LowerContext::BuildSubgraph(const std::vector<TensorType>& params, const SubgraphBuilder& build,
                                            std::vector<int>* captures) {
  Graph sub;
  Scope s;
  s.graph = &sub;
  s.func = scope_->func;
  s.parent = scope_;
  std::vector<int> param_values;
  for (const TensorType& t : params) {
    int v = sub.AddValue(t.dtype, t.shape);
    sub.inputs.push_back(v);
    param_values.push_back(v);
  }
  const shlo::Op* saved_op = op_;
  Scope* outer = SwapScope(&s);
  StatusOr<std::vector<int>> outputs = build(param_values);
  SwapScope(outer);
  op_ = saved_op;
  ForgetFactsOf(&sub);
  if (!outputs.ok()) return outputs.status();
  sub.outputs = *outputs;
  captures->clear();
  for (auto& [outer_value, inner] : s.captures) captures->push_back(outer_value);
  return sub;
}

void LowerContext::ForgetFactsOf(const Graph* sub) {
  auto forget = [sub](auto& facts) {
    for (auto it = facts.begin(); it != facts.end();) it = it->first.first == sub ? facts.erase(it) : std::next(it);
  };
  forget(splats_);
  forget(iota_axis_);
  forget(one_source_);
  forget(constant_at_);
  forget(transpose_of_);
}

std::vector<int> UnionOf(const std::vector<int>& a, const std::vector<int>& b) {
  std::vector<int> u = a;
  for (int v : b)
    if (std::find(u.begin(), u.end(), v) == u.end()) u.push_back(v);
  return u;
}

void AlignCaptures(Graph& sub, size_t fixed, const std::vector<int>& own, const std::vector<int>& all,
                   const std::vector<TensorType>& all_types) {
  std::vector<int> inputs(sub.inputs.begin(), sub.inputs.begin() + static_cast<ptrdiff_t>(fixed));
  for (size_t i = 0; i < all.size(); ++i) {
    auto it = std::find(own.begin(), own.end(), all[i]);
    if (it != own.end()) {
      inputs.push_back(sub.inputs[fixed + static_cast<size_t>(it - own.begin())]);
    } else {
      inputs.push_back(sub.AddValue(all_types[i].dtype, all_types[i].shape));
    }
  }
  sub.inputs = std::move(inputs);
}

std::vector<int> EmitWhile(LowerContext& cx, const std::vector<int>& init, Graph cond,
                           const std::vector<int>& cond_caps, Graph body, const std::vector<int>& body_caps) {
  const std::vector<int> caps = UnionOf(cond_caps, body_caps);
  std::vector<TensorType> cap_types;
  for (int v : caps) cap_types.push_back(cx.Type(v));
  AlignCaptures(cond, init.size(), cond_caps, caps, cap_types);
  AlignCaptures(body, init.size(), body_caps, caps, cap_types);
  for (size_t i = 0; i < caps.size(); ++i) body.outputs.push_back(body.inputs[init.size() + i]);
  std::vector<int> inputs = init;
  inputs.insert(inputs.end(), caps.begin(), caps.end());
  std::vector<TensorType> out_types;
  for (int v : inputs) out_types.push_back(cx.Type(v));
  Op w = cx.NewOp(OpKind::kWhile, inputs);
  w.subgraphs.push_back(std::move(cond));
  w.subgraphs.push_back(std::move(body));
  std::vector<int> outputs = cx.EmitOp(std::move(w), out_types);
  outputs.resize(init.size());
  return outputs;
}

StatusOr<Graph> LowerContext::LowerRegionToSubgraph(const shlo::Region& region, const std::vector<TensorType>& params,
                                                    std::vector<int>* captures) {
  if (region.blocks.size() != 1) return Unsupported("regions with several blocks are not supported");
  const shlo::Block& block = region.blocks[0];
  if (block.args.size() != params.size())
    return InvalidArgument("region has " + std::to_string(block.args.size()) + " arguments, expected " +
                           std::to_string(params.size()));
  return BuildSubgraph(
      params,
      [&](const std::vector<int>& values) -> StatusOr<std::vector<int>> {
        for (size_t i = 0; i < values.size(); ++i) BindShlo(block.args[i], values[i]);
        JMP_ASSIGN_OR_RETURN(const shlo::Op* terminator, LowerBlock(block));
        return Values(terminator->operands);
      },
      captures);
}

StatusOr<std::vector<int>> LowerContext::LowerBlockInline(const shlo::Block& block, const std::vector<int>& args) {
  if (block.args.size() != args.size()) return InvalidArgument("inline block takes a different number of arguments");
  Scope s;
  s.graph = scope_->graph;
  s.func = scope_->func;
  s.parent = scope_;
  s.shares_parent_graph = true;
  s.broadcast_scalars = true;
  for (size_t i = 0; i < args.size(); ++i) {
    const Shape& shape = ShapeOf(args[i]);
    if (i == 0)
      s.lanes = shape;
    else if (shape != s.lanes)
      return InvalidArgument("inline block arguments of different shapes");
    s.env[block.args[i]] = args[i];
  }
  const shlo::Op* saved_op = op_;
  Scope* outer = SwapScope(&s);
  StatusOr<const shlo::Op*> terminator = LowerBlock(block);
  StatusOr<std::vector<int>> results = terminator.status();
  if (terminator.ok()) results = Values((*terminator)->operands);
  SwapScope(outer);
  op_ = saved_op;
  return results;
}

StatusOr<std::vector<int>> LowerContext::InlineCall(const shlo::Func& callee, const std::vector<int>& args) {
  if (inline_depth_ >= kMaxInlineDepth) return Unsupported("calls nest too deeply (recursion?)");
  if (callee.body.blocks.size() != 1) return Unsupported("functions with several blocks are not supported");
  const shlo::Block& block = callee.body.blocks[0];
  if (block.args.size() != args.size())
    return InvalidArgument("call to @" + callee.name + " passes " + std::to_string(args.size()) +
                           " arguments, it takes " + std::to_string(block.args.size()));
  Scope s;
  s.graph = scope_->graph;
  s.func = &callee;
  for (size_t i = 0; i < args.size(); ++i) s.env[block.args[i]] = args[i];
  const shlo::Op* saved_op = op_;
  Scope* outer = SwapScope(&s);
  ++inline_depth_;
  StatusOr<const shlo::Op*> terminator = LowerBlock(block);
  StatusOr<std::vector<int>> results = terminator.status();
  if (terminator.ok()) {
    op_ = *terminator;
    results = Values((*terminator)->operands);
  }
  --inline_depth_;
  SwapScope(outer);
  op_ = saved_op;
  return results;
}

Status LowerContext::LowerOp(const shlo::Op& op) {
  op_ = &op;
  for (const auto* ids : {&op.operands, &op.results}) {
    for (int id : *ids) {
      const shlo::Type& t = ShloType(id);
      if (t.kind == shlo::Type::Kind::kTuple) return Unsupported("tuple values are not supported");
    }
  }
  const auto& rules = LowerRules();
  // "composite:" and "custom_call:" keys are reached only through their ops' own rules; an op whose
  // (untrusted) name looks like one must not reach them directly.
  auto it = op.name.find(':') == std::string::npos ? rules.find(op.name) : rules.end();
  if (it == rules.end()) return Unsupported("unsupported op");
  Status status = it->second(*this);
  op_ = &op;
  if (status.ok() && !failure_.ok()) {
    status = failure_;
    failure_ = Status::Ok();
  }
  return status;
}

}  // namespace jmp::mps

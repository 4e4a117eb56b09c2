// A manual computation's body unrolled over its copies, op by op: loops, branches and calls that hold
// a collective are lowered for every copy together, and nested manual computations unroll in turn.
#include <algorithm>
#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "lower/lower_context.h"
#include "lower/lower_manual.h"

namespace jmp::mps::manual {

namespace {

bool IsCollective(const std::string& name) {
  return name == "stablehlo.all_reduce" || name == "stablehlo.all_gather" || name == "stablehlo.reduce_scatter" ||
         name == "stablehlo.all_to_all" || name == "stablehlo.collective_permute" ||
         name == "stablehlo.collective_broadcast";
}

// Ops an op walk (OpHolds) looks for, and what a call to a function the module lacks counts as.
struct OpQuery {
  bool (*is)(const shlo::Op& op);
  bool unknown_callee;
};

bool RegionsHold(const shlo::Module& module, const std::vector<shlo::Region>& regions, const OpQuery& query, int depth);

// Whether an op, its regions or the functions it calls hold an op `query` looks for.
bool OpHolds(const shlo::Module& module, const shlo::Op& op, const OpQuery& query, int depth) {
  if (depth > 64) return true;  // too deep to say: treated as holding one (it is unrolled, or refused)
  if (query.is(op)) return true;
  if (op.name == "func.call") {
    const shlo::Attr* callee = op.Find("callee");
    const shlo::Func* f = callee ? module.FindFunc(callee->s) : nullptr;
    if (f ? RegionsHold(module, {f->body}, query, depth + 1) : query.unknown_callee) return true;
  }
  return RegionsHold(module, op.regions, query, depth + 1);
}

bool RegionsHold(const shlo::Module& module, const std::vector<shlo::Region>& regions, const OpQuery& query,
                 int depth) {
  for (const shlo::Region& region : regions)
    for (const shlo::Block& block : region.blocks)
      for (const shlo::Op& op : block.ops)
        if (OpHolds(module, op, query, depth)) return true;
  return false;
}

bool IsCollectiveOp(const shlo::Op& op) { return IsCollective(op.name); }

// A loop or an op with effects beyond its results (a custom call marked with side effects: host
// callbacks): what must not run in a branch that is not taken.
bool IsLoopOrEffect(const shlo::Op& op) {
  if (op.name == "stablehlo.while") return true;
  if (op.name != "stablehlo.custom_call") return false;
  const shlo::Attr* effects = op.Find("has_side_effect");
  return effects && effects->kind == shlo::Attr::Kind::kBool && effects->b;
}

// A call to a function the module lacks is left to the ordinary lowering, which reports it; for a branch
// that runs untaken, such a call might hold a loop or an effect.
const OpQuery kCollectives{IsCollectiveOp, /*unknown_callee=*/false};
const OpQuery kLoopsOrEffects{IsLoopOrEffect, /*unknown_callee=*/true};

}  // namespace

StatusOr<std::vector<std::vector<int>>> Unroller::Call(const shlo::Func& func,
                                                       const std::vector<std::vector<int>>& args, int depth) {
  if (func.body.blocks.size() != 1) return cx_.Unsupported("functions with several blocks are not supported");
  return Run(func, func.body.blocks[0], args, depth, {});
}

StatusOr<std::vector<std::vector<int>>> Unroller::Run(const shlo::Func& func, const shlo::Block& block,
                                                      const std::vector<std::vector<int>>& args, int depth,
                                                      const std::vector<Scope*>& outer) {
  if (depth > 64) return cx_.Unsupported("calls nest too deeply in a manual computation");
  const size_t n = copies_.device.size();
  std::vector<Scope> scopes(n);
  for (size_t c = 0; c < n; ++c) {
    scopes[c].graph = &cx_.graph();
    scopes[c].func = &func;
    scopes[c].parent = outer.empty() ? nullptr : outer[c];
    scopes[c].shares_parent_graph = !outer.empty();
    if (args[c].size() != block.args.size())
      return InvalidArgument("a manual computation's body takes another number of arguments");
    for (size_t i = 0; i < args[c].size(); ++i) scopes[c].env[block.args[i]] = args[c][i];
  }
  Scope* current = &cx_.scope();
  Status status = Block(block, scopes, depth);
  std::vector<std::vector<int>> results(n);
  for (size_t c = 0; status.ok() && c < n; ++c) {
    cx_.SwapScope(&scopes[c]);
    StatusOr<std::vector<int>> r = cx_.Values(block.ops.back().operands);
    if (!r.ok()) status = r.status();
    if (r.ok()) results[c] = std::move(*r);
  }
  cx_.SwapScope(current);
  cx_.SetManual(-1, 0);
  if (!status.ok()) return status;
  return results;
}

Status Unroller::Block(const shlo::Block& block, std::vector<Scope>& scopes, int depth) {
  if (block.ops.empty() || (block.ops.back().name != "func.return" && block.ops.back().name != "stablehlo.return" &&
                            block.ops.back().name != "sdy.return"))
    return InvalidArgument("a manual computation's body ends without a return");
  for (const shlo::Op& op : block.ops) {
    if (&op == &block.ops.back()) break;
    if (IsManualOp(op)) {
      JMP_RETURN_IF_ERROR(Nested(op, scopes, depth));
      continue;
    }
    if (IsCollective(op.name)) {
      JMP_RETURN_IF_ERROR(Collective(op, scopes));
      continue;
    }
    const bool holds = OpHolds(cx_.module(), op, kCollectives, 0);
    if (holds && op.name == "func.call") {
      JMP_RETURN_IF_ERROR(Inline(op, scopes, depth));
      continue;
    }
    if (holds && op.name == "stablehlo.while") {
      JMP_RETURN_IF_ERROR(Loop(op, scopes, depth));
      continue;
    }
    if (holds && (op.name == "stablehlo.if" || op.name == "stablehlo.case")) {
      JMP_RETURN_IF_ERROR(Branches(op, scopes, depth));
      continue;
    }
    for (size_t c = 0; c < scopes.size(); ++c) {
      cx_.SwapScope(&scopes[c]);
      cx_.SetManual(copies_.device[c], static_cast<int64_t>(copies_.device.size()));
      JMP_RETURN_IF_ERROR(cx_.LowerOp(op));
    }
  }
  return Status::Ok();
}

Status Unroller::Loop(const shlo::Op& op, std::vector<Scope>& scopes, int depth) {
  cx_.SetOp(op);
  if (op.regions.size() != 2) return cx_.Unsupported("while needs a condition and a body");
  const size_t n = scopes.size(), k = op.operands.size();
  std::vector<int> init;
  for (size_t c = 0; c < n; ++c) {
    cx_.SwapScope(&scopes[c]);
    JMP_ASSIGN_OR_RETURN(std::vector<int> values, cx_.Values(op.operands));
    init.insert(init.end(), values.begin(), values.end());
  }
  std::vector<TensorType> carried;
  for (int v : init) carried.push_back(cx_.Type(v));
  std::vector<int> cond_caps, body_caps;
  JMP_ASSIGN_OR_RETURN(Graph cond, Region(op.regions[0], scopes, carried, depth, &cond_caps));
  JMP_ASSIGN_OR_RETURN(Graph body, Region(op.regions[1], scopes, carried, depth, &body_caps));
  cx_.SwapScope(&scopes[0]);
  cx_.SetOp(op);
  if (cond.outputs.size() != n || body.outputs.size() != init.size())
    return cx_.Unsupported("while's regions return the wrong number of values");
  cond.outputs.resize(1);
  const std::vector<int> outputs = EmitWhile(cx_, init, std::move(cond), cond_caps, std::move(body), body_caps);
  for (size_t c = 0; c < n; ++c)
    for (size_t i = 0; i < k; ++i) scopes[c].env[op.results.at(i)] = outputs[c * k + i];
  return Status::Ok();
}

Status Unroller::Branches(const shlo::Op& op, std::vector<Scope>& scopes, int depth) {
  cx_.SetOp(op);
  if (op.regions.empty() || op.operands.size() != 1)
    return cx_.Unsupported("a branch needs its predicate or index and its regions");
  if (RegionsHold(cx_.module(), op.regions, kLoopsOrEffects, 0))
    return cx_.Unsupported(
        "a collective in a branch that holds a loop or a host callback, in a manual computation, "
        "is not supported");
  const size_t n = scopes.size();
  cx_.SwapScope(&scopes[0]);
  cx_.SetOp(op);
  JMP_ASSIGN_OR_RETURN(int selector, cx_.In(0));
  std::vector<Scope*> outer(n);
  for (size_t c = 0; c < n; ++c) outer[c] = &scopes[c];
  std::vector<std::vector<std::vector<int>>> results;  // per branch, per copy
  for (const shlo::Region& region : op.regions) {
    if (region.blocks.size() != 1 || !region.blocks[0].args.empty())
      return cx_.Unsupported("branch regions must have one block without arguments");
    JMP_ASSIGN_OR_RETURN(std::vector<std::vector<int>> r,
                         Run(*scopes[0].func, region.blocks[0], std::vector<std::vector<int>>(n), depth + 1, outer));
    results.push_back(std::move(r));
  }
  cx_.SwapScope(&scopes[0]);
  cx_.SetOp(op);
  // Which branch runs: if's first region when its predicate holds; case's index, the last region when
  // the index is out of range.
  const bool is_if = op.name == "stablehlo.if";
  std::vector<int> takes(op.regions.size() - 1);
  for (size_t b = 0; b + 1 < op.regions.size(); ++b)
    takes[b] = is_if ? selector
                     : cx_.Compare(OpKind::kEqual, selector, cx_.Scalar(cx_.DTypeOf(selector), static_cast<double>(b)));
  for (size_t c = 0; c < n; ++c) {
    for (size_t j = 0; j < op.results.size(); ++j) {
      int value = results.back().at(c).at(j);
      for (size_t b = op.regions.size() - 1; b-- > 0;) value = cx_.Select(takes[b], results[b].at(c).at(j), value);
      scopes[c].env[op.results[j]] = value;
    }
  }
  return Status::Ok();
}

StatusOr<Graph> Unroller::Region(const shlo::Region& region, std::vector<Scope>& scopes,
                                 const std::vector<TensorType>& params, int depth, std::vector<int>* captures) {
  if (region.blocks.size() != 1) return cx_.Unsupported("regions with several blocks are not supported");
  const size_t n = scopes.size(), k = params.size() / n;
  Graph sub;
  std::vector<int> values;
  for (const TensorType& t : params) {
    values.push_back(sub.AddValue(t.dtype, t.shape));
    sub.inputs.push_back(values.back());
  }
  // Each copy's edge of the subgraph: what copy c reads from outside becomes a parameter there.
  std::vector<Scope> edges(n);
  std::vector<Scope*> outer(n);
  std::vector<std::vector<int>> args(n);
  for (size_t c = 0; c < n; ++c) {
    edges[c].graph = &sub;
    edges[c].func = scopes[c].func;
    edges[c].parent = &scopes[c];
    outer[c] = &edges[c];
    args[c].assign(values.begin() + static_cast<std::ptrdiff_t>(c * k),
                   values.begin() + static_cast<std::ptrdiff_t>((c + 1) * k));
  }
  Scope* current = cx_.SwapScope(&edges[0]);
  StatusOr<std::vector<std::vector<int>>> results = Run(*scopes[0].func, region.blocks[0], args, depth + 1, outer);
  cx_.SwapScope(current);
  cx_.ForgetFactsOf(&sub);
  if (!results.ok()) return results.status();
  for (const std::vector<int>& r : *results) sub.outputs.insert(sub.outputs.end(), r.begin(), r.end());
  // The captured parameters in input order, an outer value read by several copies merged into one.
  std::map<int, int> outer_of;
  for (const Scope& e : edges)
    for (const auto& [outer_value, inner] : e.captures) outer_of[inner] = outer_value;
  std::map<int, int> first_inner;  // outer value -> its parameter
  std::map<int, int> merged;       // a repeated parameter -> the first one
  std::vector<int> inputs(sub.inputs.begin(), sub.inputs.begin() + static_cast<std::ptrdiff_t>(params.size()));
  captures->clear();
  for (size_t i = params.size(); i < sub.inputs.size(); ++i) {
    const int inner = sub.inputs[i];
    const int outer_value = outer_of.at(inner);
    auto [it, fresh] = first_inner.emplace(outer_value, inner);
    if (!fresh) {
      merged[inner] = it->second;
      continue;
    }
    inputs.push_back(inner);
    captures->push_back(outer_value);
  }
  sub.inputs = std::move(inputs);
  auto rename = [&merged](int& v) {
    auto it = merged.find(v);
    if (it != merged.end()) v = it->second;
  };
  for (Op& o : sub.ops)
    for (int& v : o.inputs) rename(v);
  for (int& v : sub.outputs) rename(v);
  return sub;
}

Status Unroller::Inline(const shlo::Op& op, std::vector<Scope>& scopes, int depth) {
  const shlo::Func* callee = cx_.module().FindFunc(op.Find("callee")->s);
  if (!callee) {
    cx_.SetOp(op);
    return cx_.Unsupported("call to an unknown function");
  }
  std::vector<std::vector<int>> args(scopes.size());
  for (size_t c = 0; c < scopes.size(); ++c) {
    cx_.SwapScope(&scopes[c]);
    JMP_ASSIGN_OR_RETURN(args[c], cx_.Values(op.operands));
  }
  JMP_ASSIGN_OR_RETURN(std::vector<std::vector<int>> results, Call(*callee, args, depth + 1));
  for (size_t c = 0; c < scopes.size(); ++c) {
    if (results[c].size() != op.results.size())
      return InvalidArgument("@" + callee->name + " returns the wrong number of values");
    for (size_t j = 0; j < op.results.size(); ++j) scopes[c].env[op.results[j]] = results[c][j];
  }
  return Status::Ok();
}

Status Unroller::Nested(const shlo::Op& op, std::vector<Scope>& scopes, int depth) {
  cx_.SwapScope(&scopes[0]);
  cx_.SetOp(op);
  JMP_ASSIGN_OR_RETURN(ManualOp m, ReadManualOp(cx_));
  std::vector<int> axes = axes_;
  for (int a : m.manual_axes)
    if (std::find(axes.begin(), axes.end(), a) == axes.end()) axes.push_back(a);
  JMP_ASSIGN_OR_RETURN(Copies inner, CopiesOf(m.mesh, axes));
  // Each inner copy's outer copy: the device with its coordinates on the outer axes and 0 on the others.
  const size_t n = inner.device.size();
  std::vector<int64_t> position_of(static_cast<size_t>(m.mesh.size()));
  for (int64_t p = 0; p < m.mesh.size(); ++p) position_of.at(static_cast<size_t>(m.mesh.DeviceAt(p))) = p;
  std::vector<size_t> owner(n);
  for (size_t c = 0; c < n; ++c) {
    int64_t rest = position_of.at(static_cast<size_t>(inner.device[c])), position = 0, stride = 1;
    for (size_t a = m.mesh.axis_sizes.size(); a-- > 0;) {
      const int64_t size = m.mesh.axis_sizes[a], coord = rest % size;
      rest /= size;
      if (std::find(axes_.begin(), axes_.end(), static_cast<int>(a)) != axes_.end()) position += coord * stride;
      stride *= size;
    }
    const int outer = copies_.copy_of_device.at(static_cast<size_t>(m.mesh.DeviceAt(position)));
    if (outer < 0) return cx_.Unsupported("a nested manual computation over another mesh than the one around it");
    owner[c] = static_cast<size_t>(outer);
  }
  std::vector<std::vector<int>> args(n);
  std::vector<Scope*> outer_scopes(n);
  for (size_t c = 0; c < n; ++c) {
    cx_.SwapScope(&scopes[owner[c]]);
    cx_.SetOp(op);
    outer_scopes[c] = &scopes[owner[c]];
    for (size_t i = 0; i < op.operands.size(); ++i) {
      JMP_ASSIGN_OR_RETURN(int value, cx_.In(i));
      JMP_ASSIGN_OR_RETURN(int piece, OperandPiece(cx_, m, i, value, inner.device[c]));
      args[c].push_back(piece);
    }
  }
  Unroller unroller(cx_, inner, axes);
  JMP_ASSIGN_OR_RETURN(std::vector<std::vector<int>> results,
                       m.body ? unroller.Call(*m.body, args, depth + 1)
                              : unroller.Run(*scopes[0].func, op.regions[0].blocks[0], args, depth + 1, outer_scopes));
  // Each outer copy's results from the pieces of its inner copies.
  for (size_t outer = 0; outer < scopes.size(); ++outer) {
    Copies mine;
    mine.copy_of_device.assign(inner.copy_of_device.size(), -1);
    std::vector<size_t> members;
    for (size_t c = 0; c < n; ++c)
      if (owner[c] == outer) {
        mine.copy_of_device[static_cast<size_t>(inner.device[c])] = static_cast<int>(mine.device.size());
        mine.device.push_back(inner.device[c]);
        members.push_back(c);
      }
    cx_.SwapScope(&scopes[outer]);
    cx_.SetOp(op);
    for (size_t j = 0; j < op.results.size(); ++j) {
      std::vector<int> local;
      for (size_t c : members) local.push_back(results[c].at(j));
      if (local.empty()) return cx_.Unsupported("a nested manual computation leaves a device of the outer one out");
      JMP_ASSIGN_OR_RETURN(int value, ResultFromPieces(cx_, m, j, std::move(local), mine));
      scopes[outer].env[op.results[j]] = value;
    }
  }
  return Status::Ok();
}

}  // namespace jmp::mps::manual

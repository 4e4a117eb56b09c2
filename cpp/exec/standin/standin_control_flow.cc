// The stand-in's control-flow blocks: a while's before and after blocks and an if's two branches, each
// recorded in a scope of its own and checked against the rules of MPSGraph's header.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "exec/standin/standin_graph.h"
#include "support/dtype.h"

namespace jmp::exec::standin {

Tensors StandinGraph::whileWithInitialInputs(const Tensors& initial, const WhileBeforeBlock& before,
                                             const WhileAfterBlock& after) {
  const std::string call = "whileWithInitialInputs:before:after:";
  auto poisons = [&] {
    Tensors r;
    for (Tensor* t : initial) r.push_back(Poison({ShapeOf(t), TypeOf(t)}));
    return r;
  };
  if (initial.empty()) {
    Record(Violation(call + ": no initial inputs"));
    return {};
  }
  if (!Usable(call, initial)) return poisons();
  auto in = Locals(call, initial);
  if (!in) return poisons();
  auto block_args = [&](Scope* s) {
    Tensors args;
    for (Tensor* t : initial) {
      const int v = s->graph.AddValue(MpsType(t->type).dtype, t->type.shape);
      s->graph.inputs.push_back(v);
      args.push_back(NewTensor(s, v, t->type));
    }
    return args;
  };
  // before: the loop's values in, the predicate and what `after` gets out.
  Scope* cond = OpenScope(false);
  const Tensors cond_args = block_args(cond);
  stack_.push_back(cond);
  Tensors forwarded;
  Tensor* predicate = before(cond_args, forwarded);
  bool ok = Usable(call + " (before block)", {predicate}) && Usable(call + " (before block)", forwarded);
  if (ok && (predicate->type.dataType != DataType::kBool || ElementCount(predicate->type.shape) != 1)) {
    Record(Violation(Describe(call, {predicate}) + ": the before block's predicate must be a bool of one element"));
    ok = false;
  }
  if (ok && forwarded.size() != initial.size()) {
    Record(Violation(call + ": the before block's resultTensors count " + std::to_string(forwarded.size()) +
                     " differs from the initial inputs' " + std::to_string(initial.size())));
    ok = false;
  }
  for (size_t i = 0; ok && i < forwarded.size(); ++i) {
    if (forwarded[i]->type.shape != initial[i]->type.shape ||
        forwarded[i]->type.dataType != initial[i]->type.dataType) {
      Record(Violation(Describe(call, {forwarded[i], initial[i]}) + ": before block result " + std::to_string(i) +
                       " differs in type from the initial input"));
      ok = false;
    } else if (forwarded[i] != cond_args[i]) {
      Record(Unsupported(call + ": a before block whose resultTensors are not its arguments, in order"));
      ok = false;
    }
  }
  if (ok) {
    auto p = Capture(cond, predicate);
    if (!p.ok()) {
      Record(p.status());
      ok = false;
    } else {
      // The host's While wants a bool scalar.
      const int scalar =
          predicate->type.shape.empty() ? *p : EmitLocal(OpKind::kReshape, {*p}, mps::NoAttrs{}, {DType::kBool, {}});
      cond->graph.outputs = {scalar};
    }
  }
  stack_.pop_back();
  cond->open = false;
  if (!ok) return poisons();

  Scope* body = OpenScope(false);
  const Tensors body_args = block_args(body);
  stack_.push_back(body);
  const Tensors next = after(body_args);
  ok = Usable(call + " (after block)", next);
  if (ok && next.size() != initial.size()) {
    Record(Violation(call + ": the after block returns " + std::to_string(next.size()) + " tensors for " +
                     std::to_string(initial.size()) + " loop values"));
    ok = false;
  }
  for (size_t i = 0; ok && i < next.size(); ++i) {
    if (next[i]->type.shape != initial[i]->type.shape || next[i]->type.dataType != initial[i]->type.dataType) {
      Record(Violation(Describe(call, {next[i], initial[i]}) + ": after block result " + std::to_string(i) +
                       " differs in type from the loop value"));
      ok = false;
      break;
    }
    auto v = Capture(body, next[i]);
    if (!v.ok()) {
      Record(v.status());
      ok = false;
    } else {
      body->graph.outputs.push_back(*v);
    }
  }
  stack_.pop_back();
  body->open = false;
  if (!ok) return poisons();

  mps::Graph& g = stack_.back()->graph;
  mps::Op op{OpKind::kWhile, *in, {}, mps::NoAttrs{}, {}, "stand-in"};
  op.subgraphs.push_back(std::move(cond->graph));
  op.subgraphs.push_back(std::move(body->graph));
  Tensors results;
  for (Tensor* t : initial) {
    op.outputs.push_back(g.AddValue(MpsType(t->type).dtype, t->type.shape));
    results.push_back(NewTensor(stack_.back(), op.outputs.back(), t->type));
  }
  g.ops.push_back(std::move(op));
  return results;
}

Tensors StandinGraph::ifWithPredicateTensor(Tensor* predicate, const IfBlock& thenBlock, const IfBlock& elseBlock) {
  const std::string call = "ifWithPredicateTensor:thenBlock:elseBlock:";
  if (!Usable(call, {predicate})) return {};
  bool ok = true;
  if (predicate->type.dataType != DataType::kBool || ElementCount(predicate->type.shape) != 1) {
    Record(Violation(Describe(call, {predicate}) + ": the predicate must be a bool of one element"));
    ok = false;
  }
  auto in = Locals(call, {predicate});
  if (!in) ok = false;
  Scope* branches[2] = {OpenScope(true), OpenScope(true)};
  Tensors results[2];
  for (int b = 0; b < 2; ++b) {
    stack_.push_back(branches[b]);
    results[b] = b == 0 ? thenBlock() : elseBlock();
    if (!Usable(call + (b == 0 ? " (then block)" : " (else block)"), results[b])) ok = false;
    for (size_t i = 0; ok && i < results[b].size(); ++i) {
      auto v = Capture(branches[b], results[b][i]);
      if (!v.ok()) {
        Record(v.status());
        ok = false;
      } else {
        branches[b]->graph.outputs.push_back(*v);
      }
    }
    stack_.pop_back();
    branches[b]->open = false;
  }
  if (ok && results[0].size() != results[1].size()) {
    Record(Violation(call + ": the then block returns " + std::to_string(results[0].size()) +
                     " tensors and the else block " + std::to_string(results[1].size()) + " (they must be alike)"));
    ok = false;
  }
  for (size_t i = 0; ok && i < results[0].size(); ++i)
    if (results[0][i]->type.shape != results[1][i]->type.shape ||
        results[0][i]->type.dataType != results[1][i]->type.dataType) {
      Record(Violation(Describe(call, {results[0][i], results[1][i]}) + ": result " + std::to_string(i) +
                       " differs in type between the blocks"));
      ok = false;
    }
  if (!ok) {
    Tensors r;
    for (Tensor* t : results[0]) r.push_back(Poison(t ? t->type : ShapedType{{1}, DataType::kFloat32}));
    return r;
  }
  // The If's operands: every outer value either block captured; each block takes all of them.
  std::vector<int> operands;
  for (Scope* s : branches)
    for (const auto& [outer, local] : s->captures)
      if (std::find(operands.begin(), operands.end(), outer) == operands.end()) operands.push_back(outer);
  mps::Graph& g = stack_.back()->graph;
  for (Scope* s : branches)
    for (int outer : operands) {
      int local = -1;
      for (const auto& [o, l] : s->captures)
        if (o == outer) local = l;
      if (local < 0) local = s->graph.AddValue(g.type(outer).dtype, g.type(outer).shape);
      s->graph.inputs.push_back(local);
    }
  const int pred = predicate->type.shape.empty()
                       ? (*in)[0]
                       : EmitLocal(OpKind::kReshape, {(*in)[0]}, mps::NoAttrs{}, {DType::kBool, {}});
  mps::Op op{OpKind::kIf, {pred}, {}, mps::NoAttrs{}, {}, "stand-in"};
  op.inputs.insert(op.inputs.end(), operands.begin(), operands.end());
  op.subgraphs.push_back(std::move(branches[0]->graph));
  op.subgraphs.push_back(std::move(branches[1]->graph));
  Tensors r;
  for (Tensor* t : results[0]) {
    op.outputs.push_back(g.AddValue(MpsType(t->type).dtype, t->type.shape));
    r.push_back(NewTensor(stack_.back(), op.outputs.back(), t->type));
  }
  g.ops.push_back(std::move(op));
  return r;
}

}  // namespace jmp::exec::standin

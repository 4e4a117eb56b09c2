// The stand-in's compileWithDevice: the feeds and targets checked, the graph pruned to what the
// targets need, and the executable made.
#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "exec/standin/standin_graph.h"

namespace jmp::exec::standin {

namespace {

// The ops the targets need, in order; everything else MPSGraph would not compile either.
mps::Graph Prune(const mps::Graph& g) {
  std::vector<bool> needed(g.values.size(), false);
  for (int v : g.outputs) needed[static_cast<size_t>(v)] = true;
  std::vector<bool> keep(g.ops.size(), false);
  for (size_t i = g.ops.size(); i-- > 0;) {
    const mps::Op& op = g.ops[i];
    for (int o : op.outputs) keep[i] = keep[i] || needed[static_cast<size_t>(o)];
    if (keep[i])
      for (int v : op.inputs) needed[static_cast<size_t>(v)] = true;
  }
  mps::Graph r;
  r.values = g.values;
  r.inputs = g.inputs;
  r.outputs = g.outputs;
  for (size_t i = 0; i < g.ops.size(); ++i)
    if (keep[i]) r.ops.push_back(g.ops[i]);
  return r;
}

}  // namespace

StatusOr<std::unique_ptr<metal::GraphExecutable>> StandinGraph::compileWithDevice(
    metal::Device&, const std::vector<std::pair<Tensor*, ShapedType>>& feeds, const Tensors& targets) {
  const std::string call = "compileWithDevice:feeds:targetTensors:targetOperations:compilationDescriptor:";
  if (!first_error_.ok()) return first_error_;
  if (stack_.size() != 1) return Violation(call + ": called inside a control-flow block");
  if (targets.empty()) return Violation(call + ": no target tensors");
  Scope* root = stack_[0];
  std::vector<Tensor*> fed;
  for (const auto& [t, type] : feeds) {
    if (!t || !t->placeholder || t->scope != root)
      return Violation(call + ": a feed that is not a placeholder of this graph");
    if (std::find(fed.begin(), fed.end(), t) != fed.end()) return Violation(call + ": a placeholder fed twice");
    if (type.shape != t->type.shape || type.dataType != t->type.dataType)
      return Violation(call + ": a feed's shaped type " + TypeString(type) + " differs from its placeholder's " +
                       TypeString(t->type));
    fed.push_back(t);
  }
  for (Tensor* t : targets) {
    if (!Usable(call, {t})) return first_error_.ok() ? Violation(call + ": an unusable target") : first_error_;
    if (t->scope != root) return Violation(call + ": a target tensor made inside a control-flow block");
  }
  // The executable's feed order: a dictionary has none, so it is a permutation of the order given,
  // deterministic and different from it whenever there are two feeds or more.
  std::vector<Tensor*> order = fed;
  if (order.size() >= 2) std::rotate(order.begin(), order.begin() + 1, order.end());
  Program program;
  program.graph = root->graph;
  for (Tensor* t : order) {
    program.graph.inputs.push_back(t->value);
    program.feeds.push_back(t->type);
  }
  for (Tensor* t : targets) {
    program.graph.outputs.push_back(t->value);
    program.targets.push_back(t->type);
  }
  program.graph = Prune(program.graph);
  // A placeholder the targets read must be fed.
  std::vector<bool> produced(program.graph.values.size(), false);
  for (int v : program.graph.inputs) produced[static_cast<size_t>(v)] = true;
  for (const mps::Op& op : program.graph.ops)
    for (int o : op.outputs) produced[static_cast<size_t>(o)] = true;
  for (const mps::Op& op : program.graph.ops)
    for (int v : op.inputs)
      if (!produced[static_cast<size_t>(v)])
        return Violation(call + ": a placeholder " + program.graph.type(v).ToString() +
                         " that the targets read is not among the feeds");
  for (int v : program.graph.outputs)
    if (!produced[static_cast<size_t>(v)]) return Violation(call + ": a target placeholder that is not fed");
  return MakeExecutable(std::move(program), Tensors(order.begin(), order.end()), targets);
}

}  // namespace jmp::exec::standin

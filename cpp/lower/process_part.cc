#include "lower/process_part.h"

#include <cstddef>
#include <utility>

#include "mps/graph_serial.h"

namespace jmp::mps {

namespace {

// Per member of a top-level AllReduce: whether this process holds it.
std::vector<bool> Members(const Op& op, const ProcessLayout& layout) {
  std::vector<bool> here;
  for (int64_t device : op.Attrs<AllReduceAttrs>().devices) {
    const bool in_range = device >= 0 && static_cast<size_t>(device) < layout.process_of.size();
    here.push_back(in_range && layout.process_of[static_cast<size_t>(device)] == layout.process);
  }
  return here;
}

bool Across(const std::vector<bool>& here) {
  bool some = false, all = true;
  for (bool h : here) some |= h, all &= h;
  return some && !all;
}

}  // namespace

bool ProcessPart(const Graph& tiles, const ProcessLayout& layout, Graph* part) {
  const Graph& g = tiles;
  // Callbacks run in every process with the whole program, as they do with exchanged arguments.
  if (layout.holds.size() != g.inputs.size() || layout.returns.size() != g.outputs.size() || mps::HasPythonCallbacks(g))
    return false;
  // What this process can compute: its inputs, and what follows from them; an AllReduce's result
  // needs only this process's members (the others come from their processes).
  std::vector<bool> known(g.values.size(), false);
  for (size_t i = 0; i < g.inputs.size(); ++i)
    if (layout.holds[i]) known[static_cast<size_t>(g.inputs[i])] = true;
  std::vector<std::vector<bool>> members(g.ops.size());
  std::vector<bool> across(g.ops.size(), false);  // an AllReduce with members here and elsewhere
  for (size_t k = 0; k < g.ops.size(); ++k) {
    const Op& op = g.ops[k];
    bool all = true;
    if (op.kind == OpKind::kAllReduce && op.Attrs<AllReduceAttrs>().processes.empty()) {
      members[k] = Members(op, layout);
      bool some = false;
      for (size_t m = 0; m < op.inputs.size(); ++m) {
        if (!members[k][m]) continue;
        some = true;
        all = all && known[static_cast<size_t>(op.inputs[m])];
      }
      all = all && some;
      across[k] = Across(members[k]);
    } else {
      for (int v : op.inputs) all = all && known[static_cast<size_t>(v)];
    }
    for (int v : op.outputs) known[static_cast<size_t>(v)] = all;
  }
  // What this process runs: what its results need, and every AllReduce it shares with others.
  std::vector<bool> used(g.values.size(), false);
  for (size_t j = 0; j < g.outputs.size(); ++j)
    if (layout.returns[j]) used[static_cast<size_t>(g.outputs[j])] = true;
  std::vector<bool> runs(g.ops.size(), false);
  for (size_t k = g.ops.size(); k-- > 0;) {
    const Op& op = g.ops[k];
    bool needed = across[k];
    for (int v : op.outputs) needed = needed || used[static_cast<size_t>(v)];
    if (!needed) continue;
    runs[k] = true;
    for (size_t m = 0; m < op.inputs.size(); ++m)
      if (!across[k] || members[k][m]) used[static_cast<size_t>(op.inputs[m])] = true;
  }
  for (size_t v = 0; v < g.values.size(); ++v)
    if (used[v] && !known[v]) return false;

  Graph p;
  p.values = g.values;
  for (size_t i = 0; i < g.inputs.size(); ++i)
    if (layout.holds[i]) p.inputs.push_back(g.inputs[i]);
  for (size_t j = 0; j < g.outputs.size(); ++j)
    if (layout.returns[j]) p.outputs.push_back(g.outputs[j]);
  for (size_t k = 0; k < g.ops.size(); ++k) {
    if (!runs[k]) continue;
    Op op = g.ops[k];
    if (across[k]) {
      AllReduceAttrs attrs = op.Attrs<AllReduceAttrs>();
      std::vector<int> operands;
      for (size_t m = 0; m < op.inputs.size(); ++m) {
        attrs.processes.push_back(layout.process_of[static_cast<size_t>(attrs.devices[m])]);
        if (members[k][m]) operands.push_back(op.inputs[m]);
      }
      op.inputs = std::move(operands);
      op.attrs = std::move(attrs);
    }
    p.ops.push_back(std::move(op));
  }
  *part = std::move(p);
  return true;
}

}  // namespace jmp::mps

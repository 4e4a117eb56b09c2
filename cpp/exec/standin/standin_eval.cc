// What a recorded program computes: its mps::Graph on the host executor's kernels, with one rewrite
// for what MPSGraph's compiler may do that our ops do not say.
#include <memory>

#include "exec/standin/standin_internal.h"
#include "mps/verify.h"

namespace jmp::exec::standin {

namespace {

// ASSUMPTION (op_kinds.def's MultiplyAdd row): MPSGraph's fused kernel may contract a float32
// multiplication whose only reader is an addition into one FMA. The stand-in models that by making
// such a pair the MultiplyAdd op, so the lowering's MultiplyAdd (which the Metal executor emits as a
// multiplication and then an addition) rounds as the host rounds it.
void ContractMultiplyAdd(mps::Graph& g) {
  for (mps::Op& op : g.ops)
    for (mps::Graph& sub : op.subgraphs) ContractMultiplyAdd(sub);
  std::vector<int> readers(g.values.size(), 0), producer(g.values.size(), -1);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    for (int v : g.ops[i].inputs) ++readers[static_cast<size_t>(v)];
    for (int v : g.ops[i].outputs) producer[static_cast<size_t>(v)] = static_cast<int>(i);
  }
  for (int v : g.outputs) ++readers[static_cast<size_t>(v)];
  std::vector<bool> removed(g.ops.size(), false);
  for (mps::Op& add : g.ops) {
    if (add.kind != mps::OpKind::kAdd || g.type(add.outputs[0]).dtype != DType::kF32) continue;
    for (size_t j = 0; j < 2; ++j) {
      const int v = add.inputs[j];
      const int p = producer[static_cast<size_t>(v)];
      if (p < 0 || removed[static_cast<size_t>(p)] || readers[static_cast<size_t>(v)] != 1) continue;
      const mps::Op& mul = g.ops[static_cast<size_t>(p)];
      if (mul.kind != mps::OpKind::kMultiply || g.type(v).shape != g.type(add.outputs[0]).shape) continue;
      const int addend = add.inputs[1 - j];
      add.kind = mps::OpKind::kMultiplyAdd;
      add.inputs = {mul.inputs[0], mul.inputs[1], addend};
      removed[static_cast<size_t>(p)] = true;
      break;
    }
  }
  std::vector<mps::Op> kept;
  for (size_t i = 0; i < g.ops.size(); ++i)
    if (!removed[i]) kept.push_back(std::move(g.ops[i]));
  g.ops = std::move(kept);
}

Executor& Host() {
  static Executor* host = CreateHostExecutor().release();  // lives as long as the process
  return *host;
}

}  // namespace

StatusOr<std::unique_ptr<Executable>> CompileProgram(const mps::Graph& graph) {
  mps::Graph g = graph;
  ContractMultiplyAdd(g);
  Status verified = mps::VerifyGraph(g);
  if (!verified.ok()) return Unsupported("the host kernels cannot compute the recorded graph: " + verified.message());
  return Host().Compile(g);
}

}  // namespace jmp::exec::standin

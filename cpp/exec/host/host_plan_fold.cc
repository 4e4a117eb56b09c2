// The planner's constant folding: ops whose inputs are known at compile time run once, at planning.
#include <cstdint>
#include <memory>
#include <vector>

#include "exec/host/host_memory.h"
#include "exec/host/host_plan.h"
#include "exec/host/host_plan_passes.h"

namespace jmp::exec::host {

// Runs, once, every op whose inputs are all known at compile time (splat broadcasts, iotas, constant
// shape ops), keeping the results with the plan; runs then skip those ops.
void FoldConstants(Plan& plan) {
  const mps::Graph& g = *plan.graph;
  plan.folded_offset.assign(g.values.size(), -1);
  plan.folded_op.assign(g.ops.size(), 0);
  std::vector<uint8_t> known(g.values.size(), 0);
  // A large splat or iota read only by elementwise ops is made tile by tile in their fused group; one
  // read by anything else (a loop's zero-initialised carry) is folded as before.
  std::vector<uint8_t> read_whole(g.values.size(), 0);
  for (const mps::Op& op : g.ops)
    if (!TileKind(op.kind))
      for (int v : op.inputs) read_whole[static_cast<size_t>(v)] = 1;
  for (int v : g.outputs) read_whole[static_cast<size_t>(v)] = 1;
  size_t bytes = 0;
  constexpr size_t kMaxFoldedBytes = size_t{64} << 20;
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const mps::Op& op = g.ops[i];
    // An op with effects runs every time, even on inputs known now.
    bool tiles = MadeInTiles(g, op);
    for (int v : op.outputs) tiles = tiles && !read_whole[static_cast<size_t>(v)];
    bool all = op.subgraphs.empty() && !mps::HasEffects(op) && !tiles;
    for (int v : op.inputs) all &= known[static_cast<size_t>(v)] != 0;
    size_t out_bytes = 0;
    for (int v : op.outputs) out_bytes += AlignUp(g.type(v).ByteSize());
    if (!all || bytes + out_bytes > kMaxFoldedBytes) continue;
    plan.folded_op[i] = 1;
    for (int v : op.outputs) {
      known[static_cast<size_t>(v)] = 1;
      plan.folded_offset[static_cast<size_t>(v)] = static_cast<int64_t>(bytes);
      bytes += AlignUp(g.type(v).ByteSize());
    }
  }
  plan.splat.assign(g.values.size(), 0);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const mps::Op& op = g.ops[i];
    if (plan.folded_op[i] && op.kind == mps::OpKind::kBroadcast && op.inputs.size() == 1 && op.outputs.size() == 1 &&
        g.type(op.inputs[0]).NumElements() == 1 && g.type(op.inputs[0]).dtype == g.type(op.outputs[0]).dtype)
      plan.splat[static_cast<size_t>(op.outputs[0])] = 1;
  }
  plan.folded.assign(bytes + kAlign, 0);
  // Offsets are relative to an aligned start inside the vector.
  size_t shift = (kAlign - reinterpret_cast<uintptr_t>(plan.folded.data()) % kAlign) % kAlign;
  for (auto& off : plan.folded_offset)
    if (off >= 0) off += static_cast<int64_t>(shift);
  std::vector<const uint8_t*> no_inputs;
  for (size_t i = 0; i < g.ops.size(); ++i) {
    if (!plan.folded_op[i]) continue;
    const mps::Op& op = g.ops[i];
    bool inputs_folded = true;
    for (int v : op.inputs) inputs_folded &= plan.folded_offset[static_cast<size_t>(v)] >= 0;
    if (!inputs_folded) {
      plan.folded_op[i] = 0;
      for (int v : op.outputs) plan.folded_offset[static_cast<size_t>(v)] = -1;
      continue;
    }
    OpArgs a{op, g, {}, {}};
    for (int v : op.inputs) a.in.push_back(plan.folded.data() + plan.folded_offset[static_cast<size_t>(v)]);
    for (int v : op.outputs) a.out.push_back(plan.folded.data() + plan.folded_offset[static_cast<size_t>(v)]);
    if (!RunOp(a, plan, i).ok()) {  // leave a failing op to fail at run time, with its error
      plan.folded_op[i] = 0;
      for (int v : op.outputs) plan.folded_offset[static_cast<size_t>(v)] = -1;
    }
  }
}

}  // namespace jmp::exec::host

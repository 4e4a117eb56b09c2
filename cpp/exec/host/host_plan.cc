// The planner: turns a graph into a Plan once, at compile time. It folds constants, makes reshapes
// views, lets MatMul read transposes untransposed and add its product to a value, finds in-place while
// carries and gives every other value an arena slot by liveness.
// The passes are in host_plan_*.cc (host_plan_passes.h).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "exec/host/host_memory.h"
#include "exec/host/host_plan.h"
#include "exec/host/host_plan_passes.h"

namespace jmp::exec::host {

std::unique_ptr<Plan> MakePlan(const mps::Graph& g) {
  auto plan = std::make_unique<Plan>();
  plan->graph = &g;
  plan->arena_offset.assign(g.values.size(), -1);
  plan->input_index.assign(g.values.size(), -1);
  for (size_t i = 0; i < g.inputs.size(); ++i)
    plan->input_index[static_cast<size_t>(g.inputs[i])] = static_cast<int>(i);
  for (const mps::Op& op : g.ops) {
    plan->subplan_first.push_back(plan->subplans.size());
    for (const mps::Graph& sub : op.subgraphs) plan->subplans.push_back(MakePlan(sub));
  }
  FoldConstants(*plan);
  std::vector<int> producer(g.values.size(), -1), uses(g.values.size(), 0);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    for (int v : g.ops[i].outputs) producer[static_cast<size_t>(v)] = static_cast<int>(i);
    for (int v : g.ops[i].inputs) ++uses[static_cast<size_t>(v)];
  }
  plan->unread.assign(g.values.size(), 0);
  for (size_t v = 0; v < g.values.size(); ++v) plan->unread[v] = uses[v] == 0;
  for (int v : g.outputs) plan->unread[static_cast<size_t>(v)] = 0;
  plan->alias_of.assign(g.values.size(), -1);
  plan->view_op.assign(g.ops.size(), 0);
  plan->skipped_op.assign(g.ops.size(), 0);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const mps::Op& op = g.ops[i];
    bool view = op.kind == mps::OpKind::kReshape || op.kind == mps::OpKind::kIdentity ||
                op.kind == mps::OpKind::kReinterpretCast;
    if (!view || plan->folded_op[i] || op.inputs.size() != 1 || op.outputs.size() != 1) continue;
    if (g.type(op.inputs[0]).ByteSize() != g.type(op.outputs[0]).ByteSize()) continue;
    plan->alias_of[static_cast<size_t>(op.outputs[0])] = op.inputs[0];
    plan->view_op[i] = 1;
  }
  FindSliceViews(*plan);
  plan->made_in_carry.assign(g.values.size(), -1);  // FindCarryUpdates decides, once groups are formed
  FindInPlaceCarries(*plan, uses);
  FoldMatMulTransposes(*plan, producer);
  FoldMatMulAccumulates(*plan, producer);
  FuseElementwise(*plan);
  FindCarryUpdates(*plan, producer);
  PairMatMuls(*plan, producer);
  AssignArenaSlots(*plan);
  for (int v : g.outputs) plan->output_bytes.push_back(g.type(v).ByteSize());
  // A result made in the arena is made straight in its output instead (the first output it is, when
  // it is several): nothing writes a value after its op, and an output's value is never handed on.
  plan->direct_output.assign(g.values.size(), -1);
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    size_t r = static_cast<size_t>(Root(*plan, g.outputs[i]));
    if (plan->arena_offset[r] >= 0 && plan->slice_view[r] < 0 && plan->direct_output[r] < 0 &&
        g.values[r].ByteSize() == plan->output_bytes[i])
      plan->direct_output[r] = static_cast<int>(i);
  }
  return plan;
}

namespace {

// The block of a slice view at its indices' run-time values. An index out of range is clamped, as the
// lowering already clamps dynamic_slice and dynamic_update_slice starts: a block never lies outside its
// data.
uint8_t* BlockPtr(const Plan& plan, const RunMemory& memory, const SliceView& view) {
  if (view.indices < 0) return ValuePtr(plan, memory, view.data) + view.fixed_offset;
  const uint8_t* idx = ValuePtr(plan, memory, view.indices);
  const bool wide = plan.graph->type(view.indices).dtype == DType::kI64;
  int64_t offset = 0;
  for (size_t c = 0; c < view.dims.size(); ++c) {
    int64_t at;
    if (wide) {
      std::memcpy(&at, idx + 8 * c, 8);
    } else {
      int32_t narrow;
      std::memcpy(&narrow, idx + 4 * c, 4);
      at = narrow;
    }
    offset += std::clamp<int64_t>(at, 0, view.dims[c] - 1) * view.stride_bytes[c];
  }
  return ValuePtr(plan, memory, view.data) + offset;
}

}  // namespace

uint8_t* ValuePtr(const Plan& plan, const RunMemory& memory, int v) {
  v = Root(plan, v);
  if (int s = plan.slice_view[static_cast<size_t>(v)]; s >= 0)
    return BlockPtr(plan, memory, plan.slice_views[static_cast<size_t>(s)]);
  if (int s = plan.made_in_carry[static_cast<size_t>(v)]; s >= 0 && memory.writable_carries)
    return BlockPtr(plan, memory, plan.slice_views[static_cast<size_t>(s)]);
  int64_t folded = plan.folded_offset[static_cast<size_t>(v)];
  if (folded >= 0) return const_cast<uint8_t*>(plan.folded.data()) + folded;
  int in = plan.input_index[static_cast<size_t>(v)];
  if (in >= 0) return const_cast<uint8_t*>(memory.inputs[static_cast<size_t>(in)]);
  int out = plan.direct_output[static_cast<size_t>(v)];
  if (out >= 0 && memory.outputs) return (*memory.outputs)[static_cast<size_t>(out)];
  return memory.arena + plan.arena_offset[static_cast<size_t>(v)];
}

}  // namespace jmp::exec::host

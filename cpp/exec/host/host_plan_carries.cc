// The planner's loop carries: scatters that update a carry in place, and updates made in the
// carry's block directly.
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "exec/host/host_plan.h"
#include "exec/host/host_plan_passes.h"

namespace jmp::exec::host {

// Per op, its position in the run order (Plan::steps), -1 when it does not run.
std::vector<int> StepOf(const Plan& plan) {
  std::vector<int> step_of(plan.graph->ops.size(), -1);
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    int step = plan.steps[s];
    if (step >= 0)
      step_of[static_cast<size_t>(step)] = static_cast<int>(s);
    else
      for (int i : plan.fused[static_cast<size_t>(-1 - step)].ops)
        step_of[static_cast<size_t>(i)] = static_cast<int>(s);
  }
  return step_of;
}

namespace {

// Makes `v` known before step `before`: the small ops (scalar index arithmetic) that make it after
// that step move to just before it, in their order. False, and nothing moves, when v depends on
// anything else made at or after that step, the step itself included (the update whose block v
// addresses). Such ops are pure and read only what is made earlier. An op that writes its result into
// a carry's block (made_in_carry) needs that block's indices first, so they move with it.
// `step_of` is StepOf(plan), stale once this returns true.
bool MakeEarlier(Plan& plan, const std::vector<int>& producer, const std::vector<int>& step_of, int v, int before) {
  const mps::Graph& g = *plan.graph;
  std::vector<uint8_t> moving(g.ops.size(), 0);
  std::vector<int> todo{v};
  while (!todo.empty()) {
    size_t r = static_cast<size_t>(Root(plan, todo.back()));
    todo.pop_back();
    int p = producer[r];
    if (p < 0 || plan.folded_offset[r] >= 0 || plan.input_index[r] >= 0) continue;
    size_t op = static_cast<size_t>(p);
    if (moving[op] || (step_of[op] >= 0 && step_of[op] < before)) continue;
    const mps::Op& o = g.ops[op];
    size_t bytes = 0;
    for (int out : o.outputs) bytes += g.type(out).ByteSize();
    if (step_of[op] <= before || plan.steps[static_cast<size_t>(step_of[op])] != p || bytes > 64 ||
        !o.subgraphs.empty() || mps::HasEffects(o) || plan.slice_view[r] >= 0)
      return false;
    moving[op] = 1;
    for (int in : o.inputs) todo.push_back(in);
    for (int out : o.outputs)
      if (int s = plan.made_in_carry[static_cast<size_t>(out)]; s >= 0)
        todo.push_back(plan.slice_views[static_cast<size_t>(s)].indices);
    if (plan.matmul_addend[op] >= 0) todo.push_back(plan.matmul_addend[op]);
  }
  std::vector<int> steps(plan.steps.begin(), plan.steps.begin() + before), later;
  for (size_t s = static_cast<size_t>(before); s < plan.steps.size(); ++s) {
    int step = plan.steps[s];
    (step >= 0 && moving[static_cast<size_t>(step)] ? steps : later).push_back(step);
  }
  steps.insert(steps.end(), later.begin(), later.end());
  plan.steps = std::move(steps);
  return true;
}

}  // namespace

// The in-place carry scatters (FindInPlaceCarries) that set one block of the carry to an update the
// body makes in the arena: the update is made in the block instead, when the block's place can be known
// before the update's maker runs (its indices are made earlier, or moved earlier) and the update is no
// graph output. Nothing else reads the carry (it is the scatter's alone), so the block may be written
// early.
void FindCarryUpdates(Plan& plan, const std::vector<int>& producer) {
  const mps::Graph& g = *plan.graph;
  plan.made_in_carry.assign(g.values.size(), -1);
  plan.skipped_scatter.assign(g.ops.size(), 0);
  const std::vector<uint8_t> is_output = OutputRoots(plan);
  std::vector<int> step_of = StepOf(plan);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    if (plan.in_place_op_input[i] < 0 || g.ops[i].kind != mps::OpKind::kScatterND) continue;
    const mps::Op& op = g.ops[i];
    if (op.Attrs<mps::ScatterAttrs>().mode != mps::ScatterMode::kSet) continue;
    std::optional<SliceView> view = BlockOf(g, op.inputs[0], op.inputs[2]);
    if (!view) continue;
    const mps::TensorType& data = g.type(op.inputs[0]);
    const size_t u = static_cast<size_t>(Root(plan, op.inputs[1]));
    int64_t block = 1;
    for (size_t d = view->dims.size(); d < data.shape.size(); ++d) block *= data.shape[d];
    if (g.values[u].dtype != data.dtype || g.values[u].NumElements() != block || is_output[u] ||
        plan.input_index[u] >= 0 || plan.folded_offset[u] >= 0 || plan.slice_view[u] >= 0 || plan.tile_slot[u] >= 0 ||
        plan.made_in_carry[u] >= 0 || producer[u] < 0)
      continue;
    const int made = step_of[static_cast<size_t>(producer[u])];
    if (made < 0 || !MakeEarlier(plan, producer, step_of, op.inputs[2], made)) continue;
    step_of = StepOf(plan);
    plan.made_in_carry[u] = static_cast<int>(plan.slice_views.size());
    plan.slice_views.push_back(std::move(*view));
    plan.skipped_scatter[i] = 1;
  }
}

void FindInPlaceCarries(Plan& plan, const std::vector<int>& uses) {
  const mps::Graph& g = *plan.graph;
  plan.in_place_carry_op.assign(g.inputs.size(), -1);
  plan.in_place_op_input.assign(g.ops.size(), -1);
  std::vector<int> as_output(g.values.size(), 0);
  for (int v : g.outputs) ++as_output[static_cast<size_t>(v)];
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const mps::Op& op = g.ops[i];
    if ((op.kind != mps::OpKind::kScatterND && op.kind != mps::OpKind::kScatterAlongAxis) || op.inputs.size() != 3 ||
        plan.folded_op[i])
      continue;
    int data = op.inputs[0], out = op.outputs[0];
    int p = plan.input_index[static_cast<size_t>(data)];
    if (p < 0 || static_cast<size_t>(p) >= g.outputs.size() || g.outputs[static_cast<size_t>(p)] != out) continue;
    if (uses[static_cast<size_t>(data)] != 1 || as_output[static_cast<size_t>(data)] != 0 ||
        uses[static_cast<size_t>(out)] != 0 || as_output[static_cast<size_t>(out)] != 1 ||
        g.type(data).ByteSize() != g.type(out).ByteSize())
      continue;
    plan.in_place_carry_op[static_cast<size_t>(p)] = static_cast<int>(i);
    plan.in_place_op_input[i] = p;
  }
}

}  // namespace jmp::exec::host

// The planner: turns a graph into a Plan once, at compile time. It folds constants, makes reshapes
// views, lets MatMul read transposes untransposed, finds in-place while carries and gives every
// other value an arena slot by liveness.
#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <vector>

#include "exec/host/host_memory.h"
#include "exec/host/host_plan.h"

namespace jmp::exec::host {

namespace {

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
    // A callback has side effects: it runs every time, even on inputs known now.
    bool tiles = MadeInTiles(g, op);
    for (int v : op.outputs) tiles = tiles && !read_whole[static_cast<size_t>(v)];
    bool all = op.subgraphs.empty() && op.kind != mps::OpKind::kPythonCallback && !tiles;
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

// A MatMul operand made by a Transpose of its last two dims is read untransposed (BLAS transposes),
// and the Transpose is skipped when nothing else reads its result.
void FoldMatMulTransposes(Plan& plan, const std::vector<int>& producer, const std::vector<int>& uses) {
  const mps::Graph& g = *plan.graph;
  plan.matmul_source.assign(g.ops.size(), {-1, -1});
  std::vector<int> folded_uses(g.values.size(), 0);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const mps::Op& op = g.ops[i];
    if (op.kind != mps::OpKind::kMatMul || plan.folded_op[i] || op.inputs.size() != 2) continue;
    DType t = g.type(op.outputs[0]).dtype;
    if (t != DType::kF32 && t != DType::kF64 && t != DType::kC64 && t != DType::kC128) continue;  // BLAS types

    for (size_t j = 0; j < 2; ++j) {
      int p = producer[static_cast<size_t>(op.inputs[j])];
      if (p < 0 || plan.folded_op[static_cast<size_t>(p)]) continue;
      const mps::Op& t = g.ops[static_cast<size_t>(p)];
      size_t r = t.axes.size();
      if (t.kind != mps::OpKind::kTranspose || r < 2 || g.type(t.inputs[0]).shape.size() != r) continue;
      bool swap_last_two = t.axes[r - 2] == static_cast<int64_t>(r - 1) && t.axes[r - 1] == static_cast<int64_t>(r - 2);
      for (size_t d = 0; d + 2 < r; ++d) swap_last_two &= t.axes[d] == static_cast<int64_t>(d);
      if (!swap_last_two) continue;
      plan.matmul_source[i][j] = t.inputs[0];
      ++folded_uses[static_cast<size_t>(op.inputs[j])];
    }
  }
  std::vector<uint8_t> is_output(g.values.size(), 0);
  for (int v : g.outputs) is_output[static_cast<size_t>(v)] = 1;
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const mps::Op& op = g.ops[i];
    if (op.kind != mps::OpKind::kTranspose || op.outputs.size() != 1) continue;
    size_t v = static_cast<size_t>(op.outputs[0]);
    if (folded_uses[v] > 0 && folded_uses[v] == uses[v] && !is_output[v]) plan.skipped_op[i] = 1;
  }
  // A Transpose (of the last two dims) that is the only reader of a MatMul's result: the MatMul writes
  // its result transposed (BLAS computes B^T A^T) and the Transpose becomes a view of it (a weight
  // gradient, x^T g, is often transposed straight back).
  plan.matmul_transposed_out.assign(g.ops.size(), 0);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const mps::Op& t = g.ops[i];
    if (t.kind != mps::OpKind::kTranspose || plan.skipped_op[i] || plan.folded_op[i] || t.outputs.size() != 1 ||
        folded_uses[static_cast<size_t>(t.outputs[0])] > 0)  // a MatMul reads its source already
      continue;
    size_t r = t.axes.size();
    if (r < 2 || g.type(t.inputs[0]).shape.size() != r) continue;
    bool swap_last_two = t.axes[r - 2] == static_cast<int64_t>(r - 1) && t.axes[r - 1] == static_cast<int64_t>(r - 2);
    for (size_t d = 0; d + 2 < r; ++d) swap_last_two &= t.axes[d] == static_cast<int64_t>(d);
    int src = t.inputs[0];
    int p = producer[static_cast<size_t>(src)];
    if (!swap_last_two || p < 0 || plan.folded_op[static_cast<size_t>(p)] || uses[static_cast<size_t>(src)] != 1 ||
        is_output[static_cast<size_t>(src)] || folded_uses[static_cast<size_t>(src)] > 0)
      continue;
    const mps::Op& mm = g.ops[static_cast<size_t>(p)];
    DType dt = g.type(src).dtype;
    if (mm.kind != mps::OpKind::kMatMul || mm.inputs.size() != 2 ||
        (dt != DType::kF32 && dt != DType::kF64 && dt != DType::kC64 && dt != DType::kC128))
      continue;
    plan.matmul_transposed_out[static_cast<size_t>(p)] = 1;
    plan.alias_of[static_cast<size_t>(t.outputs[0])] = src;
    plan.view_op[i] = 1;
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

int Root(const Plan& plan, int v) {
  while (plan.alias_of[static_cast<size_t>(v)] >= 0) v = plan.alias_of[static_cast<size_t>(v)];
  return v;
}

// Arena slots by liveness, in run order (Plan::steps): a value's slot is reused once its last reader has
// run, so the working set stays small enough to live in cache. Best fit among free slots, no splitting.
// Values a fused group keeps in tile scratch need none.
void AssignArenaSlots(Plan& plan) {
  const mps::Graph& g = *plan.graph;
  const size_t end = plan.steps.size();
  auto ops_of = [&](size_t s) -> std::vector<int> {
    int step = plan.steps[s];
    return step >= 0 ? std::vector<int>{step} : plan.fused[static_cast<size_t>(-1 - step)].ops;
  };
  std::vector<size_t> last_use(g.values.size(), 0);
  std::vector<uint8_t> needs_slot(g.values.size(), 0);
  auto reads = [&](int v, size_t at) {
    size_t root = static_cast<size_t>(Root(plan, v));
    last_use[root] = std::max(last_use[root], at);
  };
  for (size_t s = 0; s < end; ++s)
    for (int oi : ops_of(s)) {
      size_t i = static_cast<size_t>(oi);
      const mps::Op& op = g.ops[i];
      for (size_t j = 0; j < op.inputs.size(); ++j) {
        int src = j < 2 ? plan.matmul_source[i][j] : -1;
        reads(src >= 0 ? src : op.inputs[j], s);
      }
      for (int v : op.outputs) {
        needs_slot[static_cast<size_t>(v)] = plan.tile_slot[static_cast<size_t>(v)] < 0;
        last_use[static_cast<size_t>(v)] = std::max(last_use[static_cast<size_t>(v)], s);
      }
    }
  for (int v : g.outputs) reads(v, end);
  std::multimap<size_t, int64_t> free_slots;  // size -> offset
  std::vector<size_t> slot_size(g.values.size(), 0);
  std::vector<std::vector<int>> release_after(end + 1);
  std::vector<uint8_t> handed_on(g.values.size(), 0);  // its slot now belongs to a later value
  size_t top = 0;
  for (size_t s = 0; s < end; ++s) {
    const std::vector<int> ops = ops_of(s);
    const mps::Op& first = g.ops[static_cast<size_t>(ops[0])];
    // A scatter whose data dies here writes into the data's slot: no copy of the whole operand
    // (dynamic_update_slice in a scan over layers would copy the stacked buffer every step).
    if (ops.size() == 1 && (first.kind == mps::OpKind::kScatterND || first.kind == mps::OpKind::kScatterAlongAxis) &&
        first.inputs.size() == 3) {
      size_t data = static_cast<size_t>(Root(plan, first.inputs[0]));
      size_t out = static_cast<size_t>(first.outputs[0]);
      bool sole_reader = last_use[data] == s && Root(plan, first.inputs[1]) != static_cast<int>(data) &&
                         Root(plan, first.inputs[2]) != static_cast<int>(data);
      if (sole_reader && plan.arena_offset[data] >= 0 && !handed_on[data] &&
          slot_size[data] >= g.values[out].ByteSize() && plan.arena_offset[out] < 0) {
        plan.arena_offset[out] = plan.arena_offset[data];
        slot_size[out] = slot_size[data];
        handed_on[data] = 1;
        release_after[last_use[out]].push_back(static_cast<int>(out));
      }
    }
    for (int oi : ops)
      for (int v : g.ops[static_cast<size_t>(oi)].outputs) {
        size_t sv = static_cast<size_t>(v);
        if (!needs_slot[sv] || plan.arena_offset[sv] >= 0) continue;
        size_t need = AlignUp(g.values[sv].ByteSize());
        auto it = free_slots.lower_bound(need);
        if (it != free_slots.end() && it->first <= 2 * need + kAlign) {
          plan.arena_offset[sv] = it->second;
          slot_size[sv] = it->first;
          free_slots.erase(it);
        } else {
          plan.arena_offset[sv] = static_cast<int64_t>(top);
          slot_size[sv] = need;
          top += need;
        }
        release_after[last_use[sv]].push_back(v);
      }
    for (int v : release_after[s])
      if (!handed_on[static_cast<size_t>(v)])
        free_slots.emplace(slot_size[static_cast<size_t>(v)], plan.arena_offset[static_cast<size_t>(v)]);
  }
  plan.arena_bytes = top;
}

}  // namespace

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
  FindInPlaceCarries(*plan, uses);
  FoldMatMulTransposes(*plan, producer, uses);
  FuseElementwise(*plan);
  AssignArenaSlots(*plan);
  for (int v : g.outputs) plan->output_bytes.push_back(g.type(v).ByteSize());
  return plan;
}

uint8_t* ValuePtr(const Plan& plan, uint8_t* arena, const std::vector<const uint8_t*>& inputs, int v) {
  while (plan.alias_of[static_cast<size_t>(v)] >= 0) v = plan.alias_of[static_cast<size_t>(v)];
  int64_t folded = plan.folded_offset[static_cast<size_t>(v)];
  if (folded >= 0) return const_cast<uint8_t*>(plan.folded.data()) + folded;
  int in = plan.input_index[static_cast<size_t>(v)];
  if (in >= 0) return const_cast<uint8_t*>(inputs[static_cast<size_t>(in)]);
  return arena + plan.arena_offset[static_cast<size_t>(v)];
}

}  // namespace jmp::exec::host

// The planner's arena: every value left without storage gets a slot, reused by liveness.
#include <algorithm>
#include <cstdint>
#include <map>
#include <vector>

#include "exec/host/host_memory.h"
#include "exec/host/host_plan.h"
#include "exec/host/host_plan_passes.h"

namespace jmp::exec::host {

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
  // The step at which what step s reads or writes is done with: a pair's second for its first.
  auto done_at = [&](size_t s) {
    const int step = plan.steps[s];
    return step >= 0 && plan.paired_matmul[static_cast<size_t>(step)] ? s + 1 : s;
  };
  auto reads = [&](int v, size_t at) {
    ForEachStorage(plan, v,
                   [&](int r) { last_use[static_cast<size_t>(r)] = std::max(last_use[static_cast<size_t>(r)], at); });
  };
  for (size_t s = 0; s < end; ++s)
    for (int oi : ops_of(s)) {
      size_t i = static_cast<size_t>(oi);
      const mps::Op& op = g.ops[i];
      const size_t done = done_at(s);
      for (size_t j = 0; j < op.inputs.size(); ++j) reads(ReadRoot(plan, i, j), done);
      if (plan.matmul_addend[i] >= 0) reads(plan.matmul_addend[i], done);
      for (int v : op.outputs) {
        needs_slot[static_cast<size_t>(v)] = plan.tile_slot[static_cast<size_t>(v)] < 0;
        last_use[static_cast<size_t>(v)] = std::max(last_use[static_cast<size_t>(v)], done);
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
      bool sole_reader = last_use[data] == s && plan.slice_view[data] < 0;
      for (size_t j = 1; j < 3; ++j)
        ForEachStorage(plan, first.inputs[j], [&](int r) { sole_reader &= r != static_cast<int>(data); });
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

}  // namespace jmp::exec::host

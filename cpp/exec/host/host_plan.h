// The plan of a compiled graph (host_plan.cc builds it once per executable), and the functions that
// run one (host_executor.cc: ops and whole plans; host_control_flow.cc: While and If).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "exec/host/host_kernels.h"
#include "mps/graph.h"
#include "support/status.h"

namespace jmp::exec::host {

// A run of elementwise ops over one element count, executed tile by tile (host_fused.cc): the values
// made and read only inside it live in the running thread's tile scratch, never in the arena, and every
// tile passes through all the ops while it is in cache. Per op, its operands (inputs, then outputs) as
// indices into `operands`.
struct FusedGroup {
  std::vector<int> ops;  // in program order
  int64_t count = 0;     // elements of every op's output
  std::vector<int> operands;
  std::vector<size_t> operand_first;  // per op, then one past the end
  std::vector<uint8_t> once;          // per op: a Broadcast whose tiles are all alike, filled once per thread
  std::vector<uint8_t> uniform;       // per operand: a splat of one element (OpArgs::uniform)
  std::vector<uint8_t> moves;         // per operand: a tile reads its own part (else the whole value)
  int slots = 0;                      // tile scratch slots
  size_t slot_bytes = 0;
  std::string profile_key;
};

// Where each value of a graph lives during a run.
struct Plan {
  const mps::Graph* graph = nullptr;
  std::vector<int64_t> arena_offset;  // per value: offset in the arena, or -1
  std::vector<int> input_index;       // per value: index into the run's inputs, or -1
  // Values computed once at compile time (constants and everything derived only from them).
  std::vector<int64_t> folded_offset;  // per value: offset in `folded`, or -1
  std::vector<uint8_t> folded_op;      // per op: 1 when its outputs are folded
  // Reshapes and reinterpretations are views: their output reads the input's bytes, no copy.
  std::vector<int> alias_of;                      // per value: the value whose storage it shares, or -1
  std::vector<uint8_t> view_op;                   // per op: 1 when it is such a view (skipped at run time)
  std::vector<std::array<int, 2>> matmul_source;  // per op: a MatMul operand read untransposed, or -1
  std::vector<uint8_t> skipped_op;                // per op: 1 for a Transpose every reader of which reads its source
  std::vector<uint8_t> matmul_transposed_out;     // per op: a MatMul writing its result transposed (OpArgs)
  // Per input p: the ScatterND/ScatterAlongAxis that is p's only reader and makes output p, or -1. In a
  // while body that scatter may write straight into p's buffer (RunWhile). Per op: the inverse.
  std::vector<int> in_place_carry_op;
  std::vector<int> in_place_op_input;
  std::vector<uint8_t> folded;
  size_t arena_bytes = 0;
  std::vector<size_t> output_bytes;             // per graph output
  std::vector<std::unique_ptr<Plan>> subplans;  // per op with subgraphs: the op's plans, flattened
  std::vector<size_t> subplan_first;            // per op: index of its first subplan
  // Run order: per step an op index, or -1 - g for fused group g. Ops that need not run (folded, views,
  // skipped transposes) have no step.
  std::vector<int> steps;
  std::vector<FusedGroup> fused;
  std::vector<int> tile_slot;  // per value: its slot in its group's tile scratch, or -1
};

// Whether an op runs at all (not folded, not a view, not a skipped transpose).
inline bool Runs(const Plan& plan, size_t op) {
  return !plan.folded_op[op] && !plan.view_op[op] && !plan.skipped_op[op];
}

// host_fused.cc: whether an op, were its inputs known at compile time, is still better made at run time,
// tile by tile in a fused group (large splats and iotas: folded, they would be memory to stream).
bool MadeInTiles(const mps::Graph& g, const mps::Op& op);
bool TileKind(mps::OpKind kind);  // kinds whose kernels can run one tile (every unary/binary row, ...)
// host_fused.cc: forms the fused groups and the run order (JMP_HOST_FUSE=0: no groups), and runs one group.
void FuseElementwise(Plan& plan);
Status RunFused(const Plan& plan, const FusedGroup& group, uint8_t* arena, const std::vector<const uint8_t*>& inputs);

std::unique_ptr<Plan> MakePlan(const mps::Graph& g);

// Where value v lives in a run: the plan's folded constants, one of `inputs`, or the arena.
uint8_t* ValuePtr(const Plan& plan, uint8_t* arena, const std::vector<const uint8_t*>& inputs, int v);

// `outputs_alias_inputs`: some output is an input's memory (a donated buffer reused).
// writable_carries: the caller (a while loop) lets in-place carries (Plan::in_place_carry_op) write
// into their input buffers, and passes that same buffer as the matching output.
Status ExecutePlan(const Plan& plan, const std::vector<const uint8_t*>& inputs, const std::vector<uint8_t*>& outputs,
                   bool outputs_alias_inputs = false, bool writable_carries = false);

// Runs op `op_index` of the plan's graph (the planner also runs it to fold constants).
Status RunOp(const OpArgs& a, const Plan& plan, size_t op_index);

Status RunWhile(const OpArgs& a, const Plan& cond, const Plan& body);
Status RunIf(const OpArgs& a, const Plan& then_plan, const Plan& else_plan);

}  // namespace jmp::exec::host

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
  // Chains of multiply-adds, each reading the last over one multiplier, whose addends are splats or
  // picked from splats by selects on at most two predicates (a polynomial's coefficients: erf_inv's come
  // in three sets), run as one loop at the chain's last multiply-add (PickedChain). Per op: whether it is
  // absorbed so (never run, its output never made). Per multiply-add of a chain: the previous one (or
  // -1), which input is the multiplier, the selects it absorbs, and where its addend comes from for
  // each value of the predicates (index p + 2q): an input of an op, both as positions in `ops`. The
  // last of a chain also holds the chain's predicates (how many, and an input of an op reading each).
  // A guarded link, y = select(pred, y * w + c, y) (or with the select's operands swapped), is held by
  // the select, which absorbs its multiply-add (`ma`; else the link's own position), and applies only
  // where the predicate has the select's polarity (`applies`: bit p + 2q, PickedChain::applies).
  std::vector<uint8_t> absorbed;
  struct Input {
    int op = -1, input = 0;
  };
  struct Pick {
    int prev = -1, w = 1;
    int ma = -1;
    uint8_t applies = 15;
    std::vector<int> selects;
    std::array<Input, 4> leaf;
    int preds = 0;
    std::array<Input, 2> pred;
    bool picked() const { return leaf[0].op >= 0; }
  };
  std::vector<Pick> picks;
  // Per op: a BitwiseOr of a left and a right shift of one unsigned value by splats, each shift's output
  // read by it alone, runs as one loop (OpArgs::or_of_shifts); the shifts' positions, absorbed, or -1.
  std::vector<std::array<int, 2>> or_of_shifts;
  int slots = 0;  // tile scratch slots
  size_t slot_bytes = 0;
  std::string profile_key;
};

// A dynamic slice, lowered as a GatherND of one index row, reads one contiguous block of its data at an
// offset known only at run time: its result is a view of the data (ValuePtr adds the offset), not a
// copy. A scan over stacked layers reads each layer's weights this way, and XLA reads them in place.
// A static Slice of one contiguous block (a row of a stacked array, the halves of a [2, n] one) is a
// view at a fixed offset: no indices.
struct SliceView {
  int data = -1;
  int indices = -1;                   // int32 or int64, one row of dims.size() components; -1: fixed
  std::vector<int64_t> dims;          // the data's dims the row indexes
  std::vector<int64_t> stride_bytes;  // per indexed dim
  int64_t fixed_offset = 0;           // bytes, when there are no indices
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
  std::vector<int> alias_of;                                 // per value: the value whose storage it shares, or -1
  std::vector<uint8_t> view_op;                              // per op: 1 when it is such a view (skipped at run time)
  std::vector<std::array<int, 2>> matmul_source;             // per op: a MatMul operand read untransposed, or -1
  std::vector<std::array<StridedMatrix, 2>> matmul_strided;  // per op: how, when strided (ld > 0)
  std::vector<uint8_t> skipped_op;             // per op: 1 for a Transpose every reader of which reads its source
  std::vector<uint8_t> matmul_transposed_out;  // per op: a MatMul writing its result transposed (OpArgs)
  // Per op: a MatMul that adds its product, times matmul_alpha, to this value (GEMM's beta = 1), or -1.
  // The Add or MultiplyAdd by a splat that was its product's one reader becomes a view of its result.
  std::vector<int> matmul_addend;
  std::vector<double> matmul_alpha;
  // Per op: 1 for a MatMul that runs at the same time as the MatMul at the next step (RunMatMulPair),
  // which reads nothing made at or after this step. Values either reads or writes live until both end.
  std::vector<uint8_t> paired_matmul;
  std::vector<int> slice_view;  // per value: its index in slice_views, or -1
  std::vector<SliceView> slice_views;
  // Per value: a block of a while body's in-place carry (an index in slice_views: the carry and the
  // in-place scatter's indices) the value is made straight in when the run lets carries be written, or
  // -1. The value is that scatter's update, so the scatter is then skipped (skipped_scatter): a scan's
  // saved activations and stacked gradients are made where they belong, not copied there.
  std::vector<int> made_in_carry;
  std::vector<uint8_t> skipped_scatter;  // per op
  // Per value: the graph output it is made straight into when no output is an input's memory (no copy
  // out at the end of the run), or -1.
  std::vector<int> direct_output;
  // Per value: 1 when no op reads it and it is no graph output (a loop's carry nothing reads after the
  // loop: a scan's weights, which RunWhile then need not copy out).
  std::vector<uint8_t> unread;
  // Per input p: the ScatterND/ScatterAlongAxis that is p's only reader and makes output p, or -1. In a
  // while body that scatter may write straight into p's buffer (RunWhile). Per op: the inverse.
  std::vector<int> in_place_carry_op;
  std::vector<int> in_place_op_input;
  std::vector<uint8_t> folded;
  // Per value: 1 when it is a folded Broadcast of one element (a loop's zero-initialised carry): a
  // while loop fills its carry with that element instead of copying the whole folded value in.
  std::vector<uint8_t> splat;
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

// The value whose storage v shares (v itself unless v is a view).
inline int Root(const Plan& plan, int v) {
  while (plan.alias_of[static_cast<size_t>(v)] >= 0) v = plan.alias_of[static_cast<size_t>(v)];
  return v;
}

// The storage op `i` reads as its operand j at run time: a MatMul reads a folded Transpose's source.
inline int ReadRoot(const Plan& plan, size_t i, size_t j) {
  int src = j < 2 ? plan.matmul_source[i][j] : -1;
  return Root(plan, src >= 0 ? src : plan.graph->ops[i].inputs[j]);
}

// Calls fn on every value whose storage reading v reads: v's root and, for a slice view, its data and
// indices (which must stay alive, unwritten and finished while the view is read).
template <typename F>
void ForEachStorage(const Plan& plan, int v, F&& fn) {
  v = Root(plan, v);
  fn(v);
  if (int s = plan.slice_view[static_cast<size_t>(v)]; s >= 0) {
    const SliceView& view = plan.slice_views[static_cast<size_t>(s)];
    ForEachStorage(plan, view.data, fn);
    if (view.indices >= 0) ForEachStorage(plan, view.indices, fn);
  }
  if (int s = plan.made_in_carry[static_cast<size_t>(v)]; s >= 0)
    ForEachStorage(plan, plan.slice_views[static_cast<size_t>(s)].indices, fn);
}

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
struct RunMemory;
Status RunFused(const Plan& plan, const FusedGroup& group, const RunMemory& memory);

std::unique_ptr<Plan> MakePlan(const mps::Graph& g);

// The memory of one run of a plan: its arena, its inputs and, when results may be made straight in
// them (no output is an input's memory), its outputs.
struct RunMemory {
  uint8_t* arena;
  const std::vector<const uint8_t*>& inputs;
  const std::vector<uint8_t*>* outputs;  // null: results are made in the arena and copied out last
  bool writable_carries = false;         // ExecutePlan's
};

// Where value v lives in a run: the plan's folded constants, one of the inputs, an output, or the arena.
uint8_t* ValuePtr(const Plan& plan, const RunMemory& memory, int v);

// `outputs_alias_inputs`: some output is an input's memory (a donated buffer reused).
// writable_carries: the caller (a while loop) lets in-place carries (Plan::in_place_carry_op) write
// into their input buffers, and passes that same buffer as the matching output.
Status ExecutePlan(const Plan& plan, const std::vector<const uint8_t*>& inputs, const std::vector<uint8_t*>& outputs,
                   bool outputs_alias_inputs = false, bool writable_carries = false);

// The buffers op `op_index` reads and writes in a run, into a.in and a.out (empty before), and how a
// MatMul reads them (ExecutePlan's, per op and run; a bound plan's, once).
void BindOperands(const Plan& plan, const RunMemory& memory, size_t op_index, OpArgs& a);

// A plan run many times over the same buffers: a while loop's condition and body (host_bound_plan.cc).
// Each op's operand pointers are found once per binding, the small elementwise ops are called straight
// (SmallKernelFor) and the arena is held across runs, so a run does the ops' work and little else.
// Binding `b` (an iteration's parity) is made on its first run, over the buffers that run is given;
// its later runs use the same ones. Results are made as ExecutePlan makes them with outputs_alias_inputs
// false.
class ArenaLease;
class BoundPlan {
 public:
  BoundPlan(const Plan& plan, bool writable_carries);
  ~BoundPlan();
  BoundPlan(const BoundPlan&) = delete;
  BoundPlan& operator=(const BoundPlan&) = delete;
  // A while loop: runs cond (binding p, inputs[p], its result written through pred_out into `pred`) and,
  // while pred is true, body (binding p, inputs[p] -> outputs[p]), p = 0, 1, 0, ...; *parity is the p
  // the loop stopped at. Iterations whose ops all have small kernels call them and nothing else.
  static Status RunLoop(BoundPlan& cond, BoundPlan& body, const std::vector<const uint8_t*> (&inputs)[2],
                        const std::vector<uint8_t*> (&outputs)[2], const std::vector<uint8_t*>& pred_out,
                        const uint8_t& pred, int* parity);
  struct Binding;

 private:
  Status Bind(int b, const std::vector<const uint8_t*>& inputs, const std::vector<uint8_t*>& outputs);
  Status RunSlow(Binding& binding);
  const Plan& plan_;
  const bool writable_carries_, profile_;
  std::unique_ptr<ArenaLease> arena_;
  std::unique_ptr<Binding> bindings_[2];
};

// Runs op `op_index` of the plan's graph (the planner also runs it to fold constants).
Status RunOp(const OpArgs& a, const Plan& plan, size_t op_index);

// `outer`: the enclosing plan (its Plan::unread and Plan::splat).
Status RunWhile(const OpArgs& a, const Plan& cond, const Plan& body, const Plan& outer);
Status RunIf(const OpArgs& a, const Plan& then_plan, const Plan& else_plan);
// A user's Metal kernel, wherever the host runs it: its reference implementation.
Status RunMetalKernelReference(const OpArgs& a, const Plan& reference);

}  // namespace jmp::exec::host

// What the manual computation's files share (lower_manual.cc: the rule; lower_manual_read.cc: reading
// the op; lower_manual_unroll.cc: the body unrolled over the copies; lower_manual_collectives.cc:
// collectives between the copies; lower_manual_tiles.cc: each copy's piece of an operand and the
// results from the pieces; lower_sharding_constraint.cc). Their own namespace keeps these names apart
// from the file-local ones of the lowering's other files, which a unity build compiles alongside.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "lower/lower_context.h"
#include "lower/sharding.h"
#include "stablehlo/ir.h"
#include "support/status.h"

namespace jmp::mps::manual {

// The devices the body is lowered for: one per combination of the manual axes' coordinates, each the
// device whose auto-axis coordinates are 0.
struct Copies {
  std::vector<int64_t> device;      // per copy, its device id (partition id)
  std::vector<int> copy_of_device;  // per device id, its copy or -1
};

StatusOr<Copies> CopiesOf(const Mesh& mesh, const std::vector<int>& manual_axes);

// A manual computation as read from its op: either form (sdy.manual_computation with its region, or
// the call to an outlined body with frontend attributes), its shardings and its manual axes.
struct ManualOp {
  const shlo::Func* body = nullptr;  // the call form's outlined body; null for the region form
  std::vector<SdySharding> ins, outs;
  Mesh mesh;
  std::vector<int> manual_axes;
};

bool IsManualOp(const shlo::Op& op);

StatusOr<ManualOp> ReadManualOp(LowerContext& cx);
// Operand i's piece for the device `device`, from the operand's value `global` (global over the op's
// manual axes).
StatusOr<int> OperandPiece(LowerContext& cx, const ManualOp& m, size_t i, int global, int64_t device);
// Result j from the copies' pieces `local` (one per copy of `copies`).
StatusOr<int> ResultFromPieces(LowerContext& cx, const ManualOp& m, size_t j, std::vector<int> local,
                               const Copies& copies);

// Lowers a body once per copy, op by op, so that a collective sees every copy's operands.
class Unroller {
 public:
  Unroller(LowerContext& cx, const Copies& copies, std::vector<int> axes)
      : cx_(cx), copies_(copies), axes_(std::move(axes)) {}

  // Lowers `func`'s body in each copy on `args[c]`; returns each copy's results.
  StatusOr<std::vector<std::vector<int>>> Call(const shlo::Func& func, const std::vector<std::vector<int>>& args,
                                               int depth);

  // Lowers `block` (of `func`) in each copy on `args[c]`. `outer[c]`: the scope copy c's block reads
  // other values from (none for a function's body).
  StatusOr<std::vector<std::vector<int>>> Run(const shlo::Func& func, const shlo::Block& block,
                                              const std::vector<std::vector<int>>& args, int depth,
                                              const std::vector<Scope*>& outer);

 private:
  Status Block(const shlo::Block& block, std::vector<Scope>& scopes, int depth);

  // A loop that holds a collective: one loop for every copy, carrying the copies' values side by side,
  // so that each iteration's collectives see every copy's operands. It runs while copy 0's condition
  // holds: on real devices copies that disagree on the trip count would wait forever in the
  // collective, so a program whose copies agree is the only well-defined one.
  Status Loop(const shlo::Op& op, std::vector<Scope>& scopes, int depth);

  // A branch (if, case) that holds a collective: every branch is lowered for every copy, inline, and
  // copy 0's predicate picks each copy's results, as copies that take different branches would wait
  // forever in the collective on real devices. Untaken branches run too, so a branch holding a loop
  // (which need not end there) or an op with effects (a host callback) is refused.
  Status Branches(const shlo::Op& op, std::vector<Scope>& scopes, int depth);

  // One subgraph holding `region`'s block lowered for every copy: its parameters are `params` (each
  // copy's k values, copy after copy) followed by the outer values the copies read (`captures`, each
  // once); its outputs are the copies' results, copy after copy.
  StatusOr<Graph> Region(const shlo::Region& region, std::vector<Scope>& scopes, const std::vector<TensorType>& params,
                         int depth, std::vector<int>* captures);

  Status Inline(const shlo::Op& op, std::vector<Scope>& scopes, int depth);

  // The groups of copies a collective combines, each in the order its ids list them. Ids are partition
  // ids (channel_handle or use_global_device_ids: cross-partition or flattened ids, the same with one
  // replica); without either the groups are of replicas, and with one replica each device is alone.
  StatusOr<std::vector<std::vector<size_t>>> Groups(const shlo::Op& op, const char* attr);

  // Reduces values[0..] in order with the op's body, applied elementwise.
  StatusOr<int> Reduce(const shlo::Op& op, const std::vector<int>& values, Scope& scope);

  // An all_reduce's fold over one group. In a program over several processes a body that is one
  // binary op on (accumulator, member), the usual sum, product, max or min, becomes one AllReduce of
  // that op, which each process's part of the program runs with the others (lower/process_part.h);
  // any other body is folded here, and the processes exchange the arguments instead.
  StatusOr<int> ReduceGroup(const shlo::Op& op, const std::vector<int>& values, const std::vector<size_t>& group,
                            Scope& scope);

  int Concat(const std::vector<int>& parts, int64_t dim);

  // Part `index` of `count` equal parts of v along dim.
  int Part(int v, int64_t dim, int64_t index, int64_t count);

  Status Collective(const shlo::Op& op, std::vector<Scope>& scopes);

  // One operand i over one group: each member's result i.
  Status Combine(const shlo::Op& op, size_t i, const std::vector<size_t>& group, const std::vector<int>& values,
                 std::vector<Scope>& scopes, std::vector<std::vector<int>>& out);

  // source_target_pairs: each target receives its source's operand; a copy no pair targets, zeros.
  Status Permute(const shlo::Op& op, const std::vector<std::vector<int>>& in, std::vector<std::vector<int>>& out);

  // A manual computation inside this one: its body unrolled over the devices of both computations'
  // manual axes, each inner copy reading its piece of its outer copy's operands; each outer copy's
  // results joined from its inner copies' pieces.
  Status Nested(const shlo::Op& op, std::vector<Scope>& scopes, int depth);

  LowerContext& cx_;
  const Copies& copies_;
  std::vector<int> axes_;  // the manual axes the copies stand for
};

Status ShardingConstraint(LowerContext& cx);

}  // namespace jmp::mps::manual

// Manual computations (shard_map, pmap), in the two forms a plugin receives: Shardy's op
//   %o = sdy.manual_computation(%g) in_shardings=[...] out_shardings=[...] manual_axes={...} ({body})
// and Shardy's export for XLA:
//   %l = custom_call @xla.sdy.GlobalToLocalShape(%g)
//   %r = call @xla.sdy.manual_computation_body(%l) {mhlo.frontend_attributes = {xla.sdy.in_shardings,
//            xla.sdy.out_shardings, xla.sdy.manual_axes}}
//   %o = custom_call @xla.sdy.LocalToGlobalShape(%r)
// The program stays one global graph: the body is lowered once per device, on that device's slice of
// each argument, and the results are assembled from the devices' pieces. Collectives in the body become
// data movement between the copies (an all_reduce reduces the copies' operands in group order, as each
// device would), partition_id is each copy's device. With auto axes beside the manual ones, a copy
// stands for the devices that differ only along the auto axes (they compute the same).
#include <map>
#include <string>
#include <vector>

#include "lower/lower_context.h"
#include "lower/lower_families.h"
#include "lower/lower_manual.h"

namespace jmp::mps::manual {

namespace {

// Either form, at the top of the program: the body unrolled over the copies of the manual axes.
Status ManualComputation(LowerContext& cx) {
  const shlo::Op& op = cx.op();
  if (cx.manual_copies() > 0)
    return cx.Unsupported("a manual computation in a branch or loop of another one is not supported");
  JMP_ASSIGN_OR_RETURN(ManualOp m, ReadManualOp(cx));
  JMP_ASSIGN_OR_RETURN(Copies copies, CopiesOf(m.mesh, m.manual_axes));
  // Each copy's slice of each operand.
  const size_t n = copies.device.size();
  std::vector<std::vector<int>> args(n);
  for (size_t i = 0; i < op.operands.size(); ++i) {
    JMP_ASSIGN_OR_RETURN(int global, cx.In(i));
    for (size_t c = 0; c < n; ++c) {
      JMP_ASSIGN_OR_RETURN(int piece, OperandPiece(cx, m, i, global, copies.device[c]));
      args[c].push_back(piece);
    }
  }
  Unroller unroller(cx, copies, m.manual_axes);
  Scope* outer = &cx.scope();
  JMP_ASSIGN_OR_RETURN(
      std::vector<std::vector<int>> results,
      m.body ? unroller.Call(*m.body, args, 0)
             : unroller.Run(*outer->func, op.regions[0].blocks[0], args, 0, std::vector<Scope*>(n, outer)));
  cx.SetOp(op);
  for (size_t j = 0; j < op.results.size(); ++j) {
    std::vector<int> local(n);
    for (size_t c = 0; c < n; ++c) local[c] = results[c].at(j);
    JMP_ASSIGN_OR_RETURN(int global, ResultFromPieces(cx, m, j, std::move(local), copies));
    cx.BindShlo(op.results[j], global);
  }
  return Status::Ok();
}

}  // namespace

}  // namespace jmp::mps::manual

namespace jmp::mps {

bool IsManualComputationBody(const std::string& callee) {
  return callee.rfind("xla.sdy.manual_computation_body", 0) == 0;
}

void RegisterManualRules(std::map<std::string, LowerRule>& r) {
  // The shape conversions around the outlined body: the call takes and gives global values (it slices
  // and assembles them), so both pass their operands through.
  RegisterRule(r, "custom_call:xla.sdy.GlobalToLocalShape", &PassThrough);
  RegisterRule(r, "custom_call:xla.sdy.LocalToGlobalShape", &PassThrough);
  // Shardy's export marks a function's results with their shardings; @main's are read from its
  // attributes.
  RegisterRule(r, "custom_call:xla.sdy.FuncResultSharding", &PassThrough);
  RegisterRule(r, "sdy.sharding_constraint", &manual::ShardingConstraint);
  RegisterRule(r, kManualComputationRule, &manual::ManualComputation);
  RegisterRule(r, "sdy.manual_computation", &manual::ManualComputation);
}

}  // namespace jmp::mps

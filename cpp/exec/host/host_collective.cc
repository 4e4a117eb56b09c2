// AllReduce (op_kinds.def): the fold of a group's operands in group order, and in one process's part
// of a program over several processes the same fold over every process's members, the data of the
// others coming through exec/process_collectives.h.
#include <cstring>

#include "exec/host/host_kernels.h"
#include "exec/process_collectives.h"

namespace jmp::exec::host {

namespace {

// acc = acc o x over `count` elements, with the binary row's own kernel, as the op `step` (the
// combining row on two values of the result's type: a process's part may have one operand).
Status Combine(const mps::Op& step_op, const mps::Graph& graph, mps::BinaryOp combine, uint8_t* acc, const uint8_t* x,
               int64_t count) {
  if (count <= 0) return Status::Ok();
  OpArgs step{step_op, graph, {acc, x}, {acc}};
  step.count = count;
  return RunBinary(step, combine);
}

}  // namespace

Status RunAllReduce(const OpArgs& a) {
  const mps::AllReduceAttrs& attrs = a.op.Attrs<mps::AllReduceAttrs>();
  mps::BinaryOp combine;
  if (!mps::BinaryOpOf(attrs.combine, &combine)) return a.Unsupported("an all-reduce without a binary combiner");
  const mps::TensorType& t = a.OutType();
  const int64_t elements = t.NumElements();
  mps::Op step;
  step.kind = attrs.combine;
  step.inputs = {a.op.outputs[0], a.op.outputs[0]};
  step.outputs = a.op.outputs;
  step.location = a.op.location;
  const size_t bytes = t.ByteSize();
  if (attrs.processes.empty()) {
    if (bytes) std::memcpy(a.out[0], a.in[0], bytes);
    for (size_t k = 1; k < a.in.size(); ++k)
      JMP_RETURN_IF_ERROR(Combine(step, a.graph, combine, a.out[0], a.in[k], elements));
    return Status::Ok();
  }
  ProcessReduce reduce;
  reduce.processes.assign(attrs.processes.begin(), attrs.processes.end());
  reduce.operands.assign(a.in.begin(), a.in.end());
  reduce.out = a.out[0];
  reduce.elements = elements;
  reduce.element_bytes = jmp::ByteSize(t.dtype);
  reduce.combine = [&](uint8_t* acc, const uint8_t* x, int64_t count) {
    return Combine(step, a.graph, combine, acc, x, count);
  };
  return ReduceAcrossProcesses(reduce);
}

}  // namespace jmp::exec::host

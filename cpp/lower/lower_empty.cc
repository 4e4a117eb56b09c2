// Zero-element tensors never reach MPSGraph (Apple's PyTorch backend never hands it one either). What
// an op with one computes is mostly known without running it: results with no elements need no
// computation (they become empty constants, which placement gives the host), a reduction over an
// empty axis is its identity everywhere, a concatenation ignores its empty operands, a product over
// an empty contraction is zero, padding an empty tensor gives the padding value everywhere, and a
// scatter of no updates is its data. Any other op with an empty operand runs on the host (placement).
#include "lower/lower_context.h"

namespace jmp::mps {

namespace {

bool Empty(const TensorType& t) { return t.NumElements() == 0; }

// The identity a reduction of no elements gives, if `kind` is a reduction with one.
bool ReductionIdentity(OpKind kind, DType t, double* identity) {
  if (kind == OpKind::kReductionSum || kind == OpKind::kReductionOr) {
    *identity = 0;
  } else if (kind == OpKind::kReductionProduct || kind == OpKind::kReductionAnd) {
    *identity = 1;
  } else if (kind == OpKind::kReductionMaximum) {
    *identity = LowestValue(t);
  } else if (kind == OpKind::kReductionMinimum) {
    *identity = HighestValue(t);
  } else {
    return false;
  }
  return true;
}

}  // namespace

bool LowerContext::FoldEmpty(Op& op, const std::vector<TensorType>& outputs, std::vector<int>* ids) {
  // Effects (callbacks, loops and branches that may hold them, a user's kernel) are never skipped;
  // constants are what the others fold into.
  if (OpKindHostOnly(op.kind) || !op.subgraphs.empty() || op.kind == OpKind::kConstant ||
      op.kind == OpKind::kMetalKernel || outputs.empty())
    return false;
  bool all_empty = true;
  for (const TensorType& t : outputs) all_empty = all_empty && Empty(t);
  if (all_empty) {
    for (const TensorType& t : outputs) ids->push_back(ConstantData(t.dtype, t.shape, {}));
    return true;
  }
  bool empty_operand = false;
  for (int v : op.inputs) empty_operand = empty_operand || Empty(Type(v));
  if (!empty_operand || outputs.size() != 1) return false;
  const TensorType& out = outputs[0];
  double identity = 0;
  if (ReductionIdentity(op.kind, out.dtype, &identity) || op.kind == OpKind::kMatMul ||
      op.kind == OpKind::kIntegerMatMul) {  // the empty operand is the reduced or contracted one
    ids->push_back(Splat(out.dtype, out.shape, identity));
    return true;
  }
  if (op.kind == OpKind::kPad) {
    ids->push_back(Splat(out.dtype, out.shape, op.Attrs<PadAttrs>().value));
    return true;
  }
  if ((op.kind == OpKind::kScatterND || op.kind == OpKind::kScatterAlongAxis) && op.inputs.size() == 3 &&
      Empty(Type(op.inputs[1]))) {
    ids->push_back(op.inputs[0]);
    return true;
  }
  if (op.kind == OpKind::kConcat) {
    std::vector<int> kept;
    for (int v : op.inputs)
      if (!Empty(Type(v))) kept.push_back(v);
    if (kept.size() == 1) {
      ids->push_back(kept[0]);
      return true;
    }
    op.inputs = std::move(kept);
  }
  return false;
}

}  // namespace jmp::mps

// The MPS op graph as MPSGraph calls: one call per op (op_kinds.def names it), a switch over the op
// table with nothing to decide. Each call's result type, as MPSGraph inferred it, is checked against the
// op graph's, so a disagreement between the lowering and MPSGraph is an error naming the op, not a
// wrong result.
#pragma once

#include "exec/metal/metal_api.h"
#include "mps/graph.h"
#include "support/dtype.h"
#include "support/status.h"

namespace jmp::exec::metal {

// support/dtype.def's metal column; kInvalid where MPSGraph has no such type.
DataType DataTypeOf(DType t);
// The same, an error naming the op (or "argument") where MPSGraph has none.
StatusOr<DataType> ToMPS(DType t, const mps::Op* op);
// The MPSGraph shape of a tensor type: rank 0 runs as [1] (as Apple's PyTorch backend runs it; the bytes
// are the same), so the lowering gives rank-sensitive calls (gather, scatter) operands of rank >= 1.
Shape ShapeOf(const mps::TensorType& t);
ShapedType ShapedTypeOf(const mps::TensorType& t);

// Builds the tensors of the graph given its parameters' tensors. `mismatch` gets the first call whose
// result type MPSGraph inferred otherwise than the op graph says (Ok when none): an error to report
// once compiling has had its say.
StatusOr<Tensors> BuildGraph(Graph& graph, const mps::Graph& g, const Tensors& params, Status* mismatch);

}  // namespace jmp::exec::metal

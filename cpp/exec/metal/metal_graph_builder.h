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

// Builds the tensors of one (sub)graph of `graph` given its parameters' tensors.
StatusOr<Tensors> BuildGraph(Graph& graph, const mps::Graph& g, const Tensors& params);

}  // namespace jmp::exec::metal

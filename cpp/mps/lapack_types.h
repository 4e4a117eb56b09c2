// The LAPACK rows' operand and result types (op_kinds.def), in one place: the lowering emits these
// results and the verifier checks an op against them, so the two cannot disagree.
#pragma once

#include <vector>

#include "mps/graph.h"
#include "mps/op_attrs.h"
#include "support/status.h"

namespace jmp::mps {

// The result types of LAPACK op `kind` with these operands and flags (which read only those op_kinds.def
// names for the row), or an error saying which operand does not fit the row: its kernel indexes by these
// shapes, so nothing else is accepted. Not a LAPACK kind: an error.
StatusOr<std::vector<TensorType>> LapackResultTypes(OpKind kind, const std::vector<TensorType>& inputs,
                                                    const LapackAttrs& flags);

}  // namespace jmp::mps

// MPSGraph's sorts and min/max reductions take only the Ordered types (op_kinds.def): f16, f32, int32
// and int64 (f64 on the host). Every other real type is mapped onto one of them with its order kept,
// as Apple's PyTorch backend does before it sorts or reduces, and mapped back afterwards.
#pragma once

#include "lower/lower_context.h"

namespace jmp::mps {

// x as an Ordered type with the same order: bool and 8- and 16-bit integers widened to int32, uint32
// and uint64 with their top bit flipped and read as int32 and int64, bfloat16 widened to float32
// (every cast exact); the Ordered types as they are.
int ToOrdered(LowerContext& cx, int x);
// ToOrdered's inverse for values that were of type t.
int FromOrdered(LowerContext& cx, int y, DType t);

}  // namespace jmp::mps

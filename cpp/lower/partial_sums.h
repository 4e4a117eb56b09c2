// Values held as partial sums in a program over several devices (Shardy's unreduced axes: each device
// holds a part, the value is their sum). The graph carries such a value's parts stacked along a new
// leading dimension (TileSharding in lower.h); where the program reads the value itself, it reads the
// sum, and where it hands the value on as parts (a manual computation's operand, @main's result) it
// hands on the stack it was summed from, so each device keeps its own part.
#pragma once

#include <cstdint>

#include "lower/lower_context.h"

namespace jmp::mps {

// The sum of the stack's parts, added in part order; remembered as the sum of that stack.
int SumOfParts(LowerContext& cx, int stack);

// `value` as a stack of `parts` parts: the stack it is the sum of, when that has `parts` parts; else the
// value itself as the first part and zeros as the others (a split that sums to it).
int PartsOf(LowerContext& cx, int value, int64_t parts);

// An argument `value` lying on the devices as `in` (split, not in parts), returned in parts as `out` says:
// as XLA reshards it, each part keeps the tiles its devices hold (a tile held by several parts goes to
// the first) and is zero elsewhere.
int PartsByOwner(LowerContext& cx, int value, const TileSharding& in, const TileSharding& out);

// A dot_general result that a sharding splits into `parts` partial sums, as XLA's partitioner leaves
// it when the contraction is split over the unreduced axes: part p is the product of the operands' p-th
// blocks along their contracting dimension. Recorded as `value`'s parts; nothing when `value` is no
// dot_general with one contracting dimension that splits evenly, or already has parts.
void SplitDotIntoParts(LowerContext& cx, int value, int64_t parts);

// The same for a sum over axes, as XLA leaves a reduction over a dimension split across the unreduced
// axes: part p is the sum of the operand's p-th block along the first reduced dimension that splits
// evenly, or of its p-th part where the operand itself is in as many parts. Nothing when `value` is no
// such sum, or already has parts.
void SplitSumIntoParts(LowerContext& cx, int value, int64_t parts);

}  // namespace jmp::mps

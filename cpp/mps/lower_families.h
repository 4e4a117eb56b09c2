// Hooks between op families that share a StableHLO op: reduce_window serves both cumulative scans
// (lower_cumulative.cc) and pooling (lower_pooling.cc). Each returns false when the op is not its.
#pragma once

#include "mps/lower_context.h"

namespace jmp::mps {

StatusOr<bool> TryLowerCumulative(LowerContext& cx);  // reduce_window as a prefix scan
StatusOr<bool> TryLowerPooling(LowerContext& cx);     // reduce_window as a pooling window, or the general path

}  // namespace jmp::mps

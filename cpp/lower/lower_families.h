// Hooks between op families that share a StableHLO op: reduce_window serves both cumulative scans
// (lower_cumulative.cc) and pooling (lower_pooling.cc), each returning false when the op is not its;
// func.call serves manual computations' bodies (lower_manual.cc).
#pragma once

#include "lower/lower_context.h"

namespace jmp::mps {

StatusOr<bool> TryLowerCumulative(LowerContext& cx);  // reduce_window as a prefix scan
StatusOr<bool> TryLowerPooling(LowerContext& cx);     // reduce_window as a pooling window, or the general path

// Whether a func.call's callee is a manual computation's body (its rule is "call:" + that prefix).
bool IsManualComputationBody(const std::string& callee);
inline constexpr const char* kManualComputationRule = "call:xla.sdy.manual_computation_body";

// Binds each result to the matching operand (barriers, sharding annotations: nothing on one device).
Status PassThrough(LowerContext& cx);

// GatherAlongAxis(data, indices) along `axis`; indices have the output's shape.
int GatherAlongAxis(LowerContext& cx, int data, int indices, int64_t axis);

// stablehlo.pad's full semantics (interior and negative padding; `value` a rank-0 tensor).
StatusOr<int> PadGeneral(LowerContext& cx, int x, int value, const std::vector<int64_t>& low,
                         const std::vector<int64_t>& high, const std::vector<int64_t>& interior);

}  // namespace jmp::mps

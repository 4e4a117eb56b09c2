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

// GatherND(data, indices [..., k]) -> [..., data.shape[k:]] and ScatterND(data, updates, indices) with no
// batch dims. MPSGraph's ND rules (result or updates of rank (P - k) + Q - 1, data of rank P > 0) must
// hold with every rank-0 tensor run as [1], as the Metal executor runs it: a single index vector is
// made [1, k] and the result or updates [1, ...] around the call, so none of them has rank 0.
int GatherND(LowerContext& cx, int data, int indices);
int ScatterND(LowerContext& cx, int data, int updates, int indices, ScatterMode mode);

// stablehlo.pad's full semantics (interior and negative padding; `value` a rank-0 tensor).
StatusOr<int> PadGeneral(LowerContext& cx, int x, int value, const std::vector<int64_t>& low,
                         const std::vector<int64_t>& high, const std::vector<int64_t>& interior);

}  // namespace jmp::mps

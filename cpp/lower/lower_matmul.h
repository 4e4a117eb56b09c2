// Every matrix product the lowering emits goes through MatMul here, which keeps each MPSGraph call
// within what it computes correctly on every macOS the plugin supports (op_kinds.def's MatMul row).
#pragma once

#include <cstdint>

#include "lower/lower_context.h"

namespace jmp::mps {

// Before macOS 14.4 MPSGraph's matmul is silently wrong when a dimension exceeds 2^15 (recorded by
// Apple's PyTorch backend, which tiles such products); the floor is macOS 14.0.
inline constexpr int64_t kMatMulMaxDim = 32768;
// complex64 matmul is wrong when K exceeds 2048 (recorded by Apple's PyTorch backend likewise).
inline constexpr int64_t kMatMulMaxComplexK = 2048;

// a [..., M, K] x b [..., K, N] -> [..., M, N] in a's dtype (the batch dims equal): IntegerMatMul for
// integers, otherwise MatMul calls of at most kMatMulMaxDim in M, N and K (kMatMulMaxComplexK in K for
// complex), tiles of M and N concatenated and chunks of K summed (f16/bf16 chunks in f32, rounded
// once at the end, as one call would).
int MatMul(LowerContext& cx, int a, int b);

// dot_general of lhs and rhs with these batch (lb, rb) and contracting (lc, rc) dimensions, computed in
// `dtype`: [batch..., lhs free..., rhs free...].
StatusOr<int> DotValue(LowerContext& cx, int lhs, int rhs, const std::vector<int64_t>& lb,
                       const std::vector<int64_t>& rb, const std::vector<int64_t>& lc, const std::vector<int64_t>& rc,
                       DType dtype);

}  // namespace jmp::mps

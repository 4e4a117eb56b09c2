// The vocabulary the matrix factorisations (lower_linalg.cc, lower_eigh.cc) are written in: picking a
// row or column by a runtime index, masks by coordinate, and loops built as one MPS While whose body
// is whole-matrix ops.
#pragma once

#include <functional>
#include <vector>

#include "lower/lower_context.h"

namespace jmp::mps {

// x's slice at index i (a rank-0 int32 value) along `axis`, the axis kept with size 1.
int PickAlong(LowerContext& cx, int x, int i, size_t axis);

// Lanes of `shape` whose coordinate along `axis` compares to i (rank-0 int32) as `kind` says.
int CoordinateIs(LowerContext& cx, OpKind kind, const Shape& shape, size_t axis, int i);

// 1 on the diagonal and 0 elsewhere, of shape `mat` [..., m, n] (identity matrices when square), in `t`.
int Identity(LowerContext& cx, const Shape& mat, DType t);

// x summed over `axes`, kept with size 1.
int SumOver(LowerContext& cx, int x, std::vector<int64_t> axes);

// Whether each matrix of x [..., m, n] holds a NaN: bool [..., 1, 1].
int AnyNaNPerMatrix(LowerContext& cx, int x);

// x with its last two axes swapped.
int SwapLastTwo(LowerContext& cx, int x);

// The float type a factorisation computes in: float32 (f16/bf16 widened), or an error naming t.
StatusOr<DType> FactorisationType(LowerContext& cx, DType t);

// A loop as one While. Its condition and body run in the loop's own graphs: they may use only the
// values they are given (value ids are per graph), and types and shapes copied from outside.
using LoopCondition = std::function<int(const std::vector<int>& carries)>;  // -> bool scalar
using LoopStep = std::function<StatusOr<std::vector<int>>(const std::vector<int>& carries)>;
StatusOr<std::vector<int>> WhileLoop(LowerContext& cx, const std::vector<int>& carries, const LoopCondition& cond,
                                     const LoopStep& step);

// body(i, carries) -> next carries for i = 0 .. n-1 (i a rank-0 int32); the final carries.
using CountedBody = std::function<StatusOr<std::vector<int>>(int i, const std::vector<int>& carries)>;
StatusOr<std::vector<int>> CountedLoop(LowerContext& cx, int64_t n, const std::vector<int>& carries,
                                       const CountedBody& body);

}  // namespace jmp::mps

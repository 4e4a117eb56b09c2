// Decompositions other op families reuse.
#pragma once

#include "lower/lower_context.h"

namespace jmp::mps {

int ComplexAbs(LowerContext& cx, int z);           // |z| in the parts' type, without overflow
int ComplexPower(LowerContext& cx, int x, int y);  // x^y for complex64 and complex128
// Signed integers whose order is IEEE totalOrder of the floats x (what TOTALORDER compares and sorts use).
int TotalOrderKey(LowerContext& cx, int x);
// IsNaN / IsFinite / IsInfinite of x: a bool tensor of x's shape (cx.Unary would type it as x).
int Predicate(LowerContext& cx, OpKind kind, int x);
// expm1 and log1p of float32 or float64 values, accurate near 0 (Kahan's and Goldberg's formulas).
int Expm1Real(LowerContext& cx, int x);
int Log1pReal(LowerContext& cx, int x);
// The op being lowered (sine, cosine, tan, tanh, expm1, log1p, rsqrt, logistic, ...) on complex64 or complex128,
// decomposed into real arithmetic and the complex ops MPSGraph has (lower_complex_math.cc).
Status LowerComplexMath(LowerContext& cx);
// stablehlo.reduce_precision on float16/bfloat16/float32/float64 (lower_reduce_precision.cc).
Status ReducePrecision(LowerContext& cx);

}  // namespace jmp::mps

// Decompositions other op families reuse.
#pragma once

#include "mps/lower_context.h"

namespace jmp::mps {

int ComplexAbs(LowerContext& cx, int z);            // |z| as f32, without overflow
int ComplexPower(LowerContext& cx, int x, int y);   // x^y for complex64
// Signed integers whose order is IEEE totalOrder of the floats x (what TOTALORDER compares and sorts use).
int TotalOrderKey(LowerContext& cx, int x);
// IsNaN / IsFinite / IsInfinite of x: a bool tensor of x's shape (cx.Unary would type it as x).
int Predicate(LowerContext& cx, OpKind kind, int x);

}  // namespace jmp::mps

// Decompositions other op families reuse.
#pragma once

#include "mps/lower_context.h"

namespace jmp::mps {

int ComplexAbs(LowerContext& cx, int z);            // |z| as f32, without overflow
int ComplexPower(LowerContext& cx, int x, int y);   // x^y for complex64
// Signed integers whose order is IEEE totalOrder of the floats x (what TOTALORDER compares and sorts use).
int TotalOrderKey(LowerContext& cx, int x);

}  // namespace jmp::mps

// Sharding annotations inside regions (a reduction's, a scatter's or a sort's body, a loop's, a
// branch's): JAX with explicit meshes constrains even the scalars of a reduction body. They say nothing
// about values local to a region (each region runs as one program on one device's data), and every
// recognizer of a body's pattern would have to look through them, so they are removed before lowering:
// sdy.sharding_constraint and custom_call @Sharding (and the builtin casts around them), each use of
// their result reading their operand, and what they stated kept for that operand
// (Func::region_shardings: a loop's result takes its body's constraint).
// @main's own block keeps its annotations (they tell where results lie: lower/result_shardings.cc); a
// called function's annotation of what it returns becomes that result's sharding.
#pragma once

#include "stablehlo/ir.h"

namespace jmp::shlo {

void ForwardRegionShardings(Module& module);

}  // namespace jmp::shlo

// Before the multiply-add rule (lower_multiply_add.h) looks for products: the rewrites of float
// arithmetic that XLA:CPU makes before its LLVM backend contracts (its algebraic simplifier and constant
// folding), then the exact negation moves of LLVM's instruction combiner. docs/multiply-add.md states
// the rule they are part of.
#pragma once

#include "mps/graph.h"

namespace jmp::mps {

// Rewrites `graph` (not its subgraphs) in place.
void SimplifyFloatArithmetic(Graph& graph);

}  // namespace jmp::mps

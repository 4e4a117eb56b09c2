// XLA's common-subexpression elimination, which runs before XLA:CPU fuses and contracts: an op equal to
// an earlier one (same kind, same operands, same result type) is that one. JAX's programs repeat work
// that XLA then computes once (erf_inv's log of the same value in two branches), and which products an
// add reads alone depends on it (docs/multiply-add.md).
#pragma once

#include "mps/graph.h"

namespace jmp::mps {

// Rewrites `graph` and its subgraphs in place.
void EliminateCommonOps(Graph& graph);

}  // namespace jmp::mps

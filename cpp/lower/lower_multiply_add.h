// The lowering's last step: float multiplies whose one reader is an add or a subtract become one
// MultiplyAdd (op_kinds.def), rounded once, as XLA:CPU computes them.
#pragma once

#include "mps/graph.h"

namespace jmp::mps {

// Rewrites `graph` and its subgraphs in place.
void ContractMultiplyAdds(Graph& graph);

}  // namespace jmp::mps

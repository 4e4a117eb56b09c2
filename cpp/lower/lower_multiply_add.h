// The lowering's last step: where XLA:CPU rounds a float product and the add or subtract reading it
// once (an FMA), the pair becomes one MultiplyAdd (op_kinds.def), after the simplifications XLA:CPU
// makes first (lower_float_simplify.h). docs/multiply-add.md states the rule.
#pragma once

#include "mps/graph.h"

namespace jmp::mps {

// Rewrites `graph` and its subgraphs in place.
void ContractMultiplyAdds(Graph& graph);

}  // namespace jmp::mps

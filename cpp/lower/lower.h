// The lowering: StableHLO (as read by cpp/stablehlo) into the MPS op graph. Everything StableHLO can
// say that MPSGraph cannot is decomposed here, in portable code.
#pragma once

#include "mps/graph.h"
#include "stablehlo/ir.h"
#include "support/status.h"

namespace jmp::mps {

// Lowers the module's public "main" function (func.call is inlined).
StatusOr<Graph> LowerModule(const shlo::Module& module);

}  // namespace jmp::mps

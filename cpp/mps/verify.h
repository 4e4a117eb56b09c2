// Checks an MPS op graph's shape invariants before any executor runs it.
#pragma once

#include "mps/graph.h"
#include "support/status.h"

namespace jmp::mps {

Status VerifyGraph(const Graph& graph);

}  // namespace jmp::mps

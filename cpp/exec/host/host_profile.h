// JMP_HOST_PROFILE=1: the host executor times every op it runs and, at process exit, prints the
// total time per op kind (and element type) to stderr, slowest first. Off by default: one getenv
// at start-up, then one branch per op.
#pragma once

#include <chrono>
#include <string>

#include "mps/graph.h"

namespace jmp::exec::host {

bool ProfilingEnabled();
void RecordOpTime(const mps::Op& op, const mps::Graph& graph, std::chrono::nanoseconds elapsed);
void RecordTime(const std::string& key, std::chrono::nanoseconds elapsed);  // e.g. a fused group

}  // namespace jmp::exec::host

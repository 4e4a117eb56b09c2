// How much work one run of an MPS op graph does, bounded before it runs: what decides whether the
// caller's thread may run it inline (cheap) or it goes to the device's worker (Execute returns at once).
// A loop counts its body once per iteration, so its trip count must be known: a counter the condition
// compares with a constant, started from a constant and stepped by one each iteration (what fori_loop
// and scan lower to). A loop whose trip count depends on data is unbounded.
#pragma once

#include <cstdint>
#include <optional>

#include "mps/graph.h"

namespace jmp::exec {

// Work units: about one element operation each (a multiply-add of a matrix product, an element an
// elementwise op reads or writes), plus a fixed cost per op run, which dominates small ops. Infinity
// when some loop's trip count is unknown.
double EstimateWork(const mps::Graph& graph);

// The iterations of `loop` (a While op of `graph`), when its counter pattern is found; nullopt otherwise.
std::optional<int64_t> StaticTripCount(const mps::Graph& graph, const mps::Op& loop);

}  // namespace jmp::exec

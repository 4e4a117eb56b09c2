// Placement: which executor runs each op of an MPS op graph, and the segments that cuts the graph into.
// MPSGraph has no float64 or complex128 and no LAPACK, random-bit or callback calls; such ops run on
// the host executor, inside the same executable, over the same (shared-storage) memory. The rule is
// computed the same way everywhere, so the cuts a Mac makes are the cuts tests see on Linux.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "mps/graph.h"

namespace jmp::mps {

enum class Where : uint8_t { kMetal, kHost };
std::string_view WhereName(Where where);  // "metal" or "host"

// Whether `dtype` has an MPSDataType (everything but float64 and complex128).
bool MetalHasDType(DType dtype);

// Metal's side of the support table: the op's kind has an MPSGraph call (not a JMP_HOST_OP row), every
// operand and result has an MPSDataType, a control-flow op's subgraphs hold only such ops (a loop
// whose body needs the host, or holds a user's Metal kernel, runs on the host whole, rather than crossing
// executors every iteration),
// no operand or result (nor a subgraph's parameter) has zero elements (MPSGraph is never handed an
// empty tensor, as Apple's PyTorch backend never hands it one: the lowering folds what it can, and
// the rest runs on the host), and the self-check has not found the op's (kind, dtype), or its shape
// class, wrong on this machine (exec/capabilities.h).
bool MetalRuns(const Graph& graph, const Op& op);

// Whether any of `values` of `graph` has zero elements.
bool AnyEmpty(const Graph& graph, const std::vector<int>& values);

// A run of ops on one executor, as a graph of its own. Its parameters are outer values that earlier
// segments made or the executable's inputs; its results are the outer values later segments read or
// the executable returns. Constants and iotas an op needs, and reshapes, broadcasts, casts and
// elementwise ops of them only, are recomputed inside the segment rather than passed between executors.
struct Segment {
  Where where = Where::kMetal;
  Graph graph;
  std::vector<int> inputs;   // outer value ids: graph.inputs[i] holds inputs[i]
  std::vector<int> outputs;  // outer value ids: graph.outputs[k] holds outputs[k]
  std::vector<int> returns;  // per result k: the executable's output index it is, or -1 (read later only)
  std::vector<size_t> ops;   // indices of the outer graph's ops it runs, in its order
};

struct Placement {
  std::vector<Where> op_where;    // per outer op
  std::vector<Segment> segments;  // in execution order; one segment when no cut is needed
};

// Orders the ops so that each executor takes every op it can before handing over (fewer cuts), keeping
// data dependencies and the relative order of host-only ops (callbacks have effects), and cuts there.
Placement PlaceGraph(const Graph& graph);

// The graph as it runs: segment by segment, each op with its executor.
std::string PlacementToString(const Graph& graph, const Placement& placement);

}  // namespace jmp::mps

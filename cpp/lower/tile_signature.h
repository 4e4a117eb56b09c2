// A program over several devices with each device's shards as its inputs and outputs. The lowering's
// graph takes and returns global values: run as it is, every sharded argument would be assembled from
// its shards first, and every device's shard cut out of the global result after. This pass gives the
// same graph one input per tile of each sharded argument and one output per tile of each sharded
// result (tiles in row-major order; a whole one stays one), so the shards go in and come out as they
// are. A manual computation's body reads its slice of an argument, which is now a tile input, and its
// result is the concatenation of the devices' pieces, each of which is now a tile output: for the
// usual shard_map nothing is assembled or cut at all. Where the graph needs a global value after all,
// it concatenates the tiles itself, and a reduction of such a value reduces each tile and combines the
// partial results instead.
#pragma once

#include <vector>

#include "lower/lower.h"
#include "mps/graph.h"

namespace jmp::mps {

// What a program over tiles moves between devices, in XLA's words: arguments assembled whole from their
// shards (all-gathers) and reductions over a split dimension, each device reducing its own shards and the
// partial results combined (all-reduces).
struct TileTraffic {
  int64_t all_gathers = 0;
  int64_t all_reduces = 0;
};

// The graph over tiles. Its inputs are, argument by argument, the argument (whole) or its tiles; its
// outputs likewise per result. `traffic`, when given, receives what it moves between devices.
StatusOr<Graph> TileSignature(const Graph& graph, const Signature& signature, TileTraffic* traffic = nullptr);

// The graph with only the outputs `keep` says, and without the ops only the others needed (a process
// of several computes only its own devices' tiles). Its inputs stay as they are.
Graph KeepOutputs(const Graph& graph, const std::vector<bool>& keep);

}  // namespace jmp::mps

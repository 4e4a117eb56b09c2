// The lowering: StableHLO (as read by cpp/stablehlo) into the MPS op graph. Everything StableHLO can
// say that MPSGraph cannot is decomposed here, in portable code.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mps/graph.h"
#include "stablehlo/ir.h"
#include "support/status.h"

namespace jmp::mps {

// How an argument or result of a program for several devices lies on them: cut into tiles[k] pieces
// along dimension k (tiles numbered row-major), the device at position d of the executable's devices
// holding tile device_tile[d]. Empty `tiles`: every device holds the whole array.
//
// Partial sums (Shardy's unreduced axes): with parts > 1 the value is the sum of `parts` arrays and
// each device holds its tile of one of them. The graph carries them stacked along a new leading
// dimension, which tiles[0] (== parts) cuts, so `tiles` has one entry more than the value has
// dimensions and a device's tile counts the part first.
struct TileSharding {
  std::vector<int64_t> tiles;
  std::vector<int64_t> device_tile;
  int64_t parts = 1;
};

// How many tiles a sharding cuts a value (its stack of parts) into: 1 when whole.
inline int64_t TileCount(const TileSharding& sharding) {
  int64_t n = 1;
  for (int64_t t : sharding.tiles) n *= t;
  return n;
}

// The devices a program is compiled for (XLA's build options): partitions of one program (SPMD, what
// jit and shard_map compile) times replicas of it.
struct Partitioning {
  int64_t num_replicas = 1;
  int64_t num_partitions = 1;
  // The devices belong to several processes: an all_reduce over a manual computation's devices is one
  // AllReduce op (op_kinds.def), which each process's part of the program runs with the others.
  bool across_processes = false;
  int64_t num_devices() const { return num_replicas * num_partitions; }
};

// What a caller of the lowered program sees of @main, as the module declares it: the graph computes
// on narrow types (int4, float8) in their storage type, but buffers hold them as declared.
struct Signature {
  std::vector<DType> input_dtypes;   // per graph input
  std::vector<DType> output_dtypes;  // per graph output
  // Per graph output, the memory kind @main places it in (mhlo.memory_kind: jit's out_shardings with
  // a memory kind); "device" when unmarked.
  std::vector<std::string> output_memory_kinds;
  // Buffer donation, per input: the output that may reuse the input's memory (tf.aliasing_output) or
  // -1, and whether the input is donated at all (aliased or jax.buffer_donor).
  std::vector<int64_t> aliased_output;
  std::vector<bool> donated;
  // For a program over several devices, per input and per output: how it lies on them. Empty for one.
  std::vector<TileSharding> input_shardings;
  std::vector<TileSharding> output_shardings;
};

struct LoweredProgram {
  Graph graph;  // verified
  Signature signature;
};

// Lowers the module's public "main" function (func.call is inlined). For several devices, @main takes and
// returns global values and its manual regions are unrolled once per device (lower_manual.cc).
StatusOr<LoweredProgram> LowerModule(const shlo::Module& module, const Partitioning& partitioning = {});

}  // namespace jmp::mps

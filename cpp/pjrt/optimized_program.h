// What XLA's side of the C API learns of a compiled program for several devices when it asks for the
// "optimized program": an MLIR module with @main's signature as one device sees it (its shard of each
// argument and result, as in XLA's partitioned module), its body one opaque custom call
// (the program runs as an MPS op graph XLA cannot read), and the module attributes in which XLA reads
// how each argument and result lies on the devices (mhlo.spmd_parameters_shardings,
// mhlo.spmd_output_sharding). JAX sizes each device's shard of a result from the latter. The custom
// call's backend_config says what the program over tiles moves between devices, in XLA's names
// ("all-gather", "all-reduce"), as XLA's partitioned module shows its collectives.
#pragma once

#include <string>

#include "lower/lower.h"
#include "lower/tile_signature.h"
#include "mps/graph.h"

namespace jmp::pjrt {

std::string OptimizedProgramText(const mps::Graph& graph, const mps::Signature& signature, int64_t num_devices,
                                 const mps::TileTraffic& traffic = {});

}  // namespace jmp::pjrt

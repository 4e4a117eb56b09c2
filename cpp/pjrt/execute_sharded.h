// Running a program compiled for several devices. The program is the module's @main in global shapes,
// its manual regions (shard_map, pmap) unrolled per device by the lowering; each device passes its shard
// of every argument and receives its shard of every result, as the program's shardings (the signature's)
// say. What runs is the program over tiles (lower/tile_signature.h), on the first device: the devices'
// shards are its inputs as they are, and its outputs are the result tiles, each handed to the first
// device holding it (a copy to any other device holding the same tile). Nothing is assembled or cut
// unless the program itself needs a global value. Over several processes (jax.distributed) each process
// runs its part of the program (lower/process_part.h), its psums taking the others' members over MPI,
// where every process has one: a manual computation whose results follow from each device's own
// shards and its all-reduces. Otherwise a tile no device of the process holds comes over MPI from the
// process of the first device holding it, and each process runs the whole program and keeps its
// devices' tiles.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "pjrt/buffers.h"
#include "pjrt/compile.h"
#include "pjrt/events.h"
#include "pjrt/execute.h"
#include "pjrt/process_group.h"

namespace jmp::pjrt {

// Where an executable's devices are.
struct DevicePlacement {
  std::vector<int> process_of;          // by device position (partition order): the process holding it
  std::vector<size_t> local_positions;  // this process's devices' positions, in Execute's list order
  ProcessGroup* group = nullptr;        // null within one process
  int process = 0;                      // this process
};

// `devices` and `arguments` are this process's, in `placement.local_positions` order; `arguments[d]`
// holds one buffer per input of @main. On success `outputs[d]` holds device d's shard of each result and
// `done[d]` completes when they are ready.
Status ExecuteSharded(const std::vector<ExecutionContext>& devices, const DevicePlacement& placement,
                      const std::shared_ptr<CompiledProgram>& program,
                      const std::vector<std::vector<BufferState*>>& arguments, const int64_t* non_donatable,
                      size_t num_non_donatable, std::vector<std::vector<std::shared_ptr<BufferState>>>& outputs,
                      std::vector<std::shared_ptr<EventState>>& done);

// The dims of a device's shard of a graph value of `dims` that lies on the devices as `sharding` says:
// its tile, without the leading dimension of a stack of parts; an error when a dimension does not divide
// evenly.
StatusOr<std::vector<int64_t>> TileDims(const std::vector<int64_t>& dims, const mps::TileSharding& sharding);

}  // namespace jmp::pjrt

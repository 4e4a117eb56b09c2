// Running a program compiled for several devices. The program is the module's @main in global shapes,
// its manual regions (shard_map, pmap) unrolled per device by the lowering; each device passes its shard
// of every argument and receives its shard of every result, as the program's shardings (the signature's)
// say. The simple way, correct for every sharding: each argument's global value is assembled on the
// first device (a replicated argument is read where it is, without a copy), the program runs there, and
// each device receives a copy of its shard of each result. Over several processes (jax.distributed) the
// same holds in every process: each sends the tiles its devices hold first to every other process over
// MPI and receives the rest, runs the whole program, and keeps its devices' shards of the results.
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

// The dims of one tile of an array of `dims` cut as `tiles` says (empty: the whole array); an error when
// a dimension does not divide evenly.
StatusOr<std::vector<int64_t>> TileDims(const std::vector<int64_t>& dims, const std::vector<int64_t>& tiles);

// Copies tile `tile` (row-major among `tiles`) of a dense array of `dims` into dense `local`, or back
// (`to_global`). `element` is the byte size of one element.
void CopyTile(uint8_t* global, const std::vector<int64_t>& dims, const std::vector<int64_t>& tiles, int64_t tile,
              uint8_t* local, size_t element, bool to_global);

}  // namespace jmp::pjrt

// From a PJRT program to something that runs: read the VHLO artifact, lower it to the MPS op graph,
// compile it with the client's executor, and keep what the C API asks of an executable (output types
// and shapes, donation, fingerprint).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "exec/executor.h"
#include "lower/lower.h"
#include "lower/process_part.h"
#include "mps/graph.h"
#include "pjrt/memory_spaces.h"
#include "support/status.h"
#include "xla/pjrt/c/pjrt_c_api.h"

namespace jmp::pjrt {

struct CompiledProgram;

// The variants of a program over tiles that keep only some of its outputs, each compiled once.
struct KeptTiles {
  std::mutex mu;
  std::map<std::vector<bool>, std::shared_ptr<CompiledProgram>> programs;
  // One process's part of the program (lower/process_part.h), by the layout of devices on processes
  // it was made for; null where the processes exchange arguments instead.
  std::map<std::vector<int>, std::shared_ptr<CompiledProgram>> parts;
};

struct CompiledProgram {
  std::string name;
  std::string fingerprint;
  std::string platform_version;  // of the client that compiled or loaded it: serialized bytes name it
  mps::Graph graph;
  // Element types of @main's arguments and results as buffers hold them, and donation.
  mps::Signature signature;
  std::unique_ptr<exec::Executable> executable;
  // Per output, in the forms the C API hands out by pointer.
  std::vector<PJRT_Buffer_Type> output_types;
  std::vector<int64_t> output_dims_flat;  // each device's shard of the output, for several devices
  std::vector<size_t> output_ranks;
  // The memory each output is placed in: the kind @main's result asks for (mhlo.memory_kind), else the
  // device's. Empty (a program built by hand): every output in device memory.
  std::vector<MemorySpace> output_spaces;
  std::vector<const char*> output_memory_kinds;
  std::vector<size_t> output_memory_kind_sizes;
  std::vector<size_t> output_bytes;
  bool in_place = false;  // the executable runs with outputs sharing memory with inputs
  // Cheap enough (no host-only ops, little data, work bounded small: exec/work_estimate.h) that when
  // nothing is queued the calling thread runs it at once: handing it to the queue's thread and waiting
  // costs more than the run. Anything else is queued, and Execute returns before it runs.
  bool runs_inline = false;
  // Holds a Python callback: Execute returns once the run is done, as XLA:CPU's does, so that what the
  // callback prints or raises happens within the call that ran it.
  bool calls_python = false;
  // The devices it is compiled for; the signature's shardings say how arguments and results lie on them.
  int64_t num_replicas = 1;
  int64_t num_partitions = 1;
  // For several devices: the module XLA reads the shardings from (optimized_program.h); empty for one.
  std::string optimized_program;
  // For several devices: the same program over the devices' shards (lower/tile_signature.h), what
  // ExecuteSharded runs: one input per tile of each argument, one output per tile of each result, never
  // donating. Null for one device.
  std::shared_ptr<CompiledProgram> tiles;
  std::shared_ptr<KeptTiles> kept_tiles = std::make_shared<KeptTiles>();
};

// `format` must be "mlir" (a VHLO portable artifact); the code is untrusted.
StatusOr<std::shared_ptr<CompiledProgram>> CompileProgram(exec::Executor& executor, std::string_view format,
                                                          const uint8_t* code, size_t code_size,
                                                          const mps::Partitioning& partitioning = {});

// For a program over several devices, compiles its program over tiles (CompiledProgram::tiles).
Status AddTiledProgram(exec::Executor& executor, CompiledProgram& program);

// The program over tiles with only the outputs `keep` says (by output of `program.tiles`), compiled the
// first time a set is asked for: a process of several computes only its own devices' tiles.
StatusOr<std::shared_ptr<CompiledProgram>> TilesKept(exec::Executor& executor, const CompiledProgram& program,
                                                     const std::vector<bool>& keep);

// Every taking process's layout, and (in `self`) which of them is this process's.
using ProcessLayouts = std::function<std::vector<mps::ProcessLayout>(size_t* self)>;

// This process's part of the program over tiles (lower/process_part.h) for a layout of devices on
// processes (`key`), made from `layouts()` and compiled the first time the layout is asked for; null,
// and the processes exchange arguments, unless every process of the layouts has a part, so that all of
// them decide alike.
StatusOr<std::shared_ptr<CompiledProgram>> ProcessPartOf(exec::Executor& executor, const CompiledProgram& program,
                                                         const std::vector<int>& key, const ProcessLayouts& layouts);

// Fills what the C API hands out per output (types, dims, memory kinds, sizes), the optimized program and
// runs_inline from the graph, its signature's output dtypes and output_spaces: the same for a program
// compiled or loaded from a serialized executable.
void DescribeOutputs(CompiledProgram& program);

// Sizes the executable's buffers take: arguments, results, and how much of the results reuses donated
// arguments. Temporaries are the executor's business and not known here.
struct ProgramSizes {
  int64_t arguments = 0;
  int64_t outputs = 0;
  int64_t aliased = 0;
};
ProgramSizes SizesOf(const CompiledProgram& program);

}  // namespace jmp::pjrt

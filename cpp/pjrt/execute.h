// One execution: check the arguments against the program, decide which inputs the call consumes and
// which output takes which donated memory, and queue the run behind the work it depends on.
//
// Pipelining. The queue's thread starts each run and moves on: device segments are committed to the
// device without waiting (it runs them in order, so a run that reads an earlier run's results needs no
// host wait), and the run's results become ready when its work completes. Only host work waits, for
// the inputs it touches. At most MaxRunsInFlight() runs are queued or in flight per client; Execute
// waits for a slot beyond that.
//
// Buffer donation. An input is donated when @main declares it (tf.aliasing_output, jax.buffer_donor)
// and the caller does not list it as non-donatable, unless other frameworks hold references to its
// memory (dlpack: then it is used, not donated, as on XLA's CPU client) or another live buffer shares it
// (a device_put into another memory kind, AliasBuffer; used, not donated, likewise). A donated buffer is
// consumed by the call: it reads as deleted as soon as Execute returns, and its memory is reused for the
// output it aliases (or, for a buffer donor, the first unclaimed output of its byte size) when the
// executor can write outputs over inputs; otherwise it is freed once the run is done. Work queued
// earlier that reads it runs first (one in-order queue), and host reads that started earlier
// (ToHostBuffer, copies) finish before the run writes over it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "exec/executor.h"
#include "pjrt/buffers.h"
#include "pjrt/compile.h"
#include "pjrt/events.h"
#include "support/serial_worker.h"

namespace jmp::pjrt {

// Executions queued or running, in every client: jax_metal_plugin frees a discarded program's Python
// callbacks only when none is (a queued run may still call them after JAX dropped the executable).
extern std::atomic<int64_t> g_runs_in_flight;

// What an execution needs of its client.
struct ExecutionContext {
  exec::Executor& executor;
  MemoryCounters& counters;
  // Held from checking an execution's arguments to queueing it, so that the queue's order is the order
  // in which buffers were found live and donated.
  std::mutex& submit_mu;
  SerialWorker& queue;
  InflightLimit& inflight;
};

// How many runs a client may have queued or in flight before Execute waits: JAX_METAL_MAX_INFLIGHT, or 32.
int MaxRunsInFlight();

// Per output, the donated input whose memory it takes, or -1 for fresh memory: first each aliased
// input (aliased_output) whose memory has the output's size, then each other donated input takes the
// first unclaimed output of its size. `donate` is per input, after the caller's exclusions.
std::vector<int64_t> PlanOutputMemory(const std::vector<int64_t>& aliased_output, const std::vector<bool>& donate,
                                      const std::vector<std::shared_ptr<exec::DeviceMemory>>& inputs,
                                      const std::vector<size_t>& output_bytes);

// InvalidArgument unless the program takes `num_arguments` arguments.
Status CheckArgumentCount(const CompiledProgram& program, size_t num_arguments);

// Runs `program` on `arguments` (one per input of @main): on success, `outputs` holds one buffer per
// output of the program, ready once the queued run is done, and `done` completes with the run.
// `non_donatable` lists inputs the caller keeps (indices out of range are ignored).
Status Execute(const ExecutionContext& client, const std::shared_ptr<CompiledProgram>& program,
               const std::vector<BufferState*>& arguments, const int64_t* non_donatable, size_t num_non_donatable,
               std::vector<std::shared_ptr<BufferState>>& outputs, std::shared_ptr<EventState>& done);

}  // namespace jmp::pjrt

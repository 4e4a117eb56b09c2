// What PJRT needs from an executor: memory the host can read and write (shared storage on Apple
// Silicon), and executables compiled once from an MPS op graph.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "exec/block_pool.h"
#include "mps/graph.h"
#include "support/status.h"

namespace jmp::exec {

class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  virtual void* data() = 0;  // host-visible; valid for size() bytes (may be null when size() is 0)
  virtual size_t size() const = 0;
};

class Executable {
 public:
  virtual ~Executable() = default;
  // Runs the graph to completion. inputs[i] holds graph.inputs[i]; outputs[i] receives graph.outputs[i],
  // allocated by the caller with the output's byte size. An output aliases an input only when
  // OutputsMayAliasInputs() says the executable allows it.
  virtual Status Run(const std::vector<DeviceMemory*>& inputs, const std::vector<DeviceMemory*>& outputs) = 0;
  // Starts the run and may return before it is done: `done` is called once, with the run's status, when
  // its work has completed (on whatever thread completes it). The caller keeps every input and output
  // alive and unchanged until then. `waits`, empty or one per input, block until an input still being
  // written by earlier work is written (null: ready); device work needs none of them, since a device
  // runs its work in the order it was started, but the host must wait before it touches such an input.
  // The default runs at once on this thread.
  virtual void Start(const std::vector<DeviceMemory*>& inputs, const std::vector<DeviceMemory*>& outputs,
                     const std::vector<std::function<Status()>>& waits, std::function<void(Status)> done) {
    for (const auto& w : waits)
      if (w) {
        Status s = w();
        if (!s.ok()) return done(s);
      }
    done(Run(inputs, outputs));
  }
  // Whether Run accepts an output that is the very memory of an input of the same byte size (a donated
  // buffer reused): every output must then come out as if the inputs had been read before any output
  // was written. Distinct outputs never share memory.
  virtual bool OutputsMayAliasInputs() const { return false; }
  // What the executor compiled, as bytes Executor::Load takes back with the same graph (JAX's persistent
  // compilation cache keeps them). Empty when the graph is all the executor needs: Load compiles again.
  virtual StatusOr<std::string> Serialize() const { return std::string(); }
  // Device graphs (Metal segments) one Run executes; the segment runner sets it (counted per run).
  int device_graphs_per_run = 0;
};

class Executor {
 public:
  virtual ~Executor() = default;
  virtual std::string name() const = 0;  // "host" or "metal"
  virtual StatusOr<std::shared_ptr<DeviceMemory>> Allocate(size_t bytes) = 0;
  virtual StatusOr<std::unique_ptr<Executable>> Compile(const mps::Graph& graph) = 0;
  // Blocks until every run this executor has started so far is done (the host is about to write memory
  // such work may still read). Executors that finish runs before Start returns have nothing to wait for.
  virtual void AwaitStarted() {}
  // The device's caching allocator: what it holds, and giving back what it keeps free.
  virtual PoolStats MemoryPoolStats() { return {}; }
  virtual size_t TrimMemoryPool() { return 0; }
  // The memory the device may use in all (0: unknown).
  virtual int64_t MemoryLimit() { return 0; }
  // An executable from what Executable::Serialize returned for this graph (possibly by another process
  // of the same plugin build); untrusted bytes get an error, never a crash.
  virtual StatusOr<std::unique_ptr<Executable>> Load(const mps::Graph& graph, std::string_view serialized) {
    if (!serialized.empty()) return InvalidArgument(name() + " executor: unexpected compiled bytes for a program");
    return Compile(graph);
  }
};

std::unique_ptr<Executor> CreateHostExecutor();
// One executor made of two (segment_runner.cc): each executable is cut by exec/placement.h into segments
// that `device` runs (what MPSGraph can) and segments that `host` runs (float64, LAPACK, callbacks),
// in order over memory from `device`. On Linux `device` is a host executor standing in for Metal, so the
// Mac's cuts are tested there.
std::unique_ptr<Executor> CreateSegmentedExecutor(std::unique_ptr<Executor> device, std::unique_ptr<Executor> host);
// `inner` behind an emulated command queue with Metal's contract (device_queue.cc): Start commits the run
// and returns at once; one completion thread runs the committed work in order, each after a random delay
// (JAX_METAL_EMULATED_DELAY_US="min,max"; JAX_METAL_EMULATED_SEED), then calls its done. Without
// delays set, a commit to an idle queue completes at once on the committing thread (a very fast GPU).
// Placed mode runs its Metal segments through it, so every wait of the pipelined runtime runs on Linux.
std::unique_ptr<Executor> CreateEmulatedQueueExecutor(std::unique_ptr<Executor> inner);
// Outputs the segment runner had to make apart and copy over a donated input (a later segment still
// read the input); counted with the plugin's copies.
int64_t StagedOutputCount();

// JAX_METAL_EXECUTOR chooses:
//   metal    Metal segments on the GPU and host segments on the CPU (the default on a Mac with Metal)
//   standin  the same, the Metal executor running over the strict stand-in of MPSGraph and Metal
//            (exec/standin; the default elsewhere)
//   placed   the Mac's placement, every segment on the host executor (behind the emulated queue)
//   host     the whole program as one host executable, no placement
StatusOr<std::unique_ptr<Executor>> CreateDefaultExecutor();

}  // namespace jmp::exec

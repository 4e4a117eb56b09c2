// What PJRT needs from an executor: memory the host can read and write (shared storage on Apple
// Silicon), and executables compiled once from an MPS op graph.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

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
  // An executable from what Executable::Serialize returned for this graph (possibly by another process
  // of the same plugin build); untrusted bytes get an error, never a crash.
  virtual StatusOr<std::unique_ptr<Executable>> Load(const mps::Graph& graph, std::string_view serialized) {
    if (!serialized.empty()) return InvalidArgument(name() + " executor: unexpected compiled bytes for a program");
    return Compile(graph);
  }
};

std::unique_ptr<Executor> CreateHostExecutor();
#ifdef JMP_HAVE_METAL
std::unique_ptr<Executor> CreateMetalExecutor();  // null when no Metal device is present
#endif
// One executor made of two (segment_runner.cc): each executable is cut by exec/placement.h into segments
// that `device` runs (what MPSGraph can) and segments that `host` runs (float64, LAPACK, callbacks),
// in order over memory from `device`. On Linux `device` is a host executor standing in for Metal, so the
// Mac's cuts are tested there.
std::unique_ptr<Executor> CreateSegmentedExecutor(std::unique_ptr<Executor> device, std::unique_ptr<Executor> host);
// Outputs the segment runner had to make apart and copy over a donated input (a later segment still
// read the input); counted with the plugin's copies.
int64_t StagedOutputCount();

// JAX_METAL_EXECUTOR chooses:
//   metal   Metal segments on the GPU and host segments on the CPU (the default on a Mac with Metal)
//   placed  the Mac's placement, every segment on the host executor (the default elsewhere)
//   host    the whole program as one host executable, no placement
StatusOr<std::unique_ptr<Executor>> CreateDefaultExecutor();

}  // namespace jmp::exec

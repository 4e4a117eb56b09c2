// What PJRT needs from an executor: memory the host can read and write (shared storage on Apple
// Silicon), and executables compiled once from an MPS op graph.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
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
};

class Executor {
 public:
  virtual ~Executor() = default;
  virtual std::string name() const = 0;  // "host" or "metal"
  virtual StatusOr<std::shared_ptr<DeviceMemory>> Allocate(size_t bytes) = 0;
  virtual StatusOr<std::unique_ptr<Executable>> Compile(const mps::Graph& graph) = 0;
};

std::unique_ptr<Executor> CreateHostExecutor();
#ifdef JMP_HAVE_METAL
std::unique_ptr<Executor> CreateMetalExecutor();  // null when no Metal device is present
#endif
// metal on macOS (when a device exists), host elsewhere; JAX_METAL_EXECUTOR=host|metal overrides.
StatusOr<std::unique_ptr<Executor>> CreateDefaultExecutor();

}  // namespace jmp::exec

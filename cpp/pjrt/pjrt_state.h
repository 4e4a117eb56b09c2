// The objects behind PJRT's opaque handles. Each wraps typed C++ (buffers.h, events.h, compile.h) with
// shared ownership, so that a handle the framework destroys never pulls memory out from under a queued
// execution.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "exec/executor.h"
#include "pjrt/buffers.h"
#include "pjrt/compile.h"
#include "pjrt/events.h"
#include "pjrt/execute.h"
#include "pjrt/memory_spaces.h"
#include "support/status.h"
#include "xla/pjrt/c/pjrt_c_api.h"

struct PJRT_Error {
  jmp::Status status;
};

namespace jmp::pjrt {

struct ClientState {
  InflightLimit inflight{MaxRunsInFlight()};  // first: destroyed last, after runs the executor still completes
  std::unique_ptr<exec::Executor> executor;
  std::string device_kind;
  std::string platform_version;
  MemoryCounters counters;
  std::mutex submit_mu;  // see ExecutionContext::submit_mu
  WorkQueue queue;

  ExecutionContext execution_context() { return ExecutionContext{*executor, counters, submit_mu, queue, inflight}; }
};

// Gives back the memory every live client's device pool keeps free (an explicit trim, as on
// jax.clear_caches()); returns the bytes released.
size_t TrimMemoryPools();
// Blocks the live clients' device pools had to make fresh (not served from freed ones).
int64_t PoolFreshAllocs();

}  // namespace jmp::pjrt

struct PJRT_Event {
  std::shared_ptr<jmp::pjrt::EventState> state;
};
struct PJRT_DeviceDescription {
  PJRT_Client* client;
};
struct PJRT_Device {
  PJRT_DeviceDescription description;
};
struct PJRT_Memory {
  PJRT_Client* client;
  jmp::pjrt::MemorySpace space;
};
struct PJRT_Client {
  std::unique_ptr<jmp::pjrt::ClientState> state;
  PJRT_Device device;
  PJRT_Memory memories[jmp::pjrt::kNumMemorySpaces];  // indexed by MemorySpace; memories[0] is the default
  PJRT_Device* device_list[1];
  PJRT_Memory* memory_list[jmp::pjrt::kNumMemorySpaces];
};
struct PJRT_Buffer {
  std::shared_ptr<jmp::pjrt::BufferState> state;
  PJRT_Client* client;
};
struct PJRT_Executable {
  std::shared_ptr<jmp::pjrt::CompiledProgram> program;
};
struct PJRT_SerializedExecutable {
  std::string bytes;
};
struct PJRT_LoadedExecutable {
  std::shared_ptr<jmp::pjrt::CompiledProgram> program;
  PJRT_Client* client;
  std::atomic<bool> deleted{false};
};

namespace jmp::pjrt {
const PJRT_Api* GetApi();
}

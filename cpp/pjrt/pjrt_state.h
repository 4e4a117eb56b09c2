// The objects behind PJRT's opaque handles. Each wraps typed C++ (buffers.h, events.h, compile.h) with
// shared ownership, so that a handle the framework destroys never pulls memory out from under a queued
// execution.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "exec/executor.h"
#include "pjrt/buffers.h"
#include "pjrt/compile.h"
#include "pjrt/events.h"
#include "pjrt/execute.h"
#include "pjrt/execute_sharded.h"
#include "pjrt/memory_spaces.h"
#include "pjrt/process_group.h"
#include "support/status.h"
#include "xla/pjrt/c/pjrt_c_api.h"

struct PJRT_Error {
  jmp::Status status;
};

namespace jmp::pjrt {

// One logical device: its own executor (and so its own memory pool), queue, limit of runs in flight and
// memory statistics. JAX_METAL_NUM_DEVICES of them share the one GPU (here, the host).
struct DeviceState {
  InflightLimit inflight{MaxRunsInFlight()};  // first: destroyed last, after runs the executor still completes
  std::unique_ptr<exec::Executor> executor;
  MemoryCounters counters;
  std::mutex submit_mu;  // see ExecutionContext::submit_mu
  SerialWorker queue;

  ExecutionContext execution_context() { return ExecutionContext{*executor, counters, submit_mu, queue, inflight}; }
};

struct ClientState {
  std::vector<std::unique_ptr<DeviceState>> devices;  // this process's, by local id
  std::string device_kind;
  std::string platform_version;
  // With jax.distributed over several processes: them, and this process among them. Device ids are
  // global, process by process.
  std::unique_ptr<ProcessGroup> group;
  int process_index = 0;
};

// How many logical devices a client has: JAX_METAL_NUM_DEVICES (1 to kMaxDevices), else 1.
inline constexpr int kMaxDevices = 64;
StatusOr<int> NumDevicesRequested();

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
  int id;             // global
  int process_index;  // the process it belongs to
  int local_id;       // among its process's devices
  std::string text;   // "MetalDevice(id=3)"
};
struct PJRT_Memory {
  PJRT_Client* client;
  PJRT_Device* device;
  jmp::pjrt::MemorySpace space;
  int id;            // unique in the client: device id * kNumMemorySpaces + space
  std::string text;  // "MetalMemory(id=4, kind=pinned_host)"
};
struct PJRT_Device {
  PJRT_DeviceDescription description;
  jmp::pjrt::DeviceState* state;                      // null for another process's device
  PJRT_Memory memories[jmp::pjrt::kNumMemorySpaces];  // indexed by MemorySpace; memories[0] is the default
  PJRT_Memory* memory_list[jmp::pjrt::kNumMemorySpaces];
  PJRT_Device* self[1];  // the one device its memories are addressable by
};
struct PJRT_Client {
  std::unique_ptr<jmp::pjrt::ClientState> state;
  std::vector<std::unique_ptr<PJRT_Device>> devices;  // by device id, every process's
  std::vector<PJRT_Device*> device_list;
  std::vector<PJRT_Device*> addressable_list;  // this process's, by local id
  std::vector<PJRT_Memory*> memory_list;       // the addressable devices', device by device
};
struct PJRT_Buffer {
  std::shared_ptr<jmp::pjrt::BufferState> state;
  PJRT_Client* client;
  PJRT_Device* device;
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
  // The devices it runs on, by partition (replica-major when there are several replicas), of every
  // process; this process's among them, in the same order, are Execute's argument and output lists.
  std::vector<PJRT_Device*> devices;
  std::vector<PJRT_Device*> addressable;
  jmp::pjrt::DevicePlacement placement;
  std::string device_assignment;  // DeviceAssignmentProto, serialized
  std::atomic<bool> deleted{false};
};

namespace jmp::pjrt {
const PJRT_Api* GetApi();

// The device's state when it is this process's, else an error naming its process.
StatusOr<DeviceState*> LocalState(const PJRT_Device* device);
}  // namespace jmp::pjrt

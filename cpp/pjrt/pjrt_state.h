// The objects behind PJRT's opaque handles: typed C++ with shared ownership, so a handle the framework
// destroys never pulls memory out from under a queued execution.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "exec/executor.h"
#include "xla/pjrt/c/pjrt_c_api.h"

struct PJRT_Error {
  jmp::Status status;
};

namespace jmp::pjrt {

// Completes once, with a status; callbacks registered before or after completion all run once.
class EventState {
 public:
  void Set(Status status);
  bool ready();
  Status Await();
  void OnReady(std::function<void(Status)> callback);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool ready_ = false;
  Status status_;
  std::vector<std::function<void(Status)>> callbacks_;
};

struct ClientState;

// Host reads of a buffer's memory that run outside the work queue (ToHostBuffer, buffer copies). An
// execution that writes a donated buffer in place waits until the reads that started before the
// donation are done.
class ReadGate {
 public:
  void Enter();
  void Leave();
  void WaitIdle();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int readers_ = 0;
};

struct BufferState {
  ClientState* client = nullptr;
  DType dtype = DType::kF32;
  std::vector<int64_t> dims;
  std::vector<int64_t> minor_to_major;
  size_t bytes = 0;
  std::shared_ptr<exec::DeviceMemory> memory;   // null once deleted or donated; counted in bytes_in_use while set
  std::shared_ptr<EventState> ready = std::make_shared<EventState>();
  std::shared_ptr<ReadGate> reads = std::make_shared<ReadGate>();
  std::mutex mu;
  bool deleted = false;                         // by PJRT_Buffer_Delete or by donation to an execution
  int external_refs = 0;
  // Marks the buffer deleted and lets go of its memory (queued work keeps its own reference). Needs mu.
  void DeleteLocked();
  ~BufferState();
};

struct CompiledProgram {
  std::string name;
  std::string fingerprint;
  mps::Graph graph;
  std::unique_ptr<exec::Executable> executable;
  std::vector<PJRT_Buffer_Type> output_types;
  std::vector<int64_t> output_dims_flat;
  std::vector<size_t> output_ranks;
  std::vector<const char*> output_memory_kinds;
  std::vector<size_t> output_memory_kind_sizes;
  // Buffer donation, per input, as @main declares it: the output that may reuse the input's memory
  // (tf.aliasing_output) or -1, and whether the input is donated at all (aliased or jax.buffer_donor).
  std::vector<int64_t> aliased_output;
  std::vector<bool> donated;
  bool in_place = false;  // the executable runs with outputs sharing memory with inputs
};

// Runs work in submission order on one thread: an execution that consumes a buffer always runs
// after the one that produced it.
class WorkQueue {
 public:
  WorkQueue();
  ~WorkQueue();
  void Push(std::function<void()> task);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stop_ = false;
  std::thread worker_;
};

struct ClientState {
  std::unique_ptr<exec::Executor> executor;
  std::string device_kind;
  std::string platform_version;
  std::atomic<int64_t> bytes_in_use{0};
  std::atomic<int64_t> peak_bytes{0};
  std::atomic<int64_t> num_allocs{0};
  // Held from checking an execution's arguments to queueing it, so that the queue's order is the order
  // in which buffers were found live and donated.
  std::mutex submit_mu;
  WorkQueue queue;
};

extern std::atomic<int64_t> g_copy_count;  // host<->device copies of buffer contents

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
};
struct PJRT_Client {
  std::unique_ptr<jmp::pjrt::ClientState> state;
  PJRT_Device device;
  PJRT_Memory memory;
  PJRT_Device* device_list[1];
  PJRT_Memory* memory_list[1];
};
struct PJRT_Buffer {
  std::shared_ptr<jmp::pjrt::BufferState> state;
  PJRT_Client* client;
};
struct PJRT_Executable {
  std::shared_ptr<jmp::pjrt::CompiledProgram> program;
};
struct PJRT_LoadedExecutable {
  std::shared_ptr<jmp::pjrt::CompiledProgram> program;
  PJRT_Client* client;
  std::atomic<bool> deleted{false};
};

namespace jmp::pjrt {
const PJRT_Api* GetApi();
}

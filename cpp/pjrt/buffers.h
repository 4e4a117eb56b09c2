// Device buffers: their state and bookkeeping (bytes in use, deletion, donation) and the copies between
// host arrays and device memory, strided host layouts included.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "exec/executor.h"
#include "pjrt/events.h"
#include "pjrt/memory_spaces.h"
#include "support/dtype.h"
#include "support/status.h"

namespace jmp::pjrt {

// A client's memory statistics (PJRT_Device_MemoryStats).
struct MemoryCounters {
  std::atomic<int64_t> bytes_in_use{0};
  std::atomic<int64_t> peak_bytes{0};
  std::atomic<int64_t> num_allocs{0};
};

extern std::atomic<int64_t> g_copy_count;  // host<->device copies of buffer contents

struct BufferState {
  MemoryCounters* counters = nullptr;
  DType dtype = DType::kF32;
  std::vector<int64_t> dims;
  std::vector<int64_t> minor_to_major;
  size_t bytes = 0;
  std::shared_ptr<exec::DeviceMemory> memory;  // null once deleted or donated; counted in bytes_in_use while set
  MemorySpace space = MemorySpace::kDevice;    // the memory JAX placed it in (PJRT_Buffer_Memory)
  // Set on buffers that share `memory` (AliasBuffer): how many of them still hold it. The memory is
  // counted in bytes_in_use once, and none of them may be donated while another one holds it.
  std::shared_ptr<std::atomic<int>> sharers;
  std::shared_ptr<EventState> ready = std::make_shared<EventState>();
  std::shared_ptr<ReadGate> reads = std::make_shared<ReadGate>();
  std::mutex mu;
  bool deleted = false;  // by PJRT_Buffer_Delete or by donation to an execution
  int external_refs = 0;
  // While another framework reads the memory in place (NumPy, the buffer protocol), it outlives the
  // buffer's deletion, and donation leaves it alone.
  std::shared_ptr<exec::DeviceMemory> external_hold;
  // Marks the buffer deleted and lets go of its memory (queued work keeps its own reference). Needs mu.
  void DeleteLocked();
  // Another live buffer holds this one's memory: donating it would overwrite that buffer. Needs mu.
  bool SharedLocked() const { return sharers && sharers->load() > 1; }
  ~BufferState();
};

// A buffer over `memory`, counted in bytes in use; `allocated`: the memory was allocated for this buffer
// (not an input's, reused by donation). Its ready event is not set.
std::shared_ptr<BufferState> MakeBuffer(MemoryCounters& counters, DType dtype, std::vector<int64_t> dims,
                                        std::shared_ptr<exec::DeviceMemory> memory, bool allocated = true);

// The buffer's memory, or FailedPrecondition once it is deleted or donated.
StatusOr<std::shared_ptr<exec::DeviceMemory>> LiveMemory(BufferState& buffer);

// A host array as the caller lays it out: byte_strides null or empty means dense row-major.
struct HostArray {
  const void* data = nullptr;
  DType dtype = DType::kF32;
  std::vector<int64_t> dims;
  const int64_t* byte_strides = nullptr;
  size_t num_byte_strides = 0;
};

// A ready buffer holding a copy of `host`, which the caller may reuse as soon as this returns.
StatusOr<std::shared_ptr<BufferState>> BufferFromHost(exec::Executor& executor, MemoryCounters& counters,
                                                      HostArray host);

// Copies the buffer, once its contents are ready, into dst (dense row-major, at least buffer.bytes);
// the returned event completes with the contents' status. A deleted or donated buffer is an error.
StatusOr<std::shared_ptr<EventState>> CopyToHost(BufferState& buffer, void* dst, size_t dst_size);

// A copy of the buffer in new memory of `space` from `executor` (the destination device's), counted in
// `counters` (that device's); ready with the source.
StatusOr<std::shared_ptr<BufferState>> CopyBuffer(exec::Executor& executor, MemoryCounters& counters,
                                                  BufferState& source, MemorySpace space);

// A buffer of `space` over the source's own memory (no copy: every space is the same unified memory),
// ready with the source. The two are separate buffers to JAX (each deleted on its own), so neither is
// donated while the other lives, and host reads of either hold back a run that overwrites the memory.
StatusOr<std::shared_ptr<BufferState>> AliasBuffer(BufferState& source, MemorySpace space);

}  // namespace jmp::pjrt

#include "pjrt/buffers.h"

#include <cstring>
#include <string>
#include <utility>

#include "pjrt/conversions.h"
#include "support/trace.h"

namespace jmp::pjrt {

std::atomic<int64_t> g_copy_count{0};

namespace {

int64_t Product(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// Copies a host array (any byte strides) into dense row-major device memory.
void CopyStrided(const uint8_t* src, uint8_t* dst, const std::vector<int64_t>& dims, const int64_t* strides,
                 size_t width) {
  size_t rank = dims.size();
  int64_t n = Product(dims);
  std::vector<int64_t> idx(rank, 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t off = 0;
    for (size_t d = 0; d < rank; ++d) off += idx[d] * strides[d];
    std::memcpy(dst + i * static_cast<int64_t>(width), src + off, width);
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < dims[d]) break;
      idx[d] = 0;
    }
  }
}

// A host read of a buffer's memory outside the work queue: entered while the buffer is live, so that an
// execution donating the buffer afterwards does not overwrite it before the read is done.
class HostRead {
 public:
  explicit HostRead(BufferState& b) {
    std::lock_guard<std::mutex> lock(b.mu);
    if (b.deleted || !b.memory) return;
    memory_ = b.memory;
    gate_ = b.reads;
    gate_->Enter();
  }
  ~HostRead() {
    if (gate_) gate_->Leave();
  }
  HostRead(const HostRead&) = delete;
  HostRead& operator=(const HostRead&) = delete;
  Status status() const {
    return memory_ ? Status::Ok() : FailedPrecondition("the buffer has been deleted or donated");
  }
  exec::DeviceMemory* memory() const { return memory_.get(); }

 private:
  std::shared_ptr<exec::DeviceMemory> memory_;
  std::shared_ptr<ReadGate> gate_;
};

}  // namespace

namespace {

// The bytes leave bytes_in_use with the last buffer that holds them.
void ReleaseMemory(BufferState& b) {
  if (!b.memory) return;
  const bool last = !b.sharers || b.sharers->fetch_sub(1) == 1;
  if (last && b.counters) b.counters->bytes_in_use -= static_cast<int64_t>(b.bytes);
  b.memory.reset();
}

}  // namespace

void BufferState::DeleteLocked() {
  deleted = true;
  ReleaseMemory(*this);
}

BufferState::~BufferState() { ReleaseMemory(*this); }

std::shared_ptr<BufferState> MakeBuffer(MemoryCounters& counters, DType dtype, std::vector<int64_t> dims,
                                        std::shared_ptr<exec::DeviceMemory> memory, bool allocated) {
  auto state = std::make_shared<BufferState>();
  state->counters = &counters;
  state->dtype = dtype;
  state->minor_to_major = RowMajorMinorToMajor(dims.size());
  state->dims = std::move(dims);
  state->bytes = static_cast<size_t>(Product(state->dims)) * ByteSize(dtype);
  state->memory = std::move(memory);
  int64_t now = counters.bytes_in_use += static_cast<int64_t>(state->bytes);
  if (allocated) counters.num_allocs++;
  int64_t peak = counters.peak_bytes.load();
  while (now > peak && !counters.peak_bytes.compare_exchange_weak(peak, now)) {}
  return state;
}

StatusOr<std::shared_ptr<exec::DeviceMemory>> LiveMemory(BufferState& buffer) {
  std::lock_guard<std::mutex> lock(buffer.mu);
  if (buffer.deleted || !buffer.memory) return FailedPrecondition("the buffer has been deleted or donated");
  return buffer.memory;
}

StatusOr<std::shared_ptr<BufferState>> BufferFromHost(exec::Executor& executor, MemoryCounters& counters,
                                                      HostArray host) {
  for (int64_t d : host.dims)
    if (d < 0) return InvalidArgument("negative dimension");
  size_t width = ByteSize(host.dtype);
  size_t bytes = static_cast<size_t>(Product(host.dims)) * width;
  if (bytes && !host.data) return InvalidArgument("PJRT_Client_BufferFromHostBuffer: data is null");
  JMP_ASSIGN_OR_RETURN(std::shared_ptr<exec::DeviceMemory> memory, executor.Allocate(bytes));
  bool dense = true;
  if (host.byte_strides && host.num_byte_strides) {
    if (host.num_byte_strides != host.dims.size()) return InvalidArgument("byte_strides does not match the rank");
    int64_t expect = static_cast<int64_t>(width);
    for (size_t d = host.dims.size(); d-- > 0;) {
      if (host.dims[d] > 1 && host.byte_strides[d] != expect) dense = false;
      expect *= host.dims[d];
    }
  }
  trace::Scope scope(trace::Line::kCopy, "host to device");
  if (scope.on()) scope.Stat("bytes", std::to_string(bytes));
  if (bytes) {
    if (dense)
      std::memcpy(memory->data(), host.data, bytes);
    else
      CopyStrided(static_cast<const uint8_t*>(host.data), static_cast<uint8_t*>(memory->data()), host.dims,
                  host.byte_strides, width);
  }
  g_copy_count++;
  auto buffer = MakeBuffer(counters, host.dtype, std::move(host.dims), std::move(memory));
  buffer->ready->Set(Status::Ok());
  return buffer;
}

// Both copies wait for the buffer through its event, never by blocking here: JAX calls them holding
// the GIL and waits on the event without it, and the execution that makes the buffer may be running a
// Python callback that needs the GIL. The read gate is held until the copy is done.
StatusOr<std::shared_ptr<EventState>> CopyToHost(BufferState& buffer, void* dst, size_t dst_size) {
  if (dst_size < buffer.bytes)
    return InvalidArgument("destination holds " + std::to_string(dst_size) + " bytes, the buffer " +
                           std::to_string(buffer.bytes));
  auto read = std::make_shared<HostRead>(buffer);
  JMP_RETURN_IF_ERROR(read->status());
  auto done = std::make_shared<EventState>();
  const size_t bytes = buffer.bytes;
  buffer.ready->OnReady([read, done, dst, bytes](Status ready) mutable {
    trace::Scope scope(trace::Line::kCopy, "device to host");
    if (scope.on()) scope.Stat("bytes", std::to_string(bytes));
    if (ready.ok() && bytes) std::memcpy(dst, read->memory()->data(), bytes);
    g_copy_count++;
    read.reset();
    done->Set(std::move(ready));
  });
  return done;
}

StatusOr<std::shared_ptr<BufferState>> CopyBuffer(exec::Executor& executor, MemoryCounters& counters,
                                                  BufferState& source, MemorySpace space) {
  auto read = std::make_shared<HostRead>(source);
  JMP_RETURN_IF_ERROR(read->status());
  JMP_ASSIGN_OR_RETURN(std::shared_ptr<exec::DeviceMemory> copy, executor.Allocate(source.bytes));
  auto buffer = MakeBuffer(counters, source.dtype, source.dims, copy);
  buffer->space = space;
  const size_t bytes = source.bytes;
  std::shared_ptr<EventState> ready = buffer->ready;
  source.ready->OnReady([read, copy, ready, bytes](Status status) mutable {
    if (status.ok() && bytes) std::memcpy(copy->data(), read->memory()->data(), bytes);
    read.reset();
    ready->Set(std::move(status));
  });
  return buffer;
}

StatusOr<std::shared_ptr<BufferState>> AliasBuffer(BufferState& source, MemorySpace space) {
  auto alias = std::make_shared<BufferState>();
  std::lock_guard<std::mutex> lock(source.mu);
  if (source.deleted || !source.memory) return FailedPrecondition("the buffer has been deleted or donated");
  if (!source.sharers) source.sharers = std::make_shared<std::atomic<int>>(1);
  source.sharers->fetch_add(1);
  alias->counters = source.counters;  // not counted again: ReleaseMemory counts the bytes out once
  alias->dtype = source.dtype;
  alias->dims = source.dims;
  alias->minor_to_major = source.minor_to_major;
  alias->bytes = source.bytes;
  alias->memory = source.memory;
  alias->space = space;
  alias->sharers = source.sharers;
  alias->ready = source.ready;
  alias->reads = source.reads;
  return alias;
}

}  // namespace jmp::pjrt

// Entry points of buffers: making them from host data, describing them, reading them back, copying,
// deleting, and their reference counts.
#include <cstring>
#include <string>
#include <vector>

#include "pjrt/api.h"
#include "pjrt/conversions.h"

namespace jmp::pjrt {

PJRT_Buffer* NewHandle(std::shared_ptr<BufferState> state, PJRT_Device* device) {
  return new PJRT_Buffer{std::move(state), device->description.client, device};
}

Status ClientBufferFromHostBuffer(PJRT_Client_BufferFromHostBuffer_Args* args) {
  JMP_REQUIRE(args->client, "PJRT_Client_BufferFromHostBuffer: client is null");
  int raw_type;
  std::memcpy(&raw_type, &args->type, sizeof(raw_type));
  JMP_ASSIGN_OR_RETURN(DType dtype, DTypeFromBufferType(raw_type));
  JMP_REQUIRE(args->num_dims == 0 || args->dims, "PJRT_Client_BufferFromHostBuffer: dims is null");
  HostArray host;
  host.data = args->data;
  host.dtype = dtype;
  host.dims.assign(args->dims, args->dims + args->num_dims);
  host.byte_strides = args->byte_strides;
  host.num_byte_strides = args->num_byte_strides;
  JMP_REQUIRE(!args->device || args->device->description.client == args->client,
              "the device does not belong to this client");
  JMP_REQUIRE(!args->memory || args->memory->client == args->client, "the memory does not belong to this client");
  JMP_REQUIRE(!args->device || !args->memory || args->memory->device == args->device,
              "the memory is not one of the device's");
  PJRT_Device* device = args->memory   ? args->memory->device
                        : args->device ? args->device
                                       : args->client->addressable_list[0];
  if (args->device_layout && !IsDenseRowMajor(*args->device_layout, host.dims.size()))
    return Unimplemented("device layouts other than dense row-major are not supported");
  JMP_ASSIGN_OR_RETURN(DeviceState * local, LocalState(device));
  DeviceState& state = *local;
  JMP_ASSIGN_OR_RETURN(std::shared_ptr<BufferState> buffer,
                       BufferFromHost(*state.executor, state.counters, std::move(host)));
  if (args->memory) buffer->space = args->memory->space;  // else the device's default memory
  // The host data was copied during the call, whatever the semantics asked: it is free now.
  args->done_with_host_buffer = new PJRT_Event{CompletedEvent(Status::Ok())};
  args->buffer = NewHandle(std::move(buffer), device);
  return Status::Ok();
}

Status BufferDestroy(PJRT_Buffer_Destroy_Args* args) {
  delete args->buffer;
  return Status::Ok();
}

Status BufferElementType(PJRT_Buffer_ElementType_Args* args) {
  JMP_REQUIRE(args->buffer, "buffer is null");
  args->type = ToBufferType(args->buffer->state->dtype);
  return Status::Ok();
}

Status BufferDimensions(PJRT_Buffer_Dimensions_Args* args) {
  JMP_REQUIRE(args->buffer, "buffer is null");
  args->dims = args->buffer->state->dims.data();
  args->num_dims = args->buffer->state->dims.size();
  return Status::Ok();
}

Status BufferUnpaddedDimensions(PJRT_Buffer_UnpaddedDimensions_Args* args) {
  JMP_REQUIRE(args->buffer, "buffer is null");
  args->unpadded_dims = args->buffer->state->dims.data();
  args->num_dims = args->buffer->state->dims.size();
  return Status::Ok();
}

Status BufferDynamicDimensionIndices(PJRT_Buffer_DynamicDimensionIndices_Args* args) {
  JMP_REQUIRE(args->buffer, "buffer is null");
  args->dynamic_dim_indices = nullptr;
  args->num_dynamic_dims = 0;
  return Status::Ok();
}

Status BufferGetMemoryLayout(PJRT_Buffer_GetMemoryLayout_Args* args) {
  JMP_REQUIRE(args->buffer, "buffer is null");
  std::memset(&args->layout, 0, sizeof(args->layout));
  args->layout.struct_size = PJRT_Buffer_MemoryLayout_STRUCT_SIZE;
  args->layout.type = PJRT_Buffer_MemoryLayout_Type_Tiled;
  args->layout.tiled.struct_size = PJRT_Buffer_MemoryLayout_Tiled_STRUCT_SIZE;
  args->layout.tiled.minor_to_major = args->buffer->state->minor_to_major.data();
  args->layout.tiled.minor_to_major_size = args->buffer->state->minor_to_major.size();
  args->layout.tiled.num_tiles = 0;
  return Status::Ok();
}

Status BufferOnDeviceSizeInBytes(PJRT_Buffer_OnDeviceSizeInBytes_Args* args) {
  JMP_REQUIRE(args->buffer, "buffer is null");
  args->on_device_size_in_bytes = args->buffer->state->bytes;
  return Status::Ok();
}

Status BufferDevice(PJRT_Buffer_Device_Args* args) {
  JMP_REQUIRE(args->buffer, "buffer is null");
  args->device = args->buffer->device;
  return Status::Ok();
}

Status BufferMemory(PJRT_Buffer_Memory_Args* args) {
  JMP_REQUIRE(args->buffer, "buffer is null");
  args->memory = &args->buffer->device->memories[static_cast<size_t>(args->buffer->state->space)];
  return Status::Ok();
}

Status BufferDelete(PJRT_Buffer_Delete_Args* args) {
  JMP_REQUIRE(args->buffer, "buffer is null");
  std::lock_guard<std::mutex> lock(args->buffer->state->mu);
  args->buffer->state->DeleteLocked();  // deleting twice is harmless
  return Status::Ok();
}

Status BufferIsDeleted(PJRT_Buffer_IsDeleted_Args* args) {
  JMP_REQUIRE(args->buffer, "buffer is null");
  std::lock_guard<std::mutex> lock(args->buffer->state->mu);
  args->is_deleted = args->buffer->state->deleted;
  return Status::Ok();
}

Status BufferIsOnCpu(PJRT_Buffer_IsOnCpu_Args* args) {
  JMP_REQUIRE(args->buffer, "buffer is null");
  // Every buffer lives in memory the CPU addresses directly (shared-storage MTLBuffers on a Mac's unified
  // memory; host memory here), so JAX may read a ready buffer in place, as it does XLA:CPU's.
  args->is_on_cpu = true;
  return Status::Ok();
}

Status BufferReadyEvent(PJRT_Buffer_ReadyEvent_Args* args) {
  JMP_REQUIRE(args->buffer, "buffer is null");
  BufferState& b = *args->buffer->state;
  std::lock_guard<std::mutex> lock(b.mu);
  // The C API: a deleted or donated buffer's event is an error at once.
  args->event = new PJRT_Event{b.deleted ? CompletedEvent(FailedPrecondition("the buffer has been deleted or donated"))
                                         : b.ready};
  return Status::Ok();
}

Status BufferUnsafePointer(PJRT_Buffer_UnsafePointer_Args* args) {
  JMP_REQUIRE(args->buffer, "buffer is null");
  JMP_ASSIGN_OR_RETURN(std::shared_ptr<exec::DeviceMemory> memory, LiveMemory(*args->buffer->state));
  args->buffer_pointer = reinterpret_cast<uintptr_t>(memory->data());
  return Status::Ok();
}

Status BufferOpaqueDeviceMemoryDataPointer(PJRT_Buffer_OpaqueDeviceMemoryDataPointer_Args* args) {
  JMP_REQUIRE(args->buffer, "buffer is null");
  JMP_ASSIGN_OR_RETURN(std::shared_ptr<exec::DeviceMemory> memory, LiveMemory(*args->buffer->state));
  args->device_memory_ptr = memory->data();
  return Status::Ok();
}

Status BufferIncreaseExternalReferenceCount(PJRT_Buffer_IncreaseExternalReferenceCount_Args* args) {
  JMP_REQUIRE(args->buffer, "buffer is null");
  BufferState& b = *args->buffer->state;
  std::lock_guard<std::mutex> lock(b.mu);
  if (b.external_refs++ == 0) b.external_hold = b.memory;
  return Status::Ok();
}

Status BufferDecreaseExternalReferenceCount(PJRT_Buffer_DecreaseExternalReferenceCount_Args* args) {
  JMP_REQUIRE(args->buffer, "buffer is null");
  BufferState& b = *args->buffer->state;
  std::lock_guard<std::mutex> lock(b.mu);
  if (b.external_refs == 0) return FailedPrecondition("external reference count is already 0");
  if (--b.external_refs == 0) b.external_hold.reset();
  return Status::Ok();
}

// dst null asks for the size only.
Status BufferToHostBuffer(PJRT_Buffer_ToHostBuffer_Args* args) {
  JMP_REQUIRE(args->src, "PJRT_Buffer_ToHostBuffer: src is null");
  BufferState& src = *args->src->state;
  if (args->host_layout && !IsDenseRowMajor(*args->host_layout, src.dims.size()))
    return Unimplemented("host layouts other than dense row-major are not supported");
  if (!args->dst) {
    args->dst_size = src.bytes;
    return Status::Ok();
  }
  JMP_ASSIGN_OR_RETURN(std::shared_ptr<EventState> done, CopyToHost(src, args->dst, args->dst_size));
  args->event = new PJRT_Event{std::move(done)};
  return Status::Ok();
}

Status BufferCopyToDevice(PJRT_Buffer_CopyToDevice_Args* args) {
  JMP_REQUIRE(args->buffer && args->dst_device, "PJRT_Buffer_CopyToDevice: buffer or device is null");
  JMP_REQUIRE(args->dst_device->description.client == args->buffer->client,
              "the destination device belongs to another client");
  JMP_ASSIGN_OR_RETURN(DeviceState * local, LocalState(args->dst_device));
  DeviceState& dst = *local;
  JMP_ASSIGN_OR_RETURN(std::shared_ptr<BufferState> copy,
                       CopyBuffer(*dst.executor, dst.counters, *args->buffer->state, MemorySpace::kDevice));
  args->dst_buffer = NewHandle(std::move(copy), args->dst_device);
  return Status::Ok();
}

// Into another memory kind of the same device the new buffer shares the source's memory (all kinds are
// one unified memory; docs/execution-and-memory.md); into the same kind, or another device's memory, it is
// a copy, as asked.
Status BufferCopyToMemory(PJRT_Buffer_CopyToMemory_Args* args) {
  JMP_REQUIRE(args->buffer && args->dst_memory, "PJRT_Buffer_CopyToMemory: buffer or memory is null");
  JMP_REQUIRE(args->dst_memory->client == args->buffer->client, "the destination memory belongs to another client");
  PJRT_Device* device = args->dst_memory->device;
  JMP_ASSIGN_OR_RETURN(DeviceState * local, LocalState(device));
  DeviceState& state = *local;
  BufferState& source = *args->buffer->state;
  const MemorySpace space = args->dst_memory->space;
  std::shared_ptr<BufferState> made;
  if (space == source.space || device != args->buffer->device) {
    JMP_ASSIGN_OR_RETURN(made, CopyBuffer(*state.executor, state.counters, source, space));
  } else {
    // Under the submit lock: an execution that found the source undonated cannot donate it meanwhile.
    std::lock_guard<std::mutex> submit(state.submit_mu);
    JMP_ASSIGN_OR_RETURN(made, AliasBuffer(source, space));
  }
  args->dst_buffer = NewHandle(std::move(made), device);
  return Status::Ok();
}

}  // namespace jmp::pjrt

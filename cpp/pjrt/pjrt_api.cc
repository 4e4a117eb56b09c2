// The PJRT C API entry points: thin C shims that validate their arguments, call typed C++ and turn
// every failure into a PJRT_Error. Nothing throws across this boundary.
#include <cstddef>
#include <cstring>
#include <functional>
#include <string>
#include <unordered_map>

#include "mps/lower.h"
#include "pjrt/pjrt_state.h"
#include "stablehlo/ir.h"

namespace jmp::pjrt {

std::atomic<int64_t> g_copy_count{0};

namespace {

PJRT_Error* MakeError(Status s) {
  if (s.ok()) return nullptr;
  return new PJRT_Error{std::move(s)};
}
PJRT_Error* Invalid(const std::string& m) { return MakeError(InvalidArgument(m)); }

PJRT_Error_Code ToCode(StatusCode c) {
  switch (c) {
    case StatusCode::kOk: return PJRT_Error_Code_OK;
    case StatusCode::kInvalidArgument: return PJRT_Error_Code_INVALID_ARGUMENT;
    case StatusCode::kUnimplemented: return PJRT_Error_Code_UNIMPLEMENTED;
    case StatusCode::kFailedPrecondition: return PJRT_Error_Code_FAILED_PRECONDITION;
    case StatusCode::kOutOfRange: return PJRT_Error_Code_OUT_OF_RANGE;
    case StatusCode::kNotFound: return PJRT_Error_Code_NOT_FOUND;
    case StatusCode::kResourceExhausted: return PJRT_Error_Code_RESOURCE_EXHAUSTED;
    case StatusCode::kInternal: return PJRT_Error_Code_INTERNAL;
  }
  return PJRT_Error_Code_UNKNOWN;
}

// Takes the raw enum value: a caller may pass any integer, and loading it as the enum would be UB.
bool ToDType(int raw, DType* d) {
  switch (raw) {
    case PJRT_Buffer_Type_PRED: *d = DType::kBool; return true;
    case PJRT_Buffer_Type_S8: *d = DType::kI8; return true;
    case PJRT_Buffer_Type_S16: *d = DType::kI16; return true;
    case PJRT_Buffer_Type_S32: *d = DType::kI32; return true;
    case PJRT_Buffer_Type_S64: *d = DType::kI64; return true;
    case PJRT_Buffer_Type_U8: *d = DType::kU8; return true;
    case PJRT_Buffer_Type_U16: *d = DType::kU16; return true;
    case PJRT_Buffer_Type_U32: *d = DType::kU32; return true;
    case PJRT_Buffer_Type_U64: *d = DType::kU64; return true;
    case PJRT_Buffer_Type_F16: *d = DType::kF16; return true;
    case PJRT_Buffer_Type_BF16: *d = DType::kBF16; return true;
    case PJRT_Buffer_Type_F32: *d = DType::kF32; return true;
    case PJRT_Buffer_Type_F64: *d = DType::kF64; return true;
    case PJRT_Buffer_Type_C64: *d = DType::kC64; return true;
    case PJRT_Buffer_Type_C128: *d = DType::kC128; return true;
    default: return false;
  }
}

PJRT_Buffer_Type ToBufferType(DType d) {
  switch (d) {
    case DType::kBool: return PJRT_Buffer_Type_PRED;
    case DType::kI8: return PJRT_Buffer_Type_S8;
    case DType::kI16: return PJRT_Buffer_Type_S16;
    case DType::kI32: return PJRT_Buffer_Type_S32;
    case DType::kI64: return PJRT_Buffer_Type_S64;
    case DType::kU8: return PJRT_Buffer_Type_U8;
    case DType::kU16: return PJRT_Buffer_Type_U16;
    case DType::kU32: return PJRT_Buffer_Type_U32;
    case DType::kU64: return PJRT_Buffer_Type_U64;
    case DType::kF16: return PJRT_Buffer_Type_F16;
    case DType::kBF16: return PJRT_Buffer_Type_BF16;
    case DType::kF32: return PJRT_Buffer_Type_F32;
    case DType::kF64: return PJRT_Buffer_Type_F64;
    case DType::kC64: return PJRT_Buffer_Type_C64;
    case DType::kC128: return PJRT_Buffer_Type_C128;
  }
  return PJRT_Buffer_Type_INVALID;
}

// Wraps an entry point: checks the args pointer and struct size, and keeps exceptions inside.
template <typename Args>
PJRT_Error* Guard(const char* name, Args* args, size_t min_size, const std::function<PJRT_Error*()>& body) {
  if (!args) return Invalid(std::string(name) + ": args is null");
  if (args->struct_size < min_size)
    return Invalid(std::string(name) + ": struct_size " + std::to_string(args->struct_size) + " is smaller than " +
                   std::to_string(min_size));
  try {
    return body();
  } catch (const std::exception& e) {
    return MakeError(Internal(std::string(name) + ": " + e.what()));
  } catch (...) {
    return MakeError(Internal(std::string(name) + ": unknown failure"));
  }
}

#define JMP_ENTRY(Name) \
  PJRT_Error* Name(Name##_Args* args) { return Guard(#Name, args, Name##_Args_STRUCT_SIZE, [&]() -> PJRT_Error* {
#define JMP_END \
  });           \
  }
#define JMP_REQUIRE(cond, message) \
  if (!(cond)) return Invalid(message)

int64_t Product(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::vector<int64_t> DefaultMinorToMajor(size_t rank) {
  std::vector<int64_t> m(rank);
  for (size_t i = 0; i < rank; ++i) m[i] = static_cast<int64_t>(rank - 1 - i);
  return m;
}

// `allocated`: the memory was allocated for this buffer (not an input's, reused by donation).
PJRT_Buffer* NewBuffer(PJRT_Client* client, DType dtype, std::vector<int64_t> dims, std::shared_ptr<exec::DeviceMemory> mem,
                       bool allocated = true) {
  auto state = std::make_shared<BufferState>();
  state->client = client->state.get();
  state->dtype = dtype;
  state->minor_to_major = DefaultMinorToMajor(dims.size());
  state->dims = std::move(dims);
  state->bytes = static_cast<size_t>(Product(state->dims)) * ByteSize(dtype);
  state->memory = std::move(mem);
  ClientState* c = client->state.get();
  int64_t now = c->bytes_in_use += static_cast<int64_t>(state->bytes);
  if (allocated) c->num_allocs++;
  int64_t peak = c->peak_bytes.load();
  while (now > peak && !c->peak_bytes.compare_exchange_weak(peak, now)) {
  }
  return new PJRT_Buffer{std::move(state), client};
}

StatusOr<std::shared_ptr<exec::DeviceMemory>> LiveMemory(PJRT_Buffer* b) {
  std::lock_guard<std::mutex> lock(b->state->mu);
  if (b->state->deleted || !b->state->memory) return FailedPrecondition("the buffer has been deleted or donated");
  return b->state->memory;
}

// A host read of a buffer's memory outside the work queue: entered while the buffer is live, so that an
// execution donating the buffer afterwards does not overwrite it before the read is done.
class HostRead {
 public:
  explicit HostRead(PJRT_Buffer* b) {
    std::lock_guard<std::mutex> lock(b->state->mu);
    if (b->state->deleted || !b->state->memory) return;
    memory_ = b->state->memory;
    gate_ = b->state->reads;
    gate_->Enter();
  }
  ~HostRead() {
    if (gate_) gate_->Leave();
  }
  HostRead(const HostRead&) = delete;
  HostRead& operator=(const HostRead&) = delete;
  Status status() const { return memory_ ? Status::Ok() : FailedPrecondition("the buffer has been deleted or donated"); }
  exec::DeviceMemory* memory() const { return memory_.get(); }

 private:
  std::shared_ptr<exec::DeviceMemory> memory_;
  std::shared_ptr<ReadGate> gate_;
};

// ---- errors

void PJRT_Error_Destroy(PJRT_Error_Destroy_Args* args) {
  if (args && args->error) delete args->error;
}
void PJRT_Error_Message(PJRT_Error_Message_Args* args) {
  if (!args || !args->error) return;
  args->message = args->error->status.message().c_str();
  args->message_size = args->error->status.message().size();
}
JMP_ENTRY(PJRT_Error_GetCode)
  JMP_REQUIRE(args->error, "PJRT_Error_GetCode: error is null");
  args->code = ToCode(args->error->status.code());
  return nullptr;
JMP_END

// ---- plugin

JMP_ENTRY(PJRT_Plugin_Initialize)
  return nullptr;
JMP_END

JMP_ENTRY(PJRT_Plugin_Attributes)
  static const int64_t current[3] = {shlo::kNewestVersion[0], shlo::kNewestVersion[1], shlo::kNewestVersion[2]};
  static const int64_t minimum[3] = {shlo::kOldestVersion[0], shlo::kOldestVersion[1], shlo::kOldestVersion[2]};
  static PJRT_NamedValue attrs[3];
  static std::once_flag once;
  std::call_once(once, [] {
    auto list = [](PJRT_NamedValue& v, const char* name, const int64_t* values) {
      v.struct_size = PJRT_NamedValue_STRUCT_SIZE;
      v.name = name;
      v.name_size = std::strlen(name);
      v.type = PJRT_NamedValue_kInt64List;
      v.int64_array_value = values;
      v.value_size = 3;
    };
    attrs[0].struct_size = PJRT_NamedValue_STRUCT_SIZE;
    attrs[0].name = "xla_version";
    attrs[0].name_size = std::strlen("xla_version");
    attrs[0].type = PJRT_NamedValue_kInt64;
    attrs[0].int64_value = 2;
    attrs[0].value_size = 1;
    list(attrs[1], "stablehlo_current_version", current);
    list(attrs[2], "stablehlo_minimum_version", minimum);
  });
  args->attributes = attrs;
  args->num_attributes = 3;
  return nullptr;
JMP_END

// ---- events

JMP_ENTRY(PJRT_Event_Destroy)
  delete args->event;
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_Event_IsReady)
  JMP_REQUIRE(args->event, "PJRT_Event_IsReady: event is null");
  args->is_ready = args->event->state->ready();
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_Event_Error)
  JMP_REQUIRE(args->event, "PJRT_Event_Error: event is null");
  if (!args->event->state->ready()) return Invalid("PJRT_Event_Error: the event is not ready");
  return MakeError(args->event->state->Await());
JMP_END
JMP_ENTRY(PJRT_Event_Await)
  JMP_REQUIRE(args->event, "PJRT_Event_Await: event is null");
  return MakeError(args->event->state->Await());
JMP_END
JMP_ENTRY(PJRT_Event_OnReady)
  JMP_REQUIRE(args->event && args->callback, "PJRT_Event_OnReady: event or callback is null");
  PJRT_Event_OnReadyCallback cb = args->callback;
  void* user = args->user_arg;
  args->event->state->OnReady([cb, user](Status s) { cb(MakeError(std::move(s)), user); });
  return nullptr;
JMP_END

// ---- client

JMP_ENTRY(PJRT_Client_Create)
  auto executor = exec::CreateDefaultExecutor();
  if (!executor.ok()) return MakeError(executor.status());
  auto* client = new PJRT_Client;
  client->state = std::make_unique<ClientState>();
  client->state->executor = std::move(executor).value();
  client->state->device_kind = client->state->executor->name() == "metal" ? "Apple GPU (MPSGraph)"
                                                                           : "Metal plugin host executor (CPU)";
  client->state->platform_version = "jax-metal-plugin 0.1.0 (" + client->state->executor->name() + " executor)";
  client->device.description.client = client;
  client->memory.client = client;
  client->device_list[0] = &client->device;
  client->memory_list[0] = &client->memory;
  args->client = client;
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_Client_Destroy)
  delete args->client;
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_Client_PlatformName)
  JMP_REQUIRE(args->client, "PJRT_Client_PlatformName: client is null");
  args->platform_name = "metal";
  args->platform_name_size = 5;
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_Client_ProcessIndex)
  JMP_REQUIRE(args->client, "PJRT_Client_ProcessIndex: client is null");
  args->process_index = 0;
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_Client_PlatformVersion)
  JMP_REQUIRE(args->client, "PJRT_Client_PlatformVersion: client is null");
  args->platform_version = args->client->state->platform_version.c_str();
  args->platform_version_size = args->client->state->platform_version.size();
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_Client_Devices)
  JMP_REQUIRE(args->client, "PJRT_Client_Devices: client is null");
  args->devices = args->client->device_list;
  args->num_devices = 1;
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_Client_AddressableDevices)
  JMP_REQUIRE(args->client, "PJRT_Client_AddressableDevices: client is null");
  args->addressable_devices = args->client->device_list;
  args->num_addressable_devices = 1;
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_Client_LookupDevice)
  JMP_REQUIRE(args->client, "PJRT_Client_LookupDevice: client is null");
  if (args->id != 0) return MakeError(NotFound("no device with id " + std::to_string(args->id)));
  args->device = &args->client->device;
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_Client_LookupAddressableDevice)
  JMP_REQUIRE(args->client, "PJRT_Client_LookupAddressableDevice: client is null");
  if (args->local_hardware_id != 0) return MakeError(NotFound("no device with local id " + std::to_string(args->local_hardware_id)));
  args->addressable_device = &args->client->device;
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_Client_AddressableMemories)
  JMP_REQUIRE(args->client, "PJRT_Client_AddressableMemories: client is null");
  args->addressable_memories = args->client->memory_list;
  args->num_addressable_memories = 1;
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_Client_DefaultDeviceAssignment)
  JMP_REQUIRE(args->client, "PJRT_Client_DefaultDeviceAssignment: client is null");
  JMP_REQUIRE(args->num_replicas == 1 && args->num_partitions == 1, "the metal platform has one device: one replica, one partition");
  JMP_REQUIRE(args->default_assignment && args->default_assignment_size >= 1, "PJRT_Client_DefaultDeviceAssignment: no room for the assignment");
  args->default_assignment[0] = 0;
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_Client_TopologyDescription)
  return MakeError(Unimplemented("the metal plugin has no topology description"));
JMP_END

JMP_ENTRY(PJRT_Client_Compile)
  JMP_REQUIRE(args->client && args->program, "PJRT_Client_Compile: client or program is null");
  const PJRT_Program* p = args->program;
  std::string format(p->format ? p->format : "", p->format ? p->format_size : 0);
  if (format != "mlir") return MakeError(Unimplemented("program format '" + format + "' is not supported; expected 'mlir'"));
  if (!p->code && p->code_size) return Invalid("PJRT_Client_Compile: program code is null");
  auto module = shlo::ReadArtifact(reinterpret_cast<const uint8_t*>(p->code), p->code_size);
  if (!module.ok()) return MakeError(module.status());
  auto graph = mps::LowerModule(*module);
  if (!graph.ok()) return MakeError(graph.status());
  auto donation = shlo::DonationOf(*module->FindFunc("main"));  // LowerModule found @main
  if (!donation.ok()) return MakeError(donation.status());
  auto program = std::make_shared<CompiledProgram>();
  program->graph = std::move(graph).value();
  if (donation->aliased_output.size() != program->graph.inputs.size())
    return MakeError(Internal("@main's arguments and the graph's inputs differ in number"));
  program->aliased_output = std::move(donation->aliased_output);
  program->donated = std::move(donation->donated);
  auto compiled = args->client->state->executor->Compile(program->graph);
  if (!compiled.ok()) return MakeError(compiled.status());
  program->executable = std::move(compiled).value();
  program->in_place = program->executable->OutputsMayAliasInputs();
  program->name = "main";
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the artifact
  for (size_t i = 0; i < p->code_size; ++i) h = (h ^ static_cast<uint8_t>(p->code[i])) * 1099511628211ull;
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(h));
  program->fingerprint = hex;
  for (int v : program->graph.outputs) {
    const mps::TensorType& t = program->graph.type(v);
    program->output_types.push_back(ToBufferType(t.dtype));
    program->output_ranks.push_back(t.shape.size());
    program->output_dims_flat.insert(program->output_dims_flat.end(), t.shape.begin(), t.shape.end());
    program->output_memory_kinds.push_back("device");
    program->output_memory_kind_sizes.push_back(6);
  }
  auto* loaded = new PJRT_LoadedExecutable;
  loaded->program = std::move(program);
  loaded->client = args->client;
  args->executable = loaded;
  return nullptr;
JMP_END

// Copies a host array (any byte strides) into dense row-major device memory.
void CopyStrided(const uint8_t* src, uint8_t* dst, const std::vector<int64_t>& dims, const int64_t* strides, size_t width) {
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

JMP_ENTRY(PJRT_Client_BufferFromHostBuffer)
  JMP_REQUIRE(args->client, "PJRT_Client_BufferFromHostBuffer: client is null");
  DType dtype;
  int raw_type;
  std::memcpy(&raw_type, &args->type, sizeof(raw_type));
  if (!ToDType(raw_type, &dtype))
    return MakeError(Unimplemented("buffer element type " + std::to_string(raw_type) + " is not supported by the metal plugin"));
  JMP_REQUIRE(args->num_dims == 0 || args->dims, "PJRT_Client_BufferFromHostBuffer: dims is null");
  std::vector<int64_t> dims(args->dims, args->dims + args->num_dims);
  for (int64_t d : dims) JMP_REQUIRE(d >= 0, "negative dimension");
  if (args->device && args->device != &args->client->device) return Invalid("the device does not belong to this client");
  if (args->memory && args->memory != &args->client->memory) return Invalid("the memory does not belong to this client");
  if (args->device_layout) {
    bool dense = args->device_layout->type == PJRT_Buffer_MemoryLayout_Type_Tiled &&
                 args->device_layout->tiled.num_tiles == 0 &&
                 args->device_layout->tiled.minor_to_major_size == dims.size();
    for (size_t i = 0; dense && i < dims.size(); ++i)
      dense = args->device_layout->tiled.minor_to_major[i] == static_cast<int64_t>(dims.size() - 1 - i);
    if (!dense) return MakeError(Unimplemented("device layouts other than dense row-major are not supported"));
  }
  size_t width = ByteSize(dtype);
  size_t bytes = static_cast<size_t>(Product(dims)) * width;
  JMP_REQUIRE(bytes == 0 || args->data, "PJRT_Client_BufferFromHostBuffer: data is null");
  auto mem = args->client->state->executor->Allocate(bytes);
  if (!mem.ok()) return MakeError(mem.status());
  std::shared_ptr<exec::DeviceMemory> memory = std::move(mem).value();
  bool dense = true;
  if (args->byte_strides && args->num_byte_strides) {
    JMP_REQUIRE(args->num_byte_strides == dims.size(), "byte_strides does not match the rank");
    int64_t expect = static_cast<int64_t>(width);
    for (size_t d = dims.size(); d-- > 0;) {
      if (dims[d] > 1 && args->byte_strides[d] != expect) dense = false;
      expect *= dims[d];
    }
  }
  if (bytes) {
    if (dense) std::memcpy(memory->data(), args->data, bytes);
    else CopyStrided(static_cast<const uint8_t*>(args->data), static_cast<uint8_t*>(memory->data()), dims, args->byte_strides, width);
  }
  g_copy_count++;
  PJRT_Buffer* buffer = NewBuffer(args->client, dtype, std::move(dims), std::move(memory));
  buffer->state->ready->Set(Status::Ok());
  // The host data was copied during the call, whatever the semantics asked: it is free now.
  auto done = std::make_shared<EventState>();
  done->Set(Status::Ok());
  args->done_with_host_buffer = new PJRT_Event{done};
  args->buffer = buffer;
  return nullptr;
JMP_END

// ---- device descriptions, devices, memories

JMP_ENTRY(PJRT_DeviceDescription_Id)
  JMP_REQUIRE(args->device_description, "device_description is null");
  args->id = 0;
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_DeviceDescription_ProcessIndex)
  JMP_REQUIRE(args->device_description, "device_description is null");
  args->process_index = 0;
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_DeviceDescription_Attributes)
  JMP_REQUIRE(args->device_description, "device_description is null");
  args->num_attributes = 0;
  args->attributes = nullptr;
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_DeviceDescription_Kind)
  JMP_REQUIRE(args->device_description, "device_description is null");
  const std::string& kind = args->device_description->client->state->device_kind;
  args->device_kind = kind.c_str();
  args->device_kind_size = kind.size();
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_DeviceDescription_DebugString)
  JMP_REQUIRE(args->device_description, "device_description is null");
  static const char kDebug[] = "MetalDevice(id=0)";
  args->debug_string = kDebug;
  args->debug_string_size = sizeof(kDebug) - 1;
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_DeviceDescription_ToString)
  JMP_REQUIRE(args->device_description, "device_description is null");
  static const char kString[] = "MetalDevice(id=0)";
  args->to_string = kString;
  args->to_string_size = sizeof(kString) - 1;
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_Device_GetDescription)
  JMP_REQUIRE(args->device, "device is null");
  args->device_description = &args->device->description;
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_Device_IsAddressable)
  JMP_REQUIRE(args->device, "device is null");
  args->is_addressable = true;
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_Device_LocalHardwareId)
  JMP_REQUIRE(args->device, "device is null");
  args->local_hardware_id = 0;
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_Device_AddressableMemories)
  JMP_REQUIRE(args->device, "device is null");
  args->memories = args->device->description.client->memory_list;
  args->num_memories = 1;
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_Device_DefaultMemory)
  JMP_REQUIRE(args->device, "device is null");
  args->memory = &args->device->description.client->memory;
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_Device_MemoryStats)
  JMP_REQUIRE(args->device, "device is null");
  ClientState* c = args->device->description.client->state.get();
  args->bytes_in_use = c->bytes_in_use.load();
  args->peak_bytes_in_use = c->peak_bytes.load();
  args->peak_bytes_in_use_is_set = true;
  args->num_allocs = c->num_allocs.load();
  args->num_allocs_is_set = true;
  args->largest_alloc_size_is_set = false;
  args->bytes_limit_is_set = false;
  args->bytes_reserved_is_set = false;
  args->peak_bytes_reserved_is_set = false;
  args->bytes_reservable_limit_is_set = false;
  args->largest_free_block_bytes_is_set = false;
  args->pool_bytes_is_set = false;
  args->peak_pool_bytes_is_set = false;
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_Memory_Id)
  JMP_REQUIRE(args->memory, "memory is null");
  args->id = 0;
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_Memory_Kind)
  JMP_REQUIRE(args->memory, "memory is null");
  args->kind = "device";
  args->kind_size = 6;
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_Memory_Kind_Id)
  JMP_REQUIRE(args->memory, "memory is null");
  args->kind_id = 0;
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_Memory_DebugString)
  JMP_REQUIRE(args->memory, "memory is null");
  args->debug_string = "MetalMemory(device)";
  args->debug_string_size = std::strlen(args->debug_string);
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_Memory_ToString)
  JMP_REQUIRE(args->memory, "memory is null");
  args->to_string = "MetalMemory(device)";
  args->to_string_size = std::strlen(args->to_string);
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_Memory_AddressableByDevices)
  JMP_REQUIRE(args->memory, "memory is null");
  args->devices = args->memory->client->device_list;
  args->num_devices = 1;
  return nullptr;
JMP_END

// ---- executables

JMP_ENTRY(PJRT_Executable_Destroy)
  delete args->executable;
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_Executable_Name)
  JMP_REQUIRE(args->executable, "executable is null");
  args->executable_name = args->executable->program->name.c_str();
  args->executable_name_size = args->executable->program->name.size();
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_Executable_NumReplicas)
  JMP_REQUIRE(args->executable, "executable is null");
  args->num_replicas = 1;
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_Executable_NumPartitions)
  JMP_REQUIRE(args->executable, "executable is null");
  args->num_partitions = 1;
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_Executable_NumOutputs)
  JMP_REQUIRE(args->executable, "executable is null");
  args->num_outputs = args->executable->program->graph.outputs.size();
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_Executable_SizeOfGeneratedCodeInBytes)
  JMP_REQUIRE(args->executable, "executable is null");
  args->size_in_bytes = 0;
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_Executable_GetCostAnalysis)
  JMP_REQUIRE(args->executable, "executable is null");
  args->num_properties = 0;
  args->properties = nullptr;
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_Executable_OutputMemoryKinds)
  JMP_REQUIRE(args->executable, "executable is null");
  auto& p = *args->executable->program;
  args->num_outputs = p.output_memory_kinds.size();
  args->memory_kinds = p.output_memory_kinds.data();
  args->memory_kind_sizes = p.output_memory_kind_sizes.data();
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_Executable_OutputElementTypes)
  JMP_REQUIRE(args->executable, "executable is null");
  auto& p = *args->executable->program;
  args->output_types = p.output_types.data();
  args->num_output_types = p.output_types.size();
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_Executable_OutputDimensions)
  JMP_REQUIRE(args->executable, "executable is null");
  auto& p = *args->executable->program;
  args->num_outputs = p.output_ranks.size();
  args->dims = p.output_dims_flat.data();
  args->dim_sizes = p.output_ranks.data();
  return nullptr;
JMP_END
// Sizes the executable's buffers take: arguments, results, and how much of the results reuses donated
// arguments (alias). Temporaries are the executor's business and not known here.
JMP_ENTRY(PJRT_Executable_GetCompiledMemoryStats)
  JMP_REQUIRE(args->executable, "executable is null");
  const CompiledProgram& p = *args->executable->program;
  const mps::Graph& g = p.graph;
  int64_t in = 0, out = 0, alias = 0;
  for (int v : g.inputs) in += static_cast<int64_t>(g.type(v).ByteSize());
  for (int v : g.outputs) out += static_cast<int64_t>(g.type(v).ByteSize());
  if (p.in_place)
    for (size_t i = 0; i < g.inputs.size(); ++i)
      if (p.aliased_output[i] >= 0) alias += static_cast<int64_t>(g.type(g.inputs[i]).ByteSize());
  args->generated_code_size_in_bytes = 0;
  args->argument_size_in_bytes = in;
  args->output_size_in_bytes = out;
  args->alias_size_in_bytes = alias;
  args->temp_size_in_bytes = 0;
  args->host_generated_code_size_in_bytes = 0;
  args->host_argument_size_in_bytes = 0;
  args->host_output_size_in_bytes = 0;
  args->host_alias_size_in_bytes = 0;
  args->host_temp_size_in_bytes = 0;
  args->peak_memory_in_bytes = in + out - alias;
  args->total_size_in_bytes = in + out - alias;
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_Executable_Fingerprint)
  JMP_REQUIRE(args->executable, "executable is null");
  args->executable_fingerprint = args->executable->program->fingerprint.c_str();
  args->executable_fingerprint_size = args->executable->program->fingerprint.size();
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_LoadedExecutable_Destroy)
  delete args->executable;
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_LoadedExecutable_GetExecutable)
  JMP_REQUIRE(args->loaded_executable, "loaded_executable is null");
  args->executable = new PJRT_Executable{args->loaded_executable->program};
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_LoadedExecutable_AddressableDevices)
  JMP_REQUIRE(args->executable, "executable is null");
  args->addressable_devices = args->executable->client->device_list;
  args->num_addressable_devices = 1;
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_LoadedExecutable_Delete)
  JMP_REQUIRE(args->executable, "executable is null");
  args->executable->deleted = true;
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_LoadedExecutable_IsDeleted)
  JMP_REQUIRE(args->executable, "executable is null");
  args->is_deleted = args->executable->deleted;
  return nullptr;
JMP_END
// DeviceAssignmentProto{replica_count: 1, computation_count: 1, computation_devices: [{replica_device_ids: [0]}]}
// in protobuf wire format: one replica, one partition, device 0.
JMP_ENTRY(PJRT_LoadedExecutable_GetDeviceAssignment)
  JMP_REQUIRE(args->executable, "executable is null");
  static const char kAssignment[] = {0x08, 0x01, 0x10, 0x01, 0x1A, 0x03, 0x0A, 0x01, 0x00};
  args->serialized_bytes = kAssignment;
  args->serialized_bytes_size = sizeof(kAssignment);
  args->serialized_device_assignment = nullptr;
  args->serialized_device_assignment_deleter = [](PJRT_DeviceAssignmentSerialized*) {};
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_LoadedExecutable_Fingerprint)
  JMP_REQUIRE(args->executable, "executable is null");
  args->executable_fingerprint = args->executable->program->fingerprint.c_str();
  args->executable_fingerprint_size = args->executable->program->fingerprint.size();
  return nullptr;
JMP_END

// Buffer donation. An input is donated when @main declares it (tf.aliasing_output, jax.buffer_donor)
// and the caller does not list it in non_donatable_input_indices, unless other frameworks hold
// references to its memory (dlpack: then it is used, not donated, as on XLA's CPU client). A donated
// buffer is consumed by the call: it reads as deleted as soon as Execute returns, and its memory is
// reused for the output it aliases (or, for a buffer donor, the first unclaimed output of its byte size)
// when the executor can write outputs over inputs; otherwise it is freed once the run is done. Work
// queued earlier that reads it runs first (one in-order queue), and host reads that started earlier
// (ToHostBuffer, copies) finish before the run writes over it.
JMP_ENTRY(PJRT_LoadedExecutable_Execute)
  PJRT_LoadedExecutable* loaded = args->executable;
  JMP_REQUIRE(loaded, "PJRT_LoadedExecutable_Execute: executable is null");
  if (loaded->deleted) return MakeError(FailedPrecondition("the executable has been deleted"));
  JMP_REQUIRE(args->num_devices == 1, "the metal platform executes on exactly one device");
  JMP_REQUIRE(args->num_args == 0 || (args->argument_lists && args->argument_lists[0]), "argument_lists is null");
  auto program = loaded->program;
  const mps::Graph& g = program->graph;
  const size_t n = args->num_args;
  if (n != g.inputs.size())
    return Invalid("the executable takes " + std::to_string(g.inputs.size()) + " arguments, got " + std::to_string(n));
  // A computation without results (jit(lambda x: ())) gets no output list, or an empty one (null).
  JMP_REQUIRE(g.outputs.empty() || (args->output_lists && args->output_lists[0]),
              "PJRT_LoadedExecutable_Execute: output_lists is null but the executable has " +
                  std::to_string(g.outputs.size()) + " outputs");
  PJRT_Client* client = loaded->client;
  PJRT_Buffer* const* argv = n ? args->argument_lists[0] : nullptr;

  std::vector<bool> donate = program->donated;
  const PJRT_ExecuteOptions* options = args->options;
  constexpr size_t kNonDonatableEnd =
      offsetof(PJRT_ExecuteOptions, num_non_donatable_input_indices) + sizeof(size_t);
  if (options && options->struct_size >= kNonDonatableEnd && options->num_non_donatable_input_indices) {
    JMP_REQUIRE(options->non_donatable_input_indices, "non_donatable_input_indices is null");
    for (size_t k = 0; k < options->num_non_donatable_input_indices; ++k) {
      int64_t i = options->non_donatable_input_indices[k];
      if (i >= 0 && static_cast<size_t>(i) < n) donate[static_cast<size_t>(i)] = false;
    }
  }

  // Checking the arguments and queueing the run happen under one lock: a buffer found live here cannot
  // be donated by a run queued before this one.
  std::lock_guard<std::mutex> submit(client->state->submit_mu);
  std::vector<std::shared_ptr<exec::DeviceMemory>> inputs(n);
  std::vector<std::shared_ptr<EventState>> waits;
  std::unordered_map<const BufferState*, size_t> first_use;
  for (size_t i = 0; i < n; ++i) {
    PJRT_Buffer* b = argv[i];
    JMP_REQUIRE(b, "argument " + std::to_string(i) + " is null");
    const mps::TensorType& t = g.type(g.inputs[i]);
    if (b->state->dtype != t.dtype || b->state->dims != t.shape)
      return Invalid("argument " + std::to_string(i) + " has the wrong type or shape");
    auto [it, fresh] = first_use.emplace(b->state.get(), i);
    if (!fresh && (donate[i] || donate[it->second]))
      return Invalid("argument " + std::to_string(i) + " is the buffer passed as argument " + std::to_string(it->second) +
                     ", which this call donates: a donated buffer cannot also be used by the same call (as in "
                     "f(donate(a), a))");
    std::lock_guard<std::mutex> lock(b->state->mu);
    if (b->state->deleted || !b->state->memory)
      return MakeError(FailedPrecondition("argument " + std::to_string(i) + ": the buffer has been deleted or donated"));
    if (b->state->external_refs > 0) donate[i] = false;
    inputs[i] = b->state->memory;
    waits.push_back(b->state->ready);
  }

  // Outputs: a donated input's memory where the executor allows it, fresh memory otherwise.
  const size_t m = g.outputs.size();
  std::vector<int64_t> reuse(m, -1);  // per output: the donated input whose memory it takes, or -1
  if (program->in_place) {
    auto fits = [&](size_t i, size_t j) { return inputs[i]->size() == g.type(g.outputs[j]).ByteSize(); };
    for (size_t i = 0; i < n; ++i) {
      int64_t j = program->aliased_output[i];
      if (donate[i] && j >= 0 && fits(i, static_cast<size_t>(j))) reuse[static_cast<size_t>(j)] = static_cast<int64_t>(i);
    }
    for (size_t i = 0; i < n; ++i) {
      if (!donate[i] || program->aliased_output[i] >= 0) continue;
      for (size_t j = 0; j < m; ++j)
        if (reuse[j] < 0 && fits(i, j)) {
          reuse[j] = static_cast<int64_t>(i);
          break;
        }
    }
  }
  std::vector<std::shared_ptr<exec::DeviceMemory>> out_mems(m);
  for (size_t j = 0; j < m; ++j) {
    if (reuse[j] >= 0) {
      out_mems[j] = inputs[static_cast<size_t>(reuse[j])];
      continue;
    }
    auto mem = client->state->executor->Allocate(g.type(g.outputs[j]).ByteSize());
    if (!mem.ok()) return MakeError(mem.status());
    out_mems[j] = std::move(mem).value();
  }

  // Nothing can fail from here on: consume the donated buffers, make the outputs, queue the run.
  std::vector<std::shared_ptr<ReadGate>> overwritten;  // donated inputs the run writes over
  for (size_t i = 0; i < n; ++i) {
    if (!donate[i]) continue;
    std::lock_guard<std::mutex> lock(argv[i]->state->mu);
    argv[i]->state->DeleteLocked();
    for (size_t j = 0; j < m; ++j)
      if (reuse[j] == static_cast<int64_t>(i)) {
        overwritten.push_back(argv[i]->state->reads);
        break;
      }
  }
  std::vector<std::shared_ptr<BufferState>> outputs;
  for (size_t j = 0; j < m; ++j) {
    const mps::TensorType& t = g.type(g.outputs[j]);
    PJRT_Buffer* out = NewBuffer(client, t.dtype, t.shape, out_mems[j], /*allocated=*/reuse[j] < 0);
    outputs.push_back(out->state);
    args->output_lists[0][j] = out;
  }
  auto done = std::make_shared<EventState>();
  if (args->device_complete_events) args->device_complete_events[0] = new PJRT_Event{done};
  client->state->queue.Push([program, inputs, waits, overwritten, outputs, out_mems, done]() {
    Status status;
    for (auto& w : waits) {
      Status s = w->Await();
      if (!s.ok() && status.ok()) status = s;
    }
    for (auto& gate : overwritten) gate->WaitIdle();
    if (status.ok()) {
      std::vector<exec::DeviceMemory*> in, out;
      for (auto& mem : inputs) in.push_back(mem.get());
      for (auto& mem : out_mems) out.push_back(mem.get());
      status = program->executable->Run(in, out);
    }
    for (auto& o : outputs) o->ready->Set(status);
    done->Set(status);
  });
  return nullptr;
JMP_END

// ---- buffers

JMP_ENTRY(PJRT_Buffer_Destroy)
  delete args->buffer;
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_Buffer_ElementType)
  JMP_REQUIRE(args->buffer, "buffer is null");
  args->type = ToBufferType(args->buffer->state->dtype);
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_Buffer_Dimensions)
  JMP_REQUIRE(args->buffer, "buffer is null");
  args->dims = args->buffer->state->dims.data();
  args->num_dims = args->buffer->state->dims.size();
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_Buffer_UnpaddedDimensions)
  JMP_REQUIRE(args->buffer, "buffer is null");
  args->unpadded_dims = args->buffer->state->dims.data();
  args->num_dims = args->buffer->state->dims.size();
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_Buffer_DynamicDimensionIndices)
  JMP_REQUIRE(args->buffer, "buffer is null");
  args->dynamic_dim_indices = nullptr;
  args->num_dynamic_dims = 0;
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_Buffer_GetMemoryLayout)
  JMP_REQUIRE(args->buffer, "buffer is null");
  std::memset(&args->layout, 0, sizeof(args->layout));
  args->layout.struct_size = PJRT_Buffer_MemoryLayout_STRUCT_SIZE;
  args->layout.type = PJRT_Buffer_MemoryLayout_Type_Tiled;
  args->layout.tiled.struct_size = PJRT_Buffer_MemoryLayout_Tiled_STRUCT_SIZE;
  args->layout.tiled.minor_to_major = args->buffer->state->minor_to_major.data();
  args->layout.tiled.minor_to_major_size = args->buffer->state->minor_to_major.size();
  args->layout.tiled.num_tiles = 0;
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_Buffer_OnDeviceSizeInBytes)
  JMP_REQUIRE(args->buffer, "buffer is null");
  args->on_device_size_in_bytes = args->buffer->state->bytes;
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_Buffer_Device)
  JMP_REQUIRE(args->buffer, "buffer is null");
  args->device = &args->buffer->client->device;
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_Buffer_Memory)
  JMP_REQUIRE(args->buffer, "buffer is null");
  args->memory = &args->buffer->client->memory;
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_Buffer_Delete)
  JMP_REQUIRE(args->buffer, "buffer is null");
  std::lock_guard<std::mutex> lock(args->buffer->state->mu);
  args->buffer->state->DeleteLocked();  // deleting twice is harmless
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_Buffer_IsDeleted)
  JMP_REQUIRE(args->buffer, "buffer is null");
  std::lock_guard<std::mutex> lock(args->buffer->state->mu);
  args->is_deleted = args->buffer->state->deleted;
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_Buffer_IsOnCpu)
  JMP_REQUIRE(args->buffer, "buffer is null");
  args->is_on_cpu = false;
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_Buffer_ReadyEvent)
  JMP_REQUIRE(args->buffer, "buffer is null");
  {
    std::lock_guard<std::mutex> lock(args->buffer->state->mu);
    if (args->buffer->state->deleted) {  // the C API: a deleted or donated buffer's event is an error at once
      auto failed = std::make_shared<EventState>();
      failed->Set(FailedPrecondition("the buffer has been deleted or donated"));
      args->event = new PJRT_Event{failed};
      return nullptr;
    }
  }
  args->event = new PJRT_Event{args->buffer->state->ready};
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_Buffer_UnsafePointer)
  JMP_REQUIRE(args->buffer, "buffer is null");
  auto mem = LiveMemory(args->buffer);
  if (!mem.ok()) return MakeError(mem.status());
  args->buffer_pointer = reinterpret_cast<uintptr_t>((*mem)->data());
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_Buffer_OpaqueDeviceMemoryDataPointer)
  JMP_REQUIRE(args->buffer, "buffer is null");
  auto mem = LiveMemory(args->buffer);
  if (!mem.ok()) return MakeError(mem.status());
  args->device_memory_ptr = (*mem)->data();
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_Buffer_IncreaseExternalReferenceCount)
  JMP_REQUIRE(args->buffer, "buffer is null");
  std::lock_guard<std::mutex> lock(args->buffer->state->mu);
  args->buffer->state->external_refs++;
  return nullptr;
JMP_END
JMP_ENTRY(PJRT_Buffer_DecreaseExternalReferenceCount)
  JMP_REQUIRE(args->buffer, "buffer is null");
  std::lock_guard<std::mutex> lock(args->buffer->state->mu);
  if (args->buffer->state->external_refs == 0) return MakeError(FailedPrecondition("external reference count is already 0"));
  args->buffer->state->external_refs--;
  return nullptr;
JMP_END

JMP_ENTRY(PJRT_Buffer_ToHostBuffer)
  JMP_REQUIRE(args->src, "PJRT_Buffer_ToHostBuffer: src is null");
  BufferState& s = *args->src->state;
  if (args->host_layout) {
    bool dense = args->host_layout->type == PJRT_Buffer_MemoryLayout_Type_Tiled && args->host_layout->tiled.num_tiles == 0 &&
                 args->host_layout->tiled.minor_to_major_size == s.dims.size();
    for (size_t i = 0; dense && i < s.dims.size(); ++i)
      dense = args->host_layout->tiled.minor_to_major[i] == static_cast<int64_t>(s.dims.size() - 1 - i);
    if (!dense) return MakeError(Unimplemented("host layouts other than dense row-major are not supported"));
  }
  if (!args->dst) {
    args->dst_size = s.bytes;
    return nullptr;
  }
  if (args->dst_size < s.bytes) return Invalid("destination holds " + std::to_string(args->dst_size) + " bytes, the buffer " + std::to_string(s.bytes));
  HostRead read(args->src);
  if (!read.status().ok()) return MakeError(read.status());
  Status ready = s.ready->Await();
  auto event = std::make_shared<EventState>();
  if (ready.ok() && s.bytes) std::memcpy(args->dst, read.memory()->data(), s.bytes);
  g_copy_count++;
  event->Set(ready);
  args->event = new PJRT_Event{event};
  return nullptr;
JMP_END

PJRT_Error* CopyBuffer(PJRT_Buffer* src, PJRT_Buffer** dst) {
  HostRead read(src);
  if (!read.status().ok()) return MakeError(read.status());
  Status ready = src->state->ready->Await();
  if (!ready.ok()) return MakeError(ready);
  auto copy = src->client->state->executor->Allocate(src->state->bytes);
  if (!copy.ok()) return MakeError(copy.status());
  if (src->state->bytes) std::memcpy((*copy)->data(), read.memory()->data(), src->state->bytes);
  *dst = NewBuffer(src->client, src->state->dtype, src->state->dims, *copy);
  (*dst)->state->ready->Set(Status::Ok());
  return nullptr;
}

JMP_ENTRY(PJRT_Buffer_CopyToDevice)
  JMP_REQUIRE(args->buffer && args->dst_device, "PJRT_Buffer_CopyToDevice: buffer or device is null");
  if (args->dst_device != &args->buffer->client->device) return Invalid("the destination device belongs to another client");
  return CopyBuffer(args->buffer, &args->dst_buffer);
JMP_END
JMP_ENTRY(PJRT_Buffer_CopyToMemory)
  JMP_REQUIRE(args->buffer && args->dst_memory, "PJRT_Buffer_CopyToMemory: buffer or memory is null");
  if (args->dst_memory != &args->buffer->client->memory) return Invalid("the destination memory belongs to another client");
  return CopyBuffer(args->buffer, &args->dst_buffer);
JMP_END

#undef JMP_ENTRY
#undef JMP_END

// Entry points this plugin does not offer: a clear error, never a crash.
template <typename Args>
PJRT_Error* NotOffered(const char* name, Args* args) {
  return MakeError(Unimplemented(std::string(name) + " is not supported by the metal plugin"));
}

}  // namespace

// ---- event state and the work queue

void EventState::Set(Status status) {
  std::vector<std::function<void(Status)>> callbacks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (ready_) return;
    ready_ = true;
    status_ = status;
    callbacks.swap(callbacks_);
  }
  cv_.notify_all();
  for (auto& cb : callbacks) cb(status);
}
bool EventState::ready() {
  std::lock_guard<std::mutex> lock(mu_);
  return ready_;
}
Status EventState::Await() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return ready_; });
  return status_;
}
void EventState::OnReady(std::function<void(Status)> callback) {
  Status status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!ready_) {
      callbacks_.push_back(std::move(callback));
      return;
    }
    status = status_;
  }
  callback(status);
}

WorkQueue::WorkQueue() {
  worker_ = std::thread([this] {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !tasks_.empty(); });
        if (tasks_.empty()) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  });
}
WorkQueue::~WorkQueue() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}
void WorkQueue::Push(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.push_back(std::move(task));
  }
  cv_.notify_one();
}

void ReadGate::Enter() {
  std::lock_guard<std::mutex> lock(mu_);
  ++readers_;
}
void ReadGate::Leave() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    --readers_;
  }
  cv_.notify_all();
}
void ReadGate::WaitIdle() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return readers_ == 0; });
}

void BufferState::DeleteLocked() {
  deleted = true;
  if (memory && client) client->bytes_in_use -= static_cast<int64_t>(bytes);
  memory.reset();
}

BufferState::~BufferState() {
  if (memory && client) client->bytes_in_use -= static_cast<int64_t>(bytes);
}

const PJRT_Api* GetApi() {
  static PJRT_Api api = [] {
    PJRT_Api a;
    std::memset(&a, 0, sizeof(a));
    a.struct_size = PJRT_Api_STRUCT_SIZE;
    a.pjrt_api_version.struct_size = PJRT_Api_Version_STRUCT_SIZE;
    a.pjrt_api_version.major_version = PJRT_API_MAJOR;
    a.pjrt_api_version.minor_version = PJRT_API_MINOR;
#define JMP_OFFER(Name) a.Name = Name;
#define JMP_DECLINE(Name) a.Name = [](Name##_Args* args) { return NotOffered(#Name, args); };
    JMP_OFFER(PJRT_Error_Destroy)
    JMP_OFFER(PJRT_Error_Message)
    JMP_OFFER(PJRT_Error_GetCode)
    JMP_OFFER(PJRT_Plugin_Initialize)
    JMP_OFFER(PJRT_Plugin_Attributes)
    JMP_OFFER(PJRT_Event_Destroy)
    JMP_OFFER(PJRT_Event_IsReady)
    JMP_OFFER(PJRT_Event_Error)
    JMP_OFFER(PJRT_Event_Await)
    JMP_OFFER(PJRT_Event_OnReady)
    JMP_OFFER(PJRT_Client_Create)
    JMP_OFFER(PJRT_Client_Destroy)
    JMP_OFFER(PJRT_Client_PlatformName)
    JMP_OFFER(PJRT_Client_ProcessIndex)
    JMP_OFFER(PJRT_Client_PlatformVersion)
    JMP_OFFER(PJRT_Client_Devices)
    JMP_OFFER(PJRT_Client_AddressableDevices)
    JMP_OFFER(PJRT_Client_LookupDevice)
    JMP_OFFER(PJRT_Client_LookupAddressableDevice)
    JMP_OFFER(PJRT_Client_AddressableMemories)
    JMP_OFFER(PJRT_Client_Compile)
    JMP_OFFER(PJRT_Client_DefaultDeviceAssignment)
    JMP_OFFER(PJRT_Client_BufferFromHostBuffer)
    JMP_OFFER(PJRT_DeviceDescription_Id)
    JMP_OFFER(PJRT_DeviceDescription_ProcessIndex)
    JMP_OFFER(PJRT_DeviceDescription_Attributes)
    JMP_OFFER(PJRT_DeviceDescription_Kind)
    JMP_OFFER(PJRT_DeviceDescription_DebugString)
    JMP_OFFER(PJRT_DeviceDescription_ToString)
    JMP_OFFER(PJRT_Device_GetDescription)
    JMP_OFFER(PJRT_Device_IsAddressable)
    JMP_OFFER(PJRT_Device_LocalHardwareId)
    JMP_OFFER(PJRT_Device_AddressableMemories)
    JMP_OFFER(PJRT_Device_DefaultMemory)
    JMP_OFFER(PJRT_Device_MemoryStats)
    JMP_OFFER(PJRT_Memory_Id)
    JMP_OFFER(PJRT_Memory_Kind)
    JMP_OFFER(PJRT_Memory_DebugString)
    JMP_OFFER(PJRT_Memory_ToString)
    JMP_OFFER(PJRT_Memory_AddressableByDevices)
    JMP_OFFER(PJRT_Executable_Destroy)
    JMP_OFFER(PJRT_Executable_Name)
    JMP_OFFER(PJRT_Executable_NumReplicas)
    JMP_OFFER(PJRT_Executable_NumPartitions)
    JMP_OFFER(PJRT_Executable_NumOutputs)
    JMP_OFFER(PJRT_Executable_SizeOfGeneratedCodeInBytes)
    JMP_OFFER(PJRT_Executable_GetCostAnalysis)
    JMP_OFFER(PJRT_Executable_OutputMemoryKinds)
    JMP_DECLINE(PJRT_Executable_OptimizedProgram)
    JMP_DECLINE(PJRT_Executable_Serialize)
    JMP_OFFER(PJRT_LoadedExecutable_Destroy)
    JMP_OFFER(PJRT_LoadedExecutable_GetExecutable)
    JMP_OFFER(PJRT_LoadedExecutable_AddressableDevices)
    JMP_OFFER(PJRT_LoadedExecutable_Delete)
    JMP_OFFER(PJRT_LoadedExecutable_IsDeleted)
    JMP_OFFER(PJRT_LoadedExecutable_Execute)
    JMP_DECLINE(PJRT_Executable_DeserializeAndLoad)
    JMP_OFFER(PJRT_LoadedExecutable_Fingerprint)
    JMP_OFFER(PJRT_Buffer_Destroy)
    JMP_OFFER(PJRT_Buffer_ElementType)
    JMP_OFFER(PJRT_Buffer_Dimensions)
    JMP_OFFER(PJRT_Buffer_UnpaddedDimensions)
    JMP_OFFER(PJRT_Buffer_DynamicDimensionIndices)
    JMP_OFFER(PJRT_Buffer_GetMemoryLayout)
    JMP_OFFER(PJRT_Buffer_OnDeviceSizeInBytes)
    JMP_OFFER(PJRT_Buffer_Device)
    JMP_OFFER(PJRT_Buffer_Memory)
    JMP_OFFER(PJRT_Buffer_Delete)
    JMP_OFFER(PJRT_Buffer_IsDeleted)
    JMP_OFFER(PJRT_Buffer_CopyToDevice)
    JMP_OFFER(PJRT_Buffer_ToHostBuffer)
    JMP_OFFER(PJRT_Buffer_IsOnCpu)
    JMP_OFFER(PJRT_Buffer_ReadyEvent)
    JMP_OFFER(PJRT_Buffer_UnsafePointer)
    JMP_OFFER(PJRT_Buffer_IncreaseExternalReferenceCount)
    JMP_OFFER(PJRT_Buffer_DecreaseExternalReferenceCount)
    JMP_OFFER(PJRT_Buffer_OpaqueDeviceMemoryDataPointer)
    JMP_DECLINE(PJRT_CopyToDeviceStream_Destroy)
    JMP_DECLINE(PJRT_CopyToDeviceStream_AddChunk)
    JMP_DECLINE(PJRT_CopyToDeviceStream_TotalBytes)
    JMP_DECLINE(PJRT_CopyToDeviceStream_GranuleSize)
    JMP_DECLINE(PJRT_CopyToDeviceStream_CurrentBytes)
    JMP_DECLINE(PJRT_TopologyDescription_Create)
    JMP_DECLINE(PJRT_TopologyDescription_Destroy)
    JMP_DECLINE(PJRT_TopologyDescription_PlatformName)
    JMP_DECLINE(PJRT_TopologyDescription_PlatformVersion)
    JMP_DECLINE(PJRT_TopologyDescription_GetDeviceDescriptions)
    JMP_DECLINE(PJRT_TopologyDescription_Serialize)
    JMP_DECLINE(PJRT_TopologyDescription_Attributes)
    JMP_DECLINE(PJRT_Compile)
    JMP_OFFER(PJRT_Executable_OutputElementTypes)
    JMP_OFFER(PJRT_Executable_OutputDimensions)
    JMP_OFFER(PJRT_Buffer_CopyToMemory)
    JMP_DECLINE(PJRT_Client_CreateViewOfDeviceBuffer)
    JMP_OFFER(PJRT_Executable_Fingerprint)
    JMP_OFFER(PJRT_Client_TopologyDescription)
    JMP_OFFER(PJRT_Executable_GetCompiledMemoryStats)
    JMP_OFFER(PJRT_Memory_Kind_Id)
    JMP_DECLINE(PJRT_ExecuteContext_Create)
    JMP_DECLINE(PJRT_ExecuteContext_Destroy)
    JMP_DECLINE(PJRT_Buffer_CopyRawToHost)
    JMP_DECLINE(PJRT_AsyncHostToDeviceTransferManager_Destroy)
    JMP_DECLINE(PJRT_AsyncHostToDeviceTransferManager_TransferData)
    JMP_DECLINE(PJRT_Client_CreateBuffersForAsyncHostToDevice)
    JMP_DECLINE(PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer)
    JMP_DECLINE(PJRT_AsyncHostToDeviceTransferManager_Device)
    JMP_DECLINE(PJRT_AsyncHostToDeviceTransferManager_BufferCount)
    JMP_DECLINE(PJRT_AsyncHostToDeviceTransferManager_BufferSize)
    JMP_DECLINE(PJRT_AsyncHostToDeviceTransferManager_SetBufferError)
    JMP_DECLINE(PJRT_AsyncHostToDeviceTransferManager_AddMetadata)
    JMP_DECLINE(PJRT_Client_DmaMap)
    JMP_DECLINE(PJRT_Client_DmaUnmap)
    JMP_DECLINE(PJRT_Client_CreateUninitializedBuffer)
    JMP_DECLINE(PJRT_Client_UpdateGlobalProcessInfo)
    JMP_DECLINE(PJRT_TopologyDescription_Deserialize)
    JMP_DECLINE(PJRT_Client_CreateAliasBuffer)
    JMP_DECLINE(PJRT_Client_FulfillAliasBuffer)
    JMP_OFFER(PJRT_LoadedExecutable_GetDeviceAssignment)
    JMP_DECLINE(PJRT_Client_CreateErrorBuffer)
    JMP_DECLINE(PJRT_AsyncHostToDeviceTransferManager_TransferLiteral)
    JMP_DECLINE(PJRT_Buffer_CopyRawToHostFuture)
    JMP_DECLINE(PJRT_Device_PoisonExecution)
    JMP_DECLINE(PJRT_Device_CreateAsyncTrackingEvent)
    JMP_DECLINE(PJRT_AsyncTrackingEvent_Destroy)
    JMP_DECLINE(PJRT_Executable_GetCompileOptions)
    JMP_DECLINE(PJRT_Buffer_DonateWithControlDependency)
    JMP_DECLINE(PJRT_Event_Create)
    JMP_DECLINE(PJRT_Event_Set)
#undef JMP_OFFER
#undef JMP_DECLINE
    return a;
  }();
  return &api;
}

}  // namespace jmp::pjrt

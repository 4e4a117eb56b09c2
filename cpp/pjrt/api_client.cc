// Entry points of the client, of its devices (JAX_METAL_NUM_DEVICES logical devices on the one GPU) and of
// each device's memories (memory_spaces.h).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "pjrt/api.h"
#include "pjrt/build_id.h"

namespace jmp::pjrt {

namespace {

std::mutex g_clients_mu;
std::vector<ClientState*>& LiveClients() {
  static auto* clients = new std::vector<ClientState*>;  // never destroyed: clients may outlive statics
  return *clients;
}

}  // namespace

size_t TrimMemoryPools() {
  std::lock_guard<std::mutex> lock(g_clients_mu);
  size_t bytes = 0;
  for (ClientState* c : LiveClients())
    for (auto& d : c->devices) bytes += d->executor->TrimMemoryPool();
  return bytes;
}

int64_t PoolFreshAllocs() {
  std::lock_guard<std::mutex> lock(g_clients_mu);
  int64_t n = 0;
  for (ClientState* c : LiveClients())
    for (auto& d : c->devices) n += d->executor->MemoryPoolStats().fresh_allocs;
  return n;
}

StatusOr<int> NumDevicesRequested() {
  const char* env = std::getenv("JAX_METAL_NUM_DEVICES");
  if (!env || !*env) return 1;
  char* end = nullptr;
  const long n = std::strtol(env, &end, 10);
  if (*end || n < 1 || n > kMaxDevices)
    return InvalidArgument("JAX_METAL_NUM_DEVICES='" + std::string(env) + "': expected a number of devices from 1 to " +
                           std::to_string(kMaxDevices));
  return static_cast<int>(n);
}

namespace {

// The option JAX passes for a client over several processes (node_id, num_nodes), else `fallback`.
StatusOr<int64_t> IntOption(const PJRT_Client_Create_Args* args, std::string_view name, int64_t fallback) {
  for (size_t i = 0; i < args->num_options; ++i) {
    const PJRT_NamedValue& v = args->create_options[i];
    if (std::string_view(v.name, v.name_size) != name) continue;
    if (v.type != PJRT_NamedValue_kInt64)
      return InvalidArgument("the client option '" + std::string(name) + "' is not an integer");
    return v.int64_value;
  }
  return fallback;
}

PJRT_Error* KeyValueError(PJRT_Error_Code code, const char* message, size_t size) {
  return new PJRT_Error{Status(code == PJRT_Error_Code_NOT_FOUND ? StatusCode::kNotFound : StatusCode::kUnavailable,
                               std::string(message, size))};
}

Status Consume(PJRT_Error* error) {
  if (!error) return Status::Ok();
  Status status = error->status;
  delete error;
  return status;
}

// JAX's coordination service, through the callbacks PJRT hands the client.
KeyValueStore StoreOf(const PJRT_Client_Create_Args* args) {
  KeyValueStore store;
  if (!args->kv_get_callback || !args->kv_put_callback) return store;
  static PJRT_CallbackError make_error = &KeyValueError;
  store.put = [get = args->kv_put_callback, user = args->kv_put_user_arg](const std::string& key,
                                                                          const std::string& value) {
    PJRT_KeyValuePutCallback_Args a{};
    a.struct_size = PJRT_KeyValuePutCallback_Args_STRUCT_SIZE;
    a.key = key.data();
    a.key_size = key.size();
    a.value = value.data();
    a.value_size = value.size();
    a.callback_error = &make_error;
    a.user_arg = user;
    return Consume(get(&a));
  };
  store.get = [get = args->kv_get_callback, user = args->kv_get_user_arg](const std::string& key,
                                                                          int timeout_ms) -> StatusOr<std::string> {
    PJRT_KeyValueGetCallback_Args a{};
    a.struct_size = PJRT_KeyValueGetCallback_Args_STRUCT_SIZE;
    a.key = key.data();
    a.key_size = key.size();
    a.timeout_in_ms = timeout_ms;
    a.callback_error = &make_error;
    a.user_arg = user;
    JMP_RETURN_IF_ERROR(Consume(get(&a)));
    std::string value(a.value ? a.value : "", a.value ? a.value_size : 0);
    if (a.value && a.value_deleter_callback) a.value_deleter_callback(a.value);
    return value;
  };
  return store;
}

}  // namespace

StatusOr<DeviceState*> LocalState(const PJRT_Device* device) {
  if (!device) return InvalidArgument("device is null");
  if (!device->state)
    return InvalidArgument("device " + std::to_string(device->description.id) + " belongs to process " +
                           std::to_string(device->description.process_index) + ", not to this one");
  return device->state;
}

Status ClientCreate(PJRT_Client_Create_Args* args) {
  JMP_ASSIGN_OR_RETURN(int num_devices, NumDevicesRequested());
  JMP_ASSIGN_OR_RETURN(int64_t node_id, IntOption(args, "node_id", 0));
  JMP_ASSIGN_OR_RETURN(int64_t num_nodes, IntOption(args, "num_nodes", 1));
  JMP_REQUIRE(num_nodes >= 1 && node_id >= 0 && node_id < num_nodes,
              "process " + std::to_string(node_id) + " of " + std::to_string(num_nodes));
  auto state = std::make_unique<ClientState>();
  state->process_index = static_cast<int>(node_id);
  std::vector<int> devices_per_process{num_devices};
  if (num_nodes > 1) {
    JMP_ASSIGN_OR_RETURN(state->group, ProcessGroup::Join(static_cast<int>(node_id), static_cast<int>(num_nodes),
                                                          num_devices, StoreOf(args)));
    devices_per_process = state->group->devices();
  }
  for (int d = 0; d < num_devices; ++d) {
    JMP_ASSIGN_OR_RETURN(std::unique_ptr<exec::Executor> executor, exec::CreateDefaultExecutor());
    state->devices.push_back(std::make_unique<DeviceState>());
    state->devices.back()->executor = std::move(executor);
  }
  const exec::Executor& executor = *state->devices[0]->executor;
  state->device_kind = executor.name() == "metal" ? "Apple GPU (MPSGraph)" : "Metal plugin host executor (CPU)";
  // JAX hashes the platform version into its persistent-cache keys: the build and the executor choice
  // (placed and host runs make different executables on the same "host" executor) belong in it.
  const char* choice = std::getenv("JAX_METAL_EXECUTOR");
  state->platform_version = "jax-metal-plugin 0.1.0 (" + executor.name() + " executor" +
                            (choice && *choice ? std::string(", JAX_METAL_EXECUTOR=") + choice : std::string()) +
                            "; build " + BuildId() + ")";
  {
    std::lock_guard<std::mutex> lock(g_clients_mu);
    LiveClients().push_back(state.get());
  }
  auto* client = new PJRT_Client;
  client->state = std::move(state);
  const bool several = num_nodes > 1;
  int id = 0;
  for (size_t p = 0; p < devices_per_process.size(); ++p) {
    for (int local = 0; local < devices_per_process[p]; ++local, ++id) {
      const bool mine = static_cast<int64_t>(p) == node_id;
      auto device = std::make_unique<PJRT_Device>();
      device->description = PJRT_DeviceDescription{
          client, id, static_cast<int>(p), local,
          "MetalDevice(id=" + std::to_string(id) + (several ? ", process=" + std::to_string(p) : std::string()) + ")"};
      device->state = mine ? client->state->devices[static_cast<size_t>(local)].get() : nullptr;
      device->self[0] = device.get();
      for (size_t i = 0; i < kNumMemorySpaces; ++i) {
        const int memory_id = id * static_cast<int>(kNumMemorySpaces) + static_cast<int>(i);
        const auto space = static_cast<MemorySpace>(i);
        device->memories[i] =
            PJRT_Memory{client, device.get(), space, memory_id,
                        "MetalMemory(id=" + std::to_string(memory_id) + ", kind=" + std::string(KindName(space)) + ")"};
        device->memory_list[i] = &device->memories[i];
        if (mine) client->memory_list.push_back(&device->memories[i]);
      }
      client->device_list.push_back(device.get());
      if (mine) client->addressable_list.push_back(device.get());
      client->devices.push_back(std::move(device));
    }
  }
  args->client = client;
  return Status::Ok();
}

Status ClientDestroy(PJRT_Client_Destroy_Args* args) {
  if (args->client) {
    std::lock_guard<std::mutex> lock(g_clients_mu);
    auto& live = LiveClients();
    live.erase(std::remove(live.begin(), live.end(), args->client->state.get()), live.end());
  }
  delete args->client;
  return Status::Ok();
}

Status ClientPlatformName(PJRT_Client_PlatformName_Args* args) {
  JMP_REQUIRE(args->client, "PJRT_Client_PlatformName: client is null");
  args->platform_name = "metal";
  args->platform_name_size = 5;
  return Status::Ok();
}

Status ClientProcessIndex(PJRT_Client_ProcessIndex_Args* args) {
  JMP_REQUIRE(args->client, "PJRT_Client_ProcessIndex: client is null");
  args->process_index = args->client->state->process_index;
  return Status::Ok();
}

// The coordination service's view of every process; the plugin only needs to know which are gone.
Status ClientUpdateGlobalProcessInfo(PJRT_Client_UpdateGlobalProcessInfo_Args* args) {
  JMP_REQUIRE(args->client, "PJRT_Client_UpdateGlobalProcessInfo: client is null");
  JMP_REQUIRE(args->process_infos || !args->num_process_infos, "process_infos is null");
  ProcessGroup* group = args->client->state->group.get();
  if (!group) return Status::Ok();
  for (size_t i = 0; i < args->num_process_infos; ++i) {
    const PJRT_ProcessInfo& info = args->process_infos[i];
    if (info.state != PJRT_ProcessState_kDisconnected && info.state != PJRT_ProcessState_kError) continue;
    std::string why = info.state == PJRT_ProcessState_kError ? "failed" : "disconnected";
    if (info.error_message && info.error_message_size)
      why += ": " + std::string(info.error_message, info.error_message_size);
    group->SetGone(info.task_id, why);
  }
  return Status::Ok();
}

Status ClientPlatformVersion(PJRT_Client_PlatformVersion_Args* args) {
  JMP_REQUIRE(args->client, "PJRT_Client_PlatformVersion: client is null");
  args->platform_version = args->client->state->platform_version.c_str();
  args->platform_version_size = args->client->state->platform_version.size();
  return Status::Ok();
}

Status ClientDevices(PJRT_Client_Devices_Args* args) {
  JMP_REQUIRE(args->client, "PJRT_Client_Devices: client is null");
  args->devices = args->client->device_list.data();
  args->num_devices = args->client->device_list.size();
  return Status::Ok();
}

Status ClientAddressableDevices(PJRT_Client_AddressableDevices_Args* args) {
  JMP_REQUIRE(args->client, "PJRT_Client_AddressableDevices: client is null");
  args->addressable_devices = args->client->addressable_list.data();
  args->num_addressable_devices = args->client->addressable_list.size();
  return Status::Ok();
}

Status ClientLookupDevice(PJRT_Client_LookupDevice_Args* args) {
  JMP_REQUIRE(args->client, "PJRT_Client_LookupDevice: client is null");
  if (args->id < 0 || static_cast<size_t>(args->id) >= args->client->devices.size())
    return NotFound("no device with id " + std::to_string(args->id));
  args->device = args->client->device_list[static_cast<size_t>(args->id)];
  return Status::Ok();
}

Status ClientLookupAddressableDevice(PJRT_Client_LookupAddressableDevice_Args* args) {
  JMP_REQUIRE(args->client, "PJRT_Client_LookupAddressableDevice: client is null");
  const std::vector<PJRT_Device*>& local = args->client->addressable_list;
  if (args->local_hardware_id < 0 || static_cast<size_t>(args->local_hardware_id) >= local.size())
    return NotFound("no device with local id " + std::to_string(args->local_hardware_id));
  args->addressable_device = local[static_cast<size_t>(args->local_hardware_id)];
  return Status::Ok();
}

Status ClientAddressableMemories(PJRT_Client_AddressableMemories_Args* args) {
  JMP_REQUIRE(args->client, "PJRT_Client_AddressableMemories: client is null");
  args->addressable_memories = args->client->memory_list.data();
  args->num_addressable_memories = args->client->memory_list.size();
  return Status::Ok();
}

Status ClientDefaultDeviceAssignment(PJRT_Client_DefaultDeviceAssignment_Args* args) {
  JMP_REQUIRE(args->client, "PJRT_Client_DefaultDeviceAssignment: client is null");
  const size_t n = args->client->devices.size();
  JMP_REQUIRE(args->num_replicas >= 1 && args->num_partitions >= 1 &&
                  static_cast<size_t>(args->num_replicas) * static_cast<size_t>(args->num_partitions) <= n,
              "the metal platform has " + std::to_string(n) + " devices (JAX_METAL_NUM_DEVICES): too few for " +
                  std::to_string(args->num_replicas) + " replicas of " + std::to_string(args->num_partitions) +
                  " partitions");
  const size_t count = static_cast<size_t>(args->num_replicas) * static_cast<size_t>(args->num_partitions);
  JMP_REQUIRE(args->default_assignment && args->default_assignment_size >= count,
              "PJRT_Client_DefaultDeviceAssignment: no room for the assignment");
  // As XLA places them: replica r, partition p on device r * num_partitions + p.
  for (size_t i = 0; i < count; ++i) args->default_assignment[i] = static_cast<int>(i);
  return Status::Ok();
}

Status ClientTopologyDescription(PJRT_Client_TopologyDescription_Args* args) {
  return Unimplemented("the metal plugin has no topology description");
}

// ---- device descriptions

Status DeviceDescriptionId(PJRT_DeviceDescription_Id_Args* args) {
  JMP_REQUIRE(args->device_description, "device_description is null");
  args->id = args->device_description->id;
  return Status::Ok();
}

Status DeviceDescriptionProcessIndex(PJRT_DeviceDescription_ProcessIndex_Args* args) {
  JMP_REQUIRE(args->device_description, "device_description is null");
  args->process_index = args->device_description->process_index;
  return Status::Ok();
}

Status DeviceDescriptionAttributes(PJRT_DeviceDescription_Attributes_Args* args) {
  JMP_REQUIRE(args->device_description, "device_description is null");
  args->num_attributes = 0;
  args->attributes = nullptr;
  return Status::Ok();
}

Status DeviceDescriptionKind(PJRT_DeviceDescription_Kind_Args* args) {
  JMP_REQUIRE(args->device_description, "device_description is null");
  const std::string& kind = args->device_description->client->state->device_kind;
  args->device_kind = kind.c_str();
  args->device_kind_size = kind.size();
  return Status::Ok();
}

Status DeviceDescriptionDebugString(PJRT_DeviceDescription_DebugString_Args* args) {
  JMP_REQUIRE(args->device_description, "device_description is null");
  args->debug_string = args->device_description->text.c_str();
  args->debug_string_size = args->device_description->text.size();
  return Status::Ok();
}

Status DeviceDescriptionToString(PJRT_DeviceDescription_ToString_Args* args) {
  JMP_REQUIRE(args->device_description, "device_description is null");
  args->to_string = args->device_description->text.c_str();
  args->to_string_size = args->device_description->text.size();
  return Status::Ok();
}

// ---- the device

Status DeviceGetDescription(PJRT_Device_GetDescription_Args* args) {
  JMP_REQUIRE(args->device, "device is null");
  args->device_description = &args->device->description;
  return Status::Ok();
}

Status DeviceIsAddressable(PJRT_Device_IsAddressable_Args* args) {
  JMP_REQUIRE(args->device, "device is null");
  args->is_addressable = args->device->state != nullptr;
  return Status::Ok();
}

Status DeviceLocalHardwareId(PJRT_Device_LocalHardwareId_Args* args) {
  JMP_REQUIRE(args->device, "device is null");
  args->local_hardware_id = args->device->state ? args->device->description.local_id : -1;
  return Status::Ok();
}

Status DeviceAddressableMemories(PJRT_Device_AddressableMemories_Args* args) {
  JMP_REQUIRE(args->device, "device is null");
  args->memories = args->device->memory_list;
  args->num_memories = args->device->state ? kNumMemorySpaces : 0;
  return Status::Ok();
}

Status DeviceDefaultMemory(PJRT_Device_DefaultMemory_Args* args) {
  JMP_REQUIRE(args->device, "device is null");
  args->memory = &args->device->memories[static_cast<size_t>(MemorySpace::kDevice)];
  return Status::Ok();
}

Status DeviceMemoryStats(PJRT_Device_MemoryStats_Args* args) {
  JMP_ASSIGN_OR_RETURN(DeviceState * local, LocalState(args->device));
  DeviceState& state = *local;
  const MemoryCounters& c = state.counters;
  const exec::PoolStats pool = state.executor->MemoryPoolStats();
  const int64_t limit = state.executor->MemoryLimit();
  args->bytes_in_use = c.bytes_in_use.load();
  args->peak_bytes_in_use = c.peak_bytes.load();
  args->peak_bytes_in_use_is_set = true;
  args->num_allocs = c.num_allocs.load();
  args->num_allocs_is_set = true;
  args->largest_alloc_size_is_set = false;
  // The pool's figures are the device's: every buffer, temporary and run arena it serves.
  args->bytes_limit = limit;
  args->bytes_limit_is_set = limit > 0;
  args->bytes_reserved = pool.bytes_reserved;
  args->bytes_reserved_is_set = true;
  args->peak_bytes_reserved = pool.peak_bytes_reserved;
  args->peak_bytes_reserved_is_set = true;
  args->bytes_reservable_limit_is_set = false;
  args->largest_free_block_bytes = pool.largest_free_block;
  args->largest_free_block_bytes_is_set = true;
  args->pool_bytes_is_set = false;
  args->peak_pool_bytes_is_set = false;
  return Status::Ok();
}

// ---- the memories

Status MemoryId(PJRT_Memory_Id_Args* args) {
  JMP_REQUIRE(args->memory, "memory is null");
  args->id = args->memory->id;
  return Status::Ok();
}

Status MemoryKind(PJRT_Memory_Kind_Args* args) {
  JMP_REQUIRE(args->memory, "memory is null");
  const std::string_view kind = KindName(args->memory->space);
  args->kind = kind.data();
  args->kind_size = kind.size();
  return Status::Ok();
}

Status MemoryKindId(PJRT_Memory_Kind_Id_Args* args) {
  JMP_REQUIRE(args->memory, "memory is null");
  args->kind_id = static_cast<int>(args->memory->space);
  return Status::Ok();
}

Status MemoryDebugString(PJRT_Memory_DebugString_Args* args) {
  JMP_REQUIRE(args->memory, "memory is null");
  const std::string& text = args->memory->text;
  args->debug_string = text.c_str();
  args->debug_string_size = text.size();
  return Status::Ok();
}

Status MemoryToString(PJRT_Memory_ToString_Args* args) {
  JMP_REQUIRE(args->memory, "memory is null");
  const std::string& text = args->memory->text;
  args->to_string = text.c_str();
  args->to_string_size = text.size();
  return Status::Ok();
}

Status MemoryAddressableByDevices(PJRT_Memory_AddressableByDevices_Args* args) {
  JMP_REQUIRE(args->memory, "memory is null");
  args->devices = args->memory->device->self;
  args->num_devices = 1;
  return Status::Ok();
}

}  // namespace jmp::pjrt

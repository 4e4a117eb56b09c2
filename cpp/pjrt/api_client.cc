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

Status ClientCreate(PJRT_Client_Create_Args* args) {
  JMP_ASSIGN_OR_RETURN(int num_devices, NumDevicesRequested());
  auto state = std::make_unique<ClientState>();
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
  for (int d = 0; d < num_devices; ++d) {
    auto device = std::make_unique<PJRT_Device>();
    device->description = PJRT_DeviceDescription{client, d, "MetalDevice(id=" + std::to_string(d) + ")"};
    device->state = client->state->devices[static_cast<size_t>(d)].get();
    device->self[0] = device.get();
    for (size_t i = 0; i < kNumMemorySpaces; ++i) {
      const int id = d * static_cast<int>(kNumMemorySpaces) + static_cast<int>(i);
      const auto space = static_cast<MemorySpace>(i);
      device->memories[i] =
          PJRT_Memory{client, device.get(), space, id,
                      "MetalMemory(id=" + std::to_string(id) + ", kind=" + std::string(KindName(space)) + ")"};
      device->memory_list[i] = &device->memories[i];
      client->memory_list.push_back(&device->memories[i]);
    }
    client->device_list.push_back(device.get());
    client->devices.push_back(std::move(device));
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
  args->process_index = 0;
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
  args->addressable_devices = args->client->device_list.data();
  args->num_addressable_devices = args->client->device_list.size();
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
  if (args->local_hardware_id < 0 || static_cast<size_t>(args->local_hardware_id) >= args->client->devices.size())
    return NotFound("no device with local id " + std::to_string(args->local_hardware_id));
  args->addressable_device = args->client->device_list[static_cast<size_t>(args->local_hardware_id)];
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
  args->process_index = 0;
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
  args->is_addressable = true;
  return Status::Ok();
}

Status DeviceLocalHardwareId(PJRT_Device_LocalHardwareId_Args* args) {
  JMP_REQUIRE(args->device, "device is null");
  args->local_hardware_id = args->device->description.id;
  return Status::Ok();
}

Status DeviceAddressableMemories(PJRT_Device_AddressableMemories_Args* args) {
  JMP_REQUIRE(args->device, "device is null");
  args->memories = args->device->memory_list;
  args->num_memories = kNumMemorySpaces;
  return Status::Ok();
}

Status DeviceDefaultMemory(PJRT_Device_DefaultMemory_Args* args) {
  JMP_REQUIRE(args->device, "device is null");
  args->memory = &args->device->memories[static_cast<size_t>(MemorySpace::kDevice)];
  return Status::Ok();
}

Status DeviceMemoryStats(PJRT_Device_MemoryStats_Args* args) {
  JMP_REQUIRE(args->device, "device is null");
  DeviceState& state = *args->device->state;
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

// Entry points of executables: compiling a program, describing it, and executing it.
#include <cstddef>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "pjrt/api.h"
#include "pjrt/compile_options.h"
#include "pjrt/execute_sharded.h"
#include "pjrt/program_serial.h"

namespace jmp::pjrt {

namespace {

void PutVarint(std::string& out, uint64_t v) {
  for (; v >= 0x80; v >>= 7) out.push_back(static_cast<char>((v & 0x7f) | 0x80));
  out.push_back(static_cast<char>(v));
}

// DeviceAssignmentProto{replica_count, computation_count, computation_devices: [{replica_device_ids}]}
// in protobuf wire format, from the devices listed replica-major.
std::string SerializeAssignment(const std::vector<PJRT_Device*>& devices, int64_t replicas, int64_t partitions) {
  std::string out;
  out.push_back(0x08);
  PutVarint(out, static_cast<uint64_t>(replicas));
  out.push_back(0x10);
  PutVarint(out, static_cast<uint64_t>(partitions));
  for (int64_t p = 0; p < partitions; ++p) {
    std::string ids;
    for (int64_t r = 0; r < replicas; ++r)
      PutVarint(ids, static_cast<uint64_t>(devices[static_cast<size_t>(r * partitions + p)]->description.id));
    std::string computation;
    computation.push_back(0x0A);
    PutVarint(computation, ids.size());
    computation += ids;
    out.push_back(0x1A);
    PutVarint(out, computation.size());
    out += computation;
  }
  return out;
}

// The devices a program compiled with `options` runs on, replica-major: its device assignment, else
// the device ordinal's device, else the first devices in order.
StatusOr<std::vector<PJRT_Device*>> AssignedDevices(PJRT_Client* client, const BuildOptions& options) {
  const size_t n = client->device_list.size();
  const size_t count = static_cast<size_t>(options.num_replicas * options.num_partitions);
  std::vector<int64_t> ids = options.device_assignment;
  if (ids.empty() && count == 1 && options.device_ordinal >= 0) ids.push_back(options.device_ordinal);
  if (ids.empty())
    for (size_t i = 0; i < count; ++i) ids.push_back(static_cast<int64_t>(i));
  std::vector<PJRT_Device*> devices;
  for (int64_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= n)
      return InvalidArgument("the program is assigned device " + std::to_string(id) + ", but the metal platform has " +
                             std::to_string(n) + " devices (JAX_METAL_NUM_DEVICES)");
    for (PJRT_Device* d : devices)
      if (d->description.id == id)
        return InvalidArgument("the program's device assignment names device " + std::to_string(id) + " twice");
    devices.push_back(client->device_list[static_cast<size_t>(id)]);
  }
  return devices;
}

// The executor a program for `devices` compiles for: its first device of this process.
StatusOr<exec::Executor*> CompilingExecutor(const std::vector<PJRT_Device*>& devices) {
  for (PJRT_Device* d : devices)
    if (d->state) return d->state->executor.get();
  return InvalidArgument("none of the program's devices belongs to this process");
}

PJRT_LoadedExecutable* Load(PJRT_Client* client, std::shared_ptr<CompiledProgram> program,
                            std::vector<PJRT_Device*> devices) {
  auto* loaded = new PJRT_LoadedExecutable;
  loaded->device_assignment = SerializeAssignment(devices, program->num_replicas, program->num_partitions);
  loaded->program = std::move(program);
  loaded->client = client;
  for (size_t position = 0; position < devices.size(); ++position) {
    loaded->placement.process_of.push_back(devices[position]->description.process_index);
    if (!devices[position]->state) continue;
    loaded->addressable.push_back(devices[position]);
    loaded->placement.local_positions.push_back(position);
  }
  loaded->placement.group = client->state->group.get();
  loaded->placement.process = client->state->process_index;
  loaded->devices = std::move(devices);
  return loaded;
}

}  // namespace

Status ClientCompile(PJRT_Client_Compile_Args* args) {
  JMP_REQUIRE(args->client && args->program, "PJRT_Client_Compile: client or program is null");
  const PJRT_Program* p = args->program;
  std::string_view format(p->format ? p->format : "", p->format ? p->format_size : 0);
  JMP_REQUIRE(p->code || !p->code_size, "PJRT_Client_Compile: program code is null");
  const auto* options = reinterpret_cast<const uint8_t*>(args->compile_options);
  JMP_RETURN_IF_ERROR(CheckCompileOptions(options, args->compile_options_size));
  JMP_ASSIGN_OR_RETURN(BuildOptions build, ReadBuildOptions(options, args->compile_options_size));
  JMP_ASSIGN_OR_RETURN(std::vector<PJRT_Device*> devices, AssignedDevices(args->client, build));
  JMP_ASSIGN_OR_RETURN(exec::Executor * executor, CompilingExecutor(devices));
  mps::Partitioning partitioning{build.num_replicas, build.num_partitions};
  for (PJRT_Device* d : devices)
    partitioning.across_processes |= d->description.process_index != args->client->state->process_index;
  JMP_ASSIGN_OR_RETURN(
      std::shared_ptr<CompiledProgram> program,
      CompileProgram(*executor, format, reinterpret_cast<const uint8_t*>(p->code), p->code_size, partitioning));
  program->platform_version = args->client->state->platform_version;
  args->executable = Load(args->client, std::move(program), std::move(devices));
  return Status::Ok();
}

// ---- describing a compiled program

Status ExecutableDestroy(PJRT_Executable_Destroy_Args* args) {
  delete args->executable;
  return Status::Ok();
}

Status ExecutableName(PJRT_Executable_Name_Args* args) {
  JMP_REQUIRE(args->executable, "executable is null");
  args->executable_name = args->executable->program->name.c_str();
  args->executable_name_size = args->executable->program->name.size();
  return Status::Ok();
}

Status ExecutableNumReplicas(PJRT_Executable_NumReplicas_Args* args) {
  JMP_REQUIRE(args->executable, "executable is null");
  args->num_replicas = args->executable->program->num_replicas;
  return Status::Ok();
}

Status ExecutableNumPartitions(PJRT_Executable_NumPartitions_Args* args) {
  JMP_REQUIRE(args->executable, "executable is null");
  args->num_partitions = args->executable->program->num_partitions;
  return Status::Ok();
}

Status ExecutableNumOutputs(PJRT_Executable_NumOutputs_Args* args) {
  JMP_REQUIRE(args->executable, "executable is null");
  args->num_outputs = args->executable->program->graph.outputs.size();
  return Status::Ok();
}

Status ExecutableSizeOfGeneratedCodeInBytes(PJRT_Executable_SizeOfGeneratedCodeInBytes_Args* args) {
  JMP_REQUIRE(args->executable, "executable is null");
  args->size_in_bytes = 0;
  return Status::Ok();
}

Status ExecutableGetCostAnalysis(PJRT_Executable_GetCostAnalysis_Args* args) {
  JMP_REQUIRE(args->executable, "executable is null");
  args->num_properties = 0;
  args->properties = nullptr;
  return Status::Ok();
}

Status ExecutableOutputMemoryKinds(PJRT_Executable_OutputMemoryKinds_Args* args) {
  JMP_REQUIRE(args->executable, "executable is null");
  const CompiledProgram& p = *args->executable->program;
  args->num_outputs = p.output_memory_kinds.size();
  args->memory_kinds = p.output_memory_kinds.data();
  args->memory_kind_sizes = p.output_memory_kind_sizes.data();
  return Status::Ok();
}

Status ExecutableOutputElementTypes(PJRT_Executable_OutputElementTypes_Args* args) {
  JMP_REQUIRE(args->executable, "executable is null");
  CompiledProgram& p = *args->executable->program;
  args->output_types = p.output_types.data();
  args->num_output_types = p.output_types.size();
  return Status::Ok();
}

Status ExecutableOutputDimensions(PJRT_Executable_OutputDimensions_Args* args) {
  JMP_REQUIRE(args->executable, "executable is null");
  const CompiledProgram& p = *args->executable->program;
  args->num_outputs = p.output_ranks.size();
  args->dims = p.output_dims_flat.data();
  args->dim_sizes = p.output_ranks.data();
  return Status::Ok();
}

Status ExecutableGetCompiledMemoryStats(PJRT_Executable_GetCompiledMemoryStats_Args* args) {
  JMP_REQUIRE(args->executable, "executable is null");
  ProgramSizes sizes = SizesOf(*args->executable->program);
  args->generated_code_size_in_bytes = 0;
  args->argument_size_in_bytes = sizes.arguments;
  args->output_size_in_bytes = sizes.outputs;
  args->alias_size_in_bytes = sizes.aliased;
  args->temp_size_in_bytes = 0;
  args->host_generated_code_size_in_bytes = 0;
  args->host_argument_size_in_bytes = 0;
  args->host_output_size_in_bytes = 0;
  args->host_alias_size_in_bytes = 0;
  args->host_temp_size_in_bytes = 0;
  args->peak_memory_in_bytes = sizes.arguments + sizes.outputs - sizes.aliased;
  args->total_size_in_bytes = sizes.arguments + sizes.outputs - sizes.aliased;
  return Status::Ok();
}

// Only a program for several devices has one: XLA reads its shardings from it. For one device there is
// nothing XLA needs, and an opaque module would only stand in for an HLO dump it cannot be.
Status ExecutableOptimizedProgram(PJRT_Executable_OptimizedProgram_Args* args) {
  JMP_REQUIRE(args->executable, "executable is null");
  JMP_REQUIRE(args->program, "program is null");
  const std::string& text = args->executable->program->optimized_program;
  if (text.empty()) return Unimplemented("the metal platform has no optimized program for a one-device executable");
  static constexpr char kFormat[] = "mlir";
  args->program->format = kFormat;
  args->program->format_size = sizeof(kFormat) - 1;
  if (args->program->code == nullptr) {
    args->program->code_size = text.size();
    return Status::Ok();
  }
  JMP_REQUIRE(args->program->code_size >= text.size(), "the program buffer is smaller than code_size asked for");
  std::memcpy(args->program->code, text.data(), text.size());
  args->program->code_size = text.size();
  return Status::Ok();
}

Status ExecutableFingerprint(PJRT_Executable_Fingerprint_Args* args) {
  JMP_REQUIRE(args->executable, "executable is null");
  args->executable_fingerprint = args->executable->program->fingerprint.c_str();
  args->executable_fingerprint_size = args->executable->program->fingerprint.size();
  return Status::Ok();
}

Status ExecutableSerialize(PJRT_Executable_Serialize_Args* args) {
  JMP_REQUIRE(args->executable, "executable is null");
  const std::shared_ptr<CompiledProgram>& program = args->executable->program;
  JMP_ASSIGN_OR_RETURN(std::string bytes, SerializeProgram(*program, program->platform_version));
  auto* serialized = new PJRT_SerializedExecutable{std::move(bytes)};
  args->serialized_bytes = serialized->bytes.data();
  args->serialized_bytes_size = serialized->bytes.size();
  args->serialized_executable = serialized;
  args->serialized_executable_deleter = [](PJRT_SerializedExecutable* s) { delete s; };
  return Status::Ok();
}

// The program is rebuilt from its serialized op graph: no StableHLO is read or lowered. Overridden
// compile options may assign other devices, never another number of them.
Status ExecutableDeserializeAndLoad(PJRT_Executable_DeserializeAndLoad_Args* args) {
  JMP_REQUIRE(args->client, "PJRT_Executable_DeserializeAndLoad: client is null");
  JMP_REQUIRE(args->serialized_executable || !args->serialized_executable_size,
              "PJRT_Executable_DeserializeAndLoad: serialized_executable is null");
  constexpr size_t kOverridesEnd =
      offsetof(PJRT_Executable_DeserializeAndLoad_Args, overridden_serialized_compile_options_size) + sizeof(size_t);
  BuildOptions build;
  if (args->struct_size >= kOverridesEnd) {
    const auto* options = reinterpret_cast<const uint8_t*>(args->overridden_serialized_compile_options);
    JMP_RETURN_IF_ERROR(CheckCompileOptions(options, args->overridden_serialized_compile_options_size));
    if (options) {
      JMP_ASSIGN_OR_RETURN(build, ReadBuildOptions(options, args->overridden_serialized_compile_options_size));
    }
  }
  JMP_ASSIGN_OR_RETURN(
      std::shared_ptr<CompiledProgram> program,
      DeserializeProgram(*args->client->addressable_list[0]->state->executor, args->client->state->platform_version,
                         reinterpret_cast<const uint8_t*>(args->serialized_executable),
                         args->serialized_executable_size));
  if (build.num_replicas * build.num_partitions != program->num_replicas * program->num_partitions) {
    build = BuildOptions{};
    build.num_replicas = program->num_replicas;
    build.num_partitions = program->num_partitions;
  }
  JMP_ASSIGN_OR_RETURN(std::vector<PJRT_Device*> devices, AssignedDevices(args->client, build));
  program->platform_version = args->client->state->platform_version;
  args->loaded_executable = Load(args->client, std::move(program), std::move(devices));
  return Status::Ok();
}

// ---- loaded executables

Status LoadedExecutableDestroy(PJRT_LoadedExecutable_Destroy_Args* args) {
  delete args->executable;
  return Status::Ok();
}

Status LoadedExecutableGetExecutable(PJRT_LoadedExecutable_GetExecutable_Args* args) {
  JMP_REQUIRE(args->loaded_executable, "loaded_executable is null");
  args->executable = new PJRT_Executable{args->loaded_executable->program};
  return Status::Ok();
}

Status LoadedExecutableAddressableDevices(PJRT_LoadedExecutable_AddressableDevices_Args* args) {
  JMP_REQUIRE(args->executable, "executable is null");
  args->addressable_devices = args->executable->addressable.data();
  args->num_addressable_devices = args->executable->addressable.size();
  return Status::Ok();
}

Status LoadedExecutableDelete(PJRT_LoadedExecutable_Delete_Args* args) {
  JMP_REQUIRE(args->executable, "executable is null");
  args->executable->deleted = true;
  return Status::Ok();
}

Status LoadedExecutableIsDeleted(PJRT_LoadedExecutable_IsDeleted_Args* args) {
  JMP_REQUIRE(args->executable, "executable is null");
  args->is_deleted = args->executable->deleted;
  return Status::Ok();
}

Status LoadedExecutableGetDeviceAssignment(PJRT_LoadedExecutable_GetDeviceAssignment_Args* args) {
  JMP_REQUIRE(args->executable, "executable is null");
  args->serialized_bytes = args->executable->device_assignment.data();
  args->serialized_bytes_size = args->executable->device_assignment.size();
  args->serialized_device_assignment = nullptr;
  args->serialized_device_assignment_deleter = [](PJRT_DeviceAssignmentSerialized*) {};
  return Status::Ok();
}

Status LoadedExecutableFingerprint(PJRT_LoadedExecutable_Fingerprint_Args* args) {
  JMP_REQUIRE(args->executable, "executable is null");
  args->executable_fingerprint = args->executable->program->fingerprint.c_str();
  args->executable_fingerprint_size = args->executable->program->fingerprint.size();
  return Status::Ok();
}

// argument_lists[d] and output_lists[d] are device d's lists, d in the executable's device order. Either
// may be null when it would be empty (no arguments; a computation without results, as jit(lambda x: ())
// has).
Status LoadedExecutableExecute(PJRT_LoadedExecutable_Execute_Args* args) {
  PJRT_LoadedExecutable* loaded = args->executable;
  JMP_REQUIRE(loaded, "PJRT_LoadedExecutable_Execute: executable is null");
  if (loaded->deleted) return FailedPrecondition("the executable has been deleted");
  const size_t num_devices = loaded->addressable.size();
  JMP_REQUIRE(num_devices > 0, "none of the executable's devices belongs to this process");
  JMP_REQUIRE(args->num_devices == num_devices, "the executable runs on " + std::to_string(num_devices) +
                                                    " devices, but Execute was given " +
                                                    std::to_string(args->num_devices) + " argument lists");
  const std::shared_ptr<CompiledProgram>& program = loaded->program;
  const size_t n = args->num_args, m = program->graph.outputs.size();
  JMP_RETURN_IF_ERROR(CheckArgumentCount(*program, n));
  for (size_t d = 0; d < num_devices; ++d) {
    JMP_REQUIRE(n == 0 || (args->argument_lists && args->argument_lists[d]), "argument_lists is null");
    JMP_REQUIRE(
        m == 0 || (args->output_lists && args->output_lists[d]),
        "PJRT_LoadedExecutable_Execute: output_lists is null but the executable has " + std::to_string(m) + " outputs");
  }
  constexpr size_t kExecuteDeviceEnd = offsetof(PJRT_LoadedExecutable_Execute_Args, execute_device) + sizeof(void*);
  const bool sharded = loaded->devices.size() > 1;
  JMP_REQUIRE(!sharded || args->struct_size < kExecuteDeviceEnd || !args->execute_device,
              "the metal platform runs a program for several devices on all of them at once, not on one");

  const PJRT_ExecuteOptions* options = args->options;
  const int64_t* non_donatable = nullptr;
  size_t num_non_donatable = 0;
  constexpr size_t kNonDonatableEnd = offsetof(PJRT_ExecuteOptions, num_non_donatable_input_indices) + sizeof(size_t);
  if (options && options->struct_size >= kNonDonatableEnd && options->num_non_donatable_input_indices) {
    JMP_REQUIRE(options->non_donatable_input_indices, "non_donatable_input_indices is null");
    non_donatable = options->non_donatable_input_indices;
    num_non_donatable = options->num_non_donatable_input_indices;
  }

  std::vector<std::vector<BufferState*>> arguments(num_devices, std::vector<BufferState*>(n));
  for (size_t d = 0; d < num_devices; ++d)
    for (size_t i = 0; i < n; ++i) {
      PJRT_Buffer* b = args->argument_lists[d][i];
      arguments[d][i] = b ? b->state.get() : nullptr;
    }
  if (!sharded) {
    PJRT_Device* device = loaded->addressable.at(0);
    if (args->struct_size >= kExecuteDeviceEnd && args->execute_device) {
      JMP_REQUIRE(args->execute_device->description.client == loaded->client,
                  "execute_device belongs to another client");
      device = args->execute_device;
    }
    std::vector<std::shared_ptr<BufferState>> outputs;
    std::shared_ptr<EventState> done;
    JMP_RETURN_IF_ERROR(Execute(device->state->execution_context(), program, arguments[0], non_donatable,
                                num_non_donatable, outputs, done));
    for (size_t j = 0; j < m; ++j) args->output_lists[0][j] = NewHandle(std::move(outputs[j]), device);
    if (args->device_complete_events) args->device_complete_events[0] = new PJRT_Event{std::move(done)};
    return Status::Ok();
  }
  std::vector<ExecutionContext> contexts;
  for (PJRT_Device* device : loaded->addressable) contexts.push_back(device->state->execution_context());
  std::vector<std::vector<std::shared_ptr<BufferState>>> outputs;
  std::vector<std::shared_ptr<EventState>> done;
  JMP_RETURN_IF_ERROR(
      ExecuteSharded(contexts, loaded->placement, program, arguments, non_donatable, num_non_donatable, outputs, done));
  for (size_t d = 0; d < num_devices; ++d) {
    for (size_t j = 0; j < m; ++j)
      args->output_lists[d][j] = NewHandle(std::move(outputs[d][j]), loaded->addressable[d]);
    if (args->device_complete_events) args->device_complete_events[d] = new PJRT_Event{std::move(done[d])};
  }
  return Status::Ok();
}

}  // namespace jmp::pjrt

// Entry points of executables: compiling a program, describing it, and executing it.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "pjrt/api.h"
#include "pjrt/compile_options.h"
#include "pjrt/program_serial.h"

namespace jmp::pjrt {

namespace {

PJRT_LoadedExecutable* Load(PJRT_Client* client, std::shared_ptr<CompiledProgram> program) {
  auto* loaded = new PJRT_LoadedExecutable;
  loaded->program = std::move(program);
  loaded->client = client;
  return loaded;
}

}  // namespace

Status ClientCompile(PJRT_Client_Compile_Args* args) {
  JMP_REQUIRE(args->client && args->program, "PJRT_Client_Compile: client or program is null");
  const PJRT_Program* p = args->program;
  std::string_view format(p->format ? p->format : "", p->format ? p->format_size : 0);
  JMP_REQUIRE(p->code || !p->code_size, "PJRT_Client_Compile: program code is null");
  JMP_RETURN_IF_ERROR(
      CheckCompileOptions(reinterpret_cast<const uint8_t*>(args->compile_options), args->compile_options_size));
  JMP_ASSIGN_OR_RETURN(
      std::shared_ptr<CompiledProgram> program,
      CompileProgram(*args->client->state->executor, format, reinterpret_cast<const uint8_t*>(p->code), p->code_size));
  program->platform_version = args->client->state->platform_version;
  args->executable = Load(args->client, std::move(program));
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
  args->num_replicas = 1;
  return Status::Ok();
}

Status ExecutableNumPartitions(PJRT_Executable_NumPartitions_Args* args) {
  JMP_REQUIRE(args->executable, "executable is null");
  args->num_partitions = 1;
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

// The compile options (one device, one replica) are the same for every program this plugin runs, so
// overridden ones change nothing. The program is rebuilt from its serialized op graph: no StableHLO is
// read or lowered.
Status ExecutableDeserializeAndLoad(PJRT_Executable_DeserializeAndLoad_Args* args) {
  JMP_REQUIRE(args->client, "PJRT_Executable_DeserializeAndLoad: client is null");
  JMP_REQUIRE(args->serialized_executable || !args->serialized_executable_size,
              "PJRT_Executable_DeserializeAndLoad: serialized_executable is null");
  constexpr size_t kOverridesEnd =
      offsetof(PJRT_Executable_DeserializeAndLoad_Args, overridden_serialized_compile_options_size) + sizeof(size_t);
  if (args->struct_size >= kOverridesEnd)
    JMP_RETURN_IF_ERROR(
        CheckCompileOptions(reinterpret_cast<const uint8_t*>(args->overridden_serialized_compile_options),
                            args->overridden_serialized_compile_options_size));
  JMP_ASSIGN_OR_RETURN(std::shared_ptr<CompiledProgram> program,
                       DeserializeProgram(*args->client->state->executor, args->client->state->platform_version,
                                          reinterpret_cast<const uint8_t*>(args->serialized_executable),
                                          args->serialized_executable_size));
  program->platform_version = args->client->state->platform_version;
  args->loaded_executable = Load(args->client, std::move(program));
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
  args->addressable_devices = args->executable->client->device_list;
  args->num_addressable_devices = 1;
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

// DeviceAssignmentProto{replica_count: 1, computation_count: 1, computation_devices: [{replica_device_ids: [0]}]}
// in protobuf wire format: one replica, one partition, device 0.
Status LoadedExecutableGetDeviceAssignment(PJRT_LoadedExecutable_GetDeviceAssignment_Args* args) {
  JMP_REQUIRE(args->executable, "executable is null");
  static const char kAssignment[] = {0x08, 0x01, 0x10, 0x01, 0x1A, 0x03, 0x0A, 0x01, 0x00};
  args->serialized_bytes = kAssignment;
  args->serialized_bytes_size = sizeof(kAssignment);
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

// One device: argument_lists[0] and output_lists[0] are the lists. Either may be null when it would be
// empty (no arguments; a computation without results, as jit(lambda x: ()) has).
Status LoadedExecutableExecute(PJRT_LoadedExecutable_Execute_Args* args) {
  PJRT_LoadedExecutable* loaded = args->executable;
  JMP_REQUIRE(loaded, "PJRT_LoadedExecutable_Execute: executable is null");
  if (loaded->deleted) return FailedPrecondition("the executable has been deleted");
  JMP_REQUIRE(args->num_devices == 1, "the metal platform executes on exactly one device");
  JMP_REQUIRE(args->num_args == 0 || (args->argument_lists && args->argument_lists[0]), "argument_lists is null");
  const std::shared_ptr<CompiledProgram>& program = loaded->program;
  const size_t n = args->num_args, m = program->graph.outputs.size();
  JMP_RETURN_IF_ERROR(CheckArgumentCount(*program, n));
  JMP_REQUIRE(
      m == 0 || (args->output_lists && args->output_lists[0]),
      "PJRT_LoadedExecutable_Execute: output_lists is null but the executable has " + std::to_string(m) + " outputs");

  const PJRT_ExecuteOptions* options = args->options;
  const int64_t* non_donatable = nullptr;
  size_t num_non_donatable = 0;
  constexpr size_t kNonDonatableEnd = offsetof(PJRT_ExecuteOptions, num_non_donatable_input_indices) + sizeof(size_t);
  if (options && options->struct_size >= kNonDonatableEnd && options->num_non_donatable_input_indices) {
    JMP_REQUIRE(options->non_donatable_input_indices, "non_donatable_input_indices is null");
    non_donatable = options->non_donatable_input_indices;
    num_non_donatable = options->num_non_donatable_input_indices;
  }

  std::vector<BufferState*> arguments(n);
  for (size_t i = 0; i < n; ++i) {
    PJRT_Buffer* b = args->argument_lists[0][i];
    arguments[i] = b ? b->state.get() : nullptr;
  }
  PJRT_Client* client = loaded->client;
  std::vector<std::shared_ptr<BufferState>> outputs;
  std::shared_ptr<EventState> done;
  JMP_RETURN_IF_ERROR(
      Execute(client->state->execution_context(), program, arguments, non_donatable, num_non_donatable, outputs, done));
  for (size_t j = 0; j < m; ++j) args->output_lists[0][j] = NewHandle(std::move(outputs[j]), client);
  if (args->device_complete_events) args->device_complete_events[0] = new PJRT_Event{std::move(done)};
  return Status::Ok();
}

}  // namespace jmp::pjrt

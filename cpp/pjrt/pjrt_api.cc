// The PJRT C API: the entry points of errors, the plugin and events, and the function table. Every
// entry point is an ordinary function returning Status (api.h); Offer() below turns it into the C
// function the table holds, checking args and struct_size and keeping exceptions inside, in one place.
#include <cstring>
#include <exception>
#include <mutex>
#include <string>

#include "pjrt/api.h"
#include "pjrt/conversions.h"
#include "pjrt/profiler_extension.h"
#include "stablehlo/ir.h"
#include "support/fp_env.h"

namespace jmp::pjrt {

namespace {

PJRT_Error* ToError(Status s) {
  if (s.ok()) return nullptr;
  return new PJRT_Error{std::move(s)};
}

template <typename Args>
PJRT_Error* Call(const char* name, size_t min_size, Args* args, Status (*entry)(Args*)) {
  if (!args) return ToError(InvalidArgument(std::string(name) + ": args is null"));
  if (args->struct_size < min_size)
    return ToError(InvalidArgument(std::string(name) + ": struct_size " + std::to_string(args->struct_size) +
                                   " is smaller than " + std::to_string(min_size)));
  DefaultFloatingPointScope fp;  // whatever the calling thread's environment
  try {
    return ToError(entry(args));
  } catch (const std::exception& e) {
    return ToError(Internal(std::string(name) + ": " + e.what()));
  } catch (...) {
    return ToError(Internal(std::string(name) + ": unknown failure"));
  }
}

// Entry points this plugin does not offer: a clear error, never a crash.
template <typename Args>
PJRT_Error* NotOffered(const char* name, Args* args) {
  return ToError(Unimplemented(std::string(name) + " is not supported by the metal plugin"));
}

// ---- errors (their destroy and message entries return nothing, so they check by hand)

void ErrorDestroy(PJRT_Error_Destroy_Args* args) {
  if (args && args->error) delete args->error;
}

void ErrorMessage(PJRT_Error_Message_Args* args) {
  if (!args || !args->error) return;
  args->message = args->error->status.message().c_str();
  args->message_size = args->error->status.message().size();
}

Status ErrorGetCode(PJRT_Error_GetCode_Args* args) {
  JMP_REQUIRE(args->error, "PJRT_Error_GetCode: error is null");
  args->code = ToErrorCode(args->error->status.code());
  return Status::Ok();
}

// ---- the plugin

Status PluginInitialize(PJRT_Plugin_Initialize_Args* args) { return Status::Ok(); }

// The StableHLO versions this plugin reads: JAX targets the artifact at stablehlo_current_version.
Status PluginAttributes(PJRT_Plugin_Attributes_Args* args) {
  static const int64_t current[3] = {shlo::kNewestVersion[0], shlo::kNewestVersion[1], shlo::kNewestVersion[2]};
  static const int64_t minimum[3] = {shlo::kOldestVersion[0], shlo::kOldestVersion[1], shlo::kOldestVersion[2]};
  static const PJRT_NamedValue attributes[3] = {
      Int64Value("xla_version", 2),
      Int64ListValue("stablehlo_current_version", current, 3),
      Int64ListValue("stablehlo_minimum_version", minimum, 3),
  };
  args->attributes = attributes;
  args->num_attributes = 3;
  return Status::Ok();
}

// ---- events

Status EventDestroy(PJRT_Event_Destroy_Args* args) {
  delete args->event;
  return Status::Ok();
}

Status EventIsReady(PJRT_Event_IsReady_Args* args) {
  JMP_REQUIRE(args->event, "PJRT_Event_IsReady: event is null");
  args->is_ready = args->event->state->ready();
  return Status::Ok();
}

Status EventError(PJRT_Event_Error_Args* args) {
  JMP_REQUIRE(args->event, "PJRT_Event_Error: event is null");
  JMP_REQUIRE(args->event->state->ready(), "PJRT_Event_Error: the event is not ready");
  return args->event->state->Await();
}

Status EventAwait(PJRT_Event_Await_Args* args) {
  JMP_REQUIRE(args->event, "PJRT_Event_Await: event is null");
  return args->event->state->Await();
}

Status EventOnReady(PJRT_Event_OnReady_Args* args) {
  JMP_REQUIRE(args->event && args->callback, "PJRT_Event_OnReady: event or callback is null");
  PJRT_Event_OnReadyCallback callback = args->callback;
  void* user = args->user_arg;
  args->event->state->OnReady([callback, user](Status s) { callback(ToError(std::move(s)), user); });
  return Status::Ok();
}

}  // namespace

const PJRT_Api* GetApi() {
  static PJRT_Api api = [] {
    PJRT_Api a;
    std::memset(&a, 0, sizeof(a));
    a.struct_size = PJRT_Api_STRUCT_SIZE;
    a.pjrt_api_version.struct_size = PJRT_Api_Version_STRUCT_SIZE;
    a.pjrt_api_version.major_version = PJRT_API_MAJOR;
    a.pjrt_api_version.minor_version = PJRT_API_MINOR;
    a.extension_start = ProfilerExtension();
#define JMP_OFFER(Name, Entry) \
  a.Name = [](Name##_Args* args) { return Call(#Name, Name##_Args_STRUCT_SIZE, args, &Entry); };
#define JMP_DECLINE(Name) a.Name = [](Name##_Args* args) { return NotOffered(#Name, args); };
    a.PJRT_Error_Destroy = ErrorDestroy;
    a.PJRT_Error_Message = ErrorMessage;
    JMP_OFFER(PJRT_Error_GetCode, ErrorGetCode)
    JMP_OFFER(PJRT_Plugin_Initialize, PluginInitialize)
    JMP_OFFER(PJRT_Plugin_Attributes, PluginAttributes)
    JMP_OFFER(PJRT_Event_Destroy, EventDestroy)
    JMP_OFFER(PJRT_Event_IsReady, EventIsReady)
    JMP_OFFER(PJRT_Event_Error, EventError)
    JMP_OFFER(PJRT_Event_Await, EventAwait)
    JMP_OFFER(PJRT_Event_OnReady, EventOnReady)
    JMP_OFFER(PJRT_Client_Create, ClientCreate)
    JMP_OFFER(PJRT_Client_Destroy, ClientDestroy)
    JMP_OFFER(PJRT_Client_PlatformName, ClientPlatformName)
    JMP_OFFER(PJRT_Client_ProcessIndex, ClientProcessIndex)
    JMP_OFFER(PJRT_Client_PlatformVersion, ClientPlatformVersion)
    JMP_OFFER(PJRT_Client_Devices, ClientDevices)
    JMP_OFFER(PJRT_Client_AddressableDevices, ClientAddressableDevices)
    JMP_OFFER(PJRT_Client_LookupDevice, ClientLookupDevice)
    JMP_OFFER(PJRT_Client_LookupAddressableDevice, ClientLookupAddressableDevice)
    JMP_OFFER(PJRT_Client_AddressableMemories, ClientAddressableMemories)
    JMP_OFFER(PJRT_Client_Compile, ClientCompile)
    JMP_OFFER(PJRT_Client_DefaultDeviceAssignment, ClientDefaultDeviceAssignment)
    JMP_OFFER(PJRT_Client_BufferFromHostBuffer, ClientBufferFromHostBuffer)
    JMP_OFFER(PJRT_DeviceDescription_Id, DeviceDescriptionId)
    JMP_OFFER(PJRT_DeviceDescription_ProcessIndex, DeviceDescriptionProcessIndex)
    JMP_OFFER(PJRT_DeviceDescription_Attributes, DeviceDescriptionAttributes)
    JMP_OFFER(PJRT_DeviceDescription_Kind, DeviceDescriptionKind)
    JMP_OFFER(PJRT_DeviceDescription_DebugString, DeviceDescriptionDebugString)
    JMP_OFFER(PJRT_DeviceDescription_ToString, DeviceDescriptionToString)
    JMP_OFFER(PJRT_Device_GetDescription, DeviceGetDescription)
    JMP_OFFER(PJRT_Device_IsAddressable, DeviceIsAddressable)
    JMP_OFFER(PJRT_Device_LocalHardwareId, DeviceLocalHardwareId)
    JMP_OFFER(PJRT_Device_AddressableMemories, DeviceAddressableMemories)
    JMP_OFFER(PJRT_Device_DefaultMemory, DeviceDefaultMemory)
    JMP_OFFER(PJRT_Device_MemoryStats, DeviceMemoryStats)
    JMP_OFFER(PJRT_Memory_Id, MemoryId)
    JMP_OFFER(PJRT_Memory_Kind, MemoryKind)
    JMP_OFFER(PJRT_Memory_DebugString, MemoryDebugString)
    JMP_OFFER(PJRT_Memory_ToString, MemoryToString)
    JMP_OFFER(PJRT_Memory_AddressableByDevices, MemoryAddressableByDevices)
    JMP_OFFER(PJRT_Executable_Destroy, ExecutableDestroy)
    JMP_OFFER(PJRT_Executable_Name, ExecutableName)
    JMP_OFFER(PJRT_Executable_NumReplicas, ExecutableNumReplicas)
    JMP_OFFER(PJRT_Executable_NumPartitions, ExecutableNumPartitions)
    JMP_OFFER(PJRT_Executable_NumOutputs, ExecutableNumOutputs)
    JMP_OFFER(PJRT_Executable_SizeOfGeneratedCodeInBytes, ExecutableSizeOfGeneratedCodeInBytes)
    JMP_OFFER(PJRT_Executable_GetCostAnalysis, ExecutableGetCostAnalysis)
    JMP_OFFER(PJRT_Executable_OutputMemoryKinds, ExecutableOutputMemoryKinds)
    JMP_OFFER(PJRT_Executable_OptimizedProgram, ExecutableOptimizedProgram)
    JMP_OFFER(PJRT_Executable_Serialize, ExecutableSerialize)
    JMP_OFFER(PJRT_LoadedExecutable_Destroy, LoadedExecutableDestroy)
    JMP_OFFER(PJRT_LoadedExecutable_GetExecutable, LoadedExecutableGetExecutable)
    JMP_OFFER(PJRT_LoadedExecutable_AddressableDevices, LoadedExecutableAddressableDevices)
    JMP_OFFER(PJRT_LoadedExecutable_Delete, LoadedExecutableDelete)
    JMP_OFFER(PJRT_LoadedExecutable_IsDeleted, LoadedExecutableIsDeleted)
    JMP_OFFER(PJRT_LoadedExecutable_Execute, LoadedExecutableExecute)
    JMP_OFFER(PJRT_Executable_DeserializeAndLoad, ExecutableDeserializeAndLoad)
    JMP_OFFER(PJRT_LoadedExecutable_Fingerprint, LoadedExecutableFingerprint)
    JMP_OFFER(PJRT_Buffer_Destroy, BufferDestroy)
    JMP_OFFER(PJRT_Buffer_ElementType, BufferElementType)
    JMP_OFFER(PJRT_Buffer_Dimensions, BufferDimensions)
    JMP_OFFER(PJRT_Buffer_UnpaddedDimensions, BufferUnpaddedDimensions)
    JMP_OFFER(PJRT_Buffer_DynamicDimensionIndices, BufferDynamicDimensionIndices)
    JMP_OFFER(PJRT_Buffer_GetMemoryLayout, BufferGetMemoryLayout)
    JMP_OFFER(PJRT_Buffer_OnDeviceSizeInBytes, BufferOnDeviceSizeInBytes)
    JMP_OFFER(PJRT_Buffer_Device, BufferDevice)
    JMP_OFFER(PJRT_Buffer_Memory, BufferMemory)
    JMP_OFFER(PJRT_Buffer_Delete, BufferDelete)
    JMP_OFFER(PJRT_Buffer_IsDeleted, BufferIsDeleted)
    JMP_OFFER(PJRT_Buffer_CopyToDevice, BufferCopyToDevice)
    JMP_OFFER(PJRT_Buffer_ToHostBuffer, BufferToHostBuffer)
    JMP_OFFER(PJRT_Buffer_IsOnCpu, BufferIsOnCpu)
    JMP_OFFER(PJRT_Buffer_ReadyEvent, BufferReadyEvent)
    JMP_OFFER(PJRT_Buffer_UnsafePointer, BufferUnsafePointer)
    JMP_OFFER(PJRT_Buffer_IncreaseExternalReferenceCount, BufferIncreaseExternalReferenceCount)
    JMP_OFFER(PJRT_Buffer_DecreaseExternalReferenceCount, BufferDecreaseExternalReferenceCount)
    JMP_OFFER(PJRT_Buffer_OpaqueDeviceMemoryDataPointer, BufferOpaqueDeviceMemoryDataPointer)
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
    JMP_OFFER(PJRT_Executable_OutputElementTypes, ExecutableOutputElementTypes)
    JMP_OFFER(PJRT_Executable_OutputDimensions, ExecutableOutputDimensions)
    JMP_OFFER(PJRT_Buffer_CopyToMemory, BufferCopyToMemory)
    JMP_DECLINE(PJRT_Client_CreateViewOfDeviceBuffer)
    JMP_OFFER(PJRT_Executable_Fingerprint, ExecutableFingerprint)
    JMP_OFFER(PJRT_Client_TopologyDescription, ClientTopologyDescription)
    JMP_OFFER(PJRT_Executable_GetCompiledMemoryStats, ExecutableGetCompiledMemoryStats)
    JMP_OFFER(PJRT_Memory_Kind_Id, MemoryKindId)
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
    JMP_OFFER(PJRT_Client_UpdateGlobalProcessInfo, ClientUpdateGlobalProcessInfo)
    JMP_DECLINE(PJRT_TopologyDescription_Deserialize)
    JMP_DECLINE(PJRT_Client_CreateAliasBuffer)
    JMP_DECLINE(PJRT_Client_FulfillAliasBuffer)
    JMP_OFFER(PJRT_LoadedExecutable_GetDeviceAssignment, LoadedExecutableGetDeviceAssignment)
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

// The PJRT C API entry points, as ordinary functions returning Status: each validates its arguments,
// converts them and calls typed C++ (compile.h, execute.h, buffers.h, events.h). pjrt_api.cc turns them
// into the PJRT_Api table, where the args pointer and struct_size are checked, Status becomes
// PJRT_Error and exceptions stay inside, once for every entry point.
#pragma once

#include "pjrt/pjrt_state.h"
#include "support/status.h"

// A failed check of the caller's arguments. The message is built only on failure.
#define JMP_REQUIRE(cond, message)                       \
  do {                                                   \
    if (!(cond)) return ::jmp::InvalidArgument(message); \
  } while (0)

namespace jmp::pjrt {

// ---- client, device descriptions, devices, memories (api_client.cc)
Status ClientCreate(PJRT_Client_Create_Args* args);
Status ClientDestroy(PJRT_Client_Destroy_Args* args);
Status ClientPlatformName(PJRT_Client_PlatformName_Args* args);
Status ClientProcessIndex(PJRT_Client_ProcessIndex_Args* args);
Status ClientUpdateGlobalProcessInfo(PJRT_Client_UpdateGlobalProcessInfo_Args* args);
Status ClientPlatformVersion(PJRT_Client_PlatformVersion_Args* args);
Status ClientDevices(PJRT_Client_Devices_Args* args);
Status ClientAddressableDevices(PJRT_Client_AddressableDevices_Args* args);
Status ClientLookupDevice(PJRT_Client_LookupDevice_Args* args);
Status ClientLookupAddressableDevice(PJRT_Client_LookupAddressableDevice_Args* args);
Status ClientAddressableMemories(PJRT_Client_AddressableMemories_Args* args);
Status ClientDefaultDeviceAssignment(PJRT_Client_DefaultDeviceAssignment_Args* args);
Status ClientTopologyDescription(PJRT_Client_TopologyDescription_Args* args);
Status DeviceDescriptionId(PJRT_DeviceDescription_Id_Args* args);
Status DeviceDescriptionProcessIndex(PJRT_DeviceDescription_ProcessIndex_Args* args);
Status DeviceDescriptionAttributes(PJRT_DeviceDescription_Attributes_Args* args);
Status DeviceDescriptionKind(PJRT_DeviceDescription_Kind_Args* args);
Status DeviceDescriptionDebugString(PJRT_DeviceDescription_DebugString_Args* args);
Status DeviceDescriptionToString(PJRT_DeviceDescription_ToString_Args* args);
Status DeviceGetDescription(PJRT_Device_GetDescription_Args* args);
Status DeviceIsAddressable(PJRT_Device_IsAddressable_Args* args);
Status DeviceLocalHardwareId(PJRT_Device_LocalHardwareId_Args* args);
Status DeviceAddressableMemories(PJRT_Device_AddressableMemories_Args* args);
Status DeviceDefaultMemory(PJRT_Device_DefaultMemory_Args* args);
Status DeviceMemoryStats(PJRT_Device_MemoryStats_Args* args);
Status MemoryId(PJRT_Memory_Id_Args* args);
Status MemoryKind(PJRT_Memory_Kind_Args* args);
Status MemoryKindId(PJRT_Memory_Kind_Id_Args* args);
Status MemoryDebugString(PJRT_Memory_DebugString_Args* args);
Status MemoryToString(PJRT_Memory_ToString_Args* args);
Status MemoryAddressableByDevices(PJRT_Memory_AddressableByDevices_Args* args);

// ---- executables: compile, describe, execute (api_executables.cc)
Status ClientCompile(PJRT_Client_Compile_Args* args);
Status ExecutableDestroy(PJRT_Executable_Destroy_Args* args);
Status ExecutableName(PJRT_Executable_Name_Args* args);
Status ExecutableNumReplicas(PJRT_Executable_NumReplicas_Args* args);
Status ExecutableNumPartitions(PJRT_Executable_NumPartitions_Args* args);
Status ExecutableNumOutputs(PJRT_Executable_NumOutputs_Args* args);
Status ExecutableSizeOfGeneratedCodeInBytes(PJRT_Executable_SizeOfGeneratedCodeInBytes_Args* args);
Status ExecutableGetCostAnalysis(PJRT_Executable_GetCostAnalysis_Args* args);
Status ExecutableOutputMemoryKinds(PJRT_Executable_OutputMemoryKinds_Args* args);
Status ExecutableOutputElementTypes(PJRT_Executable_OutputElementTypes_Args* args);
Status ExecutableOutputDimensions(PJRT_Executable_OutputDimensions_Args* args);
Status ExecutableOptimizedProgram(PJRT_Executable_OptimizedProgram_Args* args);
Status ExecutableGetCompiledMemoryStats(PJRT_Executable_GetCompiledMemoryStats_Args* args);
Status ExecutableFingerprint(PJRT_Executable_Fingerprint_Args* args);
Status ExecutableSerialize(PJRT_Executable_Serialize_Args* args);
Status ExecutableDeserializeAndLoad(PJRT_Executable_DeserializeAndLoad_Args* args);
Status LoadedExecutableDestroy(PJRT_LoadedExecutable_Destroy_Args* args);
Status LoadedExecutableGetExecutable(PJRT_LoadedExecutable_GetExecutable_Args* args);
Status LoadedExecutableAddressableDevices(PJRT_LoadedExecutable_AddressableDevices_Args* args);
Status LoadedExecutableDelete(PJRT_LoadedExecutable_Delete_Args* args);
Status LoadedExecutableIsDeleted(PJRT_LoadedExecutable_IsDeleted_Args* args);
Status LoadedExecutableGetDeviceAssignment(PJRT_LoadedExecutable_GetDeviceAssignment_Args* args);
Status LoadedExecutableFingerprint(PJRT_LoadedExecutable_Fingerprint_Args* args);
Status LoadedExecutableExecute(PJRT_LoadedExecutable_Execute_Args* args);

// ---- buffers (api_buffers.cc)
Status ClientBufferFromHostBuffer(PJRT_Client_BufferFromHostBuffer_Args* args);
Status BufferDestroy(PJRT_Buffer_Destroy_Args* args);
Status BufferElementType(PJRT_Buffer_ElementType_Args* args);
Status BufferDimensions(PJRT_Buffer_Dimensions_Args* args);
Status BufferUnpaddedDimensions(PJRT_Buffer_UnpaddedDimensions_Args* args);
Status BufferDynamicDimensionIndices(PJRT_Buffer_DynamicDimensionIndices_Args* args);
Status BufferGetMemoryLayout(PJRT_Buffer_GetMemoryLayout_Args* args);
Status BufferOnDeviceSizeInBytes(PJRT_Buffer_OnDeviceSizeInBytes_Args* args);
Status BufferDevice(PJRT_Buffer_Device_Args* args);
Status BufferMemory(PJRT_Buffer_Memory_Args* args);
Status BufferDelete(PJRT_Buffer_Delete_Args* args);
Status BufferIsDeleted(PJRT_Buffer_IsDeleted_Args* args);
Status BufferIsOnCpu(PJRT_Buffer_IsOnCpu_Args* args);
Status BufferReadyEvent(PJRT_Buffer_ReadyEvent_Args* args);
Status BufferUnsafePointer(PJRT_Buffer_UnsafePointer_Args* args);
Status BufferOpaqueDeviceMemoryDataPointer(PJRT_Buffer_OpaqueDeviceMemoryDataPointer_Args* args);
Status BufferIncreaseExternalReferenceCount(PJRT_Buffer_IncreaseExternalReferenceCount_Args* args);
Status BufferDecreaseExternalReferenceCount(PJRT_Buffer_DecreaseExternalReferenceCount_Args* args);
Status BufferToHostBuffer(PJRT_Buffer_ToHostBuffer_Args* args);
Status BufferCopyToDevice(PJRT_Buffer_CopyToDevice_Args* args);
Status BufferCopyToMemory(PJRT_Buffer_CopyToMemory_Args* args);

// The PJRT_Buffer handle JAX receives for a buffer on this device.
PJRT_Buffer* NewHandle(std::shared_ptr<BufferState> state, PJRT_Device* device);

}  // namespace jmp::pjrt

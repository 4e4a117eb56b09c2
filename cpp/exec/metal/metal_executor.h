// The Metal executor over any implementation of metal_api.h: MPSGraph and Metal on a Mac
// (metal_objc.mm), the strict stand-in elsewhere (exec/standin).
#pragma once

#include <memory>

#include "exec/executor.h"
#include "exec/metal/metal_api.h"

namespace jmp::exec {

// One MPSGraph per executable, compiled once, encoded into a command buffer per run and committed without
// waiting, on shared-storage buffers from the device's caching allocator. User kernels (MetalKernel
// segments) compile with the device's Metal Shading Language compiler; `kernel_fallback`, when given,
// compiles them instead (the stand-in has no such compiler: their reference implementation runs).
std::unique_ptr<Executor> CreateMetalExecutorOn(std::shared_ptr<metal::Device> device,
                                                std::unique_ptr<Executor> kernel_fallback = nullptr);

#ifdef JMP_HAVE_METAL
// MTLCreateSystemDefaultDevice() behind the interface (metal_objc.mm); null without a Metal device.
std::shared_ptr<metal::Device> SystemDefaultMetalDevice();
#endif

}  // namespace jmp::exec

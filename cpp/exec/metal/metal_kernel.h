// A user's Metal kernel as an executable of its own (placement gives every MetalKernel op a segment
// of its own): compiled once per (device, source, entry) and cached, then encoded on the executor's queue
// between the graph segments.
#pragma once

#include <functional>
#include <memory>

#include "exec/device_queue.h"
#include "exec/executor.h"
#include "exec/metal/metal_api.h"
#include "mps/graph.h"
#include "support/status.h"

namespace jmp::exec {

// Whether `graph` is one MetalKernel op (and nothing else an MPSGraph would need).
bool IsMetalKernelGraph(const mps::Graph& graph);

// `buffer_of` gives the Metal buffer behind the executor's memory; runs are committed without waiting and
// counted in `work` as the executor's graph runs are. A source that does not compile is an
// InvalidArgument error carrying the Metal compiler's message.
StatusOr<std::unique_ptr<Executable>> CompileMetalKernel(std::shared_ptr<metal::Device> device,
                                                         std::shared_ptr<metal::CommandQueue> queue,
                                                         std::shared_ptr<StartedWork> work, const mps::Graph& graph,
                                                         std::function<metal::Buffer&(DeviceMemory*)> buffer_of);

}  // namespace jmp::exec

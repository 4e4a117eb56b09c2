// A strict stand-in of MPSGraph and Metal behind exec/metal/metal_api.h, in portable C++: it enforces
// what Apple's headers require (each violation an error starting "MPSGraph stand-in:"), computes what
// they define with the host executor's kernels, and runs command buffers later, in commit order, on a
// queue thread of its own, so the Metal executor's logic runs wherever the plugin builds.
#pragma once

#include <memory>

#include "exec/metal/metal_api.h"

namespace jmp::exec::standin {

std::unique_ptr<metal::Device> CreateStandinDevice();

}  // namespace jmp::exec::standin

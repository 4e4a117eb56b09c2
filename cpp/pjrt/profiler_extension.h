// The PJRT profiler extension: jax.profiler starts and stops a session through it and collects the
// plugin's intervals (support/trace.h) as an XSpace with one device plane.
#pragma once

#include <string>
#include <vector>

#include "support/trace.h"
#include "xla/pjrt/c/pjrt_c_api.h"

namespace jmp::pjrt {

// The extension to chain from PJRT_Api::extension_start (static, lives as long as the library).
PJRT_Extension_Base* ProfilerExtension();

// The serialized XSpace of these events: plane "/device:CUSTOM:0" (the profiler's prefix for devices
// it has no name for) with a line per trace::Line, each event's stats as string stats.
std::string SerializeXSpace(const std::vector<trace::Event>& events);

}  // namespace jmp::pjrt

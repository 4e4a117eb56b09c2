// Instruments' view of the plugin on a Mac: the intervals of support/trace.h as os_signpost intervals
// in the Points of Interest track, beside the GPU's work in Metal System Trace.
#pragma once

namespace jmp::exec {

// Turns the signposts on or off; false where the system has no signposts (never on a Mac).
bool SetSignposts(bool on);

}  // namespace jmp::exec

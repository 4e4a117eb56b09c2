// The plugin's exported symbols. GetPjrtApi is called by JAX on load, even when the platform is not
// selected: it only returns a static table (nothing is created until PJRT_Client_Create).
#include "exec/executor.h"
#include "pjrt/pjrt_state.h"

#define JMP_EXPORT extern "C" __attribute__((visibility("default")))

JMP_EXPORT const PJRT_Api* GetPjrtApi() { return jmp::pjrt::GetApi(); }

// Copies of buffer contents so far: host<->device, and outputs the segment runner staged apart from a
// donated input (benchmarks report the count between steps; 0 is the target).
JMP_EXPORT int64_t jmp_pjrt_copy_count() { return jmp::pjrt::g_copy_count.load() + jmp::exec::StagedOutputCount(); }

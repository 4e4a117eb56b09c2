// The plugin's exported symbols. GetPjrtApi is called by JAX on load, even when the platform is not
// selected: it only returns a static table (nothing is created until PJRT_Client_Create).
#include "pjrt/pjrt_state.h"

#define JMP_EXPORT extern "C" __attribute__((visibility("default")))

JMP_EXPORT const PJRT_Api* GetPjrtApi() { return jmp::pjrt::GetApi(); }

// Host<->device copies of buffer contents so far (benchmarks report the count between steps).
JMP_EXPORT int64_t jmp_pjrt_copy_count() { return jmp::pjrt::g_copy_count.load(); }

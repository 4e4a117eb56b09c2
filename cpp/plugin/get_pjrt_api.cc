// The plugin's exported symbols. GetPjrtApi is called by JAX on load, even when the platform is not
// selected: it only returns a static table (nothing is created until PJRT_Client_Create).
#include <algorithm>
#include <cstring>
#include <string>

#include "exec/executor.h"
#include "exec/host/host_isa.h"
#ifdef JMP_HAVE_METAL
#include "exec/metal/metal_signposts.h"
#endif
#include "exec/host_callback.h"
#include "exec/work_counters.h"
#include "pjrt/execute.h"
#include "pjrt/pjrt_state.h"
#include "plugin/export.h"

JMP_EXPORT const PJRT_Api* GetPjrtApi() { return jmp::pjrt::GetApi(); }

// Copies of buffer contents so far: host<->device, and outputs the segment runner staged apart from a
// donated input (benchmarks report the count between steps; 0 is the target).
JMP_EXPORT int64_t jmp_pjrt_copy_count() { return jmp::pjrt::g_copy_count.load() + jmp::exec::StagedOutputCount(); }

// Python host callbacks (cpp/exec/host_callback.h): jax_metal_plugin installs its trampoline here at
// initialize(); the trampoline hands each result back through jmp_python_callback_result, which
// returns 0, or nonzero with the mismatch's text in `error` (the call then fails with that text too).
JMP_EXPORT void jmp_set_python_callback(jmp_python_callback_fn fn) { jmp::exec::SetPythonCallbackTrampoline(fn); }

JMP_EXPORT int32_t jmp_python_callback_result(void* results, int32_t index, const void* data, const char* dtype,
                                              int32_t rank, const int64_t* dims, char* error, int64_t error_capacity) {
  jmp::Status status = jmp::exec::DeliverPythonCallbackResult(results, index, data, dtype, rank, dims);
  if (status.ok()) return 0;
  if (error && error_capacity > 0) {
    const std::string& m = status.message();
    size_t n = std::min(m.size(), static_cast<size_t>(error_capacity - 1));
    std::memcpy(error, m.data(), n);
    error[n] = '\0';
  }
  return 1;
}

// The plugin's work counters (exec/work_counters.h) by name, -1 for an unknown name: the benchmark's
// per-step figures and the persistent-cache tests read them (jax_metal_plugin.stats()).
JMP_EXPORT const char* jmp_pjrt_stat_names() {
  return "graph_runs,syncs,fresh_allocs,copies,programs_lowered,programs_deserialized,inline_runs,process_part_runs,"
         "argument_exchanges";
}

JMP_EXPORT int64_t jmp_pjrt_stat(const char* name) {
  const jmp::exec::WorkCounters& c = jmp::exec::Counters();
  const std::string n = name ? name : "";
  if (n == "graph_runs") return c.graph_runs.load();
  if (n == "syncs") return c.syncs.load();
  if (n == "fresh_allocs") return c.fresh_allocs.load();
  if (n == "copies") return jmp_pjrt_copy_count();
  if (n == "programs_lowered") return c.programs_lowered.load();
  if (n == "programs_deserialized") return c.programs_deserialized.load();
  if (n == "inline_runs") return c.inline_runs.load();
  if (n == "process_part_runs") return c.process_part_runs.load();
  if (n == "argument_exchanges") return c.argument_exchanges.load();
  return -1;
}

// The instruction-set level the host executor's vector loops run at ("avx2"; exec/host/host_isa.h).
JMP_EXPORT const char* jmp_host_isa() { return jmp::exec::host::IsaName(jmp::exec::host::HostIsa()).data(); }

// Executions queued or running: the package frees the callbacks of discarded programs when it is 0.
JMP_EXPORT int64_t jmp_pjrt_runs_in_flight() { return jmp::pjrt::g_runs_in_flight.load(); }

// Signposts for Instruments (exec/metal/metal_signposts.h): 1 when they are now on (or off, as asked), 0
// where the system has none.
JMP_EXPORT int32_t jmp_set_signposts(int32_t on) {
#ifdef JMP_HAVE_METAL
  return jmp::exec::SetSignposts(on != 0) ? 1 : 0;
#else
  (void)on;
  return 0;
#endif
}

// Gives back the memory the device pools keep free for reuse (jax_metal_plugin.trim_memory()); returns the
// bytes released.
JMP_EXPORT int64_t jmp_pjrt_trim_memory() { return static_cast<int64_t>(jmp::pjrt::TrimMemoryPools()); }

// The device pools' figures: blocks made fresh by the system, and blocks served again from the pool.
JMP_EXPORT int64_t jmp_pjrt_pool_fresh_allocs() { return jmp::pjrt::PoolFreshAllocs(); }

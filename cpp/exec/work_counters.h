// Counts of the work the plugin does, for the benchmark's per-step figures and the tests that check a
// persistent-cache hit: process-wide, only ever increasing (readers take differences).
#pragma once

#include <atomic>
#include <cstdint>

namespace jmp::exec {

struct WorkCounters {
  // Device graph executions: Metal segments run (in placed mode, the segments a Mac would run on Metal).
  std::atomic<int64_t> graph_runs{0};
  // Times work inside an execution waited for the device's results on the host: a host segment after a
  // Metal segment of the same run (a Mac waits for the GPU there).
  std::atomic<int64_t> syncs{0};
  // New backing memory from the system (not memory a cache handed back).
  std::atomic<int64_t> fresh_allocs{0};
  // Programs read and lowered from StableHLO, and programs rebuilt from a serialized executable.
  std::atomic<int64_t> programs_lowered{0};
  std::atomic<int64_t> programs_deserialized{0};
  // Runs the caller's thread did inside Execute (cheap programs, with the device idle) rather than queue.
  std::atomic<int64_t> inline_runs{0};
  // Runs of a program over several processes: as this process's part (its psums across processes), or
  // with the arguments exchanged and the whole program run here.
  std::atomic<int64_t> process_part_runs{0};
  std::atomic<int64_t> argument_exchanges{0};
};

inline WorkCounters& Counters() {
  static WorkCounters counters;
  return counters;
}

}  // namespace jmp::exec

// Intra-op parallelism for the host executor: one process-wide pool of worker threads (one per core
// beyond the caller's, JMP_HOST_THREADS=N overrides the total) that kernels split their loops over.
// OpenBLAS runs single-threaded under it, so no two thread pools fight over the cores.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>

namespace jmp::exec::host {

// Calls f(begin, end) over disjoint ranges covering [0, n), each at least `grain` long (except the
// last), on the pool's threads and the caller's. Ranges too small to be worth a thread run inline, as
// do calls made from inside a ParallelFor's ranges and calls made while another thread's ParallelFor
// holds the pool (no waiting for it).
// Small ranges (most ops inside loops) run inline without making a std::function.
void ParallelForSplit(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& f);
template <typename F>
void ParallelFor(int64_t n, int64_t grain, F&& f) {
  if (n <= 0) return;
  if (n < 2 * grain) {
    f(int64_t{0}, n);
    return;
  }
  ParallelForSplit(n, grain, std::function<void(int64_t, int64_t)>(std::forward<F>(f)));
}

// How many threads ParallelFor may use, the caller included.
int HostThreads();

// Elements per range below which splitting costs more than it saves, for a loop doing about
// `work` simple operations per element.
inline int64_t GrainFor(int64_t work) { return work >= 16 ? 2048 : work >= 4 ? 8192 : 32768; }

}  // namespace jmp::exec::host

#include "exec/host/host_parallel.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "support/fp_env.h"

namespace jmp::exec::host {

namespace {

// Set while this thread runs a ParallelFor's ranges: a nested ParallelFor runs inline (the pool is
// taken, and its owner must not try its lock again).
thread_local bool in_parallel_for = false;

class Pool {
 public:
  explicit Pool(int workers) {
    for (int i = 0; i < workers; ++i)
      threads_.emplace_back([this] {
        UseDefaultFloatingPoint();
        WorkerLoop();
      });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      ++generation_;
    }
    wake_.notify_all();
    for (auto& t : threads_) t.join();
  }

  int threads() const { return static_cast<int>(threads_.size()) + 1; }

  // Runs every chunk of a job; returns false (having run nothing) when the pool is busy.
  bool TryRun(int64_t n, int64_t chunk, const std::function<void(int64_t, int64_t)>& f) {
    std::unique_lock<std::mutex> owner(busy_, std::try_to_lock);
    if (!owner.owns_lock()) return false;
    job_ = &f;
    n_ = n;
    chunk_ = chunk;
    chunks_ = (n + chunk - 1) / chunk;
    next_.store(0);
    done_.store(0);
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++generation_;
      active_.store(generation_);
    }
    wake_.notify_all();
    RunChunks();
    // The caller finished its share; wait for chunks still running elsewhere, then for every worker
    // to leave the job before its state is reused.
    while (done_.load() < chunks_) std::this_thread::yield();
    active_.store(0);
    while (inside_.load() > 0) std::this_thread::yield();
    job_ = nullptr;
    return true;
  }

 private:
  void RunChunks() {
    for (;;) {
      int64_t c = next_.fetch_add(1);
      if (c >= chunks_) return;
      int64_t begin = c * chunk_;
      (*job_)(begin, std::min(n_, begin + chunk_));
      done_.fetch_add(1);
    }
  }

  void WorkerLoop() {
    uint64_t seen = 0;
    for (;;) {
      // Spin briefly (the next op usually follows within microseconds), then sleep.
      auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(200);
      uint64_t g = 0;
      while ((g = active_.load()) == 0 || g == seen) {
        if (std::chrono::steady_clock::now() > spin_until) break;
        std::this_thread::yield();
      }
      if (g == 0 || g == seen) {
        std::unique_lock<std::mutex> lock(mu_);
        wake_.wait(lock, [&] { return stop_ || (generation_ != seen && active_.load() == generation_); });
        if (stop_) return;
        g = generation_;
      }
      seen = g;
      // Announce ourselves before checking the job is still the one we saw: its owner waits for
      // `inside_` to drop to zero before reusing the job's state.
      inside_.fetch_add(1);
      in_parallel_for = true;  // a worker's nested ParallelFor runs inline
      if (active_.load() == g) RunChunks();
      inside_.fetch_sub(1);
    }
  }

  std::vector<std::thread> threads_;
  std::mutex busy_;  // held by the thread whose job the pool runs
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  uint64_t generation_ = 0;
  std::atomic<uint64_t> active_{0};
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t n_ = 0, chunk_ = 1, chunks_ = 0;
  std::atomic<int64_t> next_{0}, done_{0};
  std::atomic<int> inside_{0};
};

int ConfiguredThreads() {
  if (const char* env = std::getenv("JMP_HOST_THREADS")) {
    int t = std::atoi(env);
    if (t > 0) return std::min(t, 64);
  }
  unsigned hw = std::thread::hardware_concurrency();
  return static_cast<int>(std::clamp(hw, 1u, 16u));
}

Pool* GlobalPool() {
  // Never destroyed: worker threads must not be joined from static destructors at exit.
  static Pool* pool = new Pool(ConfiguredThreads() - 1);
  return pool;
}

struct InParallelFor {
  bool was = in_parallel_for;
  InParallelFor() { in_parallel_for = true; }
  ~InParallelFor() { in_parallel_for = was; }
};

}  // namespace

int HostThreads() { return GlobalPool()->threads(); }

void ParallelForSplit(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& f) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  int threads = HostThreads();
  if (threads <= 1 || n < 2 * grain || in_parallel_for) {
    f(0, n);
    return;
  }
  InParallelFor guard;
  // A few chunks per thread balance uneven progress without much bookkeeping.
  int64_t chunks = std::min<int64_t>(n / grain, int64_t{threads} * 4);
  int64_t chunk = (n + chunks - 1) / chunks;
  if (!GlobalPool()->TryRun(n, chunk, f)) f(0, n);
}

}  // namespace jmp::exec::host

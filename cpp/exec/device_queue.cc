// The emulated command queue (executor.h, CreateEmulatedQueueExecutor): the contract of a Metal command
// queue with the host executor doing the work. Start "encodes" (keeps the run) and "commits" (queues it)
// and returns; a completion thread plays the GPU, running committed work in order, each run after a
// seeded random delay, and then calls the run's done as a command buffer's completion handler would.
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "exec/device_queue.h"
#include "exec/executor.h"

namespace jmp::exec {

namespace {

struct Committed {
  Executable* executable;
  std::vector<DeviceMemory*> inputs, outputs;
  std::function<void(Status)> done;
};

class EmulatedQueue {
 public:
  EmulatedQueue() {
    if (const char* seed = std::getenv("JAX_METAL_EMULATED_SEED")) rng_.seed(std::strtoull(seed, nullptr, 10));
    if (const char* range = std::getenv("JAX_METAL_EMULATED_DELAY_US")) {
      threaded_ = true;
      char* end = nullptr;
      min_us_ = std::strtoll(range, &end, 10);
      max_us_ = end && *end == ',' ? std::strtoll(end + 1, nullptr, 10) : min_us_;
      if (min_us_ < 0) min_us_ = 0;
      if (max_us_ < min_us_) max_us_ = min_us_;
    }
    thread_ = std::thread([this] { Loop(); });
  }
  ~EmulatedQueue() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    // The last run may hold the last reference, released by its handler on the completion thread.
    if (thread_.get_id() == std::this_thread::get_id())
      thread_.detach();
    else
      thread_.join();
  }

  void Commit(Committed c) {
    work_.Begin();
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (threaded_ || running_ || !queue_.empty()) {
        queue_.push_back(std::move(c));
        lock.unlock();
        cv_.notify_all();
        return;
      }
      running_ = true;
    }
    // An idle queue without delays completes the commit at once, here: an infinitely fast GPU, one legal
    // schedule of the same contract, which spares each run two thread handoffs.
    Finish(c);
    bool wake;
    {
      std::lock_guard<std::mutex> lock(mu_);
      running_ = false;
      wake = !queue_.empty() || stop_;
    }
    // The completion thread waits only for queued work (or the stop): waking it for nothing would cost a
    // futex wake and a context switch per run, which is most of a small program's overhead.
    if (wake) cv_.notify_all();
  }
  void AwaitStarted() { work_.AwaitStarted(); }

 private:
  void Loop() {
    for (;;) {
      Committed c;
      int64_t delay_us;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return (stop_ && !running_) || (!queue_.empty() && !running_); });
        if (queue_.empty()) return;
        c = std::move(queue_.front());
        queue_.pop_front();
        running_ = true;
        delay_us = max_us_ > 0 ? std::uniform_int_distribution<int64_t>(min_us_, max_us_)(rng_) : 0;
      }
      if (delay_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
      Finish(c);
      {
        std::lock_guard<std::mutex> lock(mu_);
        running_ = false;
      }
      cv_.notify_all();
    }
  }

  void Finish(Committed& c) {
    Status status = c.executable->Run(c.inputs, c.outputs);
    work_.End();  // before the handler: what it releases may be waited for by the host
    auto done = std::move(c.done);
    c = Committed{};
    done(std::move(status));
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Committed> queue_;
  bool stop_ = false;
  bool running_ = false;   // a committed run is being finished (on the thread, or inline)
  bool threaded_ = false;  // delays set: every run goes through the completion thread
  std::mt19937_64 rng_{0};
  int64_t min_us_ = 0, max_us_ = 0;
  StartedWork work_;
  std::thread thread_;
};

class EmulatedExecutable : public Executable {
 public:
  EmulatedExecutable(std::unique_ptr<Executable> inner, std::shared_ptr<EmulatedQueue> queue)
      : inner_(std::move(inner)), queue_(std::move(queue)) {}

  Status Run(const std::vector<DeviceMemory*>& inputs, const std::vector<DeviceMemory*>& outputs) override {
    return StartAndWait(*this, inputs, outputs);
  }
  // Device work: earlier work on this queue is done before this runs, so `waits` need no waiting.
  void Start(const std::vector<DeviceMemory*>& inputs, const std::vector<DeviceMemory*>& outputs,
             const std::vector<std::function<Status()>>&, std::function<void(Status)> done) override {
    queue_->Commit(Committed{inner_.get(), inputs, outputs, std::move(done)});
  }
  bool OutputsMayAliasInputs() const override { return inner_->OutputsMayAliasInputs(); }

 private:
  std::unique_ptr<Executable> inner_;
  std::shared_ptr<EmulatedQueue> queue_;
};

class EmulatedQueueExecutor : public Executor {
 public:
  explicit EmulatedQueueExecutor(std::unique_ptr<Executor> inner) : inner_(std::move(inner)) {}
  std::string name() const override { return inner_->name(); }
  StatusOr<std::shared_ptr<DeviceMemory>> Allocate(size_t bytes) override { return inner_->Allocate(bytes); }
  StatusOr<std::unique_ptr<Executable>> Compile(const mps::Graph& graph) override {
    JMP_ASSIGN_OR_RETURN(std::unique_ptr<Executable> exe, inner_->Compile(graph));
    return std::unique_ptr<Executable>(new EmulatedExecutable(std::move(exe), queue_));
  }
  void AwaitStarted() override { queue_->AwaitStarted(); }
  PoolStats MemoryPoolStats() override { return inner_->MemoryPoolStats(); }
  size_t TrimMemoryPool() override { return inner_->TrimMemoryPool(); }
  int64_t MemoryLimit() override { return inner_->MemoryLimit(); }

 private:
  std::unique_ptr<Executor> inner_;
  std::shared_ptr<EmulatedQueue> queue_ = std::make_shared<EmulatedQueue>();
};

}  // namespace

std::unique_ptr<Executor> CreateEmulatedQueueExecutor(std::unique_ptr<Executor> inner) {
  return std::make_unique<EmulatedQueueExecutor>(std::move(inner));
}

}  // namespace jmp::exec

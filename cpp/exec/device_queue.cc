// The emulated command queue (executor.h, CreateEmulatedQueueExecutor): the contract of a Metal command
// queue with the host executor doing the work. Start "encodes" (keeps the run) and "commits" (queues it)
// and returns; a worker thread plays the GPU, running committed work in order, each run after a seeded
// random delay, and then calls the run's done as a command buffer's completion handler would.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "exec/device_queue.h"
#include "exec/executor.h"
#include "support/serial_worker.h"

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
    if (const char* seed = std::getenv("JAX_METAL_EMULATED_SEED")) shared_->rng.seed(std::strtoull(seed, nullptr, 10));
    if (const char* range = std::getenv("JAX_METAL_EMULATED_DELAY_US")) {
      threaded_ = true;
      char* end = nullptr;
      int64_t min_us = std::strtoll(range, &end, 10);
      int64_t max_us = end && *end == ',' ? std::strtoll(end + 1, nullptr, 10) : min_us;
      shared_->min_us = std::max<int64_t>(min_us, 0);
      shared_->max_us = std::max(max_us, shared_->min_us);
    }
  }

  void Commit(Committed c) {
    shared_->work.Begin();
    // An idle queue without delays completes the commit at once, here: an infinitely fast GPU, one legal
    // schedule of the same contract, which spares each run two thread handoffs.
    if (!threaded_ && gpu_.RunIfIdle([&] { Finish(*shared_, c); })) return;
    gpu_.Push([shared = shared_, c = std::move(c)]() mutable {
      Shared& s = *shared;
      // Only the worker's thread draws delays.
      const int64_t delay_us = s.max_us > 0 ? std::uniform_int_distribution<int64_t>(s.min_us, s.max_us)(s.rng) : 0;
      if (delay_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
      Finish(s, c);
    });
  }
  void AwaitStarted() { shared_->work.AwaitStarted(); }

 private:
  // What the runs use, held by each queued run: a run's handler may let go of the queue's last owner.
  struct Shared {
    StartedWork work;
    std::mt19937_64 rng{0};
    int64_t min_us = 0, max_us = 0;
  };

  static void Finish(Shared& s, Committed& c) {
    Status status = c.executable->Run(c.inputs, c.outputs);
    s.work.End();  // before the handler: what it releases may be waited for by the host
    auto done = std::move(c.done);
    c = Committed{};
    done(std::move(status));
  }

  const std::shared_ptr<Shared> shared_ = std::make_shared<Shared>();
  bool threaded_ = false;  // delays set: every run goes through the worker's thread
  SerialWorker gpu_;       // last: destroyed first, after running what was committed
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

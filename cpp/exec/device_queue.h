// What a pipelined device executor keeps of its work in flight: how many runs it started and how many are
// done (a device completes its work in the order it was started), so that the host can wait for all of
// it before writing memory it may still read.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

#include "exec/executor.h"

namespace jmp::exec {

class StartedWork {
 public:
  void Begin() {
    std::lock_guard<std::mutex> lock(mu_);
    ++started_;
  }
  void End() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++done_;
    }
    cv_.notify_all();
  }
  // Waits until the runs started before this call are done (later ones may still run).
  void AwaitStarted() {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t target = started_;
    cv_.wait(lock, [&] { return done_ >= target; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t started_ = 0, done_ = 0;
};

// Executable::Run for an executable whose Start may return early: starts the run and waits for it.
inline Status StartAndWait(Executable& executable, const std::vector<DeviceMemory*>& inputs,
                           const std::vector<DeviceMemory*>& outputs) {
  std::mutex mu;
  std::condition_variable cv;
  bool finished = false;
  Status result;
  executable.Start(inputs, outputs, {}, [&](Status s) {
    std::lock_guard<std::mutex> lock(mu);
    result = std::move(s);
    finished = true;
    cv.notify_all();
  });
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return finished; });
  return result;
}

}  // namespace jmp::exec

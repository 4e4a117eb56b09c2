// Completion and ordering: events that complete once with a status, the in-order work queue every
// execution runs on, and the gate that keeps an in-place write behind the host reads started before it.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "support/status.h"

namespace jmp::pjrt {

// Completes once, with a status; callbacks registered before or after completion all run once.
class EventState {
 public:
  void Set(Status status);
  bool ready();
  Status Await();
  void OnReady(std::function<void(Status)> callback);
  // The work queue whose runs set this event (null: set otherwise). A run queued on the same work
  // queue needs no host wait for it before starting device work: the device runs work in order.
  const void* producer = nullptr;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool ready_ = false;
  Status status_;
  std::vector<std::function<void(Status)>> callbacks_;
};

// An event already complete with `status`.
std::shared_ptr<EventState> CompletedEvent(Status status);

// Host reads of a buffer's memory that run outside the work queue (ToHostBuffer, buffer copies). An
// execution that writes a donated buffer in place waits until the reads that started before the
// donation are done.
class ReadGate {
 public:
  void Enter();
  void Leave();
  void WaitIdle();
  bool Idle();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int readers_ = 0;
};

// Bounds the runs a client has queued or in flight (as XLA:CPU bounds its in-flight computations):
// Execute takes a slot, waiting while all are taken, and the run gives it back when done, so that a loop
// that never syncs paces itself instead of queueing unbounded work and memory.
class InflightLimit {
 public:
  explicit InflightLimit(int limit) : free_(limit) {}
  void Acquire();
  void Release();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int free_;
};

}  // namespace jmp::pjrt

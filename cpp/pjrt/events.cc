#include "pjrt/events.h"

#include <utility>

namespace jmp::pjrt {

void EventState::Set(Status status) {
  std::vector<std::function<void(Status)>> callbacks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (ready_) return;
    ready_ = true;
    status_ = status;
    callbacks.swap(callbacks_);
  }
  cv_.notify_all();
  for (auto& cb : callbacks) cb(status);
}

bool EventState::ready() {
  std::lock_guard<std::mutex> lock(mu_);
  return ready_;
}

Status EventState::Await() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return ready_; });
  return status_;
}

void EventState::OnReady(std::function<void(Status)> callback) {
  Status status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!ready_) {
      callbacks_.push_back(std::move(callback));
      return;
    }
    status = status_;
  }
  callback(status);
}

std::shared_ptr<EventState> CompletedEvent(Status status) {
  auto event = std::make_shared<EventState>();
  event->Set(std::move(status));
  return event;
}

void ReadGate::Enter() {
  std::lock_guard<std::mutex> lock(mu_);
  ++readers_;
}

void ReadGate::Leave() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    --readers_;
  }
  cv_.notify_all();
}

bool ReadGate::Idle() {
  std::lock_guard<std::mutex> lock(mu_);
  return readers_ == 0;
}

void ReadGate::WaitIdle() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return readers_ == 0; });
}

void InflightLimit::Acquire() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return free_ > 0; });
  --free_;
}

void InflightLimit::Release() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++free_;
  }
  cv_.notify_one();
}

}  // namespace jmp::pjrt

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

WorkQueue::WorkQueue() {
  worker_ = std::thread([this] {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return !busy_ && (stop_ || !tasks_.empty()); });
        if (tasks_.empty()) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
        busy_ = true;
      }
      task();
      {
        std::lock_guard<std::mutex> lock(mu_);
        busy_ = false;
      }
    }
  });
}

WorkQueue::~WorkQueue() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

bool WorkQueue::RunIfIdle(const std::function<void()>& task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (busy_ || !tasks_.empty() || stop_) return false;
    busy_ = true;
  }
  task();
  bool pushed_meanwhile;
  {
    std::lock_guard<std::mutex> lock(mu_);
    busy_ = false;
    pushed_meanwhile = !tasks_.empty();
  }
  if (pushed_meanwhile) cv_.notify_one();  // otherwise waking the worker would only put it back to sleep
  return true;
}

void WorkQueue::Push(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.push_back(std::move(task));
  }
  cv_.notify_one();
}

}  // namespace jmp::pjrt

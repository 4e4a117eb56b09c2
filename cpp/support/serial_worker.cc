#include "support/serial_worker.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <utility>

#include "support/fp_env.h"

namespace jmp {

struct SerialWorker::State {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> tasks;
  bool busy = false;  // a task runs, on the thread or inline
  bool stop = false;
  std::thread::id runner;  // the thread running the current task

  void Loop() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return !busy && (stop || !tasks.empty()); });
        if (tasks.empty()) return;
        task = std::move(tasks.front());
        tasks.pop_front();
        busy = true;
        runner = std::this_thread::get_id();
      }
      task();
      task = nullptr;  // what it holds goes before the next task runs
      std::lock_guard<std::mutex> lock(mu);
      busy = false;
    }
  }
};

SerialWorker::SerialWorker() : state_(std::make_shared<State>()) {
  thread_ = std::thread([state = state_] {
    UseDefaultFloatingPoint();  // its tasks run host kernels
    state->Loop();
  });
  id_ = thread_.get_id();
}

SerialWorker::~SerialWorker() {
  bool from_a_task;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->stop = true;
    from_a_task = state_->busy && state_->runner == std::this_thread::get_id();
  }
  state_->cv.notify_all();
  // Joined from inside a task, the thread would wait for that task to end.
  if (from_a_task || id_ == std::this_thread::get_id())
    thread_.detach();
  else
    thread_.join();
}

void SerialWorker::Push(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->tasks.push_back(std::move(task));
  }
  state_->cv.notify_one();
}

bool SerialWorker::RunIfIdle(const std::function<void()>& task) {
  const std::shared_ptr<State> state = state_;  // the task may destroy the worker
  {
    std::lock_guard<std::mutex> lock(state->mu);
    if (state->busy || !state->tasks.empty() || state->stop) return false;
    state->busy = true;
    state->runner = std::this_thread::get_id();
  }
  task();
  bool wake;
  {
    std::lock_guard<std::mutex> lock(state->mu);
    state->busy = false;
    wake = !state->tasks.empty() || state->stop;
  }
  // Otherwise waking the thread would only put it back to sleep: a futex wake and a context switch per run.
  if (wake) state->cv.notify_one();
  return true;
}

}  // namespace jmp

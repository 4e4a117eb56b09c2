// One thread that runs closures one at a time, in the order they come: PJRT's executions, the emulated
// device queue's runs, the stand-in's late completion handlers.
#pragma once

#include <functional>
#include <memory>
#include <thread>

namespace jmp {

// Its state is shared with its thread, so a closure may destroy the worker (a completion handler letting
// go of the worker's last owner): the thread then ends after that closure and the ones queued behind it,
// which must hold whatever they use. Destroyed anywhere else, it runs what was queued and joins.
class SerialWorker {
 public:
  SerialWorker();
  ~SerialWorker();
  SerialWorker(const SerialWorker&) = delete;
  SerialWorker& operator=(const SerialWorker&) = delete;

  void Push(std::function<void()> task);
  // Runs `task` on the calling thread when nothing is queued or running, holding back work pushed
  // meanwhile until it returns (so order is kept); false, having run nothing, otherwise.
  bool RunIfIdle(const std::function<void()>& task);
  // Its thread's id, which stays valid to compare with after the worker is gone.
  std::thread::id thread_id() const { return id_; }

 private:
  struct State;
  std::shared_ptr<State> state_;
  std::thread thread_;
  std::thread::id id_;
};

}  // namespace jmp

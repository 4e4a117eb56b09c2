#include "exec/process_collectives.h"

#include <memory>
#include <mutex>
#include <utility>

namespace jmp::exec {

namespace {

std::mutex& ReducerMutex() {
  static std::mutex mu;
  return mu;
}

std::shared_ptr<ProcessReducer>& Reducer() {
  static std::shared_ptr<ProcessReducer> reducer;
  return reducer;
}

}  // namespace

void SetProcessReducer(ProcessReducer reducer) {
  std::lock_guard<std::mutex> lock(ReducerMutex());
  Reducer() = reducer ? std::make_shared<ProcessReducer>(std::move(reducer)) : nullptr;
}

Status ReduceAcrossProcesses(const ProcessReduce& reduce) {
  std::shared_ptr<ProcessReducer> reducer;
  {
    std::lock_guard<std::mutex> lock(ReducerMutex());
    reducer = Reducer();
  }
  if (!reducer) return FailedPrecondition("an all-reduce across processes in a process that joined no others");
  return (*reducer)(reduce);
}

}  // namespace jmp::exec

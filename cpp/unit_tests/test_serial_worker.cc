// The one-thread worker behind PJRT's executions, the emulated device queue and the stand-in's late
// handlers: order kept between pushed and inline work, queued work run before it is joined, and a
// worker destroyed by one of its own tasks (a completion handler dropping the last owner) neither
// hangs nor touches freed memory.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "support/serial_worker.h"
#include "unit_tests/unit_test.h"

namespace jmp::unit {
namespace {

// Waits (at most a few seconds) for a flag another thread sets.
bool Eventually(const std::atomic<bool>& flag) {
  for (int i = 0; i < 5000 && !flag.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return flag.load();
}

JMP_TEST(SerialWorker, PushedAndInlineWorkKeepTheirOrder) {
  auto order = std::make_shared<std::vector<int>>();
  {
    SerialWorker w;
    for (int i = 0; i < 200; ++i) {
      // Inline only when idle; otherwise pushed behind what is queued. Each task runs alone, so the
      // vector needs no lock.
      auto task = [order, i] { order->push_back(i); };
      if (i % 3 != 0 || !w.RunIfIdle(task)) w.Push(task);
    }
  }  // joined after running every pushed task
  EXPECT_SAME(order->size(), size_t{200});
  for (size_t i = 0; i < order->size(); ++i) EXPECT_SAME((*order)[i], static_cast<int>(i));
}

JMP_TEST(SerialWorker, RunIfIdleRefusesWhileATaskRuns) {
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  std::atomic<bool> started{false};
  SerialWorker w;
  w.Push([&] {
    started = true;
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return release; });
  });
  EXPECT_TRUE(Eventually(started));
  bool ran = false;
  EXPECT_TRUE(!w.RunIfIdle([&] { ran = true; }));
  EXPECT_TRUE(!ran);
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
}

JMP_TEST(SerialWorker, ATaskMayDestroyItsWorker) {
  // The owner goes inside a task on the worker's thread; the task queued behind it still runs, holding
  // what it uses.
  auto owner = std::make_shared<std::unique_ptr<SerialWorker>>(std::make_unique<SerialWorker>());
  auto later_ran = std::make_shared<std::atomic<bool>>(false);
  std::mutex mu;
  std::condition_variable cv;
  bool go = false;
  (*owner)->Push([&] {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return go; });
  });
  (*owner)->Push([owner] { owner->reset(); });
  (*owner)->Push([later_ran] { *later_ran = true; });
  {
    std::lock_guard<std::mutex> lock(mu);
    go = true;
  }
  cv.notify_all();
  EXPECT_TRUE(Eventually(*later_ran));
}

JMP_TEST(SerialWorker, AnInlineTaskMayDestroyItsWorker) {
  auto w = std::make_unique<SerialWorker>();
  std::atomic<bool> pushed_ran{false};
  EXPECT_TRUE(w->RunIfIdle([&] { w.reset(); }));
  EXPECT_TRUE(!w);
  // A fresh worker still works after one detached itself.
  SerialWorker again;
  again.Push([&] { pushed_ran = true; });
  EXPECT_TRUE(Eventually(pushed_ran));
}

}  // namespace
}  // namespace jmp::unit

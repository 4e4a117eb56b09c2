#include "exec/crash_note.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>

#include "exec/capabilities.h"
#include "support/write_fd.h"

namespace jmp::exec {

namespace {

// What the signal handler may touch: fixed storage written before the handlers are installed, and
// lock-free atomics. Several threads may compile or encode at once, each holding a slot; a thread that
// finds none free goes unnoted rather than waiting.
constexpr int kSlots = 64;
std::atomic<const char*> g_held[kSlots];
static_assert(std::atomic<const char*>::is_always_lock_free, "the signal handler reads the slots");
char g_path[4096];
constexpr int kSignals[] = {SIGABRT, SIGSEGV, SIGBUS};
constexpr const char* kSignalLines[] = {"# SIGABRT\n", "# SIGSEGV\n", "# SIGBUS\n"};
struct sigaction g_previous[3];

size_t Length(const char* s) {
  size_t n = 0;
  while (s[n]) ++n;
  return n;
}

void WriteAll(int fd, const char* text) { WriteAllToFd(fd, text, Length(text)); }

// Async-signal-safe: loads, open/write/close, sigaction and raise only.
void OnFatalSignal(int sig) {
  const int saved_errno = errno;
  int which = 0;
  while (which < 2 && kSignals[which] != sig) ++which;
  bool holding = false;
  for (const auto& slot : g_held) holding = holding || slot.load(std::memory_order_acquire) != nullptr;
  if (holding) {
    const int fd = open(g_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
      WriteAll(fd, kSignalLines[which]);
      for (const auto& slot : g_held)
        if (const char* text = slot.load(std::memory_order_acquire)) WriteAll(fd, text);
      close(fd);
    }
  }
  // The signal is blocked while this runs: raised again, it reaches the previous disposition as soon as
  // this returns (a fault re-executes the faulting instruction anyway).
  sigaction(sig, &g_previous[which], nullptr);
  errno = saved_errno;
  raise(sig);
}

void InstallHandlers(const char* path) {
  std::strncpy(g_path, path, sizeof g_path - 1);
  struct sigaction action;
  std::memset(&action, 0, sizeof action);
  action.sa_handler = OnFatalSignal;
  sigemptyset(&action.sa_mask);
  for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &action, &g_previous[i]);
}

// Publishes `text` for the handler for as long as it lives.
class Holding {
 public:
  explicit Holding(const std::string& text) {
    for (int i = 0; i < kSlots; ++i) {
      const char* none = nullptr;
      if (g_held[i].compare_exchange_strong(none, text.c_str(), std::memory_order_acq_rel)) {
        slot_ = i;
        return;
      }
    }
  }
  ~Holding() {
    if (slot_ >= 0) g_held[slot_].store(nullptr, std::memory_order_release);
  }
  Holding(const Holding&) = delete;
  Holding& operator=(const Holding&) = delete;

 private:
  int slot_ = -1;
};

void CollectPairs(const mps::Graph& graph, std::set<std::string>& pairs) {
  for (const mps::Op& op : graph.ops) {
    pairs.insert(std::string(mps::OpKindName(op.kind)) + ":" + std::string(JaxDTypeName(OpDType(graph, op))));
    for (const mps::Graph& sub : op.subgraphs) CollectPairs(sub, pairs);
  }
}

class NotingExecutable : public Executable {
 public:
  NotingExecutable(std::unique_ptr<Executable> inner, std::string text)
      : inner_(std::move(inner)), text_(std::move(text)) {
    device_graphs_per_run = inner_->device_graphs_per_run;
  }
  Status Run(const std::vector<DeviceMemory*>& inputs, const std::vector<DeviceMemory*>& outputs) override {
    Holding held(text_);
    return inner_->Run(inputs, outputs);
  }
  void Start(const std::vector<DeviceMemory*>& inputs, const std::vector<DeviceMemory*>& outputs,
             const std::vector<std::function<Status()>>& waits, std::function<void(Status)> done) override {
    Holding held(text_);
    inner_->Start(inputs, outputs, waits, std::move(done));
  }
  bool OutputsMayAliasInputs() const override { return inner_->OutputsMayAliasInputs(); }
  StatusOr<std::string> Serialize() const override { return inner_->Serialize(); }

 private:
  std::unique_ptr<Executable> inner_;
  const std::string text_;
};

class NotingExecutor : public Executor {
 public:
  explicit NotingExecutor(std::unique_ptr<Executor> device) : device_(std::move(device)) {}
  std::string name() const override { return device_->name(); }
  StatusOr<std::shared_ptr<DeviceMemory>> Allocate(size_t bytes) override { return device_->Allocate(bytes); }
  StatusOr<std::unique_ptr<Executable>> Compile(const mps::Graph& graph) override {
    std::string text = CrashNoteText(graph);
    StatusOr<std::unique_ptr<Executable>> compiled = [&] {
      Holding held(text);
      return device_->Compile(graph);
    }();
    return Wrap(std::move(compiled), std::move(text));
  }
  StatusOr<std::unique_ptr<Executable>> Load(const mps::Graph& graph, std::string_view serialized) override {
    std::string text = CrashNoteText(graph);
    StatusOr<std::unique_ptr<Executable>> loaded = [&] {
      Holding held(text);
      return device_->Load(graph, serialized);
    }();
    return Wrap(std::move(loaded), std::move(text));
  }
  void AwaitStarted() override { device_->AwaitStarted(); }
  PoolStats MemoryPoolStats() override { return device_->MemoryPoolStats(); }
  size_t TrimMemoryPool() override { return device_->TrimMemoryPool(); }
  int64_t MemoryLimit() override { return device_->MemoryLimit(); }

 private:
  static StatusOr<std::unique_ptr<Executable>> Wrap(StatusOr<std::unique_ptr<Executable>> executable,
                                                    std::string text) {
    if (!executable.ok()) return executable.status();
    return std::unique_ptr<Executable>(
        std::make_unique<NotingExecutable>(std::move(executable).value(), std::move(text)));
  }

  std::unique_ptr<Executor> device_;
};

}  // namespace

std::string CrashNoteText(const mps::Graph& graph) {
  std::set<std::string> pairs;
  CollectPairs(graph, pairs);
  std::string text;
  for (const std::string& p : pairs) text += p + "\n";
  return text;
}

std::unique_ptr<Executor> WithCrashNotes(std::unique_ptr<Executor> device) {
  const char* path = std::getenv("JAX_METAL_CRASH_NOTE");
  if (!device || !path || !*path || std::strlen(path) >= sizeof g_path) return device;
  static std::once_flag installed;
  std::call_once(installed, InstallHandlers, path);
  return std::make_unique<NotingExecutor>(std::move(device));
}

}  // namespace jmp::exec

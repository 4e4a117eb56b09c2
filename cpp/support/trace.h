// What the plugin did, as timed intervals: executions, the segments each ran on its executor, compiles,
// waits, copies and Python callbacks. jax.profiler collects them through the PJRT profiler extension
// (pjrt/profiler_extension.cc), and on a Mac the same intervals can go to os_signpost so that
// Instruments shows them beside the GPU's work. Nothing is recorded, and no string is built, unless a
// trace or the signposts are on: a Scope costs one relaxed atomic load otherwise.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace jmp::trace {

// The rows a trace shows; each interval belongs to one. kCount ends the list.
enum class Line : uint8_t { kExecute, kSegment, kCompile, kWait, kCopy, kCallback, kCount };
const char* LineName(Line line);  // "Execute", "Segment", ...

struct Event {
  Line line = Line::kExecute;
  std::string name;
  int64_t start_ns = 0;  // wall clock (the profiler session's clock), ns since the epoch
  int64_t end_ns = 0;
  std::vector<std::pair<std::string, std::string>> stats;
};

// Where an interval also goes while signposts are on (installed by the Metal side on a Mac): begin is
// called when a Scope opens, end when it closes, with the same id.
using IntervalSink = void (*)(Line line, const char* detail, bool begin, uint64_t id);

namespace internal {
inline std::atomic<bool> g_recording{false};
inline std::atomic<IntervalSink> g_sink{nullptr};
}  // namespace internal

inline bool Enabled() {
  return internal::g_recording.load(std::memory_order_relaxed) ||
         internal::g_sink.load(std::memory_order_relaxed) != nullptr;
}

int64_t NowNs();

// Recording for a profiler session: Start clears what an earlier session left; Take hands over what
// was recorded (and stops recording if still on).
void StartRecording();
void StopRecording();
std::vector<Event> TakeEvents();

// Signposts: the sink, or null to turn them off.
void SetIntervalSink(IntervalSink sink);

// One interval, from construction to destruction. `name` must outlive the scope (a literal).
class Scope {
 public:
  Scope(Line line, const char* name) : line_(line), name_(name) {
    if (Enabled()) Open();
  }
  ~Scope() { Close(); }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

  // Whether this interval is recorded: build stats only then.
  bool on() const { return on_; }
  void Stat(std::string key, std::string value) {
    if (on_) stats_.emplace_back(std::move(key), std::move(value));
  }
  // The name shown in the trace, when it says more than the literal.
  void Rename(std::string name) {
    if (on_) detail_ = std::move(name);
  }
  // Ends the interval before the scope does.
  void Close() {
    if (on_) Finish();
    on_ = false;
  }

 private:
  void Open();
  void Finish();

  Line line_;
  const char* name_;
  bool on_ = false;
  uint64_t id_ = 0;
  int64_t start_ns_ = 0;
  std::string detail_;
  std::vector<std::pair<std::string, std::string>> stats_;
};

// An interval whose start was taken earlier (a queued run's wait in the queue).
void RecordInterval(Line line, std::string name, int64_t start_ns, int64_t end_ns,
                    std::vector<std::pair<std::string, std::string>> stats = {});

}  // namespace jmp::trace

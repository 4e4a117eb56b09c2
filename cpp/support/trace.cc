#include "support/trace.h"

#include <chrono>
#include <mutex>

namespace jmp::trace {

namespace {

std::mutex g_mu;
std::vector<Event> g_events;
std::atomic<uint64_t> g_next_id{1};

// A runaway trace (a profiler left on in a long loop) stops growing here rather than eating memory.
constexpr size_t kMaxEvents = 1 << 20;

void Append(Event e) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (internal::g_recording.load(std::memory_order_relaxed) && g_events.size() < kMaxEvents)
    g_events.push_back(std::move(e));
}

}  // namespace

const char* LineName(Line line) {
  switch (line) {
    case Line::kExecute: return "Execute";
    case Line::kSegment: return "Segment";
    case Line::kCompile: return "Compile";
    case Line::kWait: return "Wait";
    case Line::kCopy: return "Copy";
    case Line::kCallback: return "Callback";
    case Line::kCount: break;
  }
  return "?";
}

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void StartRecording() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_events.clear();
  internal::g_recording.store(true, std::memory_order_relaxed);
}

void StopRecording() { internal::g_recording.store(false, std::memory_order_relaxed); }

std::vector<Event> TakeEvents() {
  std::lock_guard<std::mutex> lock(g_mu);
  internal::g_recording.store(false, std::memory_order_relaxed);
  std::vector<Event> out;
  out.swap(g_events);
  return out;
}

void SetIntervalSink(IntervalSink sink) { internal::g_sink.store(sink, std::memory_order_relaxed); }

void Scope::Open() {
  on_ = true;
  id_ = g_next_id.fetch_add(1, std::memory_order_relaxed);
  start_ns_ = NowNs();
  if (IntervalSink sink = internal::g_sink.load(std::memory_order_relaxed)) sink(line_, name_, true, id_);
}

void Scope::Finish() {
  const int64_t end = NowNs();
  if (IntervalSink sink = internal::g_sink.load(std::memory_order_relaxed))
    sink(line_, detail_.empty() ? name_ : detail_.c_str(), false, id_);
  if (internal::g_recording.load(std::memory_order_relaxed))
    Append(Event{line_, detail_.empty() ? std::string(name_) : std::move(detail_), start_ns_, end, std::move(stats_)});
}

void RecordInterval(Line line, std::string name, int64_t start_ns, int64_t end_ns,
                    std::vector<std::pair<std::string, std::string>> stats) {
  if (!internal::g_recording.load(std::memory_order_relaxed)) return;
  Append(Event{line, std::move(name), start_ns, end_ns, std::move(stats)});
}

}  // namespace jmp::trace

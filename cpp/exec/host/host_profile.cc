#include "exec/host/host_profile.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace jmp::exec::host {

namespace {

struct Totals {
  std::mutex mu;
  std::map<std::string, std::pair<double, long>> by_kind;  // seconds, count

  ~Totals() {
    std::vector<std::pair<std::string, std::pair<double, long>>> rows(by_kind.begin(), by_kind.end());
    std::sort(rows.begin(), rows.end(), [](const auto& x, const auto& y) { return x.second.first > y.second.first; });
    double all = 0;
    for (const auto& r : rows) all += r.second.first;
    std::fprintf(stderr, "jax-metal-plugin host profile: %.3f s in ops\n", all);
    for (const auto& r : rows)
      std::fprintf(stderr, "  %-36s %10.3f ms %6.1f%% %10ld calls\n", r.first.c_str(), r.second.first * 1e3,
                   all > 0 ? 100 * r.second.first / all : 0.0, r.second.second);
  }
};

Totals& GlobalTotals() {
  static Totals* totals = new Totals;  // printed by the atexit hook below, never destroyed twice
  return *totals;
}

void PrintAtExit() { delete &GlobalTotals(); }

}  // namespace

bool ProfilingEnabled() {
  static const bool enabled = [] {
    const char* env = std::getenv("JMP_HOST_PROFILE");
    bool on = env && *env && std::string(env) != "0";
    if (on) {
      GlobalTotals();
      std::atexit(PrintAtExit);
    }
    return on;
  }();
  return enabled;
}

void RecordOpTime(const mps::Op& op, const mps::Graph& graph, std::chrono::nanoseconds elapsed) {
  std::string key(mps::OpKindName(op.kind));
  if (!op.outputs.empty()) key += " " + graph.type(op.outputs[0]).ToString();
  RecordTime(key, elapsed);
}

void RecordTime(const std::string& key, std::chrono::nanoseconds elapsed) {
  Totals& t = GlobalTotals();
  std::lock_guard<std::mutex> lock(t.mu);
  auto& row = t.by_kind[key];
  row.first += std::chrono::duration<double>(elapsed).count();
  row.second += 1;
}

}  // namespace jmp::exec::host

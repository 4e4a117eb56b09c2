// The trace recorder: nothing is kept while it is off, intervals nest and carry their stats while it
// is on, and a signpost sink sees each interval open and close under one id.
#include <string>
#include <vector>

#include "support/trace.h"
#include "unit_tests/unit_test.h"

namespace jmp::unit {
namespace {

struct SinkCall {
  trace::Line line;
  std::string detail;
  bool begin;
  uint64_t id;
};
std::vector<SinkCall>* g_calls = nullptr;

void FakeSink(trace::Line line, const char* detail, bool begin, uint64_t id) {
  if (g_calls) g_calls->push_back({line, detail, begin, id});
}

JMP_TEST(Trace, RecordsOnlyWhileOn) {
  trace::TakeEvents();
  { trace::Scope off(trace::Line::kExecute, "before"); }
  trace::StartRecording();
  {
    trace::Scope outer(trace::Line::kExecute, "execute");
    outer.Rename("main");
    trace::Scope inner(trace::Line::kSegment, "host segment");
    inner.Stat("executor", "host");
  }
  trace::StopRecording();
  { trace::Scope after(trace::Line::kExecute, "after"); }
  std::vector<trace::Event> events = trace::TakeEvents();
  EXPECT_SAME(events.size(), size_t{2});
  if (events.size() != 2) return;
  // The inner scope closes first.
  EXPECT_SAME(events[0].name, std::string("host segment"));
  EXPECT_SAME(events[0].stats.size(), size_t{1});
  EXPECT_SAME(events[1].name, std::string("main"));
  EXPECT_TRUE(events[1].start_ns <= events[0].start_ns && events[0].end_ns <= events[1].end_ns);
  EXPECT_TRUE(!trace::Enabled());
}

JMP_TEST(Trace, SinkSeesEachIntervalOpenAndClose) {
  std::vector<SinkCall> calls;
  g_calls = &calls;
  trace::SetIntervalSink(FakeSink);
  {
    trace::Scope a(trace::Line::kCompile, "compile");
    trace::Scope b(trace::Line::kCallback, "python callback");
    b.Rename("f at x.py:3");
  }
  trace::SetIntervalSink(nullptr);
  { trace::Scope ignored(trace::Line::kCompile, "compile"); }
  g_calls = nullptr;
  EXPECT_SAME(calls.size(), size_t{4});
  if (calls.size() != 4) return;
  EXPECT_TRUE(calls[0].begin && calls[1].begin && !calls[2].begin && !calls[3].begin);
  EXPECT_SAME(calls[1].id, calls[2].id);
  EXPECT_SAME(calls[0].id, calls[3].id);
  EXPECT_TRUE(calls[0].id != calls[1].id);
  EXPECT_SAME(calls[2].detail, std::string("f at x.py:3"));
  EXPECT_TRUE(calls[3].line == trace::Line::kCompile);
}

}  // namespace
}  // namespace jmp::unit

#include "exec/metal/metal_signposts.h"

#include <os/log.h>
#include <os/signpost.h>

#include "support/trace.h"

namespace jmp::exec {

namespace {

os_log_t Log() {
  static os_log_t log = os_log_create("org.jax-metal-plugin", OS_LOG_CATEGORY_POINTS_OF_INTEREST);
  return log;
}

// os_signpost wants its interval name as a literal, so each trace line gets its own pair of calls.
#define JMP_SIGNPOST(literal)                                                 \
  if (begin)                                                                  \
    os_signpost_interval_begin(log, signpost, literal, "%{public}s", detail); \
  else                                                                        \
    os_signpost_interval_end(log, signpost, literal, "%{public}s", detail);   \
  break;

void Interval(trace::Line line, const char* detail, bool begin, uint64_t id) {
  os_log_t log = Log();
  if (!os_signpost_enabled(log)) return;
  const os_signpost_id_t signpost = static_cast<os_signpost_id_t>(id);
  switch (line) {
    case trace::Line::kExecute: JMP_SIGNPOST("Execute")
    case trace::Line::kSegment: JMP_SIGNPOST("Segment")
    case trace::Line::kCompile: JMP_SIGNPOST("Compile")
    case trace::Line::kWait: JMP_SIGNPOST("Wait")
    case trace::Line::kCopy: JMP_SIGNPOST("Copy")
    case trace::Line::kCallback: JMP_SIGNPOST("Callback")
    case trace::Line::kCount: break;
  }
}

#undef JMP_SIGNPOST

}  // namespace

bool SetSignposts(bool on) {
  trace::SetIntervalSink(on ? Interval : nullptr);
  return true;
}

}  // namespace jmp::exec

#include "pjrt/profiler_extension.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <new>

#include "xla/pjrt/c/pjrt_c_api_profiler_extension.h"

// The profiler C API's opaque types, ours to define.
struct PLUGIN_Profiler {
  std::mutex mu;
  std::string collected;  // the XSpace, made on the first CollectData call and copied out on the second
  bool made = false;
};
struct PLUGIN_Profiler_Error {
  int code;
  std::string message;
};

namespace jmp::pjrt {

namespace {

// ---- protobuf wire format (XSpace and its messages are proto3; we only write, never read)
class Writer {
 public:
  void Varint(uint64_t v) {
    while (v >= 0x80) {
      out_.push_back(static_cast<char>((v & 0x7f) | 0x80));
      v >>= 7;
    }
    out_.push_back(static_cast<char>(v));
  }
  void Tag(int field, int wire) { Varint(static_cast<uint64_t>(field) << 3 | static_cast<uint64_t>(wire)); }
  void Int(int field, int64_t v) {
    if (v == 0) return;  // proto3 default
    Tag(field, 0);
    Varint(static_cast<uint64_t>(v));
  }
  void Bytes(int field, const std::string& s) {
    Tag(field, 2);
    Varint(s.size());
    out_ += s;
  }
  void Message(int field, const Writer& w) { Bytes(field, w.out_); }
  const std::string& str() const { return out_; }

 private:
  std::string out_;
};

// XSpace.planes = 1; XPlane: id 1, name 2, lines 3, event_metadata 4, stat_metadata 5, stats 6; XLine: id 1,
// name 2, timestamp_ns 3, events 4, duration_ps 9, display_name 11; XEvent: metadata_id 1, offset_ps 2,
// duration_ps 3, stats 4; XStat: metadata_id 1, str_value 5; XEventMetadata / XStatMetadata: id 1, name 2.
class Interner {
 public:
  int64_t Id(const std::string& name) {
    auto [it, fresh] = ids_.emplace(name, static_cast<int64_t>(ids_.size()) + 1);
    return it->second;
  }
  // map<int64, XEventMetadata or XStatMetadata>: entries of key 1, value 2.
  void WriteMap(Writer& plane, int field) const {
    for (const auto& [name, id] : ids_) {
      Writer value, entry;
      value.Int(1, id);
      value.Bytes(2, name);
      entry.Int(1, id);
      entry.Message(2, value);
      plane.Message(field, entry);
    }
  }

 private:
  std::map<std::string, int64_t> ids_;
};

PLUGIN_Profiler_Error* MakeError(int code, std::string message) {
  return new (std::nothrow) PLUGIN_Profiler_Error{code, std::move(message)};
}

void ErrorDestroy(PLUGIN_Profiler_Error_Destroy_Args* args) {
  if (args) delete args->error;
}

void ErrorMessage(PLUGIN_Profiler_Error_Message_Args* args) {
  if (!args || !args->error) return;
  args->message = args->error->message.data();
  args->message_size = args->error->message.size();
}

PLUGIN_Profiler_Error* ErrorGetCode(PLUGIN_Profiler_Error_GetCode_Args* args) {
  if (!args || !args->error) return MakeError(3, "no error given");
  args->code = args->error->code;
  return nullptr;
}

// The caller may leave every field but `profiler` unset (XLA's tracer does), so no option is read.
PLUGIN_Profiler_Error* Create(PLUGIN_Profiler_Create_Args* args) {
  if (!args) return MakeError(3, "no args");
  args->profiler = new (std::nothrow) PLUGIN_Profiler;
  return args->profiler ? nullptr : MakeError(8, "out of memory");
}

PLUGIN_Profiler_Error* Destroy(PLUGIN_Profiler_Destroy_Args* args) {
  if (args) delete args->profiler;
  return nullptr;
}

PLUGIN_Profiler_Error* Start(PLUGIN_Profiler_Start_Args* args) {
  if (!args || !args->profiler) return MakeError(3, "no profiler");
  std::lock_guard<std::mutex> lock(args->profiler->mu);
  args->profiler->made = false;
  args->profiler->collected.clear();
  trace::StartRecording();
  return nullptr;
}

PLUGIN_Profiler_Error* Stop(PLUGIN_Profiler_Stop_Args* args) {
  if (!args || !args->profiler) return MakeError(3, "no profiler");
  trace::StopRecording();
  return nullptr;
}

PLUGIN_Profiler_Error* CollectData(PLUGIN_Profiler_CollectData_Args* args) {
  if (!args || !args->profiler) return MakeError(3, "no profiler");
  PLUGIN_Profiler& p = *args->profiler;
  std::lock_guard<std::mutex> lock(p.mu);
  if (!p.made) {
    try {
      p.collected = SerializeXSpace(trace::TakeEvents());
    } catch (const std::exception& e) {
      return MakeError(13, std::string("collecting the metal plugin's trace: ") + e.what());
    }
    p.made = true;
  }
  // Two client conventions exist: the header's (a first call with no buffer asks for the size, a second
  // passes a buffer of that size to fill) and one that reads the bytes in place after a single call. A
  // call without a buffer therefore lends ours (valid until the next call or Destroy), which serves both.
  if (args->buffer)
    std::copy(p.collected.begin(), p.collected.end(), args->buffer);
  else
    args->buffer = reinterpret_cast<uint8_t*>(p.collected.data());
  args->buffer_size_in_bytes = p.collected.size();
  return nullptr;
}

}  // namespace

std::string SerializeXSpace(const std::vector<trace::Event>& events) {
  if (events.empty()) return {};
  Interner event_names, stat_names;
  const int64_t kDeviceStat = stat_names.Id("device");
  Writer plane;
  plane.Int(1, 0);
  plane.Bytes(2, "/device:CUSTOM:0");
  for (int l = 0; l < static_cast<int>(trace::Line::kCount); ++l) {
    const auto line = static_cast<trace::Line>(l);
    int64_t first = INT64_MAX, last = INT64_MIN;
    for (const trace::Event& e : events)
      if (e.line == line) first = std::min(first, e.start_ns), last = std::max(last, e.end_ns);
    if (first == INT64_MAX) continue;
    Writer xline;
    xline.Int(1, l + 1);
    xline.Bytes(2, trace::LineName(line));
    xline.Int(3, first);
    for (const trace::Event& e : events) {
      if (e.line != line) continue;
      Writer xevent;
      xevent.Int(1, event_names.Id(e.name));
      xevent.Int(2, (e.start_ns - first) * 1000);
      xevent.Int(3, std::max<int64_t>(e.end_ns - e.start_ns, 0) * 1000);
      for (const auto& [key, value] : e.stats) {
        Writer stat;
        stat.Int(1, stat_names.Id(key));
        stat.Bytes(5, value);
        xevent.Message(4, stat);
      }
      xline.Message(4, xevent);
    }
    xline.Int(9, (last - first) * 1000);
    xline.Bytes(11, std::string("metal ") + trace::LineName(line));
    plane.Message(3, xline);
  }
  event_names.WriteMap(plane, 4);
  stat_names.WriteMap(plane, 5);
  Writer device;
  device.Int(1, kDeviceStat);
  device.Bytes(5, "metal");
  plane.Message(6, device);
  Writer space;
  space.Message(1, plane);
  return space.str();
}

PJRT_Extension_Base* ProfilerExtension() {
  static PLUGIN_Profiler_Api api = [] {
    PLUGIN_Profiler_Api a{};
    a.struct_size = PLUGIN_Profiler_Api_STRUCT_SIZE;
    a.error_destroy = ErrorDestroy;
    a.error_message = ErrorMessage;
    a.error_get_code = ErrorGetCode;
    a.create = Create;
    a.destroy = Destroy;
    a.start = Start;
    a.stop = Stop;
    a.collect_data = CollectData;
    return a;
  }();
  static PJRT_Profiler_Extension extension = [] {
    PJRT_Profiler_Extension e{};
    e.base.struct_size = PJRT_Profiler_Extension_STRUCT_SIZE;
    e.base.type = PJRT_Extension_Type_Profiler;
    e.base.next = nullptr;
    e.profiler_api = &api;
    return e;
  }();
  return &extension.base;
}

}  // namespace jmp::pjrt

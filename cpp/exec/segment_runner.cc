// The segment runner: one executable made of Metal and host segments (exec/placement.h), run in order over
// the same memory. It sits above both executors and sees them only as Executors: memory comes from the
// device executor (shared-storage MTLBuffers on a Mac, which the host reads and writes in place), and
// each segment is compiled by its own executor. Device segments are started without waiting (the device
// runs its work in order); a host segment starts once the device work it reads (or whose memory it
// writes) has completed, and no byte is copied between segments.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "exec/device_queue.h"
#include "exec/executor.h"
#include "exec/placement.h"
#include "exec/work_counters.h"
#include "mps/graph_serial.h"
#include "support/byte_stream.h"
#include "support/trace.h"

namespace jmp::exec {

namespace {

std::atomic<int64_t> g_staged_outputs{0};

// Where a segment's parameters and results live during a run: the executable's inputs, its outputs,
// or memory for values only later segments read.
struct Slot {
  enum Kind : uint8_t { kInput, kOutput, kTemporary } kind;
  size_t index;
  bool operator==(const Slot& o) const { return kind == o.kind && index == o.index; }
};

// What a trace says of a segment: its executor and the MPS ops it runs ("MatMul x2, Add").
struct SegmentLabel {
  const char* name = "segment";
  std::string executor, ops;

  SegmentLabel() = default;
  SegmentLabel(mps::Where where, const mps::Graph& graph)
      : name(where == mps::Where::kMetal ? "metal segment" : "host segment"), executor(mps::WhereName(where)) {
    std::map<std::string_view, int> count;
    for (const mps::Op& op : graph.ops) ++count[mps::OpKindName(op.kind)];
    for (const auto& [kind, n] : count)
      ops += (ops.empty() ? "" : ", ") + std::string(kind) + (n > 1 ? " x" + std::to_string(n) : "");
  }

  // Runs `run` inside an interval named after the segment.
  template <typename F>
  Status Traced(F&& run) const {
    trace::Scope scope(trace::Line::kSegment, name);
    if (scope.on()) {
      scope.Stat("executor", executor);
      scope.Stat("ops", ops);
    }
    return run();
  }

  // `done`, recording the interval from now until it is called while a trace is on (device work that
  // completes later, on the device's completion thread).
  std::function<void(Status)> TracedDone(std::function<void(Status)> done) const {
    if (!trace::Enabled()) return done;
    const int64_t start = trace::NowNs();
    return [this, start, done = std::move(done)](Status s) {
      trace::RecordInterval(trace::Line::kSegment, name, start, trace::NowNs(), {{"executor", executor}, {"ops", ops}});
      done(std::move(s));
    };
  }
};

struct CompiledSegment {
  std::unique_ptr<Executable> executable;
  std::vector<Slot> reads;   // per segment parameter
  std::vector<Slot> writes;  // per segment result
  SegmentLabel label;
  bool waits_for_device = false;  // a host segment right after a Metal one: the host waits for the GPU
  bool on_device = false;         // started on the device's queue; may finish after Start returns
  // A host segment: how many of the run's device segments must be done before it starts (those that write
  // what it reads, or read or write what it writes), and whether it writes outputs (which may be the
  // memory of donated inputs that earlier device work still reads).
  int device_before = 0;
  bool writes_outputs = false;
};

// The serialized form of a placed program: which placement its segments' bytes were made for (the
// executors and graphs of its segments, which JAX_METAL_AVOID and the plugin build decide as much as the
// program does) and each segment's bytes. Bytes made for another placement are not loaded: the program is
// compiled again.
constexpr uint64_t kSegmentsMagic = 0x3153474553504d4aull;  // "JMPSEGS1"

uint64_t PlacementFingerprint(const mps::Placement& placement) {
  ByteWriter w;
  for (const mps::Segment& seg : placement.segments) {
    w.U64(seg.where == mps::Where::kMetal ? 1 : 2);
    mps::WriteGraph(seg.graph, w);
  }
  return Fnv1a(w.str());
}

StatusOr<std::string> SerializeSegments(uint64_t placement, const std::vector<const Executable*>& segments) {
  ByteWriter out;
  out.U64(kSegmentsMagic);
  out.U64(placement);
  out.U64(segments.size());
  for (const Executable* seg : segments) {
    JMP_ASSIGN_OR_RETURN(std::string bytes, seg->Serialize());
    out.Bytes(bytes);
  }
  return std::move(out.str());
}

// Each segment's bytes, or an error where they were made for another placement (or are malformed).
StatusOr<std::vector<std::string_view>> SegmentBytes(std::string_view serialized, const mps::Placement& placement) {
  ByteReader in(reinterpret_cast<const uint8_t*>(serialized.data()), serialized.size(), "serialized executable");
  JMP_ASSIGN_OR_RETURN(uint64_t magic, in.U64());
  if (magic != kSegmentsMagic) return in.Malformed("not a placed program");
  JMP_ASSIGN_OR_RETURN(uint64_t fingerprint, in.U64());
  if (fingerprint != PlacementFingerprint(placement)) return in.Malformed("made for another placement");
  JMP_ASSIGN_OR_RETURN(size_t n, in.Count(8));
  if (n != placement.segments.size()) return in.Malformed("its segments are not those of its graph");
  std::vector<std::string_view> parts;
  for (size_t s = 0; s < n; ++s) {
    JMP_ASSIGN_OR_RETURN(std::string_view part, in.Bytes());
    parts.push_back(part);
  }
  if (in.left() != 0) return in.Malformed("bytes after the last segment");
  return parts;
}

// A program placement left whole: the executor's executable, inside the same interval a segment gets.
class SingleSegmentExecutable : public Executable {
 public:
  SingleSegmentExecutable(std::unique_ptr<Executable> executable, SegmentLabel label, uint64_t placement)
      : executable_(std::move(executable)), label_(std::move(label)), placement_(placement) {
    device_graphs_per_run = executable_->device_graphs_per_run;
  }
  StatusOr<std::string> Serialize() const override { return SerializeSegments(placement_, {executable_.get()}); }
  Status Run(const std::vector<DeviceMemory*>& inputs, const std::vector<DeviceMemory*>& outputs) override {
    return label_.Traced([&] { return executable_->Run(inputs, outputs); });
  }
  void Start(const std::vector<DeviceMemory*>& inputs, const std::vector<DeviceMemory*>& outputs,
             const std::vector<std::function<Status()>>& waits, std::function<void(Status)> done) override {
    executable_->Start(inputs, outputs, waits, label_.TracedDone(std::move(done)));
  }
  bool OutputsMayAliasInputs() const override { return executable_->OutputsMayAliasInputs(); }

 private:
  std::unique_ptr<Executable> executable_;
  SegmentLabel label_;
  uint64_t placement_;
};

// One run in flight: the memory it made for itself and what is left to finish.
struct RunState {
  std::vector<std::shared_ptr<DeviceMemory>> temporaries;
  std::vector<std::pair<size_t, std::shared_ptr<DeviceMemory>>> staged;
  std::vector<DeviceMemory*> outputs;
  std::function<void(Status)> done;
  std::mutex mu;
  std::condition_variable cv;
  int device_done = 0;  // device segments completed (a device completes them in order)
  Status status;
  std::atomic<int> pending{1};  // device segments in flight, plus the thread starting the run

  void Record(const Status& s) {
    if (s.ok()) return;
    std::lock_guard<std::mutex> lock(mu);
    if (status.ok()) status = s;
  }
  Status Current() {
    std::lock_guard<std::mutex> lock(mu);
    return status;
  }
  void DeviceDone(const Status& s) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (status.ok() && !s.ok()) status = s;
      ++device_done;
    }
    Release();
    // Waiters in AwaitDevice and AwaitReleased (the starting thread, whose hold keeps this Release from
    // being the last): taking the lock first, a waiter is either waiting or sees the new counts.
    { std::lock_guard<std::mutex> lock(mu); }
    cv.notify_all();
  }
  void AwaitDevice(int count) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return device_done >= count; });
  }
  // Until every device segment started has finished and let go (the starting thread's hold remains).
  void AwaitReleased() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return pending.load(std::memory_order_acquire) == 1; });
  }
  // The last one out copies staged outputs over their donated inputs (every segment has read them by
  // now) and reports the run.
  void Release() {
    if (pending.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    Status s = Current();
    if (s.ok())
      for (auto& [j, m] : staged) {
        if (m->size()) std::memcpy(outputs[j]->data(), m->data(), m->size());
        g_staged_outputs.fetch_add(1, std::memory_order_relaxed);
      }
    auto finish = std::move(done);
    finish(s);
  }
};

class SegmentedExecutable : public Executable {
 public:
  SegmentedExecutable(Executor& device, std::vector<CompiledSegment> segments, std::vector<size_t> temporary_bytes,
                      std::vector<int> output_writer, std::vector<int> input_last_reader)
      : device_(device),
        segments_(std::move(segments)),
        temporary_bytes_(std::move(temporary_bytes)),
        output_writer_(std::move(output_writer)),
        input_last_reader_(std::move(input_last_reader)) {}

  Status Run(const std::vector<DeviceMemory*>& inputs, const std::vector<DeviceMemory*>& outputs) override {
    return StartAndWait(*this, inputs, outputs);
  }

  // Device segments are started one after the other without waiting (the device runs them in order);
  // a host segment runs here once the device work it depends on is done, and the inputs it touches are
  // written. The run is done when its last device segment is.
  void Start(const std::vector<DeviceMemory*>& inputs, const std::vector<DeviceMemory*>& outputs,
             const std::vector<std::function<Status()>>& waits, std::function<void(Status)> done) override {
    auto run = std::make_shared<RunState>();
    run->done = std::move(done);
    run->outputs = outputs;
    Status setup = Prepare(*run, inputs, outputs);
    if (!setup.ok()) {
      run->Record(setup);
      return run->Release();
    }
    // A donated input reused as output j must not be overwritten while a later segment still reads it:
    // then output j is made in memory of its own and copied over the input at the end (counted; the
    // placement keeps this rare, since outputs are mostly written by the last segments).
    std::vector<DeviceMemory*> out(outputs);
    for (auto& [j, m] : run->staged) out[j] = m.get();
    bool outputs_alias_inputs = false;
    for (size_t j = 0; j < outputs.size() && !outputs_alias_inputs; ++j)
      for (size_t i = 0; i < inputs.size(); ++i)
        if (out[j] == inputs[i]) outputs_alias_inputs = true;
    auto memory = [&](const Slot& s) -> DeviceMemory* {
      switch (s.kind) {
        case Slot::kInput: return inputs[s.index];
        case Slot::kOutput: return out[s.index];
        case Slot::kTemporary: return run->temporaries[s.index].get();
      }
      return nullptr;
    };
    std::vector<bool> waited(inputs.size(), waits.empty());
    auto await_input = [&](size_t i) {
      if (waited[i]) return;
      waited[i] = true;
      if (i < waits.size() && waits[i]) run->Record(waits[i]());
    };
    std::vector<DeviceMemory*> in_list, out_list;
    for (const CompiledSegment& seg : segments_) {
      in_list.clear();
      out_list.clear();
      for (const Slot& s : seg.reads) in_list.push_back(memory(s));
      for (const Slot& s : seg.writes) out_list.push_back(memory(s));
      if (seg.on_device) {
        if (!run->Current().ok()) continue;
        run->pending.fetch_add(1, std::memory_order_relaxed);
        seg.executable->Start(in_list, out_list, {}, seg.label.TracedDone([run](Status s) { run->DeviceDone(s); }));
        continue;
      }
      {
        trace::Scope sync(trace::Line::kWait, "device work");
        run->AwaitDevice(seg.device_before);
        for (const Slot& s : seg.reads)
          if (s.kind == Slot::kInput) await_input(s.index);
        if (seg.writes_outputs && outputs_alias_inputs) {
          // Writing over a donated input: earlier runs' device work that reads it must be done, and so
          // must the input's own producer.
          for (size_t i = 0; i < inputs.size(); ++i) await_input(i);
          device_.AwaitStarted();
        }
      }
      if (!run->Current().ok()) continue;
      if (seg.waits_for_device) Counters().syncs.fetch_add(1, std::memory_order_relaxed);
      run->Record(seg.label.Traced([&] { return seg.executable->Run(in_list, out_list); }));
    }
    if (!run->staged.empty()) {
      // The staged outputs are copied by the CPU once the device is done. A device runs the next
      // run's command buffers as soon as they are committed, without waiting for this run's completion
      // handlers, so a later run reading such an output could read the input's old bytes: the copies
      // are made before this returns, and before any later run is started.
      trace::Scope sync(trace::Line::kWait, "staged outputs");
      run->AwaitReleased();
    }
    run->Release();
  }

  bool OutputsMayAliasInputs() const override {
    for (const CompiledSegment& seg : segments_)
      if (!seg.executable->OutputsMayAliasInputs()) return false;
    return true;
  }

  StatusOr<std::string> Serialize() const override {
    std::vector<const Executable*> parts;
    for (const CompiledSegment& seg : segments_) parts.push_back(seg.executable.get());
    return SerializeSegments(placement_, parts);
  }
  uint64_t placement_ = 0;

 private:
  Status Prepare(RunState& run, const std::vector<DeviceMemory*>& inputs, const std::vector<DeviceMemory*>& outputs) {
    run.temporaries.reserve(temporary_bytes_.size());
    for (size_t bytes : temporary_bytes_) {
      JMP_ASSIGN_OR_RETURN(auto m, device_.Allocate(bytes));
      run.temporaries.push_back(std::move(m));
    }
    for (size_t j = 0; j < outputs.size(); ++j)
      for (size_t i = 0; i < inputs.size(); ++i)
        if (outputs[j] == inputs[i] && output_writer_[j] < input_last_reader_[i]) {
          JMP_ASSIGN_OR_RETURN(auto m, device_.Allocate(outputs[j]->size()));
          run.staged.emplace_back(j, std::move(m));
          break;
        }
    return Status::Ok();
  }

  Executor& device_;
  std::vector<CompiledSegment> segments_;
  std::vector<size_t> temporary_bytes_;
  std::vector<int> output_writer_;      // per output: the segment that writes it
  std::vector<int> input_last_reader_;  // per input: the last segment that reads it, or -1
};

// For each host segment, how many device segments before it it depends on (see CompiledSegment).
void OrderHostSegments(std::vector<CompiledSegment>& segments) {
  auto touches = [](const std::vector<Slot>& a, const std::vector<Slot>& b) {
    for (const Slot& x : a)
      for (const Slot& y : b)
        if (x == y) return true;
    return false;
  };
  auto any_of_kind = [](const std::vector<Slot>& a, Slot::Kind k) {
    for (const Slot& x : a)
      if (x.kind == k) return true;
    return false;
  };
  for (size_t s = 0; s < segments.size(); ++s) {
    CompiledSegment& host = segments[s];
    if (host.on_device) continue;
    host.writes_outputs = any_of_kind(host.writes, Slot::kOutput);
    int ordinal = 0;
    for (size_t d = 0; d < s; ++d) {
      const CompiledSegment& dev = segments[d];
      if (!dev.on_device) continue;
      ++ordinal;
      if (touches(dev.writes, host.reads) || touches(dev.writes, host.writes) || touches(dev.reads, host.writes) ||
          (host.writes_outputs && any_of_kind(dev.reads, Slot::kInput)))
        host.device_before = ordinal;
    }
  }
}

class SegmentedExecutor : public Executor {
 public:
  SegmentedExecutor(std::unique_ptr<Executor> device, std::unique_ptr<Executor> host)
      : device_(std::move(device)), host_(std::move(host)) {}

  std::string name() const override { return device_->name(); }

  StatusOr<std::shared_ptr<DeviceMemory>> Allocate(size_t bytes) override { return device_->Allocate(bytes); }
  void AwaitStarted() override { device_->AwaitStarted(); }
  PoolStats MemoryPoolStats() override { return device_->MemoryPoolStats(); }
  size_t TrimMemoryPool() override { return device_->TrimMemoryPool(); }
  int64_t MemoryLimit() override { return device_->MemoryLimit(); }

  StatusOr<std::unique_ptr<Executable>> Compile(const mps::Graph& graph) override { return Build(graph, nullptr); }

  // The placement is a function of the graph, so the segments are those the bytes were made from: one
  // segment's bytes are its executable's own, several are a list.
  StatusOr<std::unique_ptr<Executable>> Load(const mps::Graph& graph, std::string_view serialized) override {
    return Build(graph, &serialized);
  }

 private:
  StatusOr<std::unique_ptr<Executable>> Build(const mps::Graph& graph, const std::string_view* serialized) {
    mps::Placement placement = mps::PlaceGraph(graph);
    const uint64_t fingerprint = PlacementFingerprint(placement);
    std::vector<std::string_view> parts;
    if (serialized) {
      auto read = SegmentBytes(*serialized, placement);
      if (!read.ok())
        serialized = nullptr;  // bytes of another placement: compile what this one is
      else
        parts = std::move(*read);
    }
    auto compile = [&](size_t s, const mps::Graph& g) {
      Executor& executor = For(placement.segments[s].where);
      return serialized ? executor.Load(g, parts[s]) : executor.Compile(g);
    };
    if (placement.segments.size() == 1) {
      const mps::Where where = placement.segments[0].where;
      JMP_ASSIGN_OR_RETURN(std::unique_ptr<Executable> only, compile(0, graph));
      only->device_graphs_per_run = where == mps::Where::kMetal ? 1 : 0;
      return std::unique_ptr<Executable>(
          new SingleSegmentExecutable(std::move(only), SegmentLabel(where, graph), fingerprint));
    }

    // Every outer value a segment reads or writes gets one slot: a parameter, the first output that
    // returns it, or a temporary.
    std::vector<Slot> slot_of(graph.values.size(), Slot{Slot::kTemporary, SIZE_MAX});
    for (size_t i = 0; i < graph.inputs.size(); ++i) slot_of[static_cast<size_t>(graph.inputs[i])] = {Slot::kInput, i};
    std::vector<size_t> temporary_bytes;
    std::vector<int> output_writer(graph.outputs.size(), -1);
    std::vector<int> input_last_reader(graph.inputs.size(), -1);
    std::vector<CompiledSegment> compiled;
    int device_graphs = 0;
    for (size_t s = 0; s < placement.segments.size(); ++s) {
      const mps::Segment& seg = placement.segments[s];
      CompiledSegment c;
      JMP_ASSIGN_OR_RETURN(c.executable, compile(s, seg.graph));
      c.label = SegmentLabel(seg.where, seg.graph);
      c.on_device = seg.where == mps::Where::kMetal;
      c.waits_for_device =
          seg.where != mps::Where::kMetal && s > 0 && placement.segments[s - 1].where == mps::Where::kMetal;
      if (seg.where == mps::Where::kMetal) ++device_graphs;
      for (int v : seg.inputs) {
        Slot slot = slot_of[static_cast<size_t>(v)];
        if (slot.index == SIZE_MAX) return Internal("placement: a segment reads a value no earlier segment makes");
        if (slot.kind == Slot::kInput) input_last_reader[slot.index] = static_cast<int>(s);
        c.reads.push_back(slot);
      }
      // Results the executable returns go straight to its outputs; values only later segments read get
      // temporaries.
      for (size_t k = 0; k < seg.outputs.size(); ++k) {
        const int v = seg.outputs[k], j = seg.returns[k];
        const Slot slot =
            j >= 0 ? Slot{Slot::kOutput, static_cast<size_t>(j)} : Slot{Slot::kTemporary, temporary_bytes.size()};
        if (j >= 0)
          output_writer[static_cast<size_t>(j)] = static_cast<int>(s);
        else
          temporary_bytes.push_back(graph.type(v).ByteSize());
        // Later segments read the value where it was first written (its first output, since results
        // come first); a parameter returned as it is stays read from the parameter.
        Slot& home = slot_of[static_cast<size_t>(v)];
        if (home.index == SIZE_MAX) home = slot;
        c.writes.push_back(slot);
      }
      compiled.push_back(std::move(c));
    }
    for (size_t j = 0; j < output_writer.size(); ++j)
      if (output_writer[j] < 0) return Internal("placement: output " + std::to_string(j) + " is never written");
    OrderHostSegments(compiled);
    auto executable = std::make_unique<SegmentedExecutable>(*device_, std::move(compiled), std::move(temporary_bytes),
                                                            std::move(output_writer), std::move(input_last_reader));
    executable->device_graphs_per_run = device_graphs;
    executable->placement_ = fingerprint;
    return std::unique_ptr<Executable>(std::move(executable));
  }

  Executor& For(mps::Where where) { return where == mps::Where::kMetal ? *device_ : *host_; }

  std::unique_ptr<Executor> device_;
  std::unique_ptr<Executor> host_;
};

}  // namespace

std::unique_ptr<Executor> CreateSegmentedExecutor(std::unique_ptr<Executor> device, std::unique_ptr<Executor> host) {
  return std::make_unique<SegmentedExecutor>(std::move(device), std::move(host));
}

int64_t StagedOutputCount() { return g_staged_outputs.load(std::memory_order_relaxed); }

}  // namespace jmp::exec

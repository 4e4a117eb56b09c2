// The segment runner: one executable made of Metal and host segments (exec/placement.h), run in order over
// the same memory. It sits above both executors and sees them only as Executors: memory comes from the
// device executor (shared-storage MTLBuffers on a Mac, which the host reads and writes in place), and
// each segment is compiled by its own executor. Metal runs are synchronous, so a host segment starts
// after the GPU work it reads has completed, and no byte is copied between segments.
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "exec/executor.h"
#include "exec/placement.h"
#include "exec/work_counters.h"
#include "support/byte_stream.h"

namespace jmp::exec {

namespace {

std::atomic<int64_t> g_staged_outputs{0};

// Where a segment's parameters and results live during a run: the executable's inputs, its outputs,
// or memory for values only later segments read.
struct Slot {
  enum Kind : uint8_t { kInput, kOutput, kTemporary } kind;
  size_t index;
};

struct CompiledSegment {
  std::unique_ptr<Executable> executable;
  std::vector<Slot> reads;        // per segment parameter
  std::vector<Slot> writes;       // per segment result
  bool waits_for_device = false;  // a host segment right after a Metal one: the host waits for the GPU
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
    std::vector<std::shared_ptr<DeviceMemory>> temporaries;
    temporaries.reserve(temporary_bytes_.size());
    for (size_t bytes : temporary_bytes_) {
      JMP_ASSIGN_OR_RETURN(auto m, device_.Allocate(bytes));
      temporaries.push_back(std::move(m));
    }
    // A donated input reused as output j must not be overwritten while a later segment still reads it:
    // then output j is made in memory of its own and copied over the input at the end (counted; the
    // placement keeps this rare, since outputs are mostly written by the last segments).
    std::vector<DeviceMemory*> out(outputs);
    std::vector<std::pair<size_t, std::shared_ptr<DeviceMemory>>> staged;
    for (size_t j = 0; j < outputs.size(); ++j)
      for (size_t i = 0; i < inputs.size(); ++i)
        if (outputs[j] == inputs[i] && output_writer_[j] < input_last_reader_[i]) {
          JMP_ASSIGN_OR_RETURN(auto m, device_.Allocate(outputs[j]->size()));
          out[j] = m.get();
          staged.emplace_back(j, std::move(m));
          break;
        }
    auto memory = [&](const Slot& s) -> DeviceMemory* {
      switch (s.kind) {
        case Slot::kInput: return inputs[s.index];
        case Slot::kOutput: return out[s.index];
        case Slot::kTemporary: return temporaries[s.index].get();
      }
      return nullptr;
    };
    std::vector<DeviceMemory*> in_list, out_list;
    for (const CompiledSegment& seg : segments_) {
      in_list.clear();
      out_list.clear();
      for (const Slot& s : seg.reads) in_list.push_back(memory(s));
      for (const Slot& s : seg.writes) out_list.push_back(memory(s));
      if (seg.waits_for_device) Counters().syncs.fetch_add(1, std::memory_order_relaxed);
      JMP_RETURN_IF_ERROR(seg.executable->Run(in_list, out_list));
    }
    for (auto& [j, m] : staged) {
      if (m->size()) std::memcpy(outputs[j]->data(), m->data(), m->size());
      g_staged_outputs.fetch_add(1, std::memory_order_relaxed);
    }
    return Status::Ok();
  }

  bool OutputsMayAliasInputs() const override {
    for (const CompiledSegment& seg : segments_)
      if (!seg.executable->OutputsMayAliasInputs()) return false;
    return true;
  }

  // Each segment's own bytes, in order.
  StatusOr<std::string> Serialize() const override {
    ByteWriter out;
    out.U64(segments_.size());
    for (const CompiledSegment& seg : segments_) {
      JMP_ASSIGN_OR_RETURN(std::string bytes, seg.executable->Serialize());
      out.Bytes(bytes);
    }
    return std::move(out.str());
  }

 private:
  Executor& device_;
  std::vector<CompiledSegment> segments_;
  std::vector<size_t> temporary_bytes_;
  std::vector<int> output_writer_;      // per output: the segment that writes it
  std::vector<int> input_last_reader_;  // per input: the last segment that reads it, or -1
};

class SegmentedExecutor : public Executor {
 public:
  SegmentedExecutor(std::unique_ptr<Executor> device, std::unique_ptr<Executor> host)
      : device_(std::move(device)), host_(std::move(host)) {}

  std::string name() const override { return device_->name(); }

  StatusOr<std::shared_ptr<DeviceMemory>> Allocate(size_t bytes) override { return device_->Allocate(bytes); }

  StatusOr<std::unique_ptr<Executable>> Compile(const mps::Graph& graph) override { return Build(graph, nullptr); }

  // The placement is a function of the graph, so the segments are those the bytes were made from: one
  // segment's bytes are its executable's own, several are a list.
  StatusOr<std::unique_ptr<Executable>> Load(const mps::Graph& graph, std::string_view serialized) override {
    return Build(graph, &serialized);
  }

 private:
  StatusOr<std::unique_ptr<Executable>> Build(const mps::Graph& graph, const std::string_view* serialized) {
    mps::Placement placement = mps::PlaceGraph(graph);
    std::vector<std::string_view> parts;
    if (serialized && placement.segments.size() == 1) {
      parts.push_back(*serialized);
    } else if (serialized) {
      ByteReader in(reinterpret_cast<const uint8_t*>(serialized->data()), serialized->size(), "serialized executable");
      JMP_ASSIGN_OR_RETURN(size_t n, in.Count(8));
      if (n != placement.segments.size()) return in.Malformed("its segments are not those of its graph");
      for (size_t s = 0; s < n; ++s) {
        JMP_ASSIGN_OR_RETURN(std::string_view part, in.Bytes());
        parts.push_back(part);
      }
      if (in.left() != 0) return in.Malformed("bytes after the last segment");
    }
    auto compile = [&](size_t s, const mps::Graph& g) {
      Executor& executor = For(placement.segments[s].where);
      return serialized ? executor.Load(g, parts[s]) : executor.Compile(g);
    };
    if (placement.segments.size() == 1) {
      JMP_ASSIGN_OR_RETURN(std::unique_ptr<Executable> only, compile(0, graph));
      only->device_graphs_per_run = placement.segments[0].where == mps::Where::kMetal ? 1 : 0;
      return only;
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
    auto executable =
        std::unique_ptr<Executable>(new SegmentedExecutable(*device_, std::move(compiled), std::move(temporary_bytes),
                                                            std::move(output_writer), std::move(input_last_reader)));
    executable->device_graphs_per_run = device_graphs;
    return executable;
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

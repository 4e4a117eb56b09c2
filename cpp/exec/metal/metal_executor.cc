// The Metal executor's logic, portable: the graph of a segment is built (metal_graph_builder.cc) and
// compiled once; each run binds the buffers in the order the executable takes them, encodes into a command
// buffer, commits without waiting and reports completion from the GPU's handlers. Which calls it makes
// lives here; metal_api.h's implementations only carry them out.
#include "exec/metal/metal_executor.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "exec/block_pool.h"
#include "exec/device_queue.h"
#include "exec/metal/metal_graph_builder.h"
#include "exec/metal/metal_kernel.h"
#include "exec/package_archive.h"
#include "mps/graph_serial.h"
#include "support/byte_stream.h"

namespace jmp::exec {

namespace {

// A failed command buffer's error, its code kept: running out of memory in a host segment stays
// RESOURCE_EXHAUSTED for the caller, as on XLA:CPU, instead of becoming an internal error.
Status CommandBufferStatus(const Status& s) {
  return s.ok() ? s : Status(s.code(), "Metal command buffer failed: " + s.message());
}

using metal::Tensor;
using metal::Tensors;

// A block of the device pool: a shared-storage buffer and the tensor-data views executables made of it (a
// view per executable's input or output position), kept with the buffer and released with it, so that a
// run over reused buffers creates no new objects.
struct MetalBlock {
  std::unique_ptr<metal::Buffer> buffer;
  std::mutex mu;
  std::unordered_map<uint64_t, std::shared_ptr<metal::TensorData>> views;
};

class MetalPool : public BlockPool::Backend {
 public:
  explicit MetalPool(std::shared_ptr<metal::Device> device) : device_(std::move(device)) {}
  void* Allocate(size_t bytes) override {
    std::unique_ptr<metal::Buffer> buffer = device_->newBufferWithLength(bytes);
    if (!buffer) return nullptr;
    auto* block = new MetalBlock;
    block->buffer = std::move(buffer);
    return block;
  }
  void Release(void* block, size_t) override { delete static_cast<MetalBlock*>(block); }
  BlockPool& pool() { return pool_; }

 private:
  std::shared_ptr<metal::Device> device_;
  BlockPool pool_{this, size_t{1} << 30};
};

class MetalMemory : public DeviceMemory {
 public:
  MetalMemory(std::shared_ptr<MetalPool> pool, size_t size)
      : pool_(std::move(pool)), size_(size), cls_(BlockPool::SizeClass(size)) {
    block_ = static_cast<MetalBlock*>(pool_->pool().Take(cls_));
  }
  ~MetalMemory() override {
    if (block_) pool_->pool().Give(block_, cls_);
  }
  bool ok() const { return block_ != nullptr; }
  void* data() override { return block_->buffer->contents(); }
  size_t size() const override { return size_; }
  metal::Buffer& buffer() const { return *block_->buffer; }
  MetalBlock* block() const { return block_; }

 private:
  std::shared_ptr<MetalPool> pool_;
  MetalBlock* block_ = nullptr;
  size_t size_, cls_;
};

std::atomic<uint64_t> g_next_executable_id{1};

// A graph's identity for its package: a package compiled for another segment graph (another placement,
// JAX_METAL_AVOID, plugin build) is never loaded for this one.
uint64_t GraphFingerprint(const mps::Graph& g) {
  ByteWriter w;
  mps::WriteGraph(g, w);
  return Fnv1a(w.str());
}

// The serialized form: the graph's fingerprint, the order the package's executable takes its inputs and
// gives its results (as our parameter and result indices), and the packed package with its checksum.
constexpr uint64_t kPackageMagic = 0x4d504b4731504d4aull;  // "JMP1GKPM"

// What a run waits for: the last command buffer its work went into (the encode may have committed earlier
// ones, and the donated outputs' copies follow the graph) completes after every earlier one, in queue
// order; the executable's own completion reports an error from any of them. ASSUMPTION: MPSGraph reports
// the execution's completion from a handler it adds to that last buffer while encoding, so before the one
// added after the encode; a report that comes later than that cannot delay or fail the run.
class RunCompletion {
 public:
  RunCompletion(std::function<void(Status)> done, std::shared_ptr<StartedWork> work,
                std::vector<std::shared_ptr<DeviceMemory>> held)
      : done_(std::move(done)), work_(std::move(work)), held_(std::move(held)) {}
  void Executed(Status s) {
    std::lock_guard<std::mutex> lock(mu_);
    if (executed_.ok()) executed_ = std::move(s);
  }
  void Completed(Status s) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (s.ok()) s = executed_;
    }
    held_.clear();
    work_->End();
    done_(std::move(s));
  }

 private:
  std::mutex mu_;
  Status executed_;
  std::function<void(Status)> done_;
  std::shared_ptr<StartedWork> work_;
  std::vector<std::shared_ptr<DeviceMemory>> held_;
};

class MetalExecutable : public Executable {
 public:
  MetalExecutable(std::shared_ptr<metal::Device> device, std::shared_ptr<metal::CommandQueue> queue,
                  std::shared_ptr<MetalPool> pool, std::shared_ptr<StartedWork> work, const mps::Graph& g)
      : device_(std::move(device)),
        queue_(std::move(queue)),
        pool_(std::move(pool)),
        work_(std::move(work)),
        graph_(g) {}

  Status Build() {
    JMP_RETURN_IF_ERROR(DescribeTypes());
    graph_object_ = device_->newGraph();
    metal::Graph& graph = *graph_object_;
    // A zero-element parameter gets no placeholder (MPSGraph takes no empty tensor); placement keeps every
    // op that reads one on the host, so it is one no Metal op reads.
    Tensors params;
    std::vector<std::pair<Tensor*, metal::ShapedType>> feeds;
    for (size_t i = 0; i < graph_.inputs.size(); ++i) {
      if (graph_.type(graph_.inputs[i]).NumElements() == 0) {
        params.push_back(nullptr);
        continue;
      }
      Tensor* p = graph.placeholderWithShape(input_types_[i].shape, input_types_[i].dataType);
      params.push_back(p);
      feeds.emplace_back(p, input_types_[i]);
    }
    Status mismatch;
    JMP_ASSIGN_OR_RETURN(Tensors outputs, metal::BuildGraph(graph, graph_, params, &mismatch));
    // Results are tensors of their own: an input or a repeated value gets an identity, so that each
    // target is one result position.
    // A zero-element result is no target: there is nothing to write (and MPSGraph makes no empty tensor).
    Tensors targets;
    for (size_t j = 0; j < outputs.size(); ++j) {
      Tensor* t = outputs[j];
      if (graph_.type(graph_.outputs[j]).NumElements() == 0 || !t) {
        targets.push_back(nullptr);
        continue;
      }
      const bool seen = std::find(targets.begin(), targets.end(), t) != targets.end() ||
                        std::find(params.begin(), params.end(), t) != params.end();
      targets.push_back(seen ? graph.identityWithTensor(t) : t);
    }
    if (std::count(targets.begin(), targets.end(), nullptr) == static_cast<std::ptrdiff_t>(targets.size()))
      return Status::Ok();  // nothing to compute: every result is empty
    JMP_ASSIGN_OR_RETURN(executable_, graph.compileWithDevice(*device_, feeds, targets));
    JMP_RETURN_IF_ERROR(mismatch);
    // The executable takes its inputs in its feedTensors' order and gives results in its targetTensors'
    // (MPSGraphExecutable.h), neither of which need be the order given.
    JMP_ASSIGN_OR_RETURN(feed_order_, Positions(executable_->feedTensors(), params, "feedTensors"));
    JMP_ASSIGN_OR_RETURN(target_order_, Positions(executable_->targetTensors(), targets, "targetTensors"));
    return Status::Ok();
  }

  // What Serialize wrote for this graph. An error where the bytes are not for this graph or are damaged;
  // the executor then compiles instead.
  Status Load(std::string_view serialized) {
    JMP_RETURN_IF_ERROR(DescribeTypes());
    ByteReader in(reinterpret_cast<const uint8_t*>(serialized.data()), serialized.size(), "Metal package");
    JMP_ASSIGN_OR_RETURN(uint64_t magic, in.U64());
    if (magic != kPackageMagic) return in.Malformed("not a Metal executor package");
    JMP_ASSIGN_OR_RETURN(uint64_t fingerprint, in.U64());
    if (fingerprint != GraphFingerprint(graph_)) return InvalidArgument("the package was made for another graph");
    JMP_ASSIGN_OR_RETURN(std::vector<int64_t> feeds, in.I64s());
    JMP_ASSIGN_OR_RETURN(std::vector<int64_t> targets, in.I64s());
    JMP_ASSIGN_OR_RETURN(std::string_view packed, in.Bytes());
    JMP_ASSIGN_OR_RETURN(uint64_t checksum, in.U64());
    if (in.left() != 0) return in.Malformed("bytes after the package");
    if (checksum != Fnv1a(packed)) return InvalidArgument("the package's bytes are damaged");
    JMP_ASSIGN_OR_RETURN(feed_order_, Permutation(feeds, NonEmpty(graph_.inputs), "inputs"));
    JMP_ASSIGN_OR_RETURN(target_order_, Permutation(targets, NonEmpty(graph_.outputs), "results"));
    JMP_ASSIGN_OR_RETURN(package_dir_, MakeTemporaryDirectory());
    const std::string path = package_dir_ + "/executable.mpsgraphpackage";
    JMP_RETURN_IF_ERROR(UnpackDirectory(packed, path));
    JMP_ASSIGN_OR_RETURN(executable_, device_->newExecutableWithMPSGraphPackageAtURL(path));
    // A loaded executable need not list its feeds and targets; where it does, the counts must agree.
    const size_t listed_feeds = executable_->feedTensors().size(), listed_targets = executable_->targetTensors().size();
    if ((listed_feeds && listed_feeds != feed_order_.size()) ||
        (listed_targets && listed_targets != target_order_.size()))
      return InvalidArgument("the package's executable takes other inputs or results than its graph");
    return Status::Ok();
  }

  StatusOr<std::string> Serialize() const override {
    if (!executable_) return std::string();  // nothing compiled: a load compiles (nothing) again
    StatusOr<std::string> result = Internal("Metal package: not written");
    device_->autoreleasepool([&] {
      auto dir = MakeTemporaryDirectory();
      if (!dir.ok()) {
        result = dir.status();
        return;
      }
      const std::string path = *dir + "/executable.mpsgraphpackage";
      Status written = executable_->serializeToMPSGraphPackageAtURL(path);
      StatusOr<std::string> packed = written.ok() ? PackDirectory(path) : StatusOr<std::string>(written);
      RemoveDirectoryTree(*dir);
      if (!packed.ok()) {
        result = packed.status();
        return;
      }
      ByteWriter out;
      out.U64(kPackageMagic);
      out.U64(GraphFingerprint(graph_));
      out.I64s(std::vector<int64_t>(feed_order_.begin(), feed_order_.end()));
      out.I64s(std::vector<int64_t>(target_order_.begin(), target_order_.end()));
      out.Bytes(*packed);
      out.U64(Fnv1a(*packed));
      result = std::move(out.str());
    });
    return result;
  }

  ~MetalExecutable() override {
    executable_.reset();
    graph_object_.reset();
    if (!package_dir_.empty()) RemoveDirectoryTree(package_dir_);
  }

  Status Run(const std::vector<DeviceMemory*>& inputs, const std::vector<DeviceMemory*>& outputs) override {
    return StartAndWait(*this, inputs, outputs);
  }

  // Encodes the run into a command buffer and commits it without waiting; the completion handlers report
  // the run. An output that is an input's memory (donation) is computed into a pool block and copied over
  // the input on the GPU after the graph, in the same command buffer, so that every input is read before
  // any output is written.
  void Start(const std::vector<DeviceMemory*>& inputs, const std::vector<DeviceMemory*>& outputs,
             const std::vector<std::function<Status()>>&, std::function<void(Status)> done) override {
    if (inputs.size() != graph_.inputs.size() || outputs.size() != graph_.outputs.size())
      return done(Internal("Metal executable: run with other inputs or outputs than compiled"));
    if (!executable_) return done(Status::Ok());  // every result is empty
    device_->autoreleasepool([&] {
      // The run holds its views until its command buffer completes: a block read at many positions
      // (one buffer passed as every tangent of a JVP) drops older views while this run still binds them.
      std::vector<std::shared_ptr<metal::TensorData>> held;
      std::vector<metal::TensorData*> in(feed_order_.size());
      for (size_t k = 0; k < feed_order_.size(); ++k) {
        const size_t i = feed_order_[k];
        held.push_back(View(static_cast<MetalMemory*>(inputs[i]), i, input_types_[i]));
        in[k] = held.back().get();
      }
      std::vector<std::shared_ptr<DeviceMemory>> staging;
      std::vector<std::pair<MetalMemory*, MetalMemory*>> copies;  // (computed in, donated input)
      std::vector<metal::TensorData*> out(target_order_.size());
      for (size_t k = 0; k < target_order_.size(); ++k) {
        const size_t j = target_order_[k];
        auto* m = static_cast<MetalMemory*>(outputs[j]);
        if (std::find(inputs.begin(), inputs.end(), outputs[j]) != inputs.end()) {
          auto tmp = std::make_shared<MetalMemory>(pool_, m->size());
          if (!tmp->ok()) return done(ResourceExhausted("Metal could not allocate a donated output's staging"));
          copies.emplace_back(tmp.get(), m);
          m = tmp.get();
          staging.push_back(std::move(tmp));
        }
        held.push_back(View(m, kOutputPosition + j, output_types_[j]));
        out[k] = held.back().get();
      }
      std::unique_ptr<metal::CommandBuffer> cb = queue_->commandBuffer();
      work_->Begin();
      auto completion = std::make_shared<RunCompletion>(std::move(done), work_, std::move(staging));
      {
        std::lock_guard<std::mutex> lock(mu_);  // one encoder of this executable at a time
        executable_->encodeToCommandBuffer(*cb, in, out,
                                           [completion](Status s) { completion->Executed(CommandBufferStatus(s)); });
      }
      if (!copies.empty()) {
        std::unique_ptr<metal::BlitCommandEncoder> blit = cb->blitCommandEncoder();
        for (auto& [from, to] : copies)
          if (to->size()) blit->copyFromBuffer(from->buffer(), 0, to->buffer(), 0, BlitSize(*from, *to));
        blit->endEncoding();
      }
      // The command buffer of the moment (the encode may have committed earlier ones) completes after
      // them, in queue order.
      cb->addCompletedHandler(
          [completion, held = std::move(held)](Status s) { completion->Completed(CommandBufferStatus(s)); });
      cb->commit();
    });
  }

  bool OutputsMayAliasInputs() const override { return true; }

 private:
  static constexpr size_t kOutputPosition = size_t{1} << 19;

  // Metal copies whole 4-byte words on macOS; the blocks hold whole size classes (multiples of 64 bytes),
  // so rounding up stays inside both.
  static size_t BlitSize(MetalMemory& from, MetalMemory& to) {
    const size_t words = (to.size() + 3) / 4 * 4;
    return std::min({words, from.buffer().length(), to.buffer().length()});
  }

  // Where each tensor an executable lists stands among ours (null: a position given no tensor).
  static StatusOr<std::vector<size_t>> Positions(const Tensors& listed, const Tensors& ours, const char* what) {
    const size_t given = ours.size() - static_cast<size_t>(std::count(ours.begin(), ours.end(), nullptr));
    if (listed.size() != given)
      return Internal(std::string("MPSGraph's executable lists ") + std::to_string(listed.size()) + " " + what +
                      " for " + std::to_string(given));
    std::vector<size_t> order;
    for (Tensor* t : listed) {
      auto it = std::find(ours.begin(), ours.end(), t);
      if (it == ours.end())
        return Internal(std::string("MPSGraph's executable lists a tensor among its ") + what +
                        " that the graph did not give it");
      order.push_back(static_cast<size_t>(it - ours.begin()));
    }
    return order;
  }
  // `v` as an order of exactly the indices `expected` holds.
  static StatusOr<std::vector<size_t>> Permutation(const std::vector<int64_t>& v, const std::vector<size_t>& expected,
                                                   const char* what) {
    std::vector<size_t> order;
    for (int64_t x : v) {
      if (x < 0 || std::find(order.begin(), order.end(), static_cast<size_t>(x)) != order.end())
        return InvalidArgument(std::string("the package's order of ") + what + " is not its graph's");
      order.push_back(static_cast<size_t>(x));
    }
    std::vector<size_t> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    if (sorted != expected)
      return InvalidArgument(std::string("the package's order of ") + what + " is not its graph's");
    return order;
  }
  // The positions of `values` that are not empty (parameters that get a placeholder, results that are
  // targets), in order.
  std::vector<size_t> NonEmpty(const std::vector<int>& values) const {
    std::vector<size_t> kept;
    for (size_t i = 0; i < values.size(); ++i)
      if (graph_.type(values[i]).NumElements() != 0) kept.push_back(i);
    return kept;
  }

  // The shaped types of the parameters and results, which the run's tensor-data views take.
  Status DescribeTypes() {
    input_types_.clear();
    output_types_.clear();
    for (int v : graph_.inputs) {
      JMP_RETURN_IF_ERROR(metal::ToMPS(graph_.type(v).dtype, nullptr).status());
      input_types_.push_back(metal::ShapedTypeOf(graph_.type(v)));
    }
    for (int v : graph_.outputs) {
      JMP_RETURN_IF_ERROR(metal::ToMPS(graph_.type(v).dtype, nullptr).status());
      output_types_.push_back(metal::ShapedTypeOf(graph_.type(v)));
    }
    return Status::Ok();
  }

  // The block's view for this executable's position, made once and kept with the block.
  std::shared_ptr<metal::TensorData> View(MetalMemory* m, size_t position, const metal::ShapedType& type) {
    MetalBlock* block = m->block();
    const uint64_t key = (id_ << 20) | position;
    std::lock_guard<std::mutex> lock(block->mu);
    auto it = block->views.find(key);
    if (it != block->views.end()) return it->second;
    if (block->views.size() >= kMaxViewsPerBlock) block->views.clear();  // views of executables long gone
    std::shared_ptr<metal::TensorData> view = device_->newTensorData(*block->buffer, type.shape, type.dataType);
    block->views.emplace(key, view);
    return view;
  }
  static constexpr size_t kMaxViewsPerBlock = 16;

  std::shared_ptr<metal::Device> device_;
  std::shared_ptr<metal::CommandQueue> queue_;
  std::shared_ptr<MetalPool> pool_;
  std::shared_ptr<StartedWork> work_;
  mps::Graph graph_;
  const uint64_t id_ = g_next_executable_id.fetch_add(1);
  std::vector<metal::ShapedType> input_types_, output_types_;
  std::unique_ptr<metal::Graph> graph_object_;  // owns the tensors feedTensors/targetTensors name
  std::unique_ptr<metal::GraphExecutable> executable_;
  std::vector<size_t> feed_order_;    // feed position k takes our input feed_order_[k]
  std::vector<size_t> target_order_;  // result position k is our output target_order_[k]
  std::string package_dir_;           // where a loaded executable's package lies
  std::mutex mu_;
};

class NothingToRun : public Executable {
 public:
  Status Run(const std::vector<DeviceMemory*>&, const std::vector<DeviceMemory*>&) override { return Status::Ok(); }
};

class MetalExecutor : public Executor {
 public:
  MetalExecutor(std::shared_ptr<metal::Device> device, std::unique_ptr<Executor> kernel_fallback)
      : device_(std::move(device)),
        queue_(device_->newCommandQueue()),
        pool_(std::make_shared<MetalPool>(device_)),
        kernel_fallback_(std::move(kernel_fallback)) {}
  std::string name() const override { return "metal"; }

  StatusOr<std::shared_ptr<DeviceMemory>> Allocate(size_t bytes) override {
    auto m = std::make_shared<MetalMemory>(pool_, bytes);
    if (!m->ok()) return ResourceExhausted("Metal could not allocate " + std::to_string(bytes) + " bytes");
    return std::shared_ptr<DeviceMemory>(std::move(m));
  }

  StatusOr<std::unique_ptr<Executable>> Compile(const mps::Graph& graph) override {
    if (IsMetalKernelGraph(graph)) {
      if (kernel_fallback_) return FallbackKernel(graph);
      return CompileMetalKernel(device_, queue_, work_, graph, [](DeviceMemory* m) -> metal::Buffer& {
        return static_cast<MetalMemory*>(m)->buffer();
      });
    }
    // A graph without results computes nothing anyone reads (MPSGraph compiles nothing without targets).
    if (graph.outputs.empty()) return std::unique_ptr<Executable>(new NothingToRun);
    StatusOr<std::unique_ptr<Executable>> result = Internal("Metal executor: not compiled");
    device_->autoreleasepool([&] {
      auto exe = std::make_unique<MetalExecutable>(device_, queue_, pool_, work_, graph);
      Status s = exe->Build();
      result =
          s.ok() ? StatusOr<std::unique_ptr<Executable>>(std::move(exe)) : StatusOr<std::unique_ptr<Executable>>(s);
    });
    return result;
  }

  void AwaitStarted() override { work_->AwaitStarted(); }
  PoolStats MemoryPoolStats() override { return pool_->pool().Stats(); }
  size_t TrimMemoryPool() override { return pool_->pool().Trim(); }
  int64_t MemoryLimit() override { return static_cast<int64_t>(device_->recommendedMaxWorkingSetSize()); }

  // A package that is not this graph's, or is damaged, is compiled again rather than trusted.
  StatusOr<std::unique_ptr<Executable>> Load(const mps::Graph& graph, std::string_view serialized) override {
    if (serialized.empty() || IsMetalKernelGraph(graph)) return Compile(graph);
    Status loaded;
    std::unique_ptr<MetalExecutable> exe;
    device_->autoreleasepool([&] {
      exe = std::make_unique<MetalExecutable>(device_, queue_, pool_, work_, graph);
      loaded = exe->Load(serialized);
    });
    if (!loaded.ok()) return Compile(graph);
    return std::unique_ptr<Executable>(std::move(exe));
  }

 private:
  // A user kernel where the device cannot compile one: its reference implementation, run once the device
  // work started before it is done (it reads what that work writes).
  StatusOr<std::unique_ptr<Executable>> FallbackKernel(const mps::Graph& graph) {
    class AfterDevice : public Executable {
     public:
      AfterDevice(std::unique_ptr<Executable> inner, std::shared_ptr<StartedWork> work)
          : inner_(std::move(inner)), work_(std::move(work)) {}
      Status Run(const std::vector<DeviceMemory*>& inputs, const std::vector<DeviceMemory*>& outputs) override {
        work_->AwaitStarted();
        return inner_->Run(inputs, outputs);
      }

     private:
      std::unique_ptr<Executable> inner_;
      std::shared_ptr<StartedWork> work_;
    };
    JMP_ASSIGN_OR_RETURN(std::unique_ptr<Executable> inner, kernel_fallback_->Compile(graph));
    return std::unique_ptr<Executable>(new AfterDevice(std::move(inner), work_));
  }

  std::shared_ptr<metal::Device> device_;
  std::shared_ptr<metal::CommandQueue> queue_;
  std::shared_ptr<MetalPool> pool_;
  std::shared_ptr<StartedWork> work_ = std::make_shared<StartedWork>();
  std::unique_ptr<Executor> kernel_fallback_;
};

}  // namespace

std::unique_ptr<Executor> CreateMetalExecutorOn(std::shared_ptr<metal::Device> device,
                                                std::unique_ptr<Executor> kernel_fallback) {
  if (!device) return nullptr;
  return std::make_unique<MetalExecutor>(std::move(device), std::move(kernel_fallback));
}

}  // namespace jmp::exec

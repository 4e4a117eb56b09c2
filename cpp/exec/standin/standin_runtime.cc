// The stand-in's Metal at run time: a device whose command queue has a thread of its own, command
// buffers that run there later, in commit order, and MPSGraph executables whose encode spreads their
// work over several command buffers (commitAndContinue), as MPSGraph does.
#include "exec/standin/standin_runtime.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "exec/standin/standin.h"
#include "support/fp_env.h"
#include "support/serial_worker.h"

namespace jmp::exec::standin {

namespace {

// JAX_METAL_STANDIN_GPU_ERROR: "split" fails every buffer commitAndContinue commits, "all" every
// buffer: its status is Error and its work is not done.
Status InjectedError(const RootBuffer& b) {
  const char* mode = std::getenv("JAX_METAL_STANDIN_GPU_ERROR");
  if (!mode) return Status::Ok();
  const std::string m = mode;
  if (m == "all" || (m == "split" && b.split))
    return Internal(std::string(kPrefix) + "injected GPU error (JAX_METAL_STANDIN_GPU_ERROR=" + m + ")");
  return Status::Ok();
}

// Completed handlers run on a thread of their own, after their buffer's work, while the queue goes on to
// the next buffers, as Metal allows (it calls them after the GPU is done, on a thread of its choosing,
// and does not wait for them before running later buffers): nothing may rely on an earlier buffer's
// handler having run. JAX_METAL_STANDIN_LATE_HANDLERS=<microseconds> delays them further; a negative
// value runs them before the next buffer's work instead.
int LateHandlersMicroseconds() {
  static const int us = [] {
    const char* env = std::getenv("JAX_METAL_STANDIN_LATE_HANDLERS");
    return env && *env ? std::atoi(env) : 0;
  }();
  return us;
}

// The late handlers' thread: runs what is posted, in order, each after the delay; Finish runs the rest
// and joins it. Only the queue's thread posts and finishes.
class LateHandlers {
 public:
  explicit LateHandlers(int delay_us) : delay_us_(delay_us) {}
  bool OnThisThread() const { return std::this_thread::get_id() == id_; }
  void Post(std::shared_ptr<RootBuffer> b, Status status) {
    worker_->Push([b = std::move(b), status = std::move(status), us = delay_us_] {
      std::this_thread::sleep_for(std::chrono::microseconds(us));
      for (auto& h : b->handlers) h(status);
    });
  }
  void Finish() { worker_.reset(); }

 private:
  const int delay_us_;
  std::unique_ptr<SerialWorker> worker_ = std::make_unique<SerialWorker>();
  const std::thread::id id_ = worker_->thread_id();
};

// The queue's committed buffers, shared by its command buffers and its thread (which outlives the
// queue object until it has run what was committed before the queue went).
class QueueState {
 public:
  void Commit(std::shared_ptr<RootBuffer> b) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      b->committed = true;
      if (b->encode_error.ok()) b->encode_error = InjectedError(*b);
      committed_.push_back(std::move(b));
    }
    cv_.notify_all();
  }
  void Close() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closing_ = true;
    }
    cv_.notify_all();
  }

  // Whether the caller is the late handlers' thread (a handler letting go of the queue).
  bool OnHandlerThread() const { return late_ && late_->OnThisThread(); }

  // The queue's thread: runs the committed buffers; once closed, it ends after their late handlers.
  void Loop() {
    for (;;) {
      std::shared_ptr<RootBuffer> b;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return closing_ || !committed_.empty(); });
        if (committed_.empty()) {
          lock.unlock();
          if (late_) late_->Finish();
          return;
        }
        b = std::move(committed_.front());
        committed_.pop_front();
      }
      Status status = b->encode_error;
      if (status.ok())
        for (auto& w : b->work) {
          Status s = w();
          if (!s.ok() && status.ok()) status = s;
        }
      if (late_)
        late_->Post(std::move(b), status);
      else
        for (auto& h : b->handlers) h(status);
    }
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<RootBuffer>> committed_;
  bool closing_ = false;
  const std::unique_ptr<LateHandlers> late_ =
      LateHandlersMicroseconds() >= 0 ? std::make_unique<LateHandlers>(LateHandlersMicroseconds()) : nullptr;
};

class Blit : public metal::BlitCommandEncoder {
 public:
  explicit Blit(std::shared_ptr<RootBuffer> root) : root_(std::move(root)) {}
  // Metal on macOS requires offsets and size that are multiples of 4, inside both buffers.
  void copyFromBuffer(metal::Buffer& from, size_t from_offset, metal::Buffer& to, size_t to_offset,
                      size_t size) override {
    const std::string call = "copyFromBuffer:sourceOffset:toBuffer:destinationOffset:size: (source " +
                             std::to_string(from.length()) + " bytes at " + std::to_string(from_offset) +
                             ", destination " + std::to_string(to.length()) + " bytes at " + std::to_string(to_offset) +
                             ", size " + std::to_string(size) + ")";
    Status problem;
    if (size % 4 || from_offset % 4 || to_offset % 4)
      problem = Violation(call + ": offsets and size must be multiples of 4 on macOS");
    else if (from_offset > from.length() || size > from.length() - from_offset || to_offset > to.length() ||
             size > to.length() - to_offset)
      problem = Violation(call + ": the range runs past a buffer's end");
    else if (ended_)
      problem = Violation(call + ": the encoder has ended");
    if (!problem.ok()) {
      if (root_->encode_error.ok()) root_->encode_error = problem;
      return;
    }
    auto* src = static_cast<uint8_t*>(from.contents()) + from_offset;
    auto* dst = static_cast<uint8_t*>(to.contents()) + to_offset;
    root_->work.push_back([src, dst, size] {
      std::memmove(dst, src, size);
      return Status::Ok();
    });
  }
  void endEncoding() override { ended_ = true; }

 private:
  std::shared_ptr<RootBuffer> root_;
  bool ended_ = false;
};

// The stand-in has no compute pipelines (no Metal Shading Language compiler), so nothing can be
// dispatched: a dispatch fails the buffer.
class Compute : public metal::ComputeCommandEncoder {
 public:
  explicit Compute(std::shared_ptr<RootBuffer> root) : root_(std::move(root)) {}
  void setComputePipelineState(metal::ComputePipelineState&) override {}
  void setBuffer(metal::Buffer&, size_t, uint64_t) override {}
  void dispatchThreads(const std::array<uint64_t, 3>&, const std::array<uint64_t, 3>&) override {
    if (root_->encode_error.ok())
      root_->encode_error = Unsupported("dispatchThreads:threadsPerThreadgroup: without a compute pipeline");
  }
  void endEncoding() override {}

 private:
  std::shared_ptr<RootBuffer> root_;
};

class CommandBufferImpl : public StandinCommandBuffer {
 public:
  explicit CommandBufferImpl(std::shared_ptr<QueueState> queue) : queue_(std::move(queue)) {}
  std::unique_ptr<metal::BlitCommandEncoder> blitCommandEncoder() override { return std::make_unique<Blit>(root_); }
  std::unique_ptr<metal::ComputeCommandEncoder> computeCommandEncoder() override {
    return std::make_unique<Compute>(root_);
  }
  void addCompletedHandler(std::function<void(Status)> handler) override {
    if (root_->committed)  // Metal asserts; here the handler hears of it at once
      return handler(Violation("addCompletedHandler: on a command buffer already committed"));
    root_->handlers.push_back(std::move(handler));
  }
  void commit() override {
    if (root_->committed) return;
    queue_->Commit(root_);
  }
  RootBuffer& root() override { return *root_; }
  void commitAndContinue() override {
    root_->split = true;
    queue_->Commit(root_);
    root_ = std::make_shared<RootBuffer>();
  }

 private:
  std::shared_ptr<QueueState> queue_;
  std::shared_ptr<RootBuffer> root_ = std::make_shared<RootBuffer>();
};

class Queue : public metal::CommandQueue {
 public:
  Queue()
      : thread_([state = state_] {
          UseDefaultFloatingPoint();  // the "GPU" runs host kernels here
          state->Loop();
        }) {}
  ~Queue() override {
    state_->Close();
    if (thread_.get_id() == std::this_thread::get_id() || state_->OnHandlerThread())
      thread_.detach();  // a completed handler let go of the queue: the thread ends after it
    else
      thread_.join();
  }
  std::unique_ptr<metal::CommandBuffer> commandBuffer() override { return std::make_unique<CommandBufferImpl>(state_); }

 private:
  std::shared_ptr<QueueState> state_ = std::make_shared<QueueState>();
  std::thread thread_;
};

// Host memory seen as device memory, for the host executable's Run.
class View : public DeviceMemory {
 public:
  View(void* data, size_t size) : data_(data), size_(size) {}
  void* data() override { return data_; }
  size_t size() const override { return size_; }

 private:
  void* data_;
  size_t size_;
};

size_t ByteSizeOf(const ShapedType& t) { return static_cast<size_t>(ElementCount(t.shape)) * ElementBytes(t.dataType); }

bool HasControlFlow(const mps::Graph& g) {
  for (const mps::Op& op : g.ops)
    if (op.kind == mps::OpKind::kWhile || op.kind == mps::OpKind::kIf) return true;
  return false;
}

constexpr const char* kEncodeCall = "encodeToCommandBuffer:inputsArray:resultsArray:executionDescriptor: ";

class StandinExecutable : public metal::GraphExecutable {
 public:
  StandinExecutable(Program program, std::shared_ptr<Executable> host, metal::Tensors feeds, metal::Tensors targets)
      : program_(std::move(program)), host_(std::move(host)), feeds_(std::move(feeds)), targets_(std::move(targets)) {
    // MPSGraph spreads a larger graph's work over several command buffers; so does the stand-in, for
    // every graph with control flow or more than a few ops, so that callers always meet split buffers.
    split_ = HasControlFlow(program_.graph) || program_.graph.ops.size() > 3;
  }

  metal::Tensors feedTensors() override { return feeds_; }
  metal::Tensors targetTensors() override { return targets_; }

  void encodeToCommandBuffer(metal::CommandBuffer& command_buffer, const std::vector<metal::TensorData*>& inputs,
                             const std::vector<metal::TensorData*>& results,
                             std::function<void(Status)> completion) override {
    auto* cb = dynamic_cast<StandinCommandBuffer*>(&command_buffer);
    if (!cb) return completion(Violation("encodeToCommandBuffer: a command buffer of another device"));
    std::vector<StandinTensorData*> in, out;
    Status problem = Check("inputsArray", inputs, program_.feeds, "feedTensors", &in);
    if (problem.ok()) problem = Check("resultsArray", results, program_.targets, "targetTensors", &out);
    if (problem.ok()) problem = NoResultOverAnInput(in, out);
    if (!problem.ok()) {
      cb->root().handlers.push_back([completion, problem](Status) { completion(problem); });
      return;
    }
    struct Execution {
      std::atomic<int> pending{0};
      std::mutex mu;
      Status error;
      std::function<void(Status)> completion;
    };
    auto e = std::make_shared<Execution>();
    e->completion = std::move(completion);
    e->pending = split_ ? 2 : 1;
    auto finished = [e](Status s) {
      if (!s.ok()) {
        std::lock_guard<std::mutex> lock(e->mu);
        if (e->error.ok()) e->error = s;
      }
      if (--e->pending == 0) e->completion(e->error);
    };
    // Buffer contents are read and written only when the work runs on the queue's thread, and only by
    // the last of the execution's buffers: until it completes, the inputs are still read and the results
    // not yet written, so a caller that lets go of either after an earlier buffer is found out.
    std::vector<std::pair<void*, size_t>> memory;
    for (size_t i = 0; i < in.size(); ++i)
      memory.emplace_back(in[i]->buffer->contents(), ByteSizeOf(program_.feeds[i]));
    for (size_t j = 0; j < out.size(); ++j)
      memory.emplace_back(out[j]->buffer->contents(), ByteSizeOf(program_.targets[j]));
    std::shared_ptr<Executable> host = host_;
    const size_t feeds = in.size();
    auto compute = [host, memory, feeds]() -> Status {
      std::vector<View> views;
      views.reserve(memory.size());
      std::vector<DeviceMemory*> ins, outs;
      for (const auto& [p, n] : memory) views.emplace_back(p, n);
      for (size_t i = 0; i < views.size(); ++i) (i < feeds ? ins : outs).push_back(&views[i]);
      return host->Run(ins, outs);
    };
    if (split_) {
      cb->root().handlers.push_back(finished);
      cb->commitAndContinue();
    }
    cb->root().work.push_back(std::move(compute));
    cb->root().handlers.push_back(finished);
  }

  Status serializeToMPSGraphPackageAtURL(const std::string& path) override { return WritePackage(program_, path); }

 private:
  // inputsArray[i] binds feedTensors[i] (resultsArray[j] targetTensors[j]): shaped types equal, count too.
  static Status Check(const std::string& what, const std::vector<metal::TensorData*>& data,
                      const std::vector<ShapedType>& want, const std::string& order,
                      std::vector<StandinTensorData*>* out) {
    const std::string call = kEncodeCall;
    if (data.size() != want.size())
      return Violation(call + what + " holds " + std::to_string(data.size()) + " tensor data for " +
                       std::to_string(want.size()) + " " + order);
    for (size_t i = 0; i < data.size(); ++i) {
      auto* d = dynamic_cast<StandinTensorData*>(data[i]);
      if (!d) return Violation(call + what + "[" + std::to_string(i) + "] is not tensor data of this device");
      if (!d->problem.ok()) return d->problem;
      if (d->type.shape != want[i].shape || d->type.dataType != want[i].dataType)
        return Violation(call + what + "[" + std::to_string(i) + "] is " + TypeString(d->type) + " but " + order + "[" +
                         std::to_string(i) + "] is " + TypeString(want[i]));
      out->push_back(d);
    }
    return Status::Ok();
  }

  // MPSGraph documents nothing of results over inputs; the executor stages a donated output.
  Status NoResultOverAnInput(const std::vector<StandinTensorData*>& in,
                             const std::vector<StandinTensorData*>& out) const {
    for (size_t j = 0; j < out.size(); ++j) {
      const auto* r = static_cast<const uint8_t*>(out[j]->buffer->contents());
      for (size_t i = 0; i < in.size(); ++i) {
        const auto* f = static_cast<const uint8_t*>(in[i]->buffer->contents());
        if (r < f + ByteSizeOf(program_.feeds[i]) && f < r + ByteSizeOf(program_.targets[j]))
          return Violation(std::string(kEncodeCall) + "resultsArray[" + std::to_string(j) + "] overlaps inputsArray[" +
                           std::to_string(i) + "]");
      }
    }
    return Status::Ok();
  }

  Program program_;
  std::shared_ptr<Executable> host_;
  metal::Tensors feeds_, targets_;
  bool split_ = false;
};

class Device : public metal::Device {
 public:
  void autoreleasepool(const std::function<void()>& body) override { body(); }
  uint64_t recommendedMaxWorkingSetSize() override {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) / 4 * 3 : 0;
  }
  std::unique_ptr<metal::CommandQueue> newCommandQueue() override { return std::make_unique<Queue>(); }
  // Metal makes no buffer of length 0.
  std::unique_ptr<metal::Buffer> newBufferWithLength(size_t length) override {
    if (length == 0) return nullptr;
    auto* bytes = static_cast<uint8_t*>(std::calloc(length, 1));
    if (!bytes) return nullptr;
    return std::make_unique<StandinBuffer>(bytes, length);
  }
  std::unique_ptr<metal::Graph> newGraph() override { return NewStandinGraph(); }
  std::unique_ptr<metal::TensorData> newTensorData(metal::Buffer& buffer, const Shape& shape, DataType dt) override {
    auto* b = dynamic_cast<StandinBuffer*>(&buffer);
    const ShapedType type{shape, dt};
    const std::string call = "initWithMTLBuffer:shape:dataType: (" + TypeString(type) + ")";
    Status problem;
    const int64_t n = ElementCount(shape);
    if (!b) {
      problem = Violation(call + ": a buffer of another device");
    } else if (n <= 0) {
      problem = Violation(call + ": a zero-element tensor data (MPSGraph never takes one)");
    } else if (ElementBytes(dt) == 0) {
      problem = Violation(call + ": not a data type");
    } else if (static_cast<size_t>(n) * ElementBytes(dt) > b->length()) {
      problem = Violation(call + ": the buffer holds only " + std::to_string(b->length()) + " bytes");
    }
    return std::make_unique<StandinTensorData>(b, type, problem);
  }
  StatusOr<std::unique_ptr<metal::GraphExecutable>> newExecutableWithMPSGraphPackageAtURL(
      const std::string& path) override {
    JMP_ASSIGN_OR_RETURN(Program program, ReadPackage(path));
    return MakeExecutable(std::move(program), {}, {});  // feedTensors and targetTensors are nil
  }
  StatusOr<std::unique_ptr<metal::ComputePipelineState>> newComputePipelineState(const std::string&,
                                                                                 const std::string&) override {
    return Unimplemented(std::string(kPrefix) + "no Metal Shading Language compiler");
  }
};

}  // namespace

StatusOr<std::unique_ptr<metal::GraphExecutable>> MakeExecutable(Program program, metal::Tensors feedTensors,
                                                                 metal::Tensors targetTensors) {
  JMP_ASSIGN_OR_RETURN(std::unique_ptr<Executable> host, CompileProgram(program.graph));
  return std::unique_ptr<metal::GraphExecutable>(
      new StandinExecutable(std::move(program), std::shared_ptr<Executable>(std::move(host)), std::move(feedTensors),
                            std::move(targetTensors)));
}

std::unique_ptr<metal::Device> CreateStandinDevice() { return std::make_unique<Device>(); }

}  // namespace jmp::exec::standin

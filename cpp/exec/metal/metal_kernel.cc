#include "exec/metal/metal_kernel.h"

#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>

#include "mps/op_attrs.h"

namespace jmp::exec {

namespace {

// Pipelines by (device, source, entry): a kernel used by many programs compiles once per process.
struct PipelineCache {
  std::mutex mu;
  std::map<std::tuple<const metal::Device*, std::string, std::string>, std::shared_ptr<metal::ComputePipelineState>>
      pipelines;
};

PipelineCache& Cache() {
  static PipelineCache* cache = new PipelineCache;  // never destroyed: kernels may run at exit
  return *cache;
}

StatusOr<std::shared_ptr<metal::ComputePipelineState>> Pipeline(metal::Device& device, const mps::MetalKernelAttrs& k) {
  PipelineCache& cache = Cache();
  std::lock_guard<std::mutex> lock(cache.mu);
  auto key = std::make_tuple(&device, k.entry, k.source);
  auto it = cache.pipelines.find(key);
  if (it != cache.pipelines.end()) return it->second;
  auto made = device.newComputePipelineState(k.source, k.entry);
  if (!made.ok()) return Status(made.status().code(), "metal_kernel '" + k.entry + "': " + made.status().message());
  std::shared_ptr<metal::ComputePipelineState> pipeline = std::move(*made);
  cache.pipelines.emplace(std::move(key), pipeline);
  return pipeline;
}

class MetalKernelExecutable : public Executable {
 public:
  MetalKernelExecutable(std::shared_ptr<metal::Device> device, std::shared_ptr<metal::CommandQueue> queue,
                        std::shared_ptr<StartedWork> work, std::shared_ptr<metal::ComputePipelineState> pipeline,
                        mps::MetalKernelAttrs attrs, std::function<metal::Buffer&(DeviceMemory*)> buffer_of)
      : device_(std::move(device)),
        queue_(std::move(queue)),
        work_(std::move(work)),
        pipeline_(std::move(pipeline)),
        attrs_(std::move(attrs)),
        buffer_of_(std::move(buffer_of)) {}

  Status Run(const std::vector<DeviceMemory*>& inputs, const std::vector<DeviceMemory*>& outputs) override {
    return StartAndWait(*this, inputs, outputs);
  }

  // Encodes the dispatch into a command buffer of the executor's queue, after the graph runs committed
  // before it, and commits without waiting; the completion handler reports the run.
  void Start(const std::vector<DeviceMemory*>& inputs, const std::vector<DeviceMemory*>& outputs,
             const std::vector<std::function<Status()>>&, std::function<void(Status)> done) override {
    const int64_t threads = attrs_.threadgroup[0] * attrs_.threadgroup[1] * attrs_.threadgroup[2];
    const uint64_t limit = pipeline_->maxTotalThreadsPerThreadgroup();
    if (threads > static_cast<int64_t>(limit))
      return done(InvalidArgument("metal_kernel '" + attrs_.entry + "': the threadgroup holds " +
                                  std::to_string(threads) + " threads, more than the " + std::to_string(limit) +
                                  " its pipeline allows"));
    device_->autoreleasepool([&] {
      std::unique_ptr<metal::CommandBuffer> commands = queue_->commandBuffer();
      std::unique_ptr<metal::ComputeCommandEncoder> encoder = commands->computeCommandEncoder();
      encoder->setComputePipelineState(*pipeline_);
      uint64_t index = 0;
      for (DeviceMemory* m : inputs) encoder->setBuffer(buffer_of_(m), 0, index++);
      for (DeviceMemory* m : outputs) encoder->setBuffer(buffer_of_(m), 0, index++);
      auto size = [](const std::array<int64_t, 3>& v) {
        return std::array<uint64_t, 3>{static_cast<uint64_t>(v[0]), static_cast<uint64_t>(v[1]),
                                       static_cast<uint64_t>(v[2])};
      };
      encoder->dispatchThreads(size(attrs_.grid), size(attrs_.threadgroup));
      encoder->endEncoding();
      auto finish = std::make_shared<std::function<void(Status)>>(std::move(done));
      std::shared_ptr<StartedWork> work = work_;
      const std::string entry = attrs_.entry;
      work->Begin();
      commands->addCompletedHandler([finish, work, entry](Status status) {
        if (!status.ok()) status = Internal("metal_kernel '" + entry + "' failed on the GPU: " + status.message());
        work->End();
        (*finish)(std::move(status));
      });
      commands->commit();
    });
  }

 private:
  std::shared_ptr<metal::Device> device_;
  std::shared_ptr<metal::CommandQueue> queue_;
  std::shared_ptr<StartedWork> work_;
  std::shared_ptr<metal::ComputePipelineState> pipeline_;
  mps::MetalKernelAttrs attrs_;
  std::function<metal::Buffer&(DeviceMemory*)> buffer_of_;
};

}  // namespace

bool IsMetalKernelGraph(const mps::Graph& graph) {
  return graph.ops.size() == 1 && graph.ops[0].kind == mps::OpKind::kMetalKernel;
}

StatusOr<std::unique_ptr<Executable>> CompileMetalKernel(std::shared_ptr<metal::Device> device,
                                                         std::shared_ptr<metal::CommandQueue> queue,
                                                         std::shared_ptr<StartedWork> work, const mps::Graph& graph,
                                                         std::function<metal::Buffer&(DeviceMemory*)> buffer_of) {
  const mps::Op& op = graph.ops[0];
  // The kernel's buffers are the segment's parameters and results, in the op's order.
  if (op.inputs != graph.inputs || op.outputs != graph.outputs)
    return Internal("metal_kernel: its segment must pass the kernel's operands and results through as they are");
  mps::MetalKernelAttrs attrs = op.Attrs<mps::MetalKernelAttrs>();
  JMP_ASSIGN_OR_RETURN(std::shared_ptr<metal::ComputePipelineState> pipeline, Pipeline(*device, attrs));
  return std::unique_ptr<Executable>(new MetalKernelExecutable(std::move(device), std::move(queue), std::move(work),
                                                               std::move(pipeline), std::move(attrs),
                                                               std::move(buffer_of)));
}

}  // namespace jmp::exec

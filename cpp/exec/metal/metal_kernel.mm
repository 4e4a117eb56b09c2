#include "exec/metal/metal_kernel.h"

#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "mps/op_attrs.h"

namespace jmp::exec {

namespace {

// Pipelines by (device, source, entry): a kernel used by many programs compiles once per process.
struct PipelineCache {
  std::mutex mu;
  std::map<std::pair<std::string, std::string>, id<MTLComputePipelineState>> pipelines;
};

PipelineCache& Cache() {
  static PipelineCache* cache = new PipelineCache;  // never destroyed: kernels may run at exit
  return *cache;
}

StatusOr<id<MTLComputePipelineState>> Pipeline(id<MTLDevice> device, const mps::MetalKernelAttrs& k) {
  PipelineCache& cache = Cache();
  std::lock_guard<std::mutex> lock(cache.mu);
  auto key = std::make_pair(k.entry, k.source);
  auto it = cache.pipelines.find(key);
  if (it != cache.pipelines.end()) return it->second;
  NSError* error = nil;
  NSString* source = [NSString stringWithUTF8String:k.source.c_str()];
  id<MTLLibrary> library = [device newLibraryWithSource:source options:nil error:&error];
  if (!library)
    return InvalidArgument("metal_kernel '" + k.entry + "': the Metal compiler rejected the source:\n" +
                           std::string(error ? [[error localizedDescription] UTF8String] : "(no message)"));
  id<MTLFunction> function = [library newFunctionWithName:[NSString stringWithUTF8String:k.entry.c_str()]];
  if (!function) return InvalidArgument("metal_kernel: the source has no kernel function named '" + k.entry + "'");
  id<MTLComputePipelineState> pipeline = [device newComputePipelineStateWithFunction:function error:&error];
  if (!pipeline)
    return InvalidArgument("metal_kernel '" + k.entry + "': no compute pipeline: " +
                           std::string(error ? [[error localizedDescription] UTF8String] : "(no message)"));
  cache.pipelines.emplace(std::move(key), pipeline);
  return pipeline;
}

class MetalKernelExecutable : public Executable {
 public:
  MetalKernelExecutable(id<MTLCommandQueue> queue, std::shared_ptr<StartedWork> work,
                        id<MTLComputePipelineState> pipeline, mps::MetalKernelAttrs attrs,
                        std::function<id<MTLBuffer>(DeviceMemory*)> buffer_of)
      : queue_(queue),
        work_(std::move(work)),
        pipeline_(pipeline),
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
    if (threads > static_cast<int64_t>([pipeline_ maxTotalThreadsPerThreadgroup]))
      return done(InvalidArgument("metal_kernel '" + attrs_.entry + "': the threadgroup holds " +
                                  std::to_string(threads) + " threads, more than the " +
                                  std::to_string([pipeline_ maxTotalThreadsPerThreadgroup]) + " its pipeline allows"));
    @autoreleasepool {
      id<MTLCommandBuffer> commands = [queue_ commandBuffer];
      id<MTLComputeCommandEncoder> encoder = [commands computeCommandEncoder];
      [encoder setComputePipelineState:pipeline_];
      NSUInteger index = 0;
      for (DeviceMemory* m : inputs) [encoder setBuffer:buffer_of_(m) offset:0 atIndex:index++];
      for (DeviceMemory* m : outputs) [encoder setBuffer:buffer_of_(m) offset:0 atIndex:index++];
      auto size = [](const std::array<int64_t, 3>& v) {
        return MTLSizeMake(static_cast<NSUInteger>(v[0]), static_cast<NSUInteger>(v[1]), static_cast<NSUInteger>(v[2]));
      };
      [encoder dispatchThreads:size(attrs_.grid) threadsPerThreadgroup:size(attrs_.threadgroup)];
      [encoder endEncoding];
      auto finish = std::make_shared<std::function<void(Status)>>(std::move(done));
      std::shared_ptr<StartedWork> work = work_;
      const std::string entry = attrs_.entry;
      work->Begin();
      [commands addCompletedHandler:^(id<MTLCommandBuffer> b) {
        Status status;
        if (b.status == MTLCommandBufferStatusError) {
          NSString* text = b.error ? b.error.localizedDescription : @"unknown error";
          status = Internal("metal_kernel '" + entry + "' failed on the GPU: " + text.UTF8String);
        }
        work->End();
        (*finish)(std::move(status));
      }];
      [commands commit];
    }
  }

 private:
  id<MTLCommandQueue> queue_;
  std::shared_ptr<StartedWork> work_;
  id<MTLComputePipelineState> pipeline_;
  mps::MetalKernelAttrs attrs_;
  std::function<id<MTLBuffer>(DeviceMemory*)> buffer_of_;
};

}  // namespace

bool IsMetalKernelGraph(const mps::Graph& graph) {
  return graph.ops.size() == 1 && graph.ops[0].kind == mps::OpKind::kMetalKernel;
}

StatusOr<std::unique_ptr<Executable>> CompileMetalKernel(id<MTLDevice> device, id<MTLCommandQueue> queue,
                                                         std::shared_ptr<StartedWork> work, const mps::Graph& graph,
                                                         std::function<id<MTLBuffer>(DeviceMemory*)> buffer_of) {
  const mps::Op& op = graph.ops[0];
  // The kernel's buffers are the segment's parameters and results, in the op's order.
  if (op.inputs != graph.inputs || op.outputs != graph.outputs)
    return Internal("metal_kernel: its segment must pass the kernel's operands and results through as they are");
  mps::MetalKernelAttrs attrs = op.Attrs<mps::MetalKernelAttrs>();
  JMP_ASSIGN_OR_RETURN(id<MTLComputePipelineState> pipeline, Pipeline(device, attrs));
  return std::unique_ptr<Executable>(
      new MetalKernelExecutable(queue, std::move(work), pipeline, std::move(attrs), std::move(buffer_of)));
}

}  // namespace jmp::exec

// The Metal executor: one MPSGraph per executable, built once from the MPS op graph (one MPSGraph call
// per op, a switch over the op table), compiled into an MPSGraphExecutable, encoded into a command buffer
// per run and committed without waiting, on MTLBuffers in shared storage that the device pool reuses.
// Semantics live in op_kinds.def and the lowering; nothing here decides anything.
#import <Foundation/Foundation.h>
#import <Metal/Metal.h>
#import <MetalPerformanceShadersGraph/MetalPerformanceShadersGraph.h>

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
#include "exec/executor.h"
#include "exec/metal/metal_kernel.h"
#include "exec/package_archive.h"
#include "exec/work_counters.h"
#include "mps/op_attrs.h"

namespace jmp::exec {

namespace {

StatusOr<MPSDataType> ToMPS(DType t, const mps::Op* op) {
  switch (t) {
    case DType::kBool: return MPSDataTypeBool;
    case DType::kI8: return MPSDataTypeInt8;
    case DType::kI16: return MPSDataTypeInt16;
    case DType::kI32: return MPSDataTypeInt32;
    case DType::kI64: return MPSDataTypeInt64;
    case DType::kU8: return MPSDataTypeUInt8;
    case DType::kU16: return MPSDataTypeUInt16;
    case DType::kU32: return MPSDataTypeUInt32;
    case DType::kU64: return MPSDataTypeUInt64;
    case DType::kF16: return MPSDataTypeFloat16;
    case DType::kBF16: return MPSDataTypeBFloat16;
    case DType::kF32: return MPSDataTypeFloat32;
    case DType::kC64: return MPSDataTypeComplexFloat32;
    case DType::kF64:
    case DType::kC128:
      return Unimplemented(std::string(op ? mps::OpKindName(op->kind) : "argument") +
                           ": float64 is not supported by MPSGraph");
    case DType::kI4:
    case DType::kU4:
    case DType::kI2:
    case DType::kU2:
    JMP_NARROW_FLOAT_CASES:
      return Internal(std::string(op ? mps::OpKindName(op->kind) : "argument") + ": " + std::string(DTypeName(t)) +
                      " reached the Metal executor (the lowering rewrites narrow types)");
  }
  return Internal("unknown dtype");
}

NSArray<NSNumber*>* Numbers(const std::vector<int64_t>& v) {
  NSMutableArray<NSNumber*>* a = [NSMutableArray arrayWithCapacity:v.size()];
  for (int64_t x : v) [a addObject:@(x)];
  return a;
}

std::vector<MPSGraphTensor*> ToVector(NSArray<MPSGraphTensor*>* a) {
  std::vector<MPSGraphTensor*> v;
  for (MPSGraphTensor* t in a) v.push_back(t);
  return v;
}

MPSShape* ShapeOf(const mps::TensorType& t) {
  if (t.shape.empty()) return @[ @1 ];  // rank-0 tensors run as [1]; the bytes are the same
  return Numbers(t.shape);
}

// Builds the MPSGraph tensors of one (sub)graph, given its parameters.
class GraphBuilder {
 public:
  explicit GraphBuilder(MPSGraph* graph) : graph_(graph) {}

  StatusOr<NSArray<MPSGraphTensor*>*> Build(const mps::Graph& g, NSArray<MPSGraphTensor*>* params) {
    std::vector<MPSGraphTensor*> values(g.values.size(), nil);
    for (size_t i = 0; i < g.inputs.size(); ++i) values[static_cast<size_t>(g.inputs[i])] = params[i];
    for (const mps::Op& op : g.ops) {
      std::vector<MPSGraphTensor*> in;
      for (int v : op.inputs) in.push_back(values[static_cast<size_t>(v)]);
      auto out = Emit(g, op, in);
      if (!out.ok()) return out.status();
      for (size_t i = 0; i < op.outputs.size(); ++i) values[static_cast<size_t>(op.outputs[i])] = (*out)[i];
    }
    NSMutableArray<MPSGraphTensor*>* outputs = [NSMutableArray array];
    for (int v : g.outputs) [outputs addObject:values[static_cast<size_t>(v)]];
    return outputs;
  }

 private:
  using Tensors = std::vector<MPSGraphTensor*>;

  StatusOr<Tensors> Emit(const mps::Graph& g, const mps::Op& op, const Tensors& in);

  MPSGraph* graph_;
};

MPSGraphScatterMode ToMPS(mps::ScatterMode mode) {
  using S = mps::ScatterMode;
  switch (mode) {
    case S::kAdd: return MPSGraphScatterModeAdd;
    case S::kSub: return MPSGraphScatterModeSub;
    case S::kMul: return MPSGraphScatterModeMul;
    case S::kDiv: return MPSGraphScatterModeDiv;
    case S::kMin: return MPSGraphScatterModeMin;
    case S::kMax: return MPSGraphScatterModeMax;
    case S::kSet: return MPSGraphScatterModeSet;
  }
  return MPSGraphScatterModeSet;
}

NSInteger Axis(const mps::Op& op) { return static_cast<NSInteger>(op.Attrs<mps::AxisAttrs>().axis); }
NSArray<NSNumber*>* Axes(const mps::Op& op) { return Numbers(op.Attrs<mps::AxesAttrs>().axes); }

MPSGraphPooling4DOpDescriptor* Pooling(const mps::Op& op) {
  const mps::Pool4DAttrs& p = op.Attrs<mps::Pool4DAttrs>();
  std::vector<int64_t> padding;
  for (size_t i = 0; i < p.pad_low.size() && i < p.pad_high.size(); ++i) {
    padding.push_back(p.pad_low[i]);
    padding.push_back(p.pad_high[i]);
  }
  return [MPSGraphPooling4DOpDescriptor descriptorWithKernelSizes:Numbers(p.window)
                                                          strides:Numbers(p.strides)
                                                    dilationRates:@[ @1, @1, @1, @1 ]
                                                    paddingValues:Numbers(padding)
                                                     paddingStyle:MPSGraphPaddingStyleExplicit];
}

StatusOr<std::vector<MPSGraphTensor*>> GraphBuilder::Emit(const mps::Graph& g, const mps::Op& op, const Tensors& in) {
  using K = mps::OpKind;
  MPSGraph* G = graph_;
  const mps::TensorType& out = g.type(op.outputs.at(0));
  auto out_type = ToMPS(out.dtype, &op);
  if (!out_type.ok()) return out_type.status();
  MPSDataType dt = *out_type;
  switch (op.kind) {
    case K::kConstant: {
      NSData* data = [NSData dataWithBytes:op.Attrs<mps::ConstantAttrs>().data.data()
                                    length:op.Attrs<mps::ConstantAttrs>().data.size()];
      return Tensors{[G constantWithData:data shape:ShapeOf(out) dataType:dt]};
    }
    case K::kCoordinateAlongAxis: {
      MPSGraphTensor* c = [G coordinateAlongAxis:Axis(op) withShape:ShapeOf(out) name:nil];
      return Tensors{[G castTensor:c toType:dt name:nil]};
    }
    // The uniform rows: one generated call each, checked by the compiler against the SDK's MPSGraph.
#define JMP_MPS_UNARY(Name, macos, selector, domain) \
  case K::k##Name: return Tensors{[G selector:in.at(0) name:nil]};
#define JMP_MPS_BINARY(Name, macos, primary, secondary, domain) \
  case K::k##Name: return Tensors{[G primary:in.at(0) secondary:in.at(1) name:nil]};
#include "mps/op_kinds.def"
    // Placement never sends these here (exec/placement.cc); reaching one is a placement bug.
#define JMP_HOST_OP(Name, domain) case K::k##Name:
#include "mps/op_kinds.def"
      return Internal(std::string(mps::OpKindName(op.kind)) + " is host-only but was placed on Metal");
    case K::kMetalKernel: return Internal("a Metal kernel must be a segment of its own (exec/placement.cc)");
    case K::kMatMul:
      return Tensors{[G matrixMultiplicationWithPrimaryTensor:in.at(0) secondaryTensor:in.at(1) name:nil]};
    case K::kSelect:
      return Tensors{[G selectWithPredicateTensor:in[0] truePredicateTensor:in[1] falsePredicateTensor:in[2] name:nil]};
    case K::kClamp: return Tensors{[G clampWithTensor:in[0] minValueTensor:in[1] maxValueTensor:in[2] name:nil]};
    case K::kMultiplyAdd:
      return Tensors{[G additionWithPrimaryTensor:[G multiplicationWithPrimaryTensor:in[0]
                                                                     secondaryTensor:in[1]
                                                                                name:nil]
                                  secondaryTensor:in[2]
                                             name:nil]};
    case K::kCast: return Tensors{[G castTensor:in[0] toType:dt name:nil]};
    case K::kReinterpretCast: return Tensors{[G reinterpretCastTensor:in[0] toType:dt name:nil]};
    case K::kReshape: return Tensors{[G reshapeTensor:in[0] withShape:ShapeOf(out) name:nil]};
    case K::kTranspose:
      return Tensors{[G transposeTensor:in[0]
                            permutation:Numbers(op.Attrs<mps::PermutationAttrs>().permutation)
                                   name:nil]};
    case K::kBroadcast: return Tensors{[G broadcastTensor:in[0] toShape:ShapeOf(out) name:nil]};
    case K::kSlice: {
      const mps::SliceAttrs& a = op.Attrs<mps::SliceAttrs>();
      return Tensors{[G sliceTensor:in[0]
                             starts:Numbers(a.starts)
                               ends:Numbers(a.ends)
                            strides:Numbers(a.strides)
                               name:nil]};
    }
    case K::kConcat: {
      NSMutableArray<MPSGraphTensor*>* list = [NSMutableArray array];
      for (MPSGraphTensor* t : in) [list addObject:t];
      return Tensors{[G concatTensors:list dimension:Axis(op) name:nil]};
    }
    case K::kPad: {
      const mps::PadAttrs& a = op.Attrs<mps::PadAttrs>();
      return Tensors{[G padTensor:in[0]
                  withPaddingMode:MPSGraphPaddingModeConstant
                      leftPadding:Numbers(a.low)
                     rightPadding:Numbers(a.high)
                    constantValue:a.value
                             name:nil]};
    }
    case K::kReverse: return Tensors{[G reverseTensor:in[0] axes:Axes(op) name:nil]};
    case K::kReductionSum: return Tensors{[G reductionSumWithTensor:in[0] axes:Axes(op) name:nil]};
    case K::kReductionProduct: return Tensors{[G reductionProductWithTensor:in[0] axes:Axes(op) name:nil]};
    case K::kReductionMaximum: return Tensors{[G reductionMaximumPropagateNaNWithTensor:in[0] axes:Axes(op) name:nil]};
    case K::kReductionMinimum: return Tensors{[G reductionMinimumPropagateNaNWithTensor:in[0] axes:Axes(op) name:nil]};
    case K::kReductionAnd: return Tensors{[G reductionAndWithTensor:in[0] axes:Axes(op) name:nil]};
    case K::kReductionOr: return Tensors{[G reductionOrWithTensor:in[0] axes:Axes(op) name:nil]};
    case K::kReductionArgMaximum: return Tensors{[G reductionArgMaximumWithTensor:in[0] axis:Axis(op) name:nil]};
    case K::kReductionArgMinimum: return Tensors{[G reductionArgMinimumWithTensor:in[0] axis:Axis(op) name:nil]};
    case K::kFFT: {
      const mps::FFTAttrs& a = op.Attrs<mps::FFTAttrs>();
      MPSGraphFFTDescriptor* d = [MPSGraphFFTDescriptor descriptor];
      d.inverse = a.inverse;
      d.scalingMode = a.inverse ? MPSGraphFFTScalingModeSize : MPSGraphFFTScalingModeNone;
      return Tensors{[G fastFourierTransformWithTensor:in[0] axes:Numbers(a.axes) descriptor:d name:nil]};
    }
    case K::kRealToHermiteanFFT: {
      MPSGraphFFTDescriptor* d = [MPSGraphFFTDescriptor descriptor];
      return Tensors{[G realToHermiteanFFTWithTensor:in[0]
                                                axes:Numbers(op.Attrs<mps::FFTAttrs>().axes)
                                          descriptor:d
                                                name:nil]};
    }
    case K::kHermiteanToRealFFT: {
      MPSGraphFFTDescriptor* d = [MPSGraphFFTDescriptor descriptor];
      d.inverse = YES;
      d.scalingMode = MPSGraphFFTScalingModeSize;
      d.roundToOddHermitean = out.shape.empty() ? NO : (out.shape.back() % 2 == 1);
      return Tensors{[G HermiteanToRealFFTWithTensor:in[0]
                                                axes:Numbers(op.Attrs<mps::FFTAttrs>().axes)
                                          descriptor:d
                                                name:nil]};
    }
    case K::kSort: {
      const mps::SortAttrs& a = op.Attrs<mps::SortAttrs>();
      return Tensors{[G sortWithTensor:in[0] axis:static_cast<NSInteger>(a.axis) descending:a.descending name:nil]};
    }
    case K::kArgSort: {
      const mps::SortAttrs& a = op.Attrs<mps::SortAttrs>();
      return Tensors{[G argSortWithTensor:in[0] axis:static_cast<NSInteger>(a.axis) descending:a.descending name:nil]};
    }
    case K::kTopK: {
      NSUInteger k = static_cast<NSUInteger>(op.Attrs<mps::TopKAttrs>().k);
      NSArray<MPSGraphTensor*>* r = [G topKWithSourceTensor:in[0] k:k name:nil];
      return Tensors{r[0], r[1]};
    }
    case K::kCumulativeSum: {
      const mps::CumulativeAttrs& a = op.Attrs<mps::CumulativeAttrs>();
      return Tensors{[G cumulativeSumWithTensor:in[0]
                                           axis:static_cast<NSInteger>(a.axis)
                                      exclusive:a.exclusive
                                        reverse:a.reverse
                                           name:nil]};
    }
    case K::kCumulativeProduct: {
      const mps::CumulativeAttrs& a = op.Attrs<mps::CumulativeAttrs>();
      return Tensors{[G cumulativeProductWithTensor:in[0]
                                               axis:static_cast<NSInteger>(a.axis)
                                          exclusive:a.exclusive
                                            reverse:a.reverse
                                               name:nil]};
    }
    case K::kCumulativeMaximum: {
      const mps::CumulativeAttrs& a = op.Attrs<mps::CumulativeAttrs>();
      return Tensors{[G cumulativeMaximumWithTensor:in[0]
                                               axis:static_cast<NSInteger>(a.axis)
                                          exclusive:a.exclusive
                                            reverse:a.reverse
                                               name:nil]};
    }
    case K::kCumulativeMinimum: {
      const mps::CumulativeAttrs& a = op.Attrs<mps::CumulativeAttrs>();
      return Tensors{[G cumulativeMinimumWithTensor:in[0]
                                               axis:static_cast<NSInteger>(a.axis)
                                          exclusive:a.exclusive
                                            reverse:a.reverse
                                               name:nil]};
    }
    case K::kGatherAlongAxis: {
      NSInteger axis = static_cast<NSInteger>(op.Attrs<mps::AxisAttrs>().axis);
      return Tensors{[G gatherAlongAxis:axis withUpdatesTensor:in[0] indicesTensor:in[1] name:nil]};
    }
    case K::kGatherND: {
      NSUInteger batch = static_cast<NSUInteger>(op.Attrs<mps::GatherNDAttrs>().batch_dims);
      return Tensors{[G gatherNDWithUpdatesTensor:in[0] indicesTensor:in[1] batchDimensions:batch name:nil]};
    }
    case K::kScatterND:
      return Tensors{[G scatterNDWithDataTensor:in[0]
                                  updatesTensor:in[1]
                                  indicesTensor:in[2]
                                batchDimensions:0
                                           mode:ToMPS(op.Attrs<mps::ScatterAttrs>().mode)
                                           name:nil]};
    case K::kScatterAlongAxis: {
      const mps::ScatterAttrs& a = op.Attrs<mps::ScatterAttrs>();
      return Tensors{[G scatterAlongAxis:static_cast<NSInteger>(a.axis)
                          withDataTensor:in[0]
                           updatesTensor:in[1]
                           indicesTensor:in[2]
                                    mode:ToMPS(a.mode)
                                    name:nil]};
    }
    case K::kConv2D: {
      const mps::Conv2DAttrs& a = op.Attrs<mps::Conv2DAttrs>();
      MPSGraphConvolution2DOpDescriptor* d =
          [MPSGraphConvolution2DOpDescriptor descriptorWithStrideInX:static_cast<NSUInteger>(a.strides.at(1))
                                                           strideInY:static_cast<NSUInteger>(a.strides.at(0))
                                                     dilationRateInX:static_cast<NSUInteger>(a.dilations.at(1))
                                                     dilationRateInY:static_cast<NSUInteger>(a.dilations.at(0))
                                                              groups:static_cast<NSUInteger>(a.groups)
                                                         paddingLeft:static_cast<NSUInteger>(a.pad_low.at(1))
                                                        paddingRight:static_cast<NSUInteger>(a.pad_high.at(1))
                                                          paddingTop:static_cast<NSUInteger>(a.pad_low.at(0))
                                                       paddingBottom:static_cast<NSUInteger>(a.pad_high.at(0))
                                                        paddingStyle:MPSGraphPaddingStyleExplicit
                                                          dataLayout:MPSGraphTensorNamedDataLayoutNHWC
                                                       weightsLayout:MPSGraphTensorNamedDataLayoutHWIO];
      return Tensors{[G convolution2DWithSourceTensor:in[0] weightsTensor:in[1] descriptor:d name:nil]};
    }
    case K::kMaxPool4D: return Tensors{[G maxPooling4DWithSourceTensor:in[0] descriptor:Pooling(op) name:nil]};
    case K::kAvgPool4D: {
      MPSGraphPooling4DOpDescriptor* d = Pooling(op);
      d.includeZeroPadToAverage = YES;
      return Tensors{[G avgPooling4DWithSourceTensor:in[0] descriptor:d name:nil]};
    }
    case K::kMaxPool4DGradient:
      return Tensors{[G maxPooling4DGradientWithGradientTensor:in[0]
                                                  sourceTensor:in[1]
                                                    descriptor:Pooling(op)
                                                          name:nil]};
    case K::kWhile: {
      NSMutableArray<MPSGraphTensor*>* init = [NSMutableArray array];
      for (MPSGraphTensor* t : in) [init addObject:t];
      const mps::Graph* cond = &op.subgraphs.at(0);
      const mps::Graph* body = &op.subgraphs.at(1);
      __block Status failure;
      GraphBuilder* self = this;
      NSArray<MPSGraphTensor*>* r = [G whileWithInitialInputs:init
          before:^MPSGraphTensor*(NSArray<MPSGraphTensor*>* inputs, NSMutableArray<MPSGraphTensor*>* results) {
            auto c = self->Build(*cond, inputs);
            [results addObjectsFromArray:inputs];
            if (!c.ok()) {
              failure = c.status();
              return [G constantWithScalar:0 dataType:MPSDataTypeBool];
            }
            return [G reshapeTensor:(*c)[0] withShape:@[ @1 ] name:nil];
          }
          after:^NSArray<MPSGraphTensor*>*(NSArray<MPSGraphTensor*>* args) {
            auto b = self->Build(*body, args);
            if (!b.ok()) {
              failure = b.status();
              return args;
            }
            return *b;
          }
          name:nil];
      if (!failure.ok()) return failure;
      return ToVector(r);
    }
    case K::kIf: {
      NSMutableArray<MPSGraphTensor*>* params = [NSMutableArray array];
      for (size_t i = 1; i < in.size(); ++i) [params addObject:in[i]];
      const mps::Graph* then_g = &op.subgraphs.at(0);
      const mps::Graph* else_g = &op.subgraphs.at(1);
      __block Status failure;
      GraphBuilder* self = this;
      NSArray<MPSGraphTensor*>* r = [G ifWithPredicateTensor:in[0]
          thenBlock:^NSArray<MPSGraphTensor*>* {
            auto t = self->Build(*then_g, params);
            if (!t.ok()) failure = t.status();
            return t.ok() ? *t : @[];
          }
          elseBlock:^NSArray<MPSGraphTensor*>* {
            auto e = self->Build(*else_g, params);
            if (!e.ok()) failure = e.status();
            return e.ok() ? *e : @[];
          }
          name:nil];
      if (!failure.ok()) return failure;
      return ToVector(r);
    }
  }
  return Internal("unknown op kind");
}

// A block of the device pool: a shared-storage MTLBuffer and the MPSGraphTensorData views executables
// made of it (a view per executable's input or output position), kept with the buffer and released with
// it, so that a run over reused buffers creates no Objective-C objects.
struct MetalBlock {
  id<MTLBuffer> buffer;
  std::mutex mu;
  std::unordered_map<uint64_t, MPSGraphTensorData*> views;
};

class MetalPool : public BlockPool::Backend {
 public:
  explicit MetalPool(id<MTLDevice> device) : device_(device) {}
  void* Allocate(size_t bytes) override {
    id<MTLBuffer> buffer = [device_ newBufferWithLength:bytes options:MTLResourceStorageModeShared];
    if (!buffer) return nullptr;
    auto* block = new MetalBlock;
    block->buffer = buffer;
    return block;
  }
  void Release(void* block, size_t) override { delete static_cast<MetalBlock*>(block); }
  BlockPool& pool() { return pool_; }

 private:
  id<MTLDevice> device_;
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
  void* data() override { return [block_->buffer contents]; }
  size_t size() const override { return size_; }
  id<MTLBuffer> buffer() const { return block_->buffer; }
  MetalBlock* block() const { return block_; }

 private:
  std::shared_ptr<MetalPool> pool_;
  MetalBlock* block_ = nullptr;
  size_t size_, cls_;
};

std::atomic<uint64_t> g_next_executable_id{1};

class MetalExecutable : public Executable {
 public:
  MetalExecutable(id<MTLCommandQueue> queue, std::shared_ptr<MetalPool> pool, std::shared_ptr<StartedWork> work,
                  const mps::Graph& g)
      : queue_(queue), pool_(std::move(pool)), work_(std::move(work)), graph_(g) {}

  Status Build(id<MTLDevice> device) {
    MPSGraph* graph = [[MPSGraph alloc] init];
    NSMutableArray<MPSGraphTensor*>* params = [NSMutableArray array];
    NSMutableDictionary<MPSGraphTensor*, MPSGraphShapedType*>* feeds = [NSMutableDictionary dictionary];
    for (int v : graph_.inputs) {
      auto dt = ToMPS(graph_.type(v).dtype, nullptr);
      if (!dt.ok()) return dt.status();
      MPSGraphTensor* p = [graph placeholderWithShape:ShapeOf(graph_.type(v)) dataType:*dt name:nil];
      [params addObject:p];
      feeds[p] = [[MPSGraphShapedType alloc] initWithShape:ShapeOf(graph_.type(v)) dataType:*dt];
    }
    JMP_RETURN_IF_ERROR(DescribeTypes());
    GraphBuilder builder(graph);
    auto outputs = builder.Build(graph_, params);
    if (!outputs.ok()) return outputs.status();
    // Results are fresh tensors: an input or a repeated value gets an identity of its own.
    NSMutableArray<MPSGraphTensor*>* targets = [NSMutableArray array];
    for (MPSGraphTensor* t : *outputs) {
      BOOL seen = [targets containsObject:t] || [params containsObject:t];
      [targets addObject:seen ? [graph identityWithTensor:t name:nil] : t];
    }
    MPSGraphDevice* gd = [MPSGraphDevice deviceWithMTLDevice:device];
    executable_ = [graph compileWithDevice:gd
                                     feeds:feeds
                             targetTensors:targets
                          targetOperations:nil
                     compilationDescriptor:nil];
    if (!executable_) return Internal("MPSGraph failed to compile the executable");
    return Status::Ok();
  }

  // A package MPSGraph wrote (Serialize) for this graph: MPSGraph's compile is skipped. The directory
  // stays until this executable goes (ASSUMPTION: MPSGraph may read the package after init returns).
  Status Load(std::string_view package) {
    JMP_RETURN_IF_ERROR(DescribeTypes());
    JMP_ASSIGN_OR_RETURN(package_dir_, MakeTemporaryDirectory());
    const std::string path = package_dir_ + "/executable.mpsgraphpackage";
    JMP_RETURN_IF_ERROR(UnpackDirectory(package, path));
    NSURL* url = [NSURL fileURLWithPath:[NSString stringWithUTF8String:path.c_str()] isDirectory:YES];
    executable_ = [[MPSGraphExecutable alloc] initWithMPSGraphPackageAtURL:url compilationDescriptor:nil];
    if (!executable_) return InvalidArgument("MPSGraph could not load the serialized executable's package");
    return Status::Ok();
  }

  StatusOr<std::string> Serialize() const override {
    @autoreleasepool {
      JMP_ASSIGN_OR_RETURN(std::string dir, MakeTemporaryDirectory());
      const std::string path = dir + "/executable.mpsgraphpackage";
      NSURL* url = [NSURL fileURLWithPath:[NSString stringWithUTF8String:path.c_str()] isDirectory:YES];
      [executable_ serializeToMPSGraphPackageAtURL:url descriptor:nil];
      StatusOr<std::string> packed = PackDirectory(path);
      RemoveDirectoryTree(dir);
      return packed;
    }
  }

  ~MetalExecutable() override {
    executable_ = nil;
    if (!package_dir_.empty()) RemoveDirectoryTree(package_dir_);
  }

  Status Run(const std::vector<DeviceMemory*>& inputs, const std::vector<DeviceMemory*>& outputs) override {
    return StartAndWait(*this, inputs, outputs);
  }

  // Encodes the run into a command buffer and commits it without waiting; the buffer's completion
  // handler reports the run. An output that is an input's memory (donation) is computed into a pool
  // block and copied over the input on the GPU after the graph, in the same command buffer, so that
  // every input is read before any output is written.
  void Start(const std::vector<DeviceMemory*>& inputs, const std::vector<DeviceMemory*>& outputs,
             const std::vector<std::function<Status()>>&, std::function<void(Status)> done) override {
    @autoreleasepool {
      NSMutableArray<MPSGraphTensorData*>* in = [NSMutableArray arrayWithCapacity:inputs.size()];
      for (size_t i = 0; i < inputs.size(); ++i)
        [in addObject:View(static_cast<MetalMemory*>(inputs[i]), i, input_types_[i])];
      std::vector<std::shared_ptr<DeviceMemory>> staging;
      std::vector<std::pair<MetalMemory*, MetalMemory*>> copies;  // (computed in, donated input)
      NSMutableArray<MPSGraphTensorData*>* out = [NSMutableArray arrayWithCapacity:outputs.size()];
      for (size_t j = 0; j < outputs.size(); ++j) {
        auto* m = static_cast<MetalMemory*>(outputs[j]);
        if (std::find(inputs.begin(), inputs.end(), outputs[j]) != inputs.end()) {
          auto tmp = std::make_shared<MetalMemory>(pool_, m->size());
          if (!tmp->ok()) return done(ResourceExhausted("Metal could not allocate a donated output's staging"));
          copies.emplace_back(tmp.get(), m);
          m = tmp.get();
          staging.push_back(std::move(tmp));
        }
        [out addObject:View(m, kOutputPosition + j, output_types_[j])];
      }
      MPSCommandBuffer* cb = [MPSCommandBuffer commandBufferFromCommandQueue:queue_];
      {
        std::lock_guard<std::mutex> lock(mu_);  // one encoder of this executable at a time
        [executable_ encodeToCommandBuffer:cb inputsArray:in resultsArray:out executionDescriptor:nil];
      }
      if (!copies.empty()) {
        id<MTLBlitCommandEncoder> blit = [cb blitCommandEncoder];
        for (auto& [from, to] : copies)
          if (to->size())
            [blit copyFromBuffer:from->buffer()
                     sourceOffset:0
                         toBuffer:to->buffer()
                destinationOffset:0
                             size:to->size()];
        [blit endEncoding];
      }
      auto finish = std::make_shared<std::function<void(Status)>>(std::move(done));
      auto held = std::make_shared<std::vector<std::shared_ptr<DeviceMemory>>>(std::move(staging));
      std::shared_ptr<StartedWork> work = work_;
      work->Begin();
      // The last command buffer MPSGraph encoded into (it may have committed earlier ones): it completes
      // after them, in queue order.
      [cb.rootCommandBuffer addCompletedHandler:^(id<MTLCommandBuffer> b) {
        Status status;
        if (b.status == MTLCommandBufferStatusError) {
          NSString* text = b.error ? b.error.localizedDescription : @"unknown error";
          status = Internal(std::string("Metal command buffer failed: ") + text.UTF8String);
        }
        held->clear();
        work->End();
        (*finish)(std::move(status));
      }];
      [cb commit];
    }
  }

  bool OutputsMayAliasInputs() const override { return true; }

 private:
  static constexpr size_t kOutputPosition = size_t{1} << 19;

  // The shaped types of the parameters and results, which the run's tensor data views take.
  Status DescribeTypes() {
    for (const auto& [ids, types] :
         {std::make_pair(&graph_.inputs, &input_types_), std::make_pair(&graph_.outputs, &output_types_)}) {
      for (int v : *ids) {
        auto dt = ToMPS(graph_.type(v).dtype, nullptr);
        if (!dt.ok()) return dt.status();
        types->push_back([[MPSGraphShapedType alloc] initWithShape:ShapeOf(graph_.type(v)) dataType:*dt]);
      }
    }
    return Status::Ok();
  }

  // The block's view for this executable's position, made once and kept with the block.
  MPSGraphTensorData* View(MetalMemory* m, size_t position, MPSGraphShapedType* type) {
    MetalBlock* block = m->block();
    const uint64_t key = (id_ << 20) | position;
    std::lock_guard<std::mutex> lock(block->mu);
    auto it = block->views.find(key);
    if (it != block->views.end()) return it->second;
    if (block->views.size() >= kMaxViewsPerBlock) block->views.clear();  // views of executables long gone
    MPSGraphTensorData* view = [[MPSGraphTensorData alloc] initWithMTLBuffer:block->buffer
                                                                       shape:type.shape
                                                                    dataType:type.dataType];
    block->views.emplace(key, view);
    return view;
  }
  static constexpr size_t kMaxViewsPerBlock = 16;

  id<MTLCommandQueue> queue_;
  std::shared_ptr<MetalPool> pool_;
  std::shared_ptr<StartedWork> work_;
  mps::Graph graph_;
  const uint64_t id_ = g_next_executable_id.fetch_add(1);
  std::vector<MPSGraphShapedType*> input_types_, output_types_;
  MPSGraphExecutable* executable_ = nil;
  std::string package_dir_;  // where a loaded executable's package lies
  std::mutex mu_;
};

class MetalExecutor : public Executor {
 public:
  explicit MetalExecutor(id<MTLDevice> device)
      : device_(device), queue_([device newCommandQueue]), pool_(std::make_shared<MetalPool>(device)) {}
  std::string name() const override { return "metal"; }

  StatusOr<std::shared_ptr<DeviceMemory>> Allocate(size_t bytes) override {
    auto m = std::make_shared<MetalMemory>(pool_, bytes);
    if (!m->ok()) return ResourceExhausted("Metal could not allocate " + std::to_string(bytes) + " bytes");
    return std::shared_ptr<DeviceMemory>(std::move(m));
  }

  StatusOr<std::unique_ptr<Executable>> Compile(const mps::Graph& graph) override {
    @autoreleasepool {
      if (IsMetalKernelGraph(graph))
        return CompileMetalKernel(device_, queue_, work_, graph,
                                  [](DeviceMemory* m) { return static_cast<MetalMemory*>(m)->buffer(); });
      auto exe = std::make_unique<MetalExecutable>(queue_, pool_, work_, graph);
      Status s = exe->Build(device_);
      if (!s.ok()) return s;
      return std::unique_ptr<Executable>(std::move(exe));
    }
  }

  void AwaitStarted() override { work_->AwaitStarted(); }
  PoolStats MemoryPoolStats() override { return pool_->pool().Stats(); }
  size_t TrimMemoryPool() override { return pool_->pool().Trim(); }
  int64_t MemoryLimit() override { return static_cast<int64_t>([device_ recommendedMaxWorkingSetSize]); }
  StatusOr<std::unique_ptr<Executable>> Load(const mps::Graph& graph, std::string_view serialized) override {
    if (serialized.empty()) return Compile(graph);
    @autoreleasepool {
      auto exe = std::make_unique<MetalExecutable>(queue_, pool_, work_, graph);
      JMP_RETURN_IF_ERROR(exe->Load(serialized));
      return std::unique_ptr<Executable>(std::move(exe));
    }
  }

 private:
  id<MTLDevice> device_;
  id<MTLCommandQueue> queue_;
  std::shared_ptr<MetalPool> pool_;
  std::shared_ptr<StartedWork> work_ = std::make_shared<StartedWork>();
};

}  // namespace

std::unique_ptr<Executor> CreateMetalExecutor() {
  id<MTLDevice> device = MTLCreateSystemDefaultDevice();
  if (!device) return nullptr;
  return std::make_unique<MetalExecutor>(device);
}

}  // namespace jmp::exec

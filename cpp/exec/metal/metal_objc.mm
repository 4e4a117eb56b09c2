// metal_api.h on macOS: each call forwarded to MPSGraph or Metal, converting arguments (vectors to
// NSArrays, handles to objects, NSError to Status) and nothing else. No decisions live here: they are in
// the portable executor, which tests run on Linux over the stand-in. The cross-build type-checks every
// line against the SDK with every warning an error.
#import <Foundation/Foundation.h>
#import <Metal/Metal.h>
#import <MetalPerformanceShadersGraph/MetalPerformanceShadersGraph.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "exec/metal/metal_api.h"
#include "exec/metal/metal_executor.h"

namespace jmp::exec::metal {

namespace {

#define JMP_SAME_VALUE(ours, theirs) static_assert(static_cast<int64_t>(ours) == static_cast<int64_t>(theirs), #theirs)
JMP_SAME_VALUE(DataType::kInvalid, MPSDataTypeInvalid);
JMP_SAME_VALUE(DataType::kFloat32, MPSDataTypeFloat32);
JMP_SAME_VALUE(DataType::kFloat16, MPSDataTypeFloat16);
JMP_SAME_VALUE(DataType::kBFloat16, MPSDataTypeBFloat16);
JMP_SAME_VALUE(DataType::kComplexFloat32, MPSDataTypeComplexFloat32);
JMP_SAME_VALUE(DataType::kComplexFloat16, MPSDataTypeComplexFloat16);
JMP_SAME_VALUE(DataType::kInt8, MPSDataTypeInt8);
JMP_SAME_VALUE(DataType::kInt16, MPSDataTypeInt16);
JMP_SAME_VALUE(DataType::kInt32, MPSDataTypeInt32);
JMP_SAME_VALUE(DataType::kInt64, MPSDataTypeInt64);
JMP_SAME_VALUE(DataType::kUInt8, MPSDataTypeUInt8);
JMP_SAME_VALUE(DataType::kUInt16, MPSDataTypeUInt16);
JMP_SAME_VALUE(DataType::kUInt32, MPSDataTypeUInt32);
JMP_SAME_VALUE(DataType::kUInt64, MPSDataTypeUInt64);
JMP_SAME_VALUE(DataType::kBool, MPSDataTypeBool);
JMP_SAME_VALUE(ScatterMode::kAdd, MPSGraphScatterModeAdd);
JMP_SAME_VALUE(ScatterMode::kSub, MPSGraphScatterModeSub);
JMP_SAME_VALUE(ScatterMode::kMul, MPSGraphScatterModeMul);
JMP_SAME_VALUE(ScatterMode::kDiv, MPSGraphScatterModeDiv);
JMP_SAME_VALUE(ScatterMode::kMin, MPSGraphScatterModeMin);
JMP_SAME_VALUE(ScatterMode::kMax, MPSGraphScatterModeMax);
JMP_SAME_VALUE(ScatterMode::kSet, MPSGraphScatterModeSet);
JMP_SAME_VALUE(PaddingMode::kConstant, MPSGraphPaddingModeConstant);
JMP_SAME_VALUE(PaddingStyle::kExplicit, MPSGraphPaddingStyleExplicit);
JMP_SAME_VALUE(TensorNamedDataLayout::kNCHW, MPSGraphTensorNamedDataLayoutNCHW);
JMP_SAME_VALUE(TensorNamedDataLayout::kNHWC, MPSGraphTensorNamedDataLayoutNHWC);
JMP_SAME_VALUE(TensorNamedDataLayout::kOIHW, MPSGraphTensorNamedDataLayoutOIHW);
JMP_SAME_VALUE(TensorNamedDataLayout::kHWIO, MPSGraphTensorNamedDataLayoutHWIO);
JMP_SAME_VALUE(FFTScalingMode::kNone, MPSGraphFFTScalingModeNone);
JMP_SAME_VALUE(FFTScalingMode::kSize, MPSGraphFFTScalingModeSize);
JMP_SAME_VALUE(FFTScalingMode::kUnitary, MPSGraphFFTScalingModeUnitary);
#undef JMP_SAME_VALUE

MPSGraphTensor* T(Tensor* t) { return (__bridge MPSGraphTensor*)static_cast<void*>(t); }
Tensor* W(MPSGraphTensor* t) { return static_cast<Tensor*>((__bridge void*)t); }
MPSDataType D(DataType d) { return static_cast<MPSDataType>(static_cast<uint32_t>(d)); }

NSArray<NSNumber*>* Numbers(const Shape& v) {
  NSMutableArray<NSNumber*>* a = [NSMutableArray arrayWithCapacity:v.size()];
  for (int64_t x : v) [a addObject:@(x)];
  return a;
}
Shape Vec(NSArray<NSNumber*>* a) {
  Shape v;
  for (NSNumber* n in a) v.push_back(n.longLongValue);
  return v;
}
NSArray<MPSGraphTensor*>* Array(const Tensors& v) {
  NSMutableArray<MPSGraphTensor*>* a = [NSMutableArray arrayWithCapacity:v.size()];
  for (Tensor* t : v) [a addObject:T(t)];
  return a;
}
Tensors Vec(NSArray<MPSGraphTensor*>* a) {
  Tensors v;
  for (MPSGraphTensor* t in a) v.push_back(W(t));
  return v;
}
std::string Text(NSError* e) { return e ? std::string(e.localizedDescription.UTF8String) : "(no message)"; }
std::string Text(NSException* e) {
  return std::string(e.name.UTF8String) + ": " + (e.reason ? e.reason.UTF8String : "");
}
NSURL* Url(const std::string& path) {
  return [NSURL fileURLWithPath:[NSString stringWithUTF8String:path.c_str()] isDirectory:YES];
}
MPSGraphFFTDescriptor* Descriptor(const FFTDescriptor& f) {
  MPSGraphFFTDescriptor* d = [MPSGraphFFTDescriptor descriptor];
  d.inverse = f.inverse;
  d.scalingMode = static_cast<MPSGraphFFTScalingMode>(f.scalingMode);
  d.roundToOddHermitean = f.roundToOddHermitean;
  return d;
}
MPSGraphPooling4DOpDescriptor* Descriptor(const Pooling4DOpDescriptor& p) {
  MPSGraphPooling4DOpDescriptor* d =
      [MPSGraphPooling4DOpDescriptor descriptorWithKernelSizes:Numbers(p.kernelSizes)
                                                       strides:Numbers(p.strides)
                                                 dilationRates:Numbers(p.dilationRates)
                                                 paddingValues:Numbers(p.paddingValues)
                                                  paddingStyle:static_cast<MPSGraphPaddingStyle>(p.paddingStyle)];
  d.includeZeroPadToAverage = p.includeZeroPadToAverage;
  return d;
}
MPSGraphConvolution2DOpDescriptor* Descriptor(const Convolution2DOpDescriptor& c) {
  return [MPSGraphConvolution2DOpDescriptor
      descriptorWithStrideInX:c.strideInX
                    strideInY:c.strideInY
              dilationRateInX:c.dilationRateInX
              dilationRateInY:c.dilationRateInY
                       groups:c.groups
                  paddingLeft:c.paddingLeft
                 paddingRight:c.paddingRight
                   paddingTop:c.paddingTop
                paddingBottom:c.paddingBottom
                 paddingStyle:static_cast<MPSGraphPaddingStyle>(c.paddingStyle)
                   dataLayout:static_cast<MPSGraphTensorNamedDataLayout>(c.dataLayout)
                weightsLayout:static_cast<MPSGraphTensorNamedDataLayout>(c.weightsLayout)];
}
Status StatusOf(id<MTLCommandBuffer> b) {
  if (b.status != MTLCommandBufferStatusError) return Status::Ok();
  return Internal(Text(b.error));
}

class ObjcBuffer : public Buffer {
 public:
  explicit ObjcBuffer(id<MTLBuffer> b) : b_(b) {}
  void* contents() override { return [b_ contents]; }
  size_t length() override { return [b_ length]; }
  id<MTLBuffer> b_;
};

class ObjcTensorData : public TensorData {
 public:
  explicit ObjcTensorData(MPSGraphTensorData* d) : d_(d) {}
  MPSGraphTensorData* d_;
};

NSArray<MPSGraphTensorData*>* Array(const std::vector<TensorData*>& v) {
  NSMutableArray<MPSGraphTensorData*>* a = [NSMutableArray arrayWithCapacity:v.size()];
  for (TensorData* t : v) [a addObject:static_cast<ObjcTensorData*>(t)->d_];
  return a;
}

class ObjcBlit : public BlitCommandEncoder {
 public:
  explicit ObjcBlit(id<MTLBlitCommandEncoder> e) : e_(e) {}
  void copyFromBuffer(Buffer& sourceBuffer, size_t sourceOffset, Buffer& toBuffer, size_t destinationOffset,
                      size_t size) override {
    [e_ copyFromBuffer:static_cast<ObjcBuffer&>(sourceBuffer).b_
             sourceOffset:sourceOffset
                 toBuffer:static_cast<ObjcBuffer&>(toBuffer).b_
        destinationOffset:destinationOffset
                     size:size];
  }
  void endEncoding() override { [e_ endEncoding]; }
  id<MTLBlitCommandEncoder> e_;
};

class ObjcPipeline : public ComputePipelineState {
 public:
  explicit ObjcPipeline(id<MTLComputePipelineState> p) : p_(p) {}
  uint64_t maxTotalThreadsPerThreadgroup() override { return [p_ maxTotalThreadsPerThreadgroup]; }
  id<MTLComputePipelineState> p_;
};

class ObjcCompute : public ComputeCommandEncoder {
 public:
  explicit ObjcCompute(id<MTLComputeCommandEncoder> e) : e_(e) {}
  void setComputePipelineState(ComputePipelineState& state) override {
    [e_ setComputePipelineState:static_cast<ObjcPipeline&>(state).p_];
  }
  void setBuffer(Buffer& buffer, size_t offset, uint64_t atIndex) override {
    [e_ setBuffer:static_cast<ObjcBuffer&>(buffer).b_ offset:offset atIndex:atIndex];
  }
  void dispatchThreads(const std::array<uint64_t, 3>& grid, const std::array<uint64_t, 3>& group) override {
    [e_ dispatchThreads:MTLSizeMake(grid[0], grid[1], grid[2])
        threadsPerThreadgroup:MTLSizeMake(group[0], group[1], group[2])];
  }
  void endEncoding() override { [e_ endEncoding]; }
  id<MTLComputeCommandEncoder> e_;
};

class ObjcCommandBuffer : public CommandBuffer {
 public:
  explicit ObjcCommandBuffer(MPSCommandBuffer* cb) : cb_(cb) {}
  std::unique_ptr<BlitCommandEncoder> blitCommandEncoder() override {
    return std::make_unique<ObjcBlit>([cb_ blitCommandEncoder]);
  }
  std::unique_ptr<ComputeCommandEncoder> computeCommandEncoder() override {
    return std::make_unique<ObjcCompute>([cb_ computeCommandEncoder]);
  }
  void addCompletedHandler(std::function<void(Status)> handler) override {
    [cb_.rootCommandBuffer addCompletedHandler:^(id<MTLCommandBuffer> b) { handler(StatusOf(b)); }];
  }
  void commit() override { [cb_ commit]; }
  MPSCommandBuffer* cb_;
};

class ObjcQueue : public CommandQueue {
 public:
  explicit ObjcQueue(id<MTLCommandQueue> q) : q_(q) {}
  std::unique_ptr<CommandBuffer> commandBuffer() override {
    return std::make_unique<ObjcCommandBuffer>([MPSCommandBuffer commandBufferFromCommandQueue:q_]);
  }
  id<MTLCommandQueue> q_;
};

class ObjcExecutable : public GraphExecutable {
 public:
  explicit ObjcExecutable(MPSGraphExecutable* e) : e_(e) {}
  Tensors feedTensors() override { return Vec(e_.feedTensors); }
  Tensors targetTensors() override { return Vec(e_.targetTensors); }
  void encodeToCommandBuffer(CommandBuffer& commandBuffer, const std::vector<TensorData*>& inputsArray,
                             const std::vector<TensorData*>& resultsArray,
                             std::function<void(Status)> completionHandler) override {
    MPSGraphExecutableExecutionDescriptor* d = [[MPSGraphExecutableExecutionDescriptor alloc] init];
    d.completionHandler = ^(NSArray<MPSGraphTensorData*>*, NSError* error) {
      completionHandler(error ? Internal(Text(error)) : Status::Ok());
    };
    [e_ encodeToCommandBuffer:static_cast<ObjcCommandBuffer&>(commandBuffer).cb_
                  inputsArray:Array(inputsArray)
                 resultsArray:Array(resultsArray)
          executionDescriptor:d];
  }
  Status serializeToMPSGraphPackageAtURL(const std::string& path) override {
    @try {
      [e_ serializeToMPSGraphPackageAtURL:Url(path) descriptor:nil];
    } @catch (NSException* e) {
      return Internal("serializeToMPSGraphPackageAtURL: " + Text(e));
    }
    return Status::Ok();
  }
  MPSGraphExecutable* e_;
};

class ObjcDevice;

class ObjcGraph : public Graph {
 public:
  ObjcGraph() : g_([[MPSGraph alloc] init]) {}
  Shape shapeOf(Tensor* t) override { return Vec(T(t).shape); }
  DataType dataTypeOf(Tensor* t) override { return static_cast<DataType>(T(t).dataType); }
  Tensor* placeholderWithShape(const Shape& shape, DataType dataType) override {
    return W([g_ placeholderWithShape:Numbers(shape) dataType:D(dataType) name:nil]);
  }
  Tensor* constantWithData(const void* data, size_t length, const Shape& shape, DataType dataType) override {
    return W([g_ constantWithData:[NSData dataWithBytes:data length:length] shape:Numbers(shape) dataType:D(dataType)]);
  }
  Tensor* constantWithScalar(double scalar, const Shape& shape, DataType dataType) override {
    return W([g_ constantWithScalar:scalar shape:Numbers(shape) dataType:D(dataType)]);
  }
  Tensor* coordinateAlongAxis(int64_t axis, const Shape& withShape) override {
    return W([g_ coordinateAlongAxis:axis withShape:Numbers(withShape) name:nil]);
  }
  Tensor* castTensor(Tensor* t, DataType toType) override { return W([g_ castTensor:T(t) toType:D(toType) name:nil]); }
  Tensor* reinterpretCastTensor(Tensor* t, DataType toType) override {
    return W([g_ reinterpretCastTensor:T(t) toType:D(toType) name:nil]);
  }
  Tensor* reshapeTensor(Tensor* t, const Shape& s) override {
    return W([g_ reshapeTensor:T(t) withShape:Numbers(s) name:nil]);
  }
  Tensor* transposeTensor(Tensor* t, const Shape& p) override {
    return W([g_ transposeTensor:T(t) permutation:Numbers(p) name:nil]);
  }
  Tensor* broadcastTensor(Tensor* t, const Shape& s) override {
    return W([g_ broadcastTensor:T(t) toShape:Numbers(s) name:nil]);
  }
  Tensor* sliceTensor(Tensor* t, const Shape& starts, const Shape& ends, const Shape& strides) override {
    return W([g_ sliceTensor:T(t) starts:Numbers(starts) ends:Numbers(ends) strides:Numbers(strides) name:nil]);
  }
  Tensor* concatTensors(const Tensors& tensors, int64_t dimension) override {
    return W([g_ concatTensors:Array(tensors) dimension:dimension name:nil]);
  }
  Tensor* padTensor(Tensor* t, PaddingMode mode, const Shape& left, const Shape& right, double value) override {
    return W([g_ padTensor:T(t)
           withPaddingMode:static_cast<MPSGraphPaddingMode>(mode)
               leftPadding:Numbers(left)
              rightPadding:Numbers(right)
             constantValue:value
                      name:nil]);
  }
  Tensor* reverseTensor(Tensor* t, const Shape& axes) override {
    return W([g_ reverseTensor:T(t) axes:Numbers(axes) name:nil]);
  }
#define JMP_MPS_UNARY(Name, macos, selector, domain) \
  Tensor* selector(Tensor* t) override { return W([g_ selector:T(t) name:nil]); }
#define JMP_MPS_BINARY(Name, macos, primary, secondary, domain) \
  Tensor* primary(Tensor* a, Tensor* b) override { return W([g_ primary:T(a) secondary:T(b) name:nil]); }
#include "mps/op_kinds.def"
  Tensor* selectWithPredicateTensor(Tensor* p, Tensor* t, Tensor* f) override {
    return W([g_ selectWithPredicateTensor:T(p) truePredicateTensor:T(t) falsePredicateTensor:T(f) name:nil]);
  }
  Tensor* clampWithTensor(Tensor* x, Tensor* lo, Tensor* hi) override {
    return W([g_ clampWithTensor:T(x) minValueTensor:T(lo) maxValueTensor:T(hi) name:nil]);
  }
  Tensor* matrixMultiplicationWithPrimaryTensor(Tensor* a, Tensor* b) override {
    return W([g_ matrixMultiplicationWithPrimaryTensor:T(a) secondaryTensor:T(b) name:nil]);
  }
  Tensor* reductionSumWithTensor(Tensor* t, const Shape& axes) override {
    return W([g_ reductionSumWithTensor:T(t) axes:Numbers(axes) name:nil]);
  }
  Tensor* reductionProductWithTensor(Tensor* t, const Shape& axes) override {
    return W([g_ reductionProductWithTensor:T(t) axes:Numbers(axes) name:nil]);
  }
  Tensor* reductionMaximumPropagateNaNWithTensor(Tensor* t, const Shape& axes) override {
    return W([g_ reductionMaximumPropagateNaNWithTensor:T(t) axes:Numbers(axes) name:nil]);
  }
  Tensor* reductionMinimumPropagateNaNWithTensor(Tensor* t, const Shape& axes) override {
    return W([g_ reductionMinimumPropagateNaNWithTensor:T(t) axes:Numbers(axes) name:nil]);
  }
  Tensor* reductionAndWithTensor(Tensor* t, const Shape& axes) override {
    return W([g_ reductionAndWithTensor:T(t) axes:Numbers(axes) name:nil]);
  }
  Tensor* reductionOrWithTensor(Tensor* t, const Shape& axes) override {
    return W([g_ reductionOrWithTensor:T(t) axes:Numbers(axes) name:nil]);
  }
  Tensor* reductionArgMaximumWithTensor(Tensor* t, int64_t axis) override {
    return W([g_ reductionArgMaximumWithTensor:T(t) axis:axis name:nil]);
  }
  Tensor* reductionArgMinimumWithTensor(Tensor* t, int64_t axis) override {
    return W([g_ reductionArgMinimumWithTensor:T(t) axis:axis name:nil]);
  }
  Tensor* fastFourierTransformWithTensor(Tensor* t, const Shape& axes, const FFTDescriptor& d) override {
    return W([g_ fastFourierTransformWithTensor:T(t) axes:Numbers(axes) descriptor:Descriptor(d) name:nil]);
  }
  Tensor* realToHermiteanFFTWithTensor(Tensor* t, const Shape& axes, const FFTDescriptor& d) override {
    return W([g_ realToHermiteanFFTWithTensor:T(t) axes:Numbers(axes) descriptor:Descriptor(d) name:nil]);
  }
  Tensor* HermiteanToRealFFTWithTensor(Tensor* t, const Shape& axes, const FFTDescriptor& d) override {
    return W([g_ HermiteanToRealFFTWithTensor:T(t) axes:Numbers(axes) descriptor:Descriptor(d) name:nil]);
  }
  Tensor* sortWithTensor(Tensor* t, int64_t axis, bool descending) override {
    return W([g_ sortWithTensor:T(t) axis:axis descending:descending name:nil]);
  }
  Tensor* argSortWithTensor(Tensor* t, int64_t axis, bool descending) override {
    return W([g_ argSortWithTensor:T(t) axis:axis descending:descending name:nil]);
  }
  Tensors topKWithSourceTensor(Tensor* source, uint64_t k) override {
    return Vec([g_ topKWithSourceTensor:T(source) k:k name:nil]);
  }
  Tensor* cumulativeSumWithTensor(Tensor* t, int64_t axis, bool exclusive, bool reverse) override {
    return W([g_ cumulativeSumWithTensor:T(t) axis:axis exclusive:exclusive reverse:reverse name:nil]);
  }
  Tensor* cumulativeProductWithTensor(Tensor* t, int64_t axis, bool exclusive, bool reverse) override {
    return W([g_ cumulativeProductWithTensor:T(t) axis:axis exclusive:exclusive reverse:reverse name:nil]);
  }
  Tensor* cumulativeMaximumWithTensor(Tensor* t, int64_t axis, bool exclusive, bool reverse) override {
    return W([g_ cumulativeMaximumWithTensor:T(t) axis:axis exclusive:exclusive reverse:reverse name:nil]);
  }
  Tensor* cumulativeMinimumWithTensor(Tensor* t, int64_t axis, bool exclusive, bool reverse) override {
    return W([g_ cumulativeMinimumWithTensor:T(t) axis:axis exclusive:exclusive reverse:reverse name:nil]);
  }
  Tensor* gatherAlongAxis(int64_t axis, Tensor* updates, Tensor* indices) override {
    return W([g_ gatherAlongAxis:axis withUpdatesTensor:T(updates) indicesTensor:T(indices) name:nil]);
  }
  Tensor* gatherNDWithUpdatesTensor(Tensor* updates, Tensor* indices, uint64_t batchDimensions) override {
    return W([g_ gatherNDWithUpdatesTensor:T(updates)
                             indicesTensor:T(indices)
                           batchDimensions:batchDimensions
                                      name:nil]);
  }
  Tensor* scatterNDWithDataTensor(Tensor* data, Tensor* updates, Tensor* indices, uint64_t batchDimensions,
                                  ScatterMode mode) override {
    return W([g_ scatterNDWithDataTensor:T(data)
                           updatesTensor:T(updates)
                           indicesTensor:T(indices)
                         batchDimensions:batchDimensions
                                    mode:static_cast<MPSGraphScatterMode>(mode)
                                    name:nil]);
  }
  Tensor* scatterAlongAxis(int64_t axis, Tensor* data, Tensor* updates, Tensor* indices, ScatterMode mode) override {
    return W([g_ scatterAlongAxis:axis
                   withDataTensor:T(data)
                    updatesTensor:T(updates)
                    indicesTensor:T(indices)
                             mode:static_cast<MPSGraphScatterMode>(mode)
                             name:nil]);
  }
  Tensor* convolution2DWithSourceTensor(Tensor* source, Tensor* weights, const Convolution2DOpDescriptor& d) override {
    return W([g_ convolution2DWithSourceTensor:T(source) weightsTensor:T(weights) descriptor:Descriptor(d) name:nil]);
  }
  Tensor* maxPooling4DWithSourceTensor(Tensor* source, const Pooling4DOpDescriptor& d) override {
    return W([g_ maxPooling4DWithSourceTensor:T(source) descriptor:Descriptor(d) name:nil]);
  }
  Tensor* avgPooling4DWithSourceTensor(Tensor* source, const Pooling4DOpDescriptor& d) override {
    return W([g_ avgPooling4DWithSourceTensor:T(source) descriptor:Descriptor(d) name:nil]);
  }
  Tensor* maxPooling4DGradientWithGradientTensor(Tensor* gradient, Tensor* source,
                                                 const Pooling4DOpDescriptor& d) override {
    return W([g_ maxPooling4DGradientWithGradientTensor:T(gradient)
                                           sourceTensor:T(source)
                                             descriptor:Descriptor(d)
                                                   name:nil]);
  }
  Tensors whileWithInitialInputs(const Tensors& initialInputs, const WhileBeforeBlock& before,
                                 const WhileAfterBlock& after) override {
    const WhileBeforeBlock* b = &before;
    const WhileAfterBlock* a = &after;
    return Vec([g_ whileWithInitialInputs:Array(initialInputs)
        before:^MPSGraphTensor*(NSArray<MPSGraphTensor*>* inputTensors,
                                NSMutableArray<MPSGraphTensor*>* resultTensors) {
          Tensors results;
          Tensor* predicate = (*b)(Vec(inputTensors), results);
          for (Tensor* t : results) [resultTensors addObject:T(t)];
          return T(predicate);
        }
        after:^NSArray<MPSGraphTensor*>*(NSArray<MPSGraphTensor*>* bodyBlockArguments) {
          return Array((*a)(Vec(bodyBlockArguments)));
        }
        name:nil]);
  }
  Tensors ifWithPredicateTensor(Tensor* predicate, const IfBlock& thenBlock, const IfBlock& elseBlock) override {
    const IfBlock* t = &thenBlock;
    const IfBlock* e = &elseBlock;
    return Vec([g_ ifWithPredicateTensor:T(predicate)
        thenBlock:^NSArray<MPSGraphTensor*>* { return Array((*t)()); }
        elseBlock:^NSArray<MPSGraphTensor*>* { return Array((*e)()); }
        name:nil]);
  }
  StatusOr<std::unique_ptr<GraphExecutable>> compileWithDevice(Device& device,
                                                               const std::vector<std::pair<Tensor*, ShapedType>>& feeds,
                                                               const Tensors& targets) override;

 private:
  MPSGraph* g_;
};

class ObjcDevice : public Device {
 public:
  explicit ObjcDevice(id<MTLDevice> d) : d_(d) {}
  void autoreleasepool(const std::function<void()>& body) override {
    @autoreleasepool {
      body();
    }
  }
  uint64_t recommendedMaxWorkingSetSize() override { return [d_ recommendedMaxWorkingSetSize]; }
  std::unique_ptr<CommandQueue> newCommandQueue() override { return std::make_unique<ObjcQueue>([d_ newCommandQueue]); }
  std::unique_ptr<Buffer> newBufferWithLength(size_t length) override {
    id<MTLBuffer> b = [d_ newBufferWithLength:length options:MTLResourceStorageModeShared];
    if (!b) return nullptr;
    return std::make_unique<ObjcBuffer>(b);
  }
  std::unique_ptr<Graph> newGraph() override { return std::make_unique<ObjcGraph>(); }
  std::unique_ptr<TensorData> newTensorData(Buffer& buffer, const Shape& shape, DataType dataType) override {
    return std::make_unique<ObjcTensorData>([[MPSGraphTensorData alloc]
        initWithMTLBuffer:static_cast<ObjcBuffer&>(buffer).b_
                    shape:Numbers(shape)
                 dataType:D(dataType)]);
  }
  StatusOr<std::unique_ptr<GraphExecutable>> newExecutableWithMPSGraphPackageAtURL(const std::string& path) override {
    MPSGraphExecutable* e = nil;
    @try {
      e = [[MPSGraphExecutable alloc] initWithMPSGraphPackageAtURL:Url(path) compilationDescriptor:nil];
    } @catch (NSException* x) {
      return InvalidArgument("initWithMPSGraphPackageAtURL: " + Text(x));
    }
    if (!e) return InvalidArgument("initWithMPSGraphPackageAtURL: no executable");
    return std::unique_ptr<GraphExecutable>(new ObjcExecutable(e));
  }
  StatusOr<std::unique_ptr<ComputePipelineState>> newComputePipelineState(const std::string& source,
                                                                          const std::string& function) override {
    NSError* error = nil;
    id<MTLLibrary> library = [d_ newLibraryWithSource:[NSString stringWithUTF8String:source.c_str()]
                                              options:nil
                                                error:&error];
    if (!library) return InvalidArgument("the Metal compiler rejected the source:\n" + Text(error));
    id<MTLFunction> f = [library newFunctionWithName:[NSString stringWithUTF8String:function.c_str()]];
    if (!f) return InvalidArgument("the source has no kernel function named '" + function + "'");
    id<MTLComputePipelineState> p = [d_ newComputePipelineStateWithFunction:f error:&error];
    if (!p) return InvalidArgument("no compute pipeline: " + Text(error));
    return std::unique_ptr<ComputePipelineState>(new ObjcPipeline(p));
  }
  id<MTLDevice> d_;
};

StatusOr<std::unique_ptr<GraphExecutable>> ObjcGraph::compileWithDevice(
    Device& device, const std::vector<std::pair<Tensor*, ShapedType>>& feeds, const Tensors& targets) {
  NSMutableDictionary<MPSGraphTensor*, MPSGraphShapedType*>* dict = [NSMutableDictionary dictionary];
  for (const auto& [t, type] : feeds)
    dict[T(t)] = [[MPSGraphShapedType alloc] initWithShape:Numbers(type.shape) dataType:D(type.dataType)];
  MPSGraphExecutable* e = nil;
  @try {
    e = [g_ compileWithDevice:[MPSGraphDevice deviceWithMTLDevice:static_cast<ObjcDevice&>(device).d_]
                        feeds:dict
                targetTensors:Array(targets)
             targetOperations:nil
        compilationDescriptor:nil];
  } @catch (NSException* x) {
    return Internal("compileWithDevice: " + Text(x));
  }
  if (!e) return Internal("MPSGraph failed to compile the executable");
  return std::unique_ptr<GraphExecutable>(new ObjcExecutable(e));
}

}  // namespace

}  // namespace jmp::exec::metal

namespace jmp::exec {

std::shared_ptr<metal::Device> SystemDefaultMetalDevice() {
  id<MTLDevice> device = MTLCreateSystemDefaultDevice();
  if (!device) return nullptr;
  return std::make_shared<metal::ObjcDevice>(device);
}

}  // namespace jmp::exec

// The MPSGraph and Metal calls the Metal executor makes, as a narrow C++ interface named after their
// selectors. Everything that decides something (which call an op makes and with which arguments,
// descriptors, feed and result order, command-buffer lifecycle and errors, the pool, donation, packages)
// is portable C++ written against it (metal_graph_builder.cc, metal_executor.cc, metal_kernel.cc). Two
// implementations:
//   - metal_objc.mm (macOS): one forwarding function per call into MPSGraph and Metal, type-checked
//     against the SDK by the cross-build; it converts arguments and nothing else.
//   - exec/standin (everywhere): a strict stand-in that enforces what Apple's headers require and
//     computes what they define, so that the executor's own logic runs in every test on Linux.
// A call's contract is its header's doc comment; where this interface narrows it (a descriptor with only
// the fields the executor sets, a block as a std::function), the comment says so.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "support/status.h"

namespace jmp::exec::metal {

// MPSDataType, with the SDK's values (metal_objc.mm checks each against the SDK at compile time).
enum class DataType : uint32_t {
  kInvalid = 0,
  kFloat32 = 0x10000020,
  kFloat16 = 0x10000010,
  kBFloat16 = 0x90000010,
  kComplexFloat32 = 0x11000040,
  kComplexFloat16 = 0x11000020,
  kInt8 = 0x20000008,
  kInt16 = 0x20000010,
  kInt32 = 0x20000020,
  kInt64 = 0x20000040,
  kUInt8 = 0x8,
  kUInt16 = 0x10,
  kUInt32 = 0x20,
  kUInt64 = 0x40,
  kBool = 0x80000008,
};

using Shape = std::vector<int64_t>;  // MPSShape (an NSArray of NSNumber)

// MPSGraphShapedType.
struct ShapedType {
  Shape shape;
  DataType dataType = DataType::kInvalid;
};

// MPSGraphTensor: a symbolic value of one graph, owned by that graph; a handle stays valid while the
// graph (or, for feedTensors/targetTensors, the executable) that gave it lives. Opaque here.
struct Tensor;
using Tensors = std::vector<Tensor*>;

// Enums with the SDK's values (checked in metal_objc.mm).
enum class ScatterMode : int64_t { kAdd = 0, kSub = 1, kMul = 2, kDiv = 3, kMin = 4, kMax = 5, kSet = 6 };
enum class PaddingMode : int64_t { kConstant = 0 };  // MPSGraphPaddingMode: the one mode used
enum class PaddingStyle : uint64_t { kExplicit = 0 };
enum class TensorNamedDataLayout : uint64_t { kNCHW = 0, kNHWC = 1, kOIHW = 2, kHWIO = 3 };
enum class FFTScalingMode : uint64_t { kNone = 0, kSize = 1, kUnitary = 2 };

// MPSGraphFFTDescriptor (its properties).
struct FFTDescriptor {
  bool inverse = false;
  FFTScalingMode scalingMode = FFTScalingMode::kNone;
  bool roundToOddHermitean = false;
};

// MPSGraphConvolution2DOpDescriptor, as descriptorWithStrideInX:...weightsLayout: takes it.
struct Convolution2DOpDescriptor {
  uint64_t strideInX = 1, strideInY = 1, dilationRateInX = 1, dilationRateInY = 1, groups = 1;
  uint64_t paddingLeft = 0, paddingRight = 0, paddingTop = 0, paddingBottom = 0;
  PaddingStyle paddingStyle = PaddingStyle::kExplicit;
  TensorNamedDataLayout dataLayout = TensorNamedDataLayout::kNHWC;
  TensorNamedDataLayout weightsLayout = TensorNamedDataLayout::kHWIO;
};

// MPSGraphPooling4DOpDescriptor, as descriptorWithKernelSizes:strides:dilationRates:paddingValues:
// paddingStyle: takes it, plus its includeZeroPadToAverage property. paddingValues holds two entries
// per dimension (before, after).
struct Pooling4DOpDescriptor {
  Shape kernelSizes, strides, dilationRates, paddingValues;
  PaddingStyle paddingStyle = PaddingStyle::kExplicit;
  bool includeZeroPadToAverage = false;
};

class Buffer;
class CommandBuffer;
class Device;
class GraphExecutable;
class TensorData;

// MPSGraph. Each method is the call of the same name, with `name:nil`.
class Graph {
 public:
  virtual ~Graph() = default;

  // MPSGraphTensor's shape and dataType properties: what the graph inferred for a tensor it made.
  virtual Shape shapeOf(Tensor* tensor) = 0;
  virtual DataType dataTypeOf(Tensor* tensor) = 0;

  virtual Tensor* placeholderWithShape(const Shape& shape, DataType dataType) = 0;
  // constantWithData:shape:dataType: (the bytes are copied).
  virtual Tensor* constantWithData(const void* data, size_t length, const Shape& shape, DataType dataType) = 0;
  virtual Tensor* constantWithScalar(double scalar, const Shape& shape, DataType dataType) = 0;
  virtual Tensor* coordinateAlongAxis(int64_t axis, const Shape& withShape) = 0;
  virtual Tensor* castTensor(Tensor* tensor, DataType toType) = 0;
  virtual Tensor* reinterpretCastTensor(Tensor* tensor, DataType toType) = 0;
  virtual Tensor* reshapeTensor(Tensor* tensor, const Shape& withShape) = 0;
  virtual Tensor* transposeTensor(Tensor* tensor, const Shape& permutation) = 0;
  virtual Tensor* broadcastTensor(Tensor* tensor, const Shape& toShape) = 0;
  virtual Tensor* sliceTensor(Tensor* tensor, const Shape& starts, const Shape& ends, const Shape& strides) = 0;
  virtual Tensor* concatTensors(const Tensors& tensors, int64_t dimension) = 0;
  virtual Tensor* padTensor(Tensor* tensor, PaddingMode withPaddingMode, const Shape& leftPadding,
                            const Shape& rightPadding, double constantValue) = 0;
  virtual Tensor* reverseTensor(Tensor* tensor, const Shape& axes) = 0;

  // The uniform rows of the op table: `selector:name:` and `primary:secondary:name:`.
#define JMP_MPS_UNARY(name, macos, selector, domain) virtual Tensor* selector(Tensor* tensor) = 0;
#define JMP_MPS_BINARY(name, macos, primary, secondary, domain) \
  virtual Tensor* primary(Tensor* primaryTensor, Tensor* secondaryTensor) = 0;
#include "mps/op_kinds.def"

  virtual Tensor* selectWithPredicateTensor(Tensor* predicateTensor, Tensor* truePredicateTensor,
                                            Tensor* falsePredicateTensor) = 0;
  virtual Tensor* clampWithTensor(Tensor* tensor, Tensor* minValueTensor, Tensor* maxValueTensor) = 0;
  virtual Tensor* matrixMultiplicationWithPrimaryTensor(Tensor* primaryTensor, Tensor* secondaryTensor) = 0;

  virtual Tensor* reductionSumWithTensor(Tensor* tensor, const Shape& axes) = 0;
  virtual Tensor* reductionProductWithTensor(Tensor* tensor, const Shape& axes) = 0;
  virtual Tensor* reductionMaximumPropagateNaNWithTensor(Tensor* tensor, const Shape& axes) = 0;
  virtual Tensor* reductionMinimumPropagateNaNWithTensor(Tensor* tensor, const Shape& axes) = 0;
  virtual Tensor* reductionAndWithTensor(Tensor* tensor, const Shape& axes) = 0;
  virtual Tensor* reductionOrWithTensor(Tensor* tensor, const Shape& axes) = 0;
  virtual Tensor* reductionArgMaximumWithTensor(Tensor* tensor, int64_t axis) = 0;
  virtual Tensor* reductionArgMinimumWithTensor(Tensor* tensor, int64_t axis) = 0;

  virtual Tensor* fastFourierTransformWithTensor(Tensor* tensor, const Shape& axes,
                                                 const FFTDescriptor& descriptor) = 0;
  virtual Tensor* realToHermiteanFFTWithTensor(Tensor* tensor, const Shape& axes, const FFTDescriptor& descriptor) = 0;
  virtual Tensor* HermiteanToRealFFTWithTensor(Tensor* tensor, const Shape& axes, const FFTDescriptor& descriptor) = 0;

  virtual Tensor* sortWithTensor(Tensor* tensor, int64_t axis, bool descending) = 0;
  virtual Tensor* argSortWithTensor(Tensor* tensor, int64_t axis, bool descending) = 0;
  // topKWithSourceTensor:k:name: returns [values, indices].
  virtual Tensors topKWithSourceTensor(Tensor* source, uint64_t k) = 0;

  virtual Tensor* cumulativeSumWithTensor(Tensor* tensor, int64_t axis, bool exclusive, bool reverse) = 0;
  virtual Tensor* cumulativeProductWithTensor(Tensor* tensor, int64_t axis, bool exclusive, bool reverse) = 0;
  virtual Tensor* cumulativeMaximumWithTensor(Tensor* tensor, int64_t axis, bool exclusive, bool reverse) = 0;
  virtual Tensor* cumulativeMinimumWithTensor(Tensor* tensor, int64_t axis, bool exclusive, bool reverse) = 0;

  virtual Tensor* gatherAlongAxis(int64_t axis, Tensor* updatesTensor, Tensor* indicesTensor) = 0;
  virtual Tensor* gatherNDWithUpdatesTensor(Tensor* updatesTensor, Tensor* indicesTensor, uint64_t batchDimensions) = 0;
  virtual Tensor* scatterNDWithDataTensor(Tensor* dataTensor, Tensor* updatesTensor, Tensor* indicesTensor,
                                          uint64_t batchDimensions, ScatterMode mode) = 0;
  virtual Tensor* scatterAlongAxis(int64_t axis, Tensor* dataTensor, Tensor* updatesTensor, Tensor* indicesTensor,
                                   ScatterMode mode) = 0;

  virtual Tensor* convolution2DWithSourceTensor(Tensor* source, Tensor* weights,
                                                const Convolution2DOpDescriptor& descriptor) = 0;
  virtual Tensor* maxPooling4DWithSourceTensor(Tensor* source, const Pooling4DOpDescriptor& descriptor) = 0;
  virtual Tensor* avgPooling4DWithSourceTensor(Tensor* source, const Pooling4DOpDescriptor& descriptor) = 0;
  virtual Tensor* maxPooling4DGradientWithGradientTensor(Tensor* gradient, Tensor* source,
                                                         const Pooling4DOpDescriptor& descriptor) = 0;

  // whileWithInitialInputs:before:after:name:. `before` gets the loop's values, fills `resultTensors`
  // (what `after` gets, and the loop's results when it ends) and returns the predicate; `after` returns
  // the next values. MPSGraph calls both blocks while this call builds the loop.
  using WhileBeforeBlock = std::function<Tensor*(const Tensors& inputTensors, Tensors& resultTensors)>;
  using WhileAfterBlock = std::function<Tensors(const Tensors& bodyBlockArguments)>;
  virtual Tensors whileWithInitialInputs(const Tensors& initialInputs, const WhileBeforeBlock& before,
                                         const WhileAfterBlock& after) = 0;
  // ifWithPredicateTensor:thenBlock:elseBlock:name:; both blocks must return as many tensors, alike.
  using IfBlock = std::function<Tensors()>;
  virtual Tensors ifWithPredicateTensor(Tensor* predicateTensor, const IfBlock& thenBlock,
                                        const IfBlock& elseBlock) = 0;

  // compileWithDevice:feeds:targetTensors:targetOperations:nil compilationDescriptor:nil. `feeds` are
  // the entries of the feeds dictionary (a dictionary: MPSGraph keeps no order of them; the executable's
  // feedTensors says the order it takes its inputs in).
  virtual StatusOr<std::unique_ptr<GraphExecutable>> compileWithDevice(
      Device& device, const std::vector<std::pair<Tensor*, ShapedType>>& feeds, const Tensors& targetTensors) = 0;
};

// MPSGraphExecutable.
class GraphExecutable {
 public:
  virtual ~GraphExecutable() = default;
  // The feedTensors and targetTensors properties: the order of inputsArray and resultsArray. Empty where
  // the property is nil (an executable loaded from a package need not have them).
  virtual Tensors feedTensors() = 0;
  virtual Tensors targetTensors() = 0;
  // encodeToCommandBuffer:inputsArray:resultsArray:executionDescriptor:, the descriptor's completionHandler
  // set to `completionHandler` (Ok, or the NSError's description). The call may commitAndContinue the
  // command buffer; the handler runs once all of the execution's work has completed, on any thread.
  virtual void encodeToCommandBuffer(CommandBuffer& commandBuffer, const std::vector<TensorData*>& inputsArray,
                                     const std::vector<TensorData*>& resultsArray,
                                     std::function<void(Status)> completionHandler) = 0;
  // serializeToMPSGraphPackageAtURL:descriptor:nil, `path` a directory to create.
  virtual Status serializeToMPSGraphPackageAtURL(const std::string& path) = 0;
};

// id<MTLBuffer>, shared storage.
class Buffer {
 public:
  virtual ~Buffer() = default;
  virtual void* contents() = 0;
  virtual size_t length() = 0;
};

// MPSGraphTensorData made with initWithMTLBuffer:shape:dataType: (a view of the buffer, no copy).
class TensorData {
 public:
  virtual ~TensorData() = default;
};

// id<MTLBlitCommandEncoder>.
class BlitCommandEncoder {
 public:
  virtual ~BlitCommandEncoder() = default;
  virtual void copyFromBuffer(Buffer& sourceBuffer, size_t sourceOffset, Buffer& toBuffer, size_t destinationOffset,
                              size_t size) = 0;
  virtual void endEncoding() = 0;
};

// id<MTLComputePipelineState>.
class ComputePipelineState {
 public:
  virtual ~ComputePipelineState() = default;
  virtual uint64_t maxTotalThreadsPerThreadgroup() = 0;
};

// id<MTLComputeCommandEncoder>.
class ComputeCommandEncoder {
 public:
  virtual ~ComputeCommandEncoder() = default;
  virtual void setComputePipelineState(ComputePipelineState& state) = 0;
  virtual void setBuffer(Buffer& buffer, size_t offset, uint64_t atIndex) = 0;
  virtual void dispatchThreads(const std::array<uint64_t, 3>& threadsPerGrid,
                               const std::array<uint64_t, 3>& threadsPerThreadgroup) = 0;
  virtual void endEncoding() = 0;
};

// MPSCommandBuffer made with commandBufferFromCommandQueue:. Encoders and handlers go to the
// rootCommandBuffer of the moment (an MPSGraph encode may have committed earlier ones).
class CommandBuffer {
 public:
  virtual ~CommandBuffer() = default;
  virtual std::unique_ptr<BlitCommandEncoder> blitCommandEncoder() = 0;
  virtual std::unique_ptr<ComputeCommandEncoder> computeCommandEncoder() = 0;
  // [rootCommandBuffer addCompletedHandler:]: Ok, or the buffer's error when its status is Error.
  virtual void addCompletedHandler(std::function<void(Status)> handler) = 0;
  virtual void commit() = 0;
};

// id<MTLCommandQueue>.
class CommandQueue {
 public:
  virtual ~CommandQueue() = default;
  virtual std::unique_ptr<CommandBuffer> commandBuffer() = 0;
};

// id<MTLDevice>, with the constructors of the objects made for it.
class Device {
 public:
  virtual ~Device() = default;
  // Runs `body` inside an @autoreleasepool.
  virtual void autoreleasepool(const std::function<void()>& body) = 0;
  virtual uint64_t recommendedMaxWorkingSetSize() = 0;
  virtual std::unique_ptr<CommandQueue> newCommandQueue() = 0;
  // newBufferWithLength:options:MTLResourceStorageModeShared; null when Metal has no memory for it.
  virtual std::unique_ptr<Buffer> newBufferWithLength(size_t length) = 0;
  // [[MPSGraph alloc] init].
  virtual std::unique_ptr<Graph> newGraph() = 0;
  // [[MPSGraphTensorData alloc] initWithMTLBuffer:shape:dataType:].
  virtual std::unique_ptr<TensorData> newTensorData(Buffer& buffer, const Shape& shape, DataType dataType) = 0;
  // [[MPSGraphExecutable alloc] initWithMPSGraphPackageAtURL:compilationDescriptor:nil]; an error where
  // MPSGraph raises or returns nil.
  virtual StatusOr<std::unique_ptr<GraphExecutable>> newExecutableWithMPSGraphPackageAtURL(const std::string& path) = 0;
  // newLibraryWithSource:options:nil error:, newFunctionWithName: and
  // newComputePipelineStateWithFunction:error:, in one: an InvalidArgument error carries the compiler's
  // message (or names the missing function).
  virtual StatusOr<std::unique_ptr<ComputePipelineState>> newComputePipelineState(const std::string& source,
                                                                                  const std::string& function) = 0;
};

}  // namespace jmp::exec::metal

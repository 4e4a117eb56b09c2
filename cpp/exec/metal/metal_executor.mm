// The Metal executor: one MPSGraph per executable, built once from the MPS op graph (one MPSGraph call
// per op, a switch over the op table), compiled into an MPSGraphExecutable and run on MTLBuffers in
// shared storage. Semantics live in op_kinds.def and the lowering; nothing here decides anything.
#import <Foundation/Foundation.h>
#import <Metal/Metal.h>
#import <MetalPerformanceShadersGraph/MetalPerformanceShadersGraph.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "exec/executor.h"

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
  StatusOr<Tensors> Unary(const mps::Op& op, MPSGraphTensor* x);
  StatusOr<Tensors> Binary(const mps::Op& op, MPSGraphTensor* a, MPSGraphTensor* b);

  MPSGraph* graph_;
};

StatusOr<std::vector<MPSGraphTensor*>> GraphBuilder::Unary(const mps::Op& op, MPSGraphTensor* x) {
  using K = mps::OpKind;
  MPSGraph* g = graph_;
  switch (op.kind) {
    case K::kIdentity: return Tensors{[g identityWithTensor:x name:nil]};
    case K::kNegative: return Tensors{[g negativeWithTensor:x name:nil]};
    case K::kAbsolute: return Tensors{[g absoluteWithTensor:x name:nil]};
    case K::kSign: return Tensors{[g signWithTensor:x name:nil]};
    case K::kExponent: return Tensors{[g exponentWithTensor:x name:nil]};
    case K::kExponentBase2: return Tensors{[g exponentBase2WithTensor:x name:nil]};
    case K::kLogarithm: return Tensors{[g logarithmWithTensor:x name:nil]};
    case K::kLogarithm2: return Tensors{[g logarithmBase2WithTensor:x name:nil]};
    case K::kSquareRoot: return Tensors{[g squareRootWithTensor:x name:nil]};
    case K::kReverseSquareRoot: return Tensors{[g reverseSquareRootWithTensor:x name:nil]};
    case K::kReciprocal: return Tensors{[g reciprocalWithTensor:x name:nil]};
    case K::kSin: return Tensors{[g sinWithTensor:x name:nil]};
    case K::kCos: return Tensors{[g cosWithTensor:x name:nil]};
    case K::kTan: return Tensors{[g tanWithTensor:x name:nil]};
    case K::kTanh: return Tensors{[g tanhWithTensor:x name:nil]};
    case K::kAsin: return Tensors{[g asinWithTensor:x name:nil]};
    case K::kAcos: return Tensors{[g acosWithTensor:x name:nil]};
    case K::kAtan: return Tensors{[g atanWithTensor:x name:nil]};
    case K::kSinh: return Tensors{[g sinhWithTensor:x name:nil]};
    case K::kCosh: return Tensors{[g coshWithTensor:x name:nil]};
    case K::kAsinh: return Tensors{[g asinhWithTensor:x name:nil]};
    case K::kAcosh: return Tensors{[g acoshWithTensor:x name:nil]};
    case K::kAtanh: return Tensors{[g atanhWithTensor:x name:nil]};
    case K::kErf: return Tensors{[g erfWithTensor:x name:nil]};
    case K::kSigmoid: return Tensors{[g sigmoidWithTensor:x name:nil]};
    case K::kFloor: return Tensors{[g floorWithTensor:x name:nil]};
    case K::kCeil: return Tensors{[g ceilWithTensor:x name:nil]};
    case K::kRint: return Tensors{[g rintWithTensor:x name:nil]};
    case K::kRound: return Tensors{[g roundWithTensor:x name:nil]};
    case K::kTruncate: return Tensors{[g truncateWithTensor:x name:nil]};
    case K::kIsFinite: return Tensors{[g isFiniteWithTensor:x name:nil]};
    case K::kIsNaN: return Tensors{[g isNaNWithTensor:x name:nil]};
    case K::kIsInfinite: return Tensors{[g isInfiniteWithTensor:x name:nil]};
    case K::kNot: return Tensors{[g notWithTensor:x name:nil]};
    case K::kBitwiseNot: return Tensors{[g bitwiseNOTWithTensor:x name:nil]};
    case K::kPopulationCount: return Tensors{[g bitwisePopulationCountWithTensor:x name:nil]};
    case K::kRealPart: return Tensors{[g realPartOfTensor:x name:nil]};
    case K::kImaginaryPart: return Tensors{[g imaginaryPartOfTensor:x name:nil]};
    case K::kConjugate: return Tensors{[g conjugateWithTensor:x name:nil]};
    default: return Internal("not a unary op");
  }
}

StatusOr<std::vector<MPSGraphTensor*>> GraphBuilder::Binary(const mps::Op& op, MPSGraphTensor* a, MPSGraphTensor* b) {
  using K = mps::OpKind;
  MPSGraph* g = graph_;
  switch (op.kind) {
    case K::kAdd: return Tensors{[g additionWithPrimaryTensor:a secondaryTensor:b name:nil]};
    case K::kSubtract: return Tensors{[g subtractionWithPrimaryTensor:a secondaryTensor:b name:nil]};
    case K::kMultiply: return Tensors{[g multiplicationWithPrimaryTensor:a secondaryTensor:b name:nil]};
    case K::kDivide: return Tensors{[g divisionWithPrimaryTensor:a secondaryTensor:b name:nil]};
    case K::kModulo: return Tensors{[g moduloWithPrimaryTensor:a secondaryTensor:b name:nil]};
    case K::kMaximum: return Tensors{[g maximumWithNaNPropagationWithPrimaryTensor:a secondaryTensor:b name:nil]};
    case K::kMinimum: return Tensors{[g minimumWithNaNPropagationWithPrimaryTensor:a secondaryTensor:b name:nil]};
    case K::kPower: return Tensors{[g powerWithPrimaryTensor:a secondaryTensor:b name:nil]};
    case K::kAtan2: return Tensors{[g atan2WithPrimaryTensor:a secondaryTensor:b name:nil]};
    case K::kEqual: return Tensors{[g equalWithPrimaryTensor:a secondaryTensor:b name:nil]};
    case K::kNotEqual: return Tensors{[g notEqualWithPrimaryTensor:a secondaryTensor:b name:nil]};
    case K::kLessThan: return Tensors{[g lessThanWithPrimaryTensor:a secondaryTensor:b name:nil]};
    case K::kLessThanOrEqualTo: return Tensors{[g lessThanOrEqualToWithPrimaryTensor:a secondaryTensor:b name:nil]};
    case K::kGreaterThan: return Tensors{[g greaterThanWithPrimaryTensor:a secondaryTensor:b name:nil]};
    case K::kGreaterThanOrEqualTo: return Tensors{[g greaterThanOrEqualToWithPrimaryTensor:a secondaryTensor:b name:nil]};
    case K::kLogicalAnd: return Tensors{[g logicalANDWithPrimaryTensor:a secondaryTensor:b name:nil]};
    case K::kLogicalOr: return Tensors{[g logicalORWithPrimaryTensor:a secondaryTensor:b name:nil]};
    case K::kLogicalXor: return Tensors{[g logicalXORWithPrimaryTensor:a secondaryTensor:b name:nil]};
    case K::kBitwiseAnd: return Tensors{[g bitwiseANDWithPrimaryTensor:a secondaryTensor:b name:nil]};
    case K::kBitwiseOr: return Tensors{[g bitwiseORWithPrimaryTensor:a secondaryTensor:b name:nil]};
    case K::kBitwiseXor: return Tensors{[g bitwiseXORWithPrimaryTensor:a secondaryTensor:b name:nil]};
    case K::kBitwiseLeftShift: return Tensors{[g bitwiseLeftShiftWithPrimaryTensor:a secondaryTensor:b name:nil]};
    case K::kBitwiseRightShift: return Tensors{[g bitwiseRightShiftWithPrimaryTensor:a secondaryTensor:b name:nil]};
    case K::kComplexFromParts: return Tensors{[g complexTensorWithRealTensor:a imaginaryTensor:b name:nil]};
    case K::kMatMul: return Tensors{[g matrixMultiplicationWithPrimaryTensor:a secondaryTensor:b name:nil]};
    default: return Internal("not a binary op");
  }
}

MPSGraphScatterMode ScatterMode(int64_t mode) {
  switch (mode) {
    case 0: return MPSGraphScatterModeAdd;
    case 1: return MPSGraphScatterModeSub;
    case 2: return MPSGraphScatterModeMul;
    case 3: return MPSGraphScatterModeDiv;
    case 4: return MPSGraphScatterModeMin;
    case 5: return MPSGraphScatterModeMax;
    default: return MPSGraphScatterModeSet;
  }
}

MPSGraphPooling4DOpDescriptor* Pooling(const mps::Op& op) {
  std::vector<int64_t> padding;
  for (size_t i = 0; i < op.starts.size(); ++i) {
    padding.push_back(op.starts[i]);
    padding.push_back(op.ends[i]);
  }
  return [MPSGraphPooling4DOpDescriptor descriptorWithKernelSizes:Numbers(op.axes)
                                                          strides:Numbers(op.strides)
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
      NSData* data = [NSData dataWithBytes:op.data.data() length:op.data.size()];
      return Tensors{[G constantWithData:data shape:ShapeOf(out) dataType:dt]};
    }
    case K::kCoordinateAlongAxis: {
      MPSGraphTensor* c = [G coordinateAlongAxis:static_cast<NSInteger>(op.axes.at(0)) withShape:ShapeOf(out) name:nil];
      return Tensors{[G castTensor:c toType:dt name:nil]};
    }
    case K::kIdentity: case K::kNegative: case K::kAbsolute: case K::kSign: case K::kExponent:
    case K::kExponentBase2: case K::kLogarithm: case K::kLogarithm2: case K::kSquareRoot:
    case K::kReverseSquareRoot: case K::kReciprocal: case K::kSin: case K::kCos: case K::kTan:
    case K::kTanh: case K::kAsin: case K::kAcos: case K::kAtan: case K::kSinh: case K::kCosh:
    case K::kAsinh: case K::kAcosh: case K::kAtanh: case K::kErf: case K::kSigmoid: case K::kFloor:
    case K::kCeil: case K::kRint: case K::kRound: case K::kTruncate: case K::kIsFinite: case K::kIsNaN:
    case K::kIsInfinite: case K::kNot: case K::kBitwiseNot: case K::kPopulationCount:
    case K::kRealPart: case K::kImaginaryPart: case K::kConjugate:
      return Unary(op, in.at(0));
    case K::kAdd: case K::kSubtract: case K::kMultiply: case K::kDivide: case K::kModulo: case K::kMaximum:
    case K::kMinimum: case K::kPower: case K::kAtan2: case K::kEqual: case K::kNotEqual: case K::kLessThan:
    case K::kLessThanOrEqualTo: case K::kGreaterThan: case K::kGreaterThanOrEqualTo: case K::kLogicalAnd:
    case K::kLogicalOr: case K::kLogicalXor: case K::kBitwiseAnd: case K::kBitwiseOr: case K::kBitwiseXor:
    case K::kBitwiseLeftShift: case K::kBitwiseRightShift: case K::kComplexFromParts: case K::kMatMul:
      return Binary(op, in.at(0), in.at(1));
    case K::kSelect:
      return Tensors{[G selectWithPredicateTensor:in[0] truePredicateTensor:in[1] falsePredicateTensor:in[2] name:nil]};
    case K::kClamp:
      return Tensors{[G clampWithTensor:in[0] minValueTensor:in[1] maxValueTensor:in[2] name:nil]};
    case K::kCast: return Tensors{[G castTensor:in[0] toType:dt name:nil]};
    case K::kReinterpretCast: return Tensors{[G reinterpretCastTensor:in[0] toType:dt name:nil]};
    case K::kReshape: return Tensors{[G reshapeTensor:in[0] withShape:ShapeOf(out) name:nil]};
    case K::kTranspose: return Tensors{[G transposeTensor:in[0] permutation:Numbers(op.axes) name:nil]};
    case K::kBroadcast: return Tensors{[G broadcastTensor:in[0] toShape:ShapeOf(out) name:nil]};
    case K::kSlice:
      return Tensors{[G sliceTensor:in[0] starts:Numbers(op.starts) ends:Numbers(op.ends) strides:Numbers(op.strides) name:nil]};
    case K::kConcat: {
      NSMutableArray<MPSGraphTensor*>* list = [NSMutableArray array];
      for (MPSGraphTensor* t : in) [list addObject:t];
      return Tensors{[G concatTensors:list dimension:static_cast<NSInteger>(op.axes.at(0)) name:nil]};
    }
    case K::kPad:
      return Tensors{[G padTensor:in[0] withPaddingMode:MPSGraphPaddingModeConstant leftPadding:Numbers(op.starts)
                     rightPadding:Numbers(op.ends) constantValue:op.scalar name:nil]};
    case K::kReverse: return Tensors{[G reverseTensor:in[0] axes:Numbers(op.axes) name:nil]};
    case K::kReductionSum: return Tensors{[G reductionSumWithTensor:in[0] axes:Numbers(op.axes) name:nil]};
    case K::kReductionProduct: return Tensors{[G reductionProductWithTensor:in[0] axes:Numbers(op.axes) name:nil]};
    case K::kReductionMaximum:
      return Tensors{[G reductionMaximumPropagateNaNWithTensor:in[0] axes:Numbers(op.axes) name:nil]};
    case K::kReductionMinimum:
      return Tensors{[G reductionMinimumPropagateNaNWithTensor:in[0] axes:Numbers(op.axes) name:nil]};
    case K::kReductionAnd: return Tensors{[G reductionAndWithTensor:in[0] axes:Numbers(op.axes) name:nil]};
    case K::kReductionOr: return Tensors{[G reductionOrWithTensor:in[0] axes:Numbers(op.axes) name:nil]};
    case K::kReductionArgMaximum:
      return Tensors{[G reductionArgMaximumWithTensor:in[0] axis:static_cast<NSInteger>(op.axes.at(0)) name:nil]};
    case K::kReductionArgMinimum:
      return Tensors{[G reductionArgMinimumWithTensor:in[0] axis:static_cast<NSInteger>(op.axes.at(0)) name:nil]};
    case K::kFFT: {
      MPSGraphFFTDescriptor* d = [MPSGraphFFTDescriptor descriptor];
      d.inverse = op.int_attr == 1;
      d.scalingMode = op.int_attr == 1 ? MPSGraphFFTScalingModeSize : MPSGraphFFTScalingModeNone;
      return Tensors{[G fastFourierTransformWithTensor:in[0] axes:Numbers(op.axes) descriptor:d name:nil]};
    }
    case K::kRealToHermiteanFFT: {
      MPSGraphFFTDescriptor* d = [MPSGraphFFTDescriptor descriptor];
      return Tensors{[G realToHermiteanFFTWithTensor:in[0] axes:Numbers(op.axes) descriptor:d name:nil]};
    }
    case K::kHermiteanToRealFFT: {
      MPSGraphFFTDescriptor* d = [MPSGraphFFTDescriptor descriptor];
      d.inverse = YES;
      d.scalingMode = MPSGraphFFTScalingModeSize;
      d.roundToOddHermitean = out.shape.empty() ? NO : (out.shape.back() % 2 == 1);
      return Tensors{[G HermiteanToRealFFTWithTensor:in[0] axes:Numbers(op.axes) descriptor:d name:nil]};
    }
    case K::kSort:
      return Tensors{[G sortWithTensor:in[0] axis:static_cast<NSInteger>(op.axes.at(0)) descending:op.int_attr == 1 name:nil]};
    case K::kArgSort:
      return Tensors{[G argSortWithTensor:in[0] axis:static_cast<NSInteger>(op.axes.at(0)) descending:op.int_attr == 1 name:nil]};
    case K::kTopK: {
      NSArray<MPSGraphTensor*>* r = [G topKWithSourceTensor:in[0] k:static_cast<NSUInteger>(op.int_attr) name:nil];
      return Tensors{r[0], r[1]};
    }
    case K::kCumulativeSum:
      return Tensors{[G cumulativeSumWithTensor:in[0] axis:static_cast<NSInteger>(op.axes.at(0)) exclusive:(op.int_attr & 1) != 0
                                        reverse:(op.int_attr & 2) != 0 name:nil]};
    case K::kCumulativeProduct:
      return Tensors{[G cumulativeProductWithTensor:in[0] axis:static_cast<NSInteger>(op.axes.at(0)) exclusive:(op.int_attr & 1) != 0
                                            reverse:(op.int_attr & 2) != 0 name:nil]};
    case K::kCumulativeMaximum:
      return Tensors{[G cumulativeMaximumWithTensor:in[0] axis:static_cast<NSInteger>(op.axes.at(0)) exclusive:(op.int_attr & 1) != 0
                                            reverse:(op.int_attr & 2) != 0 name:nil]};
    case K::kCumulativeMinimum:
      return Tensors{[G cumulativeMinimumWithTensor:in[0] axis:static_cast<NSInteger>(op.axes.at(0)) exclusive:(op.int_attr & 1) != 0
                                            reverse:(op.int_attr & 2) != 0 name:nil]};
    case K::kGatherAlongAxis:
      return Tensors{[G gatherAlongAxis:static_cast<NSInteger>(op.axes.at(0)) withUpdatesTensor:in[0] indicesTensor:in[1] name:nil]};
    case K::kGatherND:
      return Tensors{[G gatherNDWithUpdatesTensor:in[0] indicesTensor:in[1] batchDimensions:static_cast<NSUInteger>(op.int_attr) name:nil]};
    case K::kScatterND:
      return Tensors{[G scatterNDWithDataTensor:in[0] updatesTensor:in[1] indicesTensor:in[2] batchDimensions:0
                                           mode:ScatterMode(op.int_attr) name:nil]};
    case K::kScatterAlongAxis:
      return Tensors{[G scatterAlongAxis:static_cast<NSInteger>(op.axes.at(0)) withDataTensor:in[0] updatesTensor:in[1]
                           indicesTensor:in[2] mode:ScatterMode(op.int_attr) name:nil]};
    case K::kConv2D: {
      MPSGraphConvolution2DOpDescriptor* d = [MPSGraphConvolution2DOpDescriptor
          descriptorWithStrideInX:static_cast<NSUInteger>(op.strides.at(1)) strideInY:static_cast<NSUInteger>(op.strides.at(0))
                  dilationRateInX:static_cast<NSUInteger>(op.axes.at(1)) dilationRateInY:static_cast<NSUInteger>(op.axes.at(0))
                           groups:static_cast<NSUInteger>(op.int_attr)
                      paddingLeft:static_cast<NSUInteger>(op.starts.at(1)) paddingRight:static_cast<NSUInteger>(op.ends.at(1))
                       paddingTop:static_cast<NSUInteger>(op.starts.at(0)) paddingBottom:static_cast<NSUInteger>(op.ends.at(0))
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
      return Tensors{[G maxPooling4DGradientWithGradientTensor:in[0] sourceTensor:in[1] descriptor:Pooling(op) name:nil]};
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

class MetalMemory : public DeviceMemory {
 public:
  MetalMemory(id<MTLBuffer> buffer, size_t size) : buffer_(buffer), size_(size) {}
  void* data() override { return buffer_ ? [buffer_ contents] : nullptr; }
  size_t size() const override { return size_; }
  id<MTLBuffer> buffer() const { return buffer_; }

 private:
  id<MTLBuffer> buffer_;  // released with this object (ARC)
  size_t size_;
};

class MetalExecutable : public Executable {
 public:
  MetalExecutable(id<MTLCommandQueue> queue, const mps::Graph& g) : queue_(queue), graph_(g) {}

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
    GraphBuilder builder(graph);
    auto outputs = builder.Build(graph_, params);
    if (!outputs.ok()) return outputs.status();
    // Results are fresh tensors: an input or a repeated value gets an identity of its own.
    NSMutableArray<MPSGraphTensor*>* targets = [NSMutableArray array];
    for (MPSGraphTensor* t : *outputs) {
      BOOL seen = [targets containsObject:t] || [params containsObject:t];
      [targets addObject:seen ? [graph identityWithTensor:t name:nil] : t];
    }
    feeds_ = params;
    targets_ = targets;
    MPSGraphDevice* gd = [MPSGraphDevice deviceWithMTLDevice:device];
    executable_ = [graph compileWithDevice:gd feeds:feeds targetTensors:targets targetOperations:nil compilationDescriptor:nil];
    if (!executable_) return Internal("MPSGraph failed to compile the executable");
    return Status::Ok();
  }

  Status Run(const std::vector<DeviceMemory*>& inputs, const std::vector<DeviceMemory*>& outputs) override {
    @autoreleasepool {
      NSMutableArray<MPSGraphTensorData*>* in = [NSMutableArray array];
      for (size_t i = 0; i < inputs.size(); ++i) {
        auto* m = static_cast<MetalMemory*>(inputs[i]);
        const mps::TensorType& t = graph_.type(graph_.inputs[i]);
        [in addObject:[[MPSGraphTensorData alloc] initWithMTLBuffer:m->buffer() shape:ShapeOf(t)
                                                           dataType:*ToMPS(t.dtype, nullptr)]];
      }
      NSMutableArray<MPSGraphTensorData*>* out = [NSMutableArray array];
      for (size_t i = 0; i < outputs.size(); ++i) {
        auto* m = static_cast<MetalMemory*>(outputs[i]);
        const mps::TensorType& t = graph_.type(graph_.outputs[i]);
        [out addObject:[[MPSGraphTensorData alloc] initWithMTLBuffer:m->buffer() shape:ShapeOf(t)
                                                            dataType:*ToMPS(t.dtype, nullptr)]];
      }
      std::lock_guard<std::mutex> lock(mu_);
      [executable_ runWithMTLCommandQueue:queue_ inputsArray:in resultsArray:out executionDescriptor:nil];
    }
    return Status::Ok();
  }

 private:
  id<MTLCommandQueue> queue_;
  mps::Graph graph_;
  MPSGraphExecutable* executable_ = nil;
  NSArray<MPSGraphTensor*>* feeds_ = nil;
  NSArray<MPSGraphTensor*>* targets_ = nil;
  std::mutex mu_;
};

class MetalExecutor : public Executor {
 public:
  explicit MetalExecutor(id<MTLDevice> device) : device_(device), queue_([device newCommandQueue]) {}
  std::string name() const override { return "metal"; }

  StatusOr<std::shared_ptr<DeviceMemory>> Allocate(size_t bytes) override {
    id<MTLBuffer> buffer = [device_ newBufferWithLength:std::max<size_t>(bytes, 1) options:MTLResourceStorageModeShared];
    if (!buffer) return ResourceExhausted("Metal could not allocate " + std::to_string(bytes) + " bytes");
    return std::shared_ptr<DeviceMemory>(std::make_shared<MetalMemory>(buffer, bytes));
  }

  StatusOr<std::unique_ptr<Executable>> Compile(const mps::Graph& graph) override {
    @autoreleasepool {
      auto exe = std::make_unique<MetalExecutable>(queue_, graph);
      Status s = exe->Build(device_);
      if (!s.ok()) return s;
      return std::unique_ptr<Executable>(std::move(exe));
    }
  }

 private:
  id<MTLDevice> device_;
  id<MTLCommandQueue> queue_;
};

}  // namespace

std::unique_ptr<Executor> CreateMetalExecutor() {
  id<MTLDevice> device = MTLCreateSystemDefaultDevice();
  if (!device) return nullptr;
  return std::make_unique<MetalExecutor>(device);
}

}  // namespace jmp::exec

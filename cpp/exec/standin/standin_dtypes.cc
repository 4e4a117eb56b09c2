// The stand-in's table of element types per MPSGraph call.
#include "exec/standin/standin_dtypes.h"

#include <string>
#include <utility>

namespace jmp::exec::standin {

namespace {

using T = metal::DataType;

const std::vector<T> kIntegers = {T::kInt8,  T::kInt16,  T::kInt32,  T::kInt64,
                                  T::kUInt8, T::kUInt16, T::kUInt32, T::kUInt64};

struct Row {
  std::string_view selector;
  AcceptedTypes accepted;
};

const std::vector<Row>& Rows() {
  // PyTorch's MPS backend sorts and takes the maximum and minimum only of these (it casts other types
  // first), multiplies matrices only in these (integers go elsewhere), and calls the bitwise and
  // logical kernels only with integers and bools respectively.
  static const AcceptedTypes kSortable{{T::kInt32, T::kInt64, T::kFloat16, T::kFloat32},
                                       "Apple's PyTorch MPS backend (sort, topk, min/max reductions)"};
  static const AcceptedTypes kMatMul{{T::kFloat16, T::kBFloat16, T::kFloat32, T::kComplexFloat32},
                                     "Apple's PyTorch MPS backend (no integer matrix multiplication)"};
  static const AcceptedTypes kInts{kIntegers, "MPSGraphArithmeticOps.h (bitwise ops take integers)"};
  static const AcceptedTypes kBools{{T::kBool}, "MPSGraphArithmeticOps.h (logical ops take bools)"};
  static const AcceptedTypes kFloats{{T::kFloat16, T::kBFloat16, T::kFloat32},
                                     "MPSGraphConvolutionOps.h / MPSGraphPoolingOps.h (floating-point)"};
  static const AcceptedTypes kComplex{{T::kComplexFloat32, T::kComplexFloat16},
                                      "MPSGraphArithmeticOps.h / MPSGraphFourierTransformOps.h (complex)"};
  static const AcceptedTypes kRealFloat{{T::kFloat32, T::kFloat16},
                                        "MPSGraphFourierTransformOps.h / MPSGraphArithmeticOps.h (real parts)"};
  static const std::vector<Row> rows = {
      {"sortWithTensor", kSortable},
      {"argSortWithTensor", kSortable},
      {"topKWithSourceTensor", kSortable},
      {"reductionMaximumPropagateNaNWithTensor", kSortable},
      {"reductionMinimumPropagateNaNWithTensor", kSortable},
      {"matrixMultiplicationWithPrimaryTensor", kMatMul},
      {"bitwiseANDWithPrimaryTensor", kInts},
      {"bitwiseORWithPrimaryTensor", kInts},
      {"bitwiseXORWithPrimaryTensor", kInts},
      {"bitwiseNOTWithTensor", kInts},
      {"bitwisePopulationCountWithTensor", kInts},
      {"bitwiseLeftShiftWithPrimaryTensor", kInts},
      {"bitwiseRightShiftWithPrimaryTensor", kInts},
      {"logicalANDWithPrimaryTensor", kBools},
      {"logicalORWithPrimaryTensor", kBools},
      {"logicalXORWithPrimaryTensor", kBools},
      {"notWithTensor", kBools},
      {"convolution2DWithSourceTensor", kFloats},
      {"maxPooling4DWithSourceTensor", kFloats},
      {"avgPooling4DWithSourceTensor", kFloats},
      {"maxPooling4DGradientWithGradientTensor", kFloats},
      {"fastFourierTransformWithTensor", kComplex},
      {"HermiteanToRealFFTWithTensor", kComplex},
      {"realToHermiteanFFTWithTensor", kRealFloat},
      {"realPartOfTensor", kComplex},
      {"imaginaryPartOfTensor", kComplex},
      {"conjugateWithTensor", kComplex},
      {"complexTensorWithRealTensor", kRealFloat},
  };
  return rows;
}

}  // namespace

const AcceptedTypes* AcceptedTypesOf(std::string_view selector) {
  for (const Row& r : Rows())
    if (r.selector == selector) return &r.accepted;
  return nullptr;
}

const AcceptedTypes& NDIndexTypes() {
  static const AcceptedTypes k{{T::kInt32}, "MPSGraphGatherOps.h / MPSGraphScatterNDOps.h (int32 indices)"};
  return k;
}

const AcceptedTypes& AlongAxisIndexTypes() {
  static const AcceptedTypes k{{T::kInt32, T::kInt64}, "MPSGraphGatherOps.h / MPSGraphScatterNDOps.h (Int32 or Int64)"};
  return k;
}

}  // namespace jmp::exec::standin

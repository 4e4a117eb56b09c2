// Which dtypes the self-check sweeps for each op kind: those placement can send to Metal with it.
#include "check/check.h"

namespace jmp::check {

std::vector<DType> MetalDTypes(mps::OpKind kind) {
  using K = mps::OpKind;
  using D = DType;
  const std::vector<D> ints = {D::kI8, D::kI16, D::kI32, D::kI64, D::kU8, D::kU16, D::kU32, D::kU64};
  const std::vector<D> floats = {D::kF16, D::kBF16, D::kF32};
  auto join = [](std::vector<D> a, const std::vector<D>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  const std::vector<D> real = join(ints, floats);
  const std::vector<D> real_c = join(real, {D::kC64});
  const std::vector<D> all = join({D::kBool}, real_c);  // every type MetalHasDType accepts
  switch (kind) {
    // Data movement, constants and control flow: every type.
    case K::kConstant:
    case K::kIdentity:
    case K::kEqual:
    case K::kNotEqual:
    case K::kSelect:
    case K::kCast:
    case K::kReshape:
    case K::kTranspose:
    case K::kBroadcast:
    case K::kSlice:
    case K::kConcat:
    case K::kPad:
    case K::kReverse:
    case K::kGatherAlongAxis:
    case K::kGatherND:
    case K::kScatterND:
    case K::kScatterAlongAxis:
    case K::kIf: return all;
    case K::kReinterpretCast: return real_c;
    case K::kCoordinateAlongAxis: return {D::kI32, D::kI64};
    // Arithmetic: numbers; complex64 where the complex section's list says MPSGraph takes it.
    case K::kNegative:
    case K::kAdd:
    case K::kSubtract:
    case K::kMultiply:
    case K::kDivide: return real_c;
    case K::kAbsolute:
    case K::kSign:
    case K::kModulo:
    case K::kMaximum:
    case K::kMinimum:
    case K::kLessThan:
    case K::kLessThanOrEqualTo:
    case K::kGreaterThan:
    case K::kGreaterThanOrEqualTo:
    case K::kClamp:
    case K::kMatMul:
    case K::kReductionSum:
    case K::kReductionProduct:
    case K::kReductionMaximum:
    case K::kReductionMinimum:
    case K::kReductionArgMaximum:
    case K::kReductionArgMinimum:
    case K::kArgSort:
    case K::kTopK:
    case K::kCumulativeSum:
    case K::kCumulativeProduct:
    case K::kCumulativeMaximum:
    case K::kCumulativeMinimum:
    case K::kWhile: return real;
    case K::kSort: return join({D::kBool}, real);
    case K::kExponent:
    case K::kLogarithm:
    case K::kSquareRoot: return join(floats, {D::kC64});
    case K::kExponentBase2:
    case K::kLogarithm2:
    case K::kReverseSquareRoot:
    case K::kReciprocal:
    case K::kSin:
    case K::kCos:
    case K::kTan:
    case K::kTanh:
    case K::kAsin:
    case K::kAcos:
    case K::kAtan:
    case K::kSinh:
    case K::kCosh:
    case K::kAsinh:
    case K::kAcosh:
    case K::kAtanh:
    case K::kErf:
    case K::kSigmoid:
    case K::kFloor:
    case K::kCeil:
    case K::kRint:
    case K::kRound:
    case K::kTruncate:
    case K::kIsFinite:
    case K::kIsNaN:
    case K::kIsInfinite:
    case K::kPower:
    case K::kAtan2:
    case K::kConv2D:
    case K::kMaxPool4D:
    case K::kAvgPool4D:
    case K::kMaxPool4DGradient: return floats;
    case K::kNot:
    case K::kLogicalAnd:
    case K::kLogicalOr:
    case K::kLogicalXor:
    case K::kReductionAnd:
    case K::kReductionOr: return {D::kBool};
    case K::kBitwiseNot:
    case K::kPopulationCount:
    case K::kBitwiseAnd:
    case K::kBitwiseOr:
    case K::kBitwiseXor:
    case K::kBitwiseLeftShift:
    case K::kBitwiseRightShift: return ints;
    case K::kRealPart:
    case K::kImaginaryPart:
    case K::kConjugate:
    case K::kFFT:
    case K::kHermiteanToRealFFT: return {D::kC64};
    case K::kComplexFromParts:
    case K::kMultiplyAdd:
    case K::kRealToHermiteanFFT: return {D::kF32};
    // A user's kernel: the check has no source of its own to compare, the user's reference is the check.
    case K::kMetalKernel:
      // No MPSGraph call: placement never sends these to Metal.
#define JMP_HOST_OP(name, domain) case K::k##name:
#include "mps/op_kinds.def"
      return {};
  }
  return {};
}

}  // namespace jmp::check

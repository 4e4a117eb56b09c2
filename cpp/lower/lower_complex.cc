// real, imag and complex: complex64 (complex128) built from and taken apart into float32 (float64) parts.
// Results take their operand's shape, not the declared one: in a body lowered inline on lanes (the
// compare-and-select reduce body of complex max/min) the declared type is a scalar.
#include "lower/lower_context.h"

namespace jmp::mps {

namespace {

template <OpKind K>
Status Part(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int x, cx.In(0));
  const shlo::Type& out = cx.OutType(0);
  if (!IsComplex(cx.DTypeOf(x))) {
    // real/imag of a real value: itself, or zeros.
    cx.Bind(0, K == OpKind::kRealPart ? x : cx.Splat(out.dtype, cx.ShapeOf(x), 0));
    return Status::Ok();
  }
  cx.Bind(0, cx.Emit(K, {x}, RealOf(cx.DTypeOf(x)), cx.ShapeOf(x)));
  return Status::Ok();
}

Status ComplexOp(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int re, cx.In(0));
  JMP_ASSIGN_OR_RETURN(int im, cx.In(1));
  const shlo::Type& out = cx.OutType(0);
  if (!IsComplex(out.dtype) || cx.DTypeOf(re) != RealOf(out.dtype) || cx.DTypeOf(im) != RealOf(out.dtype))
    return cx.Unsupported("complex parts of another type");
  if (cx.ShapeOf(re) != cx.ShapeOf(im)) return cx.Unsupported("complex parts of different shapes");
  cx.Bind(0, cx.Emit(OpKind::kComplexFromParts, {re, im}, out.dtype, cx.ShapeOf(re)));
  return Status::Ok();
}

}  // namespace

void RegisterComplexRules(std::map<std::string, LowerRule>& r) {
  RegisterRule(r, "stablehlo.real", &Part<OpKind::kRealPart>);
  RegisterRule(r, "stablehlo.imag", &Part<OpKind::kImaginaryPart>);
  RegisterRule(r, "stablehlo.complex", &ComplexOp);
}

}  // namespace jmp::mps

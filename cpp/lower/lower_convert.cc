// convert and bitcast_convert. Integer narrowing keeps the low bits by masking before the cast (exact on
// any device) rather than trusting how a cast treats out-of-range integers.
#include "lower/lower_context.h"

namespace jmp::mps {

namespace {

// The low `to`-sized part of each element, as the unsigned `to`: masked in the wide type, then cast. The
// masked value is in the narrow type's range, where a cast is exact whether it would saturate or wrap,
// and the whole stays elementwise, so fused chains (random bits: 64-bit counters split in halves) stay
// fused.
int LowBits(LowerContext& cx, int x, DType to) {
  DType wide = UnsignedOfWidth(BitWidth(cx.DTypeOf(x)));
  uint64_t mask = BitWidth(to) >= 64 ? ~uint64_t{0} : (uint64_t{1} << BitWidth(to)) - 1;
  int masked = cx.Binary(OpKind::kBitwiseAnd, cx.Reinterpret(x, wide), cx.SplatBits(wide, cx.ShapeOf(x), mask));
  return cx.Cast(masked, to);
}

int ConvertValue(LowerContext& cx, int x, DType to) {
  DType from = cx.DTypeOf(x);
  const Shape shape = cx.ShapeOf(x);
  if (from == to) return x;
  if (to == DType::kBool) {
    if (IsComplex(from)) {
      int re = cx.Emit(OpKind::kRealPart, {x}, RealOf(from), shape);
      int im = cx.Emit(OpKind::kImaginaryPart, {x}, RealOf(from), shape);
      int zero = cx.Splat(RealOf(from), shape, 0);
      return cx.Binary(OpKind::kLogicalOr, cx.Compare(OpKind::kNotEqual, re, zero),
                       cx.Compare(OpKind::kNotEqual, im, zero));
    }
    return cx.Compare(OpKind::kNotEqual, x, cx.Splat(from, shape, 0));
  }
  if (IsComplex(from) && IsComplex(to)) {  // complex64 <-> complex128: each part
    int re = cx.Cast(cx.Emit(OpKind::kRealPart, {x}, RealOf(from), shape), RealOf(to));
    int im = cx.Cast(cx.Emit(OpKind::kImaginaryPart, {x}, RealOf(from), shape), RealOf(to));
    return cx.Emit(OpKind::kComplexFromParts, {re, im}, to, shape);
  }
  if (IsComplex(from)) {
    int re = cx.Emit(OpKind::kRealPart, {x}, RealOf(from), shape);
    return ConvertValue(cx, re, to);
  }
  if (IsComplex(to)) {
    int re = ConvertValue(cx, x, RealOf(to));
    return cx.Emit(OpKind::kComplexFromParts, {re, cx.Splat(RealOf(to), shape, 0)}, to, shape);
  }
  if (IsFloat(from) && IsInteger(to)) {
    // NaN -> 0 explicitly; the cast truncates toward zero and saturates (op_kinds.def: Cast).
    x = cx.Select(cx.Emit(OpKind::kIsNaN, {x}, DType::kBool, shape), cx.Splat(from, shape, 0), x);
    return cx.Cast(x, to);
  }
  if (IsInteger(from) && IsInteger(to)) {
    size_t fw = ByteSize(from), tw = ByteSize(to);
    if (tw < fw) return cx.Reinterpret(LowBits(cx, x, UnsignedOfWidth(BitWidth(to))), to);
    if (tw == fw) return cx.Reinterpret(x, to);
    return cx.Cast(x, to);  // widening: sign- or zero-extends by the source's signedness
  }
  return cx.Cast(x, to);
}

Status Convert(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int x, cx.In(0));
  cx.Bind(0, ConvertValue(cx, x, cx.OutType(0).dtype));
  return Status::Ok();
}

Status BitcastConvert(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int x, cx.In(0));
  DType from = cx.DTypeOf(x), to = cx.OutType(0).dtype;
  const Shape& out_shape = cx.OutType(0).shape;
  if (from == DType::kBool || to == DType::kBool || IsComplex(from) || IsComplex(to))
    return cx.Unsupported("bitcast_convert of bool or complex");
  size_t fw = ByteSize(from), tw = ByteSize(to);
  if (fw == tw) {
    cx.Bind(0, cx.Reinterpret(x, to));
  } else if (fw > tw) {  // [S] -> [S, fw/tw]
    Shape one = cx.ShapeOf(x);
    one.push_back(1);
    int y = cx.Reshape(x, one);
    cx.Bind(0, cx.Emit(OpKind::kReinterpretCast, {y}, to, out_shape));
  } else {  // [S, tw/fw] -> [S]
    Shape one = out_shape;
    one.push_back(1);
    int y = cx.Emit(OpKind::kReinterpretCast, {x}, to, one);
    cx.Bind(0, cx.Reshape(y, out_shape));
  }
  return Status::Ok();
}

}  // namespace

void RegisterConversionRules(std::map<std::string, LowerRule>& r) {
  RegisterRule(r, "stablehlo.convert", &Convert);
  RegisterRule(r, "stablehlo.bitcast_convert", &BitcastConvert);
}

}  // namespace jmp::mps

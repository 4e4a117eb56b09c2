// Elementwise StableHLO ops: math, integer division and remainder, bitwise ops and shifts, compare,
// select and clamp. Where StableHLO defines a result MPSGraph leaves undefined (x/0 on integers,
// shifts by the bit width or more, NaN for sign), the guard is spelled out here.
#include <cmath>

#include "lower/lower_context.h"
#include "lower/lower_elementwise.h"

namespace jmp::mps {

namespace {

bool IsRealFloat(DType t) { return IsFloat(t); }

// The type float decompositions compute in: float32 for the narrow floats, else the type itself.
DType WorkFloat(DType t) { return t == DType::kF64 ? DType::kF64 : DType::kF32; }

Status Result(LowerContext& cx, int v) {
  cx.Bind(0, v);
  return Status::Ok();
}

template <OpKind K>
Status FloatUnary(LowerContext& cx) {
  if (IsComplex(cx.InType(0).dtype)) return LowerComplexMath(cx);  // lower_complex_math.cc
  if (!IsRealFloat(cx.InType(0).dtype)) return cx.Unsupported("needs a float operand");
  JMP_ASSIGN_OR_RETURN(int x, cx.In(0));
  return Result(cx, cx.Unary(K, x));
}

// Ops MPSGraph also runs on complex64 (op_kinds.def: complex section).
template <OpKind K>
Status FloatOrComplexUnary(LowerContext& cx) {
  DType t = cx.InType(0).dtype;
  if (!IsRealFloat(t) && !IsComplex(t)) return cx.Unsupported("needs a float or complex operand");
  JMP_ASSIGN_OR_RETURN(int x, cx.In(0));
  return Result(cx, cx.Unary(K, x));
}

Status Negate(LowerContext& cx) {
  if (cx.InType(0).dtype == DType::kBool) return cx.Unsupported("negate of bool");
  JMP_ASSIGN_OR_RETURN(int x, cx.In(0));
  if (IsUnsignedInt(cx.DTypeOf(x)))
    return Result(cx, cx.Binary(OpKind::kSubtract, cx.Splat(cx.DTypeOf(x), cx.ShapeOf(x), 0), x));
  return Result(cx, cx.Unary(OpKind::kNegative, x));
}

Status Abs(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int x, cx.In(0));
  DType t = cx.DTypeOf(x);
  if (IsComplex(t)) return Result(cx, ComplexAbs(cx, x));
  if (t == DType::kBool) return cx.Unsupported("abs of bool");
  if (IsUnsignedInt(t)) return Result(cx, x);
  return Result(cx, cx.Unary(OpKind::kAbsolute, x));
}

Status Sign(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int x, cx.In(0));
  DType t = cx.DTypeOf(x);
  const Shape shape = cx.ShapeOf(x);
  if (t == DType::kBool) return cx.Unsupported("sign of bool");
  if (IsComplex(t)) {
    // x / |x| part by part (as XLA: an infinite part gives NaN, a finite one 0), and 0 for 0. A complex
    // division by |x| + 0i would make both parts NaN whenever |x| is infinite.
    DType r = RealOf(t);
    int mag = ComplexAbs(cx, x);
    int zero = cx.Compare(OpKind::kEqual, mag, cx.Splat(r, shape, 0));
    int safe = cx.Select(zero, cx.Splat(r, shape, 1), mag);
    int re = cx.Binary(OpKind::kDivide, cx.Emit(OpKind::kRealPart, {x}, r, shape), safe);
    int im = cx.Binary(OpKind::kDivide, cx.Emit(OpKind::kImaginaryPart, {x}, r, shape), safe);
    int q = cx.Emit(OpKind::kComplexFromParts, {re, im}, t, shape);
    return Result(cx, cx.Select(zero, cx.Splat(t, shape, 0), q));
  }
  if (IsUnsignedInt(t)) {
    return Result(cx, cx.Cast(cx.Compare(OpKind::kNotEqual, x, cx.Splat(t, shape, 0)), t));
  }
  int s = cx.Unary(OpKind::kSign, x);
  if (IsFloat(t)) s = cx.Select(Predicate(cx, OpKind::kIsNaN, x), x, s);  // MPSGraph's sign(NaN) is 0
  return Result(cx, s);
}

Status Expm1(LowerContext& cx) {
  if (IsComplex(cx.InType(0).dtype)) return LowerComplexMath(cx);
  if (!IsRealFloat(cx.InType(0).dtype)) return cx.Unsupported("needs a float operand");
  JMP_ASSIGN_OR_RETURN(int x0, cx.In(0));
  DType out = cx.DTypeOf(x0);
  return Result(cx, cx.Cast(Expm1Real(cx, cx.Cast(x0, WorkFloat(out))), out));
}

Status Log1p(LowerContext& cx) {
  if (IsComplex(cx.InType(0).dtype)) return LowerComplexMath(cx);
  if (!IsRealFloat(cx.InType(0).dtype)) return cx.Unsupported("needs a float operand");
  JMP_ASSIGN_OR_RETURN(int x0, cx.In(0));
  DType out = cx.DTypeOf(x0);
  return Result(cx, cx.Cast(Log1pReal(cx, cx.Cast(x0, WorkFloat(out))), out));
}

Status Cbrt(LowerContext& cx) {
  if (!IsRealFloat(cx.InType(0).dtype)) return cx.Unsupported("needs a float operand");
  JMP_ASSIGN_OR_RETURN(int x0, cx.In(0));
  // In float32 (float64 for float64): 1/3 rounded to bfloat16 (0.334) would be 6% off for |x| near 1e38.
  DType out = cx.DTypeOf(x0);
  DType t = WorkFloat(out);
  int x = cx.Cast(x0, t);
  const Shape shape = cx.ShapeOf(x);
  int mag = cx.Binary(OpKind::kPower, cx.Unary(OpKind::kAbsolute, x), cx.Splat(t, shape, 1.0 / 3.0));
  // sign(x) * |x|^(1/3), keeping ±0 and NaN.
  int r = cx.Select(cx.Compare(OpKind::kLessThan, x, cx.Splat(t, shape, 0)), cx.Unary(OpKind::kNegative, mag),
                    cx.Select(cx.Compare(OpKind::kEqual, x, cx.Splat(t, shape, 0)), x, mag));
  return Result(cx, cx.Cast(r, out));
}

Status IsFinite(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int x, cx.In(0));
  if (!IsRealFloat(cx.DTypeOf(x))) return cx.Unsupported("needs a float operand");
  Shape shape = cx.ShapeOf(x);
  return Result(cx, cx.Emit(OpKind::kIsFinite, {x}, DType::kBool, shape));
}

Status Not(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int x, cx.In(0));
  DType t = cx.DTypeOf(x);
  if (t == DType::kBool) return Result(cx, cx.Unary(OpKind::kNot, x));
  if (IsInteger(t)) return Result(cx, cx.Unary(OpKind::kBitwiseNot, x));
  return cx.Unsupported("not needs a bool or integer operand");
}

Status Popcnt(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int x, cx.In(0));
  if (!IsInteger(cx.DTypeOf(x))) return cx.Unsupported("needs an integer operand");
  return Result(cx, cx.Unary(OpKind::kPopulationCount, x));
}

// Binary search for the highest set bit, all lanes at once: log2(bits) shift-and-select steps.
Status CountLeadingZeros(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int x0, cx.In(0));
  DType t = cx.DTypeOf(x0);
  if (!IsInteger(t)) return cx.Unsupported("needs an integer operand");
  int bits = BitWidth(t);
  DType u = UnsignedOfWidth(bits);
  const Shape shape = cx.ShapeOf(x0);
  int x = cx.Reinterpret(x0, u);
  int count = cx.Splat(u, shape, 0);
  int zero = cx.Splat(u, shape, 0);
  for (int step = bits / 2; step >= 1; step /= 2) {
    int top = cx.Binary(OpKind::kBitwiseRightShift, x, cx.Splat(u, shape, bits - step));
    int empty = cx.Compare(OpKind::kEqual, top, zero);
    x = cx.Select(empty, cx.Binary(OpKind::kBitwiseLeftShift, x, cx.Splat(u, shape, step)), x);
    count = cx.Select(empty, cx.Binary(OpKind::kAdd, count, cx.Splat(u, shape, step)), count);
  }
  int top_bit = cx.Binary(OpKind::kBitwiseRightShift, x, cx.Splat(u, shape, bits - 1));
  count = cx.Binary(OpKind::kAdd, count, cx.Binary(OpKind::kBitwiseXor, top_bit, cx.Splat(u, shape, 1)));
  return Result(cx, cx.Reinterpret(count, t));
}

// ---- binary

template <OpKind K>
Status Arithmetic(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int a, cx.In(0));
  JMP_ASSIGN_OR_RETURN(int b, cx.In(1));
  DType t = cx.DTypeOf(a);
  if (t == DType::kBool) {
    // StableHLO on i1: add and max are or; multiply and min are and; subtract is xor.
    OpKind logical = K == OpKind::kAdd || K == OpKind::kMaximum ? OpKind::kLogicalOr
                     : K == OpKind::kSubtract                   ? OpKind::kLogicalXor
                                                                : OpKind::kLogicalAnd;
    return Result(cx, cx.Binary(logical, a, b));
  }
  if (IsComplex(t) && (K == OpKind::kMaximum || K == OpKind::kMinimum))
    return cx.Unsupported("max/min of complex values");
  return Result(cx, cx.Binary(K, a, b));
}

Status Divide(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int x, cx.In(0));
  JMP_ASSIGN_OR_RETURN(int y, cx.In(1));
  DType t = cx.DTypeOf(x);
  if (t == DType::kBool) return cx.Unsupported("divide of bool");
  if (!IsInteger(t)) return Result(cx, cx.Binary(OpKind::kDivide, x, y));
  // StableHLO: x / 0 = -1 (all bits set), and MIN / -1 = MIN; MPSGraph leaves both undefined.
  const Shape shape = cx.ShapeOf(x);
  int by_zero = cx.Compare(OpKind::kEqual, y, cx.Splat(t, shape, 0));
  int bad = by_zero;
  int overflow = -1;
  if (IsSignedInt(t)) {
    overflow = cx.Binary(OpKind::kLogicalAnd, cx.Compare(OpKind::kEqual, x, cx.Splat(t, shape, LowestValue(t))),
                         cx.Compare(OpKind::kEqual, y, cx.Splat(t, shape, -1)));
    bad = cx.Binary(OpKind::kLogicalOr, by_zero, overflow);
  }
  int q = cx.Binary(OpKind::kDivide, x, cx.Select(bad, cx.Splat(t, shape, 1), y));
  if (overflow >= 0) q = cx.Select(overflow, x, q);
  return Result(cx, cx.Select(by_zero, cx.SplatBits(t, shape, ~uint64_t{0}), q));
}

Status Remainder(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int x, cx.In(0));
  JMP_ASSIGN_OR_RETURN(int y, cx.In(1));
  DType t = cx.DTypeOf(x);
  if (t == DType::kBool || IsComplex(t)) return cx.Unsupported("remainder of this type");
  if (!IsInteger(t)) return Result(cx, cx.Binary(OpKind::kModulo, x, y));
  // StableHLO: x % 0 = x, and MIN % -1 = 0.
  const Shape shape = cx.ShapeOf(x);
  int by_zero = cx.Compare(OpKind::kEqual, y, cx.Splat(t, shape, 0));
  int bad = by_zero;
  if (IsSignedInt(t))
    bad = cx.Binary(OpKind::kLogicalOr, by_zero, cx.Compare(OpKind::kEqual, y, cx.Splat(t, shape, -1)));
  int r = cx.Binary(OpKind::kModulo, x, cx.Select(bad, cx.Splat(t, shape, 1), y));
  return Result(cx, cx.Select(by_zero, x, r));
}

Status Power(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int x, cx.In(0));
  JMP_ASSIGN_OR_RETURN(int y, cx.In(1));
  DType t = cx.DTypeOf(x);
  if (IsRealFloat(t)) return Result(cx, cx.Binary(OpKind::kPower, x, y));
  if (IsComplex(t)) return Result(cx, ComplexPower(cx, x, y));
  if (!IsInteger(t)) return cx.Unsupported("power of this type");
  // Integer power by squaring over the exponent's bits; a negative exponent gives 0 except for
  // bases 1 and -1 (StableHLO follows XLA here).
  const Shape shape = cx.ShapeOf(x);
  int bits = BitWidth(t);
  int result = cx.Splat(t, shape, 1);
  int base = x;
  DType u = UnsignedOfWidth(bits);
  int e = cx.Reinterpret(y, u);
  for (int i = 0; i < bits; ++i) {
    int bit = cx.Binary(OpKind::kBitwiseAnd, cx.Binary(OpKind::kBitwiseRightShift, e, cx.Splat(u, shape, i)),
                        cx.Splat(u, shape, 1));
    int set = cx.Compare(OpKind::kEqual, bit, cx.Splat(u, shape, 1));
    result = cx.Select(set, cx.Binary(OpKind::kMultiply, result, base), result);
    base = cx.Binary(OpKind::kMultiply, base, base);
  }
  if (IsSignedInt(t)) {
    int negative = cx.Compare(OpKind::kLessThan, y, cx.Splat(t, shape, 0));
    int one = cx.Splat(t, shape, 1);
    int minus_one = cx.Splat(t, shape, -1);
    int odd = cx.Compare(OpKind::kEqual, cx.Binary(OpKind::kBitwiseAnd, y, one), one);
    int neg_result = cx.Select(
        cx.Compare(OpKind::kEqual, x, one), one,
        cx.Select(cx.Compare(OpKind::kEqual, x, minus_one), cx.Select(odd, minus_one, one), cx.Splat(t, shape, 0)));
    result = cx.Select(negative, neg_result, result);
  }
  return Result(cx, result);
}

Status Atan2(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int a, cx.In(0));
  JMP_ASSIGN_OR_RETURN(int b, cx.In(1));
  if (!IsRealFloat(cx.DTypeOf(a))) return cx.Unsupported("needs float operands");
  return Result(cx, cx.Binary(OpKind::kAtan2, a, b));
}

template <OpKind Logical, OpKind Bitwise>
Status Logic(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int a, cx.In(0));
  JMP_ASSIGN_OR_RETURN(int b, cx.In(1));
  DType t = cx.DTypeOf(a);
  if (t == DType::kBool) return Result(cx, cx.Binary(Logical, a, b));
  if (IsInteger(t)) return Result(cx, cx.Binary(Bitwise, a, b));
  return cx.Unsupported("needs bool or integer operands");
}

enum class ShiftKind { kLeft, kRightLogical, kRightArithmetic };

// StableHLO shifts treat the amount as unsigned: amounts >= the bit width give 0, or the sign fill
// for an arithmetic right shift. MPSGraph's result there is not specified, so those lanes are selected.
template <ShiftKind S>
Status Shift(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int x, cx.In(0));
  JMP_ASSIGN_OR_RETURN(int y, cx.In(1));
  DType t = cx.DTypeOf(x);
  if (!IsInteger(t)) return cx.Unsupported("needs integer operands");
  const Shape shape = cx.ShapeOf(x);
  int bits = BitWidth(t);
  DType work = S == ShiftKind::kRightArithmetic ? SignedOfWidth(bits) : UnsignedOfWidth(bits);
  int xw = cx.Reinterpret(x, work);
  OpKind kind = S == ShiftKind::kLeft ? OpKind::kBitwiseLeftShift : OpKind::kBitwiseRightShift;
  double known;
  if (cx.KnownSplat(y, &known) && known >= 0 && known < bits)
    return Result(cx, cx.Reinterpret(cx.Binary(kind, xw, cx.Reinterpret(y, work)), t));
  int yu = cx.Reinterpret(y, UnsignedOfWidth(bits));
  int in_range = cx.Compare(OpKind::kLessThan, yu, cx.Splat(UnsignedOfWidth(bits), shape, bits));
  int amount = cx.Reinterpret(cx.Select(in_range, yu, cx.Splat(UnsignedOfWidth(bits), shape, 0)), work);
  int shifted = cx.Binary(kind, xw, amount);
  int fill = S == ShiftKind::kRightArithmetic
                 ? cx.Binary(OpKind::kBitwiseRightShift, xw, cx.Splat(work, shape, bits - 1))
                 : cx.Splat(work, shape, 0);
  return Result(cx, cx.Reinterpret(cx.Select(in_range, shifted, fill), t));
}

Status CompareOp(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int a, cx.In(0));
  JMP_ASSIGN_OR_RETURN(int b, cx.In(1));
  const shlo::Attr* dir = cx.op().Find("comparison_direction");
  if (!dir) return cx.Unsupported("compare without comparison_direction");
  const shlo::Attr* type = cx.op().Find("compare_type");
  std::string compare_type = type ? type->s : "";
  DType t = cx.DTypeOf(a);
  OpKind kind;
  const std::string& d = dir->s;
  if (d == "EQ")
    kind = OpKind::kEqual;
  else if (d == "NE")
    kind = OpKind::kNotEqual;
  else if (d == "LT")
    kind = OpKind::kLessThan;
  else if (d == "LE")
    kind = OpKind::kLessThanOrEqualTo;
  else if (d == "GT")
    kind = OpKind::kGreaterThan;
  else if (d == "GE")
    kind = OpKind::kGreaterThanOrEqualTo;
  else
    return cx.Unsupported("unknown comparison_direction " + d);
  if (IsComplex(t) && kind != OpKind::kEqual && kind != OpKind::kNotEqual)
    return cx.Unsupported("ordered comparison of complex values");
  if (compare_type == "TOTALORDER" && IsFloat(t)) {
    a = TotalOrderKey(cx, a);
    b = TotalOrderKey(cx, b);
  } else if (t == DType::kBool && kind != OpKind::kEqual && kind != OpKind::kNotEqual) {
    a = cx.Cast(a, DType::kU8);
    b = cx.Cast(b, DType::kU8);
  } else if (compare_type == "UNSIGNED" && IsSignedInt(t)) {
    a = cx.Reinterpret(a, UnsignedOfWidth(BitWidth(t)));
    b = cx.Reinterpret(b, UnsignedOfWidth(BitWidth(t)));
  } else if (compare_type == "SIGNED" && IsUnsignedInt(t)) {
    a = cx.Reinterpret(a, SignedOfWidth(BitWidth(t)));
    b = cx.Reinterpret(b, SignedOfWidth(BitWidth(t)));
  }
  return Result(cx, cx.Compare(kind, a, b));
}

Status SelectOp(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int p, cx.In(0));
  JMP_ASSIGN_OR_RETURN(int a, cx.In(1));
  JMP_ASSIGN_OR_RETURN(int b, cx.In(2));
  return Result(cx, cx.Select(p, a, b));
}

// clamp(min, x, max) = min(max(x, min), max); min and max may be scalars. Max/Min propagate NaN.
Status Clamp(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int lo, cx.In(0));
  JMP_ASSIGN_OR_RETURN(int x, cx.In(1));
  JMP_ASSIGN_OR_RETURN(int hi, cx.In(2));
  DType t = cx.DTypeOf(x);
  if (t == DType::kBool || IsComplex(t)) return cx.Unsupported("clamp of this type");
  const Shape shape = cx.ShapeOf(x);
  lo = cx.BroadcastTo(lo, shape);
  hi = cx.BroadcastTo(hi, shape);
  return Result(cx, cx.Binary(OpKind::kMinimum, cx.Binary(OpKind::kMaximum, x, lo), hi));
}

// fma(a, b, c), one rounding: MultiplyAdd, which the host computes with std::fma. float16 and bfloat16
// compute in float32, where their product is exact, so only the float32 sum and the rounding back round.
Status Fma(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int a, cx.In(0));
  JMP_ASSIGN_OR_RETURN(int b, cx.In(1));
  JMP_ASSIGN_OR_RETURN(int c, cx.In(2));
  const DType t = cx.DTypeOf(a);
  if (!IsFloat(t)) return cx.Unsupported("fma of this type");
  const DType w = t == DType::kF64 ? t : DType::kF32;
  int y = cx.Emit(OpKind::kMultiplyAdd, {cx.Cast(a, w), cx.Cast(b, w), cx.Cast(c, w)}, w, cx.ShapeOf(a));
  return Result(cx, cx.Cast(y, t));
}

}  // namespace

// Maps floats to integers whose signed order is IEEE totalOrder (-NaN < -inf < ... < -0 < +0 < ... < NaN).
int TotalOrderKey(LowerContext& cx, int x) {
  DType t = cx.DTypeOf(x);
  int bits = BitWidth(t);
  DType s = SignedOfWidth(bits);
  const Shape shape = cx.ShapeOf(x);
  int k = cx.Reinterpret(x, s);
  int negative = cx.Compare(OpKind::kLessThan, k, cx.Splat(s, shape, 0));
  return cx.Select(negative, cx.Binary(OpKind::kBitwiseXor, k, cx.Splat(s, shape, HighestValue(s))), k);
}

// expm1 via Kahan's formula: exact near 0 where exp(x) - 1 cancels.
int Expm1Real(LowerContext& cx, int x) {
  const Shape shape = cx.ShapeOf(x);
  const DType t = cx.DTypeOf(x);
  int u = cx.Unary(OpKind::kExponent, x);
  int one = cx.Splat(t, shape, 1);
  int um1 = cx.Binary(OpKind::kSubtract, u, one);
  // (u - 1) * (x / log u): x / log u is near 1, so nothing overflows before the result does.
  int ratio = cx.Binary(OpKind::kMultiply, um1, cx.Binary(OpKind::kDivide, x, cx.Unary(OpKind::kLogarithm, u)));
  int r = cx.Select(cx.Compare(OpKind::kEqual, um1, cx.Splat(t, shape, -1)), um1, ratio);
  r = cx.Select(cx.Compare(OpKind::kEqual, u, one), x, r);
  return cx.Select(Predicate(cx, OpKind::kIsInfinite, u), u, r);  // +inf stays inf (inf/inf would be NaN)
}

// log1p via Goldberg's formula: log(u) * x / (u - 1) with u = 1 + x.
int Log1pReal(LowerContext& cx, int x) {
  const Shape shape = cx.ShapeOf(x);
  int one = cx.Splat(cx.DTypeOf(x), shape, 1);
  int u = cx.Binary(OpKind::kAdd, x, one);
  int um1 = cx.Binary(OpKind::kSubtract, u, one);
  int ratio = cx.Binary(OpKind::kMultiply, cx.Unary(OpKind::kLogarithm, u), cx.Binary(OpKind::kDivide, x, um1));
  int r = cx.Select(cx.Compare(OpKind::kEqual, u, one), x, ratio);
  return cx.Select(Predicate(cx, OpKind::kIsInfinite, u), cx.Unary(OpKind::kLogarithm, u), r);
}

int Predicate(LowerContext& cx, OpKind kind, int x) {
  Shape shape = cx.ShapeOf(x);
  return cx.Emit(kind, {x}, DType::kBool, shape);
}

int ComplexAbs(LowerContext& cx, int z) {
  const Shape shape = cx.ShapeOf(z);
  const DType f = RealOf(cx.DTypeOf(z));
  int re = cx.Unary(OpKind::kAbsolute, cx.Emit(OpKind::kRealPart, {z}, f, shape));
  int im = cx.Unary(OpKind::kAbsolute, cx.Emit(OpKind::kImaginaryPart, {z}, f, shape));
  // hypot without overflow: big * sqrt(1 + (small/big)^2), and 0 when both are 0.
  int big = cx.Binary(OpKind::kMaximum, re, im);
  int small = cx.Binary(OpKind::kMinimum, re, im);
  int zero = cx.Compare(OpKind::kEqual, big, cx.Splat(f, shape, 0));
  int ratio = cx.Binary(OpKind::kDivide, small, cx.Select(zero, cx.Splat(f, shape, 1), big));
  int root = cx.Unary(OpKind::kSquareRoot,
                      cx.Binary(OpKind::kAdd, cx.Splat(f, shape, 1), cx.Binary(OpKind::kMultiply, ratio, ratio)));
  int h = cx.Binary(OpKind::kMultiply, big, root);
  // |inf + i*nan| = inf, as C's hypot.
  h = cx.Select(Predicate(cx, OpKind::kIsInfinite, big), big, h);
  return h;
}

int ComplexPower(LowerContext& cx, int x, int y) {
  // x^y = exp(y * log(x)); for x = 0, as XLA: 0^0 = 1, 0^y = 0 for real y > 0, NaN + NaN i otherwise.
  const Shape shape = cx.ShapeOf(x);
  const DType c = cx.DTypeOf(x), f = RealOf(c);
  int r = cx.Unary(OpKind::kExponent, cx.Binary(OpKind::kMultiply, y, cx.Unary(OpKind::kLogarithm, x)));
  int x_zero = cx.Compare(OpKind::kEqual, x, cx.Splat(c, shape, 0));
  int y_zero = cx.Compare(OpKind::kEqual, y, cx.Splat(c, shape, 0));
  int y_re = cx.Emit(OpKind::kRealPart, {y}, f, shape);
  int y_im = cx.Emit(OpKind::kImaginaryPart, {y}, f, shape);
  int zero = cx.Splat(f, shape, 0);
  int positive_real = cx.Binary(OpKind::kLogicalAnd, cx.Compare(OpKind::kGreaterThan, y_re, zero),
                                cx.Compare(OpKind::kEqual, y_im, zero));
  int nan = cx.Splat(f, shape, NAN);
  int nan_nan = cx.Emit(OpKind::kComplexFromParts, {nan, nan}, c, shape);
  int zero_pow = cx.Select(y_zero, cx.Splat(c, shape, 1), cx.Select(positive_real, cx.Splat(c, shape, 0), nan_nan));
  return cx.Select(x_zero, zero_pow, r);
}

void RegisterElementwiseRules(std::map<std::string, LowerRule>& r) {
  RegisterRule(r, "stablehlo.negate", &Negate);
  RegisterRule(r, "stablehlo.abs", &Abs);
  RegisterRule(r, "stablehlo.sign", &Sign);
  RegisterRule(r, "stablehlo.exponential", &FloatUnary<OpKind::kExponent>);
  RegisterRule(r, "stablehlo.exp2", &FloatUnary<OpKind::kExponentBase2>);
  RegisterRule(r, "stablehlo.exponential_minus_one", &Expm1);
  RegisterRule(r, "stablehlo.log", &FloatOrComplexUnary<OpKind::kLogarithm>);
  RegisterRule(r, "stablehlo.log2", &FloatUnary<OpKind::kLogarithm2>);
  RegisterRule(r, "stablehlo.log_plus_one", &Log1p);
  RegisterRule(r, "stablehlo.sqrt", &FloatOrComplexUnary<OpKind::kSquareRoot>);
  RegisterRule(r, "stablehlo.rsqrt", &FloatUnary<OpKind::kReverseSquareRoot>);
  RegisterRule(r, "stablehlo.cbrt", &Cbrt);
  RegisterRule(r, "stablehlo.sine", &FloatUnary<OpKind::kSin>);
  RegisterRule(r, "stablehlo.cosine", &FloatUnary<OpKind::kCos>);
  RegisterRule(r, "stablehlo.tan", &FloatUnary<OpKind::kTan>);
  RegisterRule(r, "stablehlo.tanh", &FloatUnary<OpKind::kTanh>);
  RegisterRule(r, "stablehlo.logistic", &FloatUnary<OpKind::kSigmoid>);
  RegisterRule(r, "stablehlo.floor", &FloatUnary<OpKind::kFloor>);
  RegisterRule(r, "stablehlo.ceil", &FloatUnary<OpKind::kCeil>);
  RegisterRule(r, "stablehlo.round_nearest_afz", &FloatUnary<OpKind::kRound>);
  RegisterRule(r, "stablehlo.round_nearest_even", &FloatUnary<OpKind::kRint>);
  RegisterRule(r, "stablehlo.is_finite", &IsFinite);
  RegisterRule(r, "stablehlo.not", &Not);
  RegisterRule(r, "stablehlo.popcnt", &Popcnt);
  RegisterRule(r, "stablehlo.count_leading_zeros", &CountLeadingZeros);
  RegisterRule(r, "stablehlo.add", &Arithmetic<OpKind::kAdd>);
  RegisterRule(r, "stablehlo.subtract", &Arithmetic<OpKind::kSubtract>);
  RegisterRule(r, "stablehlo.multiply", &Arithmetic<OpKind::kMultiply>);
  RegisterRule(r, "stablehlo.maximum", &Arithmetic<OpKind::kMaximum>);
  RegisterRule(r, "stablehlo.minimum", &Arithmetic<OpKind::kMinimum>);
  RegisterRule(r, "stablehlo.divide", &Divide);
  RegisterRule(r, "stablehlo.remainder", &Remainder);
  RegisterRule(r, "stablehlo.power", &Power);
  RegisterRule(r, "stablehlo.atan2", &Atan2);
  RegisterRule(r, "stablehlo.and", &Logic<OpKind::kLogicalAnd, OpKind::kBitwiseAnd>);
  RegisterRule(r, "stablehlo.or", &Logic<OpKind::kLogicalOr, OpKind::kBitwiseOr>);
  RegisterRule(r, "stablehlo.xor", &Logic<OpKind::kLogicalXor, OpKind::kBitwiseXor>);
  RegisterRule(r, "stablehlo.shift_left", &Shift<ShiftKind::kLeft>);
  RegisterRule(r, "stablehlo.shift_right_logical", &Shift<ShiftKind::kRightLogical>);
  RegisterRule(r, "stablehlo.shift_right_arithmetic", &Shift<ShiftKind::kRightArithmetic>);
  RegisterRule(r, "stablehlo.compare", &CompareOp);
  RegisterRule(r, "stablehlo.select", &SelectOp);
  RegisterRule(r, "stablehlo.clamp", &Clamp);
  RegisterRule(r, "stablehlo.fma", &Fma);
  RegisterRule(r, "custom_call:jax_metal.fma", &Fma);
  RegisterRule(r, "custom_call:jax_metal.exp2", &FloatUnary<OpKind::kExponentBase2>);
  RegisterRule(r, "custom_call:jax_metal.log2", &FloatUnary<OpKind::kLogarithm2>);
  RegisterRule(r, "stablehlo.reduce_precision", &ReducePrecision);
}

}  // namespace jmp::mps

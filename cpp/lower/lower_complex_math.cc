// Elementwise math on complex64 (complex128) that MPSGraph has no complex op for (op_kinds.def lists log
// and sqrt, and the arithmetic), and exp, whose limits at infinite parts MPSGraph does not document and
// XLA's differ from C's: written with the real and imaginary parts as float32 (float64) tensors. JAX
// itself expands some of these before they reach us (exp, sin, cos, log1p); CHLO's decompositions (cosh,
// sinh) and other producers do not.
#include <limits>

#include "lower/lower_elementwise.h"

namespace jmp::mps {

namespace {

// The vocabulary: parts of a complex tensor as real tensors, and real arithmetic on one shape.
class Parts {
 public:
  Parts(LowerContext& cx, DType complex, Shape shape)
      : cx_(cx), complex_(complex), real_(RealOf(complex)), shape_(std::move(shape)) {}

  int Re(int z) { return cx_.Emit(OpKind::kRealPart, {z}, real_, shape_); }
  int Im(int z) { return cx_.Emit(OpKind::kImaginaryPart, {z}, real_, shape_); }
  int Complex(int re, int im) { return cx_.Emit(OpKind::kComplexFromParts, {re, im}, complex_, shape_); }
  int F(double v) { return cx_.Splat(real_, shape_, v); }
  int C(double v) { return cx_.Splat(complex_, shape_, v); }
  int U(OpKind k, int x) { return cx_.Unary(k, x); }
  int Add(int a, int b) { return cx_.Binary(OpKind::kAdd, a, b); }
  int Sub(int a, int b) { return cx_.Binary(OpKind::kSubtract, a, b); }
  int Mul(int a, int b) { return cx_.Binary(OpKind::kMultiply, a, b); }
  int Div(int a, int b) { return cx_.Binary(OpKind::kDivide, a, b); }
  int Neg(int a) { return cx_.Unary(OpKind::kNegative, a); }
  int Less(int a, int b) { return cx_.Compare(OpKind::kLessThan, a, b); }
  int Equal(int a, int b) { return cx_.Compare(OpKind::kEqual, a, b); }
  int Or(int a, int b) { return cx_.Binary(OpKind::kLogicalOr, a, b); }
  int IsFinite(int x) { return cx_.Emit(OpKind::kIsFinite, {x}, DType::kBool, shape_); }
  int IsInf(int x) { return cx_.Emit(OpKind::kIsInfinite, {x}, DType::kBool, shape_); }
  int Select(int p, int a, int b) { return cx_.Select(p, a, b); }
  // copysign(1, x) for the real-valued limits: 1 for x >= +0, -1 for x <= -0.
  int SignOne(int x) {
    DType bits = SignedOfWidth(BitWidth(real_));
    int negative = cx_.Compare(OpKind::kLessThan, cx_.Reinterpret(x, bits), cx_.Splat(bits, shape_, 0));
    return Select(negative, F(-1), F(1));
  }

  LowerContext& cx() { return cx_; }
  DType real() const { return real_; }

 private:
  LowerContext& cx_;
  DType complex_, real_;
  Shape shape_;
};

// tanh(x + iy) by Kahan's formula (as in the C libraries' ctanh): with t = tan(y), s = sinh(x),
// b = 1 + t^2, rho = sqrt(1 + s^2): (b rho s + i t) / (1 + b s^2). For |x| >= 11, s^2 would lose
// everything: tanh is then sign(x) + i 4 sin(y) cos(y) e^{-2|x|}. In float64 the cut is at 22 (as in C's
// ctanh): below it 1 - tanh|x| ~ 2e^{-2|x|} is still above float64's epsilon. The limits are C's
// ctanh's, which XLA:CPU gives too: tanh(±inf + iy) = ±1 + i0 for any y; a finite x with an infinite
// or NaN y gives NaN + iNaN; y = 0 keeps the imaginary part 0 (tanh(NaN + i0) = NaN + i0).
std::pair<int, int> Tanh(Parts& p, int x, int y) {
  int t = p.U(OpKind::kTan, y);
  int s = p.U(OpKind::kSinh, x);
  int b = p.Add(p.F(1), p.Mul(t, t));
  int s2 = p.Mul(s, s);
  int rho = p.U(OpKind::kSquareRoot, p.Add(p.F(1), s2));
  int denom = p.Add(p.F(1), p.Mul(b, s2));
  int re = p.Div(p.Mul(p.Mul(b, rho), s), denom);
  int im = p.Div(t, denom);
  int ax = p.U(OpKind::kAbsolute, x);
  int big = p.Less(p.F(p.real() == DType::kF64 ? 22 : 11), ax);
  int e = p.U(OpKind::kExponent, p.Neg(ax));
  int big_im = p.Mul(p.Mul(p.Mul(p.F(4), p.U(OpKind::kSin, y)), p.U(OpKind::kCos, y)), p.Mul(e, e));
  int y_finite = p.IsFinite(y), x_inf = p.IsInf(x);
  int nan = p.F(std::numeric_limits<double>::quiet_NaN());
  re = p.Select(big, p.Select(p.Or(y_finite, x_inf), p.SignOne(x), nan), re);
  im = p.Select(big, p.Select(y_finite, big_im, p.Select(x_inf, p.F(0), nan)), im);
  return {re, p.Select(p.Equal(y, p.F(0)), y, im)};
}

// e^x (cos y + i sin y), as XLA computes it: no limits of C's cexp (an infinite or NaN part gives NaN
// where the product does). Where e^x overflows, (e^{x/2} cos y) e^{x/2} stays finite while the result
// does; y = 0 keeps the imaginary part 0 (e^x sin 0 would be inf * 0).
std::pair<int, int> Exp(Parts& p, int x, int y) {
  int e = p.U(OpKind::kExponent, x);
  int half = p.U(OpKind::kExponent, p.Mul(x, p.F(0.5)));
  int overflow = p.IsInf(e);
  int c = p.U(OpKind::kCos, y), s = p.U(OpKind::kSin, y);
  int re = p.Select(overflow, p.Mul(p.Mul(half, c), half), p.Mul(e, c));
  int im = p.Select(overflow, p.Mul(p.Mul(half, s), half), p.Mul(e, s));
  return {re, p.Select(p.Equal(y, p.F(0)), y, im)};
}

}  // namespace

Status LowerComplexMath(LowerContext& cx) {
  const std::string& name = cx.op().name;
  if (cx.op().operands.size() != 1) return cx.Unsupported("complex math takes one operand");
  JMP_ASSIGN_OR_RETURN(int z, cx.In(0));
  if (!IsComplex(cx.DTypeOf(z))) return cx.Unsupported("needs a complex operand");
  const Shape shape = cx.ShapeOf(z);
  Parts p(cx, cx.DTypeOf(z), shape);
  int result;
  if (name == "stablehlo.rsqrt") {
    result = cx.Binary(OpKind::kDivide, p.C(1), cx.Unary(OpKind::kSquareRoot, z));
  } else if (name == "stablehlo.logistic") {
    // 1 / (1 + e^-z)
    int e = cx.Unary(OpKind::kExponent, cx.Unary(OpKind::kNegative, z));
    result = cx.Binary(OpKind::kDivide, p.C(1), cx.Binary(OpKind::kAdd, p.C(1), e));
  } else {
    int x = p.Re(z), y = p.Im(z);
    if (name == "stablehlo.exponential") {
      auto [re, im] = Exp(p, x, y);
      result = p.Complex(re, im);
    } else if (name == "stablehlo.sine") {
      // sin x cosh y + i cos x sinh y
      result = p.Complex(p.Mul(p.U(OpKind::kSin, x), p.U(OpKind::kCosh, y)),
                         p.Mul(p.U(OpKind::kCos, x), p.U(OpKind::kSinh, y)));
    } else if (name == "stablehlo.cosine") {
      // cos x cosh y - i sin x sinh y
      result = p.Complex(p.Mul(p.U(OpKind::kCos, x), p.U(OpKind::kCosh, y)),
                         p.Neg(p.Mul(p.U(OpKind::kSin, x), p.U(OpKind::kSinh, y))));
    } else if (name == "stablehlo.tanh") {
      auto [re, im] = Tanh(p, x, y);
      result = p.Complex(re, im);
    } else if (name == "stablehlo.tan") {
      // tan z = -i tanh(iz), iz = -y + ix
      auto [u, v] = Tanh(p, p.Neg(y), x);
      result = p.Complex(v, p.Neg(u));
    } else if (name == "stablehlo.exponential_minus_one") {
      // e^x cos y - 1 = expm1(x) cos y - 2 sin^2(y/2), exact near 0; imaginary part e^x sin y.
      int half = p.U(OpKind::kSin, p.Mul(y, p.F(0.5)));
      int re = p.Sub(p.Mul(Expm1Real(cx, x), p.U(OpKind::kCos, y)), p.Mul(p.F(2), p.Mul(half, half)));
      // y = 0 keeps the imaginary part 0 where e^x overflows (inf * 0 would be NaN).
      int im = p.Mul(p.U(OpKind::kExponent, x), p.U(OpKind::kSin, y));
      result = p.Complex(re, p.Select(cx.Compare(OpKind::kEqual, y, p.F(0)), y, im));
    } else if (name == "stablehlo.log_plus_one") {
      // log|1+z| = log1p(2x + x^2 + y^2) / 2 near 0 (no cancellation), log(hypot(1+x, y)) elsewhere
      // (no overflow); the angle is atan2(y, 1+x).
      int xp1 = p.Add(x, p.F(1));
      int near = p.Mul(p.F(0.5), Log1pReal(cx, p.Add(p.Mul(x, p.Add(p.F(2), x)), p.Mul(y, y))));
      int far = p.U(OpKind::kLogarithm, ComplexAbs(cx, p.Complex(xp1, y)));
      int small = cx.Binary(OpKind::kLogicalAnd, p.Less(p.U(OpKind::kAbsolute, x), p.F(0.5)),
                            p.Less(p.U(OpKind::kAbsolute, y), p.F(0.5)));
      result = p.Complex(p.Select(small, near, far), cx.Binary(OpKind::kAtan2, y, xp1));
    } else {
      return cx.Unsupported("not defined for complex values here");
    }
  }
  cx.Bind(0, result);
  return Status::Ok();
}

}  // namespace jmp::mps

// reduce_precision(x, exponent_bits, mantissa_bits): x rounded as if stored in a narrower float and
// widened again (JAX emits it in jax.checkpoint's residuals and packed max-pool gradients). MPSGraph
// has no such op; it is integer arithmetic on the bits, as XLA does it:
//   mantissa: round to nearest even at the kept bits (a carry may move into the exponent);
//   exponent: magnitudes past the narrow type's range become ±inf, below its normal range ±0;
//   NaN stays x.
#include "lower/lower_elementwise.h"

namespace jmp::mps {

Status ReducePrecision(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int x, cx.In(0));
  JMP_ASSIGN_OR_RETURN(int64_t exponent_bits, cx.IntAttr("exponent_bits"));
  JMP_ASSIGN_OR_RETURN(int64_t mantissa_bits, cx.IntAttr("mantissa_bits"));
  DType t = cx.DTypeOf(x);
  int width, exp_width, mant_width;
  if (t == DType::kF64)
    width = 64, exp_width = 11, mant_width = 52;
  else if (t == DType::kF32)
    width = 32, exp_width = 8, mant_width = 23;
  else if (t == DType::kF16)
    width = 16, exp_width = 5, mant_width = 10;
  else if (t == DType::kBF16)
    width = 16, exp_width = 8, mant_width = 7;
  else
    return cx.Unsupported("reduce_precision needs a float16, bfloat16, float32 or float64 operand");
  if (exponent_bits < 1 || mantissa_bits < 0) return cx.Unsupported("reduce_precision with no exponent bits");
  if (mantissa_bits >= mant_width && exponent_bits >= exp_width) {  // x's own precision (jax.checkpoint)
    cx.Bind(0, x);
    return Status::Ok();
  }
  const Shape shape = cx.ShapeOf(x);
  DType u = UnsignedOfWidth(width);
  auto k = [&](uint64_t v) { return cx.SplatBits(u, shape, v); };
  int bits = cx.Reinterpret(x, u);
  if (mantissa_bits < mant_width) {
    int drop = mant_width - static_cast<int>(mantissa_bits);
    uint64_t last_kept = uint64_t{1} << drop;
    // bias = (half an ulp of the kept bits) - 1 + the last kept bit: ties go to even.
    int last_bit = cx.Binary(OpKind::kBitwiseAnd,
                             cx.Binary(OpKind::kBitwiseRightShift, bits, k(static_cast<uint64_t>(drop))), k(1));
    int bias = cx.Binary(OpKind::kAdd, last_bit, k((last_kept >> 1) - 1));
    uint64_t all = width == 64 ? ~uint64_t{0} : (uint64_t{1} << width) - 1;
    bits = cx.Binary(OpKind::kBitwiseAnd, cx.Binary(OpKind::kAdd, bits, bias), k(all & ~(last_kept - 1)));
  }
  if (exponent_bits < exp_width) {
    uint64_t exponent_mask = ((uint64_t{1} << exp_width) - 1) << mant_width;
    uint64_t sign_mask = uint64_t{1} << (width - 1);
    uint64_t bias = (uint64_t{1} << (exp_width - 1)) - 1;
    uint64_t reduced_bias = (uint64_t{1} << (exponent_bits - 1)) - 1;
    uint64_t max_exponent = (bias + reduced_bias) << mant_width;
    uint64_t min_exponent = (bias - reduced_bias) << mant_width;
    int exponent = cx.Binary(OpKind::kBitwiseAnd, bits, k(exponent_mask));
    int sign = cx.Binary(OpKind::kBitwiseAnd, bits, k(sign_mask));
    int overflows = cx.Compare(OpKind::kGreaterThan, exponent, k(max_exponent));
    int underflows = cx.Compare(OpKind::kLessThanOrEqualTo, exponent, k(min_exponent));
    bits =
        cx.Select(overflows, cx.Binary(OpKind::kBitwiseOr, sign, k(exponent_mask)), cx.Select(underflows, sign, bits));
  }
  cx.Bind(0, cx.Select(Predicate(cx, OpKind::kIsNaN, x), x, cx.Reinterpret(bits, t)));
  return Status::Ok();
}

}  // namespace jmp::mps

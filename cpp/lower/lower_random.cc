// stablehlo.rng_bit_generator onto the host-only RngBitGenerator op, with XLA:CPU's meaning: DEFAULT
// is Philox there (its RngBitGeneratorExpander is given RNG_PHILOX), and the bits of a signed type
// are those of its unsigned twin.
#include "lower/lower_context.h"

namespace jmp::mps {

namespace {

DType UnsignedTwin(DType t) {
  switch (t) {
    case DType::kI8: return DType::kU8;
    case DType::kI16: return DType::kU16;
    case DType::kI32: return DType::kU32;
    case DType::kI64: return DType::kU64;
    default: return t;
  }
}

Status RngBitGenerator(LowerContext& cx) {
  if (cx.op().operands.size() != 1 || cx.op().results.size() != 2) return cx.Unsupported("malformed rng_bit_generator");
  JMP_ASSIGN_OR_RETURN(int64_t algorithm, cx.IntAttr("rng_algorithm"));
  // StableHLO's RngAlgorithm: 0 DEFAULT, 1 THREE_FRY, 2 PHILOX.
  if (algorithm < 0 || algorithm > 2) return cx.Unsupported("unknown rng_algorithm " + std::to_string(algorithm));
  RngAlgorithm how = algorithm == 1 ? RngAlgorithm::kThreeFry : RngAlgorithm::kPhilox;
  const shlo::Type& state_type = cx.InType(0);
  const bool state_ok = state_type.dtype == DType::kU64 && state_type.shape.size() == 1 &&
                        (state_type.shape[0] == 2 || (how == RngAlgorithm::kPhilox && state_type.shape[0] == 3));
  if (!state_ok)
    return cx.Unsupported(how == RngAlgorithm::kThreeFry ? "THREE_FRY needs a ui64[2] state"
                                                         : "PHILOX needs a ui64[2] or ui64[3] state");
  const shlo::Type& bits_type = cx.OutType(1);
  DType bits = UnsignedTwin(bits_type.dtype);
  if (!IsUnsignedInt(bits)) return cx.Unsupported("random bits of a non-integer type");
  int64_t n = 1;
  for (int64_t d : bits_type.shape)
    if (d < 0 || __builtin_mul_overflow(n, d, &n) || n > (int64_t{1} << 48))
      return cx.Unsupported("random bits of an unreasonable shape");
  JMP_ASSIGN_OR_RETURN(int state, cx.In(0));
  Op op = cx.NewOp(OpKind::kRngBitGenerator, {state});
  op.attrs = RngAttrs{how};
  std::vector<int> out =
      cx.EmitOp(std::move(op), {TensorType{DType::kU64, state_type.shape}, TensorType{bits, bits_type.shape}});
  cx.Bind(0, out[0]);
  cx.Bind(1, cx.Reinterpret(out[1], bits_type.dtype));
  return Status::Ok();
}

}  // namespace

void RegisterRandomRules(std::map<std::string, LowerRule>& r) {
  RegisterRule(r, "stablehlo.rng_bit_generator", &RngBitGenerator);
}

}  // namespace jmp::mps

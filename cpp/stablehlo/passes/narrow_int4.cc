// The narrow-type pass on int2/int4: computed on the storage type and wrapped back; @main's buffers
// sign-extended on entry and masked on exit.
#include <cstdint>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "stablehlo/passes/narrow_builder.h"
#include "stablehlo/passes/narrow_rewriter.h"

namespace jmp::shlo::narrow {

Status Rewriter::RewriteInt4(const Op& op, Op& copy) {
  JMP_RETURN_IF_ERROR(RewriteRegions(op, &copy, /*retype_only=*/In(kComputeRegions, op.name)));
  if (op.results.size() == 1 && TypeOf(op.results[0]).kind == Type::Kind::kTensor) {
    const int r = op.results[0];
    const DType t = TypeOf(r).dtype;
    // popcnt counts the bits of the type's own width (popcnt of int4's -8 is 1, not the sign-extended
    // byte's 5): the count of the low bits, which fits any signed type of that width.
    if (op.name == "stablehlo.popcnt" && IsSignedSubByte(t)) {
      Convert(Unary(op.name, Nibble(op.operands[0], BitWidth(t)), DType::kU8), StorageOf(t), r);
      return Status::Ok();
    }
    if (op.name == "stablehlo.count_leading_zeros" && IsSubByteInt(t)) {
      int n = Unary(op.name, Nibble(op.operands[0], BitWidth(t)), DType::kU8);  // counts within its bits
      n = Binary("stablehlo.subtract", n, Like(n, static_cast<uint64_t>(8 - BitWidth(t))));
      Convert(n, StorageOf(t), r);
      return Status::Ok();
    }
    if (op.name == "stablehlo.shift_right_logical" && IsSignedSubByte(t)) {
      int x = Bitcast(Nibble(op.operands[0], BitWidth(t)), DType::kI8);
      Wrap(Binary(op.name, x, op.operands[1]), t, r);
      return Status::Ok();
    }
    if (op.name == "stablehlo.shift_right_arithmetic" && IsSubByteInt(t) && !IsSignedSubByte(t)) {
      // the sign is the top bit of its width
      int x = Wrap(Bitcast(op.operands[0], DType::kI8), t == DType::kU4 ? DType::kI4 : DType::kI2);
      int s = Binary(op.name, x, Bitcast(op.operands[1], DType::kI8));
      Wrap(Bitcast(s, DType::kU8), t, r);
      return Status::Ok();
    }
  }
  std::vector<std::pair<int, int>> wraps;  // (storage result, int4 value)
  for (int& v : copy.results) {
    const Type t = TypeOf(v);
    if (t.kind == Type::Kind::kTuple && TypeIsNarrow(t)) return Refuse(op, DType::kI4);
    if (t.kind == Type::Kind::kTensor && IsSubByteInt(t.dtype)) {
      int s = NewValue(StorageOf(t.dtype), t.shape);
      wraps.push_back({s, v});
      v = s;
    }
  }
  out_->push_back(std::move(copy));
  for (auto [s, v] : wraps) Wrap(s, TypeOf(v).dtype, v);
  return Status::Ok();
}

Status Rewriter::MainBoundary(Block& block) {
  std::vector<Op> entry;
  out_ = &entry;
  for (int& arg : block.args) {
    const DType t = DTypeOfValue(arg);
    if (!IsSignedSubByte(t)) continue;
    int raw = NewValue(DType::kI8, TypeOf(arg).shape);
    Wrap(raw, t, arg);
    arg = raw;
  }
  if (block.ops.empty() || block.ops.back().name != "func.return") return InvalidArgument("@main has no func.return");
  std::vector<Op> exit;
  out_ = &exit;
  for (int& v : block.ops.back().operands)
    if (TypeOf(v).kind == Type::Kind::kTensor && IsSignedSubByte(TypeOf(v).dtype))
      v = Binary("stablehlo.and", v, Like(v, static_cast<uint64_t>((1 << BitWidth(TypeOf(v).dtype)) - 1)));
  Op ret = std::move(block.ops.back());
  block.ops.pop_back();
  entry.insert(entry.end(), std::make_move_iterator(block.ops.begin()), std::make_move_iterator(block.ops.end()));
  entry.insert(entry.end(), std::make_move_iterator(exit.begin()), std::make_move_iterator(exit.end()));
  entry.push_back(std::move(ret));
  block.ops = std::move(entry);
  out_ = nullptr;
  return Status::Ok();
}

}  // namespace jmp::shlo::narrow

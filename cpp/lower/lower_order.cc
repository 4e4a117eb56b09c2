#include "lower/lower_order.h"

namespace jmp::mps {

namespace {

// The top bit of an unsigned type: flipping it maps unsigned order onto signed order.
uint64_t TopBit(DType t) { return uint64_t{1} << (BitWidth(t) - 1); }

}  // namespace

int ToOrdered(LowerContext& cx, int x) {
  const DType t = cx.DTypeOf(x);
  if (OpKindDomain(OpKind::kSort).Has(t)) return x;
  if (t == DType::kBF16) return cx.Cast(x, DType::kF32);
  if (t == DType::kU32 || t == DType::kU64) {
    int flipped = cx.Binary(OpKind::kBitwiseXor, x, cx.SplatBits(t, cx.ShapeOf(x), TopBit(t)));
    return cx.Reinterpret(flipped, SignedOfWidth(BitWidth(t)));
  }
  return cx.Cast(x, DType::kI32);
}

int FromOrdered(LowerContext& cx, int y, DType t) {
  if (cx.DTypeOf(y) == t) return y;
  if (t == DType::kU32 || t == DType::kU64) {
    int u = cx.Reinterpret(y, t);
    return cx.Binary(OpKind::kBitwiseXor, u, cx.SplatBits(t, cx.ShapeOf(u), TopBit(t)));
  }
  return cx.Cast(y, t);
}

}  // namespace jmp::mps

// The narrow-type pass on converts and bitcasts between narrow types and others, as XLA converts.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "stablehlo/passes/narrow_builder.h"
#include "stablehlo/passes/narrow_rewriter.h"

namespace jmp::shlo::narrow {

Status Rewriter::RewriteConvert(const Op& op) {
  int x = op.operands.at(0);
  const int r = op.results.at(0);
  DType from = DTypeOfValue(x);
  const DType to = DTypeOfValue(r);
  if (IsComplex(from) || IsComplex(to)) return Refuse(op, IsNarrow(from) ? from : to);
  if (IsNarrowFloat(from) && (IsInteger(to) || IsSubByteInt(to))) {
    NarrowFloatToInteger(Decode(x, from), from, to, r);
    return Status::Ok();
  }
  if (IsNarrowFloat(from)) {
    if (from == to) {
      Bitcast(x, DType::kU8, r);
      return Status::Ok();
    }
    x = Decode(x, from, to == DType::kF32 ? r : -1);
    if (to == DType::kF32) return Status::Ok();
    from = DType::kF32;
  } else {
    from = StorageOf(from);
  }
  if (IsNarrowFloat(to)) {
    // float64 -> float8 rounds twice (through float32): MPSGraph has no float64 to do better.
    const bool narrow_float = to == DType::kF8E5M2 && (IsNarrowFloat(DTypeOfValue(op.operands[0])) ||
                                                       from == DType::kF16 || from == DType::kBF16);
    if (from != DType::kF32) x = Convert(x, DType::kF32);
    Encode(x, to, r, narrow_float);
  } else if (IsSubByteInt(to)) {
    ToInt4(x, from, to, r);
  } else {
    Convert(x, to, r);
  }
  return Status::Ok();
}

int Rewriter::ToInt4(int x, DType from, DType to, int result) {
  const DType s = StorageOf(to);
  int y = Convert(x, s);
  if (!IsFloat(from)) return Wrap(y, to, result);
  // saturating, like XLA:CPU (the storage conversion saturates to 8 bits first)
  y = Binary("stablehlo.maximum", y, Like(y, static_cast<uint8_t>(SubByteMin(to))));
  return Binary("stablehlo.minimum", y, Like(y, static_cast<uint64_t>(SubByteMax(to))), result);
}

void Rewriter::NarrowFloatToInteger(int x, DType from, DType to, int result) {
  const int bits = BitWidth(to);
  const bool is_signed = IsSignedInt(to) || IsSignedSubByte(to);
  const int64_t hi = bits >= 64  ? (is_signed ? INT64_MAX : -1)
                     : is_signed ? (int64_t{1} << (bits - 1)) - 1
                                 : (int64_t{1} << bits) - 1;
  const int64_t lo = is_signed ? -hi - 1 : 0;
  const double hi_value = bits >= 64 && !is_signed ? 18446744073709551615.0 : static_cast<double>(hi);
  const std::vector<int64_t> shape = TypeOf(x).shape;  // a copy: types_ grows below
  auto bound = [&](double v) {                         // v in the float type, as float32 of x's shape
    const float f = static_cast<float>(v);
    uint32_t b;
    std::memcpy(&b, &f, 4);
    return Broadcast(Decode(Encode(Splat(DType::kF32, b, {}), from), from), shape);
  };
  int y = IsSubByteInt(to) ? ToInt4(x, DType::kF32, to) : Convert(x, to);
  y = Select(Compare("GE", x, bound(hi_value), "FLOAT"), Like(y, static_cast<uint64_t>(hi)), y);
  Select(Compare("LE", x, bound(static_cast<double>(lo)), "FLOAT"), Like(y, static_cast<uint64_t>(lo)), y, result);
}

Status Rewriter::RewriteBitcast(const Op& op) {
  const int x = op.operands.at(0);
  const int r = op.results.at(0);
  const DType from = DTypeOfValue(x), to = DTypeOfValue(r);
  const int fw = BitWidth(from), tw = BitWidth(to);
  if (from == DType::kBool || to == DType::kBool || IsComplex(from) || IsComplex(to))
    return Refuse(op, IsNarrow(from) ? from : to);
  if (fw == tw) {
    if (IsSubByteInt(to)) {
      Wrap(Bitcast(x, StorageOf(to)), to, r);
    } else if (tw == 4) {  // float4: the low nibble, whatever int4's storage held above it
      int u = Bitcast(x, DType::kU8);
      Binary("stablehlo.and", u, Like(u, 0x0f), r);
    } else {
      Bitcast(x, StorageOf(to), r);
    }
    return Status::Ok();
  }
  if (fw >= 8 && tw >= 8) {  // float8 <-> 16/32/64 bits: the storage bytes are the bits
    Bitcast(x, StorageOf(to), r);
    return Status::Ok();
  }
  // Sub-byte lanes (2 or 4 bits) pack into or unpack from a wider type, lane j at bits lane*j (the
  // first lane lowest, as XLA lays them out): [S, k] lanes <-> [S].
  const std::vector<int64_t> in_shape = TypeOf(x).shape;  // a copy: types_ grows below
  if (fw < tw) {
    const int64_t k = tw / fw;
    const DType u = UnsignedOfWidth(tw < 8 ? 8 : tw);  // a 4-bit result accumulates in uint8
    std::vector<int64_t> out_shape(in_shape.begin(), in_shape.end() - 1);
    int lanes = Nibble(x, fw);
    int acc = -1;
    for (int64_t j = 0; j < k; ++j) {
      Attr starts, limits, strides;
      starts.kind = limits.kind = strides.kind = Attr::Kind::kInts;
      starts.ints.assign(in_shape.size(), 0);
      limits.ints = in_shape;
      strides.ints.assign(in_shape.size(), 1);
      starts.ints.back() = j;
      limits.ints.back() = j + 1;
      std::vector<int64_t> one = out_shape;
      one.push_back(1);
      int s = Emit("stablehlo.slice", {lanes}, DType::kU8, one,
                   {{"start_indices", starts}, {"limit_indices", limits}, {"strides", strides}});
      int w = Convert(Emit("stablehlo.reshape", {s}, DType::kU8, out_shape), u);
      if (j > 0) w = Binary("stablehlo.shift_left", w, Like(w, static_cast<uint64_t>(fw * j)));
      acc = acc < 0 ? w : Binary("stablehlo.or", acc, w);
    }
    if (IsSubByteInt(to))
      Wrap(Bitcast(acc, StorageOf(to)), to, r);
    else
      Bitcast(acc, StorageOf(to), r);  // float4 keeps its bits in the low nibble of uint8
    return Status::Ok();
  }
  // [S] -> [S, k] lanes
  const int64_t k = fw / tw;
  const uint64_t mask = (uint64_t{1} << tw) - 1;
  int bits = fw < 8 ? Nibble(x, fw) : Bitcast(x, UnsignedOfWidth(fw));
  std::vector<int64_t> one = in_shape;
  one.push_back(1);
  std::vector<int> parts;
  for (int64_t j = 0; j < k; ++j) {
    int s = j > 0 ? Binary("stablehlo.shift_right_logical", bits, Like(bits, static_cast<uint64_t>(tw * j))) : bits;
    int n = Binary("stablehlo.and", s, Like(s, mask));
    if (DTypeOfValue(n) != DType::kU8) n = Convert(n, DType::kU8);
    parts.push_back(Emit("stablehlo.reshape", {n}, DType::kU8, one));
  }
  std::vector<int64_t> out_shape = in_shape;
  out_shape.push_back(k);
  Attr dim;
  dim.kind = Attr::Kind::kInt;
  dim.i = static_cast<int64_t>(in_shape.size());
  int cat = Emit("stablehlo.concatenate", parts, DType::kU8, out_shape, {{"dimension", dim}});
  if (IsSignedSubByte(to)) {
    Wrap(Bitcast(cat, DType::kI8), to, r);
  } else {
    Bitcast(cat, DType::kU8, r);
  }
  return Status::Ok();
}

}  // namespace jmp::shlo::narrow

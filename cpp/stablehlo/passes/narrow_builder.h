// The narrow-type pass's IR builder: emits StableHLO ops into a block being rewritten, and the
// encodings of int2/int4 and of the narrow float formats (float8, float4) in ops on their storage types.
// stablehlo/passes/narrow_types.cc rewrites programs with it.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "stablehlo/ir.h"
#include "support/dtype.h"

namespace jmp::shlo::narrow {

// How a narrow float format spells its special values (the format's name says it: fn = finite with
// NaN, fnuz = finite, NaN, unsigned zero).
enum class Specials {
  kIeee,        // exponent all ones: infinity (mantissa 0) or NaN; overflow gives infinity
  kAllOnesNan,  // no infinity; the all-ones magnitude is NaN; overflow and infinity give NaN
  kFnuz,        // no infinity, no negative zero: 0x80 is the one NaN; overflow and infinity give NaN
  kNone,        // neither infinity nor NaN: overflow and infinity saturate, NaN gives 0b1000 (XLA:CPU's choice)
};
struct NarrowFloat {
  DType type;
  int width, exp_bits, man_bits, bias;
  bool has_sign;  // float8_e8m0fnu has none: negative numbers and zero give its NaN
  Specials specials;
};
// The format of a narrow float type (IsNarrowFloat).
const NarrowFloat& FormatOf(DType t);
uint32_t SignMask(const NarrowFloat& f);
uint32_t MagnitudeMask(const NarrowFloat& f);
// One narrow float value as float32, on the host (constants of promoted regions); what Decode does.
float DecodeNarrowFloat(uint8_t b, DType t);

// Appends ops to out_ (the block being built), with new values typed in types_ (per value id).
class Builder {
 protected:
  explicit Builder(std::vector<Type> types) : types_(std::move(types)) {}

  const Type& TypeOf(int v) const { return types_.at(static_cast<size_t>(v)); }
  DType DTypeOfValue(int v) const { return TypeOf(v).kind == Type::Kind::kTensor ? TypeOf(v).dtype : DType::kF32; }

  int NewValue(DType d, const std::vector<int64_t>& shape) {
    Type t;
    t.kind = Type::Kind::kTensor;
    t.dtype = d;
    t.shape = shape;
    types_.push_back(std::move(t));
    return static_cast<int>(types_.size() - 1);
  }

  // Emits `name` on `operands` into `result` (a new value of type d[shape] when result < 0).
  int Emit(const std::string& name, std::vector<int> operands, DType d, std::vector<int64_t> shape,
           shlo::AttrMap attrs = {}, int result = -1) {
    if (result < 0) result = NewValue(d, shape);
    Op op;
    op.name = name;
    op.operands = std::move(operands);
    op.results = {result};
    op.attrs = std::move(attrs);
    op.location = loc_;
    out_->push_back(std::move(op));
    return result;
  }
  int Unary(const std::string& name, int x, DType d, int result = -1) {
    return Emit(name, {x}, d, TypeOf(x).shape, {}, result);
  }
  int Binary(const std::string& name, int a, int b, int result = -1) {
    return Emit(name, {a, b}, DTypeOfValue(a), TypeOf(a).shape, {}, result);
  }
  // A constant of a's shape and type d holding `bits` (little-endian), as a scalar broadcast.
  int Splat(DType d, uint64_t bits, std::vector<int64_t> shape) {  // by value: types_ grows below
    Attr value;
    value.kind = Attr::Kind::kTensor;
    value.type.kind = Type::Kind::kTensor;
    value.type.dtype = d;
    value.data.resize(ByteSize(d));
    for (size_t i = 0; i < value.data.size() && i < 8; ++i) value.data[i] = static_cast<uint8_t>(bits >> (8 * i));
    return Broadcast(Emit("stablehlo.constant", {}, d, {}, {{"value", value}}), std::move(shape));
  }
  // A scalar value broadcast to `shape` (itself when shape is scalar).
  int Broadcast(int scalar, std::vector<int64_t> shape) {
    if (shape.empty()) return scalar;
    Attr dims;
    dims.kind = Attr::Kind::kInts;
    return Emit("stablehlo.broadcast_in_dim", {scalar}, DTypeOfValue(scalar), std::move(shape),
                {{"broadcast_dimensions", dims}});
  }
  int Like(int x, uint64_t bits) { return Splat(DTypeOfValue(x), bits, TypeOf(x).shape); }
  int FloatLike(int x, float f) {
    uint32_t b;
    std::memcpy(&b, &f, 4);
    return Splat(DType::kF32, b, TypeOf(x).shape);
  }
  int Compare(const char* dir, int a, int b, const char* type) {
    static const char* const kDirs[] = {"EQ", "NE", "GE", "GT", "LE", "LT"};
    static const char* const kTypes[] = {"NOTYPE", "FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED"};
    Attr d, t;
    d.kind = t.kind = Attr::Kind::kEnum;
    d.s = dir;
    t.s = type;
    for (int i = 0; i < 6; ++i)
      if (d.s == kDirs[i]) d.i = i;
    for (int i = 0; i < 5; ++i)
      if (t.s == kTypes[i]) t.i = i;
    return Emit("stablehlo.compare", {a, b}, DType::kBool, TypeOf(a).shape,
                {{"comparison_direction", d}, {"compare_type", t}});
  }
  int Select(int p, int a, int b, int result = -1) {
    return Emit("stablehlo.select", {p, a, b}, DTypeOfValue(a), TypeOf(a).shape, {}, result);
  }
  int Convert(int x, DType d, int result = -1) { return Unary("stablehlo.convert", x, d, result); }
  int Bitcast(int x, DType d, int result = -1) { return Unary("stablehlo.bitcast_convert", x, d, result); }

  // Sub-byte integer storage -> the same value wrapped into its bits (int8 sign-extended, uint8 masked).
  int Wrap(int x, DType narrow, int result = -1) {
    if (!IsSignedSubByte(narrow))
      return Binary("stablehlo.and", x, Like(x, static_cast<uint64_t>(SubByteMax(narrow))), result);
    const uint64_t unused = static_cast<uint64_t>(8 - BitWidth(narrow));
    int up = Binary("stablehlo.shift_left", x, Like(x, unused));
    return Binary("stablehlo.shift_right_arithmetic", up, Like(up, unused), result);
  }
  // Storage of a type `bits` wide -> its bit pattern as uint8 (int4/uint4/float4: 0..15).
  int Nibble(int x, int bits = 4) {
    int u = DTypeOfValue(x) == DType::kU8 ? x : Bitcast(x, DType::kU8);
    return Binary("stablehlo.and", u, Like(u, (uint64_t{1} << bits) - 1));
  }

  // Narrow float bits (uint8) -> float32, exactly.
  int Decode(int x, DType fmt_type, int result = -1);
  // float32 -> narrow float bits (uint8), rounded once: to nearest-even, except e8m0fnu (no mantissa),
  // whose ties round up (XLA:CPU and ml_dtypes: 0.75 -> 1, 1.5 -> 2, 3 -> 4).
  // `plain_nan`: every NaN becomes 0x7f, without its sign (what XLA:CPU gives for float8_e5m2
  // arithmetic, which it computes through float16, and for float16/bfloat16 -> float8_e5m2).
  int Encode(int y, DType fmt_type, int result = -1, bool plain_nan = false);

  std::vector<Type> types_;  // per value id: its type as the program declares it (float8 in a promoted region: f32)
  std::vector<Op>* out_ = nullptr;
  std::string loc_;
};

}  // namespace jmp::shlo::narrow

#include "mps/lower_narrow.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace jmp::mps {

namespace {

using shlo::Attr;
using shlo::Block;
using shlo::Func;
using shlo::Op;
using shlo::Region;
using shlo::Type;

bool TypeIsNarrow(const Type& t) {
  if (t.kind == Type::Kind::kTensor) return IsNarrow(t.dtype);
  for (const Type& e : t.elements)
    if (TypeIsNarrow(e)) return true;
  return false;
}

Type StorageType(Type t) {
  if (t.kind == Type::Kind::kTensor) t.dtype = StorageOf(t.dtype);
  for (Type& e : t.elements) e = StorageType(e);
  return t;
}

void RetypeAttr(Attr& a) {
  a.type = StorageType(a.type);
  for (Attr& x : a.array) RetypeAttr(x);
  for (auto& [name, v] : a.dict) RetypeAttr(v);
}

bool In(const std::set<std::string>& s, const std::string& name) { return s.count(name) != 0; }

// Ops that only move, copy or select elements: exact on the storage bits whatever they mean.
const std::set<std::string> kMovesData = {
    "stablehlo.reshape",
    "stablehlo.transpose",
    "stablehlo.broadcast_in_dim",
    "stablehlo.broadcast",
    "stablehlo.slice",
    "stablehlo.dynamic_slice",
    "stablehlo.dynamic_update_slice",
    "stablehlo.concatenate",
    "stablehlo.pad",
    "stablehlo.gather",
    "stablehlo.reverse",
    "stablehlo.select",
    "stablehlo.tuple",
    "stablehlo.get_tuple_element",
    "stablehlo.optimization_barrier",
    "stablehlo.return",
    "func.return",
    "func.call",
    "stablehlo.constant",
    "stablehlo.all_gather",
    "stablehlo.all_to_all",
    "stablehlo.collective_permute",
    "stablehlo.collective_broadcast",
    "stablehlo.copy",
    "stablehlo.composite",
    "builtin.unrealized_conversion_cast",
    "sdy.sharding_constraint",
    "sdy.reshard",
};
// custom_call targets the lowering passes through (lower_shape.cc): they move nothing either.
const std::set<std::string> kPassThroughTargets = {
    "dce_sink", "Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape", "annotate_device_placement",
};
// Control flow: their regions are rewritten like any block; their results need nothing.
const std::set<std::string> kControlFlow = {"stablehlo.while", "stablehlo.if", "stablehlo.case"};
// Ops whose region is a scalar computation applied by the op (reduce's body, sort's comparator, ...).
const std::set<std::string> kComputeRegions = {
    "stablehlo.reduce", "stablehlo.reduce_window", "stablehlo.scatter",    "stablehlo.select_and_scatter",
    "stablehlo.sort",   "stablehlo.map",           "stablehlo.all_reduce", "stablehlo.reduce_scatter",
};
// Ops with effects or opaque semantics that no rewrite can make exact.
const std::set<std::string> kRefused = {
    "stablehlo.custom_call", "stablehlo.rng",     "stablehlo.rng_bit_generator",
    "stablehlo.infeed",      "stablehlo.outfeed", "stablehlo.send",
    "stablehlo.recv",        "stablehlo.fft",
};

// A float8 format: exponent and mantissa bits, bias.
struct F8Format {
  int exp_bits, man_bits, bias;
};
F8Format FormatOf(DType t) { return t == DType::kF8E4M3FN ? F8Format{4, 3, 7} : F8Format{5, 2, 15}; }

// One float8 value as float32, on the host (constants of promoted regions); NaN as float32's quiet NaN.
float DecodeFloat8(uint8_t b, DType t) {
  const F8Format f = FormatOf(t);
  const int e = (b & 0x7f) >> f.man_bits, m = b & ((1 << f.man_bits) - 1);
  const bool nan = t == DType::kF8E4M3FN ? (b & 0x7f) == 0x7f : e == (1 << f.exp_bits) - 1 && m != 0;
  const bool inf = t == DType::kF8E5M2 && e == (1 << f.exp_bits) - 1 && m == 0;
  float v = nan      ? std::numeric_limits<float>::quiet_NaN()
            : inf    ? std::numeric_limits<float>::infinity()
            : e == 0 ? std::ldexp(static_cast<float>(m), 1 - f.bias - f.man_bits)
                     : std::ldexp(static_cast<float>((1 << f.man_bits) | m), e - f.bias - f.man_bits);
  return (b & 0x80) ? -v : v;
}

class Rewriter {
 public:
  explicit Rewriter(const Func& in) : in_(in), types_(in.value_types) {}

  StatusOr<Func> Run(bool is_main) {
    Func out = in_;
    out.body.blocks.clear();
    for (const Block& b : in_.body.blocks) {
      Block nb;
      JMP_RETURN_IF_ERROR(RewriteBlock(b, &nb, /*retype_only=*/false));
      out.body.blocks.push_back(std::move(nb));
    }
    if (is_main && !out.body.blocks.empty()) JMP_RETURN_IF_ERROR(MainBoundary(out.body.blocks[0]));
    for (Type& t : out.arg_types) t = StorageType(t);
    for (Type& t : out.result_types) t = StorageType(t);
    out.value_types.clear();
    for (const Type& t : types_) out.value_types.push_back(StorageType(t));
    return out;
  }

 private:
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
    int c = Emit("stablehlo.constant", {}, d, {}, {{"value", value}});
    if (shape.empty()) return c;
    Attr dims;
    dims.kind = Attr::Kind::kInts;
    return Emit("stablehlo.broadcast_in_dim", {c}, d, shape, {{"broadcast_dimensions", dims}});
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

  // int4/uint4 storage -> the same value wrapped into 4 bits (int8 sign-extended, uint8 masked).
  int Wrap(int x, DType narrow, int result = -1) {
    if (narrow == DType::kU4) return Binary("stablehlo.and", x, Like(x, 0x0f), result);
    int up = Binary("stablehlo.shift_left", x, Like(x, 4));
    return Binary("stablehlo.shift_right_arithmetic", up, Like(up, 4), result);
  }
  // int4/uint4 storage -> its 4-bit pattern as uint8 0..15.
  int Nibble(int x) {
    int u = DTypeOfValue(x) == DType::kU8 ? x : Bitcast(x, DType::kU8);
    return Binary("stablehlo.and", u, Like(u, 0x0f));
  }

  // float8 bits (uint8) -> float32, exactly.
  int Decode(int x, DType fmt_type, int result = -1) {
    const F8Format f = FormatOf(fmt_type);
    const int M = f.man_bits, emax = (1 << f.exp_bits) - 1;
    int c = Convert(x, DType::kU32);
    int sign = Binary("stablehlo.shift_left", Binary("stablehlo.and", c, Like(c, 0x80)), Like(c, 24));
    int mag = Binary("stablehlo.and", c, Like(c, 0x7f));
    int e = Binary("stablehlo.shift_right_logical", mag, Like(mag, M));
    int m = Binary("stablehlo.and", mag, Like(mag, (1u << M) - 1));
    int normal = Binary("stablehlo.add", Binary("stablehlo.shift_left", mag, Like(mag, 23 - M)),
                        Like(mag, static_cast<uint64_t>(127 - f.bias) << 23));
    // A subnormal is m * 2^(1 - bias - M): exact in float32.
    int sub_f = Binary("stablehlo.multiply", Convert(m, DType::kF32), FloatLike(m, std::ldexp(1.0f, 1 - f.bias - M)));
    int bits = Select(Compare("EQ", e, Like(e, 0), "UNSIGNED"), Bitcast(sub_f, DType::kU32), normal);
    if (fmt_type == DType::kF8E4M3FN) {  // 0x7f / 0xff are NaN, there is no infinity
      bits = Select(Compare("EQ", mag, Like(mag, 0x7f), "UNSIGNED"), Like(mag, 0x7fc00000u), bits);
    } else {  // exponent all ones: infinity (m == 0) or NaN (float32's quiet NaN, as XLA:CPU gives)
      int special = Select(Compare("EQ", m, Like(m, 0), "UNSIGNED"), Like(m, 0x7f800000u), Like(m, 0x7fc00000u));
      bits = Select(Compare("EQ", e, Like(e, static_cast<uint64_t>(emax)), "UNSIGNED"), special, bits);
    }
    return Bitcast(Binary("stablehlo.or", bits, sign), DType::kF32, result);
  }

  // float32 -> float8 bits (uint8), rounded once to nearest-even.
  // `plain_nan`: every NaN becomes 0x7f, without its sign (what XLA:CPU gives for float8_e5m2
  // arithmetic, which it computes through float16, and for float16/bfloat16 -> float8_e5m2).
  int Encode(int y, DType fmt_type, int result = -1, bool plain_nan = false) {
    const F8Format f = FormatOf(fmt_type);
    const int M = f.man_bits;
    int b = Bitcast(y, DType::kU32);
    int sign = Binary("stablehlo.and", Binary("stablehlo.shift_right_logical", b, Like(b, 24)), Like(b, 0x80));
    int a = Binary("stablehlo.and", b, Like(b, 0x7fffffffu));
    // Normal results: round the float32 mantissa to M bits (a carry moves into the exponent, as it
    // should), then rebias. Wraps for tiny a, which the select below discards.
    int lsb = Binary("stablehlo.and", Binary("stablehlo.shift_right_logical", a, Like(a, 23 - M)), Like(a, 1));
    int rounded = Binary("stablehlo.add", Binary("stablehlo.add", a, Like(a, (1u << (22 - M)) - 1)), lsb);
    int normal = Binary("stablehlo.subtract", Binary("stablehlo.shift_right_logical", rounded, Like(rounded, 23 - M)),
                        Like(rounded, static_cast<uint64_t>(127 - f.bias) << M));
    // Subnormal results: adding 2^(23 + 1 - bias - M) makes float32's own rounding (nearest-even)
    // quantize |y| to the subnormal step; the sum's low bits are the code (2^M: the smallest normal).
    const float magic = std::ldexp(1.0f, 23 + 1 - f.bias - M);
    uint32_t magic_bits;
    std::memcpy(&magic_bits, &magic, 4);
    int sum = Binary("stablehlo.add", Bitcast(a, DType::kF32), FloatLike(a, magic));
    int sub = Binary("stablehlo.subtract", Bitcast(sum, DType::kU32), Like(a, magic_bits));
    int is_sub = Compare("LT", a, Like(a, static_cast<uint64_t>(127 - f.bias + 1) << 23), "UNSIGNED");
    int code = Select(is_sub, sub, normal);
    int is_nan = Compare("GT", a, Like(a, 0x7f800000u), "UNSIGNED");
    if (fmt_type == DType::kF8E4M3FN) {  // beyond 448 (0x7e), infinity and NaN: NaN
      int bad = Binary("stablehlo.or", is_nan, Compare("GT", code, Like(code, 0x7e), "UNSIGNED"));
      code = Select(bad, Like(code, 0x7f), code);
    } else {  // beyond the largest finite value: infinity; NaN: 0x7e
      code = Select(Compare("GT", code, Like(code, 0x7c), "UNSIGNED"), Like(code, 0x7c), code);
      code = Select(is_nan, Like(code, 0x7e), code);
    }
    code = Binary("stablehlo.or", code, sign);
    if (plain_nan) code = Select(is_nan, Like(code, 0x7f), code);
    return Convert(code, DType::kU8, result);
  }

  Status Refuse(const Op& op, DType t) {
    return Unimplemented(op.name + " on " + std::string(DTypeName(t)) + " is not supported by the metal plugin" +
                         (op.location.empty() ? "" : " (from " + op.location + ")"));
  }

  // The first narrow dtype an op reads or writes (kF32 when none).
  DType NarrowIn(const Op& op, bool* any_f8, bool* any_i4) const {
    DType found = DType::kF32;
    auto see = [&](int v) {
      const Type& t = TypeOf(v);
      if (t.kind != Type::Kind::kTensor || !IsNarrow(t.dtype)) return;
      if (found == DType::kF32) found = t.dtype;
      if (IsFloat8(t.dtype)) *any_f8 = true;
      if (IsInt4(t.dtype)) *any_i4 = true;
    };
    for (int v : op.operands) see(v);
    for (int v : op.results) see(v);
    return found;
  }

  Status RewriteRegions(const Op& in, Op* out, bool retype_only) {
    out->regions.clear();
    for (const Region& r : in.regions) {
      Region nr;
      for (const Block& b : r.blocks) {
        Block nb;
        JMP_RETURN_IF_ERROR(RewriteBlock(b, &nb, retype_only));
        nr.blocks.push_back(std::move(nb));
      }
      out->regions.push_back(std::move(nr));
    }
    return Status::Ok();
  }

  // Every value a region defines (block arguments, op results, nested regions').
  void DefinedIn(const Region& r, std::vector<int>* ids) {
    for (const Block& b : r.blocks) {
      ids->insert(ids->end(), b.args.begin(), b.args.end());
      for (const Op& op : b.ops) {
        ids->insert(ids->end(), op.results.begin(), op.results.end());
        for (const Region& nested : op.regions) DefinedIn(nested, ids);
      }
    }
  }

  Status RewriteBlock(const Block& in, Block* out, bool retype_only) {
    out->args = in.args;
    std::vector<Op>* saved = out_;
    out_ = &out->ops;
    for (const Op& op : in.ops) {
      Status s = RewriteOp(op, retype_only);
      if (!s.ok()) {
        out_ = saved;
        return s;
      }
    }
    out_ = saved;
    return Status::Ok();
  }

  Status RewriteOp(const Op& op, bool retype_only) {
    loc_ = op.location;
    bool any_f8 = false, any_i4 = false;
    const DType narrow = NarrowIn(op, &any_f8, &any_i4);
    Op copy = op;
    if (op.name == "stablehlo.constant" && op.results.size() == 1 && promoted_.count(op.results[0])) {
      Attr& value = copy.attrs["value"];
      std::vector<uint8_t> data;
      for (uint8_t b : value.data) {
        const float f = DecodeFloat8(b, promoted_[op.results[0]]);
        uint8_t bytes[4];
        std::memcpy(bytes, &f, 4);
        data.insert(data.end(), bytes, bytes + 4);
      }
      value.data = std::move(data);
      value.type.dtype = DType::kF32;
      out_->push_back(std::move(copy));
      return Status::Ok();
    }
    if (op.name == "stablehlo.constant" && any_f8 && op.results.size() == 1 && copy.Find("value"))
      f8_constants_[op.results[0]] = copy.Find("value")->data;
    for (auto& [name, a] : copy.attrs) RetypeAttr(a);
    const Attr* target = op.Find("call_target_name");
    const bool passes_through = op.name == "stablehlo.custom_call" && target && In(kPassThroughTargets, target->s);
    if ((!any_f8 && !any_i4) || retype_only || passes_through || In(kMovesData, op.name) || In(kControlFlow, op.name)) {
      JMP_RETURN_IF_ERROR(RewriteRegions(op, &copy, retype_only));
      out_->push_back(std::move(copy));
      return Status::Ok();
    }
    if (In(kRefused, op.name)) return Refuse(op, narrow);
    if (op.name == "stablehlo.convert") return RewriteConvert(op);
    if (op.name == "stablehlo.bitcast_convert") return RewriteBitcast(op);
    if (any_f8) return RewriteFloat8(op, copy);
    return RewriteInt4(op, copy);
  }

  // A float8 value a region captures, as float32: a constant stays a constant (the lowering recognises
  // sort comparators and reduce bodies by their constants), anything else is decoded.
  int DecodeCaptured(int v) {
    auto it = f8_constants_.find(v);
    if (it == f8_constants_.end()) return Decode(v, TypeOf(v).dtype);
    Attr value;
    value.kind = Attr::Kind::kTensor;
    value.type = TypeOf(v);
    value.type.dtype = DType::kF32;
    for (uint8_t b : it->second) {
      const float f = DecodeFloat8(b, TypeOf(v).dtype);
      uint8_t bytes[4];
      std::memcpy(bytes, &f, 4);
      value.data.insert(value.data.end(), bytes, bytes + 4);
    }
    return Emit("stablehlo.constant", {}, DType::kF32, TypeOf(v).shape, {{"value", value}});
  }

  // Renames the operands of every op in a region (nested ones too).
  static void Substitute(std::vector<Region>& regions, const std::map<int, int>& to) {
    for (Region& r : regions)
      for (Block& b : r.blocks)
        for (Op& op : b.ops) {
          for (int& v : op.operands) {
            auto it = to.find(v);
            if (it != to.end()) v = it->second;
          }
          Substitute(op.regions, to);
        }
  }
  static void OperandsOf(const std::vector<Region>& regions, std::vector<int>* ids) {
    for (const Region& r : regions)
      for (const Block& b : r.blocks)
        for (const Op& op : b.ops) {
          ids->insert(ids->end(), op.operands.begin(), op.operands.end());
          OperandsOf(op.regions, ids);
        }
  }

  // float8: decode operands, compute in float32, encode results. A region the op applies (reduce's
  // body, sort's comparator) computes in float32 throughout: its float8 values become float32, its
  // float8 constants are decoded here, and the float8 values it captures from outside (JAX hoists
  // region constants out) are decoded before the op.
  Status RewriteFloat8(const Op& op, Op& copy) {
    if (In(kComputeRegions, op.name)) {
      std::vector<int> ids;
      for (const Region& r : op.regions) DefinedIn(r, &ids);
      std::set<int> defined(ids.begin(), ids.end());
      for (int v : ids)
        if (TypeOf(v).kind == Type::Kind::kTensor && IsFloat8(TypeOf(v).dtype)) {
          promoted_[v] = TypeOf(v).dtype;
          types_[v].dtype = DType::kF32;
        }
      std::vector<int> used;
      OperandsOf(op.regions, &used);
      std::map<int, int> decoded;
      for (int v : used)
        if (!defined.count(v) && !decoded.count(v) && TypeOf(v).kind == Type::Kind::kTensor &&
            IsFloat8(TypeOf(v).dtype))
          decoded[v] = DecodeCaptured(v);
      Substitute(copy.regions, decoded);
    }
    if (!op.regions.empty() && !In(kComputeRegions, op.name)) {
      bool f8 = false, i4 = false;
      return Refuse(op, NarrowIn(op, &f8, &i4));
    }
    std::vector<Region> regions = std::move(copy.regions);
    Op staged = copy;
    staged.regions = std::move(regions);
    JMP_RETURN_IF_ERROR(RewriteRegions(staged, &copy, /*retype_only=*/false));
    for (int& v : copy.operands) {
      const Type t = TypeOf(v);
      if (t.kind == Type::Kind::kTuple && TypeIsNarrow(t)) return Refuse(op, DType::kF8E4M3FN);
      if (t.kind == Type::Kind::kTensor && IsFloat8(t.dtype)) v = Decode(v, t.dtype);
    }
    std::vector<std::pair<int, int>> encodes;  // (float32 result, float8 value)
    for (int& v : copy.results) {
      const Type t = TypeOf(v);
      if (t.kind == Type::Kind::kTuple && TypeIsNarrow(t)) return Refuse(op, DType::kF8E4M3FN);
      if (t.kind == Type::Kind::kTensor && IsFloat8(t.dtype)) {
        int f = NewValue(DType::kF32, t.shape);
        encodes.push_back({f, v});
        v = f;
      } else if (t.kind == Type::Kind::kTensor && IsInt4(t.dtype)) {
        return Refuse(op, t.dtype);
      }
    }
    out_->push_back(std::move(copy));
    for (auto [f, v] : encodes) Encode(f, TypeOf(v).dtype, v, TypeOf(v).dtype == DType::kF8E5M2);
    return Status::Ok();
  }

  // int4/uint4: compute on the storage type, wrap the results back into 4 bits.
  Status RewriteInt4(const Op& op, Op& copy) {
    JMP_RETURN_IF_ERROR(RewriteRegions(op, &copy, /*retype_only=*/In(kComputeRegions, op.name)));
    if (op.results.size() == 1 && TypeOf(op.results[0]).kind == Type::Kind::kTensor) {
      const int r = op.results[0];
      const DType t = TypeOf(r).dtype;
      // popcnt needs nothing: XLA:CPU counts int4's bits as the sign-extended byte's (popcnt(-8) = 5),
      // which is what computing on int8 storage gives.
      if (op.name == "stablehlo.count_leading_zeros" && IsInt4(t)) {
        int n = Unary(op.name, Nibble(op.operands[0]), DType::kU8);  // counts within the 4 bits
        n = Binary("stablehlo.subtract", n, Like(n, 4));
        Convert(n, StorageOf(t), r);
        return Status::Ok();
      }
      if (op.name == "stablehlo.shift_right_logical" && t == DType::kI4) {
        int x = Bitcast(Nibble(op.operands[0]), DType::kI8);
        Wrap(Binary(op.name, x, op.operands[1]), t, r);
        return Status::Ok();
      }
      if (op.name == "stablehlo.shift_right_arithmetic" && t == DType::kU4) {  // the sign is bit 3
        int x = Wrap(Bitcast(op.operands[0], DType::kI8), DType::kI4);
        int s = Binary(op.name, x, Bitcast(op.operands[1], DType::kI8));
        Wrap(Bitcast(s, DType::kU8), t, r);
        return Status::Ok();
      }
    }
    std::vector<std::pair<int, int>> wraps;  // (storage result, int4 value)
    for (int& v : copy.results) {
      const Type t = TypeOf(v);
      if (t.kind == Type::Kind::kTuple && TypeIsNarrow(t)) return Refuse(op, DType::kI4);
      if (t.kind == Type::Kind::kTensor && IsInt4(t.dtype)) {
        int s = NewValue(StorageOf(t.dtype), t.shape);
        wraps.push_back({s, v});
        v = s;
      }
    }
    out_->push_back(std::move(copy));
    for (auto [s, v] : wraps) Wrap(s, TypeOf(v).dtype, v);
    return Status::Ok();
  }

  Status RewriteConvert(const Op& op) {
    int x = op.operands.at(0);
    const int r = op.results.at(0);
    DType from = DTypeOfValue(x);
    const DType to = DTypeOfValue(r);
    if (IsComplex(from) || IsComplex(to)) return Refuse(op, IsNarrow(from) ? from : to);
    if (IsFloat8(from)) {
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
    if (IsFloat8(to)) {
      // float64 -> float8 rounds twice (through float32): MPSGraph has no float64 to do better.
      const bool narrow_float = to == DType::kF8E5M2 &&
                                (IsFloat8(DTypeOfValue(op.operands[0])) || from == DType::kF16 || from == DType::kBF16);
      if (from != DType::kF32) x = Convert(x, DType::kF32);
      Encode(x, to, r, narrow_float);
    } else if (IsInt4(to)) {
      const DType s = StorageOf(to);
      int y = Convert(x, s);
      if (IsFloat(from)) {  // saturating, like XLA:CPU (the storage conversion saturates to 8 bits first)
        y = Binary("stablehlo.maximum", y, Like(y, to == DType::kI4 ? 0xf8 : 0));
        Binary("stablehlo.minimum", y, Like(y, to == DType::kI4 ? 7 : 15), r);
      } else {
        Wrap(y, to, r);
      }
    } else {
      Convert(x, to, r);
    }
    return Status::Ok();
  }

  Status RewriteBitcast(const Op& op) {
    const int x = op.operands.at(0);
    const int r = op.results.at(0);
    const DType from = DTypeOfValue(x), to = DTypeOfValue(r);
    const int fw = BitWidth(from), tw = BitWidth(to);
    if (from == DType::kBool || to == DType::kBool || IsComplex(from) || IsComplex(to))
      return Refuse(op, IsNarrow(from) ? from : to);
    if (fw == tw) {
      if (IsInt4(to)) {
        Wrap(Bitcast(x, StorageOf(to)), to, r);
      } else {
        Bitcast(x, StorageOf(to), r);
      }
      return Status::Ok();
    }
    if (fw != 4 && tw != 4) {  // float8 <-> 16/32/64 bits: the storage bytes are the bits
      Bitcast(x, StorageOf(to), r);
      return Status::Ok();
    }
    const std::vector<int64_t> in_shape = TypeOf(x).shape;  // a copy: types_ grows below
    if (fw == 4) {                                          // [S, k] nibbles -> [S], nibble j at bits 4j
      const DType u = UnsignedOfWidth(tw);
      const int64_t k = tw / 4;
      std::vector<int64_t> out_shape(in_shape.begin(), in_shape.end() - 1);
      int nib = Nibble(x);
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
        int s = Emit("stablehlo.slice", {nib}, DType::kU8, one,
                     {{"start_indices", starts}, {"limit_indices", limits}, {"strides", strides}});
        int w = Convert(Emit("stablehlo.reshape", {s}, DType::kU8, out_shape), u);
        if (j > 0) w = Binary("stablehlo.shift_left", w, Like(w, static_cast<uint64_t>(4 * j)));
        acc = acc < 0 ? w : Binary("stablehlo.or", acc, w);
      }
      Bitcast(acc, StorageOf(to), r);
      return Status::Ok();
    }
    // [S] -> [S, k] nibbles
    const DType u = UnsignedOfWidth(fw);
    const int64_t k = fw / 4;
    int bits = Bitcast(x, u);
    std::vector<int64_t> one = in_shape;
    one.push_back(1);
    std::vector<int> parts;
    for (int64_t j = 0; j < k; ++j) {
      int s = j > 0 ? Binary("stablehlo.shift_right_logical", bits, Like(bits, static_cast<uint64_t>(4 * j))) : bits;
      int n = Convert(Binary("stablehlo.and", s, Like(s, 0x0f)), DType::kU8);
      parts.push_back(Emit("stablehlo.reshape", {n}, DType::kU8, one));
    }
    std::vector<int64_t> out_shape = in_shape;
    out_shape.push_back(k);
    Attr dim;
    dim.kind = Attr::Kind::kInt;
    dim.i = static_cast<int64_t>(in_shape.size());
    int cat = Emit("stablehlo.concatenate", parts, DType::kU8, out_shape, {{"dimension", dim}});
    if (to == DType::kI4) {
      Wrap(Bitcast(cat, DType::kI8), to, r);
    } else {
      Bitcast(cat, DType::kU8, r);
    }
    return Status::Ok();
  }

  // @main's int4 buffers hold ml_dtypes' layout (the low nibble): sign-extend arguments on entry, mask
  // results on exit.
  Status MainBoundary(Block& block) {
    std::vector<Op> entry;
    out_ = &entry;
    for (int& arg : block.args) {
      if (DTypeOfValue(arg) != DType::kI4) continue;
      int raw = NewValue(DType::kI8, TypeOf(arg).shape);
      Wrap(raw, DType::kI4, arg);
      arg = raw;
    }
    if (block.ops.empty() || block.ops.back().name != "func.return") return InvalidArgument("@main has no func.return");
    std::vector<Op> exit;
    out_ = &exit;
    for (int& v : block.ops.back().operands)
      if (TypeOf(v).kind == Type::Kind::kTensor && TypeOf(v).dtype == DType::kI4)
        v = Binary("stablehlo.and", v, Like(v, 0x0f));
    Op ret = std::move(block.ops.back());
    block.ops.pop_back();
    entry.insert(entry.end(), std::make_move_iterator(block.ops.begin()), std::make_move_iterator(block.ops.end()));
    entry.insert(entry.end(), std::make_move_iterator(exit.begin()), std::make_move_iterator(exit.end()));
    entry.push_back(std::move(ret));
    block.ops = std::move(entry);
    out_ = nullptr;
    return Status::Ok();
  }

  const Func& in_;
  std::vector<Type> types_;  // per value id: its type as the program declares it (float8 in a promoted region: f32)
  std::vector<Op>* out_ = nullptr;
  std::string loc_;
  std::map<int, DType> promoted_;
  std::map<int, std::vector<uint8_t>> f8_constants_;  // float8 constants by value id: their bits  // float8 values of
                                                      // applied regions, now float32: their format
};

}  // namespace

bool HasNarrowTypes(const shlo::Module& module) {
  for (const Func& f : module.funcs)
    for (const Type& t : f.value_types)
      if (TypeIsNarrow(t)) return true;
  return false;
}

StatusOr<shlo::Module> LegalizeNarrowTypes(const shlo::Module& module) {
  shlo::Module out = module;
  out.funcs.clear();
  for (const Func& f : module.funcs) {
    Rewriter rw(f);
    JMP_ASSIGN_OR_RETURN(Func nf, rw.Run(f.name == "main"));
    out.funcs.push_back(std::move(nf));
  }
  return out;
}

}  // namespace jmp::mps

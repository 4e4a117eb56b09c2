#include "stablehlo/passes/narrow_types.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "stablehlo/passes/narrow_builder.h"

namespace jmp::shlo {

namespace {

using narrow::DecodeNarrowFloat;
using narrow::FormatOf;
using narrow::Specials;
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
#define JMP_PASS_THROUGH_TARGET(target) target,
#include "stablehlo/custom_calls.def"
    // A Python callback gets and gives the storage form; jax_metal_plugin/_callbacks.py converts it
    // from and to the narrow type the callback sees, exactly.
    "jax_metal_python_callback",
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

class Rewriter : narrow::Builder {
 public:
  explicit Rewriter(const Func& in) : Builder(in.value_types), in_(in) {}

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
  Status Refuse(const Op& op, DType t) {
    return Unimplemented(op.name + " on " + std::string(DTypeName(t)) + " is not supported by the metal plugin" +
                         (op.location.empty() ? "" : " (from " + op.location + ")"));
  }

  // The first narrow dtype an op reads or writes (kF32 when none).
  DType NarrowIn(const Op& op, bool* any_nf, bool* any_i4) const {
    DType found = DType::kF32;
    auto see = [&](int v) {
      const Type& t = TypeOf(v);
      if (t.kind != Type::Kind::kTensor || !IsNarrow(t.dtype)) return;
      if (found == DType::kF32) found = t.dtype;
      if (IsNarrowFloat(t.dtype)) *any_nf = true;
      if (IsSubByteInt(t.dtype)) *any_i4 = true;
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
    bool any_nf = false, any_i4 = false;
    const DType narrow = NarrowIn(op, &any_nf, &any_i4);
    Op copy = op;
    if (op.name == "stablehlo.constant" && op.results.size() == 1 && promoted_.count(op.results[0])) {
      Attr& value = copy.attrs["value"];
      std::vector<uint8_t> data;
      for (uint8_t b : value.data) {
        const float f = DecodeNarrowFloat(b, promoted_[op.results[0]]);
        uint8_t bytes[4];
        std::memcpy(bytes, &f, 4);
        data.insert(data.end(), bytes, bytes + 4);
      }
      value.data = std::move(data);
      value.type.dtype = DType::kF32;
      out_->push_back(std::move(copy));
      return Status::Ok();
    }
    if (op.name == "stablehlo.constant" && any_nf && op.results.size() == 1 && copy.Find("value"))
      f8_constants_[op.results[0]] = copy.Find("value")->ExpandedData();
    for (auto& [name, a] : copy.attrs) RetypeAttr(a);
    const Attr* target = op.Find("call_target_name");
    const bool passes_through = op.name == "stablehlo.custom_call" && target && In(kPassThroughTargets, target->s);
    if ((!any_nf && !any_i4) || retype_only || passes_through || In(kMovesData, op.name) || In(kControlFlow, op.name)) {
      JMP_RETURN_IF_ERROR(RewriteRegions(op, &copy, retype_only));
      out_->push_back(std::move(copy));
      return Status::Ok();
    }
    if (In(kRefused, op.name)) return Refuse(op, narrow);
    if (op.name == "stablehlo.convert") return RewriteConvert(op);
    if (op.name == "stablehlo.bitcast_convert") return RewriteBitcast(op);
    if (any_nf) return RewriteNarrowFloat(op, copy);
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
      const float f = DecodeNarrowFloat(b, TypeOf(v).dtype);
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
  Status RewriteNarrowFloat(const Op& op, Op& copy) {
    const size_t emitted_before = out_->size();  // what follows is this op's: its decoded captures
    if (In(kComputeRegions, op.name)) {
      std::vector<int> ids;
      for (const Region& r : op.regions) DefinedIn(r, &ids);
      std::set<int> defined(ids.begin(), ids.end());
      for (int v : ids)
        if (TypeOf(v).kind == Type::Kind::kTensor && IsNarrowFloat(TypeOf(v).dtype)) {
          promoted_[v] = TypeOf(v).dtype;
          types_[v].dtype = DType::kF32;
        }
      std::vector<int> used;
      OperandsOf(op.regions, &used);
      std::map<int, int> decoded;
      for (int v : used)
        if (!defined.count(v) && !decoded.count(v) && TypeOf(v).kind == Type::Kind::kTensor &&
            IsNarrowFloat(TypeOf(v).dtype))
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
    if (op.name == "stablehlo.sort") DropDeadCanonicalisations(copy.regions, emitted_before);
    for (int& v : copy.operands) {
      const Type t = TypeOf(v);
      if (t.kind == Type::Kind::kTuple && TypeIsNarrow(t)) return Refuse(op, DType::kF8E4M3FN);
      if (t.kind == Type::Kind::kTensor && IsNarrowFloat(t.dtype)) v = Decode(v, t.dtype);
    }
    std::vector<std::pair<int, int>> encodes;  // (float32 result, float8 value)
    for (int& v : copy.results) {
      const Type t = TypeOf(v);
      if (t.kind == Type::Kind::kTuple && TypeIsNarrow(t)) return Refuse(op, DType::kF8E4M3FN);
      if (t.kind == Type::Kind::kTensor && IsNarrowFloat(t.dtype)) {
        int f = NewValue(DType::kF32, t.shape);
        encodes.push_back({f, v});
        v = f;
      } else if (t.kind == Type::Kind::kTensor && IsSubByteInt(t.dtype)) {
        return Refuse(op, t.dtype);
      }
    }
    out_->push_back(std::move(copy));
    for (auto [f, v] : encodes) Encode(f, TypeOf(v).dtype, v, TypeOf(v).dtype == DType::kF8E5M2);
    return Status::Ok();
  }

  // JAX's float comparators canonicalise each side: select(x == 0, 0, x), select(x != x, NaN, x). In a
  // format without zero (e8m0fnu: its "0" is NaN) or without NaN (float4_e2m1fn: its "NaN" is -0) one
  // of those selects can never fire, but its decoded constants hide it from the sort lowering's
  // recogniser (lower_sort.cc). Such a select is its third operand: x == NaN and, for a value decoded
  // from a format without NaN, x != x are false.
  void DropDeadCanonicalisations(std::vector<Region>& regions, size_t captures_from) {
    for (Region& r : regions)
      for (Block& b : r.blocks) {
        std::map<int, const Op*> producer;  // the region's, and the captures decoded for the op (out_'s tail)
        for (size_t i = captures_from; i < out_->size(); ++i)
          for (int v : (*out_)[i].results) producer[v] = &(*out_)[i];
        for (const Op& o : b.ops)
          for (int v : o.results) producer[v] = &o;
        auto constant_is_nan = [&](int v) {
          auto it = producer.find(v);
          if (it == producer.end() || it->second->name != "stablehlo.constant") return false;
          const Attr* value = it->second->Find("value");
          if (!value || value->type.dtype != DType::kF32 || value->data.size() < 4) return false;
          float f;
          std::memcpy(&f, value->data.data(), 4);
          return std::isnan(f);
        };
        auto never_nan = [&](int v) {
          auto it = promoted_.find(v);
          return it != promoted_.end() && FormatOf(it->second).specials == Specials::kNone;
        };
        std::map<int, int> to;  // a dead select's result -> its third operand
        for (const Op& o : b.ops) {
          if (o.name != "stablehlo.select" || o.operands.size() != 3 || o.results.size() != 1 ||
              !producer.count(o.operands[0]))
            continue;
          const Op& c = *producer[o.operands[0]];
          const Attr* dir = c.Find("comparison_direction");
          if (c.name == "stablehlo.compare" && dir && c.operands.size() == 2 &&
              ((dir->s == "EQ" && constant_is_nan(c.operands[1])) ||
               (dir->s == "NE" && c.operands[0] == c.operands[1] && never_nan(c.operands[0])))) {
            auto it = to.find(o.operands[2]);
            to[o.results[0]] = it == to.end() ? o.operands[2] : it->second;
          }
        }
        std::vector<Op> kept;
        for (Op& o : b.ops) {
          if (o.results.size() == 1 && to.count(o.results[0])) continue;
          for (int& v : o.operands) {
            auto it = to.find(v);
            if (it != to.end()) v = it->second;
          }
          kept.push_back(std::move(o));
        }
        b.ops = std::move(kept);
      }
  }

  // int4/uint4: compute on the storage type, wrap the results back into 4 bits.
  Status RewriteInt4(const Op& op, Op& copy) {
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

  Status RewriteConvert(const Op& op) {
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

  int ToInt4(int x, DType from, DType to, int result = -1) {
    const DType s = StorageOf(to);
    int y = Convert(x, s);
    if (!IsFloat(from)) return Wrap(y, to, result);
    // saturating, like XLA:CPU (the storage conversion saturates to 8 bits first)
    y = Binary("stablehlo.maximum", y, Like(y, static_cast<uint8_t>(SubByteMin(to))));
    return Binary("stablehlo.minimum", y, Like(y, static_cast<uint64_t>(SubByteMax(to))), result);
  }

  // Narrow float (decoded to float32 `x`) -> integer, as XLA converts: a value at or beyond a bound of
  // the integer type *taken as a value of the float type* becomes that bound. float4_e2m1fn has no 127
  // (int8's largest): 127 saturates to 6, so 6 converts to 127, and -6 to -128.
  void NarrowFloatToInteger(int x, DType from, DType to, int result) {
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

  Status RewriteBitcast(const Op& op) {
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

  // @main's int2/int4 buffers hold ml_dtypes' layout (the low bits): sign-extend arguments on entry,
  // mask results on exit.
  Status MainBoundary(Block& block) {
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

  const Func& in_;
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

}  // namespace jmp::shlo

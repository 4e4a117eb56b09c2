// The narrow-type pass on float8 and float4: operands decoded to float32, results encoded back; the
// regions such ops apply compute in float32 throughout.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "stablehlo/passes/narrow_builder.h"
#include "stablehlo/passes/narrow_rewriter.h"

namespace jmp::shlo::narrow {

int Rewriter::DecodeCaptured(int v) {
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

void Rewriter::Substitute(std::vector<Region>& regions, const std::map<int, int>& to) {
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

void Rewriter::OperandsOf(const std::vector<Region>& regions, std::vector<int>* ids) {
  for (const Region& r : regions)
    for (const Block& b : r.blocks)
      for (const Op& op : b.ops) {
        ids->insert(ids->end(), op.operands.begin(), op.operands.end());
        OperandsOf(op.regions, ids);
      }
}

Status Rewriter::RewriteNarrowFloat(const Op& op, Op& copy) {
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

void Rewriter::DropDeadCanonicalisations(std::vector<Region>& regions, size_t captures_from) {
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

}  // namespace jmp::shlo::narrow

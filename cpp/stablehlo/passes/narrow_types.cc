#include "stablehlo/passes/narrow_types.h"

#include <cstring>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "stablehlo/passes/narrow_builder.h"
#include "stablehlo/passes/narrow_rewriter.h"

namespace jmp::shlo::narrow {

bool TypeIsNarrow(const Type& t) {
  if (t.kind == Type::Kind::kTensor) return IsNarrow(t.dtype);
  for (const Type& e : t.elements)
    if (TypeIsNarrow(e)) return true;
  return false;
}

bool In(const std::set<std::string>& s, const std::string& name) { return s.count(name) != 0; }

const std::set<std::string> kComputeRegions = {
    "stablehlo.reduce", "stablehlo.reduce_window", "stablehlo.scatter",    "stablehlo.select_and_scatter",
    "stablehlo.sort",   "stablehlo.map",           "stablehlo.all_reduce", "stablehlo.reduce_scatter",
};

namespace {

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
// Ops with effects or opaque semantics that no rewrite can make exact.
const std::set<std::string> kRefused = {
    "stablehlo.custom_call", "stablehlo.rng",     "stablehlo.rng_bit_generator",
    "stablehlo.infeed",      "stablehlo.outfeed", "stablehlo.send",
    "stablehlo.recv",        "stablehlo.fft",
};

}  // namespace

StatusOr<Func> Rewriter::Run(bool is_main) {
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

Status Rewriter::Refuse(const Op& op, DType t) {
  return Unimplemented(op.name + " on " + std::string(DTypeName(t)) + " is not supported by the metal plugin" +
                       (op.location.empty() ? "" : " (from " + op.location + ")"));
}

DType Rewriter::NarrowIn(const Op& op, bool* any_nf, bool* any_i4) const {
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

Status Rewriter::RewriteRegions(const Op& in, Op* out, bool retype_only) {
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

void Rewriter::DefinedIn(const Region& r, std::vector<int>* ids) {
  for (const Block& b : r.blocks) {
    ids->insert(ids->end(), b.args.begin(), b.args.end());
    for (const Op& op : b.ops) {
      ids->insert(ids->end(), op.results.begin(), op.results.end());
      for (const Region& nested : op.regions) DefinedIn(nested, ids);
    }
  }
}

Status Rewriter::RewriteBlock(const Block& in, Block* out, bool retype_only) {
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

Status Rewriter::RewriteOp(const Op& op, bool retype_only) {
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

}  // namespace jmp::shlo::narrow

namespace jmp::shlo {

bool HasNarrowTypes(const shlo::Module& module) {
  for (const Func& f : module.funcs)
    for (const Type& t : f.value_types)
      if (narrow::TypeIsNarrow(t)) return true;
  return false;
}

StatusOr<shlo::Module> LegalizeNarrowTypes(const shlo::Module& module) {
  shlo::Module out = module;
  out.funcs.clear();
  for (const Func& f : module.funcs) {
    narrow::Rewriter rw(f);
    JMP_ASSIGN_OR_RETURN(Func nf, rw.Run(f.name == "main"));
    out.funcs.push_back(std::move(nf));
  }
  return out;
}

}  // namespace jmp::shlo

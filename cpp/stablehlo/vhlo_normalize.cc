// VHLO normalisation: op versions to StableHLO names (vhlo_ops.cc has the table), attribute forms that
// changed between versions to the newest, vhlo.func_v1 to a Func with its signature and argument
// attributes.
#include "stablehlo/vhlo_normalize.h"

#include <cstdio>
#include <cstring>

#include "stablehlo/vhlo_ops.h"

namespace jmp::shlo {

Status ReadProducer(std::string_view producer, Module* module) {
  module->producer = std::string(producer);
  int v[3] = {0, 0, 0};
  if (producer.rfind("StableHLO_v", 0) == 0 &&
      std::sscanf(module->producer.c_str() + 11, "%d.%d.%d", &v[0], &v[1], &v[2]) == 3) {
    for (int i = 0; i < 3; ++i) module->version[i] = v[i];
    auto older = [](const int* a, const int64_t* b) {
      for (int i = 0; i < 3; ++i)
        if (a[i] != b[i]) return a[i] < b[i];
      return false;
    };
    auto newer = [](const int* a, const int64_t* b) {
      for (int i = 0; i < 3; ++i)
        if (a[i] != b[i]) return a[i] > b[i];
      return false;
    };
    if (older(v, kOldestVersion) || newer(v, kNewestVersion))
      return InvalidArgument("StableHLO version " + module->producer.substr(11) +
                             " is outside what this plugin reads (" + std::to_string(kOldestVersion[0]) + "." +
                             std::to_string(kOldestVersion[1]) + "." + std::to_string(kOldestVersion[2]) + " to " +
                             std::to_string(kNewestVersion[0]) + "." + std::to_string(kNewestVersion[1]) + "." +
                             std::to_string(kNewestVersion[2]) + ")");
  } else {
    return InvalidArgument("not a StableHLO portable artifact: producer is '" + module->producer + "'");
  }
  return Status::Ok();
}

// Other dialects' discardable attributes (layouts, JAX's bookkeeping) are never decoded; of shardings,
// the forms XLA's own parser reads back (HloSharding strings, Shardy's exported text) are kept.
bool VhloNormalizer::KeepAttribute(const std::string& name) const {
  if (name == "mhlo.sharding" || name == "mhlo.frontend_attributes") return true;
  return name.rfind("mhlo.", 0) != 0 && name.rfind("sdy.", 0) != 0 && name.rfind("jax.", 0) != 0;
}

// A VHLO or Shardy op's inherent attributes, in the sorted-name order its properties store them. Ops of
// other dialects (builtin.module) carry nothing we use there.
const std::vector<std::string_view>* VhloNormalizer::PropertyNames(const EncodedOp& op) const {
  if (op.dialect == "sdy") {
    static const std::vector<std::string_view> kManual = {"in_shardings", "manual_axes", "out_shardings"};
    static const std::vector<std::string_view> kMesh = {"mesh", "sym_name"};
    static const std::vector<std::string_view> kSharding = {"sharding"};
    if (op.name == "manual_computation") return &kManual;
    if (op.name == "mesh") return &kMesh;
    if (op.name == "sharding_constraint" || op.name == "reshard") return &kSharding;
    return nullptr;
  }
  const VhloOpInfo* info = op.dialect == "vhlo" ? FindVhloOp(op.name) : nullptr;
  return info ? &info->attr_names : nullptr;
}

Status VhloNormalizer::FinishFunc(const AttrMap& attrs, Func* func, const std::string& where) {
  auto name = attrs.find("sym_name");
  if (name == attrs.end()) return InvalidArgument("malformed artifact: function without sym_name (" + where + ")");
  func->name = name->second.s;
  auto visibility = attrs.find("sym_visibility");
  func->is_public = visibility == attrs.end() || visibility->second.s.empty() || visibility->second.s == "public";
  if (func->body.blocks.empty()) return InvalidArgument("malformed artifact: function @" + func->name + " has no body");
  const Block& entry = func->body.blocks[0];
  for (int arg : entry.args) func->arg_types.push_back(func->value_types[static_cast<size_t>(arg)]);
  auto type = attrs.find("function_type");
  if (type != attrs.end() && type->second.type.kind == Type::Kind::kOther && type->second.type.other == "function" &&
      !type->second.type.shape.empty()) {
    size_t inputs = static_cast<size_t>(type->second.type.shape[0]);
    for (size_t i = inputs; i < type->second.type.elements.size(); ++i)
      func->result_types.push_back(type->second.type.elements[i]);
  }
  // arg_attrs / res_attrs: an array with one dictionary per argument (result), or absent.
  auto per_value_attrs = [&](const char* key, size_t count, std::vector<AttrMap>* out) -> Status {
    out->assign(count, AttrMap{});
    auto it = attrs.find(key);
    if (it == attrs.end() || (it->second.kind == Attr::Kind::kUnit && it->second.s.empty())) return Status::Ok();
    const Attr& list = it->second;
    // An empty array reads as an empty integer list.
    if (list.kind == Attr::Kind::kInts && list.ints.empty()) return Status::Ok();
    if (list.kind != Attr::Kind::kArray || list.array.size() != count)
      return InvalidArgument("malformed artifact: " + std::string(key) + " of @" + func->name +
                             " is not one dictionary per " + (out == &func->arg_attrs ? "argument" : "result") + " (" +
                             where + ")");
    for (size_t i = 0; i < count; ++i) {
      const Attr& dict = list.array[i];
      if (dict.kind != Attr::Kind::kDict)
        return InvalidArgument("malformed artifact: " + std::string(key) + "[" + std::to_string(i) + "] of @" +
                               func->name + " is not a dictionary (" + where + ")");
      for (const auto& [name, value] : dict.dict) {
        if ((name.rfind("sdy.", 0) != 0 && name.rfind("mhlo.", 0) != 0) || name == "mhlo.memory_kind")
          (*out)[i][name] = value;
        if ((name == "mhlo.sharding" || name == "sdy.sharding") && value.kind == Attr::Kind::kString)
          (out == &func->arg_attrs ? func->arg_shardings : func->result_shardings)[i] = value.s;
      }
    }
    return Status::Ok();
  };
  func->arg_shardings.assign(func->arg_types.size(), "");
  func->result_shardings.assign(func->result_types.size(), "");
  JMP_RETURN_IF_ERROR(per_value_attrs("arg_attrs", func->arg_types.size(), &func->arg_attrs));
  JMP_RETURN_IF_ERROR(per_value_attrs("res_attrs", func->result_types.size(), &func->result_attrs));
  return Status::Ok();
}

Status VhloNormalizer::Finish(EncodedOp& e, RegionReader& regions) {
  const std::string& full = e.full_name;
  Func* func = e.place.func;
  AttrMap& attrs = e.attrs;
  if (full == "builtin.module") {
    auto frontend = attrs.find("mhlo.frontend_attributes");
    if (frontend != attrs.end() && frontend->second.kind == Attr::Kind::kDict) {
      auto meshes = frontend->second.dict.find("xla.sdy.meshes");
      if (meshes != frontend->second.dict.end() && meshes->second.kind == Attr::Kind::kString)
        sdy_meshes_ = meshes->second.s;
    }
    std::vector<Region> body;
    return regions.Read(&body, nullptr, false);
  }
  if (full == "vhlo.func_v1") {
    if (func) return regions.Error("nested function");
    Func f;
    std::vector<Region> body;
    JMP_RETURN_IF_ERROR(regions.Read(&body, &f, true));
    if (body.size() != 1) return regions.Error("function without exactly one region");
    f.body = std::move(body[0]);
    JMP_RETURN_IF_ERROR(FinishFunc(attrs, &f, full + " at byte " + std::to_string(e.offset)));
    funcs_.push_back(std::move(f));
    return Status::Ok();
  }
  if (!func && full == "sdy.mesh") {
    // A mesh that shardings name: kept as text ("{mesh = #sdy.mesh<...>, ...}"), as Shardy's export
    // writes a module's meshes.
    auto name = attrs.find("sym_name");
    auto mesh = attrs.find("mesh");
    if (name != attrs.end() && mesh != attrs.end() && mesh->second.kind == Attr::Kind::kString) {
      if (!sdy_meshes_.empty()) sdy_meshes_.pop_back();
      sdy_meshes_ += (sdy_meshes_.empty() ? "{" : ", ") + name->second.s + " = " + mesh->second.s + "}";
    }
  }
  if (!func) {
    // Module-level ops other than functions (sdy.mesh, ...) carry nothing we run.
    std::vector<Region> ignored;
    return regions.Read(&ignored, nullptr, false);
  }
  Op op;
  op.location = std::move(e.location);
  op.operands = std::move(e.operands);
  op.results = std::move(e.results);
  if (e.dialect == "vhlo") {
    const VhloOpInfo* info = FindVhloOp(e.name);
    if (!info) return Unimplemented("unsupported op '" + full + "' (a VHLO op newer than this reader)");
    std::string base(info->base_name);
    if (base == "return")
      op.name = e.place.func_body ? "func.return" : "stablehlo.return";
    else if (base == "call")
      op.name = "func.call";
    else
      op.name = "stablehlo." + base;
  } else {
    op.name = full;
  }
  for (auto& [name, value] : attrs) {
    // Integer lists arrive as kInts whatever VHLO used (older forms use tensor_v1 of i64 or i1).
    if (name != "value" && value.kind == Attr::Kind::kTensor &&
        (IsInteger(value.type.dtype) || value.type.dtype == DType::kBool)) {
      Attr ints;
      ints.kind = Attr::Kind::kInts;
      ints.type = value.type;  // the shape of a 2-D list (replica_groups, source_target_pairs)
      size_t width = ByteSize(value.type.dtype);
      if (value.splat) {
        value.data = value.ExpandedData();
        value.splat = false;
      }
      for (size_t i = 0; i + width <= value.data.size(); i += width) {
        int64_t v = 0;
        if (width == 8)
          std::memcpy(&v, &value.data[i], 8);
        else if (width == 4) {
          int32_t x;
          std::memcpy(&x, &value.data[i], 4);
          v = x;
        } else if (width == 2) {
          int16_t x;
          std::memcpy(&x, &value.data[i], 2);
          v = x;
        } else
          v = value.data[i];
        ints.ints.push_back(v);
      }
      value = ints;
    }
    if (name == "callee" || name == "decomposition") value.kind = Attr::Kind::kSymbol;
  }
  // dot_general's dimension numbers are flat attributes in VHLO; the lowering reads them as StableHLO's
  // dot_dimension_numbers.
  if (op.name == "stablehlo.dot_general") {
    Attr dn;
    dn.kind = Attr::Kind::kDict;
    for (const char* f : {"lhs_batching_dimensions", "rhs_batching_dimensions", "lhs_contracting_dimensions",
                          "rhs_contracting_dimensions"}) {
      auto it = attrs.find(f);
      Attr v;
      v.kind = Attr::Kind::kInts;
      if (it != attrs.end()) v = it->second;
      v.kind = Attr::Kind::kInts;
      dn.dict[f] = v;
    }
    attrs["dot_dimension_numbers"] = dn;
  }
  // Sharding round trips leave casts between a tensor and the same tensor in builtin types: the
  // result is the operand.
  // A Shardy op's values have builtin types, cast to and from VHLO's; the cast gives them theirs.
  if ((full == "builtin.unrealized_conversion_cast" || full == "sdy.sharding_constraint" || full == "sdy.reshard") &&
      op.operands.size() == 1 && op.results.size() == 1) {
    Type& result = func->value_types[static_cast<size_t>(op.results[0])];
    Type& operand = func->value_types[static_cast<size_t>(op.operands[0])];
    if (result.kind != Type::Kind::kTensor) result = operand;
    if (operand.kind == Type::Kind::kOther && result.kind == Type::Kind::kTensor) operand = result;
  }
  op.attrs = std::move(attrs);
  JMP_RETURN_IF_ERROR(regions.Read(&op.regions, func, false));
  e.place.block->ops.push_back(std::move(op));
  return Status::Ok();
}

}  // namespace jmp::shlo

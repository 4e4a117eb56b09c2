#include "stablehlo/passes/region_shardings.h"

#include <map>
#include <string>

namespace jmp::shlo {

namespace {

bool IsAnnotation(const Op& op) {
  if (op.operands.size() != 1 || op.results.size() != 1 || !op.regions.empty()) return false;
  // The casts between VHLO's and the builtin types that bracket a Shardy op in the artifact go with it.
  if (op.name == "sdy.sharding_constraint" || op.name == "builtin.unrealized_conversion_cast") return true;
  if (op.name != "stablehlo.custom_call") return false;
  const Attr* target = op.Find("call_target_name");
  return target && target->kind == Attr::Kind::kString && target->s == "Sharding";
}

void Rename(std::vector<int>& ids, const std::map<int, int>& renamed) {
  for (int& id : ids) {
    auto it = renamed.find(id);
    if (it != renamed.end()) id = it->second;
  }
}

// The sharding text an annotation states, as a function result's sharding reads: a constraint's
// #sdy.sharding, or the HloSharding of a custom call @Sharding; "" for a cast.
std::string StatedSharding(const Op& op) {
  const Attr* s = op.Find(op.name == "sdy.sharding_constraint" ? "sharding" : "mhlo.sharding");
  return s && s->kind == Attr::Kind::kString ? s->s : "";
}

// `strip`: this block's annotations go (false for @main's own block), what they state kept in `stated`
// for the value they annotate (a loop's result takes its body's constraint, as XLA's propagation has
// it). Value ids are unique across a function, so one map renames every use below the annotation, in
// nested regions too.
void Walk(Block& block, bool strip, std::map<int, int>& renamed, std::map<int, std::string>& stated) {
  std::vector<Op> kept;
  kept.reserve(block.ops.size());
  for (Op& op : block.ops) {
    Rename(op.operands, renamed);
    for (Region& region : op.regions)
      for (Block& inner : region.blocks) Walk(inner, true, renamed, stated);
    if (strip && IsAnnotation(op)) {
      renamed[op.results[0]] = op.operands[0];
      if (std::string text = StatedSharding(op); !text.empty()) stated[op.operands[0]] = std::move(text);
      continue;
    }
    kept.push_back(std::move(op));
  }
  block.ops = std::move(kept);
}

// A called function (a nested jit) that annotates what it returns states its result's sharding (the
// inner jit's out_shardings): kept as the result's, as XLA's propagation would see it at the call.
void KeepReturnedShardings(Func& func) {
  if (func.body.blocks.size() != 1 || func.body.blocks[0].ops.empty()) return;
  const Block& block = func.body.blocks[0];
  std::map<int, const Op*> annotation;
  for (const Op& op : block.ops)
    if (IsAnnotation(op)) annotation[op.results[0]] = &op;
  const Op& ret = block.ops.back();
  for (size_t j = 0; j < ret.operands.size() && j < func.result_shardings.size(); ++j) {
    if (!func.result_shardings[j].empty()) continue;
    for (auto it = annotation.find(ret.operands[j]); it != annotation.end();
         it = annotation.find(it->second->operands[0])) {
      const std::string text = StatedSharding(*it->second);
      if (!text.empty()) {
        func.result_shardings[j] = text;
        break;
      }
    }
  }
}

}  // namespace

void ForwardRegionShardings(Module& module) {
  for (Func& func : module.funcs) {
    if (func.name != "main") KeepReturnedShardings(func);
    std::map<int, int> renamed;
    for (Block& block : func.body.blocks) Walk(block, func.name != "main", renamed, func.region_shardings);
  }
}

}  // namespace jmp::shlo

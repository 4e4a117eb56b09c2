#include "stablehlo/passes/region_shardings.h"

#include <map>

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

// `strip`: this block's annotations go (false for @main's own block). Value ids are unique across a
// function, so one map renames every use below the annotation, in nested regions too.
void Walk(Block& block, bool strip, std::map<int, int>& renamed) {
  std::vector<Op> kept;
  kept.reserve(block.ops.size());
  for (Op& op : block.ops) {
    Rename(op.operands, renamed);
    for (Region& region : op.regions)
      for (Block& inner : region.blocks) Walk(inner, true, renamed);
    if (strip && IsAnnotation(op)) {
      renamed[op.results[0]] = op.operands[0];
      continue;
    }
    kept.push_back(std::move(op));
  }
  block.ops = std::move(kept);
}

}  // namespace

void ForwardRegionShardings(Module& module) {
  for (Func& func : module.funcs) {
    std::map<int, int> renamed;
    for (Block& block : func.body.blocks) Walk(block, func.name != "main", renamed);
  }
}

}  // namespace jmp::shlo

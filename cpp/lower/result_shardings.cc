// The sharding of a @main result JAX left unspecified (jit without out_shardings): XLA propagates
// shardings through the program and chooses one; the executable must report some sharding, and any is
// correct (execute_sharded.cc hands each device the piece the sharding names). This follows the value
// back to where a sharding is stated, as XLA's propagation would find it for the common programs: a
// manual computation's out_shardings (a jit of shard_map), a sharding constraint, an argument's
// sharding, through ops that keep their operand's shape (elementwise math, updates in place). Anything
// else is whole on every device.
#include <map>

#include "lower/sharding.h"

namespace jmp::mps {

namespace {

// A frontend attribute of `op`, as text, or "".
std::string Frontend(const shlo::Op& op, const char* name) {
  const shlo::Attr* attrs = op.Find("mhlo.frontend_attributes");
  if (!attrs || attrs->kind != shlo::Attr::Kind::kDict) return "";
  auto it = attrs->dict.find(name);
  return it != attrs->dict.end() && it->second.kind == shlo::Attr::Kind::kString ? it->second.s : "";
}

std::string StringAttr(const shlo::Op& op, const char* name) {
  const shlo::Attr* a = op.Find(name);
  return a && a->kind == shlo::Attr::Kind::kString ? a->s : "";
}

// `in` with operand dimension k becoming result dimension kept[k] (its split kept) or dropped (-1: the
// devices that held its pieces now hold copies).
TileSharding Regrouped(const TileSharding& in, const std::vector<int64_t>& kept, size_t rank) {
  TileSharding out;
  out.tiles.assign(rank, 1);
  for (size_t k = 0; k < kept.size(); ++k)
    if (kept[k] >= 0) out.tiles[static_cast<size_t>(kept[k])] = in.tiles[k];
  bool split = false;
  for (int64_t t : out.tiles) split = split || t > 1;
  if (!split) return TileSharding{};
  out.device_tile.resize(in.device_tile.size());
  for (size_t d = 0; d < in.device_tile.size(); ++d) {
    std::vector<int64_t> coord(in.tiles.size());
    for (size_t k = in.tiles.size(), rest = static_cast<size_t>(in.device_tile[d]); k-- > 0;) {
      coord[k] = static_cast<int64_t>(rest % static_cast<size_t>(in.tiles[k]));
      rest /= static_cast<size_t>(in.tiles[k]);
    }
    std::vector<int64_t> at(rank, 0);
    for (size_t k = 0; k < kept.size(); ++k)
      if (kept[k] >= 0) at[static_cast<size_t>(kept[k])] = coord[k];
    int64_t tile = 0;
    for (size_t r = 0; r < rank; ++r) tile = tile * out.tiles[r] + at[r];
    out.device_tile[d] = tile;
  }
  return out;
}

}  // namespace

ResultShardingFinder::ResultShardingFinder(const shlo::Module& module, const shlo::Func& main, int64_t num_devices)
    : main_(main), devices_(num_devices) {
  if (!module.sdy_meshes.empty()) {
    StatusOr<Meshes> m = ParseSdyMeshes(module.sdy_meshes);
    if (m.ok()) meshes_ = std::move(*m);
  }
  if (main.body.blocks.size() == 1) {
    const shlo::Block& block = main.body.blocks[0];
    for (size_t i = 0; i < block.args.size(); ++i) argument_[block.args[i]] = i;
    for (const shlo::Op& op : block.ops)
      for (size_t j = 0; j < op.results.size(); ++j) producer_[op.results[j]] = {&op, j};
  }
}

TileSharding ResultShardingFinder::ForResult(size_t result, size_t rank) const {
  if (main_.body.blocks.size() != 1 || main_.body.blocks[0].ops.empty()) return {};
  const shlo::Op& ret = main_.body.blocks[0].ops.back();
  if (result >= ret.operands.size()) return {};
  TileSharding s;
  return Find(ret.operands[result], rank, &s) ? s : TileSharding{};
}

bool ResultShardingFinder::Find(int id, size_t rank, TileSharding* out, int depth) const {
  if (depth > 64) return false;
  auto arg = argument_.find(id);
  if (arg != argument_.end())
    return arg->second < main_.arg_shardings.size() && Parse(main_.arg_shardings[arg->second], rank, out);
  auto it = producer_.find(id);
  if (it == producer_.end()) return false;
  const shlo::Op& op = *it->second.first;
  const size_t j = it->second.second;
  if (op.name == "sdy.manual_computation") return FromList(StringAttr(op, "out_shardings"), j, rank, out);
  if (op.name == "sdy.sharding_constraint") return Parse(StringAttr(op, "sharding"), rank, out);
  if (op.name == "stablehlo.custom_call") {
    const shlo::Attr* target = op.Find("call_target_name");
    const std::string name = target ? target->s : "";
    if (name == "xla.sdy.LocalToGlobalShape" && op.operands.size() == op.results.size()) {
      auto body = producer_.find(op.operands[j]);
      return body != producer_.end() && body->second.first->name == "func.call" &&
             FromList(Frontend(*body->second.first, "xla.sdy.out_shardings"), body->second.second, rank, out);
    }
    if (name == "Sharding") {
      const std::string sdy = Frontend(op, "xla.sdy.sharding");
      if (!sdy.empty()) return FromList(sdy, 0, rank, out);
      const shlo::Attr* hlo = op.Find("mhlo.sharding");
      return hlo && hlo->kind == shlo::Attr::Kind::kString && Parse(hlo->s, rank, out);
    }
  }
  if (!op.regions.empty() || op.results.size() != 1 || op.operands.empty()) return false;
  const shlo::Type& type = main_.value_types.at(static_cast<size_t>(id));
  const shlo::Type& first = main_.value_types.at(static_cast<size_t>(op.operands[0]));
  // A slice keeps the split of each dimension it takes whole; a reshape that only adds or drops
  // dimensions of size 1 keeps the others'.
  if ((op.name == "stablehlo.slice" || op.name == "stablehlo.reshape") && first.kind == shlo::Type::Kind::kTensor) {
    TileSharding in;
    if (!Find(op.operands[0], first.shape.size(), &in, depth + 1) || in.tiles.empty()) return false;
    std::vector<int64_t> kept(first.shape.size());  // per operand dim: its result dim, or -1
    if (op.name == "stablehlo.slice") {
      if (first.shape.size() != type.shape.size()) return false;
      for (size_t k = 0; k < kept.size(); ++k) kept[k] = type.shape[k] == first.shape[k] ? static_cast<int64_t>(k) : -1;
    } else {
      size_t r = 0;
      for (size_t k = 0; k < kept.size(); ++k) {
        while (r < type.shape.size() && type.shape[r] == 1 && first.shape[k] != 1) ++r;
        if (first.shape[k] == 1 && (r >= type.shape.size() || type.shape[r] != 1)) {
          kept[k] = -1;
          continue;
        }
        if (r >= type.shape.size() || type.shape[r] != first.shape[k]) return false;
        kept[k] = static_cast<int64_t>(r++);
      }
      for (; r < type.shape.size(); ++r)
        if (type.shape[r] != 1) return false;
    }
    *out = Regrouped(in, kept, type.shape.size());
    return true;
  }
  // An op that keeps an operand's shape: that operand's sharding, the first one found.
  for (int operand : op.operands) {
    const shlo::Type& t = main_.value_types.at(static_cast<size_t>(operand));
    if (t.kind == shlo::Type::Kind::kTensor && t.shape == type.shape && Find(operand, rank, out, depth + 1))
      return true;
  }
  return false;
}

bool ResultShardingFinder::Parse(const std::string& text, size_t rank, TileSharding* out) const {
  if (text.empty()) return false;
  StatusOr<TileSharding> s = InvalidArgument("");
  if (text.rfind("#sdy", 0) == 0) {
    StatusOr<SdySharding> sdy = ParseSdySharding(text, meshes_);
    if (!sdy.ok()) return false;
    s = TilesOf(*sdy, rank, devices_);
  } else {
    s = ParseHloSharding(text, rank, devices_);
  }
  if (!s.ok()) return false;
  // Partial sums are where the program states them, never what the ops after them make.
  *out = WithoutParts(*s);
  return true;
}

bool ResultShardingFinder::FromList(const std::string& text, size_t j, size_t rank, TileSharding* out) const {
  StatusOr<std::vector<SdySharding>> list = ParseSdyShardings(text, meshes_);
  if (!list.ok() || j >= list->size()) return false;
  StatusOr<TileSharding> s = TilesOf((*list)[j], rank, devices_);
  if (!s.ok()) return false;
  // Partial sums are where the program states them, never what the ops after them make.
  *out = WithoutParts(*s);
  return true;
}

}  // namespace jmp::mps

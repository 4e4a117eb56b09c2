// The sharding of a @main result JAX left unspecified (jit without out_shardings): XLA propagates
// shardings through the program and chooses one; the executable must report some sharding, and any is
// correct (execute_sharded.cc hands each device the piece the sharding names). This follows the value
// back to where a sharding is stated, as XLA's propagation would find it for the common programs: a
// manual computation's out_shardings (a jit of shard_map), a sharding constraint, a nested jit's
// out_shardings, an argument's sharding; through ops that keep their operand's shape, slices,
// reshapes, transposes, broadcasts, concatenations, reductions, loops and matrix products, into called
// functions and manual bodies, and through open dimensions. Anything else is whole on every device.
#include <algorithm>
#include <map>

#include "lower/lower_families.h"
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

// Per device, its tile's coordinates under `s` (of rank `rank`; whole: all 0).
std::vector<std::vector<int64_t>> Coordinates(const TileSharding& s, size_t rank, size_t devices) {
  std::vector<std::vector<int64_t>> coords(devices, std::vector<int64_t>(rank, 0));
  if (s.tiles.size() != rank || s.device_tile.size() != devices) return coords;
  for (size_t d = 0; d < devices; ++d)
    for (size_t k = rank, rest = static_cast<size_t>(s.device_tile[d]); k-- > 0;) {
      coords[d][k] = static_cast<int64_t>(rest % static_cast<size_t>(s.tiles[k]));
      rest /= static_cast<size_t>(s.tiles[k]);
    }
  return coords;
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
  const auto coords = Coordinates(in, in.tiles.size(), in.device_tile.size());
  out.device_tile.resize(in.device_tile.size());
  for (size_t d = 0; d < in.device_tile.size(); ++d) {
    std::vector<int64_t> at(rank, 0);
    for (size_t k = 0; k < kept.size(); ++k)
      if (kept[k] >= 0) at[static_cast<size_t>(kept[k])] = coords[d][k];
    int64_t tile = 0;
    for (size_t r = 0; r < rank; ++r) tile = tile * out.tiles[r] + at[r];
    out.device_tile[d] = tile;
  }
  return out;
}

// The sharding splitting the dimensions `from_b` says as `b` does and the others as `a` does, when the
// two split over different devices' groups (every combined tile held by as many devices); else false.
bool Merged(const TileSharding& a, const TileSharding& b, const std::vector<bool>& from_b, size_t devices,
            TileSharding* out) {
  const size_t rank = from_b.size();
  const auto ca = Coordinates(a, rank, devices), cb = Coordinates(b, rank, devices);
  TileSharding m;
  m.tiles.assign(rank, 1);
  for (size_t k = 0; k < rank; ++k) {
    const TileSharding& s = from_b[k] ? b : a;
    m.tiles[k] = s.tiles.size() == rank ? s.tiles[k] : 1;
  }
  const int64_t count = TileCount(m);
  if (count <= 1) return false;
  m.device_tile.resize(devices);
  std::vector<int64_t> holders(static_cast<size_t>(count), 0);
  for (size_t d = 0; d < devices; ++d) {
    int64_t tile = 0;
    for (size_t k = 0; k < rank; ++k) tile = tile * m.tiles[k] + (from_b[k] ? cb[d][k] : ca[d][k]);
    m.device_tile[d] = tile;
    ++holders[static_cast<size_t>(tile)];
  }
  for (int64_t h : holders)
    if (h != static_cast<int64_t>(devices) / count) return false;
  *out = std::move(m);
  return true;
}

// The function a func.call calls, if the module has it.
const shlo::Func* CalleeOf(const shlo::Module& module, const shlo::Op& call) {
  const shlo::Attr* name = call.Find("callee");
  return name ? module.FindFunc(name->s) : nullptr;
}

}  // namespace

ResultShardingFinder::ResultShardingFinder(const shlo::Module& module, const shlo::Func& main, int64_t num_devices)
    : module_(module), main_(main), devices_(num_devices) {
  if (!module.sdy_meshes.empty()) {
    StatusOr<Meshes> m = ParseSdyMeshes(module.sdy_meshes);
    if (m.ok()) meshes_ = std::move(*m);
  }
}

const ResultShardingFinder::Scope& ResultShardingFinder::ScopeOf(const shlo::Block& block) const {
  auto [it, fresh] = scopes_.try_emplace(&block);
  if (fresh) {
    for (size_t i = 0; i < block.args.size(); ++i) it->second.argument[block.args[i]] = i;
    for (const shlo::Op& op : block.ops)
      for (size_t j = 0; j < op.results.size(); ++j) it->second.producer[op.results[j]] = {&op, j};
  }
  return it->second;
}

TileSharding ResultShardingFinder::ForResult(size_t result, size_t rank) const {
  if (main_.body.blocks.size() != 1 || main_.body.blocks[0].ops.empty()) return {};
  const shlo::Op& ret = main_.body.blocks[0].ops.back();
  if (result >= ret.operands.size()) return {};
  TileSharding s;
  if (!Find(Frame{&main_, &main_.body.blocks[0]}, ret.operands[result], rank, &s)) return {};
  // A split that does not divide its dimension leaves the result whole, as XLA reports such a result to
  // JAX (which cannot hold uneven shards of a result it did not ask to split).
  if (result < main_.result_types.size()) {
    const std::vector<int64_t>& shape = main_.result_types[result].shape;
    for (size_t k = 0; k < shape.size() && k < s.tiles.size(); ++k)
      if (s.tiles[k] > 1 && shape[k] % s.tiles[k] != 0) return {};
  }
  return s;
}

bool ResultShardingFinder::FindReturned(const Frame& frame, const shlo::Op& call, const shlo::Func& func,
                                        const shlo::Block& body, size_t j, size_t rank, TileSharding* out,
                                        int depth) const {
  if (body.ops.empty() || j >= body.ops.back().operands.size()) return false;
  return Find(Frame{&func, &body, &frame, &call}, body.ops.back().operands[j], rank, out, depth + 1);
}

bool ResultShardingFinder::FromManual(const Frame& frame, const shlo::Op& call, const shlo::Func& body_func,
                                      const shlo::Block* body, const std::string& out_shardings, size_t j, int id,
                                      size_t rank, TileSharding* out, int depth) const {
  const bool stated = FromList(out_shardings, j, rank, out);
  if (stated && TileCount(*out) > 1) return true;
  // An open dimension (a partial-auto shard_map's) leaves the auto axes to propagation, which finds what
  // the body states for them, where the body returns the whole value.
  if (out_shardings.find('?') == std::string::npos || !body || body->ops.empty() ||
      j >= body->ops.back().operands.size())
    return stated;
  const int returned = body->ops.back().operands[j];
  if (body_func.value_types.at(static_cast<size_t>(returned)).shape !=
      frame.func->value_types.at(static_cast<size_t>(id)).shape)
    return stated;
  TileSharding inner;
  if (!FindReturned(frame, call, body_func, *body, j, rank, &inner, depth)) return stated;
  *out = inner;
  return true;
}

bool ResultShardingFinder::Find(const Frame& frame, int id, size_t rank, TileSharding* out, int depth) const {
  if (depth > 64) return false;
  // Each value is searched once per call chain: values read by several ops (threefry's rounds) would
  // make the search exponential.
  std::vector<const void*> chain{frame.block};
  for (const Frame* f = &frame; f->caller; f = f->caller) chain.push_back(f->call);
  const auto key = std::make_tuple(std::move(chain), id, rank);
  auto seen = found_.find(key);
  if (seen != found_.end()) {
    if (seen->second) *out = *seen->second;
    return seen->second.has_value();
  }
  found_[key] = std::nullopt;  // a cycle back here finds nothing
  TileSharding s;
  const bool ok = Search(frame, id, rank, &s, depth);
  if (ok) {
    found_[key] = s;
    *out = s;
  }
  return ok;
}

bool ResultShardingFinder::Search(const Frame& frame, int id, size_t rank, TileSharding* out, int depth) const {
  const shlo::Func& func = *frame.func;
  // What a constraint inside a region (a loop's body) stated for the value, before it was removed.
  if (auto stated = func.region_shardings.find(id);
      stated != func.region_shardings.end() && Parse(stated->second, rank, out))
    return true;
  const Scope& scope = ScopeOf(*frame.block);
  auto arg = scope.argument.find(id);
  if (arg != scope.argument.end()) {
    if (!frame.caller)
      return arg->second < func.arg_shardings.size() && Parse(func.arg_shardings[arg->second], rank, out);
    if (arg->second >= frame.call->operands.size()) return false;
    // A manual computation's body sees its operands in local shapes: only a whole one is the same value.
    const int outer = frame.call->operands[arg->second];
    if (frame.caller->func->value_types.at(static_cast<size_t>(outer)).shape !=
        func.value_types.at(static_cast<size_t>(id)).shape)
      return false;
    return Find(*frame.caller, outer, rank, out, depth + 1);
  }
  auto it = scope.producer.find(id);
  if (it == scope.producer.end()) return false;
  const shlo::Op& op = *it->second.first;
  const size_t j = it->second.second;
  if (op.name == "sdy.manual_computation") {
    const bool one_body = op.regions.size() == 1 && op.regions[0].blocks.size() == 1;
    return FromManual(frame, op, func, one_body ? &op.regions[0].blocks[0] : nullptr, StringAttr(op, "out_shardings"),
                      j, id, rank, out, depth);
  }
  if (op.name == "sdy.sharding_constraint") {
    const std::string text = StringAttr(op, "sharding");
    if (!op.operands.empty() && ThroughOpen(frame, op.operands[0], "[" + text + "]", 0, rank, out, depth)) return true;
    return Parse(text, rank, out);
  }
  // A nested jit: the callee's result, its arguments being this call's operands.
  if (op.name == "func.call") {
    const shlo::Func* callee = CalleeOf(module_, op);
    if (!callee || IsManualComputationBody(callee->name) || callee->body.blocks.size() != 1) return false;
    // The inner jit's out_shardings.
    if (j < callee->result_shardings.size() && Parse(callee->result_shardings[j], rank, out)) return true;
    return FindReturned(frame, op, *callee, callee->body.blocks[0], j, rank, out, depth);
  }
  if (op.name == "stablehlo.custom_call") {
    const shlo::Attr* target = op.Find("call_target_name");
    const std::string name = target ? target->s : "";
    if (name == "xla.sdy.LocalToGlobalShape" && op.operands.size() == op.results.size()) {
      auto it_body = scope.producer.find(op.operands[j]);
      if (it_body == scope.producer.end() || it_body->second.first->name != "func.call") return false;
      const shlo::Op& call = *it_body->second.first;
      const size_t k = it_body->second.second;
      // Shardy's export states the out_shardings on this custom call, or (older) on the body's call.
      std::string outs = Frontend(op, "xla.sdy.out_shardings");
      const size_t at = outs.empty() ? k : j;
      if (outs.empty()) outs = Frontend(call, "xla.sdy.out_shardings");
      const shlo::Func* body = CalleeOf(module_, call);
      if (!body || body->body.blocks.size() != 1) return FromList(outs, at, rank, out);
      return FromManual(frame, call, *body, &body->body.blocks[0], outs, at, id, rank, out, depth);
    }
    if (name == "Sharding") {
      const std::string sdy = Frontend(op, "xla.sdy.sharding");
      if (!sdy.empty() && !op.operands.empty() && ThroughOpen(frame, op.operands[0], sdy, 0, rank, out, depth))
        return true;
      if (!sdy.empty()) return FromList(sdy, 0, rank, out);
      const shlo::Attr* hlo = op.Find("mhlo.sharding");
      return hlo && hlo->kind == shlo::Attr::Kind::kString && Parse(hlo->s, rank, out);
    }
  }
  // A loop's result: what its body states for the carried value, else its initial value's sharding.
  if (op.name == "stablehlo.while" && op.regions.size() == 2 && op.regions[1].blocks.size() == 1 &&
      j < op.operands.size()) {
    if (FindReturned(frame, op, func, op.regions[1].blocks[0], j, rank, out, depth)) return true;
    return Find(frame, op.operands[j], rank, out, depth + 1);
  }
  // A reduction keeps the split of each dimension it does not reduce.
  if (op.name == "stablehlo.reduce" && j < op.operands.size()) {
    const shlo::Attr* dims = op.Find("dimensions");
    const shlo::Type& t = func.value_types.at(static_cast<size_t>(op.operands[j]));
    TileSharding in;
    if (!dims || t.kind != shlo::Type::Kind::kTensor || !Find(frame, op.operands[j], t.shape.size(), &in, depth + 1) ||
        in.tiles.empty())
      return false;
    std::vector<int64_t> kept(t.shape.size(), 0);
    for (int64_t d : dims->ints)
      if (d >= 0 && static_cast<size_t>(d) < kept.size()) kept[static_cast<size_t>(d)] = -1;
    int64_t next = 0;
    for (int64_t& k : kept)
      if (k == 0) k = next++;
    if (next != static_cast<int64_t>(rank)) return false;
    *out = Regrouped(in, kept, rank);
    return true;
  }
  // Ops with a body that keep their operand's shape (a cumulative sum's reduce_window, a sort, a scatter)
  // keep its split like elementwise ops; control flow does not.
  const bool body_keeps_shape =
      op.name == "stablehlo.reduce_window" || op.name == "stablehlo.sort" || op.name == "stablehlo.scatter";
  if ((!op.regions.empty() && !body_keeps_shape) || op.results.size() != 1 || op.operands.empty()) return false;
  const shlo::Type& type = func.value_types.at(static_cast<size_t>(id));
  const shlo::Type& first = func.value_types.at(static_cast<size_t>(op.operands[0]));
  // A slice keeps the split of each dimension it takes whole (JAX's eager slices are dynamic ones, their
  // starts arguments); a reshape that only adds or drops dimensions of size 1 keeps the others'.
  const bool slice = op.name == "stablehlo.slice" || op.name == "stablehlo.dynamic_slice";
  if ((slice || op.name == "stablehlo.reshape") && first.kind == shlo::Type::Kind::kTensor) {
    TileSharding in;
    if (!Find(frame, op.operands[0], first.shape.size(), &in, depth + 1) || in.tiles.empty()) return false;
    std::vector<int64_t> kept(first.shape.size());  // per operand dim: its result dim, or -1
    if (slice) {
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
  // A gather keeps the split of each operand dimension its slices take whole (JAX's indexing with
  // integers: the dimensions the index leaves alone), at the offset dimension it becomes.
  if (op.name == "stablehlo.gather" && first.kind == shlo::Type::Kind::kTensor) {
    const shlo::Attr* offset = op.Find("offset_dims");
    const shlo::Attr* sizes = op.Find("slice_sizes");
    if (!offset || !sizes || sizes->ints.size() != first.shape.size()) return false;
    std::vector<bool> dropped(first.shape.size(), false);
    for (const char* name : {"collapsed_slice_dims", "operand_batching_dims"})
      if (const shlo::Attr* dims = op.Find(name))
        for (int64_t d : dims->ints)
          if (d >= 0 && static_cast<size_t>(d) < dropped.size()) dropped[static_cast<size_t>(d)] = true;
    std::vector<int64_t> kept(first.shape.size(), -1);
    size_t next = 0;
    for (size_t k = 0; k < kept.size(); ++k) {
      if (dropped[k]) continue;
      if (next >= offset->ints.size()) return false;
      const int64_t to = offset->ints[next++];
      if (sizes->ints[k] == first.shape[k] && to >= 0 && static_cast<size_t>(to) < type.shape.size()) kept[k] = to;
    }
    TileSharding in;
    if (!Find(frame, op.operands[0], first.shape.size(), &in, depth + 1) || in.tiles.empty()) return false;
    *out = Regrouped(in, kept, type.shape.size());
    return true;
  }
  // A broadcast keeps the split of each dimension it does not widen; a concatenation, of each but the
  // one it joins along.
  if ((op.name == "stablehlo.broadcast_in_dim" || op.name == "stablehlo.concatenate") &&
      first.kind == shlo::Type::Kind::kTensor) {
    const bool broadcast = op.name == "stablehlo.broadcast_in_dim";
    const shlo::Attr* dims = op.Find(broadcast ? "broadcast_dimensions" : "dimension");
    if (!dims) return false;
    for (int operand : op.operands) {
      const shlo::Type& t = func.value_types.at(static_cast<size_t>(operand));
      std::vector<int64_t> kept(t.shape.size(), -1);
      for (size_t k = 0; k < kept.size(); ++k) {
        const int64_t to = broadcast ? (k < dims->ints.size() ? dims->ints[k] : -1) : static_cast<int64_t>(k);
        const bool joined = !broadcast && static_cast<int64_t>(k) == dims->i;
        if (to >= 0 && static_cast<size_t>(to) < type.shape.size() && !joined &&
            type.shape[static_cast<size_t>(to)] == t.shape[k])
          kept[k] = to;
      }
      TileSharding in;
      if (t.kind != shlo::Type::Kind::kTensor || !Find(frame, operand, t.shape.size(), &in, depth + 1) ||
          in.tiles.empty())
        continue;
      *out = Regrouped(in, kept, type.shape.size());
      return true;
    }
    return false;
  }
  // A transpose moves each dimension's split with it.
  if (op.name == "stablehlo.transpose" && first.kind == shlo::Type::Kind::kTensor) {
    const shlo::Attr* perm = op.Find("permutation");
    TileSharding in;
    if (!perm || perm->ints.size() != first.shape.size() ||
        !Find(frame, op.operands[0], first.shape.size(), &in, depth + 1) || in.tiles.empty())
      return false;
    std::vector<int64_t> kept(first.shape.size(), -1);
    for (size_t i = 0; i < perm->ints.size(); ++i) {
      const int64_t k = perm->ints[i];
      if (k < 0 || static_cast<size_t>(k) >= kept.size()) return false;
      kept[static_cast<size_t>(k)] = static_cast<int64_t>(i);
    }
    *out = Regrouped(in, kept, type.shape.size());
    return true;
  }
  // A matrix product's result is (batch, lhs free, rhs free) dimensions: they keep both operands' splits
  // where those split over different axes, else the lhs's (as XLA prefers), else the rhs's.
  if (op.name == "stablehlo.dot_general" && op.operands.size() == 2) {
    const shlo::Attr* dn = op.Find("dot_dimension_numbers");
    if (!dn || dn->kind != shlo::Attr::Kind::kDict) return false;
    auto field = [&](const char* name) {
      auto f = dn->dict.find(name);
      return f == dn->dict.end() ? std::vector<int64_t>{} : f->second.ints;
    };
    const std::vector<int64_t> batch[2] = {field("lhs_batching_dimensions"), field("rhs_batching_dimensions")};
    const std::vector<int64_t> contract[2] = {field("lhs_contracting_dimensions"), field("rhs_contracting_dimensions")};
    int64_t next = static_cast<int64_t>(batch[0].size());
    TileSharding sides[2];
    std::vector<bool> from_rhs(type.shape.size(), false);
    for (size_t side = 0; side < 2; ++side) {
      const shlo::Type& t = func.value_types.at(static_cast<size_t>(op.operands[side]));
      std::vector<int64_t> kept(t.shape.size(), -1);
      for (size_t b = 0; b < batch[side].size(); ++b)
        if (batch[side][b] >= 0 && static_cast<size_t>(batch[side][b]) < kept.size())
          kept[static_cast<size_t>(batch[side][b])] = static_cast<int64_t>(b);
      for (size_t k = 0; k < kept.size(); ++k) {
        const bool contracted =
            std::find(contract[side].begin(), contract[side].end(), static_cast<int64_t>(k)) != contract[side].end();
        const bool batched =
            std::find(batch[side].begin(), batch[side].end(), static_cast<int64_t>(k)) != batch[side].end();
        if (contracted || batched) continue;
        if (next >= static_cast<int64_t>(type.shape.size())) return false;
        if (side == 1) from_rhs[static_cast<size_t>(next)] = true;
        kept[k] = next++;
      }
      TileSharding in;
      if (t.kind == shlo::Type::Kind::kTensor && Find(frame, op.operands[side], t.shape.size(), &in, depth + 1) &&
          !in.tiles.empty())
        sides[side] = Regrouped(in, kept, type.shape.size());
    }
    // Both sides' splits where they split over different devices' groups; else the lhs's, else the rhs's.
    if (Merged(sides[0], sides[1], from_rhs, static_cast<size_t>(devices_), out)) return true;
    for (const TileSharding& side : sides)
      if (TileCount(side) > 1) {
        *out = side;
        return true;
      }
    return false;
  }
  // An op that keeps an operand's shape: that operand's sharding, the first one found.
  for (int operand : op.operands) {
    const shlo::Type& t = func.value_types.at(static_cast<size_t>(operand));
    if (t.kind == shlo::Type::Kind::kTensor && t.shape == type.shape && Find(frame, operand, rank, out, depth + 1))
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

bool ResultShardingFinder::ThroughOpen(const Frame& frame, int operand, const std::string& list, size_t j, size_t rank,
                                       TileSharding* out, int depth) const {
  if (list.find('?') == std::string::npos) return false;
  StatusOr<std::vector<SdySharding>> parsed = ParseSdyShardings(list, meshes_);
  if (!parsed.ok() || j >= parsed->size() || (*parsed)[j].open.size() != rank) return false;
  StatusOr<TileSharding> tiles = TilesOf((*parsed)[j], rank, devices_);
  if (!tiles.ok()) return false;
  const TileSharding stated = WithoutParts(*tiles);
  TileSharding in;
  if (!Find(frame, operand, rank, &in, depth + 1) || in.tiles.size() != rank) return false;
  // Propagation fills an open dimension no axis splits yet with the operand's split.
  std::vector<bool> from_operand(rank, false);
  for (size_t k = 0; k < rank; ++k)
    from_operand[k] = (*parsed)[j].open[k] && (stated.tiles.size() != rank || stated.tiles[k] == 1);
  return Merged(stated, in, from_operand, static_cast<size_t>(devices_), out);
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

// Elementwise fusion for the host executor. Chains of elementwise ops over large arrays (a random-bits
// generator is ~60 of them per element) run op by op would stream every intermediate through memory and
// keep each one in the arena; XLA:CPU and MPSGraph fuse such chains. Here a group runs tile by tile: each
// tile of a few thousand elements passes through all of the group's ops while it is in cache, the values
// made and read only inside the group live in a per-thread tile scratch, and tiles are spread over the
// threads. The kernels are the unfused ones, told to do one tile (OpArgs::count and base).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "exec/host/host_memory.h"
#include "exec/host/host_parallel.h"
#include "exec/host/host_plan.h"
#include "exec/host/host_profile.h"

namespace jmp::exec::host {

namespace {

// Elements per tile: small enough that a group's live tiles stay in L2, large enough that dispatching
// each op per tile costs little, and below every kernel's parallel grain so kernels never split a tile.
constexpr int64_t kTile = 2048;
// Fewer elements than this: no group (a loop body on a few elements runs its ops as they are).
constexpr int64_t kMinFusedElements = 1024;

// How a tile would make this Broadcast's output (host_kernels.h), kNone when it cannot.
TiledBroadcast::Kind Tiling(const mps::Graph& g, const mps::Op& op) {
  return TiledBroadcastOf(g.type(op.inputs[0]).shape, g.type(op.outputs[0]).shape).kind;
}

bool FusesAsOp(mps::OpKind k) {
  using K = mps::OpKind;
  return k == K::kSelect || k == K::kClamp || k == K::kMultiplyAdd || k == K::kCast || k == K::kBroadcast ||
         k == K::kCoordinateAlongAxis;
}

}  // namespace

// The kinds whose kernels can run one tile: every unary and binary row, and the few others above.
bool TileKind(mps::OpKind kind) {
  switch (kind) {
#define JMP_MPS_UNARY(Name, macos, selector, domain) \
  case mps::OpKind::k##Name: return true;
#define JMP_MPS_BINARY(Name, macos, primary, secondary, domain) \
  case mps::OpKind::k##Name: return true;
#define JMP_MPS_OP(Name, macos, selector, domain) \
  case mps::OpKind::k##Name: return FusesAsOp(mps::OpKind::k##Name);
#define JMP_HOST_OP(Name, domain) \
  case mps::OpKind::k##Name: return false;
#include "mps/op_kinds.def"
  }
  return false;
}

namespace {

// Whether op i can be in a group of `count` elements: one output of that many elements, every input
// that many too, except a Select's predicate (which may be one element) and a Broadcast's source (the
// output's trailing dims).
bool Fusible(const Plan& plan, size_t i, int64_t count) {
  const mps::Graph& g = *plan.graph;
  const mps::Op& op = g.ops[i];
  if (!Runs(plan, i) || !TileKind(op.kind) || op.outputs.size() != 1 || !op.subgraphs.empty()) return false;
  if (g.type(op.outputs[0]).NumElements() != count) return false;
  if (op.kind == mps::OpKind::kBroadcast) return op.inputs.size() == 1 && Tiling(g, op) != TiledBroadcast::kNone;
  for (size_t j = 0; j < op.inputs.size(); ++j) {
    int64_t n = g.type(op.inputs[j]).NumElements();
    if (n != count && !(op.kind == mps::OpKind::kSelect && j == 0 && n == 1)) return false;
  }
  return true;
}

bool FusionEnabled() {
  static const bool enabled = [] {
    const char* env = std::getenv("JMP_HOST_FUSE");
    return !(env && std::string(env) == "0");
  }();
  return enabled;
}

// Where a group's multiply-adds read splats or splats picked by selects, and their chains
// (FusedGroup::picks). A select is absorbed when its output stays in the group's scratch with no other
// reader and its predicate is a whole tile; a multiply-add joins the chain of the one whose output it
// alone reads when both multiply by the same value and the chain's selects read at most two
// predicates. Returns, per op, the position of the op whose loop runs it (itself unless absorbed).
std::vector<size_t> FindPicks(const Plan& plan, FusedGroup& f, int gi, const std::vector<int>& owner,
                              const std::vector<uint8_t>& escapes) {
  using Input = FusedGroup::Input;
  const mps::Graph& g = *plan.graph;
  const size_t n = f.ops.size();
  f.absorbed.assign(n, 0);
  f.picks.assign(n, {});
  std::map<int, size_t> made_at;
  std::map<int, int> reads;
  auto op_at = [&](size_t k) -> const mps::Op& { return g.ops[static_cast<size_t>(f.ops[k])]; };
  auto input = [&](Input in) {
    return Root(plan, op_at(static_cast<size_t>(in.op)).inputs[static_cast<size_t>(in.input)]);
  };
  for (size_t k = 0; k < n; ++k) {
    for (int v : op_at(k).inputs) ++reads[Root(plan, v)];
    for (int v : op_at(k).outputs) made_at[v] = k;
  }
  auto internal = [&](int v) {
    return owner[static_cast<size_t>(v)] == gi && !escapes[static_cast<size_t>(v)] && made_at.count(v) && reads[v] == 1;
  };
  auto splat = [&](int v) {
    if (owner[static_cast<size_t>(v)] != gi || escapes[static_cast<size_t>(v)] || !made_at.count(v)) return false;
    const mps::Op& b = op_at(made_at.at(v));
    return b.kind == mps::OpKind::kBroadcast && g.type(b.inputs[0]).NumElements() == 1;
  };
  auto select_of = [&](int v) {  // the position of the select making v, if it can be absorbed
    if (!internal(v)) return -1;
    const mps::Op& s = op_at(made_at.at(v));
    if (s.kind != mps::OpKind::kSelect || g.type(s.inputs[0]).NumElements() != f.count) return -1;
    return static_cast<int>(made_at.at(v));
  };
  auto add_pred = [&](std::vector<Input>& preds, Input p) {
    for (Input q : preds)
      if (input(q) == input(p)) return;
    preds.push_back(p);
  };
  // The selects of the tree an addend is picked by, and its predicates, or false when it is not one.
  std::function<bool(Input, std::vector<int>&, std::vector<Input>&)> tree = [&](Input in, std::vector<int>& selects,
                                                                                std::vector<Input>& preds) {
    const int v = input(in);
    if (splat(v)) return true;
    const int s = select_of(v);
    if (s < 0 || selects.size() >= 8) return false;
    selects.push_back(s);
    add_pred(preds, {s, 0});
    return tree({s, 1}, selects, preds) && tree({s, 2}, selects, preds);
  };
  // The splat an addend's tree picks when the chain's predicates are `bits` (bit i: predicate i).
  auto leaf = [&](Input in, const std::array<Input, 2>& preds, int bits) {
    for (;;) {
      const int v = input(in);
      if (splat(v)) return in;
      const int s = static_cast<int>(made_at.at(v));
      const bool on = input({s, 0}) == input(preds[0]) ? (bits & 1) : (bits & 2);
      in = {s, on ? 1 : 2};
    }
  };
  constexpr int kMaxLinks = PickedChain::kMaxLinks;
  std::map<int, size_t> reader;  // value -> position of a reader (its only one, where reads is 1)
  for (size_t k = 0; k < n; ++k)
    for (int v : op_at(k).inputs) reader[Root(plan, v)] = k;
  // Whether the chain's value v can be kept in the chain's loop: read by the next link alone, or by its
  // multiply-add and the select guarding it.
  auto carried = [&](int v, bool guarded) {
    return owner[static_cast<size_t>(v)] == gi && !escapes[static_cast<size_t>(v)] && made_at.count(v) &&
           reads[v] == (guarded ? 2 : 1);
  };
  std::vector<int> links(n, 0);
  for (size_t k = 0; k < n; ++k) {
    const mps::Op& op = op_at(k);
    const DType d = g.type(op.outputs[0]).dtype;
    if (op.kind != mps::OpKind::kMultiplyAdd || (d != DType::kF32 && d != DType::kF64)) continue;
    std::vector<int> selects;
    std::vector<Input> preds;
    if (!tree({static_cast<int>(k), 2}, selects, preds)) continue;
    // The select guarding this multiply-add, if any: its output's only reader, choosing between it and
    // the multiply-add's operand c (the chain's value) by a predicate of the tile's size.
    int guard = -1, guard_c = -1;
    bool guard_on_true = false;
    const int out = op.outputs[0];
    if (internal(out) && reader.count(out)) {
      const size_t s = reader.at(out);
      const mps::Op& so = op_at(s);
      if (so.kind == mps::OpKind::kSelect && g.type(so.inputs[0]).NumElements() == f.count) {
        const int t = Root(plan, so.inputs[1]), e = Root(plan, so.inputs[2]);
        for (int c = 0; c < 2 && guard < 0; ++c) {
          const int v = Root(plan, op.inputs[static_cast<size_t>(c)]);
          if (v != out && ((t == out && e == v) || (e == out && t == v))) {
            guard = static_cast<int>(s);
            guard_c = c;
            guard_on_true = t == out;
          }
        }
      }
    }
    if (guard >= 0) add_pred(preds, {guard, 0});
    if (preds.size() > 2) continue;
    FusedGroup::Pick& pick = f.picks[k];
    pick.ma = static_cast<int>(k);
    if (guard >= 0) pick.w = 1 - guard_c;
    for (int c = 0; c < 2; ++c) {  // input c continues a chain, the other is its multiplier
      if (guard >= 0 && c != guard_c) continue;
      const int v = Root(plan, op.inputs[static_cast<size_t>(c)]),
                w = Root(plan, op.inputs[static_cast<size_t>(1 - c)]);
      if (!carried(v, guard >= 0)) continue;
      const size_t prev = made_at.at(v);
      FusedGroup::Pick& last = f.picks[prev];
      if (!last.picked() || f.absorbed[prev] || links[prev] >= kMaxLinks) continue;
      const mps::Op& p = op_at(static_cast<size_t>(last.ma));
      const bool w_known = last.prev >= 0 || last.applies != 15;  // else the head link's w is open
      const int last_w = w_known ? Root(plan, p.inputs[static_cast<size_t>(last.w)])
                         : Root(plan, p.inputs[1]) == w || Root(plan, p.inputs[0]) == w ? w
                                                                                        : -1;
      std::vector<Input> all(last.pred.begin(), last.pred.begin() + last.preds);
      for (Input q : preds) add_pred(all, q);
      if (last_w != w || all.size() > 2) continue;
      if (!w_known) last.w = Root(plan, p.inputs[1]) == w ? 1 : 0;
      pick.prev = static_cast<int>(prev);
      pick.w = 1 - c;
      preds = all;
      links[k] = links[prev];
      f.absorbed[prev] = 1;
      break;
    }
    links[k] += 1;
    pick.preds = static_cast<int>(preds.size());
    for (size_t i = 0; i < preds.size(); ++i) pick.pred[i] = preds[i];
    for (int bits = 0; bits < 4; ++bits)
      pick.leaf[static_cast<size_t>(bits)] = leaf({static_cast<int>(k), 2}, pick.pred, bits);
    pick.selects = std::move(selects);
    for (int s : pick.selects) f.absorbed[static_cast<size_t>(s)] = 1;
    if (guard >= 0) {  // the link moves to its select, which now ends the chain
      const int i = input(pick.pred[0]) == input({guard, 0}) ? 0 : 1;
      pick.applies = 0;
      for (int bits = 0; bits < 4; ++bits)
        if (((bits >> i & 1) != 0) == guard_on_true) pick.applies |= static_cast<uint8_t>(1 << bits);
      f.picks[static_cast<size_t>(guard)] = std::move(pick);
      f.picks[k] = {};
      f.absorbed[k] = 1;
      links[static_cast<size_t>(guard)] = links[k];
    }
  }
  for (size_t k = 0; k < n; ++k)  // a lone multiply-add of a splat: nothing to gain
    if (f.picks[k].picked() && !f.absorbed[k] && links[k] == 1 && f.picks[k].selects.empty() &&
        f.picks[k].applies == 15)
      f.picks[k] = {};
  f.or_of_shifts.assign(n, {-1, -1});
  for (size_t k = 0; k < n; ++k) {
    const mps::Op& op = op_at(k);
    const DType d = g.type(op.outputs[0]).dtype;
    if (op.kind != mps::OpKind::kBitwiseOr || (d != DType::kU32 && d != DType::kU64)) continue;
    int shift[2] = {-1, -1};  // left, right
    for (int v : op.inputs) {
      const int r = Root(plan, v);
      if (!internal(r)) continue;
      const int at = static_cast<int>(made_at.at(r));
      const mps::Op& s = op_at(static_cast<size_t>(at));
      if (s.kind == mps::OpKind::kBitwiseLeftShift) shift[0] = at;
      if (s.kind == mps::OpKind::kBitwiseRightShift) shift[1] = at;
    }
    if (shift[0] < 0 || shift[1] < 0) continue;
    const mps::Op &l = op_at(static_cast<size_t>(shift[0])), &r = op_at(static_cast<size_t>(shift[1]));
    if (Root(plan, l.inputs[0]) != Root(plan, r.inputs[0]) || !splat(Root(plan, l.inputs[1])) ||
        !splat(Root(plan, r.inputs[1])))
      continue;
    f.or_of_shifts[k] = {shift[0], shift[1]};
    f.absorbed[static_cast<size_t>(shift[0])] = f.absorbed[static_cast<size_t>(shift[1])] = 1;
  }
  std::vector<size_t> runs_at(n);
  for (size_t k = 0; k < n; ++k) runs_at[k] = k;
  for (size_t k = 0; k < n; ++k)
    for (int s : f.or_of_shifts[k])
      if (s >= 0) runs_at[static_cast<size_t>(s)] = k;
  for (size_t k = 0; k < n; ++k) {
    if (!f.picks[k].picked() || f.absorbed[k]) continue;
    for (int l = static_cast<int>(k); l >= 0; l = f.picks[static_cast<size_t>(l)].prev) {
      runs_at[static_cast<size_t>(l)] = k;
      runs_at[static_cast<size_t>(f.picks[static_cast<size_t>(l)].ma)] = k;
      for (int s : f.picks[static_cast<size_t>(l)].selects) runs_at[static_cast<size_t>(s)] = k;
    }
  }
  return runs_at;
}

// Values a group keeps in tile scratch: made in the group, read nowhere else, not a graph output, and
// every view of them the same element count.
void AssignTileSlots(Plan& plan, const std::vector<int>& group_of_op) {
  const mps::Graph& g = *plan.graph;
  std::vector<int> owner(g.values.size(), -1);
  std::vector<uint8_t> escapes(g.values.size(), 0);
  for (size_t i = 0; i < g.ops.size(); ++i)
    if (group_of_op[i] >= 0)
      for (int v : g.ops[i].outputs) owner[static_cast<size_t>(v)] = group_of_op[i];
  for (int v : g.outputs) escapes[static_cast<size_t>(Root(plan, v))] = 1;
  for (size_t v = 0; v < g.values.size(); ++v) {
    int r = Root(plan, static_cast<int>(v));
    if (static_cast<size_t>(r) != v && g.values[v].NumElements() != g.values[static_cast<size_t>(r)].NumElements())
      escapes[static_cast<size_t>(r)] = 1;
  }
  for (size_t i = 0; i < g.ops.size(); ++i) {
    if (!Runs(plan, i)) continue;
    const mps::Op& op = g.ops[i];
    for (size_t j = 0; j < op.inputs.size(); ++j) {
      const int r = ReadRoot(plan, i, j);
      ForEachStorage(plan, r, [&](int v) {  // read through a slice view: read whole, from the arena
        if (owner[static_cast<size_t>(v)] != group_of_op[i] || v != r) escapes[static_cast<size_t>(v)] = 1;
      });
    }
  }
  plan.tile_slot.assign(g.values.size(), -1);
  for (size_t gi = 0; gi < plan.fused.size(); ++gi) {
    FusedGroup& f = plan.fused[gi];
    // An absorbed op reads its operands in its chain's loop.
    const std::vector<size_t> runs_at = FindPicks(plan, f, static_cast<int>(gi), owner, escapes);
    std::map<int, size_t> last_use;  // internal value -> position of its last reader in the group
    std::map<int, size_t> made_at;   // value -> position of the op making it
    for (size_t k = 0; k < f.ops.size(); ++k) {
      const mps::Op& op = g.ops[static_cast<size_t>(f.ops[k])];
      for (int v : op.inputs) {
        size_t& last = last_use[Root(plan, v)];
        last = std::max(last, runs_at[k]);
      }
      for (int v : op.outputs) {
        last_use.emplace(v, k);  // a value nobody reads dies where it is made
        made_at[v] = k;
      }
    }
    auto k_of_maker = [&](int v) {
      auto it = made_at.find(v);
      return it == made_at.end() ? f.ops.size() : it->second;
    };
    std::vector<int> free_slots;
    size_t width = 1;
    f.once.assign(f.ops.size(), 0);
    for (size_t k = 0; k < f.ops.size(); ++k) {
      const mps::Op& op = g.ops[static_cast<size_t>(f.ops[k])];
      for (int v : op.outputs) {
        size_t sv = static_cast<size_t>(v);
        if (owner[sv] != static_cast<int>(gi) || escapes[sv] || f.absorbed[k]) continue;
        width = std::max(width, ByteSize(g.values[sv].dtype));
        int64_t source = op.kind == mps::OpKind::kBroadcast ? g.type(op.inputs[0]).NumElements() : 0;
        bool trailing = source > 0 && Tiling(g, op) == TiledBroadcast::kTrailing;
        if (trailing && kTile % source == 0) {  // the same in every tile: its own slot, filled once
          f.once[k] = 1;
          plan.tile_slot[sv] = f.slots++;
          continue;
        }
        if (free_slots.empty()) free_slots.push_back(f.slots++);
        plan.tile_slot[sv] = free_slots.back();
        free_slots.pop_back();
      }
      // Slots free after this op's outputs are placed, so no output shares a slot with its own input.
      for (auto& [v, last] : last_use)
        if (last == k && plan.tile_slot[static_cast<size_t>(v)] >= 0 && k_of_maker(v) < f.ops.size() &&
            !f.once[k_of_maker(v)] && owner[static_cast<size_t>(v)] == static_cast<int>(gi))
          free_slots.push_back(plan.tile_slot[static_cast<size_t>(v)]);
    }
    // An absorbed op's output is never made: any slot will do, as nothing reads or writes it.
    for (size_t k = 0; k < f.ops.size(); ++k)
      if (f.absorbed[k]) {
        f.slots = std::max(f.slots, 1);
        for (int v : g.ops[static_cast<size_t>(f.ops[k])].outputs) plan.tile_slot[static_cast<size_t>(v)] = 0;
      }
    f.slot_bytes = AlignUp(static_cast<size_t>(kTile) * width);
    for (int i : f.ops) {
      f.operand_first.push_back(f.operands.size());
      const mps::Op& op = g.ops[static_cast<size_t>(i)];
      for (int v : op.inputs) {
        int r = Root(plan, v);
        // A view that reinterprets its root as elements of another size (a bitcast to a wider or narrower
        // type) is read as itself: its tiles step by its own element size, over its own count.
        if (g.type(v).NumElements() != g.type(r).NumElements()) r = v;
        f.operands.push_back(r);
        size_t maker = k_of_maker(r);
        const mps::Op* made = maker < f.ops.size() ? &g.ops[static_cast<size_t>(f.ops[maker])] : nullptr;
        f.uniform.push_back(plan.tile_slot[static_cast<size_t>(r)] >= 0 && made &&
                            made->kind == mps::OpKind::kBroadcast && g.type(made->inputs[0]).NumElements() == 1);
        // A broadcast's source and a one-element predicate are read whole by every tile.
        f.moves.push_back(op.kind != mps::OpKind::kBroadcast && g.type(r).NumElements() == f.count);
      }
      for (int v : op.outputs) {
        f.operands.push_back(v);
        f.uniform.push_back(0);
        f.moves.push_back(1);
      }
    }
    f.operand_first.push_back(f.operands.size());
    f.profile_key = "Fused(" + std::to_string(f.ops.size()) + " ops) " + std::to_string(f.count) + " elements";
  }
}

}  // namespace

bool MadeInTiles(const mps::Graph& g, const mps::Op& op) {
  return FusionEnabled() && TileKind(op.kind) && op.outputs.size() == 1 &&
         g.type(op.outputs[0]).NumElements() >= kMinFusedElements &&
         (op.kind != mps::OpKind::kBroadcast || Tiling(g, op) != TiledBroadcast::kNone);
}

void FuseElementwise(Plan& plan) {
  const mps::Graph& g = *plan.graph;
  plan.steps.clear();
  plan.fused.clear();
  std::vector<int> group_of_op(g.ops.size(), -1);
  // Groups still open, one per element count (a step's parameter update and its bias update are chains
  // of different sizes, interleaved). Per root value: the open group making it (its key), or -1.
  std::map<int64_t, FusedGroup> open;
  std::vector<int64_t> made_by(g.values.size(), -1);
  auto flush = [&](int64_t count) {
    FusedGroup& f = open[count];
    for (int i : f.ops)
      for (int v : g.ops[static_cast<size_t>(i)].outputs) made_by[static_cast<size_t>(v)] = -1;
    if (f.ops.size() >= 2) {
      int gi = static_cast<int>(plan.fused.size());
      for (int i : f.ops) group_of_op[static_cast<size_t>(i)] = gi;
      plan.steps.push_back(-1 - gi);
      plan.fused.push_back(std::move(f));
    } else {
      for (int i : f.ops) plan.steps.push_back(i);
    }
    open.erase(count);
  };
  // An op runs after every open group it reads from; the others stay open, so an op that reads nothing a
  // chain makes (the scalar bookkeeping between its ops) runs before the chain instead of cutting it.
  auto flush_inputs_of = [&](size_t i, int64_t keep) {
    const mps::Op& op = g.ops[i];
    for (size_t j = 0; j < op.inputs.size(); ++j) {
      const int r = ReadRoot(plan, i, j);
      ForEachStorage(plan, r, [&](int v) {  // what a slice view reads must be whole before the op runs
        int64_t c = made_by[static_cast<size_t>(v)];
        if (c >= 0 && (c != keep || v != r)) flush(c);
      });
    }
  };
  const bool enabled = FusionEnabled();
  for (size_t i = 0; i < g.ops.size(); ++i) {
    if (!Runs(plan, i)) continue;
    const mps::Op& op = g.ops[i];
    int64_t n = op.outputs.size() == 1 ? g.type(op.outputs[0]).NumElements() : 0;
    if (enabled && n >= kMinFusedElements && Fusible(plan, i, n)) {
      flush_inputs_of(i, n);
      FusedGroup& f = open[n];
      f.count = n;
      f.ops.push_back(static_cast<int>(i));
      for (int v : op.outputs) made_by[static_cast<size_t>(v)] = n;
      continue;
    }
    flush_inputs_of(i, -1);
    plan.steps.push_back(static_cast<int>(i));
  }
  while (!open.empty()) flush(open.begin()->first);
  AssignTileSlots(plan, group_of_op);
}

Status RunFused(const Plan& plan, const FusedGroup& f, const RunMemory& memory) {
  const mps::Graph& g = *plan.graph;
  // Per operand: its tile slot, or its memory and how far a tile moves it (0: one element, never moved).
  struct Ref {
    uint8_t* ptr;
    int slot;
    size_t step;
    bool uniform;
  };
  std::vector<Ref> refs(f.operands.size());
  for (size_t k = 0; k < f.operands.size(); ++k) {
    int v = f.operands[k];
    const mps::TensorType& t = g.type(v);
    int slot = plan.tile_slot[static_cast<size_t>(v)];
    refs[k] = {slot >= 0 ? nullptr : ValuePtr(plan, memory, v), slot, f.moves[k] ? ByteSize(t.dtype) : 0,
               f.uniform[k] != 0};
  }
  const int64_t tiles = (f.count + kTile - 1) / kTile;
  std::mutex mu;
  Status failure;
  std::atomic<bool> failed{false};
  auto run_tiles = [&](int64_t t0, int64_t t1) {
    thread_local std::vector<uint8_t> storage;
    thread_local std::vector<const uint8_t*> in;
    thread_local std::vector<uint8_t*> out;
    thread_local std::vector<uint8_t> coefficients;
    thread_local std::vector<uint8_t> applies;
    size_t need = static_cast<size_t>(f.slots) * f.slot_bytes + kAlign;
    if (storage.size() < need) storage.resize(need);
    uint8_t* scratch = storage.data() + (kAlign - reinterpret_cast<uintptr_t>(storage.data()) % kAlign) % kAlign;
    for (int64_t t = t0 - 1; t < t1 && !failed.load(std::memory_order_relaxed); ++t) {
      // t0 - 1: the splats, once for all this thread's tiles.
      const bool splats = t < t0;
      const int64_t base = splats ? 0 : t * kTile, count = splats ? kTile : std::min(kTile, f.count - base);
      auto at = [&](size_t j) {  // operand j's memory for this tile
        const Ref& r = refs[j];
        return r.slot >= 0 ? scratch + static_cast<size_t>(r.slot) * f.slot_bytes
                           : r.ptr + static_cast<size_t>(base) * r.step;
      };
      for (size_t k = 0; k < f.ops.size(); ++k) {
        if (f.once[k] != splats || f.absorbed[k]) continue;
        const mps::Op& op = g.ops[static_cast<size_t>(f.ops[k])];
        in.clear();
        out.clear();
        OpArgs a{op, g, std::move(in), std::move(out)};
        a.count = count;
        a.base = base;
        size_t first = f.operand_first[k];
        for (size_t j = first; j < f.operand_first[k + 1]; ++j) {
          uint8_t* p = at(j);
          if (j - first < op.inputs.size()) {
            if (j - first < 3) a.uniform[j - first] = refs[j].uniform;
            a.in.push_back(p);
          } else
            a.out.push_back(p);
        }
        PickedChain chain;
        if (f.picks[k].picked()) {
          // Each link's addend for the four values of the predicates, first link first, and the
          // chain's first value and multiplier.
          const FusedGroup::Pick& tail = f.picks[k];
          const size_t width = ByteSize(g.type(op.outputs[0]).dtype);
          auto input_at = [&](FusedGroup::Input in) {
            return at(f.operand_first[static_cast<size_t>(in.op)] + static_cast<size_t>(in.input));
          };
          int head = static_cast<int>(k);
          chain.links = 0;
          for (int l = head; l >= 0; l = f.picks[static_cast<size_t>(l)].prev, ++chain.links) head = l;
          coefficients.resize(4 * static_cast<size_t>(chain.links) * width);
          applies.resize(static_cast<size_t>(chain.links));
          bool guarded = false;
          size_t j = static_cast<size_t>(chain.links);
          for (int l = static_cast<int>(k); l >= 0; l = f.picks[static_cast<size_t>(l)].prev) {
            --j;
            const FusedGroup::Pick& link = f.picks[static_cast<size_t>(l)];
            for (size_t bits = 0; bits < 4; ++bits)
              std::memcpy(coefficients.data() + (4 * j + bits) * width, input_at(link.leaf[bits]), width);
            applies[j] = link.applies;
            guarded |= link.applies != 15;
          }
          chain.coefficients = coefficients.data();
          chain.applies = guarded ? applies.data() : nullptr;
          chain.preds = tail.preds;
          for (int i = 0; i < tail.preds; ++i) chain.pred[i] = input_at(tail.pred[static_cast<size_t>(i)]);
          const FusedGroup::Pick& first_link = f.picks[static_cast<size_t>(head)];
          a.in[0] = input_at({first_link.ma, 1 - first_link.w});
          a.in[1] = input_at({tail.ma, tail.w});
          a.chain = &chain;
        }
        if (f.or_of_shifts[k][0] >= 0) {  // the value, then each shift's amount
          const size_t l = f.operand_first[static_cast<size_t>(f.or_of_shifts[k][0])];
          const size_t r = f.operand_first[static_cast<size_t>(f.or_of_shifts[k][1])];
          a.in = {at(l), at(l + 1), at(r + 1)};
          a.or_of_shifts = true;
        }
        // A chain ending at a guarding select is still a chain of multiply-adds.
        Status s = a.chain ? RunMultiplyAdd(a) : RunOp(a, plan, static_cast<size_t>(f.ops[k]));
        in = std::move(a.in);
        out = std::move(a.out);
        if (!s.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          if (!failed.exchange(true)) failure = std::move(s);
          return;
        }
      }
    }
  };
  const bool profile = ProfilingEnabled();
  auto start = std::chrono::steady_clock::now();
  ParallelFor(tiles, 1, run_tiles);
  if (profile) RecordTime(f.profile_key, std::chrono::steady_clock::now() - start);
  return failure;
}

}  // namespace jmp::exec::host

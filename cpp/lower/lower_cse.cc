#include "lower/lower_cse.h"

#include <map>
#include <tuple>
#include <utility>
#include <vector>

namespace jmp::mps {

namespace {

// Ops whose result is a function of their operands and result type alone: the elementwise rows and the
// parameterless moves. Anything with parameters, state or a callback stays as written.
bool OfOperandsAlone(OpKind kind) {
  switch (kind) {
#define JMP_MPS_UNARY(Name, macos, selector, domain) \
  case OpKind::k##Name: return true;
#define JMP_MPS_BINARY(Name, macos, primary, secondary, domain) \
  case OpKind::k##Name: return true;
#define JMP_MPS_OP(Name, macos, selector, domain)                                         \
  case OpKind::k##Name:                                                                   \
    return OpKind::k##Name == OpKind::kSelect || OpKind::k##Name == OpKind::kClamp ||     \
           OpKind::k##Name == OpKind::kMultiplyAdd || OpKind::k##Name == OpKind::kCast || \
           OpKind::k##Name == OpKind::kReshape || OpKind::k##Name == OpKind::kBroadcast;
#define JMP_HOST_OP(Name, domain) \
  case OpKind::k##Name: return false;
#include "mps/op_kinds.def"
  }
  return false;
}

}  // namespace

void EliminateCommonOps(Graph& g) {
  std::vector<int> repl(g.values.size());
  for (size_t v = 0; v < repl.size(); ++v) repl[v] = static_cast<int>(v);
  using Key = std::tuple<OpKind, std::vector<int>, DType, std::vector<int64_t>>;
  std::map<Key, int> seen;
  std::vector<Op> kept;
  kept.reserve(g.ops.size());
  for (Op& op : g.ops) {
    for (int& v : op.inputs) v = repl[static_cast<size_t>(v)];
    for (Graph& sub : op.subgraphs) EliminateCommonOps(sub);
    if (OfOperandsAlone(op.kind) && op.outputs.size() == 1 && std::holds_alternative<NoAttrs>(op.attrs)) {
      const TensorType& t = g.type(op.outputs[0]);
      auto [at, fresh] = seen.try_emplace(Key{op.kind, op.inputs, t.dtype, t.shape}, op.outputs[0]);
      if (!fresh) {
        repl[static_cast<size_t>(op.outputs[0])] = at->second;
        continue;
      }
    }
    kept.push_back(std::move(op));
  }
  g.ops = std::move(kept);
  for (int& v : g.outputs) v = repl[static_cast<size_t>(v)];
}

}  // namespace jmp::mps

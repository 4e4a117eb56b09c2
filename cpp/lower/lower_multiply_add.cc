// XLA:CPU builds its kernels with LLVM's floating-point contraction on ("always allow FMA fusion"), so
// inside one fused loop `a * b + c` is one FMA: the product is never rounded. A program stepping a time
// variable, t0 + dt * alpha, then sees other last bits than a backend rounding the product, and an
// adaptive ODE solver's step-size controller amplifies that ulp into a visibly different solution.
// This pass gives the MPS op graph the same contraction, for float32 and float64 products, following
// what XLA's passes make of a multiply before LLVM sees it:
// - Equal products are one (XLA's CSE): multiplies of the same two operands form one group.
// - A group that is a result of the graph, or is read by an op XLA does not fuse it into (a reduction,
//   a matrix product, a loop, a gather...), is kept in memory and read from there: it stays rounded.
// - Otherwise XLA copies the cheap product into each reader's loop, and each add or subtract reading it
//   contracts. Unless two readers are fused into one loop (both read only by one op, or one read only by
//   the other): the product is then computed once and read twice there, and LLVM contracts only a
//   product with one use, so the group stays rounded.
// Of an add of two contractible products, the first operand's is contracted, as LLVM's combiner picks.
#include "lower/lower_multiply_add.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace jmp::mps {

namespace {

// Ops XLA fuses a producer into (loop fusion), so a product they read need not be kept in memory.
bool ReadsInLoop(OpKind k) {
  static const std::set<OpKind> kinds = {
#define JMP_MPS_UNARY(name, macos, selector, domain) OpKind::k##name,
#define JMP_MPS_BINARY(name, macos, primary, secondary, domain) OpKind::k##name,
#include "mps/op_kinds.def"
      OpKind::kSelect,    OpKind::kClamp, OpKind::kMultiplyAdd, OpKind::kCast, OpKind::kReshape, OpKind::kTranspose,
      OpKind::kBroadcast, OpKind::kSlice, OpKind::kConcat,      OpKind::kPad,  OpKind::kReverse,
  };
  return kinds.count(k) > 0;
}

}  // namespace

void ContractMultiplyAdds(Graph& g) {
  for (Op& op : g.ops)
    for (Graph& sub : op.subgraphs) ContractMultiplyAdds(sub);
  const size_t n = g.ops.size(), nv = g.values.size();
  std::vector<std::vector<int>> readers(nv);  // per value: the ops reading it, once per operand
  std::vector<uint8_t> is_result(nv, 0);
  for (size_t i = 0; i < n; ++i)
    for (int v : g.ops[i].inputs) readers[static_cast<size_t>(v)].push_back(static_cast<int>(i));
  for (int v : g.outputs) is_result[static_cast<size_t>(v)] = 1;
  auto sole_reader = [&](int v) {
    const std::vector<int>& r = readers[static_cast<size_t>(v)];
    return r.size() == 1 && !is_result[static_cast<size_t>(v)] ? r[0] : -1;
  };

  // Groups of equal float products: per group its values.
  std::map<std::pair<int, int>, std::vector<int>> groups;
  for (const Op& op : g.ops) {
    if (op.kind != OpKind::kMultiply || op.inputs.size() != 2 || op.outputs.size() != 1) continue;
    const DType d = g.type(op.outputs[0]).dtype;
    if (d == DType::kF32 || d == DType::kF64) groups[{op.inputs[0], op.inputs[1]}].push_back(op.outputs[0]);
  }
  std::vector<uint8_t> contractible(nv, 0);  // per product value
  std::vector<int> merged(nv, -1);           // per product kept rounded: the group's first value
  for (const auto& [operands, values] : groups) {
    std::vector<int> all;  // every reader of the group, once per operand read
    bool kept = false;
    for (int v : values) {
      kept = kept || is_result[static_cast<size_t>(v)];
      for (int r : readers[static_cast<size_t>(v)]) all.push_back(r);
    }
    for (size_t x = 0; x < all.size() && !kept; ++x) {
      const OpKind k = g.ops[static_cast<size_t>(all[x])].kind;
      kept = !ReadsInLoop(k);
      for (size_t y = x + 1; y < all.size() && !kept; ++y) {
        const int rx = all[x], ry = all[y];
        const int sx = sole_reader(g.ops[static_cast<size_t>(rx)].outputs[0]);
        const int sy = sole_reader(g.ops[static_cast<size_t>(ry)].outputs[0]);
        kept = rx == ry || (sx >= 0 && sx == sy) || sx == ry || sy == rx;
      }
    }
    if (!kept)
      for (int v : values) contractible[static_cast<size_t>(v)] = 1;
    else
      for (size_t k = 1; k < values.size(); ++k) merged[static_cast<size_t>(values[k])] = values[0];
  }
  // A product kept rounded is one value, as XLA's CSE makes it: its readers share it, so no executor's
  // fused kernel can contract one copy of it into an add (MPSGraph's may contract a product only an add
  // reads).
  bool merge = false;
  for (int v : merged) merge = merge || v >= 0;
  if (merge) {
    auto rename = [&](int& v) {
      if (merged[static_cast<size_t>(v)] >= 0) v = merged[static_cast<size_t>(v)];
    };
    std::vector<Op> kept_ops;
    for (Op& op : g.ops) {
      if (op.kind == OpKind::kMultiply && op.outputs.size() == 1 && merged[static_cast<size_t>(op.outputs[0])] >= 0)
        continue;
      for (int& v : op.inputs) rename(v);
      kept_ops.push_back(std::move(op));
    }
    for (int& v : g.outputs) rename(v);
    g.ops = std::move(kept_ops);
    return ContractMultiplyAdds(g);  // readers changed: decide again over the merged graph
  }

  // Per add or subtract: the operand it contracts, or -1. Per multiply: whether a reader still needs it.
  std::vector<int> contracts(n, -1), maker(nv, -1);
  for (size_t i = 0; i < n; ++i)
    for (int v : g.ops[i].outputs) maker[static_cast<size_t>(v)] = static_cast<int>(i);
  std::vector<uint8_t> needed(n, 0);
  std::vector<std::pair<int, int>> factors(n);  // per contracting op: its product's operands
  bool any = false;
  for (size_t i = 0; i < n; ++i) {
    const Op& op = g.ops[i];
    if ((op.kind == OpKind::kAdd || op.kind == OpKind::kSubtract) && op.inputs.size() == 2)
      for (int j = 0; j < 2 && contracts[i] < 0; ++j)
        if (contractible[static_cast<size_t>(op.inputs[static_cast<size_t>(j)])]) contracts[i] = j;
    if (contracts[i] >= 0) {
      const int product = op.inputs[static_cast<size_t>(contracts[i])];
      const Op& m = g.ops[static_cast<size_t>(maker[static_cast<size_t>(product)])];
      factors[i] = {m.inputs[0], m.inputs[1]};
      any = true;
    }
    for (size_t j = 0; j < op.inputs.size(); ++j)
      if (static_cast<int>(j) != contracts[i] && maker[static_cast<size_t>(op.inputs[j])] >= 0)
        needed[static_cast<size_t>(maker[static_cast<size_t>(op.inputs[j])])] = 1;
  }
  if (!any) return;

  std::vector<Op> ops;
  ops.reserve(n);
  // x - y is x + (-y), and negation is exact: a contracted subtraction negates its addend or a factor.
  auto negated = [&](int v, const std::string& location) {
    Op neg;
    neg.kind = OpKind::kNegative;
    neg.inputs = {v};
    neg.outputs = {g.AddValue(g.type(v).dtype, g.type(v).shape)};
    neg.location = location;
    ops.push_back(std::move(neg));
    return ops.back().outputs[0];
  };
  for (size_t i = 0; i < n; ++i) {
    Op& op = g.ops[i];
    if (op.kind == OpKind::kMultiply && !needed[i] && contractible[static_cast<size_t>(op.outputs[0])]) continue;
    const int j = contracts[i];
    if (j < 0) {
      ops.push_back(std::move(op));
      continue;
    }
    auto [a, b] = factors[i];  // the product itself may have moved to `ops` already
    int addend = op.inputs[static_cast<size_t>(1 - j)];
    if (op.kind == OpKind::kSubtract && j == 0) addend = negated(addend, op.location);  // a * b - c
    if (op.kind == OpKind::kSubtract && j == 1) a = negated(a, op.location);            // c - a * b
    op.kind = OpKind::kMultiplyAdd;
    op.inputs = {a, b, addend};
    ops.push_back(std::move(op));
  }
  g.ops = std::move(ops);
}

}  // namespace jmp::mps

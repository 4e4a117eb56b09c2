// XLA:CPU builds its kernels with LLVM's floating-point contraction on ("always allow FMA fusion"), so
// inside one fused loop `a * b + c` is one FMA: the product is never rounded. A program stepping a time
// variable, t0 + dt * alpha, then sees other last bits than a backend rounding the product, and an
// adaptive ODE solver's step-size controller amplifies that ulp into a visibly different solution.
// This pass gives the MPS op graph the same contraction, for float32 and float64 products, on the
// program XLA's simplifications leave (lower_float_simplify.cc) and in the loops its fusion makes:
// - XLA fuses elementwise producers into the loops of their readers, consumers first. A value kept in
//   memory (a result, or read by an op that is not a loop: a reduction, a matrix product, a loop
//   construct, a gather...) is computed in a loop of its own and its readers read it rounded. Any other
//   value is computed inside each loop that reads it: one copy per loop, shared by that loop's readers.
// - LLVM contracts a product with one use, so an add or a subtract contracts a product if in every
//   loop that holds the add, the product's copy has no other reader.
// - A subtract of two such products contracts the first, as LLVM's combiner does. An add of two
//   contracts the one whose expression has the smaller hash, a hash blind to the order of any add's or
//   multiply's operands and, first, to which input or other non-arithmetic value a leaf is: LLVM would
//   take the first, but then a + b and b + a would round differently, and the two halves of a
//   symmetric function's gradient (x * c1 + y * c2 and y * c1 + x * c2) would too.
// docs/multiply-add.md states the rule whole and what it was checked against.
#include "lower/lower_multiply_add.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "lower/lower_float_simplify.h"
#include "mps/graph_serial.h"
#include "support/byte_stream.h"

namespace jmp::mps {

namespace {

// Ops XLA fuses a producer into (loop fusion), so a value they read need not be kept in memory.
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

uint64_t Mix(uint64_t h, uint64_t x) {  // splitmix64's finalizer over the running hash
  uint64_t z = h ^ (x + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Per value: a hash of the expression computing it, the same for a + b and b + a (and a * b, b * a).
// With `leaves_alike`, any value that is not float arithmetic or a constant hashes by its type alone:
// x * 0.5 and y * 0.5 are alike then, as the two halves of a symmetric function's gradient.
std::vector<uint64_t> ExpressionHashes(const Graph& g, bool leaves_alike) {
  std::vector<uint64_t> h(g.values.size(), 0);
  auto type_hash = [&](uint64_t x, int v) {
    const TensorType& t = g.type(v);
    x = Mix(x, static_cast<uint64_t>(t.dtype));
    for (int64_t d : t.shape) x = Mix(x, static_cast<uint64_t>(d));
    return x;
  };
  for (size_t i = 0; i < g.inputs.size(); ++i)
    h[static_cast<size_t>(g.inputs[i])] = type_hash(leaves_alike ? 1 : Mix(1, i), g.inputs[i]);
  for (const Op& op : g.ops) {
    const bool commutes = op.kind == OpKind::kAdd || op.kind == OpKind::kMultiply || op.kind == OpKind::kMultiplyAdd;
    const bool arithmetic =
        commutes || op.kind == OpKind::kSubtract || op.kind == OpKind::kNegative || op.kind == OpKind::kConstant;
    if (leaves_alike && !arithmetic) {
      for (int v : op.outputs) h[static_cast<size_t>(v)] = type_hash(1, v);
      continue;
    }
    uint64_t base = Mix(2, static_cast<uint64_t>(op.kind));
    ByteWriter attrs;
    WriteAttrs(op.attrs, attrs);
    for (char c : attrs.str()) base = Mix(base, static_cast<uint8_t>(c));
    std::vector<uint64_t> in;
    for (int v : op.inputs) in.push_back(h[static_cast<size_t>(v)]);
    if (commutes && in.size() >= 2) std::sort(in.begin(), in.begin() + 2);
    for (uint64_t x : in) base = Mix(base, x);
    for (size_t j = 0; j < op.outputs.size(); ++j)
      h[static_cast<size_t>(op.outputs[j])] = type_hash(Mix(base, j), op.outputs[j]);
  }
  return h;
}

}  // namespace

void ContractMultiplyAdds(Graph& g) {
  for (Op& op : g.ops)
    for (Graph& sub : op.subgraphs) ContractMultiplyAdds(sub);
  SimplifyFloatArithmetic(g);
  const size_t n = g.ops.size(), nv = g.values.size();
  std::vector<std::vector<int>> readers(nv);  // per value: the ops reading it, once per operand
  std::vector<uint8_t> is_result(nv, 0);
  std::vector<int> maker(nv, -1);
  for (size_t i = 0; i < n; ++i) {
    for (int v : g.ops[i].inputs) readers[static_cast<size_t>(v)].push_back(static_cast<int>(i));
    for (int v : g.ops[i].outputs) maker[static_cast<size_t>(v)] = static_cast<int>(i);
  }
  for (int v : g.outputs) is_result[static_cast<size_t>(v)] = 1;

  // What a kept value's readers read: XLA still computes a copy in each reader's loop if that reads no
  // more input than the value itself has elements (one operand that is not a broadcast, as x * c; or
  // operands no larger than it, as x * x), and otherwise reads it from memory, rounded.
  auto elements = [&](int v) { return g.type(v).NumElements(); };
  auto true_rank = [&](int v) {
    int r = 0;
    for (int64_t d : g.type(v).shape) r += d != 1;
    return r;
  };
  auto cheap_to_copy = [&](const Op& op) {
    if (op.outputs.size() != 1) return false;
    const int out = op.outputs[0];
    int relevant = 0;
    int64_t read = 0;
    std::vector<int> unique;
    for (int v : op.inputs) {
      const int m = maker[static_cast<size_t>(v)];
      const OpKind k = m >= 0 ? g.ops[static_cast<size_t>(m)].kind : OpKind::kAdd;
      const bool broadcast =
          k == OpKind::kBroadcast || k == OpKind::kCoordinateAlongAxis || (k == OpKind::kConstant && elements(v) == 1);
      relevant += !broadcast && true_rank(v) >= true_rank(out);
      if (std::find(unique.begin(), unique.end(), v) == unique.end()) unique.push_back(v), read += elements(v);
    }
    return relevant <= 1 || read <= elements(out);
  };

  // Per op: the loops holding a copy of it (sorted ids), consumers first; whether its readers' loops
  // hold one (else they read it from memory).
  std::vector<std::vector<int>> loops(n);
  std::vector<uint8_t> copied(n, 0);
  int next_loop = 0;
  for (size_t i = n; i-- > 0;) {
    const Op& op = g.ops[i];
    bool kept = op.outputs.size() != 1 || !ReadsInLoop(op.kind);
    std::vector<int> in;
    for (int v : op.outputs) {
      kept = kept || is_result[static_cast<size_t>(v)];
      for (int r : readers[static_cast<size_t>(v)]) {
        kept = kept || !ReadsInLoop(g.ops[static_cast<size_t>(r)].kind);
        std::vector<int> merged;
        std::set_union(in.begin(), in.end(), loops[static_cast<size_t>(r)].begin(), loops[static_cast<size_t>(r)].end(),
                       std::back_inserter(merged));
        in = std::move(merged);
      }
    }
    // A value read in very many loops is kept in memory here (XLA bounds duplication too), which
    // keeps this analysis linear in the graph's size.
    copied[i] = ReadsInLoop(op.kind) && in.size() <= 64 && (!kept || cheap_to_copy(op));
    if (!copied[i]) in.clear();
    if (kept || in.empty()) in.insert(std::lower_bound(in.begin(), in.end(), next_loop), next_loop), ++next_loop;
    loops[i] = std::move(in);
  }

  // Per value made by a float multiply of two non-constants: may its reader `r` contract it?
  auto constant_like = [&](int v) {
    for (int m = maker[static_cast<size_t>(v)]; m >= 0;) {
      const Op& op = g.ops[static_cast<size_t>(m)];
      if (op.kind == OpKind::kConstant) return true;
      if ((op.kind != OpKind::kBroadcast && op.kind != OpKind::kReshape) || op.inputs.size() != 1) return false;
      m = maker[static_cast<size_t>(op.inputs[0])];
    }
    return false;
  };
  auto contractible = [&](int p, int r) {
    const int m = maker[static_cast<size_t>(p)];
    if (m < 0 || !copied[static_cast<size_t>(m)]) return false;
    const Op& mul = g.ops[static_cast<size_t>(m)];
    const DType d = g.type(p).dtype;
    if (mul.kind != OpKind::kMultiply || mul.inputs.size() != 2 || (d != DType::kF32 && d != DType::kF64)) return false;
    if (constant_like(mul.inputs[0]) && constant_like(mul.inputs[1])) return false;  // XLA folds it
    for (int loop : loops[static_cast<size_t>(r)]) {
      int uses = 0;
      for (int q : readers[static_cast<size_t>(p)]) {
        const std::vector<int>& ql = loops[static_cast<size_t>(q)];
        uses += std::binary_search(ql.begin(), ql.end(), loop) ? 1 : 0;
      }
      if (uses != 1) return false;
    }
    return true;
  };

  // Per add or subtract: the operand it contracts, or -1. Per multiply: whether a reader still needs it.
  std::vector<int> contracts(n, -1);
  std::vector<uint64_t> form, full;  // expression hashes: leaves alike, leaves told apart
  bool any = false;
  for (size_t i = 0; i < n; ++i) {
    const Op& op = g.ops[i];
    if ((op.kind != OpKind::kAdd && op.kind != OpKind::kSubtract) || op.inputs.size() != 2) continue;
    const bool c0 = contractible(op.inputs[0], static_cast<int>(i)),
               c1 = contractible(op.inputs[1], static_cast<int>(i));
    if (c0 && c1 && op.kind == OpKind::kAdd) {
      if (form.empty()) form = ExpressionHashes(g, /*leaves_alike=*/true), full = ExpressionHashes(g, false);
      const size_t a = static_cast<size_t>(op.inputs[0]), b = static_cast<size_t>(op.inputs[1]);
      contracts[i] = std::make_pair(form[b], full[b]) < std::make_pair(form[a], full[a]) ? 1 : 0;
    } else if (c0 || c1) {
      contracts[i] = c0 ? 0 : 1;
    }
    any = any || contracts[i] >= 0;
  }
  if (!any) return;
  std::vector<uint8_t> needed(n, 0);
  for (int v : g.outputs)
    if (maker[static_cast<size_t>(v)] >= 0) needed[static_cast<size_t>(maker[static_cast<size_t>(v)])] = 1;
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < g.ops[i].inputs.size(); ++j) {
      const int m = maker[static_cast<size_t>(g.ops[i].inputs[j])];
      if (m >= 0 && static_cast<int>(j) != contracts[i]) needed[static_cast<size_t>(m)] = 1;
    }

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
  std::vector<std::pair<int, int>> factors(n);  // per contracting op: its product's operands
  for (size_t i = 0; i < n; ++i)
    if (contracts[i] >= 0) {
      const Op& m =
          g.ops[static_cast<size_t>(maker[static_cast<size_t>(g.ops[i].inputs[static_cast<size_t>(contracts[i])])])];
      factors[i] = {m.inputs[0], m.inputs[1]};
    }
  for (size_t i = 0; i < n; ++i) {
    Op& op = g.ops[i];
    if (op.kind == OpKind::kMultiply && !needed[i]) continue;  // every reader contracts it
    const int j = contracts[i];
    if (j < 0) {
      ops.push_back(std::move(op));
      continue;
    }
    auto [a, b] = factors[i];
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

// XLA:CPU does not compile the program JAX sends as written. Its algebraic simplifier and constant
// folding rewrite float arithmetic first, and some of those rewrites round differently (a sum or a
// product of two constants is one constant, rounded once) or take a product away from an add (x * 1
// is x, a * 2 + b * 2 is (a + b) * 2). The XLA of jax 0.12 no longer reassociates constants
// ((x + c1) + c2 stays, where jax 0.10.2's made it x + (c1 + c2)); this pass follows the newest.
// Then LLVM's instruction combiner moves negations, exactly, so that an add reads the product under
// them: x * -1 is -x, a + -b is a - b, -a - b is -(a + b), and a negation beside a constant factor
// goes into it (-(x * c) and (-x) * c are x * -c). The multiply-add rule must look at the program
// those passes leave, or it contracts another product than XLA:CPU's (the product by -1 instead of
// the one under it) and mirror images round differently. This pass makes the same rewrites on the
// MPS op graph, for float32 and float64: XLA's first, then LLVM's. A folded constant is computed in
// its own type, one op at a time, as XLA's evaluator does.
#include "lower/lower_float_simplify.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace jmp::mps {

namespace {

bool IsF32OrF64(DType d) { return d == DType::kF32 || d == DType::kF64; }

bool IsArithmetic(OpKind k) {
  return k == OpKind::kAdd || k == OpKind::kSubtract || k == OpKind::kMultiply || k == OpKind::kNegative;
}

template <typename T>
double Fold(OpKind k, double a, double b) {
  const T x = static_cast<T>(a), y = static_cast<T>(b);
  T r = -x;  // one operation a statement: nothing for a compiler to contract
  if (k == OpKind::kAdd) r = x + y;
  if (k == OpKind::kSubtract) r = x - y;
  if (k == OpKind::kMultiply) r = x * y;
  return static_cast<double>(r);
}

bool PowerOfTwo(double v) {
  int e = 0;
  const double m = std::frexp(v, &e);
  return m == 0.5 || m == -0.5;
}

// Equal bits: -0 and +0 are two constants, as XLA's literals compare.
bool SameConstant(double a, double b) { return a == b && std::signbit(a) == std::signbit(b); }

class Rewriter {
 public:
  Rewriter(Graph& g, bool llvm) : g_(g), llvm_(llvm) {}

  void Run() {
    const size_t nv = g_.values.size();
    repl_.resize(nv);
    for (size_t v = 0; v < nv; ++v) repl_[v] = static_cast<int>(v);
    maker_.assign(nv, -1);
    known_.assign(nv, 0);
    splat_.assign(nv, 0.0);
    users_.assign(nv, 0);
    for (const Op& op : g_.ops)
      for (size_t i = 0; i < op.inputs.size(); ++i) {
        bool again = false;  // XLA counts users, not operand slots
        for (size_t j = 0; j < i; ++j) again = again || op.inputs[j] == op.inputs[i];
        if (!again) ++users_[static_cast<size_t>(op.inputs[i])];
      }
    for (int v : g_.outputs) ++users_[static_cast<size_t>(v)];
    std::vector<Op> in = std::move(g_.ops);
    g_.ops.clear();
    for (Op& op : in) {
      for (int& v : op.inputs) v = Resolve(v);
      Process(std::move(op));
    }
    for (int& v : g_.outputs) v = Resolve(v);
    RemoveDeadArithmetic();
  }

 private:
  int Resolve(int v) const {
    while (repl_[static_cast<size_t>(v)] != v) v = repl_[static_cast<size_t>(v)];
    return v;
  }
  bool Known(int v) const { return known_[static_cast<size_t>(v)] != 0; }
  double Splat(int v) const { return splat_[static_cast<size_t>(v)]; }
  bool KnownAs(int v, double x) const { return Known(v) && Splat(v) == x; }
  // The op making v if it is float arithmetic of kind k (a copy: the op list grows under a pointer).
  bool Made(int v, OpKind k, Op* out) const {
    const int m = maker_[static_cast<size_t>(v)];
    if (m < 0 || g_.ops[static_cast<size_t>(m)].kind != k) return false;
    *out = g_.ops[static_cast<size_t>(m)];
    return true;
  }

  int NewValue(DType dtype, std::vector<int64_t> shape) {
    const int v = g_.AddValue(dtype, std::move(shape));
    repl_.push_back(v);
    maker_.push_back(-1);
    known_.push_back(0);
    splat_.push_back(0.0);
    users_.push_back(1);
    return v;
  }

  // A new arithmetic op on values of `like`'s type, itself simplified; returns the value standing for it.
  int Emit(OpKind kind, std::vector<int> inputs, int like, const std::string& location) {
    Op op;
    op.kind = kind;
    op.inputs = std::move(inputs);
    op.outputs = {NewValue(g_.type(like).dtype, g_.type(like).shape)};
    op.location = location;
    const int v = op.outputs[0];
    Process(std::move(op));
    return Resolve(v);
  }

  void Push(Op op) {
    for (int v : op.outputs) maker_[static_cast<size_t>(v)] = static_cast<int>(g_.ops.size());
    // Splats seen through the ops that only place them (a constant broadcast to a shape).
    if (op.outputs.size() == 1 && IsF32OrF64(g_.type(op.outputs[0]).dtype)) {
      const int out = op.outputs[0];
      const DType d = g_.type(out).dtype;
      if (op.kind == OpKind::kConstant) {
        const std::vector<uint8_t>& data = op.Attrs<ConstantAttrs>().data;
        const size_t width = d == DType::kF32 ? 4 : 8;
        bool splat = !data.empty() && data.size() % width == 0;
        for (size_t i = width; splat && i < data.size(); ++i) splat = data[i] == data[i % width];
        if (splat) {
          float f = 0;
          double x = 0;
          if (width == 4) std::memcpy(&f, data.data(), 4), x = f;
          if (width == 8) std::memcpy(&x, data.data(), 8);
          known_[static_cast<size_t>(out)] = 1;
          splat_[static_cast<size_t>(out)] = x;
        }
      } else if ((op.kind == OpKind::kBroadcast || op.kind == OpKind::kReshape) && op.inputs.size() == 1 &&
                 Known(op.inputs[0]) && g_.type(op.inputs[0]).dtype == d) {
        known_[static_cast<size_t>(out)] = 1;
        splat_[static_cast<size_t>(out)] = Splat(op.inputs[0]);
      }
    }
    g_.ops.push_back(std::move(op));
  }

  // `value`, folded, as a constant of v's type (one element, broadcast as the lowering places splats).
  void ReplaceWithConstant(int v, double value, const std::string& location) {
    const TensorType t = g_.type(v);
    Op c;
    c.kind = OpKind::kConstant;
    c.location = location;
    std::vector<uint8_t> bytes(t.dtype == DType::kF32 ? 4 : 8);
    const float f = static_cast<float>(value);
    if (t.dtype == DType::kF32) std::memcpy(bytes.data(), &f, 4);
    if (t.dtype == DType::kF64) std::memcpy(bytes.data(), &value, 8);
    c.attrs = ConstantAttrs{std::move(bytes)};
    int x = NewValue(t.dtype, std::vector<int64_t>(t.shape.size(), 1));
    c.outputs = {x};
    Push(std::move(c));
    if (t.NumElements() != 1) {
      Op b;
      b.kind = OpKind::kBroadcast;
      b.inputs = {x};
      b.location = location;
      x = NewValue(t.dtype, t.shape);
      b.outputs = {x};
      Push(std::move(b));
    }
    repl_[static_cast<size_t>(v)] = x;
  }

  enum class Step { kKeep, kChanged, kReplaced };

  void Process(Op op) {
    if (!IsArithmetic(op.kind) || op.outputs.size() != 1 || !IsF32OrF64(g_.type(op.outputs[0]).dtype) ||
        op.inputs.size() != (op.kind == OpKind::kNegative ? 1u : 2u)) {
      Push(std::move(op));
      return;
    }
    const int out = op.outputs[0];
    for (int guard = 0; guard < 32; ++guard) {  // each step removes an op or moves constants outward
      bool all_known = true;
      for (int v : op.inputs) all_known = all_known && Known(v);
      if (all_known) {
        const double a = Splat(op.inputs[0]), b = op.inputs.size() > 1 ? Splat(op.inputs[1]) : 0.0;
        const double r = g_.type(out).dtype == DType::kF32 ? Fold<float>(op.kind, a, b) : Fold<double>(op.kind, a, b);
        ReplaceWithConstant(out, r, op.location);
        return;
      }
      const Step s = llvm_ ? LlvmStep(op) : XlaStep(op);
      if (s == Step::kReplaced) return;
      if (s == Step::kKeep) break;
    }
    // Equal ops are one (XLA's CSE), an add or a multiply whatever its operands' order: which products
    // an add reads alone depends on it.
    std::vector<int> key = op.inputs;
    if ((op.kind == OpKind::kAdd || op.kind == OpKind::kMultiply) && key.size() == 2 && key[1] < key[0])
      std::swap(key[0], key[1]);
    auto [seen, fresh] = computed_.try_emplace({op.kind, key}, out);
    if (!fresh) {
      Replace(op, seen->second);
      return;
    }
    Push(std::move(op));
  }

  Step Replace(const Op& op, int by) {
    repl_[static_cast<size_t>(op.outputs[0])] = by;
    users_[static_cast<size_t>(by)] += users_[static_cast<size_t>(op.outputs[0])];
    return Step::kReplaced;
  }

  // XLA's algebraic simplifier on float arithmetic: the rewrites that change a rounding or which
  // product an add reads (A*2 + B*2 => (A+B)*2 only moves an exponent, but the sum is then read by a
  // multiply).
  Step XlaStep(Op& op) {
    std::vector<int>& in = op.inputs;
    const std::string& loc = op.location;
    // Only the four arithmetic kinds reach here (IsArithmetic); any other keeps its form.
    if (op.kind == OpKind::kNegative) {
      Op n;
      if (Made(in[0], OpKind::kNegative, &n)) return Replace(op, n.inputs[0]);
      return Step::kKeep;
    }
    if (op.kind == OpKind::kAdd) {
      if (KnownAs(in[1], 0.0)) return Replace(op, in[0]);  // A + 0 => A (either zero)
      if (KnownAs(in[0], 0.0)) return Replace(op, in[1]);
      // A*C + B*C => (A+B)*C for C a power of two, when the products have no other user.
      Op l, r;
      if (Made(in[0], OpKind::kMultiply, &l) && Made(in[1], OpKind::kMultiply, &r) &&
          users_[static_cast<size_t>(in[0])] == 1 && users_[static_cast<size_t>(in[1])] == 1 && in[0] != in[1])
        for (int j : {1, 0}) {
          const int c = l.inputs[static_cast<size_t>(j)];
          if (!Known(c) || !PowerOfTwo(Splat(c))) continue;
          for (int k : {0, 1}) {
            const int d = r.inputs[static_cast<size_t>(k)];
            if (!(d == c || (Known(d) && SameConstant(Splat(d), Splat(c))))) continue;
            const int sum =
                Emit(OpKind::kAdd, {l.inputs[static_cast<size_t>(1 - j)], r.inputs[static_cast<size_t>(1 - k)]},
                     op.outputs[0], loc);
            op.kind = OpKind::kMultiply;
            in = {sum, c};
            return Step::kChanged;
          }
        }
      return Step::kKeep;
    }
    if (op.kind == OpKind::kSubtract) {
      if (KnownAs(in[1], 0.0)) return Replace(op, in[0]);  // A - 0 => A
      if (Known(in[1]) && !Known(in[0])) {                 // A - C => A + (-C)
        const int c = Emit(OpKind::kNegative, {in[1]}, in[1], loc);
        op.kind = OpKind::kAdd;
        in = {in[0], c};
        return Step::kChanged;
      }
      return Step::kKeep;
    }
    if (op.kind == OpKind::kMultiply) {
      if (KnownAs(in[1], 1.0)) return Replace(op, in[0]);
      if (KnownAs(in[0], 1.0)) return Replace(op, in[1]);
      Op na, nb;
      if (Made(in[0], OpKind::kNegative, &na) && Made(in[1], OpKind::kNegative, &nb)) {
        in = {na.inputs[0], nb.inputs[0]};  // (-A) * (-B) => A * B
        return Step::kChanged;
      }
      return Step::kKeep;
    }
    return Step::kKeep;
  }

  // LLVM's instruction combiner: exact rewrites that put a negated product where an add reads it.
  Step LlvmStep(Op& op) {
    std::vector<int>& in = op.inputs;
    Op n;
    if (op.kind == OpKind::kNegative) {
      if (Made(in[0], OpKind::kNegative, &n)) return Replace(op, n.inputs[0]);  // -(-X) => X
      if (Made(in[0], OpKind::kMultiply, &n))
        for (int j = 0; j < 2; ++j)
          if (Known(n.inputs[static_cast<size_t>(1 - j)])) {  // -(X * C) => X * -C
            const int c = Emit(OpKind::kNegative, {n.inputs[static_cast<size_t>(1 - j)]}, in[0], op.location);
            op.kind = OpKind::kMultiply;
            in = {n.inputs[static_cast<size_t>(j)], c};
            return Step::kChanged;
          }
      return Step::kKeep;
    }
    if (op.kind == OpKind::kMultiply) {
      if (KnownAs(in[1], 1.0)) return Replace(op, in[0]);
      if (KnownAs(in[0], 1.0)) return Replace(op, in[1]);
      for (int j = 0; j < 2; ++j)  // (-X) * C => X * -C
        if (Known(in[static_cast<size_t>(1 - j)]) && Made(in[static_cast<size_t>(j)], OpKind::kNegative, &n)) {
          const int c = Emit(OpKind::kNegative, {in[static_cast<size_t>(1 - j)]}, op.outputs[0], op.location);
          in = {n.inputs[0], c};
          return Step::kChanged;
        }
      for (int j = 0; j < 2; ++j)
        if (KnownAs(in[static_cast<size_t>(1 - j)], -1.0)) {  // X * -1 => -X
          op.kind = OpKind::kNegative;
          in = {in[static_cast<size_t>(j)]};
          return Step::kChanged;
        }
      return Step::kKeep;
    }
    if (op.kind == OpKind::kAdd) {
      for (int j = 0; j < 2; ++j)
        if (Made(in[static_cast<size_t>(j)], OpKind::kNegative, &n)) {  // -X + Y => Y - X
          op.kind = OpKind::kSubtract;
          in = {in[static_cast<size_t>(1 - j)], n.inputs[0]};
          return Step::kChanged;
        }
      return Step::kKeep;
    }
    if (op.kind == OpKind::kSubtract) {
      if (Made(in[1], OpKind::kNegative, &n)) {  // X - (-Y) => X + Y
        op.kind = OpKind::kAdd;
        in = {in[0], n.inputs[0]};
        return Step::kChanged;
      }
      if (Made(in[0], OpKind::kNegative, &n)) {  // (-X) - Y => -(X + Y)
        const int sum = Emit(OpKind::kAdd, {n.inputs[0], in[1]}, op.outputs[0], op.location);
        op.kind = OpKind::kNegative;
        in = {sum};
        return Step::kChanged;
      }
      return Step::kKeep;
    }
    return Step::kKeep;
  }

  // Arithmetic (and the constants placed for it) that no op or result reads any more.
  void RemoveDeadArithmetic() {
    std::vector<int> reads(g_.values.size(), 0);
    for (int v : g_.outputs) ++reads[static_cast<size_t>(v)];
    for (const Op& op : g_.ops)
      for (int v : op.inputs) ++reads[static_cast<size_t>(v)];
    std::vector<uint8_t> dead(g_.ops.size(), 0);
    for (size_t i = g_.ops.size(); i-- > 0;) {
      const Op& op = g_.ops[i];
      const bool removable = (IsArithmetic(op.kind) || op.kind == OpKind::kConstant || op.kind == OpKind::kBroadcast ||
                              op.kind == OpKind::kReshape) &&
                             op.outputs.size() == 1 && IsF32OrF64(g_.type(op.outputs[0]).dtype) &&
                             reads[static_cast<size_t>(op.outputs[0])] == 0;
      if (!removable) continue;
      dead[i] = 1;
      for (int v : op.inputs) --reads[static_cast<size_t>(v)];
    }
    std::vector<Op> live;
    live.reserve(g_.ops.size());
    for (size_t i = 0; i < g_.ops.size(); ++i)
      if (!dead[i]) live.push_back(std::move(g_.ops[i]));
    g_.ops = std::move(live);
  }

  Graph& g_;
  const bool llvm_;
  std::vector<int> repl_;       // per value: the value standing for it now (itself if none)
  std::vector<int> maker_;      // per value: the index of its op in the rewritten graph, -1 for none
  std::vector<uint8_t> known_;  // per value: a float splat constant
  std::vector<double> splat_;   // its element
  std::vector<int> users_;      // per value: its users as XLA counts them (distinct ops, a result once)
  std::map<std::pair<OpKind, std::vector<int>>, int> computed_;  // arithmetic by kind and operands
};

}  // namespace

void SimplifyFloatArithmetic(Graph& graph) {
  bool any = false;
  for (const Op& op : graph.ops)
    any = any || (IsArithmetic(op.kind) && op.outputs.size() == 1 && IsF32OrF64(graph.type(op.outputs[0]).dtype));
  if (!any) return;
  Rewriter(graph, /*llvm=*/false).Run();
  Rewriter(graph, /*llvm=*/true).Run();
}

}  // namespace jmp::mps

// LowerContext's emitting helpers: ops added to the current graph, with the small rewrites that keep
// the graph lean (composed reshapes and transposes, constant slices, known splats).
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "lower/lower_context.h"

namespace jmp::mps {

Op LowerContext::NewOp(OpKind kind, std::vector<int> inputs) const {
  Op op;
  op.kind = kind;
  op.inputs = std::move(inputs);
  if (op_) op.location = op_->location;
  return op;
}

std::vector<int> LowerContext::EmitOp(Op op, const std::vector<TensorType>& outputs) {
  if (std::vector<int> folded; FoldEmpty(op, outputs, &folded)) return folded;
  Graph& g = graph();
  op.outputs.clear();
  for (const TensorType& t : outputs) op.outputs.push_back(g.AddValue(t.dtype, t.shape));
  std::vector<int> ids = op.outputs;
  g.ops.push_back(std::move(op));
  return ids;
}

int LowerContext::OneSource(int v) {
  auto it = one_source_.find({&graph(), v});
  return it == one_source_.end() ? -1 : it->second;
}

int LowerContext::Unary(OpKind kind, int x) {
  TensorType t = Type(x);
  if (int s = OneSource(x); s >= 0) return BroadcastTo(Emit(kind, {s}, t.dtype, ShapeOf(s)), t.shape);
  return Emit(kind, {x}, t.dtype, t.shape);
}

int LowerContext::Binary(OpKind kind, int a, int b) {
  TensorType t = Type(a);
  int sa = OneSource(a), sb = OneSource(b);
  if (sa >= 0 && sb >= 0 && ShapeOf(sa) == ShapeOf(sb))
    return BroadcastTo(Emit(kind, {sa, sb}, t.dtype, ShapeOf(sa)), t.shape);
  return Emit(kind, {a, b}, t.dtype, t.shape);
}

int LowerContext::Compare(OpKind kind, int a, int b) {
  Shape shape = ShapeOf(a);
  int sa = OneSource(a), sb = OneSource(b);
  if (sa >= 0 && sb >= 0 && ShapeOf(sa) == ShapeOf(sb))
    return BroadcastTo(Emit(kind, {sa, sb}, DType::kBool, ShapeOf(sa)), shape);
  return Emit(kind, {a, b}, DType::kBool, shape);
}

int LowerContext::Select(int pred, int on_true, int on_false) {
  TensorType t = Type(on_true);
  int sp = ShapeOf(pred) == t.shape ? OneSource(pred) : -1, st = OneSource(on_true), sf = OneSource(on_false);
  if (sp >= 0 && st >= 0 && sf >= 0 && ShapeOf(sp) == ShapeOf(st) && ShapeOf(st) == ShapeOf(sf))
    return BroadcastTo(Emit(OpKind::kSelect, {sp, st, sf}, t.dtype, ShapeOf(st)), t.shape);
  // A splat predicate stays one element (the op takes it so): one copy of the chosen operand.
  if (sp >= 0) pred = sp;
  if (ShapeOf(pred) != t.shape && Type(pred).NumElements() != 1) pred = BroadcastTo(pred, t.shape);
  return Emit(OpKind::kSelect, {pred, on_true, on_false}, t.dtype, t.shape);
}

int LowerContext::Cast(int x, DType to) {
  if (DTypeOf(x) == to) return x;
  Shape shape = ShapeOf(x);
  if (int s = OneSource(x); s >= 0) return BroadcastTo(Emit(OpKind::kCast, {s}, to, ShapeOf(s)), shape);
  return Emit(OpKind::kCast, {x}, to, shape);
}

int LowerContext::Reinterpret(int x, DType to) {
  if (DTypeOf(x) == to) return x;
  Shape shape = ShapeOf(x);
  if (int s = OneSource(x); s >= 0) return BroadcastTo(Emit(OpKind::kReinterpretCast, {s}, to, ShapeOf(s)), shape);
  return Emit(OpKind::kReinterpretCast, {x}, to, shape);
}

int LowerContext::Reshape(int x, Shape shape) {
  if (ShapeOf(x) == shape) return x;
  int64_t n = 1;
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) n = -1;
  if (n != Type(x).NumElements()) {
    Fail(Unsupported("reshape changes the number of elements"));
    return x;
  }
  double splat;
  bool known = KnownSplat(x, &splat);
  DType dtype = DTypeOf(x);
  int y = Emit(OpKind::kReshape, {x}, dtype, std::move(shape));
  if (known) splats_[{&graph(), y}] = splat;
  return y;
}

int LowerContext::Transpose(int x, const std::vector<int64_t>& perm) {
  Shape in_shape = ShapeOf(x);
  std::vector<bool> seen(in_shape.size(), false);
  bool valid = perm.size() == in_shape.size();
  for (int64_t p : perm) {
    valid &= p >= 0 && p < static_cast<int64_t>(in_shape.size()) && !seen[static_cast<size_t>(p)];
    if (valid) seen[static_cast<size_t>(p)] = true;
  }
  if (!valid) {
    Fail(Unsupported("invalid permutation"));
    return x;
  }
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity &= perm[i] == static_cast<int64_t>(i);
  if (identity) return x;
  // A transpose of a transpose is one transpose of the first one's operand: one pass over the data
  // instead of two (attention's head split followed by a key transpose, and their gradients).
  if (auto it = transpose_of_.find({&graph(), x}); it != transpose_of_.end()) {
    std::vector<int64_t> composed;
    for (int64_t p : perm) composed.push_back(it->second.second[static_cast<size_t>(p)]);
    return Transpose(it->second.first, composed);
  }
  // The same transpose of the same value is made once (composition above makes such twins).
  for (const auto& [key, made] : transpose_of_)
    if (key.first == &graph() && made.first == x && made.second == perm) return key.second;
  Shape in = ShapeOf(x), out;
  for (int64_t p : perm) out.push_back(in[static_cast<size_t>(p)]);
  int y = Emit(OpKind::kTranspose, {x}, DTypeOf(x), out, PermutationAttrs{perm});
  transpose_of_[{&graph(), y}] = {x, perm};
  return y;
}

int LowerContext::BroadcastTo(int x, Shape shape) {
  Shape in = ShapeOf(x);
  if (in == shape) return x;
  bool valid = in.size() <= shape.size();
  for (size_t i = 0; valid && i < in.size(); ++i) {
    int64_t o = shape[shape.size() - in.size() + i];
    valid = in[i] == o || in[i] == 1;
  }
  if (!valid) {
    Fail(Unsupported("incompatible broadcast"));
    return x;
  }
  if (in.size() < shape.size()) {
    Shape padded(shape.size() - in.size(), 1);
    padded.insert(padded.end(), in.begin(), in.end());
    x = Reshape(x, padded);
    if (padded == shape) return x;
  }
  double splat;
  bool known = KnownSplat(x, &splat);
  int y = Emit(OpKind::kBroadcast, {x}, DTypeOf(x), shape);
  if (known) splats_[{&graph(), y}] = splat;
  if (Type(x).NumElements() == 1) one_source_[{&graph(), y}] = x;
  return y;
}

int LowerContext::Slice(int x, Shape starts, Shape ends, Shape strides) {
  Shape in = ShapeOf(x);
  if (strides.empty()) strides.assign(in.size(), 1);
  bool valid = starts.size() == in.size() && ends.size() == in.size() && strides.size() == in.size();
  for (size_t i = 0; valid && i < in.size(); ++i)
    valid = strides[i] > 0 && starts[i] >= 0 && ends[i] <= in[i] && starts[i] <= ends[i];
  if (!valid) {
    Fail(Unsupported("slice out of bounds"));
    return x;
  }
  Shape out(in.size());
  bool whole = true;
  for (size_t i = 0; i < in.size(); ++i) {
    out[i] = ends[i] <= starts[i] ? 0 : (ends[i] - starts[i] + strides[i] - 1) / strides[i];
    whole &= starts[i] == 0 && ends[i] == in[i] && strides[i] == 1;
  }
  if (whole) return x;
  // One element of a constant (threefry's rotation amounts) is a known scalar: later ops see a splat
  // (a shift by it needs no range check).
  const Op* constant = ConstantOp(&graph(), x);
  if (constant && !IsComplex(DTypeOf(x)) && !out.empty()) {
    int64_t count = 1;
    for (int64_t d : out) count *= d;
    if (count == 1) {
      Shape in_strides(in.size(), 1);
      for (size_t i = in.size(); i-- > 1;) in_strides[i - 1] = in_strides[i] * in[i];
      int64_t offset = 0;
      for (size_t i = 0; i < in.size(); ++i) offset += starts[i] * in_strides[i];
      size_t width = ByteSize(DTypeOf(x));
      const std::vector<uint8_t>& data = constant->Attrs<ConstantAttrs>().data;
      std::vector<uint8_t> one(data.begin() + offset * static_cast<int64_t>(width),
                               data.begin() + (offset + 1) * static_cast<int64_t>(width));
      double value = DecodeScalar(DTypeOf(x), one.data());
      int y = Reshape(ConstantData(DTypeOf(x), {}, std::move(one)), out);
      splats_[{&graph(), y}] = value;
      return y;
    }
  }
  return Emit(OpKind::kSlice, {x}, DTypeOf(x), out, SliceAttrs{std::move(starts), std::move(ends), std::move(strides)});
}

int LowerContext::Int32Constant(Shape shape, const std::vector<int32_t>& values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(int32_t));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return ConstantData(DType::kI32, std::move(shape), std::move(bytes));
}

int LowerContext::Iota(Shape shape, int64_t axis) {
  return Emit(OpKind::kCoordinateAlongAxis, {}, DType::kI32, std::move(shape), AxisAttrs{axis});
}

int LowerContext::Scalar(DType dtype, double value) {
  int v = ConstantData(dtype, {}, EncodeScalar(dtype, value));
  splats_[{&graph(), v}] = value;
  return v;
}

int LowerContext::ScalarBits(DType dtype, uint64_t bits) { return ConstantData(dtype, {}, EncodeBits(dtype, bits)); }

int LowerContext::ConstantData(DType dtype, Shape shape, std::vector<uint8_t> data) {
  Op op = NewOp(OpKind::kConstant, {});
  op.attrs = ConstantAttrs{std::move(data)};  // the bytes move, never copied
  int v = EmitOp(std::move(op), {TensorType{dtype, std::move(shape)}})[0];
  constant_at_[{&graph(), v}] = graph().ops.size() - 1;
  return v;
}

void LowerContext::RecordSplat(int v, double value) { splats_[{&graph(), v}] = value; }

const Op* LowerContext::ConstantOp(const Graph* g, int v) const {
  auto c = constant_at_.find({g, v});
  if (c == constant_at_.end() || c->second >= g->ops.size()) return nullptr;
  const Op& op = g->ops[c->second];  // later passes may have moved or replaced it
  return op.kind == OpKind::kConstant && op.outputs.size() == 1 && op.outputs[0] == v ? &op : nullptr;
}

StatusOr<std::vector<int64_t>> LowerContext::IntsAttr(const std::string& name) const {
  const shlo::Attr* a = op_->Find(name);
  if (!a) return Unsupported("missing attribute " + name);
  if (a->kind == shlo::Attr::Kind::kInts) return a->ints;
  if (a->kind == shlo::Attr::Kind::kInt) return std::vector<int64_t>{a->i};
  return Unsupported("attribute " + name + " is not a list of integers");
}

StatusOr<int64_t> LowerContext::IntAttr(const std::string& name) const {
  const shlo::Attr* a = op_->Find(name);
  if (!a) return Unsupported("missing attribute " + name);
  if (a->kind == shlo::Attr::Kind::kInt || a->kind == shlo::Attr::Kind::kEnum) return a->i;
  if (a->kind == shlo::Attr::Kind::kInts && a->ints.size() == 1) return a->ints[0];
  return Unsupported("attribute " + name + " is not an integer");
}

bool LowerContext::KnownSplat(int v, double* value) {
  auto it = splats_.find({&graph(), v});
  if (it == splats_.end()) return false;
  *value = it->second;
  return true;
}

bool LowerContext::IsIotaAlong(int v, int64_t axis) {
  auto it = iota_axis_.find({&graph(), v});
  return it != iota_axis_.end() && it->second == axis;
}

}  // namespace jmp::mps

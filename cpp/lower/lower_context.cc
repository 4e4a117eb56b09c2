#include "lower/lower_context.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

#include "support/float16.h"

namespace jmp::mps {

namespace {

constexpr int kMaxInlineDepth = 64;
// Constants up to this size are copied into a region that reads them (scalars, a few lanes of shifts).
constexpr size_t kCopiedConstantBytes = 64;

template <typename T>
std::vector<uint8_t> Bytes(T v) {
  std::vector<uint8_t> out(sizeof(T));
  std::memcpy(out.data(), &v, sizeof(T));
  return out;
}

// Saturating double -> integer (a NaN becomes 0), so no out-of-range conversion is UB.
template <typename T>
T SaturateTo(double v) {
  if (std::isnan(v)) return 0;
  if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
  if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return static_cast<T>(v);
}

}  // namespace

std::vector<uint8_t> EncodeScalar(DType dtype, double v) {
  switch (dtype) {
    case DType::kBool: return {static_cast<uint8_t>(v != 0)};
    case DType::kI8: return Bytes(SaturateTo<int8_t>(v));
    case DType::kI16: return Bytes(SaturateTo<int16_t>(v));
    case DType::kI32: return Bytes(SaturateTo<int32_t>(v));
    case DType::kI64: return Bytes(SaturateTo<int64_t>(v));
    case DType::kU8: return Bytes(SaturateTo<uint8_t>(v));
    case DType::kU16: return Bytes(SaturateTo<uint16_t>(v));
    case DType::kU32: return Bytes(SaturateTo<uint32_t>(v));
    case DType::kU64: return Bytes(SaturateTo<uint64_t>(v));
    case DType::kF16: return Bytes(FloatToHalf(static_cast<float>(v)));
    case DType::kBF16: return Bytes(FloatToBFloat16(static_cast<float>(v)));
    case DType::kF32: return Bytes(static_cast<float>(v));
    case DType::kF64: return Bytes(v);
    case DType::kC64: {
      float parts[2] = {static_cast<float>(v), 0.0f};
      std::vector<uint8_t> out(8);
      std::memcpy(out.data(), parts, 8);
      return out;
    }
    case DType::kC128: {
      double parts[2] = {v, 0.0};
      std::vector<uint8_t> out(16);
      std::memcpy(out.data(), parts, 16);
      return out;
    }
    // Narrow types never reach the lowering proper (stablehlo/passes/narrow_types.cc rewrites them to their storage).
    case DType::kI4:
    case DType::kI2:
      return Bytes(static_cast<int8_t>(std::clamp(SaturateTo<int8_t>(v), static_cast<int8_t>(SubByteMin(dtype)),
                                                  static_cast<int8_t>(SubByteMax(dtype)))));
    case DType::kU4:
    case DType::kU2:
      return Bytes(static_cast<uint8_t>(std::min(SaturateTo<uint8_t>(v), static_cast<uint8_t>(SubByteMax(dtype)))));
    JMP_NARROW_FLOAT_CASES:
      return Bytes(uint8_t{0x7f});  // unused: no narrow scalar reaches the lowering proper
  }
  return {};
}

double DecodeScalar(DType dtype, const uint8_t* p) {
  auto load = [p](auto v) {
    std::memcpy(&v, p, sizeof(v));
    return v;
  };
  switch (dtype) {
    case DType::kBool: return p[0] != 0;
    case DType::kI8: return load(int8_t{});
    case DType::kI16: return load(int16_t{});
    case DType::kI32: return load(int32_t{});
    case DType::kI64: return static_cast<double>(load(int64_t{}));
    case DType::kU8: return load(uint8_t{});
    case DType::kU16: return load(uint16_t{});
    case DType::kU32: return load(uint32_t{});
    case DType::kU64: return static_cast<double>(load(uint64_t{}));
    case DType::kF16: return HalfToFloat(load(uint16_t{}));
    case DType::kBF16: return BFloat16ToFloat(load(uint16_t{}));
    case DType::kF32: return load(float{});
    case DType::kF64: return load(double{});
    case DType::kC64: return load(float{});  // real part; only identity checks use this
    case DType::kC128: return load(double{});
    case DType::kI4:
    case DType::kI2: return load(int8_t{});
    case DType::kU4:
    case DType::kU2:
      return load(uint8_t{});
    JMP_NARROW_FLOAT_CASES:
      return std::numeric_limits<double>::quiet_NaN();  // not decoded here (stablehlo/passes/narrow_types.cc)
  }
  return 0;
}

std::vector<uint8_t> EncodeBits(DType dtype, uint64_t bits) {
  std::vector<uint8_t> out(ByteSize(dtype));
  for (size_t i = 0; i < out.size() && i < 8; ++i) out[i] = static_cast<uint8_t>(bits >> (8 * i));
  return out;
}

// Integers' bounds from their bits (exact in double up to 53 bits; int64's and uint64's round to the
// powers of two beyond them, as std::numeric_limits' do when converted), floats' the infinities.
double LowestValue(DType dtype) {
  switch (ClassOf(dtype)) {
    case DTypeClass::kBool:
    case DTypeClass::kUnsignedInt:
    case DTypeClass::kSubByteUnsigned: return 0;
    case DTypeClass::kSignedInt:
    case DTypeClass::kSubByteSigned: return -std::ldexp(1.0, BitWidth(dtype) - 1);
    case DTypeClass::kFloat:
    case DTypeClass::kComplex:
    case DTypeClass::kNarrowFloat: return -std::numeric_limits<double>::infinity();
  }
  return 0;
}

double HighestValue(DType dtype) {
  switch (ClassOf(dtype)) {
    case DTypeClass::kBool: return 1;
    case DTypeClass::kUnsignedInt:
    case DTypeClass::kSubByteUnsigned: return std::ldexp(1.0, BitWidth(dtype)) - 1;
    case DTypeClass::kSignedInt:
    case DTypeClass::kSubByteSigned: return std::ldexp(1.0, BitWidth(dtype) - 1) - 1;
    case DTypeClass::kFloat:
    case DTypeClass::kComplex:
    case DTypeClass::kNarrowFloat: return std::numeric_limits<double>::infinity();
  }
  return 0;
}

void RegisterRule(std::map<std::string, LowerRule>& rules, const char* name, LowerRule rule) { rules[name] = rule; }

// ---- scopes and values

StatusOr<int> LowerContext::LookupIn(Scope* s, int shlo_id) {
  JMP_ASSIGN_OR_RETURN(int v, LookupUnbroadcast(s, shlo_id));
  if (!s->broadcast_scalars || s->lanes.empty() || !s->graph->type(v).shape.empty()) return v;
  // A scalar read by a block lowered on lanes: broadcast once, in the block's graph, and remembered
  // (only in this scope: the parent keeps its scalar).
  Scope* outer = SwapScope(s);
  int lanes = BroadcastTo(v, s->lanes);
  SwapScope(outer);
  s->env[shlo_id] = lanes;
  return lanes;
}

StatusOr<int> LowerContext::LookupUnbroadcast(Scope* s, int shlo_id) {
  auto it = s->env.find(shlo_id);
  if (it != s->env.end()) return it->second;
  if (!s->parent) return InvalidArgument("value %" + std::to_string(shlo_id) + " is used before it is defined");
  JMP_ASSIGN_OR_RETURN(int outer, LookupIn(s->parent, shlo_id));
  if (s->shares_parent_graph) return outer;
  TensorType type = s->parent->graph->type(outer);
  // A small constant is copied into the region rather than captured: JAX's serializer hoists a loop
  // body's constants out of it, and a captured one is a parameter no executor can fold, so a loop
  // broadcast its scalar factors again on every iteration.
  int inner;
  const Op* constant = ConstantOp(s->parent->graph, outer);
  if (constant && type.ByteSize() <= kCopiedConstantBytes) {
    Scope* saved = SwapScope(s);
    inner = ConstantData(type.dtype, type.shape, constant->Attrs<ConstantAttrs>().data);
    SwapScope(saved);
  } else {
    inner = s->graph->AddValue(type.dtype, type.shape);
    s->graph->inputs.push_back(inner);
    s->captures.push_back({outer, inner});
  }
  s->env[shlo_id] = inner;
  auto splat = splats_.find({s->parent->graph, outer});
  if (splat != splats_.end()) splats_[{s->graph, inner}] = splat->second;
  return inner;
}

StatusOr<int> LowerContext::Value(int shlo_id) { return LookupIn(scope_, shlo_id); }

StatusOr<std::vector<int>> LowerContext::Values(const std::vector<int>& shlo_ids) {
  std::vector<int> values;
  values.reserve(shlo_ids.size());
  for (int id : shlo_ids) {
    JMP_ASSIGN_OR_RETURN(int v, Value(id));
    values.push_back(v);
  }
  return values;
}

const shlo::Type& LowerContext::ShloType(int shlo_id) const {
  return scope_->func->value_types.at(static_cast<size_t>(shlo_id));
}

void LowerContext::Bind(size_t result_index, int mps_value) { scope_->env[op_->results.at(result_index)] = mps_value; }

Status LowerContext::Unsupported(const std::string& what) const {
  std::ostringstream os;
  os << what;
  if (op_) {
    os << ": '" << op_->name << "'";
    if (!op_->operands.empty()) {
      os << " on ";
      for (size_t i = 0; i < op_->operands.size(); ++i) os << (i ? ", " : "") << ShloType(op_->operands[i]).ToString();
    }
    if (!op_->results.empty()) {
      os << " -> ";
      for (size_t i = 0; i < op_->results.size(); ++i) os << (i ? ", " : "") << ShloType(op_->results[i]).ToString();
    }
    if (!op_->location.empty()) os << " at " << op_->location;
  }
  return Unimplemented(os.str());
}

StatusOr<const shlo::Op*> LowerContext::LowerBlock(const shlo::Block& block) {
  for (const shlo::Op& op : block.ops) {
    if (op.name == "func.return" || op.name == "stablehlo.return") return &op;
    JMP_RETURN_IF_ERROR(LowerOp(op));
  }
  return InvalidArgument("a block ends without a terminator");
}

StatusOr<Graph> LowerContext::BuildSubgraph(const std::vector<TensorType>& params, const SubgraphBuilder& build,
                                            std::vector<int>* captures) {
  Graph sub;
  Scope s;
  s.graph = &sub;
  s.func = scope_->func;
  s.parent = scope_;
  std::vector<int> param_values;
  for (const TensorType& t : params) {
    int v = sub.AddValue(t.dtype, t.shape);
    sub.inputs.push_back(v);
    param_values.push_back(v);
  }
  const shlo::Op* saved_op = op_;
  Scope* outer = SwapScope(&s);
  StatusOr<std::vector<int>> outputs = build(param_values);
  SwapScope(outer);
  op_ = saved_op;
  ForgetFactsOf(&sub);
  if (!outputs.ok()) return outputs.status();
  sub.outputs = *outputs;
  captures->clear();
  for (auto& [outer_value, inner] : s.captures) captures->push_back(outer_value);
  return sub;
}

void LowerContext::ForgetFactsOf(const Graph* sub) {
  auto forget = [sub](auto& facts) {
    for (auto it = facts.begin(); it != facts.end();) it = it->first.first == sub ? facts.erase(it) : std::next(it);
  };
  forget(splats_);
  forget(iota_axis_);
  forget(one_source_);
  forget(constant_at_);
  forget(transpose_of_);
}

std::vector<int> UnionOf(const std::vector<int>& a, const std::vector<int>& b) {
  std::vector<int> u = a;
  for (int v : b)
    if (std::find(u.begin(), u.end(), v) == u.end()) u.push_back(v);
  return u;
}

void AlignCaptures(Graph& sub, size_t fixed, const std::vector<int>& own, const std::vector<int>& all,
                   const std::vector<TensorType>& all_types) {
  std::vector<int> inputs(sub.inputs.begin(), sub.inputs.begin() + static_cast<ptrdiff_t>(fixed));
  for (size_t i = 0; i < all.size(); ++i) {
    auto it = std::find(own.begin(), own.end(), all[i]);
    if (it != own.end()) {
      inputs.push_back(sub.inputs[fixed + static_cast<size_t>(it - own.begin())]);
    } else {
      inputs.push_back(sub.AddValue(all_types[i].dtype, all_types[i].shape));
    }
  }
  sub.inputs = std::move(inputs);
}

std::vector<int> EmitWhile(LowerContext& cx, const std::vector<int>& init, Graph cond,
                           const std::vector<int>& cond_caps, Graph body, const std::vector<int>& body_caps) {
  const std::vector<int> caps = UnionOf(cond_caps, body_caps);
  std::vector<TensorType> cap_types;
  for (int v : caps) cap_types.push_back(cx.Type(v));
  AlignCaptures(cond, init.size(), cond_caps, caps, cap_types);
  AlignCaptures(body, init.size(), body_caps, caps, cap_types);
  for (size_t i = 0; i < caps.size(); ++i) body.outputs.push_back(body.inputs[init.size() + i]);
  std::vector<int> inputs = init;
  inputs.insert(inputs.end(), caps.begin(), caps.end());
  std::vector<TensorType> out_types;
  for (int v : inputs) out_types.push_back(cx.Type(v));
  Op w = cx.NewOp(OpKind::kWhile, inputs);
  w.subgraphs.push_back(std::move(cond));
  w.subgraphs.push_back(std::move(body));
  std::vector<int> outputs = cx.EmitOp(std::move(w), out_types);
  outputs.resize(init.size());
  return outputs;
}

StatusOr<Graph> LowerContext::LowerRegionToSubgraph(const shlo::Region& region, const std::vector<TensorType>& params,
                                                    std::vector<int>* captures) {
  if (region.blocks.size() != 1) return Unsupported("regions with several blocks are not supported");
  const shlo::Block& block = region.blocks[0];
  if (block.args.size() != params.size())
    return InvalidArgument("region has " + std::to_string(block.args.size()) + " arguments, expected " +
                           std::to_string(params.size()));
  return BuildSubgraph(
      params,
      [&](const std::vector<int>& values) -> StatusOr<std::vector<int>> {
        for (size_t i = 0; i < values.size(); ++i) BindShlo(block.args[i], values[i]);
        JMP_ASSIGN_OR_RETURN(const shlo::Op* terminator, LowerBlock(block));
        return Values(terminator->operands);
      },
      captures);
}

StatusOr<std::vector<int>> LowerContext::LowerBlockInline(const shlo::Block& block, const std::vector<int>& args) {
  if (block.args.size() != args.size()) return InvalidArgument("inline block takes a different number of arguments");
  Scope s;
  s.graph = scope_->graph;
  s.func = scope_->func;
  s.parent = scope_;
  s.shares_parent_graph = true;
  s.broadcast_scalars = true;
  for (size_t i = 0; i < args.size(); ++i) {
    const Shape& shape = ShapeOf(args[i]);
    if (i == 0)
      s.lanes = shape;
    else if (shape != s.lanes)
      return InvalidArgument("inline block arguments of different shapes");
    s.env[block.args[i]] = args[i];
  }
  const shlo::Op* saved_op = op_;
  Scope* outer = SwapScope(&s);
  StatusOr<const shlo::Op*> terminator = LowerBlock(block);
  StatusOr<std::vector<int>> results = terminator.status();
  if (terminator.ok()) results = Values((*terminator)->operands);
  SwapScope(outer);
  op_ = saved_op;
  return results;
}

StatusOr<std::vector<int>> LowerContext::InlineCall(const shlo::Func& callee, const std::vector<int>& args) {
  if (inline_depth_ >= kMaxInlineDepth) return Unsupported("calls nest too deeply (recursion?)");
  if (callee.body.blocks.size() != 1) return Unsupported("functions with several blocks are not supported");
  const shlo::Block& block = callee.body.blocks[0];
  if (block.args.size() != args.size())
    return InvalidArgument("call to @" + callee.name + " passes " + std::to_string(args.size()) +
                           " arguments, it takes " + std::to_string(block.args.size()));
  Scope s;
  s.graph = scope_->graph;
  s.func = &callee;
  for (size_t i = 0; i < args.size(); ++i) s.env[block.args[i]] = args[i];
  const shlo::Op* saved_op = op_;
  Scope* outer = SwapScope(&s);
  ++inline_depth_;
  StatusOr<const shlo::Op*> terminator = LowerBlock(block);
  StatusOr<std::vector<int>> results = terminator.status();
  if (terminator.ok()) {
    op_ = *terminator;
    results = Values((*terminator)->operands);
  }
  --inline_depth_;
  SwapScope(outer);
  op_ = saved_op;
  return results;
}

Status LowerContext::LowerOp(const shlo::Op& op) {
  op_ = &op;
  for (const auto* ids : {&op.operands, &op.results}) {
    for (int id : *ids) {
      const shlo::Type& t = ShloType(id);
      if (t.kind == shlo::Type::Kind::kTuple) return Unsupported("tuple values are not supported");
    }
  }
  const auto& rules = LowerRules();
  // "composite:" and "custom_call:" keys are reached only through their ops' own rules; an op whose
  // (untrusted) name looks like one must not reach them directly.
  auto it = op.name.find(':') == std::string::npos ? rules.find(op.name) : rules.end();
  if (it == rules.end()) return Unsupported("unsupported op");
  Status status = it->second(*this);
  op_ = &op;
  if (status.ok() && !failure_.ok()) {
    status = failure_;
    failure_ = Status::Ok();
  }
  return status;
}

// ---- emitting

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

// The lowering's working state and the small vocabulary every op family's lowering is written in:
// scopes that map StableHLO values to MPS values (regions capture outer values as extra subgraph
// parameters), and one helper per MPS op idiom (constants, broadcasts, casts, ...).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lower/lower.h"
#include "mps/graph.h"
#include "mps/op_attrs.h"
#include "stablehlo/ir.h"
#include "support/dtype.h"
#include "support/status.h"

namespace jmp::mps {

using Shape = std::vector<int64_t>;

// Where values live while one graph (the executable's or a While/If subgraph) is being built.
struct Scope {
  Graph* graph = nullptr;
  const shlo::Func* func = nullptr;           // whose value ids env maps
  std::map<int, int> env;                     // StableHLO value id -> MPS value id in graph
  Scope* parent = nullptr;                    // a region's enclosing scope: values found there are captured
  std::vector<std::pair<int, int>> captures;  // (parent MPS value, our parameter), in capture order
  bool shares_parent_graph = false;           // a block lowered inline: parent values are used directly
  // A block lowered inline on tensors (its scalar ops applied elementwise): every value it reads is
  // one scalar per lane, so a rank-0 value (a constant of the block, or one captured from outside:
  // JAX's serializer hoists region constants out) is broadcast to `lanes` where it is read.
  bool broadcast_scalars = false;
  Shape lanes;
};

class LowerContext {
 public:
  explicit LowerContext(const shlo::Module& module, Partitioning partitioning = {})
      : module_(module), partitioning_(partitioning) {}

  const shlo::Module& module() const { return module_; }
  // The devices the program is compiled for.
  const Partitioning& partitioning() const { return partitioning_; }
  // While a manual computation's body is lowered once per device (lower_manual_unroll.cc): the device (its
  // partition id) of the copy being lowered and how many copies there are; -1 and 0 elsewhere.
  int64_t manual_device() const { return manual_device_; }
  int64_t manual_copies() const { return manual_copies_; }
  void SetManual(int64_t device, int64_t copies) {
    manual_device_ = device;
    manual_copies_ = copies;
  }
  // Makes `op` the op being lowered (In, OutType, Bind and errors refer to it) without lowering it: for
  // lowerings that handle one StableHLO op in several scopes.
  void SetOp(const shlo::Op& op) { op_ = &op; }
  Scope& scope() { return *scope_; }
  Graph& graph() { return *scope_->graph; }

  // Lowers every op of a block into the current scope (stops at, and returns, its terminator).
  StatusOr<const shlo::Op*> LowerBlock(const shlo::Block& block);
  // Lowers a region into a fresh subgraph whose parameters are `params` (types) followed by one per
  // captured outer value; the terminator's operands become its outputs. `captures` receives the outer
  // MPS values captured, in parameter order.
  StatusOr<Graph> LowerRegionToSubgraph(const shlo::Region& region, const std::vector<TensorType>& params,
                                        std::vector<int>* captures);
  // The general form: `build` emits into the fresh subgraph's scope given its parameter values and
  // returns the values that become its outputs.
  using SubgraphBuilder = std::function<StatusOr<std::vector<int>>(const std::vector<int>& params)>;
  StatusOr<Graph> BuildSubgraph(const std::vector<TensorType>& params, const SubgraphBuilder& build,
                                std::vector<int>* captures);
  // Drops what was recorded about a subgraph's values (splats, iotas, constants) once it is built: its
  // address will be reused by the next one.
  void ForgetFactsOf(const Graph* sub);
  // Lowers a region's block inline on tensors (its scalar ops applied elementwise): args bound to
  // `args` (all of one shape, the lanes), the terminator's operands come back with that shape;
  // rank-0 values the block reads (its constants, captured outer scalars) are broadcast to it.
  StatusOr<std::vector<int>> LowerBlockInline(const shlo::Block& block, const std::vector<int>& args);
  // Lowers a function body inline: args are bound to `args`, the return operands come back.
  StatusOr<std::vector<int>> InlineCall(const shlo::Func& callee, const std::vector<int>& args);

  // ---- values of the op being lowered
  const shlo::Op& op() const { return *op_; }
  StatusOr<int> Value(int shlo_id);                                     // captures from enclosing scopes as needed
  StatusOr<std::vector<int>> Values(const std::vector<int>& shlo_ids);  // a terminator's operands, say
  StatusOr<int> In(size_t i) { return Value(op_->operands.at(i)); }
  const shlo::Type& ShloType(int shlo_id) const;
  const shlo::Type& InType(size_t i) const { return ShloType(op_->operands.at(i)); }
  const shlo::Type& OutType(size_t i) const { return ShloType(op_->results.at(i)); }
  void Bind(size_t result_index, int mps_value);
  void BindShlo(int shlo_id, int mps_value) { scope_->env[shlo_id] = mps_value; }

  // ---- errors that name the op, its types and its source location
  Status Unsupported(const std::string& what) const;

  // ---- emitting MPS ops (location taken from the op being lowered). An op's attributes come with it,
  // as one of mps/op_attrs.h's typed structs, and the result is its output's value id: nothing hands
  // out a reference into the op list, which the next emit may reallocate.
  int Emit(OpKind kind, std::vector<int> inputs, DType dtype, Shape shape) {
    return EmitOp(NewOp(kind, std::move(inputs)), {TensorType{dtype, std::move(shape)}})[0];
  }
  template <typename Attrs>
  int Emit(OpKind kind, std::vector<int> inputs, DType dtype, Shape shape, const Attrs& attrs) {
    Op op = NewOp(kind, std::move(inputs));
    op.attrs = attrs;
    return EmitOp(std::move(op), {TensorType{dtype, std::move(shape)}})[0];
  }
  // An op built whole up front (NewOp, then its attributes and subgraphs) with fresh outputs of
  // these types; returns their value ids.
  Op NewOp(OpKind kind, std::vector<int> inputs) const;
  std::vector<int> EmitOp(Op op, const std::vector<TensorType>& outputs);
  // By value: emitting an op grows the graph's value table, so a reference into it would dangle
  // as soon as a caller emits while still holding it.
  TensorType Type(int v) { return graph().type(v); }
  DType DTypeOf(int v) { return graph().type(v).dtype; }
  Shape ShapeOf(int v) { return graph().type(v).shape; }

  int Unary(OpKind kind, int x);                           // same type out
  int Binary(OpKind kind, int a, int b);                   // same type as a out; shapes must match
  int Compare(OpKind kind, int a, int b);                  // bool out
  int Select(int pred, int on_true, int on_false);         // pred broadcast to the operands' shape if scalar
  int Cast(int x, DType to);                               // no-op when already `to`
  int Reinterpret(int x, DType to);                        // same width only here
  int Reshape(int x, Shape shape);                         // no-op when already that shape
  int Transpose(int x, const std::vector<int64_t>& perm);  // no-op for the identity
  int BroadcastTo(int x, Shape shape);                     // x rank <= shape rank, NumPy rules, trailing aligned
  int Slice(int x, Shape starts, Shape ends, Shape strides = {});

  // Constants. `Scalar` is a rank-0 tensor; `Splat` a broadcast of one.
  int Scalar(DType dtype, double value);
  int ScalarBits(DType dtype, uint64_t bits);  // exact integers and bit patterns of any width
  int Splat(DType dtype, Shape shape, double value) { return BroadcastTo(Scalar(dtype, value), shape); }
  int SplatBits(DType dtype, Shape shape, uint64_t bits) { return BroadcastTo(ScalarBits(dtype, bits), shape); }
  int ConstantData(DType dtype, Shape shape, std::vector<uint8_t> data);
  int Int32Constant(Shape shape, const std::vector<int32_t>& values);  // values row-major
  int Iota(Shape shape, int64_t axis);                                 // int32 coordinates along `axis`
  void RecordSplat(int v, double value);
  // Attributes of the op being lowered; a missing or mistyped one is an error naming it.
  StatusOr<std::vector<int64_t>> IntsAttr(const std::string& name) const;
  StatusOr<int64_t> IntAttr(const std::string& name) const;
  // The value when v is a constant with every element equal (splat or scalar).
  bool KnownSplat(int v, double* value);

  // Records that v is iota along `axis` (used by argmax/sort pattern matching).
  void MarkIota(int v, int64_t axis) { iota_axis_[{scope_->graph, v}] = axis; }
  bool IsIotaAlong(int v, int64_t axis);

  // A dot_general's operands and dimension numbers, kept per result so that partial_sums.cc can compute
  // the result's partial sums over a split contraction as XLA's partitioner does.
  struct DotOperands {
    int lhs, rhs;
    std::vector<int64_t> lb, rb, lc, rc;
  };
  void RecordDot(int v, DotOperands d) { dots_[{scope_->graph, v}] = std::move(d); }
  const DotOperands* DotOf(int v) const {
    auto it = dots_.find({scope_->graph, v});
    return it == dots_.end() ? nullptr : &it->second;
  }

  // A sum's operand and reduced axes, kept per result (reshaped to the reduction's result shape) for
  // the same purpose: its partial sums over a split reduced dimension.
  struct SumOperands {
    int operand;
    std::vector<int64_t> axes;
  };
  void RecordSum(int v, SumOperands s) { sums_[{scope_->graph, v}] = std::move(s); }
  const SumOperands* SumOf(int v) const {
    auto it = sums_.find({scope_->graph, v});
    return it == sums_.end() ? nullptr : &it->second;
  }

  // Records that v is the sum of the parts stacked in `stack` (partial_sums.h); PartsStack gives the
  // stack, or -1.
  void MarkPartsOf(int v, int stack) { parts_stack_[{scope_->graph, v}] = stack; }
  int PartsStack(int v) const {
    auto it = parts_stack_.find({scope_->graph, v});
    return it == parts_stack_.end() ? -1 : it->second;
  }

  // The scope swap used by control flow and inlining.
  Scope* SwapScope(Scope* s) {
    Scope* old = scope_;
    scope_ = s;
    return old;
  }

  // Lowers one op into the current scope.
  Status LowerOp(const shlo::Op& op);

  // Helpers that find their arguments inconsistent (attributes from a corrupted artifact) record
  // the first such error here and return something harmless; LowerOp reports it.
  void Fail(Status status) {
    if (failure_.ok()) failure_ = std::move(status);
  }

 private:
  // An op with a zero-element operand or result, made without one where its result is known (an op
  // whose results are all empty makes empty constants; lower_empty.cc says what else folds). True
  // when *ids are the results; otherwise `op` may have lost operands that contribute nothing.
  bool FoldEmpty(Op& op, const std::vector<TensorType>& outputs, std::vector<int>* ids);

  StatusOr<int> LookupIn(Scope* s, int shlo_id);
  StatusOr<int> LookupUnbroadcast(Scope* s, int shlo_id);

  const shlo::Module& module_;
  Partitioning partitioning_;
  int64_t manual_device_ = -1;
  int64_t manual_copies_ = 0;
  Scope* scope_ = nullptr;
  const shlo::Op* op_ = nullptr;
  int inline_depth_ = 0;
  Status failure_;
  std::map<std::pair<const Graph*, int>, double> splats_;
  std::map<std::pair<const Graph*, int>, int64_t> iota_axis_;
  std::map<std::pair<const Graph*, int>, int> parts_stack_;
  std::map<std::pair<const Graph*, int>, DotOperands> dots_;
  std::map<std::pair<const Graph*, int>, SumOperands> sums_;
  // Broadcasts of one element (splats): the element, at the broadcast's rank. Elementwise ops whose
  // operands are all splats compute on the elements and broadcast the result, so a shift by a loop-carried
  // amount or a compare of two splats costs one element, not a tensor.
  std::map<std::pair<const Graph*, int>, int> one_source_;
  std::map<std::pair<const Graph*, int>, size_t> constant_at_;  // a Constant's op index in its graph
  // The Constant op making v in g, if it still stands where it was emitted.
  const Op* ConstantOp(const Graph* g, int v) const;
  std::map<std::pair<const Graph*, int>, std::pair<int, std::vector<int64_t>>> transpose_of_;  // operand, perm
  int OneSource(int v);
};

// Attribute values from an artifact that sizes are computed from must be small enough that no
// product or sum of them overflows.
inline bool Reasonable(const std::vector<int64_t>& values, int64_t limit = int64_t{1} << 24) {
  for (int64_t v : values)
    if (v < -limit || v > limit) return false;
  return true;
}

// Element-type helpers for constants.
std::vector<uint8_t> EncodeScalar(DType dtype, double value);
std::vector<uint8_t> EncodeBits(DType dtype, uint64_t bits);
double DecodeScalar(DType dtype, const uint8_t* p);  // complex: the real part
double LowestValue(DType dtype);                     // -inf for floats, the minimum for integers, 0 for bool
double HighestValue(DType dtype);                    // +inf for floats, the maximum for integers, 1 for bool

// One lowering rule per StableHLO op name; each op family registers its rules (lower_registry.cc).
using LowerRule = Status (*)(LowerContext& cx);
void RegisterRule(std::map<std::string, LowerRule>& rules, const char* name, LowerRule rule);
const std::map<std::string, LowerRule>& LowerRules();

// Subgraphs that share their captured outer values (a While's condition and body, an If's branches):
// the union of two capture lists, in first-seen order, and a subgraph built with the parameters
// [first `fixed`..., one per value of `own`] given [first `fixed`..., one per value of `all`] (own ⊆ all;
// the ones it does not read are unused parameters).
std::vector<int> UnionOf(const std::vector<int>& a, const std::vector<int>& b);
void AlignCaptures(Graph& sub, size_t fixed, const std::vector<int>& own, const std::vector<int>& all,
                   const std::vector<TensorType>& all_types);
// Emits While(cond, body) over the carried values `init`, the subgraphs built with parameters [init...,
// their captures...] (the outer values cond_caps / body_caps); the captures become loop-invariant carries.
// Returns the carried values' results.
std::vector<int> EmitWhile(LowerContext& cx, const std::vector<int>& init, Graph cond,
                           const std::vector<int>& cond_caps, Graph body, const std::vector<int>& body_caps);

}  // namespace jmp::mps

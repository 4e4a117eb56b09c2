// The stand-in's MPSGraph: each call is recorded as ops of an mps::Graph built from the call's own
// arguments and descriptors (never from our op attributes), its result type inferred by the rule of
// its header, and checked against what the header requires. The first broken rule is kept and
// returned by compileWithDevice; later calls still return tensors, so the caller runs on to compile.
// The recorder is declared here for its files: the recording core (standin_graph.cc), the type rules by
// family (standin_rules_*.cc), the control-flow blocks (standin_control_flow.cc) and the compile
// (standin_compile.cc).
#pragma once

#include <deque>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "exec/standin/standin_dtypes.h"
#include "exec/standin/standin_internal.h"
#include "mps/graph.h"
#include "support/dtype.h"
#include "support/status.h"

namespace jmp::exec::metal {

// The graph or one block of it. A block's values are local to it: an if block reads outer tensors
// through captures (they become the If op's operands); a while block reads only its arguments.
struct Scope {
  mps::Graph graph;
  Scope* parent = nullptr;
  bool captures_allowed = false;
  bool open = true;
  std::vector<std::pair<int, int>> captures;  // (the parent's value, this scope's value)
};

}  // namespace jmp::exec::metal

namespace jmp::exec::standin {

using metal::Scope;
using metal::Tensor;
using metal::Tensors;
using mps::OpKind;

// Shared by the type rules (definitions in standin_graph.cc).

// What the MPS graph holds for an MPSGraph type (its dtype is checked where the tensor is made).
mps::TensorType MpsType(const ShapedType& t);

// Wraps a possibly negative axis into [0, rank); -1 when outside.
int64_t WrapAxis(int64_t axis, size_t rank);

// NumPy's broadcast of two shapes (right-aligned, each dimension equal or 1); false when they clash.
bool BroadcastShapes(const Shape& a, const Shape& b, Shape* out);

std::string Join(const Shape& v);

class StandinGraph : public metal::Graph {
 public:
  StandinGraph() {
    scopes_.push_back(std::make_unique<Scope>());
    stack_.push_back(scopes_.back().get());
  }

  Shape shapeOf(Tensor* t) override { return t ? t->type.shape : Shape{}; }
  DataType dataTypeOf(Tensor* t) override { return t ? t->type.dataType : DataType::kInvalid; }

  // Placeholders, constants, casts and layout (standin_rules_shape.cc).
  Tensor* placeholderWithShape(const Shape& shape, DataType dt) override;
  Tensor* constantWithData(const void* data, size_t length, const Shape& shape, DataType dt) override;
  Tensor* constantWithScalar(double scalar, const Shape& shape, DataType dt) override;
  Tensor* coordinateAlongAxis(int64_t axis, const Shape& shape) override;
  Tensor* castTensor(Tensor* t, DataType to) override;
  Tensor* reinterpretCastTensor(Tensor* t, DataType to) override;
  Tensor* reshapeTensor(Tensor* t, const Shape& shape) override;
  Tensor* transposeTensor(Tensor* t, const Shape& permutation) override;
  Tensor* broadcastTensor(Tensor* t, const Shape& shape) override;
  Tensor* sliceTensor(Tensor* t, const Shape& starts, const Shape& ends, const Shape& strides) override;
  Tensor* concatTensors(const Tensors& tensors, int64_t dimension) override;
  Tensor* padTensor(Tensor* t, metal::PaddingMode mode, const Shape& left, const Shape& right, double value) override;
  Tensor* reverseTensor(Tensor* t, const Shape& axes) override;

  // Elementwise, matrix products, reductions, FFTs, sorts and scans (standin_rules_compute.cc).
#define JMP_MPS_UNARY(Name, macos, selector, domain) Tensor* selector(Tensor* t) override;
#define JMP_MPS_BINARY(Name, macos, primary, secondary, domain) Tensor* primary(Tensor* a, Tensor* b) override;
#include "mps/op_kinds.def"

  Tensor* selectWithPredicateTensor(Tensor* p, Tensor* a, Tensor* b) override;
  Tensor* clampWithTensor(Tensor* x, Tensor* lo, Tensor* hi) override;
  Tensor* matrixMultiplicationWithPrimaryTensor(Tensor* a, Tensor* b) override;
  Tensor* reductionSumWithTensor(Tensor* t, const Shape& axes) override;
  Tensor* reductionProductWithTensor(Tensor* t, const Shape& axes) override;
  Tensor* reductionMaximumPropagateNaNWithTensor(Tensor* t, const Shape& axes) override;
  Tensor* reductionMinimumPropagateNaNWithTensor(Tensor* t, const Shape& axes) override;
  Tensor* reductionAndWithTensor(Tensor* t, const Shape& axes) override;
  Tensor* reductionOrWithTensor(Tensor* t, const Shape& axes) override;
  Tensor* reductionArgMaximumWithTensor(Tensor* t, int64_t axis) override;
  Tensor* reductionArgMinimumWithTensor(Tensor* t, int64_t axis) override;
  Tensor* fastFourierTransformWithTensor(Tensor* t, const Shape& axes, const metal::FFTDescriptor& d) override;
  Tensor* realToHermiteanFFTWithTensor(Tensor* t, const Shape& axes, const metal::FFTDescriptor& d) override;
  Tensor* HermiteanToRealFFTWithTensor(Tensor* t, const Shape& axes, const metal::FFTDescriptor& d) override;
  Tensor* sortWithTensor(Tensor* t, int64_t axis, bool descending) override;
  Tensor* argSortWithTensor(Tensor* t, int64_t axis, bool descending) override;
  Tensors topKWithSourceTensor(Tensor* t, uint64_t k) override;
  Tensor* cumulativeSumWithTensor(Tensor* t, int64_t axis, bool exclusive, bool reverse) override;
  Tensor* cumulativeProductWithTensor(Tensor* t, int64_t axis, bool exclusive, bool reverse) override;
  Tensor* cumulativeMaximumWithTensor(Tensor* t, int64_t axis, bool exclusive, bool reverse) override;
  Tensor* cumulativeMinimumWithTensor(Tensor* t, int64_t axis, bool exclusive, bool reverse) override;

  // Gathers, scatters, convolution and pooling (standin_rules_gather_conv.cc).
  Tensor* gatherAlongAxis(int64_t axis, Tensor* updates, Tensor* indices) override;
  Tensor* gatherNDWithUpdatesTensor(Tensor* updates, Tensor* indices, uint64_t batch) override;
  Tensor* scatterNDWithDataTensor(Tensor* data, Tensor* updates, Tensor* indices, uint64_t batch,
                                  metal::ScatterMode mode) override;
  Tensor* scatterAlongAxis(int64_t axis, Tensor* data, Tensor* updates, Tensor* indices,
                           metal::ScatterMode mode) override;
  Tensor* convolution2DWithSourceTensor(Tensor* x, Tensor* w, const metal::Convolution2DOpDescriptor& d) override;
  Tensor* maxPooling4DWithSourceTensor(Tensor* t, const metal::Pooling4DOpDescriptor& d) override;
  Tensor* avgPooling4DWithSourceTensor(Tensor* t, const metal::Pooling4DOpDescriptor& d) override;
  Tensor* maxPooling4DGradientWithGradientTensor(Tensor* gradient, Tensor* source,
                                                 const metal::Pooling4DOpDescriptor& d) override;

  // standin_control_flow.cc
  Tensors whileWithInitialInputs(const Tensors& initial, const WhileBeforeBlock& before,
                                 const WhileAfterBlock& after) override;
  Tensors ifWithPredicateTensor(Tensor* predicate, const IfBlock& thenBlock, const IfBlock& elseBlock) override;

  // standin_compile.cc
  StatusOr<std::unique_ptr<metal::GraphExecutable>> compileWithDevice(
      metal::Device&, const std::vector<std::pair<Tensor*, ShapedType>>& feeds, const Tensors& targets) override;

 private:
  static Shape ShapeOf(const Tensor* t) { return t ? t->type.shape : Shape{1}; }
  static DataType TypeOf(const Tensor* t) { return t ? t->type.dataType : DataType::kFloat32; }

  // The recording core (standin_graph.cc).
  Tensor* NewTensor(Scope* scope, int value, const ShapedType& type);

  // A tensor for a call that broke a rule: a value nothing computes, never compiled (compile fails).
  Tensor* Poison(const ShapedType& type);

  std::string Describe(const std::string& call, const Tensors& operands) const;

  void Record(Status s);

  Tensor* Reject(const std::string& call, const Tensors& operands, const std::string& rule, const ShapedType& type);
  Tensor* Unsupport(const std::string& call, const Tensors& operands, const std::string& what, const ShapedType& type);

  // Operands that exist, belong to an open scope of this graph, and were not made by a broken call.
  bool Usable(const std::string& call, const Tensors& operands);
  bool OwnsScope(const Scope* s);

  // A type a call makes: a known data type, and no zero-element or negative dimension.
  bool CheckNewType(const std::string& call, const Tensors& operands, const ShapedType& type);

  bool CheckAccepted(const std::string& selector, const std::string& call, const Tensors& operands);

  bool CheckIndices(const std::string& call, const Tensors& operands, Tensor* indices, const AcceptedTypes& accepted);

  static bool SameExceptAxis(const Shape& a, const Shape& b, int64_t axis);

  static std::optional<mps::ScatterMode> ScatterModeOf(metal::ScatterMode m);

  std::optional<std::vector<int64_t>> WrapAxes(const std::string& call, Tensor* t, const Shape& axes);

  // The value of `t` in the current scope, captured through the enclosing if blocks when it is an
  // outer tensor.
  StatusOr<int> Capture(Scope* s, Tensor* t);

  std::optional<std::vector<int>> Locals(const std::string& call, const Tensors& operands);

  int EmitLocal(OpKind kind, std::vector<int> inputs, mps::OpAttrs attrs, const mps::TensorType& out);

  // NumPy's broadcast made explicit, as the host's ops take operands of one shape.
  int BroadcastLocal(int value, const ShapedType& from, const Shape& to);

  int Int32Indices(int value, const ShapedType& type);

  Tensors Emit(const std::string& call, OpKind kind, const std::vector<int>& inputs, mps::OpAttrs attrs,
               const std::vector<ShapedType>& outs);

  Tensor* EmitOne(const std::string& call, OpKind kind, const Tensors& operands, mps::OpAttrs attrs,
                  const ShapedType& out);

  Tensor* EmitBroadcast(const std::string& call, OpKind kind, const Tensors& operands, const ShapedType& out);

  // The type rules' shared steps (standin_rules_compute.cc, Pool in standin_rules_gather_conv.cc).
  Tensor* Unary(const std::string& selector, OpKind kind, Tensor* t);

  Tensor* Binary(const std::string& selector, OpKind kind, Tensor* a, Tensor* b);

  Tensor* Reduction(const std::string& selector, OpKind kind, Tensor* t, const Shape& axes);

  Tensor* ArgReduction(const std::string& call, OpKind kind, Tensor* t, int64_t axis);

  Tensor* Sort(const std::string& selector, OpKind kind, Tensor* t, int64_t axis, bool descending);

  Tensor* Cumulative(const std::string& selector, OpKind kind, Tensor* t, int64_t axis, bool exclusive, bool reverse);

  Tensor* Pool(const std::string& selector, OpKind kind, const Tensors& operands,
               const metal::Pooling4DOpDescriptor& d);

  Scope* OpenScope(bool captures_allowed);

  std::deque<std::unique_ptr<Scope>> scopes_;
  std::set<const Scope*> owned_;
  std::vector<Scope*> stack_;
  std::deque<std::unique_ptr<Tensor>> tensors_;
  Status first_error_;
};

}  // namespace jmp::exec::standin

// The MPS op graph's invariants that executors rely on for memory safety (shapes that agree with
// each op's attributes), checked once after lowering, so no input can make an executor read or write
// past a buffer.
#include "mps/verify.h"

#include <algorithm>

#include "mps/lapack_types.h"
#include "mps/op_attrs.h"

namespace jmp::mps {

namespace {

bool AxesValid(const std::vector<int64_t>& axes, size_t rank) {
  for (int64_t a : axes)
    if (a < 0 || a >= static_cast<int64_t>(rank)) return false;
  return true;
}
bool AxisValid(int64_t axis, size_t rank) { return axis >= 0 && axis < static_cast<int64_t>(rank); }

// The elementwise rows whose result is bool whatever their operands (op_kinds.def), which MPSGraph types
// so: a result of another type would be read as other bytes than MPSGraph writes.
bool BoolResult(OpKind k) {
  return k == OpKind::kIsFinite || k == OpKind::kIsNaN || k == OpKind::kIsInfinite || k == OpKind::kEqual ||
         k == OpKind::kNotEqual || k == OpKind::kLessThan || k == OpKind::kLessThanOrEqualTo ||
         k == OpKind::kGreaterThan || k == OpKind::kGreaterThanOrEqualTo;
}

// The LAPACK rows' shapes and dtypes (mps/lapack_types.h, which the lowering emits), exactly: their
// kernels index by them.
Status CheckLapack(const Graph& g, const Op& op) {
  std::vector<TensorType> inputs;
  for (int v : op.inputs) inputs.push_back(g.type(v));
  StatusOr<std::vector<TensorType>> want = LapackResultTypes(op.kind, inputs, op.Attrs<LapackAttrs>());
  if (!want.ok()) return Internal(want.status().message());
  if (op.outputs.size() != want->size()) return Internal("wrong number of outputs");
  for (size_t i = 0; i < want->size(); ++i)
    if (g.type(op.outputs[i]).dtype != (*want)[i].dtype || g.type(op.outputs[i]).shape != (*want)[i].shape)
      return Internal("output " + std::to_string(i) + " is " + g.type(op.outputs[i]).ToString() + ", expected " +
                      (*want)[i].ToString());
  return Status::Ok();
}

Status CheckOp(const Graph& g, const Op& op) {
  for (const std::vector<int>* ids : {&op.inputs, &op.outputs})
    for (int v : *ids)
      if (v < 0 || v >= static_cast<int>(g.values.size())) return Internal("value id out of range");
  if (op.outputs.empty()) return Internal("op without outputs");
  const TensorType& out = g.type(op.outputs[0]);
  auto in = [&](size_t i) -> const TensorType& { return g.type(op.inputs.at(i)); };
  auto need_inputs = [&](size_t n) { return op.inputs.size() == n; };
  auto same_shape = [&](size_t n) {
    for (size_t i = 0; i < n; ++i)
      if (in(i).shape != out.shape && in(i).NumElements() != 1) return false;
    return true;
  };
  switch (op.kind) {
    case OpKind::kConstant:
      return op.Attrs<ConstantAttrs>().data.size() == out.ByteSize() ? Status::Ok()
                                                                     : Internal("constant size mismatch");
    case OpKind::kCoordinateAlongAxis:
      return AxisValid(op.Attrs<AxisAttrs>().axis, out.shape.size()) ? Status::Ok() : Internal("bad axis");
    case OpKind::kReshape:
      return need_inputs(1) && in(0).ByteSize() == out.ByteSize() ? Status::Ok() : Internal("reshape size mismatch");
    case OpKind::kReinterpretCast:
      return need_inputs(1) && in(0).ByteSize() == out.ByteSize() ? Status::Ok()
                                                                  : Internal("reinterpret size mismatch");
    case OpKind::kCast:
      return need_inputs(1) && in(0).NumElements() == out.NumElements() ? Status::Ok() : Internal("cast size mismatch");
    case OpKind::kTranspose: {
      const std::vector<int64_t>& perm = op.Attrs<PermutationAttrs>().permutation;
      if (!need_inputs(1) || perm.size() != in(0).shape.size() || !AxesValid(perm, in(0).shape.size()))
        return Internal("bad permutation");
      for (size_t i = 0; i < perm.size(); ++i)
        if (out.shape.at(i) != in(0).shape[static_cast<size_t>(perm[i])]) return Internal("transpose shape mismatch");
      return Status::Ok();
    }
    case OpKind::kBroadcast: {
      if (!need_inputs(1) || in(0).shape.size() > out.shape.size()) return Internal("bad broadcast");
      size_t lead = out.shape.size() - in(0).shape.size();
      for (size_t i = 0; i < in(0).shape.size(); ++i)
        if (in(0).shape[i] != 1 && in(0).shape[i] != out.shape[lead + i]) return Internal("bad broadcast");
      return Status::Ok();
    }
    case OpKind::kSlice: {
      const SliceAttrs& a = op.Attrs<SliceAttrs>();
      size_t r = in(0).shape.size();
      if (a.starts.size() != r || a.ends.size() != r || a.strides.size() != r || out.shape.size() != r)
        return Internal("bad slice");
      for (size_t i = 0; i < r; ++i) {
        if (a.strides[i] <= 0 || a.starts[i] < 0 || a.ends[i] > in(0).shape[i] || a.starts[i] > a.ends[i])
          return Internal("slice out of bounds");
        if (out.shape[i] != (a.ends[i] - a.starts[i] + a.strides[i] - 1) / a.strides[i]) return Internal("slice shape");
      }
      return Status::Ok();
    }
    case OpKind::kPad: {
      const PadAttrs& a = op.Attrs<PadAttrs>();
      size_t r = in(0).shape.size();
      if (a.low.size() != r || a.high.size() != r || out.shape.size() != r) return Internal("bad pad");
      for (size_t i = 0; i < r; ++i)
        if (a.low[i] < 0 || a.high[i] < 0 || out.shape[i] != in(0).shape[i] + a.low[i] + a.high[i])
          return Internal("pad shape mismatch");
      return Status::Ok();
    }
    case OpKind::kConcat: {
      const int64_t concat_axis = op.Attrs<AxisAttrs>().axis;
      if (!AxisValid(concat_axis, out.shape.size())) return Internal("bad concat axis");
      size_t axis = static_cast<size_t>(concat_axis);
      int64_t total = 0;
      for (size_t i = 0; i < op.inputs.size(); ++i) {
        if (in(i).shape.size() != out.shape.size()) return Internal("concat rank mismatch");
        for (size_t d = 0; d < out.shape.size(); ++d)
          if (d != axis && in(i).shape[d] != out.shape[d]) return Internal("concat shape mismatch");
        total += in(i).shape[axis];
      }
      return total == out.shape[axis] ? Status::Ok() : Internal("concat size mismatch");
    }
    case OpKind::kReverse:
      return need_inputs(1) && in(0).shape == out.shape && AxesValid(op.Attrs<AxesAttrs>().axes, out.shape.size())
                 ? Status::Ok()
                 : Internal("bad reverse");
    case OpKind::kReductionSum:
    case OpKind::kReductionProduct:
    case OpKind::kReductionMaximum:
    case OpKind::kReductionMinimum:
    case OpKind::kReductionAnd:
    case OpKind::kReductionOr:
    case OpKind::kReductionArgMaximum:
    case OpKind::kReductionArgMinimum: {
      const bool arg = op.kind == OpKind::kReductionArgMaximum || op.kind == OpKind::kReductionArgMinimum;
      const std::vector<int64_t> axes =
          arg ? std::vector<int64_t>{op.Attrs<AxisAttrs>().axis} : op.Attrs<AxesAttrs>().axes;
      if (!need_inputs(1) || !AxesValid(axes, in(0).shape.size()) || out.shape.size() != in(0).shape.size())
        return Internal("bad reduction");
      for (size_t d = 0; d < out.shape.size(); ++d) {
        bool reduced = false;
        for (int64_t a : axes) reduced |= a == static_cast<int64_t>(d);
        if (out.shape[d] != (reduced ? 1 : in(0).shape[d])) return Internal("reduction shape mismatch");
      }
      return Status::Ok();
    }
    case OpKind::kSelect:
    case OpKind::kClamp: return need_inputs(3) && same_shape(3) ? Status::Ok() : Internal("operand shapes differ");
    case OpKind::kMultiplyAdd:
      if (!need_inputs(3)) return Internal("needs three operands");
      for (size_t i = 0; i < 3; ++i)
        if (in(i).dtype != out.dtype || in(i).shape != out.shape) return Internal("operands differ from the result");
      return Status::Ok();
#define JMP_MPS_UNARY(name, macos, selector, domain) case OpKind::k##name:
#include "mps/op_kinds.def"
      if (!need_inputs(1) || in(0).shape != out.shape) return Internal("operand shape differs");
      return BoolResult(op.kind) && out.dtype != DType::kBool ? Internal("a predicate's result must be bool")
                                                              : Status::Ok();
#define JMP_MPS_BINARY(name, macos, primary, secondary, domain) case OpKind::k##name:
#include "mps/op_kinds.def"
      if (!need_inputs(2) || in(0).shape != out.shape || in(1).shape != out.shape)
        return Internal("operand shapes differ");
      return BoolResult(op.kind) && out.dtype != DType::kBool ? Internal("a predicate's result must be bool")
                                                              : Status::Ok();
    case OpKind::kFFT:
    case OpKind::kRealToHermiteanFFT:
    case OpKind::kHermiteanToRealFFT: {
      // The kernels write the result at the width the operand says: the pair must agree.
      if (!need_inputs(1)) return Internal("op without inputs");
      const DType want = op.kind == OpKind::kRealToHermiteanFFT   ? ComplexOf(in(0).dtype)
                         : op.kind == OpKind::kHermiteanToRealFFT ? RealOf(in(0).dtype)
                                                                  : in(0).dtype;
      return out.dtype == want ? Status::Ok() : Internal("result type does not match the operand's");
    }
    case OpKind::kMatMul:
    case OpKind::kIntegerMatMul:
    case OpKind::kSort:
    case OpKind::kArgSort:
    case OpKind::kTopK:
    case OpKind::kCumulativeSum:
    case OpKind::kCumulativeProduct:
    case OpKind::kCumulativeMaximum:
    case OpKind::kCumulativeMinimum:
    case OpKind::kGatherAlongAxis:
    case OpKind::kGatherND:
    case OpKind::kScatterND:
    case OpKind::kScatterAlongAxis:
    case OpKind::kConv2D:
    case OpKind::kMaxPool4D:
    case OpKind::kAvgPool4D:
    case OpKind::kMaxPool4DGradient:
      // Their kernels check their own shapes and indices; CheckAttrs their attributes' counts.
      return op.inputs.empty() ? Internal("op without inputs") : Status::Ok();
    case OpKind::kRngBitGenerator: {
      // The kernel writes the state's n words and the bits' elements at their width; it reads the
      // counter from the state's words 1 (and 2), so n is checked against the algorithm here.
      if (!need_inputs(1) || op.outputs.size() != 2) return Internal("needs one state and two outputs");
      const TensorType& bits = g.type(op.outputs[1]);
      bool philox = op.Attrs<RngAttrs>().algorithm == RngAlgorithm::kPhilox;
      int64_t n = in(0).shape.size() == 1 ? in(0).shape[0] : -1;
      if (in(0).dtype != DType::kU64 || out.dtype != DType::kU64 || out.shape != in(0).shape ||
          !(n == 2 || (philox && n == 3)))
        return Internal("state must be u64[2] (or u64[3] for Philox) in and out");
      if (!(bits.dtype == DType::kU8 || bits.dtype == DType::kU16 || bits.dtype == DType::kU32 ||
            bits.dtype == DType::kU64))
        return Internal("bits must be u8, u16, u32 or u64");
      return Status::Ok();
    }
    case OpKind::kPythonCallback: {
      // Outputs: the done token first; inputs: the tokens first (attrs: how many).
      if (out.dtype != DType::kBool || out.shape != std::vector<int64_t>{0})
        return Internal("first output is not a token");
      for (int64_t i = 0;
           i < op.Attrs<PythonCallbackAttrs>().token_inputs && i < static_cast<int64_t>(op.inputs.size()); ++i)
        if (in(static_cast<size_t>(i)).ByteSize() != 0) return Internal("token input is not empty");
      return Status::Ok();
    }
    case OpKind::kAllReduce: {
      // The kernel folds whole operands into the result elementwise: one type throughout.
      if (op.inputs.empty() || op.outputs.size() != 1) return Internal("needs operands and one result");
      for (size_t i = 0; i < op.inputs.size(); ++i)
        if (in(i).dtype != out.dtype || in(i).shape != out.shape) return Internal("operands differ from the result");
      return Status::Ok();
    }
#define JMP_LAPACK_OP(name, inputs, domain) case OpKind::k##name:
#include "mps/op_kinds.def"
      return CheckLapack(g, op);
    case OpKind::kMetalKernel: {
      if (op.subgraphs.size() != 1) return Internal("a Metal kernel without its reference");
      const Graph& ref = op.subgraphs[0];
      JMP_RETURN_IF_ERROR(VerifyGraph(ref));
      if (ref.inputs.size() != op.inputs.size() || ref.outputs.size() != op.outputs.size())
        return Internal("the reference's signature differs from the kernel's");
      for (size_t i = 0; i < op.inputs.size(); ++i)
        if (ref.type(ref.inputs[i]).ToString() != g.type(op.inputs[i]).ToString())
          return Internal("the reference's parameter " + std::to_string(i) + " differs from the kernel's operand");
      for (size_t i = 0; i < op.outputs.size(); ++i)
        if (ref.type(ref.outputs[i]).ToString() != g.type(op.outputs[i]).ToString())
          return Internal("the reference's result " + std::to_string(i) + " differs from the kernel's");
      return Status::Ok();  // its source, entry and sizes: CheckAttrs
    }
    case OpKind::kWhile:
    case OpKind::kIf:
      for (const Graph& sub : op.subgraphs) JMP_RETURN_IF_ERROR(VerifyGraph(sub));
      return op.subgraphs.size() == 2 ? Status::Ok() : Internal("control flow without two subgraphs");
  }
  return Internal("unknown op kind");
}

constexpr bool kElementwise[] = {
#define JMP_MPS_OP(name, macos, selector, domain) false,
#define JMP_MPS_UNARY(name, macos, selector, domain) true,
#define JMP_MPS_BINARY(name, macos, primary, secondary, domain) true,
#include "mps/op_kinds.def"
};
bool IsElementwise(OpKind kind) { return kElementwise[static_cast<size_t>(kind)]; }

// The values whose element type the op's row constrains (op_kinds.def says which).
std::vector<int> DomainValues(const Op& op) {
  if (op.kind == OpKind::kSelect || op.kind == OpKind::kIf)
    return op.inputs.size() > 1 ? std::vector<int>(op.inputs.begin() + 1, op.inputs.end()) : std::vector<int>{};
  if (op.kind == OpKind::kClamp || IsElementwise(op.kind)) return op.inputs;
  if (op.inputs.empty()) return op.outputs.empty() ? std::vector<int>{} : std::vector<int>{op.outputs[0]};
  return {op.inputs[0]};
}

// Whether each of them is in the row's domain: no executor needs to refuse a dtype after this.
Status CheckDomain(const Graph& g, const Op& op) {
  const DTypeDomain domain = OpKindDomain(op.kind);
  for (int v : DomainValues(op)) {
    if (v < 0 || v >= static_cast<int>(g.values.size())) continue;  // CheckOp's error
    const DType t = g.type(v).dtype;
    if (!domain.Has(t))
      return InvalidArgument("is not defined for " + std::string(DTypeName(t)) + " (its domain is " +
                             std::string(OpKindDomainName(op.kind)) + ")");
  }
  return Status::Ok();
}

}  // namespace

Status VerifyGraph(const Graph& graph) {
  // Narrow types (int4, float8) live only in buffers and StableHLO: stablehlo/passes/narrow_types.cc rewrites them.
  for (const TensorType& t : graph.values)
    if (IsNarrow(t.dtype))
      return Internal("inconsistent program: a value of type " + std::string(DTypeName(t.dtype)) +
                      " reached the MPS op graph");
  for (const Op& op : graph.ops) {
    Status s = CheckAttrs(op);
    if (s.ok()) s = CheckDomain(graph, op);
    if (s.ok()) s = CheckOp(graph, op);
    if (!s.ok())
      return InvalidArgument("inconsistent program: " + std::string(OpKindName(op.kind)) + ": " + s.message() +
                             (op.location.empty() ? "" : " (from " + op.location + ")"));
  }
  for (int v : graph.outputs)
    if (v < 0 || v >= static_cast<int>(graph.values.size())) return InvalidArgument("inconsistent program: bad output");
  return Status::Ok();
}

}  // namespace jmp::mps

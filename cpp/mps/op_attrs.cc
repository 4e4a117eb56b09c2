#include "mps/op_attrs.h"

#include <sstream>
#include <type_traits>

#include "mps/graph.h"

namespace jmp::mps {

namespace {

template <AttrsKind K>
using Alternative = std::variant_alternative_t<static_cast<size_t>(K), OpAttrs>;
#define JMP_SAME_ORDER(name) static_assert(std::is_same_v<Alternative<AttrsKind::k##name>, name>);
JMP_SAME_ORDER(NoAttrs)
JMP_SAME_ORDER(ConstantAttrs)
JMP_SAME_ORDER(AxisAttrs)
JMP_SAME_ORDER(AxesAttrs)
JMP_SAME_ORDER(PermutationAttrs)
JMP_SAME_ORDER(SliceAttrs)
JMP_SAME_ORDER(PadAttrs)
JMP_SAME_ORDER(SortAttrs)
JMP_SAME_ORDER(TopKAttrs)
JMP_SAME_ORDER(CumulativeAttrs)
JMP_SAME_ORDER(FFTAttrs)
JMP_SAME_ORDER(GatherNDAttrs)
JMP_SAME_ORDER(ScatterAttrs)
JMP_SAME_ORDER(Conv2DAttrs)
JMP_SAME_ORDER(Pool4DAttrs)
JMP_SAME_ORDER(LapackAttrs)
JMP_SAME_ORDER(RngAttrs)
JMP_SAME_ORDER(PythonCallbackAttrs)
JMP_SAME_ORDER(MetalKernelAttrs)
JMP_SAME_ORDER(AllReduceAttrs)
#undef JMP_SAME_ORDER

constexpr std::string_view kAttrsKindNames[] = {
    "NoAttrs",     "ConstantAttrs", "AxisAttrs",           "AxesAttrs",        "PermutationAttrs",
    "SliceAttrs",  "PadAttrs",      "SortAttrs",           "TopKAttrs",        "CumulativeAttrs",
    "FFTAttrs",    "GatherNDAttrs", "ScatterAttrs",        "Conv2DAttrs",      "Pool4DAttrs",
    "LapackAttrs", "RngAttrs",      "PythonCallbackAttrs", "MetalKernelAttrs", "AllReduceAttrs"};
static_assert(std::size(kAttrsKindNames) == std::variant_size_v<OpAttrs>);

template <typename... T>
struct Overload : T... {
  using T::operator()...;
};
template <typename... T>
Overload(T...) -> Overload<T...>;

void PrintInts(std::ostream& os, const char* label, const std::vector<int64_t>& v) {
  if (v.empty()) return;
  os << ' ' << label << "=[";
  for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
  os << ']';
}

const char* ScatterModeName(ScatterMode m) {
  switch (m) {
    case ScatterMode::kAdd: return "add";
    case ScatterMode::kSub: return "sub";
    case ScatterMode::kMul: return "mul";
    case ScatterMode::kDiv: return "div";
    case ScatterMode::kMin: return "min";
    case ScatterMode::kMax: return "max";
    case ScatterMode::kSet: return "set";
  }
  return "?";
}

bool Sizes(std::initializer_list<const std::vector<int64_t>*> vs, size_t n) {
  for (const std::vector<int64_t>* v : vs)
    if (v->size() != n) return false;
  return true;
}

}  // namespace

AttrsKind AttrsKindOf(OpKind kind) {
  using A = AttrsKind;
  switch (kind) {
    case OpKind::kConstant: return A::kConstantAttrs;
    case OpKind::kCoordinateAlongAxis:
    case OpKind::kConcat:
    case OpKind::kReductionArgMaximum:
    case OpKind::kReductionArgMinimum:
    case OpKind::kGatherAlongAxis: return A::kAxisAttrs;
    case OpKind::kTranspose: return A::kPermutationAttrs;
    case OpKind::kReverse:
    case OpKind::kReductionSum:
    case OpKind::kReductionProduct:
    case OpKind::kReductionMaximum:
    case OpKind::kReductionMinimum:
    case OpKind::kReductionAnd:
    case OpKind::kReductionOr: return A::kAxesAttrs;
    case OpKind::kSlice: return A::kSliceAttrs;
    case OpKind::kPad: return A::kPadAttrs;
    case OpKind::kSort:
    case OpKind::kArgSort: return A::kSortAttrs;
    case OpKind::kTopK: return A::kTopKAttrs;
    case OpKind::kCumulativeSum:
    case OpKind::kCumulativeProduct:
    case OpKind::kCumulativeMaximum:
    case OpKind::kCumulativeMinimum: return A::kCumulativeAttrs;
    case OpKind::kFFT:
    case OpKind::kRealToHermiteanFFT:
    case OpKind::kHermiteanToRealFFT: return A::kFFTAttrs;
    case OpKind::kGatherND: return A::kGatherNDAttrs;
    case OpKind::kScatterND:
    case OpKind::kScatterAlongAxis: return A::kScatterAttrs;
    case OpKind::kConv2D: return A::kConv2DAttrs;
    case OpKind::kMaxPool4D:
    case OpKind::kAvgPool4D:
    case OpKind::kMaxPool4DGradient: return A::kPool4DAttrs;
#define JMP_LAPACK_OP(name, inputs, domain) case OpKind::k##name:
#include "mps/op_kinds.def"
      return A::kLapackAttrs;
    case OpKind::kRngBitGenerator: return A::kRngAttrs;
    case OpKind::kPythonCallback: return A::kPythonCallbackAttrs;
    case OpKind::kMetalKernel: return A::kMetalKernelAttrs;
    case OpKind::kAllReduce: return A::kAllReduceAttrs;
#define JMP_MPS_UNARY(name, macos, selector, domain) case OpKind::k##name:
#define JMP_MPS_BINARY(name, macos, primary, secondary, domain) case OpKind::k##name:
#include "mps/op_kinds.def"
    case OpKind::kSelect:
    case OpKind::kClamp:
    case OpKind::kMultiplyAdd:
    case OpKind::kCast:
    case OpKind::kReinterpretCast:
    case OpKind::kReshape:
    case OpKind::kBroadcast:
    case OpKind::kMatMul:
    case OpKind::kIntegerMatMul:
    case OpKind::kWhile:
    case OpKind::kIf: return A::kNoAttrs;
  }
  return A::kNoAttrs;
}

std::string_view AttrsKindName(AttrsKind kind) { return kAttrsKindNames[static_cast<size_t>(kind)]; }

Status CheckAttrs(const Op& op) {
  const AttrsKind want = AttrsKindOf(op.kind), held = AttrsKindHeld(op.attrs);
  if (want != held)
    return Internal("holds " + std::string(AttrsKindName(held)) + ", its kind takes " +
                    std::string(AttrsKindName(want)));
  return std::visit(
      Overload{
          [&](const SortAttrs& a) { return a.axis >= 0 ? Status::Ok() : Internal("negative axis"); },
          [&](const CumulativeAttrs& a) { return a.axis >= 0 ? Status::Ok() : Internal("negative axis"); },
          [&](const FFTAttrs& a) { return a.axes.empty() ? Internal("needs axes") : Status::Ok(); },
          [&](const TopKAttrs& a) { return a.k < 0 ? Internal("negative k") : Status::Ok(); },
          [&](const Conv2DAttrs& a) {
            return Sizes({&a.strides, &a.dilations, &a.pad_low, &a.pad_high}, 2) && a.groups > 0
                       ? Status::Ok()
                       : Internal("needs two strides, dilations and paddings, and groups > 0");
          },
          [&](const Pool4DAttrs& a) {
            return Sizes({&a.window, &a.strides, &a.pad_low, &a.pad_high}, 4)
                       ? Status::Ok()
                       : Internal("needs four windows, strides and paddings");
          },
          [&](const PythonCallbackAttrs& a) {
            return a.token_inputs >= 0 && a.token_inputs <= static_cast<int64_t>(op.inputs.size())
                       ? Status::Ok()
                       : Internal("needs a token count within its inputs");
          },
          [&](const AllReduceAttrs& a) {
            BinaryOp binary;
            if (!BinaryOpOf(a.combine, &binary))
              return Internal("combines with " + std::string(OpKindName(a.combine)) + ", not a binary op");
            const size_t members = a.devices.size();
            if (a.processes.empty() ? op.inputs.size() != members : a.processes.size() != members)
              return Internal("needs a device for each member and as many operands as members here");
            if (members == 0 || op.inputs.size() > members) return Internal("needs members");
            return Status::Ok();
          },
          [&](const MetalKernelAttrs& a) {
            if (a.source.empty() || a.entry.empty()) return Internal("a Metal kernel without source or entry");
            for (size_t i = 0; i < 3; ++i)
              if (a.grid[i] < 1 || a.threadgroup[i] < 1)
                return Internal("a Metal kernel's grid or threadgroup is empty");
            return Status::Ok();
          },
          [&](const auto&) { return Status::Ok(); },
      },
      op.attrs);
}

std::string AttrsToString(const OpAttrs& attrs) {
  std::ostringstream os;
  std::visit(
      Overload{
          [&](const NoAttrs&) {},
          [&](const ConstantAttrs& a) { os << " bytes=" << a.data.size(); },
          [&](const AxisAttrs& a) { os << " axis=" << a.axis; },
          [&](const AxesAttrs& a) { PrintInts(os, "axes", a.axes); },
          [&](const PermutationAttrs& a) { PrintInts(os, "permutation", a.permutation); },
          [&](const SliceAttrs& a) {
            PrintInts(os, "starts", a.starts);
            PrintInts(os, "ends", a.ends);
            PrintInts(os, "strides", a.strides);
          },
          [&](const PadAttrs& a) {
            PrintInts(os, "low", a.low);
            PrintInts(os, "high", a.high);
            os << " value=" << a.value;
          },
          [&](const SortAttrs& a) { os << " axis=" << a.axis << (a.descending ? " descending" : ""); },
          [&](const TopKAttrs& a) { os << " k=" << a.k; },
          [&](const CumulativeAttrs& a) {
            os << " axis=" << a.axis << (a.exclusive ? " exclusive" : "") << (a.reverse ? " reverse" : "");
          },
          [&](const FFTAttrs& a) {
            PrintInts(os, "axes", a.axes);
            if (a.inverse) os << " inverse";
          },
          [&](const GatherNDAttrs& a) { os << " batch_dims=" << a.batch_dims; },
          [&](const ScatterAttrs& a) { os << " mode=" << ScatterModeName(a.mode) << " axis=" << a.axis; },
          [&](const Conv2DAttrs& a) {
            PrintInts(os, "strides", a.strides);
            PrintInts(os, "dilations", a.dilations);
            PrintInts(os, "pad_low", a.pad_low);
            PrintInts(os, "pad_high", a.pad_high);
            os << " groups=" << a.groups;
          },
          [&](const Pool4DAttrs& a) {
            PrintInts(os, "window", a.window);
            PrintInts(os, "strides", a.strides);
            PrintInts(os, "pad_low", a.pad_low);
            PrintInts(os, "pad_high", a.pad_high);
          },
          [&](const LapackAttrs& a) {
            for (const auto& [flag, name] : kLapackFlags)
              if (a.*flag) os << ' ' << name;
          },
          [&](const RngAttrs& a) { os << (a.algorithm == RngAlgorithm::kThreeFry ? " threefry" : " philox"); },
          [&](const PythonCallbackAttrs& a) { os << " callback=" << a.callback_id << " tokens=" << a.token_inputs; },
          [&](const AllReduceAttrs& a) {
            os << " combine=" << OpKindName(a.combine);
            PrintInts(os, "devices", a.devices);
            PrintInts(os, "processes", a.processes);
          },
          [&](const MetalKernelAttrs& a) {
            os << " entry=" << a.entry << " source_bytes=" << a.source.size();
            PrintInts(os, "grid", {a.grid.begin(), a.grid.end()});
            PrintInts(os, "threadgroup", {a.threadgroup.begin(), a.threadgroup.end()});
          },
      },
      attrs);
  return os.str();
}

}  // namespace jmp::mps

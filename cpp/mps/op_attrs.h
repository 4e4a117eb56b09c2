// Op parameters, typed: each op kind takes one of the structs below (OpAttrs, a variant), which
// AttrsKindOf names per op_kinds.def row. The lowering builds them and emits them with the op
// (LowerContext::Emit); the verifier checks once that an op holds its kind's alternative and that
// its contents are well formed (CheckAttrs); the executors, placement and printing read named fields
// through Op::Attrs<T>().
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "support/status.h"

namespace jmp::mps {

enum class OpKind : uint16_t;

// Ops without parameters: elementwise, Select, Clamp, Cast, Reshape, Broadcast, MatMul, While, If.
struct NoAttrs {};
// Constant: little-endian bytes of every element.
struct ConstantAttrs {
  std::vector<uint8_t> data;
};
// CoordinateAlongAxis, Concat, ReductionArgMaximum/Minimum, GatherAlongAxis: one dimension.
struct AxisAttrs {
  int64_t axis = 0;
};
// Reverse and the ReductionX ops: the axes they reverse or reduce.
struct AxesAttrs {
  std::vector<int64_t> axes;
};
// Transpose: output dim i is input dim permutation[i].
struct PermutationAttrs {
  std::vector<int64_t> permutation;
};
// Slice: all dims, strides > 0, ends exclusive.
struct SliceAttrs {
  std::vector<int64_t> starts, ends, strides;
};
// Pad (constant mode): low and high padding per dim, and the value.
struct PadAttrs {
  std::vector<int64_t> low, high;
  double value = 0;
};
// Sort / ArgSort along one axis.
struct SortAttrs {
  int64_t axis = 0;
  bool descending = false;
};
// TopK along the last axis.
struct TopKAttrs {
  int64_t k = 0;
};
// CumulativeSum/Product/Maximum/Minimum along one axis.
struct CumulativeAttrs {
  int64_t axis = 0;
  bool exclusive = false;  // element i combines elements before i only
  bool reverse = false;    // from the end of the axis
};
// FFT: forward unscaled, or inverse scaled by 1/N (StableHLO's IFFT). RealToHermiteanFFT and
// HermiteanToRealFFT have a fixed direction and read only the axes.
struct FFTAttrs {
  std::vector<int64_t> axes;
  bool inverse = false;
};
// GatherND: leading batch dimensions shared by data and indices.
struct GatherNDAttrs {
  int64_t batch_dims = 0;
};
// ScatterND / ScatterAlongAxis: how an update combines with the data, in MPSGraphScatterMode's order.
enum class ScatterMode : uint8_t { kAdd, kSub, kMul, kDiv, kMin, kMax, kSet };
struct ScatterAttrs {
  ScatterMode mode = ScatterMode::kSet;
  int64_t axis = 0;  // ScatterAlongAxis only
};
// Conv2D: x NHWC, w HWIO (the only layouts the lowering emits); each pair is (H, W).
struct Conv2DAttrs {
  std::vector<int64_t> strides, dilations, pad_low, pad_high;
  int64_t groups = 1;  // w's I = C / groups
};
// MaxPool4D / AvgPool4D / MaxPool4DGradient: all four dims each.
struct Pool4DAttrs {
  std::vector<int64_t> window, strides, pad_low, pad_high;
};
// The LAPACK ops' flags (op_kinds.def says which each reads).
struct LapackAttrs {
  bool lower = false, left_side = false, transpose = false, conjugate = false, unit_diagonal = false;
  bool sort = false, full_matrices = false, compute_uv = false, compute_left = false, compute_right = false;
  bool perturb_singular = false;
};
// Every flag with its name, for printing and serialization.
inline constexpr std::pair<bool LapackAttrs::*, std::string_view> kLapackFlags[] = {
    {&LapackAttrs::lower, "lower"},
    {&LapackAttrs::left_side, "left_side"},
    {&LapackAttrs::transpose, "transpose"},
    {&LapackAttrs::conjugate, "conjugate"},
    {&LapackAttrs::unit_diagonal, "unit_diagonal"},
    {&LapackAttrs::sort, "sort"},
    {&LapackAttrs::full_matrices, "full_matrices"},
    {&LapackAttrs::compute_uv, "compute_uv"},
    {&LapackAttrs::compute_left, "compute_left"},
    {&LapackAttrs::compute_right, "compute_right"},
    {&LapackAttrs::perturb_singular, "perturb_singular"},
};
// RngBitGenerator: which bit generator (StableHLO's DEFAULT is resolved by the lowering).
enum class RngAlgorithm : uint8_t { kThreeFry, kPhilox };
struct RngAttrs {
  RngAlgorithm algorithm = RngAlgorithm::kPhilox;
};
// PythonCallback: which registered Python function to call, and how many leading inputs are tokens.
struct PythonCallbackAttrs {
  int64_t callback_id = 0;
  int64_t token_inputs = 0;
};

// AllReduce: the BINARY row that combines members, and per member (group order) the device its operand
// comes from and, in one process's part of a program, its process (empty: every member is an operand).
struct AllReduceAttrs {
  OpKind combine{};
  std::vector<int64_t> devices;
  std::vector<int64_t> processes;
};

// MetalKernel: the user's kernel (op_kinds.def).
struct MetalKernelAttrs {
  std::string source;  // Metal Shading Language
  std::string entry;   // the kernel function's name
  std::array<int64_t, 3> grid{1, 1, 1};
  std::array<int64_t, 3> threadgroup{1, 1, 1};
};

// One alternative per kind of parameters; AttrsKind names them in the same order.
using OpAttrs = std::variant<NoAttrs, ConstantAttrs, AxisAttrs, AxesAttrs, PermutationAttrs, SliceAttrs, PadAttrs,
                             SortAttrs, TopKAttrs, CumulativeAttrs, FFTAttrs, GatherNDAttrs, ScatterAttrs, Conv2DAttrs,
                             Pool4DAttrs, LapackAttrs, RngAttrs, PythonCallbackAttrs, MetalKernelAttrs, AllReduceAttrs>;
enum class AttrsKind : uint8_t {
  kNoAttrs,
  kConstantAttrs,
  kAxisAttrs,
  kAxesAttrs,
  kPermutationAttrs,
  kSliceAttrs,
  kPadAttrs,
  kSortAttrs,
  kTopKAttrs,
  kCumulativeAttrs,
  kFFTAttrs,
  kGatherNDAttrs,
  kScatterAttrs,
  kConv2DAttrs,
  kPool4DAttrs,
  kLapackAttrs,
  kRngAttrs,
  kPythonCallbackAttrs,
  kMetalKernelAttrs,
  kAllReduceAttrs
};
static_assert(std::variant_size_v<OpAttrs> == static_cast<size_t>(AttrsKind::kAllReduceAttrs) + 1);
// The parameters each op kind takes (a switch over every op_kinds.def row, no default).
AttrsKind AttrsKindOf(OpKind kind);
// The kind of parameters `attrs` holds; AttrsKindName: "SliceAttrs".
inline AttrsKind AttrsKindHeld(const OpAttrs& attrs) { return static_cast<AttrsKind>(attrs.index()); }
std::string_view AttrsKindName(AttrsKind kind);

struct Op;
// The verifier's check, once per op: it holds its kind's alternative, with well-formed contents (counts
// and ranges; shapes are checked against its operands by the verifier and the kernels).
Status CheckAttrs(const Op& op);
// "axes=[0,1]", "starts=[..] ends=[..] strides=[..]", ...: the op's parameters for Graph::ToString.
std::string AttrsToString(const OpAttrs& attrs);

}  // namespace jmp::mps

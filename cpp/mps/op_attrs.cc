#include "mps/op_attrs.h"

#include <algorithm>

#include <string>

namespace jmp::mps {

namespace {

// Where each flag sits in int_attr (op_kinds.def's comments describe the same encoding).
constexpr int64_t kSortDescending = 1;
constexpr int64_t kCumulativeExclusive = 1, kCumulativeReverse = 2;
constexpr int64_t kFFTInverse = 1;

int64_t First(const std::vector<int64_t>& v) { return v.empty() ? 0 : v[0]; }

}  // namespace

void Encode(Op& op, const AxesAttrs& a) { op.axes = a.axes; }
void Encode(Op& op, const AxisAttrs& a) { op.axes = {a.axis}; }
void Encode(Op& op, const SliceAttrs& a) {
  op.starts = a.starts;
  op.ends = a.ends;
  op.strides = a.strides;
}
void Encode(Op& op, const PadAttrs& a) {
  op.starts = a.low;
  op.ends = a.high;
  op.scalar = a.value;
}
void Encode(Op& op, const ConstantAttrs& a) { op.data = a.data; }

void Encode(Op& op, const SortAttrs& a) {
  op.axes = {a.axis};
  op.int_attr = a.descending ? kSortDescending : 0;
}
SortAttrs SortAttrs::Of(const Op& op) { return {First(op.axes), (op.int_attr & kSortDescending) != 0}; }

void Encode(Op& op, const TopKAttrs& a) { op.int_attr = a.k; }
TopKAttrs TopKAttrs::Of(const Op& op) { return {op.int_attr}; }

void Encode(Op& op, const CumulativeAttrs& a) {
  op.axes = {a.axis};
  op.int_attr = (a.exclusive ? kCumulativeExclusive : 0) | (a.reverse ? kCumulativeReverse : 0);
}
CumulativeAttrs CumulativeAttrs::Of(const Op& op) {
  return {First(op.axes), (op.int_attr & kCumulativeExclusive) != 0, (op.int_attr & kCumulativeReverse) != 0};
}

void Encode(Op& op, const FFTAttrs& a) {
  op.axes = a.axes;
  op.int_attr = a.inverse ? kFFTInverse : 0;
}
FFTAttrs FFTAttrs::Of(const Op& op) { return {op.axes, op.int_attr == kFFTInverse}; }

void Encode(Op& op, const GatherNDAttrs& a) { op.int_attr = a.batch_dims; }
GatherNDAttrs GatherNDAttrs::Of(const Op& op) { return {op.int_attr}; }

void Encode(Op& op, const ScatterAttrs& a) {
  op.int_attr = static_cast<int64_t>(a.mode);
  if (op.kind == OpKind::kScatterAlongAxis) op.axes = {a.axis};
}
ScatterAttrs ScatterAttrs::Of(const Op& op) {
  bool known = op.int_attr >= 0 && op.int_attr <= static_cast<int64_t>(ScatterMode::kSet);
  return {known ? static_cast<ScatterMode>(op.int_attr) : ScatterMode::kSet, First(op.axes)};
}

void Encode(Op& op, const Conv2DAttrs& a) {
  op.strides = a.strides;
  op.axes = a.dilations;
  op.starts = a.pad_low;
  op.ends = a.pad_high;
  op.int_attr = a.groups;
}
Conv2DAttrs Conv2DAttrs::Of(const Op& op) {
  return {op.strides, op.axes, op.starts, op.ends, op.int_attr > 0 ? op.int_attr : 1};
}

void Encode(Op& op, const Pool4DAttrs& a) {
  op.axes = a.window;
  op.strides = a.strides;
  op.starts = a.pad_low;
  op.ends = a.pad_high;
}
Pool4DAttrs Pool4DAttrs::Of(const Op& op) { return {op.axes, op.strides, op.starts, op.ends}; }

void Encode(Op& op, const RngAttrs& a) { op.int_attr = static_cast<int64_t>(a.algorithm); }
RngAttrs RngAttrs::Of(const Op& op) {
  return {op.int_attr == static_cast<int64_t>(RngAlgorithm::kThreeFry) ? RngAlgorithm::kThreeFry
                                                                       : RngAlgorithm::kPhilox};
}
void Encode(Op& op, const PythonCallbackAttrs& a) {
  op.int_attr = a.callback_id;
  op.axes = {a.token_inputs};
}
PythonCallbackAttrs PythonCallbackAttrs::Of(const Op& op) { return {op.int_attr, First(op.axes)}; }

// The entry's name, a NUL, then the source, in data; grid then threadgroup in axes.
void Encode(Op& op, const MetalKernelAttrs& a) {
  op.data.assign(a.entry.begin(), a.entry.end());
  op.data.push_back(0);
  op.data.insert(op.data.end(), a.source.begin(), a.source.end());
  op.axes.assign(a.grid.begin(), a.grid.end());
  op.axes.insert(op.axes.end(), a.threadgroup.begin(), a.threadgroup.end());
}
MetalKernelAttrs MetalKernelAttrs::Of(const Op& op) {
  MetalKernelAttrs a;
  auto nul = std::find(op.data.begin(), op.data.end(), uint8_t{0});
  a.entry.assign(op.data.begin(), nul);
  if (nul != op.data.end()) a.source.assign(nul + 1, op.data.end());
  for (size_t i = 0; i < 3 && i < op.axes.size(); ++i) a.grid[i] = op.axes[i];
  for (size_t i = 0; i < 3 && i + 3 < op.axes.size(); ++i) a.threadgroup[i] = op.axes[i + 3];
  return a;
}
namespace {
constexpr int kLapackFlags = 11;
bool* LapackFlag(LapackAttrs& a, int i) {
  bool* flags[kLapackFlags] = {&a.lower,         &a.left_side,     &a.transpose,       &a.conjugate,
                               &a.unit_diagonal, &a.sort,          &a.full_matrices,   &a.compute_uv,
                               &a.compute_left,  &a.compute_right, &a.perturb_singular};
  return flags[i];
}
}  // namespace

void Encode(Op& op, const LapackAttrs& a) {
  LapackAttrs copy = a;
  op.int_attr = 0;
  for (int i = 0; i < kLapackFlags; ++i)
    if (*LapackFlag(copy, i)) op.int_attr |= int64_t{1} << i;
}
LapackAttrs LapackAttrs::Of(const Op& op) {
  LapackAttrs a;
  for (int i = 0; i < kLapackFlags; ++i) *LapackFlag(a, i) = (op.int_attr >> i) & 1;
  return a;
}

Status CheckAttrs(const Op& op) {
  using K = OpKind;
  auto is = [&](std::initializer_list<K> kinds) {
    for (K k : kinds)
      if (op.kind == k) return true;
    return false;
  };
  auto sizes = [](std::initializer_list<const std::vector<int64_t>*> vs, size_t n) {
    for (const std::vector<int64_t>* v : vs)
      if (v->size() != n) return false;
    return true;
  };
  if (is({K::kSort, K::kArgSort, K::kCumulativeSum, K::kCumulativeProduct, K::kCumulativeMaximum, K::kCumulativeMinimum,
          K::kGatherAlongAxis, K::kScatterAlongAxis}) &&
      op.axes.size() != 1)
    return Internal("needs one axis");
  if (is({K::kFFT, K::kRealToHermiteanFFT, K::kHermiteanToRealFFT}) && op.axes.empty()) return Internal("needs axes");
  if (is({K::kTopK}) && op.int_attr < 0) return Internal("negative k");
  if (is({K::kConv2D}) && (!sizes({&op.strides, &op.axes, &op.starts, &op.ends}, 2) || op.int_attr < 0))
    return Internal("needs two strides, dilations and paddings, and groups >= 0");
  if (is({K::kMaxPool4D, K::kAvgPool4D, K::kMaxPool4DGradient}) &&
      !sizes({&op.axes, &op.strides, &op.starts, &op.ends}, 4))
    return Internal("needs four windows, strides and paddings");
  if (is({K::kScatterND, K::kScatterAlongAxis}) &&
      (op.int_attr < 0 || op.int_attr > static_cast<int64_t>(ScatterMode::kSet)))
    return Internal("unknown scatter mode " + std::to_string(op.int_attr));
  if (is({K::kRngBitGenerator}) && (op.int_attr < 0 || op.int_attr > static_cast<int64_t>(RngAlgorithm::kPhilox)))
    return Internal("unknown random algorithm " + std::to_string(op.int_attr));
  if (is({K::kPythonCallback}) &&
      (op.axes.size() != 1 || op.axes[0] < 0 || op.axes[0] > static_cast<int64_t>(op.inputs.size())))
    return Internal("needs a token count within its inputs");
  if (is({K::kLapackCholesky, K::kLapackTriangularSolve, K::kLapackLu, K::kLapackQr, K::kLapackHouseholderProduct,
          K::kLapackEigh, K::kLapackSvd, K::kLapackEig, K::kLapackTridiagonal, K::kLapackPivotedQr,
          K::kLapackTridiagonalSolve}) &&
      (op.int_attr < 0 || op.int_attr >= (int64_t{1} << kLapackFlags)))
    return Internal("unknown LAPACK flags " + std::to_string(op.int_attr));
  return Status::Ok();
}

int64_t PackedIntAttr(const Op& op) { return op.int_attr; }
void SetPackedIntAttr(Op& op, int64_t packed) { op.int_attr = packed; }

}  // namespace jmp::mps

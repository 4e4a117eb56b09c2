// Typed views of MPS op attributes: the one place that knows how each op's parameters sit in
// mps::Op's generic fields (axes, starts, ends, strides, scalar, int_attr, data). The lowering builds
// these structs and emits them with the op (LowerContext::Emit); the verifier and both executors read
// them back with X::Of(op). Nothing else reads int_attr, so no number means a mode anywhere else.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "mps/graph.h"
#include "support/status.h"

namespace jmp::mps {

// ---- one field

// Transpose (the permutation), Reverse and ReductionX (the axes), FFT's axes come with FFTAttrs.
struct AxesAttrs {
  std::vector<int64_t> axes;
  static AxesAttrs Of(const Op& op) { return {op.axes}; }
};
// Concat, CoordinateAlongAxis, ReductionArgMaximum/Minimum, GatherAlongAxis: one dimension.
struct AxisAttrs {
  int64_t axis = 0;
  static AxisAttrs Of(const Op& op) { return {op.axes.empty() ? 0 : op.axes[0]}; }
};
// Slice: all dims, strides > 0, ends exclusive.
struct SliceAttrs {
  std::vector<int64_t> starts, ends, strides;
  static SliceAttrs Of(const Op& op) { return {op.starts, op.ends, op.strides}; }
};
// Pad (constant mode): low and high padding per dim, and the value.
struct PadAttrs {
  std::vector<int64_t> low, high;
  double value = 0;
  static PadAttrs Of(const Op& op) { return {op.starts, op.ends, op.scalar}; }
};
// Constant: little-endian bytes of every element.
struct ConstantAttrs {
  std::vector<uint8_t> data;
};

// ---- several

// Sort / ArgSort along one axis.
struct SortAttrs {
  int64_t axis = 0;
  bool descending = false;
  static SortAttrs Of(const Op& op);
};
// TopK along the last axis.
struct TopKAttrs {
  int64_t k = 0;
  static TopKAttrs Of(const Op& op);
};
// CumulativeSum/Product/Maximum/Minimum along one axis.
struct CumulativeAttrs {
  int64_t axis = 0;
  bool exclusive = false;  // element i combines elements before i only
  bool reverse = false;    // from the end of the axis
  static CumulativeAttrs Of(const Op& op);
};
// FFT: forward unscaled, or inverse scaled by 1/N (StableHLO's IFFT). RealToHermiteanFFT and
// HermiteanToRealFFT have a fixed direction and read only the axes.
struct FFTAttrs {
  std::vector<int64_t> axes;
  bool inverse = false;
  static FFTAttrs Of(const Op& op);
};
// GatherND: leading batch dimensions shared by data and indices.
struct GatherNDAttrs {
  int64_t batch_dims = 0;
  static GatherNDAttrs Of(const Op& op);
};
// ScatterND / ScatterAlongAxis: how an update combines with the data, in MPSGraphScatterMode's order.
enum class ScatterMode : uint8_t { kAdd, kSub, kMul, kDiv, kMin, kMax, kSet };
struct ScatterAttrs {
  ScatterMode mode = ScatterMode::kSet;
  int64_t axis = 0;  // ScatterAlongAxis only
  static ScatterAttrs Of(const Op& op);
};
// Conv2D: x NHWC, w HWIO (the only layouts the lowering emits); each pair is (H, W).
struct Conv2DAttrs {
  std::vector<int64_t> strides, dilations, pad_low, pad_high;
  int64_t groups = 1;  // w's I = C / groups
  static Conv2DAttrs Of(const Op& op);
};
// MaxPool4D / AvgPool4D / MaxPool4DGradient: all four dims each.
struct Pool4DAttrs {
  std::vector<int64_t> window, strides, pad_low, pad_high;
  static Pool4DAttrs Of(const Op& op);
};
// The LAPACK ops' flags (op_kinds.def says which each reads), one bit each of int_attr.
struct LapackAttrs {
  bool lower = false, left_side = false, transpose = false, conjugate = false, unit_diagonal = false;
  bool sort = false, full_matrices = false, compute_uv = false, compute_left = false, compute_right = false;
  bool perturb_singular = false;
  static LapackAttrs Of(const Op& op);
};

// RngBitGenerator: which bit generator (StableHLO's DEFAULT is resolved by the lowering).
enum class RngAlgorithm : uint8_t { kThreeFry, kPhilox };
struct RngAttrs {
  RngAlgorithm algorithm = RngAlgorithm::kPhilox;
  static RngAttrs Of(const Op& op);
};

// PythonCallback: which registered Python function to call, and how many leading inputs are tokens.
struct PythonCallbackAttrs {
  int64_t callback_id = 0;
  int64_t token_inputs = 0;
  static PythonCallbackAttrs Of(const Op& op);
};

// MetalKernel: the user's kernel (op_kinds.def).
struct MetalKernelAttrs {
  std::string source;  // Metal Shading Language
  std::string entry;   // the kernel function's name
  std::array<int64_t, 3> grid{1, 1, 1};
  std::array<int64_t, 3> threadgroup{1, 1, 1};
  static MetalKernelAttrs Of(const Op& op);
};

void Encode(Op& op, const AxesAttrs& a);
void Encode(Op& op, const AxisAttrs& a);
void Encode(Op& op, const SliceAttrs& a);
void Encode(Op& op, const PadAttrs& a);
void Encode(Op& op, const ConstantAttrs& a);
void Encode(Op& op, const MetalKernelAttrs& a);
void Encode(Op& op, const SortAttrs& a);
void Encode(Op& op, const TopKAttrs& a);
void Encode(Op& op, const CumulativeAttrs& a);
void Encode(Op& op, const FFTAttrs& a);
void Encode(Op& op, const GatherNDAttrs& a);
void Encode(Op& op, const ScatterAttrs& a);
void Encode(Op& op, const Conv2DAttrs& a);
void Encode(Op& op, const Pool4DAttrs& a);
void Encode(Op& op, const RngAttrs& a);
void Encode(Op& op, const PythonCallbackAttrs& a);
void Encode(Op& op, const LapackAttrs& a);

// The encoding of the ops above with several attributes is one this file writes (for the verifier:
// Of() then reads in bounds; shapes are checked by their kernels).
Status CheckAttrs(const Op& op);

// The packed integer as it is, for copying an op byte for byte (mps/graph_serial.cc); it means nothing
// outside the typed views above.
int64_t PackedIntAttr(const Op& op);
void SetPackedIntAttr(Op& op, int64_t packed);

}  // namespace jmp::mps

// The host executor's kernels, one function per MPS op family, each following op_kinds.def exactly.
#pragma once

#include <cstdint>
#include <vector>

#include "mps/graph.h"
#include "mps/op_attrs.h"
#include "support/status.h"

namespace jmp::exec::host {

// A MatMul operand read where a Transpose's source holds it (the plan skipped the Transpose): matrix
// b of the operand's batch starts at the offset its batch index has by `batch_strides` (over
// `batch_shape`, row-major), and each matrix has leading dimension `ld`, read transposed when `trans`
// (its columns, not its rows, are contiguous). Attention's per-head matrices, for instance.
struct StridedMatrix {
  bool trans = false;
  int64_t ld = 0;
  std::vector<int64_t> batch_shape, batch_strides;  // in elements
  int64_t BatchOffset(int64_t b) const {
    int64_t off = 0;
    for (size_t d = batch_shape.size(); d-- > 0;) {
      off += (b % batch_shape[d]) * batch_strides[d];
      b /= batch_shape[d];
    }
    return off;
  }
};

struct PickedChain;

// What a kernel sees of one op: its buffers and types.
struct OpArgs {
  const mps::Op& op;
  const mps::Graph& graph;
  std::vector<const uint8_t*> in;
  std::vector<uint8_t*> out;
  // MatMul only: operand i arrives as the input of the Transpose (of its last two dims) that made it,
  // which the plan skipped; BLAS applies the transpose.
  bool transposed[2] = {false, false};
  const StridedMatrix* strided[2] = {nullptr, nullptr};  // MatMul only: an operand read in place, strided
  // MatMul only: write the product's last two dims transposed (a Transpose reading it was folded in).
  bool transposed_out = false;
  // MatMul only: the product times `alpha` is added to this operand of the result's shape and layout.
  const uint8_t* addend = nullptr;
  double alpha = 1;
  // A fused run (host_fused.cc) hands elementwise kernels one tile: `count` elements starting at flat
  // element `base` of the output, every operand pointer already at the tile (a one-element operand
  // where the op takes one: not moved). -1: the whole output.
  int64_t count = -1, base = 0;
  // Operand j holds one value repeated (a fused group's splat): binary kernels and vector selects read
  // element 0 only, which lets a shift by it use the vector unit's shift-by-scalar and keeps a select of
  // polynomial coefficients from streaming whole tiles of them.
  bool uniform[3] = {false, false, false};
  // MultiplyAdd only, in a fused tile: a chain of them with picked addends (in[2] is not read).
  const PickedChain* chain = nullptr;
  // BitwiseOr only, in a fused tile: its operands are x << in[1] and x >> in[2] of one unsigned x
  // (in[0]), shifted by splats and never stored (threefry's rotations).
  bool or_of_shifts = false;
  int64_t Count() const { return count >= 0 ? count : OutType().NumElements(); }
  const mps::TensorType& InType(size_t i) const { return graph.type(op.inputs[i]); }
  const mps::TensorType& OutType(size_t i = 0) const { return graph.type(op.outputs[i]); }
  Status Unsupported(const char* what) const;
};

// host_small_kernels.cc: the elementwise ops a bound plan (a loop's body) calls straight, without the
// generic kernels' per-call dispatch: the kernel for op's kind and types, or null for the generic kernel.
// `count` is what the kernel is called with (elements, or bytes for a whole-operand select).
using SmallKernel = void (*)(const uint8_t* const* in, uint8_t* out, int64_t count);
SmallKernel SmallKernelFor(const mps::Graph& g, const mps::Op& op, int64_t* count);

void ConfigureBlasThreads();  // once, when the host executor is created

// The table's JMP_MPS_UNARY / JMP_MPS_BINARY rows, every one of them.
Status RunUnary(const OpArgs& a, mps::UnaryOp op);
Status RunBinary(const OpArgs& a, mps::BinaryOp op);
Status RunSelect(const OpArgs& a);
// host_vector_loops.cc: float32, float64 and 32/64-bit integer arithmetic, float64 comparisons and log,
// sqrt, negate and abs, 4/8-byte selects (elementwise predicate), built for AVX2 and AVX-512 too; false
// when op and type have no such loop (the generic kernel runs).
bool VectorBinary(const OpArgs& a, mps::BinaryOp op);
bool VectorUnary(const OpArgs& a, mps::UnaryOp op);
bool VectorSelect(const OpArgs& a);
bool VectorOrOfShifts(const OpArgs& a);  // OpArgs::or_of_shifts; false for a type without the loop
Status RunClamp(const OpArgs& a);
Status RunMultiplyAdd(const OpArgs& a);  // host_multiply_add.cc
// A chain of multiply-adds y = y * w + c over one w, each addend c a splat picked per element by at most
// two predicates (host_fused.cc: a polynomial, as erf_inv's, whose coefficients come in sets), computed
// in one loop that keeps y in registers: in[0] is the first y, in[1] is w. Link j's addend is
// coefficients[4 * j + p + 2 * q], p and q the predicates' values (0 where there is none). A link
// may be guarded, y = pred ? y * w + c : y (erf_inv's longer polynomial for one set): bit p + 2q of
// applies[j] says whether it applies.
struct PickedChain {
  static constexpr int kMaxLinks = 64;
  int links = 0;
  const void* coefficients = nullptr;  // of the output's type
  const uint8_t* applies = nullptr;    // per link; null: every link applies everywhere
  int preds = 0;
  const uint8_t* pred[2] = {nullptr, nullptr};
};
Status RunCast(const OpArgs& a);

Status RunCopyLike(const OpArgs& a);  // Identity, Reshape, ReinterpretCast
Status RunTranspose(const OpArgs& a);
Status RunBroadcast(const OpArgs& a);
// How a fused tile makes a Broadcast's output from its whole source (host_fused.cc fuses only these):
// the source is the output's trailing dims (element i is source[i mod its size]: a splat, a bias row),
// or its leading dims (element i is source[i / repeat]: a keepdims reduction broadcast back).
struct TiledBroadcast {
  enum Kind { kNone, kTrailing, kLeading } kind = kNone;
  int64_t repeat = 1;  // kLeading: output elements per source element
};
TiledBroadcast TiledBroadcastOf(const std::vector<int64_t>& in, const std::vector<int64_t>& out);
Status RunSlice(const OpArgs& a);
Status RunConcat(const OpArgs& a);
Status RunPad(const OpArgs& a);
Status RunReverse(const OpArgs& a);
Status RunCoordinate(const OpArgs& a);
// Shared with the gather/scatter kernels (defined in host_shape.cc).
std::vector<int64_t> RowMajorStrides(const std::vector<int64_t>& shape);
size_t Width(const OpArgs& a);  // bytes per output element
Status RunGatherAlongAxis(const OpArgs& a);
Status RunScatterAlongAxis(const OpArgs& a);
Status RunGatherND(const OpArgs& a);
Status RunScatterND(const OpArgs& a);

Status RunMatMul(const OpArgs& a);
// Two MatMuls no one of which reads the other's result, run at the same time (Plan::paired_matmul).
Status RunMatMulPair(const OpArgs& a, const OpArgs& b);
// How ReductionX and CumulativeX combine elements (And/Or: reductions of bool only).
enum class Reduction { kSum, kProduct, kMaximum, kMinimum, kAnd, kOr };
Status RunReduction(const OpArgs& a, Reduction how);
Status RunArgReduction(const OpArgs& a);
Status RunCumulative(const OpArgs& a, Reduction how);
Status RunSort(const OpArgs& a);  // Sort, ArgSort
Status RunTopK(const OpArgs& a);
enum class FFTKind { kComplex, kRealToHermitean, kHermiteanToReal };  // FFT, RealToHermiteanFFT, HermiteanToRealFFT
Status RunFFT(const OpArgs& a, FFTKind kind);
Status RunConv2D(const OpArgs& a);
Status RunPool4D(const OpArgs& a);  // MaxPool4D, AvgPool4D
Status RunMaxPool4DGradient(const OpArgs& a);
Status RunRngBitGenerator(const OpArgs& a);  // host-only

// PythonCallback (host_callback.cc): calls the trampoline jax_metal_plugin installed.
Status RunPythonCallback(const OpArgs& a);
Status RunAllReduce(const OpArgs& a);  // host_collective.cc

// The LAPACK rows (host_lapack.cc, host_lapack_eigen.cc).
Status RunLapackCholesky(const OpArgs& a);
Status RunLapackTriangularSolve(const OpArgs& a);
Status RunLapackLu(const OpArgs& a);
Status RunLapackQr(const OpArgs& a);
Status RunLapackHouseholderProduct(const OpArgs& a);
Status RunLapackEigh(const OpArgs& a);
Status RunLapackSvd(const OpArgs& a);
Status RunLapackEig(const OpArgs& a);
Status RunLapackTridiagonal(const OpArgs& a);
Status RunLapackPivotedQr(const OpArgs& a);
Status RunLapackTridiagonalSolve(const OpArgs& a);

}  // namespace jmp::exec::host

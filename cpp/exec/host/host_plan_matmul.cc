// The planner's MatMul rewrites: transposes read by BLAS instead of run, products added to a value by
// GEMM itself, and pairs of products run side by side.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "exec/host/host_parallel.h"
#include "exec/host/host_plan.h"
#include "exec/host/host_plan_passes.h"

namespace jmp::exec::host {

namespace {

// Per root value: how many ops read it at run time (a view's readers count at its root; a MatMul reading
// a skipped Transpose's source counts at the source). A slice view runs no op but its readers read its
// data's storage, so it counts as one reader of its data and indices: the MatMul passes must not reuse
// or relayout storage a block of it is still read from.
std::vector<int> RunTimeReaders(const Plan& plan) {
  const mps::Graph& g = *plan.graph;
  std::vector<int> uses(g.values.size(), 0);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const mps::Op& op = g.ops[i];
    const bool slice_view =
        plan.view_op[i] && op.outputs.size() == 1 && plan.slice_view[static_cast<size_t>(op.outputs[0])] >= 0;
    if (Runs(plan, i) || slice_view)
      for (size_t j = 0; j < op.inputs.size(); ++j) ++uses[static_cast<size_t>(ReadRoot(plan, i, j))];
  }
  return uses;
}

// Whether a Transpose swaps its operand's last two dims and keeps the others in place.
bool SwapsLastTwo(const mps::Graph& g, const mps::Op& t) {
  const std::vector<int64_t>& perm = t.Attrs<mps::PermutationAttrs>().permutation;
  size_t r = perm.size();
  if (t.kind != mps::OpKind::kTranspose || r < 2 || g.type(t.inputs[0]).shape.size() != r) return false;
  bool swap = perm[r - 2] == static_cast<int64_t>(r - 1) && perm[r - 1] == static_cast<int64_t>(r - 2);
  for (size_t d = 0; d + 2 < r; ++d) swap &= perm[d] == static_cast<int64_t>(d);
  return swap;
}

// Whether a MatMul operand, a view of Transpose t's result, is t's operand read transposed in
// its last two dims: t swaps the last two dims, or t rotates the dims of its operand (a transpose of it
// seen as one matrix, as dot_general makes for a weight gradient, x^T g over batch and sequence) and
// the operand is that matrix.
bool ReadsTransposed(const mps::Graph& g, const mps::Op& t, const mps::TensorType& operand) {
  const std::vector<int64_t>& perm = t.Attrs<mps::PermutationAttrs>().permutation;
  const std::vector<int64_t>& as = operand.shape;
  if (t.kind != mps::OpKind::kTranspose || t.outputs.size() != 1 || as.size() < 2) return false;
  const std::vector<int64_t>& in = g.type(t.inputs[0]).shape;
  const size_t r = in.size(), n = as.size();
  if (SwapsLastTwo(g, t)) {  // read through a reshape that only regroups the batch dims
    const std::vector<int64_t>& out = g.type(t.outputs[0]).shape;
    return as[n - 2] == out[r - 2] && as[n - 1] == out[r - 1] &&
           g.type(t.outputs[0]).NumElements() == operand.NumElements();
  }
  if (perm.size() != r) return false;
  for (size_t s = 1; s < r; ++s) {
    bool rotation = true;
    for (size_t d = 0; d < r; ++d) rotation &= perm[d] == static_cast<int64_t>((s + d) % r);
    if (!rotation) continue;
    int64_t cols = 1, rows = 1, batch = 1;
    for (size_t d = 0; d < r; ++d) (d < s ? cols : rows) *= in[d];
    for (size_t d = 0; d + 2 < n; ++d) batch *= as[d];
    return batch == 1 && as[n - 2] == rows && as[n - 1] == cols;
  }
  return false;
}

// Whether a MatMul operand, a view of Transpose t's result that keeps its last two dims, can be read in
// t's source as strided matrices: one of the two matrix dims is contiguous in the source (attention's
// head split [b, t, h, d] -> [b, h, t, d], its key transpose [b, h, d, t]). Fills `how`.
bool ReadsStrided(const mps::Graph& g, const mps::Op& t, const mps::TensorType& operand, StridedMatrix* how) {
  const std::vector<int64_t>& perm = t.Attrs<mps::PermutationAttrs>().permutation;
  const std::vector<int64_t>& as = operand.shape;
  if (t.kind != mps::OpKind::kTranspose || t.outputs.size() != 1 || as.size() < 2) return false;
  const std::vector<int64_t>& in = g.type(t.inputs[0]).shape;
  const std::vector<int64_t>& os = g.type(t.outputs[0]).shape;
  const size_t r = in.size(), n = as.size();
  if (perm.size() != r || r < 2 || as[n - 2] != os[r - 2] || as[n - 1] != os[r - 1] ||
      operand.NumElements() != g.type(t.outputs[0]).NumElements())
    return false;
  std::vector<int64_t> strides = RowMajorStrides(in);
  const int64_t row = strides[static_cast<size_t>(perm[r - 2])], col = strides[static_cast<size_t>(perm[r - 1])];
  if (col != 1 && row != 1) return false;
  how->trans = col != 1;
  how->ld = col == 1 ? row : col;
  how->batch_shape.assign(os.begin(), os.end() - 2);
  how->batch_strides.clear();
  for (size_t d = 0; d + 2 < r; ++d) how->batch_strides.push_back(strides[static_cast<size_t>(perm[d])]);
  return how->ld > 0;
}

}  // namespace

// A MatMul operand made by a Transpose that ReadsTransposed is read untransposed (BLAS transposes), and
// the Transpose is skipped when nothing else reads its result.
void FoldMatMulTransposes(Plan& plan, const std::vector<int>& producer) {
  const mps::Graph& g = *plan.graph;
  plan.matmul_source.assign(g.ops.size(), {-1, -1});
  plan.matmul_strided.assign(g.ops.size(), {});
  // Per root value: its readers at run time and those folded here.
  const std::vector<int> uses = RunTimeReaders(plan);
  std::vector<int> folded_uses(g.values.size(), 0);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const mps::Op& op = g.ops[i];
    if (op.kind != mps::OpKind::kMatMul || plan.folded_op[i] || op.inputs.size() != 2) continue;
    DType t = g.type(op.outputs[0]).dtype;
    if (t != DType::kF32 && t != DType::kF64 && t != DType::kC64 && t != DType::kC128) continue;  // BLAS types
    for (size_t j = 0; j < 2; ++j) {
      const int r = Root(plan, op.inputs[j]);
      int p = producer[static_cast<size_t>(r)];
      if (p < 0 || plan.folded_op[static_cast<size_t>(p)]) continue;
      const mps::Op& tr = g.ops[static_cast<size_t>(p)];
      if (!ReadsTransposed(g, tr, g.type(op.inputs[j])) &&
          !ReadsStrided(g, tr, g.type(op.inputs[j]), &plan.matmul_strided[i][j]))
        continue;
      plan.matmul_source[i][j] = tr.inputs[0];
      ++folded_uses[static_cast<size_t>(r)];
    }
  }
  const std::vector<uint8_t> is_output = OutputRoots(plan);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const mps::Op& op = g.ops[i];
    if (op.kind != mps::OpKind::kTranspose || op.outputs.size() != 1) continue;
    size_t v = static_cast<size_t>(op.outputs[0]);
    if (folded_uses[v] > 0 && folded_uses[v] == uses[v] && !is_output[v]) plan.skipped_op[i] = 1;
  }
  // A Transpose (of the last two dims) that is the only reader of a MatMul's result: the MatMul writes
  // its result transposed (BLAS computes B^T A^T) and the Transpose becomes a view of it (a weight
  // gradient, x^T g, is often transposed straight back).
  plan.matmul_transposed_out.assign(g.ops.size(), 0);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const mps::Op& t = g.ops[i];
    if (t.kind != mps::OpKind::kTranspose || plan.skipped_op[i] || plan.folded_op[i] || t.outputs.size() != 1 ||
        folded_uses[static_cast<size_t>(t.outputs[0])] > 0)  // a MatMul reads its source already
      continue;
    int src = t.inputs[0];
    int p = producer[static_cast<size_t>(src)];
    if (!SwapsLastTwo(g, t) || p < 0 || plan.folded_op[static_cast<size_t>(p)] || uses[static_cast<size_t>(src)] != 1 ||
        is_output[static_cast<size_t>(src)] || folded_uses[static_cast<size_t>(src)] > 0)
      continue;
    const mps::Op& mm = g.ops[static_cast<size_t>(p)];
    DType dt = g.type(src).dtype;
    if (mm.kind != mps::OpKind::kMatMul || mm.inputs.size() != 2 ||
        (dt != DType::kF32 && dt != DType::kF64 && dt != DType::kC64 && dt != DType::kC128))
      continue;
    plan.matmul_transposed_out[static_cast<size_t>(p)] = 1;
    plan.alias_of[static_cast<size_t>(t.outputs[0])] = src;
    plan.view_op[i] = 1;
  }
}

namespace {

// The value of every element of v when v is a splat known now: a folded one-element value or
// broadcast, or a Broadcast or Negative of one (the lowering's `p - lr * g` multiplies g by -lr).
std::optional<double> SplatValue(const Plan& plan, const std::vector<int>& producer, int v) {
  const mps::Graph& g = *plan.graph;
  const size_t r = static_cast<size_t>(Root(plan, v));
  const DType t = g.values[r].dtype;
  if (t != DType::kF32 && t != DType::kF64) return std::nullopt;
  if (plan.folded_offset[r] >= 0 && (g.values[r].NumElements() == 1 || plan.splat[r])) {
    const uint8_t* p = plan.folded.data() + plan.folded_offset[r];
    if (t == DType::kF32) return static_cast<double>(*reinterpret_cast<const float*>(p));
    return *reinterpret_cast<const double*>(p);
  }
  const int p = producer[r];
  if (p < 0 || plan.folded_op[static_cast<size_t>(p)]) return std::nullopt;
  const mps::Op& op = g.ops[static_cast<size_t>(p)];
  if (op.inputs.size() != 1 || g.type(op.inputs[0]).dtype != t) return std::nullopt;
  if (op.kind == mps::OpKind::kBroadcast && g.type(op.inputs[0]).NumElements() == 1)
    return SplatValue(plan, producer, op.inputs[0]);
  if (op.kind == mps::OpKind::kNegative) {
    std::optional<double> x = SplatValue(plan, producer, op.inputs[0]);
    if (x) return -*x;
  }
  return std::nullopt;
}

}  // namespace

// A float MatMul whose product's one reader adds it to a value made before it, Add(product, p) or
// MultiplyAdd(splat, product, p), computes the sum itself: its result starts as a copy of p and GEMM adds
// the product scaled by the splat (beta = 1). A weight update, w - lr * (x^T g), then makes no gradient
// matrix and reads nothing twice; OpenBLAS's pass zeroing the result (beta = 0) goes too. Rounding: the
// product is no longer rounded on its own before the sum, which only makes the result closer.
// The adding op becomes a view of the MatMul's result; the ops that made only its splat stop running.
void FoldMatMulAccumulates(Plan& plan, const std::vector<int>& producer) {
  const mps::Graph& g = *plan.graph;
  plan.matmul_addend.assign(g.ops.size(), -1);
  plan.matmul_alpha.assign(g.ops.size(), 1.0);
  std::vector<int> uses = RunTimeReaders(plan);  // less the splat makers this pass stops
  const std::vector<uint8_t> is_output = OutputRoots(plan);
  for (size_t x = 0; x < g.ops.size(); ++x) {
    const mps::Op& op = g.ops[x];
    const bool madd = op.kind == mps::OpKind::kMultiplyAdd && op.inputs.size() == 3;
    if ((!madd && (op.kind != mps::OpKind::kAdd || op.inputs.size() != 2)) || !Runs(plan, x) || op.outputs.size() != 1)
      continue;
    const mps::TensorType& out = g.type(op.outputs[0]);
    if (out.dtype != DType::kF32 && out.dtype != DType::kF64) continue;
    bool same = true;
    for (int v : op.inputs) same &= g.type(v).dtype == out.dtype && g.type(v).shape == out.shape;
    if (!same) continue;
    // Which input is the product, which the addend, and the product's factor.
    for (size_t k = 0; k < 2; ++k) {
      const int product = op.inputs[k];
      const int addend = madd ? op.inputs[2] : op.inputs[1 - k];
      const size_t r = static_cast<size_t>(Root(plan, product));
      const int m = producer[r];
      if (m < 0 || plan.folded_op[static_cast<size_t>(m)] ||
          g.ops[static_cast<size_t>(m)].kind != mps::OpKind::kMatMul || uses[r] != 1 || is_output[r] ||
          plan.slice_view[r] >= 0 || g.values[r].NumElements() != out.NumElements() ||
          plan.matmul_addend[static_cast<size_t>(m)] >= 0)
        continue;
      // The addend must be whole in memory when the MatMul runs: a graph input, folded, or made earlier
      // by an op outside every fused group.
      const size_t a = static_cast<size_t>(Root(plan, addend));
      const int ap = producer[a];
      if (a == r || plan.slice_view[a] >= 0 ||
          (ap >= 0 && !plan.folded_op[static_cast<size_t>(ap)] &&
           (ap > m || TileKind(g.ops[static_cast<size_t>(ap)].kind))))
        continue;
      std::optional<double> alpha = madd ? SplatValue(plan, producer, op.inputs[1 - k]) : std::optional<double>(1.0);
      if (!alpha) continue;
      plan.matmul_addend[static_cast<size_t>(m)] = addend;
      plan.matmul_alpha[static_cast<size_t>(m)] = *alpha;
      plan.view_op[x] = 1;
      plan.alias_of[static_cast<size_t>(op.outputs[0])] = product;
      // The ops that made the splat for this op alone stop running.
      if (madd) {
        for (int v = op.inputs[1 - k];;) {
          const size_t s = static_cast<size_t>(Root(plan, v));
          const int p = producer[s];
          if (--uses[s] > 0 || is_output[s] || p < 0 || !Runs(plan, static_cast<size_t>(p)) ||
              g.ops[static_cast<size_t>(p)].outputs.size() != 1)
            break;
          plan.skipped_op[static_cast<size_t>(p)] = 1;
          v = g.ops[static_cast<size_t>(p)].inputs[0];
        }
      }
      break;
    }
  }
}

// Pairs of MatMuls that run at the same time (Plan::paired_matmul): a product whose step is within a few
// of an earlier one's, and reads nothing made at or after it, moves to just after it. The backward pass
// of a dense layer makes two such products from one gradient (the weights' and the input's).
// Only single matrices of BLAS types, each worth a thread, and of about the same work (within 1.5x), so
// that neither waits long for the other; a batch of matrices already splits without repeated packing.
// A product that writes its result into a loop carry's block stays where it is.
// JMP_HOST_PAIRS=0: no pairs, read at every compile so that one process can time a program both ways.
void PairMatMuls(Plan& plan, const std::vector<int>& producer) {
  const mps::Graph& g = *plan.graph;
  plan.paired_matmul.assign(g.ops.size(), 0);
  const char* env = std::getenv("JMP_HOST_PAIRS");
  if (HostThreads() < 2 || (env && std::string(env) == "0")) return;
  constexpr int64_t kMinWork = int64_t{1} << 18;  // multiply-adds of real numbers
  constexpr size_t kWindow = 8;  // steps a product may move earlier: its result then lives that much longer
  // A product's work, or 0 when it does not qualify.
  auto work = [&](int step) -> int64_t {
    if (step < 0) return 0;
    const size_t i = static_cast<size_t>(step);
    const mps::Op& op = g.ops[i];
    if (op.kind != mps::OpKind::kMatMul || op.inputs.size() != 2 || op.outputs.size() != 1 || !Runs(plan, i)) return 0;
    const mps::TensorType& out = g.type(op.outputs[0]);
    const std::vector<int64_t>& ls = g.type(op.inputs[0]).shape;
    const size_t o = static_cast<size_t>(op.outputs[0]);
    if (ls.size() < 2 || out.shape.size() != ls.size() || plan.made_in_carry[o] >= 0 || plan.slice_view[o] >= 0)
      return 0;
    const int64_t scale = out.dtype == DType::kC64 || out.dtype == DType::kC128 ? 4 : 1;
    if (out.dtype != DType::kF32 && out.dtype != DType::kF64 && scale == 1) return 0;
    const int64_t mn = out.shape[out.shape.size() - 2] * out.shape.back();
    if (out.NumElements() != mn) return 0;  // a batch
    const int64_t w = scale * mn * ls.back();
    return w >= kMinWork ? w : 0;
  };
  std::vector<int> step_of = StepOf(plan);
  // Whether op i reads only storage made before step `before`.
  auto made_before = [&](size_t i, int before) {
    bool ok = true;
    auto check = [&](int r) {
      const size_t v = static_cast<size_t>(r);
      if (plan.slice_view[v] >= 0 || plan.input_index[v] >= 0 || plan.folded_offset[v] >= 0) return;
      const int p = producer[v];
      ok = ok && p >= 0 && step_of[static_cast<size_t>(p)] >= 0 && step_of[static_cast<size_t>(p)] < before;
    };
    for (size_t j = 0; j < 2; ++j) ForEachStorage(plan, ReadRoot(plan, i, j), check);
    if (plan.matmul_addend[i] >= 0) ForEachStorage(plan, plan.matmul_addend[i], check);
    return ok;
  };
  for (size_t s = 0; s + 1 < plan.steps.size(); ++s) {
    const int64_t wa = work(plan.steps[s]);
    if (!wa) continue;
    for (size_t t = s + 1; t < plan.steps.size() && t <= s + kWindow; ++t) {
      const int64_t wb = work(plan.steps[t]);
      if (!wb || 2 * std::max(wa, wb) > 3 * std::min(wa, wb) ||
          !made_before(static_cast<size_t>(plan.steps[t]), static_cast<int>(s)))
        continue;
      const int b = plan.steps[t];
      plan.steps.erase(plan.steps.begin() + static_cast<std::ptrdiff_t>(t));
      plan.steps.insert(plan.steps.begin() + static_cast<std::ptrdiff_t>(s + 1), b);
      plan.paired_matmul[static_cast<size_t>(plan.steps[s])] = 1;
      step_of = StepOf(plan);
      ++s;  // the pair's second product pairs with no other
      break;
    }
  }
}

}  // namespace jmp::exec::host

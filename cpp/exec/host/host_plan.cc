// The planner: turns a graph into a Plan once, at compile time. It folds constants, makes reshapes
// views, lets MatMul read transposes untransposed and add its product to a value, finds in-place while
// carries and gives every other value an arena slot by liveness.
#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "exec/host/host_memory.h"
#include "exec/host/host_parallel.h"
#include "exec/host/host_plan.h"

namespace jmp::exec::host {

namespace {

// Per value, whether a graph output's storage is its (through the views decided so far).
std::vector<uint8_t> OutputRoots(const Plan& plan) {
  std::vector<uint8_t> is_output(plan.graph->values.size(), 0);
  for (int v : plan.graph->outputs) is_output[static_cast<size_t>(Root(plan, v))] = 1;
  return is_output;
}

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

// The block of `data` that one row of integer indices addresses (its leading dims, the rest whole), or
// nothing when `indices` is not such a row.
std::optional<SliceView> BlockOf(const mps::Graph& g, int data, int indices) {
  const mps::TensorType& d = g.type(data);
  const mps::TensorType& idx = g.type(indices);
  if ((idx.dtype != DType::kI32 && idx.dtype != DType::kI64) || idx.shape.empty()) return std::nullopt;
  const int64_t k = idx.shape.back();
  if (k < 1 || k > static_cast<int64_t>(d.shape.size()) || idx.NumElements() != k) return std::nullopt;
  SliceView view{data, indices, {}, {}};
  std::vector<int64_t> strides = RowMajorStrides(d.shape);
  for (int64_t c = 0; c < k; ++c) {
    view.dims.push_back(d.shape[static_cast<size_t>(c)]);
    view.stride_bytes.push_back(strides[static_cast<size_t>(c)] * static_cast<int64_t>(ByteSize(d.dtype)));
  }
  return view;
}

// Runs, once, every op whose inputs are all known at compile time (splat broadcasts, iotas, constant
// shape ops), keeping the results with the plan; runs then skip those ops.
void FoldConstants(Plan& plan) {
  const mps::Graph& g = *plan.graph;
  plan.folded_offset.assign(g.values.size(), -1);
  plan.folded_op.assign(g.ops.size(), 0);
  std::vector<uint8_t> known(g.values.size(), 0);
  // A large splat or iota read only by elementwise ops is made tile by tile in their fused group; one
  // read by anything else (a loop's zero-initialised carry) is folded as before.
  std::vector<uint8_t> read_whole(g.values.size(), 0);
  for (const mps::Op& op : g.ops)
    if (!TileKind(op.kind))
      for (int v : op.inputs) read_whole[static_cast<size_t>(v)] = 1;
  for (int v : g.outputs) read_whole[static_cast<size_t>(v)] = 1;
  size_t bytes = 0;
  constexpr size_t kMaxFoldedBytes = size_t{64} << 20;
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const mps::Op& op = g.ops[i];
    // An op with effects runs every time, even on inputs known now.
    bool tiles = MadeInTiles(g, op);
    for (int v : op.outputs) tiles = tiles && !read_whole[static_cast<size_t>(v)];
    bool all = op.subgraphs.empty() && !mps::HasEffects(op) && !tiles;
    for (int v : op.inputs) all &= known[static_cast<size_t>(v)] != 0;
    size_t out_bytes = 0;
    for (int v : op.outputs) out_bytes += AlignUp(g.type(v).ByteSize());
    if (!all || bytes + out_bytes > kMaxFoldedBytes) continue;
    plan.folded_op[i] = 1;
    for (int v : op.outputs) {
      known[static_cast<size_t>(v)] = 1;
      plan.folded_offset[static_cast<size_t>(v)] = static_cast<int64_t>(bytes);
      bytes += AlignUp(g.type(v).ByteSize());
    }
  }
  plan.splat.assign(g.values.size(), 0);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const mps::Op& op = g.ops[i];
    if (plan.folded_op[i] && op.kind == mps::OpKind::kBroadcast && op.inputs.size() == 1 && op.outputs.size() == 1 &&
        g.type(op.inputs[0]).NumElements() == 1 && g.type(op.inputs[0]).dtype == g.type(op.outputs[0]).dtype)
      plan.splat[static_cast<size_t>(op.outputs[0])] = 1;
  }
  plan.folded.assign(bytes + kAlign, 0);
  // Offsets are relative to an aligned start inside the vector.
  size_t shift = (kAlign - reinterpret_cast<uintptr_t>(plan.folded.data()) % kAlign) % kAlign;
  for (auto& off : plan.folded_offset)
    if (off >= 0) off += static_cast<int64_t>(shift);
  std::vector<const uint8_t*> no_inputs;
  for (size_t i = 0; i < g.ops.size(); ++i) {
    if (!plan.folded_op[i]) continue;
    const mps::Op& op = g.ops[i];
    bool inputs_folded = true;
    for (int v : op.inputs) inputs_folded &= plan.folded_offset[static_cast<size_t>(v)] >= 0;
    if (!inputs_folded) {
      plan.folded_op[i] = 0;
      for (int v : op.outputs) plan.folded_offset[static_cast<size_t>(v)] = -1;
      continue;
    }
    OpArgs a{op, g, {}, {}};
    for (int v : op.inputs) a.in.push_back(plan.folded.data() + plan.folded_offset[static_cast<size_t>(v)]);
    for (int v : op.outputs) a.out.push_back(plan.folded.data() + plan.folded_offset[static_cast<size_t>(v)]);
    if (!RunOp(a, plan, i).ok()) {  // leave a failing op to fail at run time, with its error
      plan.folded_op[i] = 0;
      for (int v : op.outputs) plan.folded_offset[static_cast<size_t>(v)] = -1;
    }
  }
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

// The block a static Slice reads when it is contiguous: unit strides, whole trailing dims, one index of
// each dim before the first partial one.
std::optional<SliceView> StaticBlockOf(const mps::Graph& g, const mps::Op& op) {
  const std::vector<int64_t>& shape = g.type(op.inputs[0]).shape;
  const mps::SliceAttrs& at = op.Attrs<mps::SliceAttrs>();
  const size_t rank = shape.size();
  if (at.starts.size() != rank || at.ends.size() != rank || at.strides.size() != rank) return std::nullopt;
  for (int64_t stride : at.strides)
    if (stride != 1) return std::nullopt;
  size_t partial = rank;  // dims [partial, rank) are whole
  while (partial > 0 && at.starts[partial - 1] == 0 && at.ends[partial - 1] == shape[partial - 1]) --partial;
  for (size_t d = 0; d + 1 < partial; ++d)
    if (at.ends[d] - at.starts[d] != 1) return std::nullopt;
  const std::vector<int64_t> strides = RowMajorStrides(shape);
  SliceView view{op.inputs[0], -1, {}, {}, 0};
  for (size_t d = 0; d < rank; ++d) view.fixed_offset += at.starts[d] * strides[d];
  view.fixed_offset *= static_cast<int64_t>(ByteSize(g.type(op.inputs[0]).dtype));
  return view;
}

// GatherNDs of one index row, and static Slices of one contiguous block, whose result is no graph output
// (outputs are written from their values' storage last, after the run's values are gone, and may be an
// input's memory) become slice views.
void FindSliceViews(Plan& plan) {
  const mps::Graph& g = *plan.graph;
  plan.slice_view.assign(g.values.size(), -1);
  const std::vector<uint8_t> is_output = OutputRoots(plan);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const mps::Op& op = g.ops[i];
    if (plan.folded_op[i] || op.outputs.size() != 1 || is_output[static_cast<size_t>(op.outputs[0])]) continue;
    std::optional<SliceView> view;
    if (op.kind == mps::OpKind::kGatherND && op.inputs.size() == 2 && op.Attrs<mps::GatherNDAttrs>().batch_dims == 0)
      view = BlockOf(g, op.inputs[0], op.inputs[1]);
    else if (op.kind == mps::OpKind::kSlice && op.inputs.size() == 1)
      view = StaticBlockOf(g, op);
    if (!view) continue;
    plan.slice_view[static_cast<size_t>(op.outputs[0])] = static_cast<int>(plan.slice_views.size());
    plan.slice_views.push_back(std::move(*view));
    plan.view_op[i] = 1;
  }
}

// Per op, its position in the run order (Plan::steps), -1 when it does not run.
std::vector<int> StepOf(const Plan& plan) {
  std::vector<int> step_of(plan.graph->ops.size(), -1);
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    int step = plan.steps[s];
    if (step >= 0)
      step_of[static_cast<size_t>(step)] = static_cast<int>(s);
    else
      for (int i : plan.fused[static_cast<size_t>(-1 - step)].ops)
        step_of[static_cast<size_t>(i)] = static_cast<int>(s);
  }
  return step_of;
}

// Makes `v` known before step `before`: the small ops (scalar index arithmetic) that make it after
// that step move to just before it, in their order. False, and nothing moves, when v depends on
// anything else made at or after that step, the step itself included (the update whose block v
// addresses). Such ops are pure and read only what is made earlier. An op that writes its result into
// a carry's block (made_in_carry) needs that block's indices first, so they move with it.
// `step_of` is StepOf(plan), stale once this returns true.
bool MakeEarlier(Plan& plan, const std::vector<int>& producer, const std::vector<int>& step_of, int v, int before) {
  const mps::Graph& g = *plan.graph;
  std::vector<uint8_t> moving(g.ops.size(), 0);
  std::vector<int> todo{v};
  while (!todo.empty()) {
    size_t r = static_cast<size_t>(Root(plan, todo.back()));
    todo.pop_back();
    int p = producer[r];
    if (p < 0 || plan.folded_offset[r] >= 0 || plan.input_index[r] >= 0) continue;
    size_t op = static_cast<size_t>(p);
    if (moving[op] || (step_of[op] >= 0 && step_of[op] < before)) continue;
    const mps::Op& o = g.ops[op];
    size_t bytes = 0;
    for (int out : o.outputs) bytes += g.type(out).ByteSize();
    if (step_of[op] <= before || plan.steps[static_cast<size_t>(step_of[op])] != p || bytes > 64 ||
        !o.subgraphs.empty() || mps::HasEffects(o) || plan.slice_view[r] >= 0)
      return false;
    moving[op] = 1;
    for (int in : o.inputs) todo.push_back(in);
    for (int out : o.outputs)
      if (int s = plan.made_in_carry[static_cast<size_t>(out)]; s >= 0)
        todo.push_back(plan.slice_views[static_cast<size_t>(s)].indices);
    if (plan.matmul_addend[op] >= 0) todo.push_back(plan.matmul_addend[op]);
  }
  std::vector<int> steps(plan.steps.begin(), plan.steps.begin() + before), later;
  for (size_t s = static_cast<size_t>(before); s < plan.steps.size(); ++s) {
    int step = plan.steps[s];
    (step >= 0 && moving[static_cast<size_t>(step)] ? steps : later).push_back(step);
  }
  steps.insert(steps.end(), later.begin(), later.end());
  plan.steps = std::move(steps);
  return true;
}

// The in-place carry scatters (FindInPlaceCarries) that set one block of the carry to an update the
// body makes in the arena: the update is made in the block instead, when the block's place can be known
// before the update's maker runs (its indices are made earlier, or moved earlier) and the update is no
// graph output. Nothing else reads the carry (it is the scatter's alone), so the block may be written
// early.
void FindCarryUpdates(Plan& plan, const std::vector<int>& producer) {
  const mps::Graph& g = *plan.graph;
  plan.made_in_carry.assign(g.values.size(), -1);
  plan.skipped_scatter.assign(g.ops.size(), 0);
  const std::vector<uint8_t> is_output = OutputRoots(plan);
  std::vector<int> step_of = StepOf(plan);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    if (plan.in_place_op_input[i] < 0 || g.ops[i].kind != mps::OpKind::kScatterND) continue;
    const mps::Op& op = g.ops[i];
    if (op.Attrs<mps::ScatterAttrs>().mode != mps::ScatterMode::kSet) continue;
    std::optional<SliceView> view = BlockOf(g, op.inputs[0], op.inputs[2]);
    if (!view) continue;
    const mps::TensorType& data = g.type(op.inputs[0]);
    const size_t u = static_cast<size_t>(Root(plan, op.inputs[1]));
    int64_t block = 1;
    for (size_t d = view->dims.size(); d < data.shape.size(); ++d) block *= data.shape[d];
    if (g.values[u].dtype != data.dtype || g.values[u].NumElements() != block || is_output[u] ||
        plan.input_index[u] >= 0 || plan.folded_offset[u] >= 0 || plan.slice_view[u] >= 0 || plan.tile_slot[u] >= 0 ||
        plan.made_in_carry[u] >= 0 || producer[u] < 0)
      continue;
    const int made = step_of[static_cast<size_t>(producer[u])];
    if (made < 0 || !MakeEarlier(plan, producer, step_of, op.inputs[2], made)) continue;
    step_of = StepOf(plan);
    plan.made_in_carry[u] = static_cast<int>(plan.slice_views.size());
    plan.slice_views.push_back(std::move(*view));
    plan.skipped_scatter[i] = 1;
  }
}

void FindInPlaceCarries(Plan& plan, const std::vector<int>& uses) {
  const mps::Graph& g = *plan.graph;
  plan.in_place_carry_op.assign(g.inputs.size(), -1);
  plan.in_place_op_input.assign(g.ops.size(), -1);
  std::vector<int> as_output(g.values.size(), 0);
  for (int v : g.outputs) ++as_output[static_cast<size_t>(v)];
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const mps::Op& op = g.ops[i];
    if ((op.kind != mps::OpKind::kScatterND && op.kind != mps::OpKind::kScatterAlongAxis) || op.inputs.size() != 3 ||
        plan.folded_op[i])
      continue;
    int data = op.inputs[0], out = op.outputs[0];
    int p = plan.input_index[static_cast<size_t>(data)];
    if (p < 0 || static_cast<size_t>(p) >= g.outputs.size() || g.outputs[static_cast<size_t>(p)] != out) continue;
    if (uses[static_cast<size_t>(data)] != 1 || as_output[static_cast<size_t>(data)] != 0 ||
        uses[static_cast<size_t>(out)] != 0 || as_output[static_cast<size_t>(out)] != 1 ||
        g.type(data).ByteSize() != g.type(out).ByteSize())
      continue;
    plan.in_place_carry_op[static_cast<size_t>(p)] = static_cast<int>(i);
    plan.in_place_op_input[i] = p;
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

// Arena slots by liveness, in run order (Plan::steps): a value's slot is reused once its last reader has
// run, so the working set stays small enough to live in cache. Best fit among free slots, no splitting.
// Values a fused group keeps in tile scratch need none.
void AssignArenaSlots(Plan& plan) {
  const mps::Graph& g = *plan.graph;
  const size_t end = plan.steps.size();
  auto ops_of = [&](size_t s) -> std::vector<int> {
    int step = plan.steps[s];
    return step >= 0 ? std::vector<int>{step} : plan.fused[static_cast<size_t>(-1 - step)].ops;
  };
  std::vector<size_t> last_use(g.values.size(), 0);
  std::vector<uint8_t> needs_slot(g.values.size(), 0);
  // The step at which what step s reads or writes is done with: a pair's second for its first.
  auto done_at = [&](size_t s) {
    const int step = plan.steps[s];
    return step >= 0 && plan.paired_matmul[static_cast<size_t>(step)] ? s + 1 : s;
  };
  auto reads = [&](int v, size_t at) {
    ForEachStorage(plan, v,
                   [&](int r) { last_use[static_cast<size_t>(r)] = std::max(last_use[static_cast<size_t>(r)], at); });
  };
  for (size_t s = 0; s < end; ++s)
    for (int oi : ops_of(s)) {
      size_t i = static_cast<size_t>(oi);
      const mps::Op& op = g.ops[i];
      const size_t done = done_at(s);
      for (size_t j = 0; j < op.inputs.size(); ++j) reads(ReadRoot(plan, i, j), done);
      if (plan.matmul_addend[i] >= 0) reads(plan.matmul_addend[i], done);
      for (int v : op.outputs) {
        needs_slot[static_cast<size_t>(v)] = plan.tile_slot[static_cast<size_t>(v)] < 0;
        last_use[static_cast<size_t>(v)] = std::max(last_use[static_cast<size_t>(v)], done);
      }
    }
  for (int v : g.outputs) reads(v, end);
  std::multimap<size_t, int64_t> free_slots;  // size -> offset
  std::vector<size_t> slot_size(g.values.size(), 0);
  std::vector<std::vector<int>> release_after(end + 1);
  std::vector<uint8_t> handed_on(g.values.size(), 0);  // its slot now belongs to a later value
  size_t top = 0;
  for (size_t s = 0; s < end; ++s) {
    const std::vector<int> ops = ops_of(s);
    const mps::Op& first = g.ops[static_cast<size_t>(ops[0])];
    // A scatter whose data dies here writes into the data's slot: no copy of the whole operand
    // (dynamic_update_slice in a scan over layers would copy the stacked buffer every step).
    if (ops.size() == 1 && (first.kind == mps::OpKind::kScatterND || first.kind == mps::OpKind::kScatterAlongAxis) &&
        first.inputs.size() == 3) {
      size_t data = static_cast<size_t>(Root(plan, first.inputs[0]));
      size_t out = static_cast<size_t>(first.outputs[0]);
      bool sole_reader = last_use[data] == s && plan.slice_view[data] < 0;
      for (size_t j = 1; j < 3; ++j)
        ForEachStorage(plan, first.inputs[j], [&](int r) { sole_reader &= r != static_cast<int>(data); });
      if (sole_reader && plan.arena_offset[data] >= 0 && !handed_on[data] &&
          slot_size[data] >= g.values[out].ByteSize() && plan.arena_offset[out] < 0) {
        plan.arena_offset[out] = plan.arena_offset[data];
        slot_size[out] = slot_size[data];
        handed_on[data] = 1;
        release_after[last_use[out]].push_back(static_cast<int>(out));
      }
    }
    for (int oi : ops)
      for (int v : g.ops[static_cast<size_t>(oi)].outputs) {
        size_t sv = static_cast<size_t>(v);
        if (!needs_slot[sv] || plan.arena_offset[sv] >= 0) continue;
        size_t need = AlignUp(g.values[sv].ByteSize());
        auto it = free_slots.lower_bound(need);
        if (it != free_slots.end() && it->first <= 2 * need + kAlign) {
          plan.arena_offset[sv] = it->second;
          slot_size[sv] = it->first;
          free_slots.erase(it);
        } else {
          plan.arena_offset[sv] = static_cast<int64_t>(top);
          slot_size[sv] = need;
          top += need;
        }
        release_after[last_use[sv]].push_back(v);
      }
    for (int v : release_after[s])
      if (!handed_on[static_cast<size_t>(v)])
        free_slots.emplace(slot_size[static_cast<size_t>(v)], plan.arena_offset[static_cast<size_t>(v)]);
  }
  plan.arena_bytes = top;
}

}  // namespace

std::unique_ptr<Plan> MakePlan(const mps::Graph& g) {
  auto plan = std::make_unique<Plan>();
  plan->graph = &g;
  plan->arena_offset.assign(g.values.size(), -1);
  plan->input_index.assign(g.values.size(), -1);
  for (size_t i = 0; i < g.inputs.size(); ++i)
    plan->input_index[static_cast<size_t>(g.inputs[i])] = static_cast<int>(i);
  for (const mps::Op& op : g.ops) {
    plan->subplan_first.push_back(plan->subplans.size());
    for (const mps::Graph& sub : op.subgraphs) plan->subplans.push_back(MakePlan(sub));
  }
  FoldConstants(*plan);
  std::vector<int> producer(g.values.size(), -1), uses(g.values.size(), 0);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    for (int v : g.ops[i].outputs) producer[static_cast<size_t>(v)] = static_cast<int>(i);
    for (int v : g.ops[i].inputs) ++uses[static_cast<size_t>(v)];
  }
  plan->unread.assign(g.values.size(), 0);
  for (size_t v = 0; v < g.values.size(); ++v) plan->unread[v] = uses[v] == 0;
  for (int v : g.outputs) plan->unread[static_cast<size_t>(v)] = 0;
  plan->alias_of.assign(g.values.size(), -1);
  plan->view_op.assign(g.ops.size(), 0);
  plan->skipped_op.assign(g.ops.size(), 0);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const mps::Op& op = g.ops[i];
    bool view = op.kind == mps::OpKind::kReshape || op.kind == mps::OpKind::kIdentity ||
                op.kind == mps::OpKind::kReinterpretCast;
    if (!view || plan->folded_op[i] || op.inputs.size() != 1 || op.outputs.size() != 1) continue;
    if (g.type(op.inputs[0]).ByteSize() != g.type(op.outputs[0]).ByteSize()) continue;
    plan->alias_of[static_cast<size_t>(op.outputs[0])] = op.inputs[0];
    plan->view_op[i] = 1;
  }
  FindSliceViews(*plan);
  plan->made_in_carry.assign(g.values.size(), -1);  // FindCarryUpdates decides, once groups are formed
  FindInPlaceCarries(*plan, uses);
  FoldMatMulTransposes(*plan, producer);
  FoldMatMulAccumulates(*plan, producer);
  FuseElementwise(*plan);
  FindCarryUpdates(*plan, producer);
  PairMatMuls(*plan, producer);
  AssignArenaSlots(*plan);
  for (int v : g.outputs) plan->output_bytes.push_back(g.type(v).ByteSize());
  // A result made in the arena is made straight in its output instead (the first output it is, when
  // it is several): nothing writes a value after its op, and an output's value is never handed on.
  plan->direct_output.assign(g.values.size(), -1);
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    size_t r = static_cast<size_t>(Root(*plan, g.outputs[i]));
    if (plan->arena_offset[r] >= 0 && plan->slice_view[r] < 0 && plan->direct_output[r] < 0 &&
        g.values[r].ByteSize() == plan->output_bytes[i])
      plan->direct_output[r] = static_cast<int>(i);
  }
  return plan;
}

namespace {

// The block of a slice view at its indices' run-time values. An index out of range is clamped, as the
// lowering already clamps dynamic_slice and dynamic_update_slice starts: a block never lies outside its
// data.
uint8_t* BlockPtr(const Plan& plan, const RunMemory& memory, const SliceView& view) {
  if (view.indices < 0) return ValuePtr(plan, memory, view.data) + view.fixed_offset;
  const uint8_t* idx = ValuePtr(plan, memory, view.indices);
  const bool wide = plan.graph->type(view.indices).dtype == DType::kI64;
  int64_t offset = 0;
  for (size_t c = 0; c < view.dims.size(); ++c) {
    int64_t at;
    if (wide) {
      std::memcpy(&at, idx + 8 * c, 8);
    } else {
      int32_t narrow;
      std::memcpy(&narrow, idx + 4 * c, 4);
      at = narrow;
    }
    offset += std::clamp<int64_t>(at, 0, view.dims[c] - 1) * view.stride_bytes[c];
  }
  return ValuePtr(plan, memory, view.data) + offset;
}

}  // namespace

uint8_t* ValuePtr(const Plan& plan, const RunMemory& memory, int v) {
  v = Root(plan, v);
  if (int s = plan.slice_view[static_cast<size_t>(v)]; s >= 0)
    return BlockPtr(plan, memory, plan.slice_views[static_cast<size_t>(s)]);
  if (int s = plan.made_in_carry[static_cast<size_t>(v)]; s >= 0 && memory.writable_carries)
    return BlockPtr(plan, memory, plan.slice_views[static_cast<size_t>(s)]);
  int64_t folded = plan.folded_offset[static_cast<size_t>(v)];
  if (folded >= 0) return const_cast<uint8_t*>(plan.folded.data()) + folded;
  int in = plan.input_index[static_cast<size_t>(v)];
  if (in >= 0) return const_cast<uint8_t*>(memory.inputs[static_cast<size_t>(in)]);
  int out = plan.direct_output[static_cast<size_t>(v)];
  if (out >= 0 && memory.outputs) return (*memory.outputs)[static_cast<size_t>(out)];
  return memory.arena + plan.arena_offset[static_cast<size_t>(v)];
}

}  // namespace jmp::exec::host

// The planner's slice views: values that are a block of another's storage, read in place.
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "exec/host/host_kernels.h"
#include "exec/host/host_plan.h"
#include "exec/host/host_plan_passes.h"

namespace jmp::exec::host {

// Per value, whether a graph output's storage is its (through the views decided so far).
std::vector<uint8_t> OutputRoots(const Plan& plan) {
  std::vector<uint8_t> is_output(plan.graph->values.size(), 0);
  for (int v : plan.graph->outputs) is_output[static_cast<size_t>(Root(plan, v))] = 1;
  return is_output;
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

namespace {

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

}  // namespace

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

}  // namespace jmp::exec::host

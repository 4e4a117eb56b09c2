// dynamic_slice and dynamic_update_slice with tensor-valued starts. MPSGraph has tensor-start slices
// only from macOS 15.2 (and slice updates from 14.4), so both are built from coordinate iotas with
// the starts clamped as StableHLO says: dynamic_slice is one GatherND (11.0) of the window's slices,
// dynamic_update_slice one ScatterND (12.0) of the update at the window's indices.
#include "lower/lower_families.h"

namespace jmp::mps {

namespace {

// The start for axis d as an int32 scalar clamped to [0, dim - size], the clamp taken on the start's
// own value: types int32 holds exactly are cast first; wider ones (uint32, int64, uint64) are clamped
// in their own type, so a start past 2^31 clamps to the end instead of wrapping to a negative int32.
int ClampedStart(LowerContext& cx, int start, int64_t dim, int64_t size) {
  const double hi = static_cast<double>(dim - size);
  int s = cx.Reshape(start, {});
  DType t = cx.DTypeOf(s);
  if (IsInteger(t) && BitWidth(t) >= 32 && t != DType::kI32) {
    s = cx.Binary(OpKind::kMinimum, s, cx.Scalar(t, hi));
    if (IsSignedInt(t)) s = cx.Binary(OpKind::kMaximum, s, cx.Scalar(t, 0));
    return cx.Cast(s, DType::kI32);
  }
  s = cx.Binary(OpKind::kMaximum, cx.Cast(s, DType::kI32), cx.Scalar(DType::kI32, 0));
  return cx.Binary(OpKind::kMinimum, s, cx.Scalar(DType::kI32, hi));
}

// The index rows of a window: for each position of `window` (the window's extent along the leading
// axes that need an index component), its coordinates plus the clamped starts, int32 [window..., k].
int WindowIndices(LowerContext& cx, const Shape& window, const std::vector<int>& starts) {
  Shape column = window;
  column.push_back(1);
  std::vector<int> parts;
  for (size_t d = 0; d < window.size(); ++d) {
    const int64_t axis = static_cast<int64_t>(d);
    if (window[d] == 1)  // one position along d: its coordinate is the start
      parts.push_back(starts[d] >= 0 ? cx.BroadcastTo(starts[d], column) : cx.Splat(DType::kI32, column, 0));
    else if (starts[d] < 0)
      parts.push_back(cx.Iota(column, axis));
    else
      parts.push_back(cx.Binary(OpKind::kAdd, cx.Iota(column, axis), cx.BroadcastTo(starts[d], column)));
  }
  if (parts.size() == 1) return parts[0];
  Shape rows = window;
  rows.push_back(static_cast<int64_t>(parts.size()));
  return cx.Emit(OpKind::kConcat, parts, DType::kI32, rows, AxisAttrs{static_cast<int64_t>(window.size())});
}

// One GatherND of the window's slices at its clamped starts: the cost of the result, whatever the
// operand's size. Index components cover the leading axes up to the last one the slice does not span.
Status DynamicSlice(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int x, cx.In(0));
  JMP_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, cx.IntsAttr("slice_sizes"));
  const Shape in = cx.ShapeOf(x);
  if (sizes.size() != in.size() || cx.op().operands.size() != in.size() + 1)
    return cx.Unsupported("dynamic_slice operands do not match the rank");
  size_t k = 0;  // index components: axes [0, k)
  bool empty = false;
  for (size_t d = 0; d < in.size(); ++d) {
    if (sizes[d] < 0 || sizes[d] > in[d]) return cx.Unsupported("slice size out of range");
    if (sizes[d] != in[d]) k = d + 1;
    empty |= sizes[d] == 0;
  }
  if (empty) {  // no elements: where they would come from does not matter
    cx.Bind(0, cx.Slice(x, Shape(in.size(), 0), sizes));
    return Status::Ok();
  }
  std::vector<int> starts(k, -1);  // -1: the slice spans the axis, its start clamps to 0
  for (size_t d = 0; d < k; ++d) {
    if (sizes[d] == in[d]) continue;
    JMP_ASSIGN_OR_RETURN(int start, cx.In(d + 1));
    starts[d] = ClampedStart(cx, start, in[d], sizes[d]);
  }
  if (k == 0) {
    cx.Bind(0, x);
    return Status::Ok();
  }
  Shape window(sizes.begin(), sizes.begin() + static_cast<std::ptrdiff_t>(k));
  int indices = WindowIndices(cx, window, starts);
  cx.Bind(0, cx.Reshape(GatherND(cx, x, indices), sizes));
  return Status::Ok();
}

// One ScatterND (mode set) of the update into the operand at its clamped starts: the update's cost
// plus one copy of the operand (none where the executor updates in place), instead of passes over
// the whole operand per axis. Index components cover the leading axes up to the last one the update
// does not span; the trailing axes it spans whole are the scattered slices. Window positions are
// distinct, so no two updates collide.
Status DynamicUpdateSlice(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int x, cx.In(0));
  JMP_ASSIGN_OR_RETURN(int update, cx.In(1));
  const Shape xs = cx.ShapeOf(x), us = cx.ShapeOf(update);
  if (xs.size() != us.size() || cx.op().operands.size() != xs.size() + 2)
    return cx.Unsupported("dynamic_update_slice operands do not match the rank");
  if (cx.DTypeOf(update) != cx.DTypeOf(x)) return cx.Unsupported("dynamic_update_slice of a different element type");
  for (size_t d = 0; d < xs.size(); ++d)
    if (us[d] < 0 || us[d] > xs[d]) return cx.Unsupported("update larger than the operand");
  int64_t update_elements = 1;
  for (int64_t d : us) update_elements *= d;
  if (update_elements == 0) {
    cx.Bind(0, x);
    return Status::Ok();
  }
  size_t k = 0;  // index components: axes [0, k)
  for (size_t d = 0; d < xs.size(); ++d)
    if (us[d] != xs[d]) k = d + 1;
  if (k == 0) {  // the update covers the operand (every start clamps to 0)
    cx.Bind(0, update);
    return Status::Ok();
  }
  std::vector<int> starts(k, -1);  // -1: the update spans the axis, its start clamps to 0
  for (size_t d = 0; d < k; ++d) {
    if (us[d] == xs[d]) continue;
    JMP_ASSIGN_OR_RETURN(int start, cx.In(d + 2));
    starts[d] = ClampedStart(cx, start, xs[d], us[d]);
  }
  Shape window(us.begin(), us.begin() + static_cast<std::ptrdiff_t>(k));
  int indices = WindowIndices(cx, window, starts);
  cx.Bind(0, ScatterND(cx, x, update, indices, ScatterMode::kSet));
  return Status::Ok();
}

}  // namespace

int GatherAlongAxis(LowerContext& cx, int data, int indices, int64_t axis) {
  Shape shape = cx.ShapeOf(indices);
  return cx.Emit(OpKind::kGatherAlongAxis, {data, indices}, cx.DTypeOf(data), shape, AxisAttrs{axis});
}

// The leading index dims of `indices` and the data dims past its k components: the ND ops' result shape.
Shape NDResultShape(LowerContext& cx, int data, int indices) {
  const Shape ds = cx.ShapeOf(data), is = cx.ShapeOf(indices);
  Shape out(is.begin(), is.end() - 1);
  const size_t k = static_cast<size_t>(is.back());
  if (k <= ds.size()) out.insert(out.end(), ds.begin() + static_cast<std::ptrdiff_t>(k), ds.end());
  return out;
}

int GatherND(LowerContext& cx, int data, int indices) {
  const Shape out = NDResultShape(cx, data, indices);
  if (cx.ShapeOf(indices).size() > 1)
    return cx.Emit(OpKind::kGatherND, {data, indices}, cx.DTypeOf(data), out, GatherNDAttrs{0});
  int one = cx.Reshape(indices, {1, cx.ShapeOf(indices).back()});
  int y = cx.Emit(OpKind::kGatherND, {data, one}, cx.DTypeOf(data), NDResultShape(cx, data, one), GatherNDAttrs{0});
  return cx.Reshape(y, out);
}

int ScatterND(LowerContext& cx, int data, int updates, int indices, ScatterMode mode) {
  if (cx.ShapeOf(indices).size() == 1) {
    indices = cx.Reshape(indices, {1, cx.ShapeOf(indices).back()});
    updates = cx.Reshape(updates, NDResultShape(cx, data, indices));
  }
  return cx.Emit(OpKind::kScatterND, {data, updates, indices}, cx.DTypeOf(data), cx.ShapeOf(data), ScatterAttrs{mode});
}

void RegisterDynamicSliceRules(std::map<std::string, LowerRule>& r) {
  RegisterRule(r, "stablehlo.dynamic_slice", &DynamicSlice);
  RegisterRule(r, "stablehlo.dynamic_update_slice", &DynamicUpdateSlice);
}

}  // namespace jmp::mps

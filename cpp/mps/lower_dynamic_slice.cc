// dynamic_slice and dynamic_update_slice with tensor-valued starts. MPSGraph has tensor-start slices
// only from macOS 15.2 (and slice updates from 14.4), so both are built from coordinate iotas and
// GatherAlongAxis (12.3), one axis at a time, with the starts clamped as StableHLO says.
#include "mps/lower_families.h"

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

int Coordinates(LowerContext& cx, const Shape& shape, int64_t axis) {
  Op& op = cx.Emit(OpKind::kCoordinateAlongAxis, {}, DType::kI32, shape);
  op.axes = {axis};
  return op.outputs[0];
}

Status DynamicSlice(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int x, cx.In(0));
  JMP_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, cx.IntsAttr("slice_sizes"));
  const Shape in = cx.ShapeOf(x);
  if (sizes.size() != in.size() || cx.op().operands.size() != in.size() + 1)
    return cx.Unsupported("dynamic_slice operands do not match the rank");
  int cur = x;
  for (size_t d = 0; d < in.size(); ++d) {
    if (sizes[d] < 0 || sizes[d] > in[d]) return cx.Unsupported("slice size out of range");
    if (sizes[d] == in[d]) continue;
    JMP_ASSIGN_OR_RETURN(int start, cx.In(d + 1));
    int s = ClampedStart(cx, start, in[d], sizes[d]);
    Shape out = cx.ShapeOf(cur);
    out[d] = sizes[d];
    int idx = cx.Binary(OpKind::kAdd, Coordinates(cx, out, static_cast<int64_t>(d)), cx.BroadcastTo(s, out));
    cur = GatherAlongAxis(cx, cur, idx, static_cast<int64_t>(d));
  }
  cx.Bind(0, cur);
  return Status::Ok();
}

Status DynamicUpdateSlice(LowerContext& cx) {
  JMP_ASSIGN_OR_RETURN(int x, cx.In(0));
  JMP_ASSIGN_OR_RETURN(int update, cx.In(1));
  const Shape xs = cx.ShapeOf(x), us = cx.ShapeOf(update);
  if (xs.size() != us.size() || cx.op().operands.size() != xs.size() + 2)
    return cx.Unsupported("dynamic_update_slice operands do not match the rank");
  for (size_t d = 0; d < xs.size(); ++d)
    if (us[d] > xs[d]) return cx.Unsupported("update larger than the operand");
  int64_t update_elements = 1;
  for (int64_t d : us) update_elements *= d;
  if (update_elements == 0) {
    cx.Bind(0, x);
    return Status::Ok();
  }
  // Spread the update over x's shape (each x coordinate reads update[coord - start], clamped), then
  // select it inside the window.
  int spread = update;
  int mask = -1;
  for (size_t d = 0; d < xs.size(); ++d) {
    if (us[d] == xs[d]) continue;
    JMP_ASSIGN_OR_RETURN(int start, cx.In(d + 2));
    int s = ClampedStart(cx, start, xs[d], us[d]);
    Shape out = cx.ShapeOf(spread);
    out[d] = xs[d];
    int offset = cx.Binary(OpKind::kSubtract, Coordinates(cx, out, static_cast<int64_t>(d)), cx.BroadcastTo(s, out));
    int clamped = cx.Binary(OpKind::kMinimum, cx.Binary(OpKind::kMaximum, offset, cx.Splat(DType::kI32, out, 0)),
                            cx.Splat(DType::kI32, out, static_cast<double>(us[d] - 1)));
    spread = GatherAlongAxis(cx, spread, clamped, static_cast<int64_t>(d));
    int coord = Coordinates(cx, xs, static_cast<int64_t>(d));
    int lo = cx.BroadcastTo(s, xs);
    int hi = cx.Binary(OpKind::kAdd, lo, cx.Splat(DType::kI32, xs, static_cast<double>(us[d])));
    int inside = cx.Binary(OpKind::kLogicalAnd, cx.Compare(OpKind::kGreaterThanOrEqualTo, coord, lo),
                           cx.Compare(OpKind::kLessThan, coord, hi));
    mask = mask < 0 ? inside : cx.Binary(OpKind::kLogicalAnd, mask, inside);
  }
  cx.Bind(0, mask < 0 ? spread : cx.Select(mask, spread, x));
  return Status::Ok();
}

}  // namespace

int GatherAlongAxis(LowerContext& cx, int data, int indices, int64_t axis) {
  Shape shape = cx.ShapeOf(indices);
  Op& op = cx.Emit(OpKind::kGatherAlongAxis, {data, indices}, cx.DTypeOf(data), shape);
  op.axes = {axis};
  return op.outputs[0];
}

void RegisterDynamicSliceRules(std::map<std::string, LowerRule>& r) {
  RegisterRule(r, "stablehlo.dynamic_slice", &DynamicSlice);
  RegisterRule(r, "stablehlo.dynamic_update_slice", &DynamicUpdateSlice);
}

}  // namespace jmp::mps

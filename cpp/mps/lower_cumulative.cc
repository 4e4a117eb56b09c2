// reduce_window as a prefix scan (JAX's cumsum/cumprod/cummax/cummin, forward and reverse): a window
// spanning the whole axis, padded by n-1 on one side, stride 1 — MPSGraph's cumulative ops, O(n).
#include "mps/lower_families.h"
#include "mps/lower_window_common.h"

namespace jmp::mps {

namespace {

// Any associative body (cumlogsumexp's logaddexp, ...): a Hillis-Steele scan, log2(n) steps of the
// body applied to tensors; positions with nothing to combine keep their value, and the init value is
// folded in once at the end.
StatusOr<bool> LowerGeneralScan(LowerContext& cx, int x, int64_t axis, bool reverse) {
  const shlo::Op& op = cx.op();
  const shlo::Block& body = op.regions.at(0).blocks.at(0);
  for (const shlo::Op& b : body.ops)
    if (b.operands.empty() && b.name != "stablehlo.return") return false;  // scalar constants: not elementwise-safe
  const Shape shape = cx.ShapeOf(x);
  size_t a = static_cast<size_t>(axis);
  int64_t n = shape[a];
  Op& iota = cx.Emit(OpKind::kCoordinateAlongAxis, {}, DType::kI32, shape);
  iota.axes = {axis};
  int position = iota.outputs[0];
  int acc = x;
  for (int64_t step = 1; step < n; step *= 2) {
    // shifted[i] = acc[i - step] (or acc[i + step] in reverse); positions without one keep acc.
    Shape starts(shape.size(), 0), ends = shape;
    Shape lo(shape.size(), 0), hi(shape.size(), 0);
    if (reverse) {
      starts[a] = step;
      hi[a] = step;
    } else {
      ends[a] = n - step;
      lo[a] = step;
    }
    int piece = cx.Slice(acc, starts, ends);
    Op& pad = cx.Emit(OpKind::kPad, {piece}, cx.DTypeOf(acc), shape);
    pad.starts = lo;
    pad.ends = hi;
    int shifted = pad.outputs[0];
    std::vector<int> args = reverse ? std::vector<int>{acc, shifted} : std::vector<int>{shifted, acc};
    JMP_ASSIGN_OR_RETURN(std::vector<int> combined, cx.LowerBlockInline(body, args));
    if (combined.size() != 1) return false;
    int has = reverse ? cx.Compare(OpKind::kLessThan, position, cx.Splat(DType::kI32, shape, static_cast<double>(n - step)))
                      : cx.Compare(OpKind::kGreaterThanOrEqualTo, position, cx.Splat(DType::kI32, shape, static_cast<double>(step)));
    acc = cx.Select(has, combined[0], acc);
  }
  JMP_ASSIGN_OR_RETURN(int init, cx.In(1));
  JMP_ASSIGN_OR_RETURN(std::vector<int> with_init, cx.LowerBlockInline(body, {cx.BroadcastTo(init, shape), acc}));
  cx.Bind(0, with_init.at(0));
  return true;
}

}  // namespace

StatusOr<bool> TryLowerCumulative(LowerContext& cx) {
  const shlo::Op& op = cx.op();
  if (op.operands.size() != 2) return false;
  JMP_ASSIGN_OR_RETURN(int x, cx.In(0));
  const Shape shape = cx.ShapeOf(x);
  JMP_ASSIGN_OR_RETURN(WindowAttrs w, ReadWindowAttrs(cx, shape.size()));
  int64_t axis = -1;
  bool reverse = false;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (w.strides[d] != 1 || w.base_dilations[d] != 1 || w.window_dilations[d] != 1) return false;
    if (w.dims[d] == 1 && w.pad_low[d] == 0 && w.pad_high[d] == 0) continue;
    if (axis >= 0 || shape[d] < 2 || w.dims[d] != shape[d]) return false;
    if (w.pad_low[d] == shape[d] - 1 && w.pad_high[d] == 0) reverse = false;
    else if (w.pad_low[d] == 0 && w.pad_high[d] == shape[d] - 1) reverse = true;
    else return false;
    axis = static_cast<int64_t>(d);
  }
  if (axis < 0) return false;
  std::string monoid = WindowMonoid(op);
  DType t = cx.DTypeOf(x);
  if (t == DType::kBool || IsComplex(t)) return false;
  if (monoid.empty()) return LowerGeneralScan(cx, x, axis, reverse);
  OpKind kind;
  double identity;
  if (monoid == "stablehlo.add") kind = OpKind::kCumulativeSum, identity = 0;
  else if (monoid == "stablehlo.multiply") kind = OpKind::kCumulativeProduct, identity = 1;
  else if (monoid == "stablehlo.maximum") kind = OpKind::kCumulativeMaximum, identity = LowestValue(t);
  else if (monoid == "stablehlo.minimum") kind = OpKind::kCumulativeMinimum, identity = HighestValue(t);
  else return false;
  JMP_ASSIGN_OR_RETURN(int init, cx.In(1));
  double init_value;
  if (!cx.KnownSplat(init, &init_value) || init_value != identity) return false;
  Op& scan = cx.Emit(kind, {x}, t, shape);
  scan.axes = {axis};
  scan.int_attr = reverse ? 2 : 0;
  cx.Bind(0, scan.outputs[0]);
  return true;
}

}  // namespace jmp::mps
